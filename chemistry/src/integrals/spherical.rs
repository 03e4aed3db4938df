//! ACES4's functions of a shell in terms of the `integral` crate's Cartesian components.
//!
//! The crate normalises every Cartesian component of a primitive with the constant of its x^l
//! component, so xy of a d shell is not unit-normalised; ACES4 normalises each component on its
//! own. For spherical shells ACES4 (OED/ERD) uses the real solid harmonics in the order
//! m = +L, …, 0, …, −L, each unit-normalised, with the positive sign on the cosine (m > 0) and
//! sine (m < 0) combinations of (x + iy)^|m| and on the highest power of z. The matrices here
//! are generated from that definition rather than tabulated, so any L the crate supports works.

use integral::math::am::cart_components;

/// (2n−1)!! as a float, with (−1)!! = 1.
fn double_factorial(n: i64) -> f64 {
    let mut k = n;
    let mut acc = 1.0;
    while k > 1 {
        acc *= k as f64;
        k -= 2;
    }
    acc
}

/// Product of (2a−1)!! over the three powers: the Cartesian part of a primitive's norm.
fn cartesian_weight(c: [usize; 3]) -> f64 {
    c.iter()
        .map(|&a| double_factorial(2 * a as i64 - 1))
        .product()
}

/// Factor that turns the crate's component `c` (normalised like x^l) into a unit-normalised
/// one: √((2L−1)!! / Π(2a−1)!!). It is 1 for s, p and every x^l-type component.
pub(crate) fn component_scale(c: [usize; 3]) -> f64 {
    let l: usize = c.iter().sum();
    (double_factorial(2 * l as i64 - 1) / cartesian_weight(c)).sqrt()
}

