"""Writes the basis sets `sial setup` ships, for H to Ar, from the Basis Set Exchange
(pip install basis_set_exchange; data version printed into each file).

Each file NAME.json: {"name", "source", "function_types", "elements": {"Z": [shell, ...]}} with
shell = {"l": [l, ...], "exponents": [...], "coefficients": [[...], ...]} exactly as the
Basis Set Exchange gives them (an "l" list of two values is a Pople sp shell: one coefficient
row per angular momentum). Run from this folder: python3 make_basis.py
"""
import json

import basis_set_exchange as bse

BASES = {
    "sto-3g": "STO-3G",
    "3-21g": "3-21G",
    "6-31g": "6-31G",
    "6-31g_st": "6-31G*",
    "cc-pvdz": "cc-pVDZ",
    "cc-pvtz": "cc-pVTZ",
    "aug-cc-pvdz": "aug-cc-pVDZ",
}

for file, name in BASES.items():
    data = json.loads(bse.get_basis(name, elements=list(range(1, 19)), fmt="json", header=False))
    elements = {}
    for z, el in data["elements"].items():
        shells = []
        for sh in el["electron_shells"]:
            shells.append({
                "l": sh["angular_momentum"],
                "exponents": [float(x) for x in sh["exponents"]],
                "coefficients": [[float(x) for x in row] for row in sh["coefficients"]],
            })
        elements[z] = shells
    out = {
        "name": data["name"],
        "source": f"Basis Set Exchange (basis_set_exchange {bse.version()}), basis version {data['version']}",
        "function_types": data["function_types"],
        "elements": elements,
    }
    with open(f"{file}.json", "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(file, len(elements), "elements")
