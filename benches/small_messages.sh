#!/usr/bin/env bash
# Many small messages under MPI (docs/benchmarks.md, "Small messages under MPI"):
# benches/small_messages.sial (4 x NREP puts of 1-element blocks, a barrier, as many gets; 2
# workers + 1 server) and benches/transfer.sial (put + barrier + get of one block, 4 x NREP
# times; 1 worker + 1 server) as threads and under mpirun (the same ranks as processes), for
# each given sial binary (built with --features mpi), alternating, medians of RUNS.
#   benches/small_messages.sh RUNS NREP SIAL [SIAL...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=$1 nrep=$2; shift 2
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declare -A times
cases=(small transfer-8B transfer-4KiB)
args_of() {
    case $1 in
        small) echo "benches/small_messages.sial --set nrep=$nrep --segments aoindex=1,1,1,1" ;;
        transfer-8B) echo "benches/transfer.sial --set nrep=$((nrep * 4)) --set mode=1 --segments aoindex=1" ;;
        transfer-4KiB) echo "benches/transfer.sial --set nrep=$((nrep * 4)) --set mode=1 --segments aoindex=23" ;;
    esac
}
for _ in $(seq "$runs"); do
    for sial in "$@"; do
        for c in "${cases[@]}"; do
            read -ra a <<< "$(args_of "$c")"
            w=2
            [ "$c" = small ] || w=1
            for how in threads mpi; do
                t0=$(date +%s.%N)
                if [ "$how" = threads ]; then
                    "$sial" run "${a[@]}" -q --workers "$w" --servers 1 >/dev/null
                else
                    mpirun -n $((w + 1)) "$sial" run "${a[@]}" -q --workers "$w" --servers 1 >/dev/null
                fi
                t1=$(date +%s.%N)
                times[$sial,$c,$how]+="$(echo "$t1 - $t0" | bc) "
            done
        done
    done
done
for sial in "$@"; do
    for c in "${cases[@]}"; do
        th=$(echo "${times[$sial,$c,threads]}" | tr ' ' '\n' | grep . | median)
        mp=$(echo "${times[$sial,$c,mpi]}" | tr ' ' '\n' | grep . | median)
        printf '%-24s %-14s threads %.3f s  mpirun %.3f s  mpi/threads %.2f\n' \
            "$sial" "$c" "$th" "$mp" "$(echo "$mp / $th" | bc -l)"
    done
done
