#!/usr/bin/env python3
"""ACES4's own test jobs, side by side: ACES4 (`mpirun -n 3 aces4 -d JOB.dat -s SIOX`) and sial on
the same job file and machine, in one process, as threads (2 workers, 1 server) and under
`mpirun -n 3`. For each job the runs alternate: ACES4 once, then each sial configuration; sial's
figure is the median of --runs runs. Wall time of whole processes (start-up included).

ACES4 is built with its own script (`../shared/aces4/tools/build-aces4.sh`, MPI build) and its
programs compiled with its SIAL compiler into one folder of .siox files:
    java -jar SRC/compiler/SialCompiler.jar -sp . NAME.sialx     (for every program of the jobs)
sial is built with `cargo build --release --features mpi` and reads the .sialx sources.

Usage (repository root):
    python3 benches/aces4_jobs.py --aces4 BUILD/aces4 --siox SIOX_DIR --shared ../shared/aces4 \
        [--runs 3] [--jobs second_ccsdpt_test,cis_test]
Prints one markdown table row per job (seconds) and the ratios ACES4 / sial.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

JOBS = [
    "second_ccsdpt_test", "rlambda_test", "lamccsdpt_test", "lccd_frozencore_test", "lccd_test",
    "lccsd_test", "cis_test", "scf_rhf_aguess_test", "scf_uhf_triplet_aguess_test",
    "scf_uhfrhf_aguess_test", "eom_test", "eom_ccsd_water_test", "eom_ccsd_water_right_test",
    "lindep_test", "eom_lccd_test", "eom_lccsd_test", "eom_mp2_test",
]
QM_DIRS = ["scf", "cc", "utility", "eom", "eom/depreciated"]

ap = argparse.ArgumentParser()
ap.add_argument("--aces4", required=True, help="ACES4's MPI binary")
ap.add_argument("--siox", required=True, help="folder of ACES4's compiled programs")
ap.add_argument("--shared", required=True, help="folder with ACES4's test/*.dat and qm/")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--jobs", default=",".join(JOBS))
args = ap.parse_args()

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sial = os.path.join(root, "target", "release", "sial")
work = tempfile.mkdtemp(prefix="sial-aces4-bench-")


def timed(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return dt


def sial_cmd(job, launcher, ranks):
    cmd = launcher + [sial, "run", os.path.join(args.shared, "test", job + ".dat"), "-q"] + ranks
    for d in QM_DIRS:
        cmd += ["-I", os.path.join(args.shared, "qm", d)]
    return cmd


configs = {
    "sial 1 process": ([], ["--workers", "1", "--servers", "0"]),
    "sial 2+1 threads": ([], ["--workers", "2", "--servers", "1"]),
    "sial mpirun -n 3": (["mpirun", "-n", "3"], []),
}
print("| job | ACES4 mpirun -n 3 | " + " | ".join(configs) + " | ACES4 / sial (1 process, threads, MPI) |")
print("|---|---:|" + "---:|" * len(configs) + "---|")
for job in args.jobs.split(","):
    jobdir = os.path.join(work, job)
    os.makedirs(jobdir, exist_ok=True)
    shutil.copy(os.path.join(args.shared, "test", job + ".dat"), jobdir)
    aces4 = timed(["mpirun", "-n", "3", args.aces4, "-d", job + ".dat", "-s", args.siox], jobdir)
    times = {name: [] for name in configs}
    for _ in range(args.runs):
        for name, (launcher, ranks) in configs.items():
            times[name].append(timed(sial_cmd(job, launcher, ranks), jobdir))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    ratios = ", ".join(f"{aces4 / m:.0f}x" for m in med.values())
    print(f"| {job} | {aces4:.1f} | " + " | ".join(f"{m:.2f}" for m in med.values()) + f" | {ratios} |",
          flush=True)
shutil.rmtree(work, ignore_errors=True)
