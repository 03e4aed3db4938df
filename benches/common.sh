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
