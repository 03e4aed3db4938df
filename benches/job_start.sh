#!/usr/bin/env bash
# A job's start up to its first instruction (process start, setup, compiling the job's
# programs) for ACES4's test jobs, as threads (2 workers + 1 server), for each given sial
# binary, alternating; medians of RUNS (docs/benchmarks.md, "Compiling a job's programs side by
# side"). The run stops right after compiling: `--set` names a variable no program declares,
# which is checked against the compiled programs before anything runs. (Under mpirun the ranks
# compile after MPI has started, and versions before that stop before it: compare whole jobs
# there, with benches/aces4_mpi_threads.sh.)
#   benches/job_start.sh RUNS ACES4_DIR JOB[,JOB...] SIAL [SIAL...]
set -euo pipefail
runs=$1 dir=$(cd "$2" && pwd) jobs=$3; shift 3
. "$(dirname "$0")/common.sh"
aces4_includes "$dir"
in_scratch
timed() {
    local t0 t1
    t0=$(date +%s.%N)
    if "$@" >/dev/null 2>"$work/err"; then
        echo "UNEXPECTED SUCCESS: $*" >&2; exit 1
    fi
    grep -q "no program of the job declares" "$work/err" || { cat "$work/err" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
declare -A times
IFS=, read -ra job_list <<< "$jobs"
for job in "${job_list[@]}"; do
    for _ in $(seq "$runs"); do
        for sial in "$@"; do
            args=(run "$dir/test/$job.dat" "${includes[@]}" -q --workers 2 --servers 1
                  --set no_program_declares_this=1)
            times[$sial,$job]+="$(timed "$sial" "${args[@]}") "
        done
    done
done
for sial in "$@"; do
    echo "== $sial"
    for job in "${job_list[@]}"; do
        printf '| %s | %.3f |\n' "$job" "$(tr ' ' '\n' <<< "${times[$sial,$job]}" | grep . | median)"
    done
done
