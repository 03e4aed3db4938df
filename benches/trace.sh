#!/usr/bin/env bash
# What --trace costs (docs/benchmarks.md, "Timeline"): the same run with an earlier sial
# (OLD, before tracing existed), this one with tracing off, and with --trace on (default
# --trace-min 100us), alternating, medians of RUNS whole processes.
#   benches/trace.sh RUNS OLD NEW ACES4_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
runs=$1 old=$2 new=$3 aces4=$4
q=$aces4/qm
inc=(-I "$q/scf" -I "$q/cc" -I "$q/utility" -I "$q/eom" -I "$q/eom/depreciated")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
measure() {
    local label=$1; shift
    local a=() b=() c=()
    for _ in $(seq "$runs"); do
        for which in old off on; do
            local bin=$new extra=()
            [ "$which" = old ] && bin=$old
            [ "$which" = on ] && extra=(--trace "$work/t.json")
            local t0 t1
            t0=$(date +%s.%N)
            "$bin" run "$@" -q "${extra[@]}" >/dev/null 2>&1
            t1=$(date +%s.%N)
            local t; t=$(echo "$t1 - $t0" | bc)
            case $which in old) a+=("$t");; off) b+=("$t");; on) c+=("$t");; esac
        done
    done
    local ma mb mc
    ma=$(printf '%s\n' "${a[@]}" | median); mb=$(printf '%s\n' "${b[@]}" | median); mc=$(printf '%s\n' "${c[@]}" | median)
    printf '%-44s old %.3f s  off %.3f s  on %.3f s  off/old %.3f  on/off %.3f\n' \
        "$label" "$ma" "$mb" "$mc" "$(echo "$mb / $ma" | bc -l)" "$(echo "$mc / $mb" | bc -l)"
}
measure "ACES4 ccsdpt_test, one process" "$aces4/test/ccsdpt_test.dat" "${inc[@]}" --workers 1 --servers 0
measure "ACES4 ccsdpt_test, 2 workers + 1 server" "$aces4/test/ccsdpt_test.dat" "${inc[@]}" --workers 2 --servers 1
measure "water (SCF+MP2), 2 workers + 1 server" programs/water/water.json --workers 2 --servers 1
