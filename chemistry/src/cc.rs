//! ACES4's coupled-cluster and EOM utility super instructions: the MP2/CC/CIS(D) energy
//! denominators, the (T) helpers `stripi` and `set_ijk_*`, the EOM symmetrisers `anti_symm_*`,
//! the CIS start vectors and the frozen-core helper `drop_core_in_sip`.
//!
//! Results are those of ACES4's Fortran routines, to the bit where arithmetic is involved: sums
//! are associated exactly as ACES4 writes them and elements are updated by true division.
//!
//! Orbital numbers. ACES4 computes the global orbital number of an element from the setup array
//! `moa_seg_ranges`; we use the runtime's segment tables ([`Context::global_offset`]) instead,
//! which give the same numbers in every ACES4 job. A dimension over a simple index (the (T)
//! programs' `ii`, `jj` = `1:naocc`) has no table: its value *is* the orbital number, as in
//! ACES4's rank-6 rule (see `locate`).
//!
//! Where ACES4 silently does nothing (a block rank or Fock rank it does not handle) or reads out
//! of bounds, these specials return an error instead: a silently skipped denominator would corrupt
//! the energies without a message. No ACES4 test program meets any of these cases.

mod denominators;
mod eom;
mod frozen_core;
mod triples;

use sial_superinstructions::special::{Arg, ArgKind, Context, SpecialFn};

use crate::args;

/// The specials of this module: SIAL name, ACES4 signature, function.
pub const SPECIALS: &[(&str, &str, SpecialFn)] = &[
    (
        "energy_denominator_rhf",
        "ur",
        denominators::energy_denominator_rhf,
    ),
    (
        "energy_ty_denominator_rhf",
        "urr",
        denominators::energy_ty_denominator_rhf,
    ),
    (
        "energy_numerator_rhf",
        "ur",
        denominators::energy_numerator_rhf,
    ),
    ("stripi", "ru", triples::stripi),
    ("set_ijk_aaa", "w", triples::set_ijk_aaa),
    ("set_ijk_aab", "w", triples::set_ijk_aab),
    ("anti_symm_o", "u", eom::anti_symm_o),
    ("anti_symm_v", "u", eom::anti_symm_v),
    ("cis_unit_guess", "ur", eom::cis_unit_guess),
    ("drop_core_in_sip", "uu", frozen_core::drop_core_in_sip),
];

/// Position of an argument in messages (1-based, as written in `execute`).
fn nth(k: usize) -> String {
    format!("argument {}", k + 1)
}

/// `[2, 4, 6]` as "2, 4 or 6", for messages.
fn one_of(values: &[usize]) -> String {
    let text: Vec<String> = values.iter().map(usize::to_string).collect();
    match text.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Checks that argument `k` is an array (a block or a whole array) whose data matches its shape,
/// so that the loops below can index it without bounds failures.
fn array_arg(arg: &Arg, k: usize) -> Result<(), String> {
    if !matches!(arg.kind, ArgKind::Block | ArgKind::WholeArray) || arg.shape.is_empty() {
        return Err(format!(
            "{} must be an array or a block, got {}",
            nth(k),
            arg.describe()
        ));
    }
    let elements: usize = arg.shape.iter().product();
    if arg.data.len() != elements {
        return Err(format!(
            "{} ({}) has {} elements, its shape {:?} needs {elements}",
            nth(k),
            arg.describe(),
            arg.data.len(),
            arg.shape
        ));
    }
    if arg.kind == ArgKind::Block && arg.segments.len() != arg.shape.len() {
        return Err(format!(
            "{} ({}) has {} segment numbers for {} dimensions",
            nth(k),
            arg.describe(),
            arg.segments.len(),
            arg.shape.len()
        ));
    }
    Ok(())
}

/// Checks that argument `k` is an array of rank `rank` (see [`array_arg`]).
fn array_of_rank(arg: &Arg, k: usize, rank: usize) -> Result<(), String> {
    array_arg(arg, k)?;
    if arg.shape.len() != rank {
        return Err(format!(
            "{} must be an array of rank {rank}, got {} (rank {})",
            nth(k),
            arg.describe(),
            arg.shape.len()
        ));
    }
    Ok(())
}

/// The orbitals a dimension of an argument covers: 0-based number of the first, and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Orbitals {
    first: usize,
    count: usize,
}

impl Orbitals {
    /// Whether 0-based orbital `g` is among them.
    fn contains(self, g: usize) -> bool {
        g >= self.first && g - self.first < self.count
    }

    /// The 1-based numbers of the first and last orbital, for messages.
    fn range_text(self) -> String {
        format!("{} to {}", self.first + 1, self.first + self.count)
    }
}

