#!/usr/bin/env python3
"""CCSD(T) (or --method ccsd, or scf) of water/cc-pVDZ (or --molecule, --basis): sial (ACES4's programs on a `sial
setup` job) against PySCF, as whole processes, alternating, median of N runs each, with the same
thread count for both (OPENBLAS/OMP/MKL/RAYON_NUM_THREADS). Several sial binaries (--sial, given
more than once) run in turn in every round, to compare versions side by side.

Usage (repository root, after `cargo build --release`; pip install pyscf):
    python3 benches/compare_pyscf.py --aces4 ../shared/aces4 [--runs 5] [--threads 1]
sial runs with --workers 1 --servers 0 for --threads 1, else --workers T --servers 1.
The PySCF side builds the same molecule with the same basis data (tests/setup/pyscf_references.py).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--aces4", required=True, help="folder with ACES4's qm/ programs")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--molecule", default="tests/setup/water.xyz")
ap.add_argument("--basis", default="cc-pvdz")
ap.add_argument("--method", default="ccsd(t)", choices=["scf", "ccsd", "ccsd(t)"])
ap.add_argument("--sial", action="append", help="sial binary (default target/release/sial)")
args = ap.parse_args()

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sials = args.sial or [os.path.join(root, "target", "release", "sial")]
sial = sials[0]
env = dict(os.environ)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    env[var] = str(args.threads)
work = tempfile.mkdtemp(prefix="sial-bench-")
job = os.path.join(work, "job.json")
subprocess.run([sial, "setup", "--molecule", args.molecule, "--basis", args.basis,
                "--method", args.method, "-o", job], cwd=root, check=True, capture_output=True)
ranks = ["--workers", "1", "--servers", "0"] if args.threads == 1 else \
        ["--workers", str(args.threads), "--servers", "1"]
sial_args = ["run", job, "-q", "--results", os.path.join(work, "r.json")] + ranks
for d in ("scf", "cc", "utility"):
    sial_args += ["-I", os.path.join(args.aces4, "qm", d)]
pyscf_src = f"""
import sys
sys.argv = ['x']
src = open({os.path.join(root, 'tests/setup/pyscf_references.py')!r}).read()
src = src[:src.index('out = {{"pyscf"')]
g = {{'__file__': {os.path.join(root, 'tests/setup/pyscf_references.py')!r}}}
exec(src, g)
from pyscf import scf, cc
mol = g['molecule']({os.path.join(root, args.molecule)!r}, {args.basis!r}, False)
mf = scf.RHF(mol); mf.conv_tol = 1e-12; mf.kernel()
if {args.method == "scf"!r}:
    print(mf.e_tot)
    sys.exit(0)
c = cc.CCSD(mf); c.conv_tol = 1e-10; c.kernel()
et = c.ccsd_t() if {args.method == "ccsd(t)"!r} else 0.0
print(mf.e_tot + c.e_corr + et)
"""
commands = {(f"sial{i}" if len(sials) > 1 else "sial"): [b] + sial_args for i, b in enumerate(sials)}
commands["pyscf"] = [sys.executable, "-c", pyscf_src]
times = {k: [] for k in commands}
for _ in range(args.runs):
    for name, cmd in commands.items():
        t = time.perf_counter()
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        times[name].append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"{name} failed: {p.stderr[-2000:]}")
for name, ts in times.items():
    print(f"{name:6} median {statistics.median(ts):7.3f} s  best {min(ts):7.3f} s  ({args.runs} runs)")
for name in commands:
    if name != "pyscf":
        ratio = statistics.median(times[name]) / statistics.median(times["pyscf"])
        print(f"{name} / pyscf (medians): {ratio:.2f}")
