"""Reference energies for tests/setup.rs: PySCF RHF, MP2, CCSD and CCSD(T) of the molecules
beside this script, all electrons and with the frozen core, in the basis sets the tests use,
taken from the same Basis Set Exchange files sial ships (chemistry/basis/*.json), so that both
sides use the same numbers. Run: python3 pyscf_references.py > references.json
(PySCF 2.x, pip install pyscf)."""
import json
import os

from pyscf import cc, gto, lib, mp, scf

# (xyz file, basis, Cartesian d functions) -- Pople basis sets have Cartesian d, as in sial setup.
CASES = [
    ("water.xyz", "cc-pvdz", False),
    ("ammonia.xyz", "6-31g*", True),
    ("hydrogen_fluoride.xyz", "6-31g", True),
]
CORE = {1: 0, 7: 1, 8: 1, 9: 1}


BASIS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../chemistry/basis")
FILES = {"cc-pvdz": "cc-pvdz.json", "6-31g*": "6-31g_st.json", "6-31g": "6-31g.json",
         "cc-pvtz": "cc-pvtz.json", "aug-cc-pvdz": "aug-cc-pvdz.json"}


def pyscf_basis(name, symbols):
    """The shipped basis set in PySCF's format: [l, (exponent, c1, c2, ...), ...] per shell."""
    data = json.load(open(os.path.join(BASIS_DIR, FILES[name])))
    out = {}
    for sym, z in symbols.items():
        shells = []
        for sh in data["elements"][str(z)]:
            rows = sh["coefficients"]
            if len(sh["l"]) > 1:
                groups = [(l, [row]) for l, row in zip(sh["l"], rows)]
            else:
                groups = [(sh["l"][0], rows)]
            for l, rws in groups:
                shells.append([l] + [[e] + [r[i] for r in rws] for i, e in enumerate(sh["exponents"])])
        out[sym] = shells
    return out


def molecule(path, basis, cart):
    lines = open(path).read().split("\n")
    n = int(lines[0])
    atoms = "; ".join(lines[2:2 + n])
    symbols = {l.split()[0]: gto.charge(l.split()[0]) for l in lines[2:2 + n]}
    return gto.M(atom=atoms, basis=pyscf_basis(basis, symbols), cart=cart, unit="Angstrom", verbose=0)


out = {"pyscf": lib.__version__ if hasattr(lib, "__version__") else "", "cases": []}
import pyscf
out["pyscf"] = pyscf.__version__
for path, basis, cart in CASES:
    mol = molecule(path, basis, cart)
    mf = scf.RHF(mol)
    # Tight orbitals: MP2 and CC energies move with the orbital gradient (PySCF's default
    # gradient threshold, the square root of conv_tol, leaves ~1e-10 Eh in MP2).
    mf.conv_tol = 1e-14
    mf.conv_tol_grad = 1e-10
    mf.kernel()
    for frozen in (False, True):
        ncore = sum(CORE[z] for z in mol.atom_charges()) if frozen else 0
        fz = ncore or None
        pt = mp.MP2(mf, frozen=fz).run()
        cc_ = cc.CCSD(mf, frozen=fz)
        cc_.conv_tol = 1e-12
        cc_.conv_tol_normt = 1e-10
        cc_.kernel()
        et = cc_.ccsd_t()
        out["cases"].append({
            "molecule": path,
            "basis": basis,
            "frozen_core": frozen,
            "nbasis": mol.nao_nr(),
            "scf_energy": mf.e_tot,
            "mp2_correlation": pt.e_corr,
            "ccsd_correlation": cc_.e_corr,
            "triples_correction": et,
            "total_energy": mf.e_tot + cc_.e_corr + et,
        })
print(json.dumps(out, indent=1))
