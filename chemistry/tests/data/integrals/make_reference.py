#!/usr/bin/env python3
"""Reference values for the unit tests of chemistry/src/integrals*, computed with PySCF.

Usage: python3 make_reference.py [DAT_DIR]
  DAT_DIR  the directory with ACES4's job files (default /work/shared/aces4/test)

Writes, next to this script, one text file per case (hf_321g.txt, water_321g.txt, ne_ccpvdz.txt,
synthetic_spherical.txt, synthetic_cartesian.txt). Each holds the basis-set part of the job's setup
(so that the Rust tests need no .dat reader) and the reference numbers. Line format, one item per
line:  TAG NAME DIMS... | VALUES...   (values column-major, first index fastest; '#' = comment)

  int / real NAME | v          a predefined int / scalar of the setup
  ints / reals NAME dims | vs  a predefined int / double array of the setup
  segments aoindex n | exts    the AO segmentation the tests use (shell-aligned)
  matrix NAME n n | vs         a reference matrix (AO indices in ACES4's order, 0-based)
  vector NAME n | vs           a reference vector
  value NAME | v               a reference number
  samples eri k 5 | (i j k l (ij|kl)) x k   selected ERIs, 0-based AO indices

Conventions (ACES4's, see the module docs of chemistry/src/integrals.rs): AO order within a shell
= contracted function slow, component fast; every Cartesian component unit-normalised; spherical
(intspherical = 1, L >= 2 only) = the real solid harmonics m = +L..0..-L, unit-normalised, as the
tables in SPH below give them. PySCF is run with mol.cart = True; its AOs are permuted to ACES4's
order and rescaled to unit norm (the contracted functions of the setups are normalised, so a
component's norm is a single factor), then transformed with SPH where the setup is spherical. For
the spherical d shell of ne_ccpvdz the script also checks the result against PySCF's own spherical
AOs (cart = False), which come in the reverse order m = -2..+2 with the same signs.

Fock references: Fa = J[Da+Db] - K[Da], Fb = J[Da+Db] - K[Db] with J[D]_mn = sum (mn|ls) D_ls and
K[D]_mn = sum (ml|ns) D_ls, for random symmetric densities (seeded) written to the same file.
"""
import math
import os
import struct
import sys

import numpy as np
import pyscf
from pyscf import gto

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------
# ACES4 setup files (SIAL-SPEC section 9.2 layout): a minimal reader
# ---------------------------------------------------------------------------------------------


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from('<' + fmt, self.data, self.pos)
        self.pos += struct.calcsize('<' + fmt)
        return values

    def int(self):
        return self.take('i')[0]

    def string(self):
        n = self.int()
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.split(b'\0')[0].decode('latin-1')


def read_setup(path):
    r = Reader(open(path, 'rb').read())
    assert r.take('ii') == (23121991, 1), 'not a version-1 setup file'
    setup = {'ints': {}, 'scalars': {}, 'arrays': {}, 'int_arrays': {}}
    for _ in range(r.int()):
        r.string()  # program
    for _ in range(r.int()):
        name = r.string()
        setup['ints'][name] = r.int()
    for _ in range(r.int()):
        name = r.string()
        setup['scalars'][name] = r.take('d')[0]
    for _ in range(r.int()):
        r.int()
        n = r.int()
        r.take('%di' % n)
    for key, code in (('arrays', 'd'), ('int_arrays', 'i')):
        for _ in range(r.int()):
            name = r.string()
            r.int()
            rank = r.int()
            dims = list(r.take('%di' % rank))
            count = r.int()
            setup[key][name] = (dims, list(r.take('%d%s' % (count, code))))
    return setup


# ---------------------------------------------------------------------------------------------
# Conventions
# ---------------------------------------------------------------------------------------------

def cart_list(l):
    return [(lx, ly, l - lx - ly) for lx in range(l, -1, -1) for ly in range(l - lx, -1, -1)]


def ncomp(l, spherical):
    return 2 * l + 1 if spherical and l >= 2 else (l + 1) * (l + 2) // 2


