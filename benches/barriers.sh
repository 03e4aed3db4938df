#!/usr/bin/env bash
# The cost of a sip_barrier (docs/benchmarks.md, "Barriers"): benches/barriers.sial with 1 and
# with COUNT barriers, 2 workers + 1 server as threads and under `mpirun -n 3`, for each sial
# binary (built with --features mpi) in turn, RUNS rounds; per binary and transport the median
# of (time with COUNT - time with 1) / (COUNT - 1), in microseconds. PROGRAM=benches/put_barriers.sial
# times sections in which each worker puts a block before the barrier.
#   benches/barriers.sh RUNS COUNT SIAL [SIAL...]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh
runs=$1 count=$2 program=${PROGRAM:-benches/barriers.sial}
shift 2
now() { date +%s.%N; }
declare -A per
for _ in $(seq "$runs"); do
    for s in "$@"; do
        for transport in threads mpi; do
            pre=()
            [ "$transport" = mpi ] && pre=(mpirun -n 3)
            declare -a t=()
            for n in 1 "$count"; do
                t0=$(now)
                "${pre[@]}" "$s" run "$program" -q --workers 2 --servers 1 --set nrep="$n" >/dev/null
                t[n]=$(echo "$(now) - $t0" | bc)
            done
            per[$s,$transport]+="$(echo "(${t[count]} - ${t[1]}) * 1000000 / ($count - 1)" | bc -l) "
        done
    done
done
for s in "$@"; do
    for transport in threads mpi; do
        printf '%s %s: %.1f µs per barrier (median of %s)\n' "$s" "$transport" \
            "$(tr ' ' '\n' <<< "${per[$s,$transport]}" | grep . | median)" "$runs"
    done
done
