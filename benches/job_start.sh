#!/usr/bin/env bash
# A job's start: process start, MPI start, compiling the job's programs, up to the first
# instruction, for ACES4's test jobs, as threads (2 workers + 1 server) and under `mpirun -n 3`,
# for each given sial binary (built with --features mpi), alternating; medians of RUNS
# (docs/benchmarks.md, "Compiling a job's programs side by side"). The run stops right after
# compiling: `--set` names a variable no program declares, which is checked against the
# compiled programs before anything runs.
#   benches/job_start.sh RUNS ACES4_DIR JOB[,JOB...] SIAL [SIAL...]
set -euo pipefail
runs=$1 dir=$(cd "$2" && pwd) jobs=$3; shift 3
includes=()
for d in scf cc utility eom eom/depreciated; do includes+=(-I "$dir/qm/$d"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
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
            times[$sial,$job,threads]+="$(timed "$sial" "${args[@]}") "
            times[$sial,$job,mpi]+="$(timed mpirun -n 3 "$sial" "${args[@]}") "
        done
    done
done
for sial in "$@"; do
    echo "== $sial"
    for job in "${job_list[@]}"; do
        th=$(tr ' ' '\n' <<< "${times[$sial,$job,threads]}" | grep . | median)
        mp=$(tr ' ' '\n' <<< "${times[$sial,$job,mpi]}" | grep . | median)
        printf '| %s | %.3f | %.3f |\n' "$job" "$th" "$mp"
    done
done
