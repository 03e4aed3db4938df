#!/usr/bin/env bash
# Per-block cost of filling a block, lending it to a special and of its full contraction to a
# scalar, over a local array of COUNT one-element blocks, and of a temp block made, filled and
# dropped in each iteration of a pardo (docs/benchmarks.md, "Many blocks: lent to a special,
# summed to a scalar", and "Gets and puts in fixed layouts"): benches/block_calls.sial in one
# process (1 worker, 1 server), each phase timed inside the run from `--profile`. Alternating
# the binaries, RUNS rounds; the median per phase in microseconds per block.
#   benches/block_calls.sh RUNS COUNT SIAL [SIAL...]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh
runs=$1 count=$2
shift 2
program=benches/block_calls.sial
phases=(fills lends dots temps)
declare -A lines=([fills]=$(phase_lines $program fills lends) [lends]=$(phase_lines $program lends dots)
    [dots]=$(phase_lines $program dots temps) [temps]=$(phase_lines $program temps end))
# Microseconds per block of the profile's rows for the lines in $1.
phase() { profile_seconds block_calls "$1" | awk -v n="$count" '{printf "%.4f\n", $1 / n * 1e6}'; }
declare -A us
for _ in $(seq "$runs"); do
    for b in "$@"; do
        profile=$("$b" run benches/block_calls.sial -q --profile --workers 1 --servers 1 \
            --set nrep="$count" --segments aoindex=1 2>&1 >/dev/null)
        for p in "${phases[@]}"; do us[$b:$p]+="$(phase "${lines[$p]}" <<< "$profile") "; done
    done
done
printf '| binary | fill µs | lend µs | dot µs | temp µs |\n|---|---:|---:|---:|---:|\n'
for b in "$@"; do
    printf '| %s |' "$b"
    for p in "${phases[@]}"; do printf ' %.3f |' "$(tr ' ' '\n' <<< "${us[$b:$p]}" | grep . | median)"; done
    printf '\n'
done
