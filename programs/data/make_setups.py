#!/usr/bin/env python3
"""Regenerates the setup files of programs/ that carry inline array data (run from any directory).

pa(i,j) = i + 2j and pb(i,j) = (i*j) mod 5 on a 7x7 aoindex space (norb = 3, segments 2,3,2);
contraction_4index: v(p,q,r,s) = ((p + 2q + 3r + 5s) mod 7) - 3, d(p,q) = ((p + q) mod 3) + 1 on 5 points
(norb = 2, segments 2,3).  All indices above are 1-based; data is written column-major (first index fastest).
The chemistry programs read committed data: water/6-31G arrays in water-631g/ (make_water_631g.py)
and water.json, which computes its integrals from the geometry.
"""
import os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.dirname(HERE)


def tomlarr(name, a):
    a = np.asarray(a, float)
    data = ', '.join(repr(float(x)) for x in a.flatten(order='F'))
    return '[arrays.%s]\nshape = [%s]\ndata = [%s]\n' % (name, ', '.join(map(str, a.shape)), data)


def main():
    n = 7
    pa = np.array([[i + 2 * j for j in range(1, n + 1)] for i in range(1, n + 1)], float)
    pb = np.array([[(i * j) % 5 for j in range(1, n + 1)] for i in range(1, n + 1)], float)
    base = '[ints]\nnorb = 3\n[segments]\naoindex = [2, 3, 2]\n'
    for prog in ('block_add_sub', 'contraction_matmul', 'contract_accumulate', 'outer_product', 'scaled_copy',
                 'full_contraction', 'distributed_put_get', 'served_prepare_request', 'gpu_hints', 'sections',
                 'static_arrays', 'power_iteration'):
        with open(os.path.join(PROG, prog + '.toml'), 'w') as f:
            f.write('# setup for %s.sial\n' % prog + base + tomlarr('pa', pa) + tomlarr('pb', pb))
    with open(os.path.join(PROG, 'persistence_job.toml'), 'w') as f:
        f.write('# job: three programs sharing persistent objects (see persist_write.sial, persist_read.sial, '
                'persist_read_again.sial)\nprograms = ["persist_write.sial", "persist_read.sial", '
                '"persist_read_again.sial"]\n\n' + base + tomlarr('pa', pa) + tomlarr('pb', pb))
    m = 5
    v = np.zeros((m,) * 4)
    for p in range(1, m + 1):
        for q in range(1, m + 1):
            for r in range(1, m + 1):
                for s in range(1, m + 1):
                    v[p - 1, q - 1, r - 1, s - 1] = ((p + 2 * q + 3 * r + 5 * s) % 7) - 3
    d = np.array([[((p + q) % 3) + 1 for q in range(1, m + 1)] for p in range(1, m + 1)], float)
    with open(os.path.join(PROG, 'contraction_4index.toml'), 'w') as f:
        f.write('# setup for contraction_4index.sial\n[ints]\nnorb = 2\n[segments]\naoindex = [2, 3]\n'
                + tomlarr('v', v) + tomlarr('d', d))


if __name__ == '__main__':
    main()
