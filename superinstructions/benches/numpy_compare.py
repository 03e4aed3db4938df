#!/usr/bin/env python3
"""Times with numpy the operations that benches/kernels.rs times with criterion.

Usage:  pip install numpy
        python3 superinstructions/benches/numpy_compare.py            # BLAS threads as numpy sets them
        python3 superinstructions/benches/numpy_compare.py --threads 1

Blocks are column-major (Fortran order) like SIAL blocks, and every permuted copy is produced in
Fortran order (`np.transpose(a, perm).copy(order='F')`), so the bytes moved are the same as in the
Rust kernel. `perm` has the same meaning in both: result axis d is input axis perm[d].
Rates: permute in GiB/s counting one read and one write of every element (criterion's "GiB/s"),
contractions in GFLOP/s with 2*m*n*k flops. Each line reports the median of several timed batches
(and the best in brackets); the machine is shared, so expect noise.
"""

import argparse
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=0,
                   help="BLAS threads (0 = numpy's default: all cores)")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="approximate measuring time per case")
    return p.parse_args()


ARGS = parse()
if ARGS.threads > 0:
    # Must be set before numpy loads OpenBLAS.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402


def measure(fn, seconds):
    """Median and minimum seconds per call over batches totalling about `seconds`."""
    fn()  # warm up (allocations, page faults, BLAS thread start)
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    batch = max(1, int(0.1 / one))
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
    times.sort()
    return times[len(times) // 2], times[0]


def fortran_random(shape, seed):
    rng = np.random.default_rng(seed)
    return np.asfortranarray(rng.random(shape))


def report(name, med, best, rate, unit):
    print(f"{name:42s} {med * 1e3:9.3f} ms  [{best * 1e3:8.3f}]  "
          f"{rate(med):8.2f} {unit}  [{rate(best):7.2f}]")


def permutes(seconds):
    cases = [
        ("permute 2d 1000x1000 [1,0]", (1000, 1000), (1, 0)),
        ("permute 4d 40^4 [3,2,1,0]", (40, 40, 40, 40), (3, 2, 1, 0)),
        ("permute 4d 40^4 [1,0,3,2]", (40, 40, 40, 40), (1, 0, 3, 2)),
    ]
    for name, shape, perm in cases:
        a = fortran_random(shape, 1)
        nbytes = 2 * a.nbytes
        med, best = measure(lambda: np.transpose(a, perm).copy(order="F"), seconds)
        report(name, med, best, lambda t: nbytes / t / 2**30, "GiB/s")
    a = fortran_random((1000, 1000), 2)
    out = np.empty_like(a, order="F")
    med, best = measure(lambda: np.copyto(out, a), seconds)
    report("memcpy 1000x1000 (np.copyto)", med, best, lambda t: 2 * a.nbytes / t / 2**30, "GiB/s")


def contractions(seconds):
    n = 500
    a = fortran_random((n, n), 3)
    b = fortran_random((n, n), 4)
    flops = 2.0 * n**3
    med, best = measure(lambda: a @ b, seconds)
    report("matmul 500^3 (a @ b)", med, best, lambda t: flops / t / 1e9, "GFLOP/s")

    e = 24
    l = fortran_random((e,) * 4, 5)
    r = fortran_random((e,) * 4, 6)
    flops = 2.0 * e**6
    med, best = measure(lambda: np.tensordot(l, r, axes=([2, 3], [0, 1])), seconds)
    report("abij=abcd*cdij 24 (tensordot)", med, best, lambda t: flops / t / 1e9, "GFLOP/s")
    med, best = measure(
        lambda: np.tensordot(l, r, axes=([2, 3], [0, 1])).copy(order="F"), seconds)
    report("abij=abcd*cdij 24 (tensordot, F result)", med, best, lambda t: flops / t / 1e9,
           "GFLOP/s")
    med, best = measure(lambda: np.einsum("abcd,cdij->abij", l, r, optimize=True), seconds)
    report("abij=abcd*cdij 24 (einsum optimize)", med, best, lambda t: flops / t / 1e9,
           "GFLOP/s")
    # Every operand needs a permute: d[a,i,b,j] = l[c,a,d,b] * r[i,c,j,d].
    med, best = measure(
        lambda: np.einsum("cadb,icjd->aibj", l, r, optimize=True).copy(order="F"), seconds)
    report("aibj=cadb*icjd 24 (einsum opt, F result)", med, best, lambda t: flops / t / 1e9,
           "GFLOP/s")


def main():
    threads = ARGS.threads or "default"
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, "
          f"cores {os.cpu_count()}, BLAS threads {threads}")
    print(f"{'case':42s} {'median':>12s}  {'[best]':>10s}  {'rate':>14s}  [best]")
    permutes(ARGS.seconds)
    contractions(ARGS.seconds)


if __name__ == "__main__":
    main()
