#!/usr/bin/env bash
# Messages per second and bandwidth of sial's puts and gets under MPI against plain rsmpi
# (docs/benchmarks.md, "MPI message rates and bandwidth"). One worker and one server
# (mpirun -n 2). sial: benches/rates.sial, whose phases fill COUNT temp blocks, fill and put
# them, get and read them, and fill and read them; each phase's time is taken inside the run,
# from `--profile` (the seconds of the lines from the phase's pardo to the get after its
# barrier, which returns once the server has applied the phase's puts and claims), so the start
# and end of the processes do not enter.
# A put is "puts - fills", a get "gets - (dots - fills)". rsmpi: examples/raw_mpi.rs, the
# same number of blocks of the same size, one way (put) and as request and reply (get), and
# the put again with the receiver keeping every block, as a server does, and the get with the
# requester keeping every block, as a worker does until its barrier ("kept"). Alternating,
# RUNS rounds (each sial binary in turn, then rsmpi); the median of the rounds. One table per
# sial binary.
#   benches/mpi_rates.sh RUNS SIAL RAW_MPI [SIAL...]
# (SIAL built with --features mpi; RAW_MPI: target/release/examples/raw_mpi). MPI_RATES_SIZES
# ("BYTES:COUNT ...") measures other sizes than the default below.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh
runs=$1 raw=$3
sials=("$2" "${@:4}")
# bytes:count: 10^5 small blocks, 1 GiB of large ones
read -r -a sizes <<< "${MPI_RATES_SIZES:-8:100000 64:100000 512:100000 4096:50000 262144:4096 1048576:1024 4194304:256}"
program=benches/rates.sial
fills=$(phase_lines $program fills puts) puts=$(phase_lines $program puts gets)
gets=$(phase_lines $program gets dots) dots=$(phase_lines $program dots end)
phase() { profile_seconds rates "$1"; }
# Keyed by "binary number:bytes".
declare -A put get
declare -A rawput rawget rawkept rawgetkept
for _ in $(seq "$runs"); do
    for s in "${!sials[@]}"; do
        for sc in "${sizes[@]}"; do
            bytes=${sc%:*} count=${sc#*:}
            profile=$(mpirun -n 2 "${sials[s]}" run benches/rates.sial -q --profile --workers 1 --servers 1 \
                --set nrep="$count" --segments aoindex=$((bytes / 8)) 2>&1 >/dev/null)
            f=$(phase "$fills" <<< "$profile") p=$(phase "$puts" <<< "$profile")
            g=$(phase "$gets" <<< "$profile") d=$(phase "$dots" <<< "$profile")
            put[$s:$bytes]+="$(echo "$p - $f" | bc) "
            get[$s:$bytes]+="$(echo "$g - ($d - $f)" | bc) "
        done
    done
    while read -r bytes _ p g k gk; do
        rawput[$bytes]+="$p "
        rawget[$bytes]+="$g "
        rawkept[$bytes]+="$k "
        rawgetkept[$bytes]+="$gk "
    done < <(mpirun -n 2 "$raw" "${sizes[@]}")
done
of() { tr ' ' '\n' <<< "$1" | grep . | median; }
for s in "${!sials[@]}"; do
    printf '\n%s\n\n' "${sials[s]}"
    printf '| block | blocks | sial put | rsmpi put | ratio | rsmpi put, kept | ratio | sial get | rsmpi get | ratio | rsmpi get, kept | ratio |\n'
    printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    for sc in "${sizes[@]}"; do
        bytes=${sc%:*} count=${sc#*:}
        sp=$(of "${put[$s:$bytes]}") sg=$(of "${get[$s:$bytes]}")
        rp=$(of "${rawput[$bytes]}") rg=$(of "${rawget[$bytes]}") rk=$(of "${rawkept[$bytes]}")
        rgk=$(of "${rawgetkept[$bytes]}")
        # Below 256 KiB: messages per second; from 256 KiB: GB/s of block data.
        awk -v b="$bytes" -v n="$count" -v sp="$sp" -v sg="$sg" -v rp="$rp" -v rg="$rg" -v rk="$rk" -v rgk="$rgk" 'BEGIN {
            if (b < 262144) { f = n; unit = "msg/s"; fmt = "%.0f" } else { f = n * b / 1e9; unit = "GB/s"; fmt = "%.2f" }
            printf "| %d B | %d | " fmt " %s | " fmt " %s | %.2f | " fmt " %s | %.2f | " fmt " %s | " fmt " %s | %.2f | " fmt " %s | %.2f |\n",
                b, n, f / sp, unit, f / rp, unit, rp / sp, f / rk, unit, rk / sp, f / sg, unit, f / rg, unit, rg / sg, f / rgk, unit, rgk / sg
        }'
    done
done
