#!/usr/bin/env bash
# The server's time for accumulated puts (docs/benchmarks.md, "Hot loops compiled for the CPU's
# vector width"): benches/accumulate.sial with 8 blocks of 128 x 128 added 1000 times each, one
# worker and one server as threads; per binary the server's busy seconds from --stats, RUNS
# rounds alternating between the binaries, then the median per binary.
#   benches/accumulate.sh RUNS SIAL [SIAL...]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh
runs=$1
shift
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
declare -A busy
for _ in $(seq "$runs"); do
    for s in "$@"; do
        "$s" run benches/accumulate.sial -q --workers 1 --servers 1 --set nrep=8 --set passes=1000 \
            --segments aoindex=128 --stats "$stats" >/dev/null
        busy[$s]+="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["servers"][0]["busy_seconds"])' "$stats") "
    done
done
for s in "$@"; do
    printf '%s: server busy %s s (median of %s; runs: %s)\n' "$s" \
        "$(tr ' ' '\n' <<< "${busy[$s]}" | grep . | median)" "$runs" "${busy[$s]}"
done