def sph_rows(l):
    """ACES4's spherical functions as rows over the unit-normalised Cartesian components
    (tables of /work/notes/integrals_basis_1e.md section 2.4, which were checked against OED)."""
    r = math.sqrt
    c = {tuple(k): i for i, k in enumerate(cart_list(l))}

    def row(terms):
        v = [0.0] * len(c)
        for coef, comp in terms:
            v[c[comp]] = coef
        return v
    if l == 2:
        return [row([(r(3 / 4), (2, 0, 0)), (-r(3 / 4), (0, 2, 0))]),
                row([(1.0, (1, 0, 1))]),
                row([(-0.5, (2, 0, 0)), (-0.5, (0, 2, 0)), (1.0, (0, 0, 2))]),
                row([(1.0, (0, 1, 1))]),
                row([(1.0, (1, 1, 0))])]
    if l == 3:
        return [row([(r(5 / 8), (3, 0, 0)), (-r(9 / 8), (1, 2, 0))]),
                row([(r(3 / 4), (2, 0, 1)), (-r(3 / 4), (0, 2, 1))]),
                row([(-r(3 / 8), (3, 0, 0)), (-r(3 / 40), (1, 2, 0)), (r(6 / 5), (1, 0, 2))]),
                row([(-r(9 / 20), (2, 0, 1)), (-r(9 / 20), (0, 2, 1)), (1.0, (0, 0, 3))]),
                row([(-r(3 / 40), (2, 1, 0)), (-r(3 / 8), (0, 3, 0)), (r(6 / 5), (0, 1, 2))]),
                row([(1.0, (1, 1, 1))]),
                row([(r(9 / 8), (2, 1, 0)), (-r(5 / 8), (0, 3, 0))])]
    raise ValueError('no table for l = %d' % l)


def normalise(l, exps, coefs):
    """Scales a contraction over unit-normalised primitives to unit norm."""
    s = 0.0
    for a, ca in zip(exps, coefs):
        for b, cb in zip(exps, coefs):
            s += ca * cb * (2 * math.sqrt(a * b) / (a + b)) ** (l + 1.5)
    return [c / math.sqrt(s) for c in coefs]


# ---------------------------------------------------------------------------------------------
# Setup -> shells -> PySCF molecule in ACES4's AO order
# ---------------------------------------------------------------------------------------------

def subshells(setup):
    """(atom index, l, exponents, coefficients) per contracted function, in ACES4's AO order."""
    ia = setup['int_arrays']
    fa = setup['arrays']
    nshells = setup['ints']['nshells']
    coords = np.array(fa['coords'][1]).reshape(-1, 3)
    tcoords = np.array(fa['tcoords'][1]).reshape(-1, 3)
    out = []
    for s in range(nshells):
        l = ia['ivangmom'][1][s]
        npf, ncf = ia['npfps'][1][s], ia['ncfps'][1][s]
        ea, ec = ia['ixalphas'][1][s] - 1, ia['ixpcoeffs'][1][s] - 1
        exps = fa['alphas'][1][ea:ea + npf]
        atom = int(np.argmin(np.linalg.norm(coords - tcoords[s], axis=1)))
        assert np.allclose(coords[atom], tcoords[s], atol=0, rtol=0)
        for k in range(ncf):
            col = fa['pcoeffs'][1][ec + k * npf:ec + (k + 1) * npf]
            keep = [(a, c) for a, c in zip(exps, col) if c != 0.0]
            out.append((atom, l, [a for a, _ in keep], [c for _, c in keep]))
    return out


SYMBOL = {1: 'H', 6: 'C', 7: 'N', 8: 'O', 9: 'F', 10: 'Ne'}


def molecule(setup, subs):
    coords = np.array(setup['arrays']['coords'][1]).reshape(-1, 3)
    charges = setup['arrays']['charge'][1]
    atoms, basis = [], {}
    for a, (xyz, z) in enumerate(zip(coords, charges)):
        label = '%s%d' % (SYMBOL[int(z)], a + 1)
        atoms.append([label, tuple(xyz)])
        basis[label] = [[l] + [[e, c] for e, c in zip(exps, coefs)]
                        for (atom, l, exps, coefs) in subs if atom == a]
    mol = gto.Mole()
    mol.atom = atoms
    mol.basis = basis
    mol.unit = 'Bohr'
    mol.cart = True
    mol.spin = int(sum(charges)) % 2
    mol.build(verbose=0)
    return mol


