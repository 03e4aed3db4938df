#!/usr/bin/env python3
"""Independent numpy model of ACES4's anti_symm_o / anti_symm_v (cc_utils.md §6.2), printing
the blocks pasted into chemistry/src/cc/eom.rs.

R[a,i,b,j] (column-major); g_d = global orbital numbers of dimension d.
anti_symm_o: R[a,j,b,i] = -R[a,i,b,j] for i < j; then R = 0 where g_i == g_j or g_a == g_b.
anti_symm_v: R[b,i,a,j] = -R[a,i,b,j] for a < b; then the same zeroing (general case).
Run: python3 anti_symm.py
"""
import numpy as np


def block(shape):
    n = int(np.prod(shape))
    return np.arange(1, n + 1, dtype=float).reshape(shape, order="F")


def zero(r, firsts):
    g = [f + np.arange(n) for f, n in zip(firsts, r.shape)]
    a, i, b, j = np.meshgrid(*g, indexing="ij")
    r[(i == j) | (a == b)] = 0.0
    return r


def anti_symm_o(r, firsts):
    r = r.copy()
    n = r.shape[1]
    for i in range(n):
        for j in range(i + 1, n):
            r[:, j, :, i] = -r[:, i, :, j]
    return zero(r, firsts)


def anti_symm_v(r, firsts):
    r = r.copy()
    n = r.shape[0]
    for a in range(n):
        for b in range(a + 1, n):
            r[b, :, a, :] = -r[a, :, b, :]
    return zero(r, firsts)


def show(name, r):
    print(f"# {name}")
    print(", ".join(f"{v:g}." for v in r.reshape(-1, order="F")))


if __name__ == "__main__":
    first = {1: 0, 2: 2}  # moa [2,2]: 0-based first orbital of segments 1, 2
    # notes example: R[2,1,2,1]
    show("notes o", anti_symm_o(block((2, 2, 2, 2)), [first[s] for s in (2, 1, 2, 1)]))
    show("notes v", anti_symm_v(block((2, 2, 2, 2)), [first[s] for s in (2, 1, 2, 1)]))
    show("o", anti_symm_o(block((2, 2, 2, 2)), [first[s] for s in (2, 1, 1, 1)]))
    show("v", anti_symm_v(block((2, 2, 2, 2)), [first[s] for s in (2, 1, 2, 2)]))
