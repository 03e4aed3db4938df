#!/usr/bin/env bash
# Time and peak memory of `sial run --dump` (and `--dump-arrays`) on a distributed array of
# SIZE = (NSEG x 500)^2 doubles (docs/benchmarks.md, "Dump of large arrays"): the run alone,
# the run with --dump, the run with --dump-arrays; for each given sial binary (to compare
# versions side by side), alternating, medians of RUNS.
#   benches/dump.sh NSEG RUNS SIAL [SIAL...]
set -euo pipefail
cd "$(dirname "$0")/.."
nseg=$1 runs=$2; shift 2
segments=$(printf '500,%.0s' $(seq "$nseg")); segments=${segments%,}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declare -A secs mem
for _ in $(seq "$runs"); do
    for sial in "$@"; do
        for what in none dump arrays; do
            case $what in
                none) out=() ;;
                dump) out=(--dump "$work/d.json") ;;
                arrays) "$sial" run --help | grep -q dump-arrays || continue
                        out=(--dump-arrays "$work/arrays") ;;
            esac
            /usr/bin/time -f "%e %M" -o "$work/t" "$sial" run benches/dump_big.sial -q \
                --workers 2 --servers 1 --set nseg="$nseg" --segments aoindex="$segments" \
                "${out[@]}" >/dev/null
            read -r t m < "$work/t"
            secs[$sial,$what]+="$t "; mem[$sial,$what]+="$m "
            rm -rf "$work/d.json" "$work/arrays"
        done
    done
done
gib=$(echo "scale=2; ($nseg * 500)^2 * 8 / 2^30" | bc)
echo "array: ($nseg x 500)^2 doubles = $gib GiB; medians of $runs"
for sial in "$@"; do
    for what in none dump arrays; do
        [ -n "${secs[$sial,$what]:-}" ] || continue
        t=$(echo "${secs[$sial,$what]}" | tr ' ' '\n' | grep . | median)
        m=$(echo "${mem[$sial,$what]}" | tr ' ' '\n' | grep . | median)
        printf '%-32s %-7s %8.2f s %8.0f MiB peak\n' "$sial" "$what" "$t" "$((m / 1024))"
    done
done
