"""Writes the water / 6-31G reference data the chemistry feature programs of programs/ read
(scf_energy, mp2_energy, mp2_served, ao2mo_transform), and prints the values their `# expect:`
lines hold, each computed here with numpy from the same data.

PySCF 2.x (pip install pyscf), RHF conv_tol 1e-14 and conv_tol_grad 1e-10, the geometry of tests/setup/water.xyz and the
6-31G basis set sial ships (chemistry/basis/6-31g.json). Run from the repository root:
    python3 programs/data/make_water_631g.py
Files (numpy standard C order; element a[i0,i1,...] is SIAL element (i0+1, i1+1, ...)):
eri_ao, eri_mo (chemists' notation), mo_coeff C[mu,p], mo_energies, hcore_ao, overlap_ao, and
reference.json with the energies.
"""
import json
import os

import numpy as np
from pyscf import ao2mo, gto, mp, scf

OUT = "programs/data/water-631g"
data = json.load(open("chemistry/basis/6-31g.json"))


def basis(z):
    shells = []
    for sh in data["elements"][str(z)]:
        rows = sh["coefficients"]
        groups = list(zip(sh["l"], ([r] for r in rows))) if len(sh["l"]) > 1 else [(sh["l"][0], rows)]
        for l, rws in groups:
            shells.append([l] + [[e] + [r[i] for r in rws] for i, e in enumerate(sh["exponents"])])
    return shells


mol = gto.M(
    atom="O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692",
    basis={"O": basis(8), "H": basis(1)},
    unit="Angstrom",
    verbose=0,
)
mf = scf.RHF(mol)
mf.conv_tol = 1e-14
mf.conv_tol_grad = 1e-10
mf.kernel()
C, eps = mf.mo_coeff, mf.mo_energy
nocc = mol.nelectron // 2
nmo = C.shape[1]
eri_ao = mol.intor("int2e")
eri_mo = ao2mo.restore(1, ao2mo.full(mol, C), nmo)
os.makedirs(OUT, exist_ok=True)
for name, a in [
    ("eri_ao", eri_ao),
    ("eri_mo", eri_mo),
    ("mo_coeff", C),
    ("mo_energies", eps),
    ("hcore_ao", mf.get_hcore()),
    ("overlap_ao", mf.get_ovlp()),
]:
    np.save(os.path.join(OUT, name + ".npy"), np.ascontiguousarray(a))

o, v = slice(0, nocc), slice(nocc, nmo)
iajb = eri_mo[o, v, o, v]
ibja = iajb.transpose(0, 3, 2, 1)
d = eps[o, None, None, None] - eps[None, v, None, None] + eps[None, None, o, None] - eps[None, None, None, v]
emp2 = float(np.sum(iajb * (2 * iajb - ibja) / d))
pt = mp.MP2(mf).run()
D = 2 * C[:, o] @ C[:, o].T
h = mf.get_hcore()
J = np.einsum("pqrs,rs->pq", eri_ao, D)
K = np.einsum("prqs,rs->pq", eri_ao, D)
F = h + J - 0.5 * K
escf = float(0.5 * np.sum(D * (h + F)) + mol.energy_nuc())
ref = {
    "basis": "6-31G (chemistry/basis/6-31g.json)",
    "nao": mol.nao_nr(),
    "nmo": nmo,
    "nocc": nocc,
    "e_nuc": mol.energy_nuc(),
    "e_scf": mf.e_tot,
    "e_mp2_corr": pt.e_corr,
    "expect": {
        "scf_energy.escf": escf,
        "scf_energy.nelec": float(np.sum(D * mf.get_ovlp())),
        "scf_energy.eocc_sum": float(np.trace((C.T @ F @ C)[o, o])),
        "mp2.emp2": emp2,
        "mp2_served.npairs": nocc * (nocc + 1) / 2,
        "ao2mo_transform.x": float(np.sum(iajb * iajb)),
        "ao2mo_transform.y": float(np.sum(iajb * ibja)),
    },
}
json.dump(ref, open(os.path.join(OUT, "reference.json"), "w"), indent=1)
print(json.dumps(ref, indent=1))
