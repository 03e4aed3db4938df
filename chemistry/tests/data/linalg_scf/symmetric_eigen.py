"""Reference values for eigen_calc / eigen_calc_sqr_inv (linalg.rs tests).

The 4x4 matrix is given column-major with garbage (100+k) in its strict upper triangle: ACES4's
dsyev('L') reads only the lower triangle, so the reference is numpy's eigh of the matrix
symmetrised from the lower triangle. ACES4's phase rule (first component with |v| > 1e-5 made
positive) is applied here. The overlap case drops eigenvalues below 10^-lindep_tol and re-sorts
as described in /work/notes/scf_linalg.md section 3 (keys 1/sqrt(s), dropped ones 999, sorted
ascending; ties do not occur in this case).

Run: python3 symmetric_eigen.py
"""
import numpy as np

np.set_printoptions(precision=17)


def phase(v):
    v = v.copy()
    for j in range(v.shape[1]):
        for i in range(v.shape[0]):
            if abs(v[i, j]) > 1e-5:
                if v[i, j] < 0:
                    v[:, j] = -v[:, j]
                break
    return v


def show(label, xs):
    print(label, "[" + ", ".join(repr(float(x)) for x in xs) + "]")


lower = np.array([
    [4.0, 0.0, 0.0, 0.0],
    [1.0, 3.0, 0.0, 0.0],
    [-2.0, 0.5, 1.0, 0.0],
    [0.25, -1.0, 0.75, -2.0],
])
a = np.tril(lower) + np.tril(lower, -1).T
w, v = np.linalg.eigh(a)
v = phase(v)
print("fock (symmetric from lower triangle)")
show("values", w)
show("vectors (column-major)", v.flatten(order="F"))

# An overlap-like matrix with one near-dependency: three nearly parallel functions.
s = np.array([
    [1.0, 0.995, 0.2, 0.1],
    [0.995, 1.0, 0.21, 0.1],
    [0.2, 0.21, 1.0, 0.3],
    [0.1, 0.1, 0.3, 1.0],
])
w, u = np.linalg.eigh(s)
u = phase(u)
print("overlap")
show("overlap (column-major)", s.flatten(order="F"))
show("eigenvalues", w)
for tol in (2, 9):
    t = 10.0 ** (-tol)
    d = np.array([1.0 / np.sqrt(x) if x >= t else 0.0 for x in w])
    dropped = int(np.sum(d == 0.0))
    if dropped:
        keys = np.where(d == 0.0, 999.0, d)
        order = np.argsort(keys, kind="stable")
        d = np.where(keys[order] == 999.0, 0.0, keys[order])
        uu = u[:, order]
    else:
        uu = u
    print(f"lindep_tol = {tol}: dropped {dropped}")
    show("  diagonal", d)
    show("  vectors (column-major)", uu.flatten(order="F"))