/// Overlap of two unit-normalised Cartesian components of one primitive (same exponent and
/// centre): a product over x, y, z of (a+b−1)!! / √((2a−1)!!(2b−1)!!), zero if a+b is odd.
fn component_overlap(a: [usize; 3], b: [usize; 3]) -> f64 {
    (0..3)
        .map(|i| {
            let s = a[i] + b[i];
            if s % 2 == 1 {
                0.0
            } else {
                double_factorial(s as i64 - 1)
                    / (double_factorial(2 * a[i] as i64 - 1)
                        * double_factorial(2 * b[i] as i64 - 1))
                    .sqrt()
            }
        })
        .product()
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

/// The unnormalised real solid harmonic (L, m) as coefficients on the monomials
/// x^a y^b z^c of degree L, in [`cart_components`] order:
/// Re or Im of (x+iy)^|m| times the associated-Legendre polynomial in z and r².
fn solid_harmonic_monomials(l: usize, m: i64) -> Vec<f64> {
    let comps = cart_components(l);
    let index = |c: [usize; 3]| comps.iter().position(|&x| x == c);
    let am = m.unsigned_abs() as usize;
    let mut out = vec![0.0; comps.len()];
    // Azimuthal part: (x + iy)^am = Σ_j C(am, j) x^(am−j) (iy)^j; the cosine type keeps the
    // even j (real), the sine type the odd j (imaginary), with the sign of i^j.
    let azimuthal: Vec<(usize, usize, f64)> = (0..=am)
        .filter(|j| (j % 2 == 0) == (m >= 0))
        .map(|j| {
            let sign = if (j / 2) % 2 == 0 { 1.0 } else { -1.0 };
            (am - j, j, sign * binomial(am, j))
        })
        .collect();
    // Polar part: Σ_k (−1)^k C(L,k) C(2L−2k, L) (L−2k)!/(L−2k−am)! z^(L−2k−am) (r²)^k.
    for k in 0..=(l - am) / 2 {
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        let polar = sign * binomial(l, k) * binomial(2 * l - 2 * k, l) * factorial(l - 2 * k)
            / factorial(l - 2 * k - am);
        let zpow = l - 2 * k - am;
        // (x² + y² + z²)^k by the multinomial theorem.
        for p in 0..=k {
            for q in 0..=k - p {
                let t = k - p - q;
                let multinomial = factorial(k) / (factorial(p) * factorial(q) * factorial(t));
                for &(ax, ay, az) in &azimuthal {
                    let c = [ax + 2 * p, ay + 2 * q, zpow + 2 * t];
                    if let Some(i) = index(c) {
                        out[i] += az * polar * multinomial;
                    }
                }
            }
        }
    }
    out
}

/// ACES4's spherical functions of angular momentum `l` (row-major, 2l+1 rows in the order
/// m = +l..−l, one column per Cartesian component) as combinations of unit-normalised
/// Cartesian components, each row unit-normalised.
pub(crate) fn spherical_rows(l: usize) -> Vec<f64> {
    let comps = cart_components(l);
    let mut rows = Vec::with_capacity((2 * l + 1) * comps.len());
    for m in (-(l as i64)..=l as i64).rev() {
        // A monomial coefficient c on x^a y^b z^c becomes c·√(Π(2a−1)!!) on the normalised
        // component (up to a factor common to the shell, removed by the normalisation below).
        let row: Vec<f64> = solid_harmonic_monomials(l, m)
            .iter()
            .zip(&comps)
            .map(|(v, &c)| v * cartesian_weight(c).sqrt())
            .collect();
        let mut norm = 0.0;
        for (i, ci) in comps.iter().enumerate() {
            for (j, cj) in comps.iter().enumerate() {
                norm += row[i] * row[j] * component_overlap(*ci, *cj);
            }
        }
        rows.extend(row.iter().map(|v| v / norm.sqrt()));
    }
    rows
}

/// The matrix (row-major, functions × Cartesian components) that turns the crate's Cartesian
/// integrals of a shell of angular momentum `l` into ACES4's functions, or `None` where the two
/// coincide (s and p, which ACES4 never makes spherical).
pub(crate) fn shell_transform(l: usize, spherical: bool) -> Option<Vec<f64>> {
    if l <= 1 {
        return None;
    }
    let comps = cart_components(l);
    let n = comps.len();
    let scale: Vec<f64> = comps.iter().map(|&c| component_scale(c)).collect();
    if spherical {
        let rows = spherical_rows(l);
        Some(
            rows.chunks(n)
                .flat_map(|row| row.iter().zip(&scale).map(|(v, s)| v * s))
                .collect(),
        )
    } else {
        let mut t = vec![0.0; n * n];
        for (i, s) in scale.iter().enumerate() {
            t[i * n + i] = *s;
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ACES4's spherical transformation tables, written out independently (and checked
    /// against OED's spherical integrals): (m, [(coefficient, component)]).
    fn notes_table(l: usize) -> Vec<Vec<(f64, [usize; 3])>> {
        let r = f64::sqrt;
        match l {
            2 => vec![
                vec![(r(3.0 / 4.0), [2, 0, 0]), (-r(3.0 / 4.0), [0, 2, 0])],
                vec![(1.0, [1, 0, 1])],
                vec![(-0.5, [2, 0, 0]), (-0.5, [0, 2, 0]), (1.0, [0, 0, 2])],
                vec![(1.0, [0, 1, 1])],
                vec![(1.0, [1, 1, 0])],
            ],
            3 => vec![
                vec![(r(5.0 / 8.0), [3, 0, 0]), (-r(9.0 / 8.0), [1, 2, 0])],
                vec![(r(3.0 / 4.0), [2, 0, 1]), (-r(3.0 / 4.0), [0, 2, 1])],
                vec![
                    (-r(3.0 / 8.0), [3, 0, 0]),
                    (-r(3.0 / 40.0), [1, 2, 0]),
                    (r(6.0 / 5.0), [1, 0, 2]),
                ],
                vec![
                    (-r(9.0 / 20.0), [2, 0, 1]),
                    (-r(9.0 / 20.0), [0, 2, 1]),
                    (1.0, [0, 0, 3]),
                ],
                vec![
                    (-r(3.0 / 40.0), [2, 1, 0]),
                    (-r(3.0 / 8.0), [0, 3, 0]),
                    (r(6.0 / 5.0), [0, 1, 2]),
                ],
                vec![(1.0, [1, 1, 1])],
                vec![(r(9.0 / 8.0), [2, 1, 0]), (-r(5.0 / 8.0), [0, 3, 0])],
            ],
            4 => vec![
                vec![
                    (r(35.0 / 64.0), [4, 0, 0]),
                    (-r(27.0 / 16.0), [2, 2, 0]),
                    (r(35.0 / 64.0), [0, 4, 0]),
                ],
                vec![(r(5.0 / 8.0), [3, 0, 1]), (-r(9.0 / 8.0), [1, 2, 1])],
                vec![
                    (-r(5.0 / 16.0), [4, 0, 0]),
                    (r(27.0 / 28.0), [2, 0, 2]),
                    (r(5.0 / 16.0), [0, 4, 0]),
                    (-r(27.0 / 28.0), [0, 2, 2]),
                ],
                vec![
                    (-r(45.0 / 56.0), [3, 0, 1]),
                    (-r(9.0 / 56.0), [1, 2, 1]),
                    (r(10.0 / 7.0), [1, 0, 3]),
                ],
                vec![
                    (r(9.0 / 64.0), [4, 0, 0]),
                    (r(27.0 / 560.0), [2, 2, 0]),
                    (-r(27.0 / 35.0), [2, 0, 2]),
                    (r(9.0 / 64.0), [0, 4, 0]),
                    (-r(27.0 / 35.0), [0, 2, 2]),
                    (1.0, [0, 0, 4]),
                ],
                vec![
                    (-r(9.0 / 56.0), [2, 1, 1]),
                    (-r(45.0 / 56.0), [0, 3, 1]),
                    (r(10.0 / 7.0), [0, 1, 3]),
                ],
                vec![
                    (-r(5.0 / 28.0), [3, 1, 0]),
                    (-r(5.0 / 28.0), [1, 3, 0]),
                    (r(9.0 / 7.0), [1, 1, 2]),
                ],
                vec![(r(9.0 / 8.0), [2, 1, 1]), (-r(5.0 / 8.0), [0, 3, 1])],
                vec![(r(5.0 / 4.0), [3, 1, 0]), (-r(5.0 / 4.0), [1, 3, 0])],
            ],
            _ => unreachable!(),
        }
    }

    #[test]
    fn generated_harmonics_match_aces4_tables() {
        for l in 2..=4 {
            let comps = cart_components(l);
            let rows = spherical_rows(l);
            for (p, terms) in notes_table(l).iter().enumerate() {
                let mut want = vec![0.0; comps.len()];
                for (v, c) in terms {
                    let i = comps.iter().position(|x| x == c).expect("component");
                    want[i] = *v;
                }
                let got = &rows[p * comps.len()..(p + 1) * comps.len()];
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() < 1e-14, "l={l} row {p}: {got:?} vs {want:?}");
                }
            }
        }
    }

    #[test]
    fn spherical_functions_are_orthonormal_up_to_l6() {
        for l in 0..=6 {
            let comps = cart_components(l);
            let n = comps.len();
            let rows = spherical_rows(l);
            for p in 0..2 * l + 1 {
                for q in 0..2 * l + 1 {
                    let mut s = 0.0;
                    for (i, ci) in comps.iter().enumerate() {
                        for (j, cj) in comps.iter().enumerate() {
                            s += rows[p * n + i] * rows[q * n + j] * component_overlap(*ci, *cj);
                        }
                    }
                    let want = if p == q { 1.0 } else { 0.0 };
                    assert!((s - want).abs() < 1e-12, "l={l} p={p} q={q}: {s}");
                }
            }
        }
    }

    #[test]
    fn component_scales() {
        assert_eq!(component_scale([0, 0, 0]), 1.0);
        assert_eq!(component_scale([0, 1, 0]), 1.0);
        assert_eq!(component_scale([2, 0, 0]), 1.0);
        assert!((component_scale([1, 1, 0]) - 3f64.sqrt()).abs() < 1e-15);
        assert!((component_scale([1, 1, 1]) - 15f64.sqrt()).abs() < 1e-15);
        assert!(shell_transform(1, true).is_none());
        let d = shell_transform(2, false).expect("cartesian d");
        assert_eq!(d.len(), 36);
        assert!((d[7] - 3f64.sqrt()).abs() < 1e-15);
        assert_eq!(shell_transform(2, true).map(|t| t.len()), Some(30));
    }
}