/// For each dimension of argument `k` (checked with [`array_arg`]), the orbitals it covers.
///
/// A block's dimension is located with the runtime's segment table ([`args::offsets`]). Where
/// there is none (a simple index), the index value v is the orbital number (offset v − 1): this
/// is ACES4's rank-6 rule for the (T) programs' `ii`, `jj`. ACES4 applies that rule to every
/// extent-1 dimension of a rank-6 block, which is only right for a genuine MO segment of extent 1
/// when all earlier segments also have extent 1; we use the segment table there, which agrees
/// with ACES4 wherever ACES4 is right. ACES4's ranks 2 and 4 would look a simple index value up
/// as a segment number; no ACES4 program does that.
///
/// A whole array starts at its declared first segment ([`Context::declared_lower`], segment 1 if
/// the runtime cannot say, which is ACES4's assumption for `fock_a`).
fn locate(ctx: &dyn Context, arg: &Arg, k: usize) -> Result<Vec<Orbitals>, String> {
    let segments: Vec<i32> = match arg.kind {
        ArgKind::WholeArray => (0..arg.shape.len())
            .map(|d| ctx.declared_lower(&arg.name, d).unwrap_or(1))
            .collect(),
        _ => arg.segments.clone(),
    };
    let known: Vec<Option<usize>> = match arg.kind {
        ArgKind::WholeArray => segments
            .iter()
            .enumerate()
            .map(|(d, &s)| ctx.global_offset(&arg.name, d, s))
            .collect(),
        _ => args::offsets(ctx, arg),
    };
    segments
        .iter()
        .zip(known)
        .zip(&arg.shape)
        .enumerate()
        .map(|(d, ((&segment, known), &count))| {
            let first = match known {
                Some(first) => first,
                None => simple_index_offset(segment).ok_or_else(|| {
                    format!(
                        "{}: dimension {} of {} has index value {segment}, which is no orbital number",
                        nth(k),
                        d + 1,
                        arg.describe()
                    )
                })?,
            };
            Ok(Orbitals { first, count })
        })
        .collect()
}

/// The 0-based orbital of simple index value `value` (the value is the orbital number).
fn simple_index_offset(value: i32) -> Option<usize> {
    usize::try_from(value).ok()?.checked_sub(1)
}

/// The diagonal of the Fock argument: ACES4 reads only F(g,g) for global orbital g, from the
/// whole static `fock_a` (rank 2) or, in energy_denominator_rhf, from a vector of orbital
/// energies (rank 1).
struct FockDiagonal<'a> {
    arg: &'a Arg,
    k: usize,
    orbitals: Vec<Orbitals>,
}

impl<'a> FockDiagonal<'a> {
    /// Argument `k` as a Fock matrix (`ranks` lists the ranks the special accepts).
    fn new(
        ctx: &dyn Context,
        arg: &'a Arg,
        k: usize,
        ranks: &[usize],
    ) -> Result<FockDiagonal<'a>, String> {
        array_arg(arg, k)?;
        if !ranks.contains(&arg.shape.len()) {
            return Err(format!(
                "{} (the Fock matrix) must be an array of rank {}, got {} (rank {})",
                nth(k),
                one_of(ranks),
                arg.describe(),
                arg.shape.len()
            ));
        }
        let orbitals = locate(ctx, arg, k)?;
        Ok(FockDiagonal { arg, k, orbitals })
    }

    /// F(g,g) for 0-based global orbital `g`, or an error when the argument does not hold it.
    fn energy(&self, g: usize) -> Result<f64, String> {
        if let Some(outside) = self.orbitals.iter().find(|o| !o.contains(g)) {
            return Err(format!(
                "{} (the Fock matrix {}) has no diagonal element for orbital {}: it covers orbitals {}",
                nth(self.k),
                self.arg.describe(),
                g + 1,
                outside.range_text()
            ));
        }
        let row = g - self.orbitals[0].first;
        let at = match self.orbitals.get(1) {
            Some(cols) => args::at(self.arg.shape[0], row, g - cols.first),
            None => row,
        };
        Ok(self.arg.data[at])
    }

    /// The orbital energies of the orbitals of one block dimension, in local order.
    fn energies(&self, orbitals: Orbitals) -> Result<Vec<f64>, String> {
        (orbitals.first..orbitals.first + orbitals.count)
            .map(|g| self.energy(g))
            .collect()
    }
}

