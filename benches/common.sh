# What the ACES4 bench scripts share; each sources it (`. "$(dirname "$0")/common.sh"`).

# The median of the numbers on standard input, one per line.
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# The -I options for ACES4's programs under $1/qm, in the array `includes`.
aces4_includes() {
    includes=()
    for d in scf cc utility eom eom/depreciated; do includes+=(-I "$1/qm/$d"); done
}

# A scratch folder `work`, removed at exit, as the current directory (jobs write files there).
in_scratch() {
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cd "$work"
}

# The line numbers of SIAL file $1 from the line "# $2" to the line "# $3" (a phase of a bench
# program), comma-separated.
phase_lines() {
    awk -v from="# $2" -v to="# $3" '$0 == from {on = 1; next} $0 == to {on = 0} on {print NR}' "$1" |
        paste -sd, -
}

# Seconds summed over the rows of a `--profile` (on standard input) for program $1's lines in
# $2 (comma-separated, as `phase_lines` gives them).
profile_seconds() {
    awk -v prog="$1" -v lines="$2" 'BEGIN {n = split(lines, l, ","); for (i = 1; i <= n; i++) want[prog ":" l[i]] = 1}
        ($1 in want) {s += $3} END {printf "%.6f\n", s}'
}
