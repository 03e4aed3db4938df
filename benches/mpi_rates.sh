#!/usr/bin/env bash
# Messages per second and bandwidth of sial's puts and gets under MPI against plain rsmpi
# (docs/benchmarks.md, "MPI message rates and bandwidth"). One worker and one server
# (mpirun -n 2). sial: benches/rates.sial, whose modes 0, 1, 2 fill a local array, then also put
# each of its COUNT blocks, then also get each one; the puts take mode 1 - mode 0, the gets
# mode 2 - mode 1 (start-up, filling and the end cancel). rsmpi: examples/raw_mpi.rs, the same
# number of blocks of the same size, one way (put) and as request and reply (get). Alternating,
# RUNS rounds; per round the differences, then their median.
#   benches/mpi_rates.sh RUNS SIAL RAW_MPI
# (SIAL built with --features mpi; RAW_MPI: target/release/examples/raw_mpi)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=$1 sial=$2 raw=$3
# bytes:count, 2 to 512 MiB moved per size
sizes=(8:100000 64:100000 512:100000 4096:50000 262144:1024 1048576:256 4194304:64)
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
declare -A put get rawput rawget
for _ in $(seq "$runs"); do
    for sc in "${sizes[@]}"; do
        bytes=${sc%:*} count=${sc#*:}
        declare -a t=()
        for mode in 0 1 2; do
            t0=$(now)
            mpirun -n 2 "$sial" run benches/rates.sial -q --workers 1 --servers 1 \
                --set nrep="$count" --set mode="$mode" --segments aoindex=$((bytes / 8)) >/dev/null
            t[mode]=$(echo "$(now) - $t0" | bc)
        done
        put[$bytes]+="$(echo "${t[1]} - ${t[0]}" | bc) "
        get[$bytes]+="$(echo "${t[2]} - ${t[1]}" | bc) "
    done
    while read -r bytes _ p g; do
        rawput[$bytes]+="$p "
        rawget[$bytes]+="$g "
    done < <(mpirun -n 2 "$raw" "${sizes[@]}")
done
of() { tr ' ' '\n' <<< "$1" | grep . | median; }
printf '| block | blocks | sial put | rsmpi put | ratio | sial get | rsmpi get | ratio |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for sc in "${sizes[@]}"; do
    bytes=${sc%:*} count=${sc#*:}
    sp=$(of "${put[$bytes]}") sg=$(of "${get[$bytes]}")
    rp=$(of "${rawput[$bytes]}") rg=$(of "${rawget[$bytes]}")
    # Below 256 KiB: messages per second; from 256 KiB: GB/s of block data.
    awk -v b="$bytes" -v n="$count" -v sp="$sp" -v sg="$sg" -v rp="$rp" -v rg="$rg" 'BEGIN {
        if (b < 262144) { f = n; unit = "msg/s"; fmt = "%.0f" } else { f = n * b / 1e9; unit = "GB/s"; fmt = "%.2f" }
        printf "| %d B | %d | " fmt " %s | " fmt " %s | %.2f | " fmt " %s | " fmt " %s | %.2f |\n",
            b, n, f / sp, unit, f / rp, unit, rp / sp, f / sg, unit, f / rg, unit, rg / sg
    }'
done