/// Replaces every element of a column-major array of shape `shape` by `f(position, value)`,
/// visiting the elements in storage order (first index fastest, as ACES4's loops do).
fn update_each(shape: &[usize], data: &mut [f64], mut f: impl FnMut(&[usize], f64) -> f64) {
    let mut position = vec![0; shape.len()];
    for x in data.iter_mut() {
        *x = f(&position, *x);
        for (p, &n) in position.iter_mut().zip(shape) {
            *p += 1;
            if *p < n {
                break;
            }
            *p = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    #[test]
    fn every_special_is_registered_with_its_aces4_signature() {
        let table: Vec<(&str, &str)> = SPECIALS.iter().map(|(n, s, _)| (*n, *s)).collect();
        assert_eq!(
            table,
            vec![
                ("energy_denominator_rhf", "ur"),
                ("energy_ty_denominator_rhf", "urr"),
                ("energy_numerator_rhf", "ur"),
                ("stripi", "ru"),
                ("set_ijk_aaa", "w"),
                ("set_ijk_aab", "w"),
                ("anti_symm_o", "u"),
                ("anti_symm_v", "u"),
                ("cis_unit_guess", "ur"),
                ("drop_core_in_sip", "uu"),
            ]
        );
    }

    #[test]
    fn update_each_visits_in_column_major_order() {
        let mut data = vec![0.0; 6];
        update_each(&[2, 3], &mut data, |p, _| (p[0] + 10 * p[1]) as f64);
        assert_eq!(data, vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
    }

    #[test]
    fn blocks_are_located_by_segment_table_or_simple_index_value() {
        let mut ctx = Fake::new();
        ctx.offsets.insert(("t".into(), 0, 3), 7);
        let t = Arg::block("t", vec![3, 4], vec![2, 1], vec![0.0; 2]);
        assert_eq!(
            locate(&ctx, &t, 0),
            Ok(vec![
                Orbitals { first: 7, count: 2 },
                Orbitals { first: 3, count: 1 }
            ])
        );
        let min = Arg::block("t", vec![3, i32::MIN], vec![2, 1], vec![0.0; 2]);
        assert!(locate(&ctx, &min, 0).is_err());
        let bad = Arg::block("t", vec![3, 0], vec![2, 1], vec![0.0; 2]);
        assert_eq!(
            locate(&ctx, &bad, 0),
            Err(
                "argument 1: dimension 2 of t[3,0] has index value 0, which is no orbital number"
                    .into()
            )
        );
    }

    #[test]
    fn whole_arrays_start_at_their_declared_segment() {
        let mut ctx = Fake::new();
        let f = Arg::whole_array("f", vec![2, 2], vec![0.0; 4]);
        // Unknown to the runtime: ACES4's assumption, orbital 1.
        assert_eq!(
            locate(&ctx, &f, 1).map(|o| o[0].first),
            Ok(0),
            "defaults to segment 1"
        );
        ctx.lower.insert(("f".into(), 0), 2);
        ctx.lower.insert(("f".into(), 1), 2);
        ctx.offsets.insert(("f".into(), 0, 2), 5);
        ctx.offsets.insert(("f".into(), 1, 2), 5);
        assert_eq!(
            locate(&ctx, &f, 1),
            Ok(vec![Orbitals { first: 5, count: 2 }; 2])
        );
    }

    #[test]
    fn malformed_arguments_are_refused() {
        let scalar = Arg::scalar("x", 1.0);
        assert_eq!(
            array_arg(&scalar, 0),
            Err("argument 1 must be an array or a block, got x".into())
        );
        let short = Arg::block("t", vec![1, 1], vec![2, 2], vec![0.0; 3]);
        assert_eq!(
            array_arg(&short, 1),
            Err("argument 2 (t[1,1]) has 3 elements, its shape [2, 2] needs 4".into())
        );
        let unsegmented = Arg::block("t", vec![1], vec![2, 2], vec![0.0; 4]);
        assert_eq!(
            array_arg(&unsegmented, 0),
            Err("argument 1 (t[1]) has 1 segment numbers for 2 dimensions".into())
        );
        let t = Arg::block("t", vec![1, 1], vec![2, 2], vec![0.0; 4]);
        assert_eq!(
            array_of_rank(&t, 0, 3),
            Err("argument 1 must be an array of rank 3, got t[1,1] (rank 2)".into())
        );
    }

    #[test]
    fn the_fock_diagonal_is_read_by_global_orbital() {
        let mut ctx = Fake::new();
        // fock over orbitals 3..4 (segment 2 of a table [2, 2]); off-diagonal elements are noise.
        ctx.lower.insert(("f".into(), 0), 2);
        ctx.lower.insert(("f".into(), 1), 2);
        ctx.offsets.insert(("f".into(), 0, 2), 2);
        ctx.offsets.insert(("f".into(), 1, 2), 2);
        let f = Arg::whole_array("f", vec![2, 2], vec![1.0, 9.0, 9.0, 4.0]);
        let fock = FockDiagonal::new(&ctx, &f, 1, &[2]).expect("rank 2");
        assert_eq!(fock.energy(2), Ok(1.0));
        assert_eq!(fock.energy(3), Ok(4.0));
        assert_eq!(
            fock.energy(1),
            Err(
                "argument 2 (the Fock matrix f) has no diagonal element for orbital 2: it covers orbitals 3 to 4"
                    .into()
            )
        );
        let v = Arg::whole_array("v", vec![3], vec![5.0, 6.0, 7.0]);
        let fock = FockDiagonal::new(&ctx, &v, 1, &[1, 2]).expect("rank 1");
        assert_eq!(
            fock.energies(Orbitals { first: 1, count: 2 }),
            Ok(vec![6.0, 7.0])
        );
        assert_eq!(
            FockDiagonal::new(&ctx, &v, 1, &[2]).err(),
            Some("argument 2 (the Fock matrix) must be an array of rank 2, got v (rank 1)".into())
        );
    }
}