def aces_order(mol, subs):
    """Permutation: ACES4 AO k (Cartesian, before the spherical transform) = PySCF AO perm[k]."""
    loc = mol.ao_loc_nr()
    used, perm = set(), []
    for (atom, l, exps, coefs) in subs:
        for ib in range(mol.nbas):
            if ib in used or mol.bas_atom(ib) != atom or mol.bas_angular(ib) != l:
                continue
            if not np.allclose(mol.bas_exp(ib), exps, rtol=0, atol=0):
                continue
            theirs = mol.bas_ctr_coeff(ib)[:, 0]
            ratio = theirs / np.array(coefs)
            if np.abs(ratio - ratio[0]).max() > 1e-8 * abs(ratio[0]):
                continue
            used.add(ib)
            perm.extend(range(loc[ib], loc[ib + 1]))
            break
        else:
            raise ValueError('shell not found')
    return np.array(perm)


def transform(setup, subs):
    """Rows: ACES4 AOs; columns: unit-normalised Cartesian AOs in ACES4's order."""
    spherical = setup['ints']['intspherical'] == 1
    blocks = []
    for (_, l, _, _) in subs:
        if spherical and l >= 2:
            blocks.append(np.array(sph_rows(l)))
        else:
            blocks.append(np.eye((l + 1) * (l + 2) // 2))
    n = sum(b.shape[0] for b in blocks)
    m = sum(b.shape[1] for b in blocks)
    t = np.zeros((n, m))
    i = j = 0
    for b in blocks:
        t[i:i + b.shape[0], j:j + b.shape[1]] = b
        i += b.shape[0]
        j += b.shape[1]
    return t


def aces_basis(setup):
    """The PySCF molecule, the permutation of its Cartesian AOs into ACES4's order and the
    matrix (rows: ACES4 AOs) that rescales and, where spherical, transforms them."""
    subs = subshells(setup)
    mol = molecule(setup, subs)
    p = aces_order(mol, subs)
    s = mol.intor('int1e_ovlp_cart')[np.ix_(p, p)]
    scale = 1.0 / np.sqrt(np.diag(s))
    return mol, p, transform(setup, subs) * scale[None, :]


def integrals(setup):
    mol, p, t = aces_basis(setup)

    def one(name):
        return t @ mol.intor(name)[np.ix_(p, p)] @ t.T
    out = {'S': one('int1e_ovlp_cart'),
           'H': one('int1e_kin_cart') + one('int1e_nuc_cart')}
    with mol.with_common_orig((0.0, 0.0, 0.0)):
        r = mol.intor('int1e_r_cart')
    for k, name in enumerate(('DX', 'DY', 'DZ')):
        out[name] = t @ r[k][np.ix_(p, p, )] @ t.T
    eri = mol.intor('int2e_cart')[np.ix_(p, p, p, p)]
    eri = np.einsum('ai,bj,ck,dl,ijkl->abcd', t, t, t, t, eri, optimize=True)
    out['eri'] = eri
    out['nn'] = mol.energy_nuc()
    charges = np.array(setup['arrays']['charge'][1])
    coords = np.array(setup['arrays']['coords'][1]).reshape(-1, 3)
    out['nuclear_dipole'] = charges @ coords
    return mol, out


def check_spherical_d_against_pyscf(setup, out):
    """ACES4's spherical d = PySCF's spherical d in reverse order (m = +2..-2), same signs."""
    subs = subshells(setup)
    mol = molecule(setup, subs)
    mol.cart = False
    mol.build(verbose=0)
    s_pyscf = mol.intor('int1e_ovlp_sph')
    h_pyscf = mol.intor('int1e_kin_sph') + mol.intor('int1e_nuc_sph')
    # PySCF spherical AO order per shell, with the d shell reversed.
    perm, k = [], 0
    for ib in range(mol.nbas):
        n = (2 * mol.bas_angular(ib) + 1) * mol.bas_nctr(ib)
        idx = list(range(k, k + n))
        if mol.bas_angular(ib) == 2:
            idx = idx[::-1]
        perm.extend(idx)
        k += n
    perm = np.array(perm)
    assert np.abs(s_pyscf[np.ix_(perm, perm)] - out['S']).max() < 1e-12
    assert np.abs(h_pyscf[np.ix_(perm, perm)] - out['H']).max() < 1e-10
    eri = mol.intor('int2e_sph')[np.ix_(perm, perm, perm, perm)]
    assert np.abs(eri - out['eri']).max() < 1e-12


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def fmt(v):
    return repr(float(v))


def write_case(name, source, setup, out, segments, seed):
    lines = ['# %s: generated by make_reference.py (PySCF %s) from %s' % (name, pyscf.__version__, source)]
    for key, v in sorted(setup['ints'].items()):
        lines.append('int %s | %d' % (key, v))
    for key, v in sorted(setup['scalars'].items()):
        lines.append('real %s | %s' % (key, fmt(v)))
    for key, (dims, vs) in sorted(setup['int_arrays'].items()):
        lines.append('ints %s %s | %s' % (key, ' '.join(map(str, dims)), ' '.join(map(str, vs))))
    for key, (dims, vs) in sorted(setup['arrays'].items()):
        lines.append('reals %s %s | %s' % (key, ' '.join(map(str, dims)), ' '.join(map(fmt, vs))))
    lines.append('segments aoindex %d | %s' % (len(segments), ' '.join(map(str, segments))))
    n = out['S'].shape[0]
    for key in ('S', 'H', 'DX', 'DY', 'DZ'):
        m = out[key]
        lines.append('matrix %s %d %d | %s' % (key, n, n, ' '.join(fmt(v) for v in m.flatten(order='F'))))
    lines.append('vector nuclear_dipole 3 | %s' % ' '.join(map(fmt, out['nuclear_dipole'])))
    lines.append('value nn_repulsion_pyscf | %s' % fmt(out['nn']))
    eri = out['eri']
    rng = np.random.default_rng(seed)
    picks = [tuple(rng.integers(0, n, 4)) for _ in range(150)]
    picks += [(i, i, j, j) for i in range(n) for j in range(0, n, 3)]
    vals = []
    for (i, j, k, l) in picks:
        vals += [str(i), str(j), str(k), str(l), fmt(eri[i, j, k, l])]
    lines.append('samples eri %d 5 | %s' % (len(picks), ' '.join(vals)))
    idx = np.indices(eri.shape)
    weights = np.cos(0.1 * idx[0] + 0.2 * idx[1] + 0.3 * idx[2] + 0.7 * idx[3])
    lines.append('value eri_sum_squares | %s' % fmt((eri * eri).sum()))
    lines.append('value eri_weighted_sum | %s' % fmt((eri * weights).sum()))
    da = rng.uniform(-0.5, 0.5, (n, n))
    da = da + da.T
    db = rng.uniform(-0.5, 0.5, (n, n))
    db = db + db.T
    j = np.einsum('mnls,ls->mn', eri, da + db)
    fa = j - np.einsum('mlns,ls->mn', eri, da)
    fb = j - np.einsum('mlns,ls->mn', eri, db)
    for key, m in (('Da', da), ('Db', db), ('Fa', fa), ('Fb', fb)):
        lines.append('matrix %s %d %d | %s' % (key, n, n, ' '.join(fmt(v) for v in m.flatten(order='F'))))
    with open(os.path.join(HERE, name + '.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


BASIS_KEYS_INT = ('nshells', 'ncenters', 'intspherical', 'nalphas', 'npcoeffs', 'nfrags',
                  'nbasis_funcs', 'n_c_funcs', 'natoms', 'iecp_on', 'necp_atoms', 'ntotshells',
                  'nalpha_occupied', 'nbeta_occupied', 'nalpha_virtual', 'nbeta_virtual',
                  'scf_iter', 'scf_hist', 'scf_beg', 'lindep_tol')
BASIS_KEYS_ARR = ('ivangmom', 'npfps', 'ncfps', 'ixalphas', 'ixpcoeffs', 'end_nfps', 'atom',
                  'indx_cc', 'ccbeg', 'ccend', 'alphas', 'pcoeffs', 'coords', 'tcoords', 'charge',
                  'ao_seg_ranges')


def basis_part(setup):
    return {
        'ints': {k: v for k, v in setup['ints'].items() if k in BASIS_KEYS_INT},
        'scalars': {k: v for k, v in setup['scalars'].items() if k in ('nn_repulsion', 'scf_conv')},
        'int_arrays': {k: v for k, v in setup['int_arrays'].items() if k in BASIS_KEYS_ARR},
        'arrays': {k: v for k, v in setup['arrays'].items() if k in BASIS_KEYS_ARR},
    }


def synthetic(spherical):
    """Ne (cc-pVDZ s, p, d of ccsdpt_test) off the origin, an H with a generally contracted s and
    a one-primitive f shell: multi-centre d and f shells, Cartesian or spherical."""
    h_s = [5.447178, 0.824547, 0.183192]
    ne = read_setup(os.path.join(DAT_DIR, 'ccsdpt_test.dat'))
    alphas = list(ne['arrays']['alphas'][1]) + h_s + [0.8]
    pcoeffs = list(ne['arrays']['pcoeffs'][1])
    pcoeffs += [0.1562849807, 0.9046908881, 0.0, 0.0, 0.0, 1.0]
    pcoeffs += normalise(3, [0.8], [1.0])
    spherical_flag = 1 if spherical else 0
    ncomp_d, ncomp_f = ncomp(2, spherical), ncomp(3, spherical)
    end = [3, 9, 9 + ncomp_d, 11 + ncomp_d, 11 + ncomp_d + ncomp_f]
    ne_at = [0.1, -0.2, 0.3]
    h_at = [0.4, 0.9, 2.1]
    setup = {
        'ints': {'nshells': 5, 'ncenters': 2, 'intspherical': spherical_flag, 'nalphas': len(alphas),
                 'npcoeffs': len(pcoeffs), 'nfrags': 0, 'nbasis_funcs': end[-1]},
        'scalars': {},
        'int_arrays': {
            'ivangmom': ([5], [0, 1, 2, 0, 3]),
            'npfps': ([5], [9, 4, 1, 3, 1]),
            'ncfps': ([5], [3, 2, 1, 2, 1]),
            'ixalphas': ([5], [1, 10, 14, 15, 18]),
            'ixpcoeffs': ([5], [1, 28, 36, 37, 43]),
            'end_nfps': ([5], end),
            'atom': ([5], [1, 1, 1, 2, 2]),
        },
        'arrays': {
            'alphas': ([len(alphas)], alphas),
            'pcoeffs': ([len(pcoeffs)], pcoeffs),
            'coords': ([3, 2], ne_at + h_at),
            'tcoords': ([3, 5], ne_at * 3 + h_at * 2),
            'charge': ([2], [10.0, 1.0]),
        },
    }
    # The H s contraction of the setups is normalised to ~1e-10 only when written with 10
    # digits; renormalise it so that PySCF's normalisation and ACES4's "as given" agree.
    pc = setup['arrays']['pcoeffs'][1]
    pc[36:39] = normalise(0, h_s, pc[36:39])
    return setup


DAT_DIR = sys.argv[1] if len(sys.argv) > 1 else '/work/shared/aces4/test'


def main():
    cases = [
        ('hf_321g', 'second_ccsdpt_test.dat', [2, 3, 6], 11),
        ('water_321g', 'eom_ccsd_water_test.dat', [3, 6, 4], 12),
        ('ne_ccpvdz', 'ccsdpt_test.dat', [3, 6, 5], 13),
    ]
    for name, dat, segments, seed in cases:
        setup = basis_part(read_setup(os.path.join(DAT_DIR, dat)))
        _, out = integrals(setup)
        if name == 'ne_ccpvdz':
            check_spherical_d_against_pyscf(setup, out)
        write_case(name, dat, setup, out, segments, seed)
    for name, spherical, seed in (('synthetic_spherical', True, 14), ('synthetic_cartesian', False, 15)):
        setup = synthetic(spherical)
        _, out = integrals(setup)
        end = setup['int_arrays']['end_nfps'][1]
        segments = [end[1], end[2] - end[1], end[4] - end[2]]
        write_case(name, 'a synthetic NeH basis (see synthetic())', setup, out, segments, seed)


if __name__ == '__main__':
    main()
