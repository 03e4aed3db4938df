#!/usr/bin/env python3
"""numpy counterpart of programs/water/tran_mp2.sial: the AO->MO four-index transformation of
the water cc-pVDZ AO integrals to (ia|jb), then the closed-shell MP2 correlation energy

    (ia|jb) = sum C[mu,i] C[nu,a] C[la,j] C[si,b] (mu nu|la si)      (einsum, optimize=True)
    E = sum_{ijab} (ia|jb) [2 (ia|jb) - (ib|ja)] / (e_i + e_j - e_a - e_b)

Usage:
    python3 benches/tran_mp2_numpy.py [--threads N]            # one run: load, transform, energy
    python3 benches/tran_mp2_numpy.py --threads N --bench 5    # also time it in process, best of 5

The thread count is set for OpenBLAS/MKL/OpenMP before numpy is imported (default 1, the same as
sial, whose worker and GEMM are single-threaded). benches/compare_tran_mp2.py times this script
and `sial run programs/water/tran_mp2.sial` as whole processes.
"""
import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--bench", type=int, default=0, help="in-process timings: best of N")
ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "..", "..", "shared", "data", "water-ccpvdz"))
args = ap.parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)

import json  # noqa: E402
import numpy as np  # noqa: E402

REFERENCE = -0.2040035637151954


def load(data):
    eri = np.load(os.path.join(data, "eri_ao.npy"))
    c = np.load(os.path.join(data, "mo_coeff.npy"))
    eps = np.load(os.path.join(data, "mo_energies.npy"))
    with open(os.path.join(data, "reference.json")) as f:
        nocc = json.load(f)["nocc"]
    return eri, c, eps, nocc


def mp2(eri, c, eps, nocc):
    co, cv = c[:, :nocc], c[:, nocc:]
    v = np.einsum("mi,na,mnls,lj,sb->iajb", co, cv, eri, co, cv, optimize=True)
    eo, ev = eps[:nocc], eps[nocc:]
    d = eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
    return float(np.sum(v * (2.0 * v - v.transpose(0, 3, 2, 1)) / d))


def main():
    e = mp2(*load(args.data))
    print(f"MP2 correlation energy (hartree): {e:.14f}")
    if abs(e - REFERENCE) > 1e-9:
        print(f"error: differs from the reference {REFERENCE}", file=sys.stderr)
        return 1
    if args.bench:
        def best(f):
            times = []
            for _ in range(args.bench):
                t = time.perf_counter()
                f()
                times.append(time.perf_counter() - t)
            return min(times), sorted(times)[len(times) // 2]
        inputs = load(args.data)
        for name, f in [("load + transform + energy", lambda: mp2(*load(args.data))),
                        ("transform + energy", lambda: mp2(*inputs))]:
            b, m = best(f)
            print(f"numpy {np.__version__}, {args.threads} thread(s), {name}: "
                  f"best {b * 1e3:.2f} ms, median {m * 1e3:.2f} ms (of {args.bench})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
