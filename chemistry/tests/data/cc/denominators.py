#!/usr/bin/env python3
"""Independent numpy model of ACES4's energy_denominator_rhf / energy_ty_denominator_rhf
(cc_utils.md §1-§2), printing the values pasted into chemistry/src/cc/denominators.rs.

Each element of a block T (column-major, first index fastest) is divided by
(sum of the orbital energies of the even positions) - (those of the odd positions), associated
as ((((e2 + e4) + e6) - e1) - e3) - e5, plus the shift for the ty variant.
Run: python3 denominators.py
"""
import numpy as np

FOCK = np.array([-20.5, -1.3, -0.7, -0.55, 0.21, 0.33, 1.7])


def first_orbitals(table):
    """0-based first orbital of each segment (segment 1 first)."""
    return np.concatenate(([0], np.cumsum(table)[:-1]))


def ramp(n):
    return 1.0 + 0.1 * np.arange(n, dtype=np.float64)


def energies(firsts, shape):
    """Fock diagonal per dimension; firsts = 0-based first orbital of each dimension."""
    return [FOCK[f:f + n] for f, n in zip(firsts, shape)]


def grid(e):
    """Broadcast per-dimension energy vectors to the block's shape (axis d = dimension d)."""
    r = len(e)
    out = []
    for d, v in enumerate(e):
        s = [1] * r
        s[d] = len(v)
        out.append(v.reshape(s))
    return out


def denominator(e, shift=None):
    g = grid(e)
    if len(g) == 2:
        d = g[1] - g[0]
    elif len(g) == 4:
        d = ((g[1] + g[3]) - g[0]) - g[2]
    else:
        d = ((((g[1] + g[3]) + g[5]) - g[0]) - g[2]) - g[4]
    if shift is not None:
        d = d + shift
    return d


def case(name, firsts, shape, shift=None):
    n = int(np.prod(shape))
    t = ramp(n).reshape(shape, order="F")
    d = denominator(energies(firsts, shape), shift)
    out = (t / d).reshape(-1, order="F")
    print(f"# {name}")
    for v in out:
        print(f"{float(v)!r},")


if __name__ == "__main__":
    s = first_orbitals([1, 3, 3])
    # rank 2: t[3,2] (virtual segment 3, occupied segment 2)
    case("rank2", [s[2], s[1]], [3, 3])
    # rank 4: t[3,2,3,1]
    case("rank4", [s[2], s[1], s[2], s[0]], [3, 3, 3, 1])
    # ty: the same block, shift 0.375
    case("ty", [s[2], s[1], s[2], s[0]], [3, 3, 3, 1], shift=0.375)
    # rank 6, table [1,4,2]: t[a=3, ii=3, a1=3, jj=5, a2=3, k1=2]; simple ii, jj: offset v-1
    s = first_orbitals([1, 4, 2])
    case("rank6", [s[2], 3 - 1, s[2], 5 - 1, s[2], s[1]], [2, 1, 2, 1, 2, 4])
