#!/usr/bin/env bash
# What the MPI heartbeat costs (docs/benchmarks.md, "MPI heartbeat"): the same runs under
# mpirun with the heartbeat on (its default, MPI_THREAD_MULTIPLE and a beat thread per rank)
# and off (--heartbeat 0, MPI_THREAD_FUNNELED), alternating, medians of RUNS whole processes.
# Needs `cargo build --release --features mpi`; ACES4's ccsdpt_test runs when ACES4 is given.
#   benches/heartbeat.sh [RUNS] [ACES4_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
aces4=${2:-}
sial=target/release/sial

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

measure() {
    local label=$1 ranks=$2; shift 2
    local on=() off=()
    for _ in $(seq "$runs"); do
        for hb in 60s 0; do
            local t0 t1
            t0=$(date +%s.%N)
            mpirun -n "$ranks" "$sial" run "$@" -q --heartbeat "$hb" >/dev/null 2>&1
            t1=$(date +%s.%N)
            local t
            t=$(echo "$t1 - $t0" | bc)
            if [ "$hb" = 0 ]; then off+=("$t"); else on+=("$t"); fi
        done
    done
    local a b
    a=$(printf '%s\n' "${on[@]}" | median)
    b=$(printf '%s\n' "${off[@]}" | median)
    printf '%-40s on %.3f s  off %.3f s  on/off %.3f\n' "$label" "$a" "$b" "$(echo "$a / $b" | bc -l)"
}

measure "transfer, 1-element put+barrier+get x 2e5" 2 benches/transfer.sial \
    --set nrep=200000 --set mode=1 --segments aoindex=1
if [ -n "$aces4" ]; then
    q=$aces4/qm
    measure "ACES4 ccsdpt_test, mpirun -n 3" 3 "$aces4/test/ccsdpt_test.dat" \
        -I "$q/scf" -I "$q/cc" -I "$q/utility" -I "$q/eom" -I "$q/eom/depreciated"
fi
