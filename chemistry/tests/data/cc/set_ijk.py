#!/usr/bin/env python3
"""Independent model of ACES4's set_ijk_aaa / set_ijk_aab (cc_utils.md §5.2), printing the row
counts and rows pasted into chemistry/src/cc/triples.rs.

Chunk size: 5, less one per occupied segment (in order) whose size is <= the current value.
A segment of S orbitals is cut into ceil(S / chunk) chunks of floor(S / count) orbitals, the last
taking the rest. Rows (i, is, ie, j, js, je, k): i over segments/chunks, j over segments/chunks
with i <= j, k over segments (k >= j for aaa). Then the sentinel (-1 x 7) in a 10000 x 7 array.
Run: python3 set_ijk.py
"""
import numpy as np


def table(moa, baocc, eaocc, aab):
    sizes = moa[baocc - 1:eaocc]
    chunk = 5
    for s in sizes:
        if chunk >= s:
            chunk -= 1
    if chunk == 0:
        return None
    first = 1 + sum(moa[:baocc - 1])
    chunks = []
    for s in sizes:
        n = -(-s // chunk)
        each = s // n
        c = [(first + p * each, first + p * each + each - 1) for p in range(n - 1)]
        c.append((first + (n - 1) * each, first + s - 1))
        chunks.append(c)
        first += s
    rows = []
    nseg = len(sizes)
    for i in range(nseg):
        for (i0, i1) in chunks[i]:
            for j in range(nseg):
                for (j0, j1) in chunks[j]:
                    if i <= j:
                        for k in range(nseg):
                            if aab or j <= k:
                                rows.append((i + 1, i0, i1, j + 1, j0, j1, k + 1))
    return rows


def xijk(rows):
    """The 10000 x 7 array ACES4 writes (column-major data), or None if it does not fit."""
    if len(rows) + 1 > 10000:
        return None
    out = np.zeros((10000, 7))
    out[:len(rows)] = np.array(rows, dtype=float).reshape(-1, 7)
    out[len(rows)] = -1
    return out.reshape(-1, order="F")


def show(name, moa, baocc, eaocc, aab, picks):
    rows = table(moa, baocc, eaocc, aab)
    print(f"# {name}: {len(rows)} rows; fits in Xijk: {xijk(rows) is not None}")
    for p in picks:
        if p < len(rows):
            print(f"  row {p} (0-based): {list(rows[p])}")


if __name__ == "__main__":
    show("[5,5] aab", [5, 5, 8, 8], 1, 2, True, range(24))
    show("[5,5] aaa", [5, 5, 8, 8], 1, 2, False, range(16))
    show("[2]*5 aaa", [2, 2, 2, 2, 2, 9], 1, 5, False, [0, 1, 139])
    show("[2]*5 aab", [2, 2, 2, 2, 2, 9], 1, 5, True, [0, 299])
    show("[6]*12 aaa", [6] * 12, 1, 12, False, [0, 1221, 1455])
    show("[6]*12 aab", [6] * 12, 1, 12, True, [0])
    show("[51] aaa", [51, 10], 1, 1, False, [10, 120])
    show("[6]*20 aab", [6] * 20, 1, 20, True, [])
    print("# [1]*5:", table([1, 1, 1, 1, 1, 7], 1, 5, False))
