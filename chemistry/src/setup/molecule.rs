//! Molecules from XYZ files: an atom count, a comment line, then one line per atom with its
//! element and Cartesian coordinates in ångström.

use super::SetupError;
use super::elements::atomic_number;
use std::path::Path;

/// Bohr radius in ångström (CODATA 2010, the value PySCF uses), so that geometries convert
/// exactly as in the reference calculations.
pub const BOHR_ANGSTROM: f64 = 0.52917721092;

/// One atom: its atomic number and position in bohr.
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    pub z: u32,
    pub position: [f64; 3],
}

/// A molecule: its atoms in the order of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Molecule {
    pub atoms: Vec<Atom>,
}

impl Molecule {
    /// Reads an XYZ file.
    pub fn read(path: &Path) -> Result<Molecule, SetupError> {
        let text = std::fs::read_to_string(path).map_err(|e| SetupError::File {
            file: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        Molecule::parse(&path.display().to_string(), &text)
    }

    /// Parses the text of an XYZ file named `file` (for messages).
    pub fn parse(file: &str, text: &str) -> Result<Molecule, SetupError> {
        let err = |line: usize, message: String| SetupError::Line {
            file: file.to_string(),
            line,
            message,
        };
        let lines: Vec<&str> = text.lines().collect();
        let first = lines.first().map(|l| l.trim()).unwrap_or("");
        let count: usize = first.parse().map_err(|_| {
            err(
                1,
                format!("the first line must be the number of atoms, found {first:?}"),
            )
        })?;
        if count == 0 {
            return Err(err(1, "the molecule has no atoms".into()));
        }
        let mut atoms = Vec::with_capacity(count);
        for k in 0..count {
            let n = k + 3;
            let Some(line) = lines.get(k + 2) else {
                return Err(err(
                    n,
                    format!("the file ends after {} of the {count} atoms", atoms.len()),
                ));
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [element, x, y, z, ..] = fields[..] else {
                return Err(err(
                    n,
                    format!(
                        "expected an element and three coordinates, found {:?}",
                        line.trim()
                    ),
                ));
            };
            let z_number = atomic_number(element)
                .ok_or_else(|| err(n, format!("unknown element {element:?}")))?;
            let mut position = [0.0; 3];
            for (p, text) in position.iter_mut().zip([x, y, z]) {
                let v: f64 = text
                    .parse()
                    .map_err(|_| err(n, format!("{text:?} is not a coordinate")))?;
                if !v.is_finite() {
                    return Err(err(n, format!("{text:?} is not a finite coordinate")));
                }
                *p = v / BOHR_ANGSTROM;
            }
            atoms.push(Atom {
                z: z_number,
                position,
            });
        }
        if let Some((i, extra)) = lines
            .iter()
            .enumerate()
            .skip(count + 2)
            .find(|(_, l)| !l.trim().is_empty())
        {
            return Err(err(
                i + 1,
                format!(
                    "the first line says {count} atoms, but more lines follow ({:?})",
                    extra.trim()
                ),
            ));
        }
        Ok(Molecule { atoms })
    }

    /// The electrons of the neutral molecule.
    pub fn nuclear_charge(&self) -> i64 {
        self.atoms.iter().map(|a| i64::from(a.z)).sum()
    }

    /// Nuclear repulsion energy (hartree).
    pub fn nuclear_repulsion(&self) -> f64 {
        let mut e = 0.0;
        for (i, a) in self.atoms.iter().enumerate() {
            for b in &self.atoms[..i] {
                let d2: f64 = (0..3)
                    .map(|k| (a.position[k] - b.position[k]).powi(2))
                    .sum();
                e += f64::from(a.z) * f64::from(b.z) / d2.sqrt();
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WATER: &str = "3\nwater\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nh 0 -0.7572 -0.4692\n\n";

    #[test]
    fn reads_atoms_in_bohr() {
        let m = Molecule::parse("w.xyz", WATER).expect("valid");
        assert_eq!(m.atoms.len(), 3);
        assert_eq!(m.atoms[0].z, 8);
        assert_eq!(m.atoms[2].z, 1);
        assert!((m.atoms[1].position[1] - 0.7572 / BOHR_ANGSTROM).abs() < 1e-15);
        assert_eq!(m.nuclear_charge(), 10);
        // PySCF: gto.M(atom=..., unit='Angstrom').energy_nuc() = 9.189533762934902
        assert!((m.nuclear_repulsion() - 9.189533762934902).abs() < 1e-12);
    }

    #[test]
    fn bad_files_name_the_line() {
        let cases = [
            ("", 1, "number of atoms"),
            ("x\n", 1, "number of atoms"),
            ("0\n\n", 1, "no atoms"),
            ("2\nc\nO 0 0 0\n", 4, "ends after 1 of the 2 atoms"),
            ("1\nc\nQq 0 0 0\n", 3, "unknown element \"Qq\""),
            ("1\nc\nO 0 0\n", 3, "three coordinates"),
            ("1\nc\nO 0 x 0\n", 3, "\"x\" is not a coordinate"),
            ("1\nc\nO 0 inf 0\n", 3, "not a finite"),
            ("1\nc\nO 0 0 0\nH 0 0 1\n", 4, "more lines follow"),
        ];
        for (text, line, part) in cases {
            let e = Molecule::parse("m.xyz", text).expect_err(text).to_string();
            assert!(e.starts_with(&format!("m.xyz:{line}: ")), "{e}");
            assert!(e.contains(part), "{e}");
        }
    }
}
