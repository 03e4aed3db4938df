"""Reference DIIS coefficients for compute_diis (linalg.rs tests): three error vectors give
B[i,j] = e_i . e_j; numpy solves the bordered system [[B, -1], [-1^T, 0]] x = (0, 0, 0, -1).
The Rust test stores B in the upper triangle of a 5x5 static array (the last two slots empty)
with garbage in the lower triangle.

Run: python3 diis.py
"""
import numpy as np


def show(label, xs):
    print(label, "[" + ", ".join(repr(float(x)) for x in xs) + "]")


e = np.array([
    [0.30, -0.12, 0.05, 0.01],
    [0.10, -0.02, 0.04, -0.03],
    [-0.04, 0.03, 0.01, 0.02],
])
b = e @ e.T
k = b.shape[0]
system = np.zeros((k + 1, k + 1))
system[:k, :k] = b
system[:k, k] = -1.0
system[k, :k] = -1.0
rhs = np.zeros(k + 1)
rhs[k] = -1.0
x = np.linalg.solve(system, rhs)
show("B (column-major)", b.flatten(order="F"))
show("coefficients and multiplier", x)
print("sum of coefficients", repr(float(np.sum(x[:k]))))
