#!/usr/bin/env bash
# ACES4's test jobs (the side-by-side set of benches/aces4_jobs.py, without eom_ccsd_water_test,
# which alone takes longer than all the others) with 2 workers + 1 server as threads and under
# `mpirun -n 3`, for each given sial binary (built with --features mpi), alternating; prints the
# median of RUNS per job and transport, and mpi/threads (docs/benchmarks.md, "ACES4's jobs under
# MPI against threads").
#   benches/aces4_mpi_threads.sh RUNS ACES4_DIR SIAL [SIAL...]
set -euo pipefail
runs=$1 dir=$(cd "$2" && pwd); shift 2
. "$(dirname "$0")/common.sh"
aces4_includes "$dir"
jobs=(second_ccsdpt_test rlambda_test lamccsdpt_test lccd_frozencore_test lccd_test lccsd_test
      cis_test scf_rhf_aguess_test scf_uhf_triplet_aguess_test scf_uhfrhf_aguess_test eom_test
      eom_ccsd_water_right_test lindep_test eom_lccd_test eom_lccsd_test eom_mp2_test)
[ -n "${JOBS:-}" ] && read -ra jobs <<< "$JOBS"
workers=${WORKERS:-2} servers=${SERVERS:-1}
in_scratch
timed() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>"$work/err" || { echo "FAILED: $*" >&2; cat "$work/err" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
declare -A times
for job in "${jobs[@]}"; do
    for _ in $(seq "$runs"); do
        for sial in "$@"; do
            args=(run "$dir/test/$job.dat" "${includes[@]}" -q --workers "$workers" --servers "$servers")
            times[$sial,$job,threads]+="$(timed "$sial" "${args[@]}") "
            times[$sial,$job,mpi]+="$(timed mpirun -n $((workers + servers)) "$sial" "${args[@]}") "
        done
    done
done
for sial in "$@"; do
    echo "== $sial"
    for job in "${jobs[@]}"; do
        th=$(tr ' ' '\n' <<< "${times[$sial,$job,threads]}" | grep . | median)
        mp=$(tr ' ' '\n' <<< "${times[$sial,$job,mpi]}" | grep . | median)
        printf '| %s | %.2f | %.2f | %.2f |\n' "$job" "$th" "$mp" "$(echo "$mp / $th" | bc -l)"
    done
done
