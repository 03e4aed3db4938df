"""Reference values for gen_eigen_calc (linalg.rs tests): numpy's eig (LAPACK dgeev) of a
non-symmetric 3x3 Davidson-like matrix padded to 4x4 with a zero row and column, as the EOM
programs pass it. Right eigenvectors from eig(A); left eigenvectors u (u^H A = lambda u^H)
from eig(A^T) (conjugated; all real here). dgeev normalises each to unit 2-norm; the sign is
arbitrary, so the Rust test compares columns up to sign. Eigenvalues are sorted ascending with
|lambda| < 1e-12 moved last as 0.0 (ACES4's 999 key); the values here are distinct, so any
sort gives ACES4's quicksort order.

Run: python3 gen_eigen.py
"""
import numpy as np


def show(label, xs):
    print(label, "[" + ", ".join(repr(float(x)) for x in xs) + "]")


a = np.array([
    [4.0, 1.0, 2.0, 0.0],
    [0.5, 3.0, 1.0, 0.0],
    [0.2, 0.1, 1.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
])
w, vr = np.linalg.eig(a)
wl, vl = np.linalg.eig(a.T)
assert np.all(np.abs(w.imag) == 0) and np.all(np.abs(wl.imag) == 0)
w, wl, vr, vl = w.real, wl.real, vr.real, vl.real
keys = np.where(np.abs(w) < 1e-12, 999.0, w)
order = np.argsort(keys, kind="stable")
values = np.where(keys[order] == 999.0, 0.0, keys[order])
right = vr[:, order]
# match each left vector to its eigenvalue
lorder = [int(np.argmin(np.abs(wl - w[k]))) for k in order]
left = vl[:, lorder]
show("matrix (column-major)", a.flatten(order="F"))
show("values", values)
show("right (column-major)", right.flatten(order="F"))
show("left (column-major)", left.flatten(order="F"))
