#!/usr/bin/env python3
"""Times `sial check` (whole process) on generated programs of 1k, 10k and 100k lines.

Usage: cargo build --release && python3 compiler/benches/compile_time.py [path/to/sial]
Prints, per size: lines, best and median wall time of repeated runs, and microseconds per line."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from generate import program  # noqa: E402

sial = sys.argv[1] if len(sys.argv) > 1 else "target/release/sial"
with tempfile.TemporaryDirectory() as tmp:
    print(f"{'target lines':>12} {'lines':>7} {'best ms':>9} {'median ms':>10} {'us/line':>8}")
    for target in (1000, 10000, 100000):
        path = os.path.join(tmp, f"gen{target}.sial")
        text = program(target)
        with open(path, "w") as f:
            f.write(text)
        lines = text.count("\n")
        runs = 30 if target <= 10000 else 8
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            r = subprocess.run([sial, "check", path], capture_output=True)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                sys.exit(f"sial check failed on {lines} lines:\n{r.stderr.decode()[:2000]}")
        best, med = min(times) * 1e3, statistics.median(times) * 1e3
        print(f"{target:>12} {lines:>7} {best:>9.1f} {med:>10.1f} {med * 1e3 / lines:>8.2f}")
