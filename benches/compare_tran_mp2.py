#!/usr/bin/env python3
"""Times `sial run programs/water/tran_mp2.sial` and `python3 benches/tran_mp2_numpy.py` as whole
processes (start-up, reading the .npy files, the transformation, the MP2 energy, exit), best and
median of N runs each, both with the same thread count (OPENBLAS/OMP/MKL_NUM_THREADS; sial is
single-threaded anyway).

Usage (from the repository root, after `cargo build --release`):
    python3 benches/compare_tran_mp2.py [--threads 1] [--runs 5]
"""
import argparse
import os
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--runs", type=int, default=5)
args = ap.parse_args()

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
env = dict(os.environ)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    env[var] = str(args.threads)
commands = {
    "sial run programs/water/tran_mp2.sial":
        [os.path.join(root, "target", "release", "sial"), "run", "programs/water/tran_mp2.sial", "--quiet"]
        + (["--workers", "1", "--servers", "0"] if args.threads == 1
           else ["--workers", str(args.threads), "--servers", "1"]),
    "python3 benches/tran_mp2_numpy.py":
        [sys.executable, "benches/tran_mp2_numpy.py", "--threads", str(args.threads)],
    "python3 -c 'import numpy' (start-up only)":
        [sys.executable, "-c", "import numpy"],
}
results = {}
for name, cmd in commands.items():
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"{name} failed:\n{p.stdout}\n{p.stderr}")
    times.sort()
    results[name] = times
    print(f"{name:45s} best {times[0] * 1e3:8.2f} ms  median {times[len(times) // 2] * 1e3:8.2f} ms"
          f"  ({args.runs} runs, {args.threads} thread(s))")
s, n = (results[k][0] for k in list(commands)[:2])
print(f"numpy / sial (best): {n / s:.2f}x")
