#!/usr/bin/env bash
# ACES4's two message-stress test programs side by side with ACES4 (docs/benchmarks.md, "ACES4's
# message-stress tests against ACES4"): `put_accumulate_stress` (1,280 `put +=` of small blocks
# from a pardo, then a barrier and 16 gets; norb 4, kmax 20, segments 2,3,2,2 as ACES4's own
# test sets them) and `message_number_wraparound_test` (80,000 one-element puts, then a barrier).
# Both are taken from a fetched ACES4 git directory at run time (they are ACES4's, not ours) and
# compiled by ACES4's SIAL compiler for ACES4, by sial for sial. Per round, alternating: ACES4
# under `mpirun -n 3` (2 workers, 1 server), sial under `mpirun -n 3` and sial as threads (2
# workers + 1 server); wall time of whole processes, then the median per program and runner.
#   benches/aces4_message_tests.sh RUNS SIAL ACES4 COMPILER_JAR ACES4_GIT_DIR
# (SIAL built with --features mpi; ACES4 and the jar from ../shared/aces4/tools/build-aces4.sh:
# $ACES4_WORK/build-mpi/aces4 and $ACES4_WORK/src/compiler/SialCompiler.jar)
set -euo pipefail
runs=$1 sial=$(realpath "$2") aces4=$(realpath "$3") jar=$(realpath "$4") git=$5
. "$(dirname "$0")/common.sh"
in_scratch
programs=(put_accumulate_stress message_number_wraparound_test)
for p in "${programs[@]}"; do
    git --git-dir="$git" show "HEAD:src/sialx/test/$p.sialx" > "$p.sialx"
    java -jar "$jar" -sp . "$p.sialx" >/dev/null
done
printf '{"SialPrograms":["put_accumulate_stress.siox"],"PredefinedIntegers":{"norb":4,"kmax":20},"SegmentSizeArrays":{"aoindex":[2,3,2,2]}}\n' > put_accumulate_stress.json
printf '{"SialPrograms":["message_number_wraparound_test.siox"],"PredefinedIntegers":{},"SegmentSizeArrays":{}}\n' > message_number_wraparound_test.json
args_put_accumulate_stress=(--set norb=4 --set kmax=20 --segments aoindex=2,3,2,2)
args_message_number_wraparound_test=()
now() { date +%s.%N; }
declare -A times
for _ in $(seq "$runs"); do
    for p in "${programs[@]}"; do
        declare -n extra="args_$p"
        t0=$(now)
        mpirun -n 3 "$aces4" -j "$p.json" -s . >/dev/null 2>&1
        times[$p:aces4]+="$(echo "$(now) - $t0" | bc) "
        t0=$(now)
        mpirun -n 3 "$sial" run "$p.sialx" -q --workers 2 --servers 1 "${extra[@]}" >/dev/null
        times[$p:mpirun]+="$(echo "$(now) - $t0" | bc) "
        t0=$(now)
        "$sial" run "$p.sialx" -q --workers 2 --servers 1 "${extra[@]}" >/dev/null
        times[$p:threads]+="$(echo "$(now) - $t0" | bc) "
        unset -n extra
    done
done
of() { tr ' ' '\n' <<< "$1" | grep . | median; }
printf '| program | ACES4 mpirun -n 3 | sial mpirun -n 3 | sial threads | ACES4 / sial mpirun | sial mpirun / threads |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for p in "${programs[@]}"; do
    a=$(of "${times[$p:aces4]}") m=$(of "${times[$p:mpirun]}") t=$(of "${times[$p:threads]}")
    awk -v p="$p" -v a="$a" -v m="$m" -v t="$t" \
        'BEGIN { printf "| %s | %.3f s | %.3f s | %.3f s | %.2f | %.2f |\n", p, a, m, t, a / m, m / t }'
done
