//! Orbital-energy denominators of the MP2, CC, Λ and CIS(D) amplitude equations: each element of
//! an amplitude block is divided (or, for the numerator, multiplied) by a sum of Fock diagonal
//! elements over the block's orbitals.

use sial_superinstructions::special::{Arg, Context};

use super::{FockDiagonal, array_arg, locate, nth, one_of};
use crate::args;

/// `energy_denominator_rhf T F` (`ur`): T ← T / D elementwise, with D the orbital energies of
/// the even positions minus those of the odd positions (see [`apply`]): for
/// `Taibj[a,i,b,j]` this is e_i + e_j − e_a − e_b. T has rank 2, 4 or 6; F is the whole
/// `fock_a` (rank 2) or, for ranks 2 and 4, a vector of orbital energies (rank 1; ACES4 ignores
/// a rank-1 F for a rank-6 block, we refuse it). A zero D gives ±inf or NaN, as in ACES4.
pub(super) fn energy_denominator_rhf(
    ctx: &mut dyn Context,
    args: &mut [Arg],
) -> Result<(), String> {
    let [block, fock] = args::exactly::<2>(args, "an amplitude block and the Fock matrix")?;
    let rank = block_rank(block, &[2, 4, 6])?;
    let fock_ranks: &[usize] = if rank == 6 { &[2] } else { &[1, 2] };
    let fock = FockDiagonal::new(ctx, fock, 1, fock_ranks)?;
    let e = block_energies(ctx, block, &fock)?;
    apply(&block.shape, &mut block.data, &e, Apply::Divide)
}

/// `energy_ty_denominator_rhf T F shift` (`urr`), the CIS(D) doubles denominator: a rank-4 T is
/// divided by `(((e2 + e4) − e1) − e3) + shift`, with shift the excitation energy ω of the
/// current root (a scalar).
pub(super) fn energy_ty_denominator_rhf(
    ctx: &mut dyn Context,
    args: &mut [Arg],
) -> Result<(), String> {
    let [block, fock, shift] =
        args::exactly::<3>(args, "an amplitude block, the Fock matrix and the shift")?;
    block_rank(block, &[4])?;
    let shift = args::scalar(shift, 2)?;
    let fock = FockDiagonal::new(ctx, fock, 1, &[2])?;
    let e = block_energies(ctx, block, &fock)?;
    apply(
        &block.shape,
        &mut block.data,
        &e,
        Apply::DivideShifted(shift),
    )
}

/// `energy_numerator_rhf T F` (`ur`): like [`energy_denominator_rhf`] with a rank-2 F, but
/// multiplies by D instead of dividing. No ACES4 program calls it.
pub(super) fn energy_numerator_rhf(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [block, fock] = args::exactly::<2>(args, "an amplitude block and the Fock matrix")?;
    block_rank(block, &[2, 4, 6])?;
    let fock = FockDiagonal::new(ctx, fock, 1, &[2])?;
    let e = block_energies(ctx, block, &fock)?;
    apply(&block.shape, &mut block.data, &e, Apply::Multiply)
}

/// Checks that argument 1 is an array of one of `ranks` and returns its rank. ACES4 silently
/// leaves a block of any other rank unchanged, which would leave amplitudes undivided.
fn block_rank(block: &Arg, ranks: &[usize]) -> Result<usize, String> {
    array_arg(block, 0)?;
    let rank = block.shape.len();
    if !ranks.contains(&rank) {
        return Err(format!(
            "{} must be a block of rank {}, got {} (rank {rank})",
            nth(0),
            one_of(ranks),
            block.describe()
        ));
    }
    Ok(rank)
}

/// For each dimension of the block, the Fock diagonal elements of its orbitals in local order,
/// looked up once so that the element loop does arithmetic only.
fn block_energies(
    ctx: &dyn Context,
    block: &Arg,
    fock: &FockDiagonal,
) -> Result<Vec<Vec<f64>>, String> {
    locate(ctx, block, 0)?
        .into_iter()
        .map(|orbitals| fock.energies(orbitals))
        .collect()
}

/// What [`apply`] does with each element `x` and its denominator `D`.
#[derive(Clone, Copy)]
enum Apply {
    /// `x / D`
    Divide,
    /// `x / (D + shift)`
    DivideShifted(f64),
    /// `x * D`
    Multiply,
}

/// Every element of a block of rank 2, 4 or 6 (`e` has one energy vector per dimension) with
/// its denominator D: the energies of the even positions (2, 4, 6) summed, then those of the
/// odd positions (1, 3, 5) subtracted one by one, associated exactly as ACES4 does so that
/// results are bit-identical (`tests::even_minus_odd` spells it out per element). The first index
/// runs innermost: D there is `((c - e₁) - s₃) - s₅` with the rest of the sum fixed, a loop the
/// compiler vectorises (the division led CCSD(T)'s specials element by element).
fn apply(shape: &[usize], data: &mut [f64], e: &[Vec<f64>], op: Apply) -> Result<(), String> {
    let Some((e0, outer)) = e
        .split_first()
        .filter(|(_, o)| [1, 3, 5].contains(&o.len()))
    else {
        return Err(format!(
            "internal: denominators of a block of rank {}",
            e.len()
        ));
    };
    let rows = data.chunks_exact_mut(e0.len().max(1));
    let mut p = vec![0usize; outer.len()];
    for row in rows {
        let at = |d: usize| outer[d][p[d]];
        // Positions 2..=6 of the block are outer[0..5].
        let sums = match outer.len() {
            1 => [at(0), 0.0, 0.0],
            3 => [at(0) + at(2), at(1), 0.0],
            _ => [(at(0) + at(2)) + at(4), at(1), at(3)],
        };
        denominators(row, e0, sums, op);
        for (q, &n) in p.iter_mut().zip(&shape[1..]) {
            *q += 1;
            if *q < n {
                break;
            }
            *q = 0;
        }
    }
    Ok(())
}

/// One row of [`apply`]: D = `((c - e0[i]) - s1) - s2` for element `i` (subtracting 0.0 leaves
/// any value as it is, so ranks 2 and 4 pass zeros).
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn denominators(row: &mut [f64], e0: &[f64], [c, s1, s2]: [f64; 3], op: Apply) {
    let pairs = row.iter_mut().zip(e0);
    match op {
        Apply::Divide => pairs.for_each(|(x, &a)| *x /= ((c - a) - s1) - s2),
        Apply::DivideShifted(w) => pairs.for_each(|(x, &a)| *x /= (((c - a) - s1) - s2) + w),
        Apply::Multiply => pairs.for_each(|(x, &a)| *x *= ((c - a) - s1) - s2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// A context whose MO segment table is `table` for the arrays `t` (every dimension) and
    /// `fock_a` (declared from segment 1).
    fn layout(table: &[usize]) -> Fake {
        let mut ctx = Fake::new();
        let mut first = 0;
        for (s, &n) in table.iter().enumerate() {
            let seg = s as i32 + 1;
            for d in 0..6 {
                ctx.offsets.insert(("t".into(), d, seg), first);
            }
            for d in 0..2 {
                ctx.offsets.insert(("fock_a".into(), d, seg), first);
            }
            first += n;
        }
        ctx.lower.insert(("fock_a".into(), 0), 1);
        ctx.lower.insert(("fock_a".into(), 1), 1);
        ctx
    }

    /// The whole `fock_a` with diagonal `diag` and off-diagonal noise (which must not be read).
    fn fock(diag: &[f64]) -> Arg {
        let n = diag.len();
        let mut data = vec![100.0; n * n];
        for (g, &e) in diag.iter().enumerate() {
            data[g + n * g] = e;
        }
        Arg::whole_array("fock_a", vec![n, n], data)
    }

    /// Column-major position of `p` in an array of shape `shape`.
    fn at(shape: &[usize], p: &[usize]) -> usize {
        p.iter()
            .rev()
            .zip(shape.iter().rev())
            .fold(0, |acc, (&i, &n)| acc * n + i)
    }

    /// Element values 1.0, 1.1, 1.2, ... in storage order.
    fn ramp(n: usize) -> Vec<f64> {
        (0..n).map(|k| 1.0 + 0.1 * k as f64).collect()
    }

    fn ones_block(segments: Vec<i32>, shape: Vec<usize>) -> Arg {
        let n = shape.iter().product();
        Arg::block("t", segments, shape, vec![1.0; n])
    }

    const NOTES_FOCK: [f64; 5] = [-2.0, -1.0, 0.5, 1.0, 3.0];

    #[test]
    fn notes_vector_vovo_and_ovov() {
        // cc_utils.md §14.1: moa [2,3], F = diag(-2,-1,0.5,1,3), blocks of ones.
        let mut ctx = layout(&[2, 3]);
        let mut args = vec![
            ones_block(vec![2, 1, 2, 1], vec![3, 2, 3, 2]),
            fock(&NOTES_FOCK),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 4");
        let s = [3, 2, 3, 2];
        let t = &args[0].data;
        assert_eq!(t[at(&s, &[0, 0, 0, 0])], -0.2);
        assert_eq!(t[at(&s, &[2, 1, 0, 0])], -0.15384615384615385);
        assert_eq!(t[at(&s, &[1, 0, 2, 1])], -0.14285714285714285);
        let mut args = vec![
            ones_block(vec![1, 2, 1, 2], vec![2, 3, 2, 3]),
            fock(&NOTES_FOCK),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 4");
        assert_eq!(args[0].data[0], 0.2);
    }

    #[test]
    fn notes_vector_rank6_with_simple_indices() {
        // cc_utils.md §14.1: T[a=seg2, ii=2, a1=seg2, jj=1, a2=seg2, k1=seg1]; ii and jj are
        // simple indices (no segment table), their values are orbital numbers.
        let mut ctx = layout(&[2, 3]);
        for d in [1, 3] {
            ctx.offsets.retain(|(_, dim, _), _| *dim != d);
        }
        let shape = vec![3, 1, 3, 1, 3, 2];
        let mut args = vec![
            ones_block(vec![2, 2, 2, 1, 2, 1], shape.clone()),
            fock(&NOTES_FOCK),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 6");
        let t = &args[0].data;
        assert_eq!(t[0], -0.15384615384615385);
        assert_eq!(t[at(&shape, &[2, 0, 1, 0, 0, 1])], -0.11764705882352941);
    }

    /// Diagonal used by the numpy cases (tests/data/cc/denominators.py, `FOCK`).
    const FOCK7: [f64; 7] = [-20.5, -1.3, -0.7, -0.55, 0.21, 0.33, 1.7];

    #[test]
    fn rank2_and_rank4_match_the_numpy_model() {
        // Values printed by chemistry/tests/data/cc/denominators.py (cases "rank2", "rank4").
        let mut ctx = layout(&[1, 3, 3]);
        let mut args = vec![
            Arg::block("t", vec![3, 2], vec![3, 3], ramp(9)),
            fock(&FOCK7),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 2");
        let expected2 = [
            -0.6622516556291391,
            -0.6748466257668712,
            -0.39999999999999997,
            -1.4285714285714288,
            -1.3592233009708736,
            -0.625,
            -2.1052631578947367,
            -1.9318181818181817,
            -0.8,
        ];
        assert_bits(&args[0].data, &expected2);

        let shape = vec![3, 3, 3, 1];
        let mut args = vec![
            Arg::block("t", vec![3, 2, 3, 1], shape, ramp(27)),
            fock(&FOCK7),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 4");
        let expected4 = [
            -0.045004500450045,
            -0.049239033124440466,
            -0.05061155630535639,
            -0.060129509713228495,
            -0.06439742410303588,
            -0.06490696668109044,
            -0.07452258965999069,
            -0.07874015748031497,
            -0.078397212543554,
            -0.08504923903312443,
            -0.08904719501335709,
            -0.08812421317666808,
            -0.10119595216191354,
            -0.10521500457456542,
            -0.10331467929401639,
            -0.1157943492357573,
            -0.11976047904191618,
            -0.11698440207972272,
            -0.1180936313791649,
            -0.12169534200587497,
            -0.11904761904761905,
            -0.13414106447425359,
            -0.13775290572535517,
            -0.13414634146341467,
            -0.1480836236933798,
            -0.1516464471403813,
            -0.147239263803681,
        ];
        assert_bits(&args[0].data, &expected4);
    }

    fn assert_bits(got: &[f64], expected: &[f64]) {
        assert_eq!(got.len(), expected.len());
        for (k, (g, e)) in got.iter().zip(expected).enumerate() {
            assert_eq!(g.to_bits(), e.to_bits(), "element {k}: {g} != {e}");
        }
    }

    #[test]
    fn rank6_matches_the_numpy_model_with_a_frozen_core_layout() {
        // lamccsdpt-like table [1,4,2]: core alone in segment 1. T[a=3, ii=3, a1=3, jj=5,
        // a2=3, k1=2]; values from tests/data/cc/denominators.py (case "rank6").
        let mut ctx = layout(&[1, 4, 2]);
        for d in [1, 3] {
            ctx.offsets.retain(|(_, dim, _), _| *dim != d);
        }
        let shape = vec![2, 1, 2, 1, 2, 4];
        let mut args = vec![
            Arg::block("t", vec![3, 3, 3, 5, 3, 2], shape, ramp(32)),
            fock(&FOCK7),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 6");
        let expected = [
            -0.3597122302158273,
            -0.26506024096385544,
            -0.2891566265060241,
            -0.23550724637681159,
            -0.3373493975903614,
            -0.2717391304347826,
            -0.2898550724637681,
            -0.2467343976777939,
            -0.8256880733944953,
            -0.5352112676056338,
            -0.5633802816901409,
            -0.426829268292683,
            -0.619718309859155,
            -0.46747967479674796,
            -0.4878048780487806,
            -0.397456279809221,
            -1.2807881773399015,
            -0.7941176470588235,
            -0.8235294117647057,
            -0.6079664570230608,
            -0.8823529411764705,
            -0.649895178197065,
            -0.670859538784067,
            -0.5374592833876222,
            -2.6771653543307083,
            -1.3257575757575757,
            -1.3636363636363635,
            -0.9226932668329177,
            -1.4393939393939394,
            -0.9725685785536161,
            -0.9975062344139651,
            -0.762081784386617,
        ];
        assert_bits(&args[0].data, &expected);
    }

    #[test]
    fn an_extent_one_mo_segment_uses_its_true_offset() {
        // moa [1,4,1,5]: segment 3 holds orbital 6 alone. ACES4's rank-6 rule would read
        // F(3,3) for it; the segment table gives F(6,6). Segment 1 (orbital 1, extent 1) is
        // where both rules agree.
        let mut ctx = layout(&[1, 4, 1, 5]);
        let diag: Vec<f64> = (1..=11).map(|g| g as f64).collect();
        let mut args = vec![
            ones_block(vec![3, 1, 4, 1, 4, 1], vec![1, 1, 1, 1, 1, 1]),
            fock(&diag),
        ];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 6");
        // D = (e1 + e1 + e1) - e6 - e7 - e7 = 3 - 20
        assert_eq!(args[0].data, vec![1.0 / -17.0]);
    }

    #[test]
    fn a_fock_matrix_declared_from_a_later_segment_is_located() {
        // fock over segments 2..3 of [2,3,2] (orbitals 3..7): F(g,g) = 10 g at local g - 3.
        let mut ctx = layout(&[2, 3, 2]);
        ctx.offsets.retain(|(name, _, _), _| name == "t");
        for d in 0..2 {
            ctx.lower.insert(("fock_a".into(), d), 2);
            ctx.offsets.insert(("fock_a".into(), d, 2), 2);
        }
        let diag: Vec<f64> = (3..=7).map(|g| 10.0 * g as f64).collect();
        let mut args = vec![ones_block(vec![3, 2], vec![2, 3]), fock(&diag)];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 2");
        // e(i) - e(a): i = 3,4,5 columns, a = 6,7 rows.
        let expected: Vec<f64> = [3.0, 4.0, 5.0]
            .iter()
            .flat_map(|i| [6.0, 7.0].map(|a: f64| 1.0 / (10.0 * i - 10.0 * a)))
            .collect();
        assert_eq!(args[0].data, expected);
        // Orbital 1 is below this Fock matrix.
        let mut args = vec![ones_block(vec![1, 1], vec![2, 2]), fock(&diag)];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("argument 2 (the Fock matrix fock_a) has no diagonal element for orbital 1: it covers orbitals 3 to 7".into())
        );
    }

    #[test]
    fn a_vector_of_orbital_energies_serves_ranks_2_and_4() {
        let mut ctx = layout(&[2, 3]);
        let e = Arg::whole_array("fock_a", vec![5], NOTES_FOCK.to_vec());
        ctx.lower.remove(&("fock_a".into(), 1));
        let mut args = vec![ones_block(vec![2, 1, 2, 1], vec![3, 2, 3, 2]), e.clone()];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 4");
        assert_eq!(args[0].data[0], -0.2);
        let mut args = vec![ones_block(vec![1, 2], vec![2, 3]), e.clone()];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 2");
        // e_a - e_i for i = 1, a = 3: 0.5 - (-2)
        assert_eq!(args[0].data[0], 1.0 / 2.5);
        let mut args = vec![
            ones_block(vec![2, 1, 2, 1, 2, 1], vec![3, 2, 3, 2, 3, 2]),
            e,
        ];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err(
                "argument 2 (the Fock matrix) must be an array of rank 2, got fock_a (rank 1)"
                    .into()
            )
        );
    }

    #[test]
    fn a_zero_denominator_gives_infinity_as_in_aces4() {
        let mut ctx = layout(&[1, 1]);
        let mut args = vec![ones_block(vec![1, 2], vec![1, 1]), fock(&[0.5, 0.5])];
        energy_denominator_rhf(&mut ctx, &mut args).expect("rank 2");
        assert_eq!(args[0].data, vec![f64::INFINITY]);
    }

    #[test]
    fn denominator_errors_name_the_argument() {
        let mut ctx = layout(&[2, 3]);
        let mut args = vec![ones_block(vec![2, 1, 2], vec![3, 2, 3])];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("expects 2 arguments (an amplitude block and the Fock matrix), got 1".into())
        );
        let mut args = vec![ones_block(vec![2, 1, 2], vec![3, 2, 3]), fock(&NOTES_FOCK)];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("argument 1 must be a block of rank 2, 4 or 6, got t[2,1,2] (rank 3)".into())
        );
        let mut args = vec![Arg::scalar("x", 1.0), fock(&NOTES_FOCK)];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("argument 1 must be an array or a block, got x".into())
        );
        let cube = Arg::whole_array("fock_a", vec![5, 5, 1], vec![0.0; 25]);
        let mut args = vec![ones_block(vec![2, 1], vec![3, 2]), cube];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err(
                "argument 2 (the Fock matrix) must be an array of rank 1 or 2, got fock_a (rank 3)"
                    .into()
            )
        );
        let mut args = vec![ones_block(vec![2, 1], vec![3, 2]), Arg::literal(1.0)];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("argument 2 must be an array or a block, got literal 1".into())
        );
        // A segment beyond the Fock matrix.
        ctx.offsets.insert(("t".into(), 0, 3), 5);
        let mut args = vec![ones_block(vec![3, 1], vec![2, 2]), fock(&NOTES_FOCK)];
        assert_eq!(
            energy_denominator_rhf(&mut ctx, &mut args),
            Err("argument 2 (the Fock matrix fock_a) has no diagonal element for orbital 6: it covers orbitals 1 to 5".into())
        );
    }

    #[test]
    fn ty_denominator_adds_the_shift() {
        // Values printed by tests/data/cc/denominators.py (case "ty").
        let mut ctx = layout(&[1, 3, 3]);
        let shape = vec![3, 3, 3, 1];
        let mut args = vec![
            Arg::block("t", vec![3, 2, 3, 1], shape, ramp(27)),
            fock(&FOCK7),
            Arg::scalar("shift", 0.375),
        ];
        energy_ty_denominator_rhf(&mut ctx, &mut args).expect("rank 4");
        let expected = [
            -0.04577706569008926,
            -0.05007967220578193,
            -0.0514248982215556,
            -0.06119086843963285,
            -0.06552773227240814,
            -0.06597756762700682,
            -0.07584735719364778,
            -0.08013198208814519,
            -0.07969891520920964,
            -0.08650125199180514,
            -0.09055920307901291,
            -0.08953314858239182,
            -0.10297215071378424,
            -0.10705143123109147,
            -0.10500984467293811,
            -0.11784115012962526,
            -0.12186547925943288,
            -0.11891653820744331,
            -0.11999142918362973,
            -0.1236410147090173,
            -0.12084592145015106,
            -0.13635363976248077,
            -0.14001312623058415,
            -0.13622291021671828,
            -0.1505423953951738,
            -0.15415106804668577,
            -0.14953271028037385,
        ];
        assert_bits(&args[0].data, &expected);
    }

    #[test]
    fn ty_denominator_errors() {
        let mut ctx = layout(&[2, 3]);
        let mut args = vec![ones_block(vec![2, 1], vec![3, 2]), fock(&NOTES_FOCK)];
        assert_eq!(
            energy_ty_denominator_rhf(&mut ctx, &mut args),
            Err(
                "expects 3 arguments (an amplitude block, the Fock matrix and the shift), got 2"
                    .into()
            )
        );
        let mut args = vec![
            ones_block(vec![2, 1], vec![3, 2]),
            fock(&NOTES_FOCK),
            Arg::scalar("shift", 0.5),
        ];
        assert_eq!(
            energy_ty_denominator_rhf(&mut ctx, &mut args),
            Err("argument 1 must be a block of rank 4, got t[2,1] (rank 2)".into())
        );
        let mut args = vec![
            ones_block(vec![2, 1, 2, 1], vec![3, 2, 3, 2]),
            fock(&NOTES_FOCK),
            Arg::block("w", vec![1], vec![2], vec![0.0; 2]),
        ];
        assert_eq!(
            energy_ty_denominator_rhf(&mut ctx, &mut args),
            Err("argument 3 must be a scalar, got w[1] with 2 elements".into())
        );
        let mut args = vec![
            ones_block(vec![2, 1, 2, 1], vec![3, 2, 3, 2]),
            Arg::whole_array("fock_a", vec![5], NOTES_FOCK.to_vec()),
            Arg::scalar("shift", 0.5),
        ];
        assert_eq!(
            energy_ty_denominator_rhf(&mut ctx, &mut args),
            Err(
                "argument 2 (the Fock matrix) must be an array of rank 2, got fock_a (rank 1)"
                    .into()
            )
        );
    }

    #[test]
    fn numerator_multiplies_at_every_rank() {
        let mut ctx = layout(&[2, 3]);
        for d in [1, 3] {
            ctx.offsets.retain(|(_, dim, _), _| *dim != d);
        }
        let mut args = vec![
            ones_block(vec![2, 2, 2, 1, 2, 1], vec![3, 1, 3, 1, 3, 2]),
            fock(&NOTES_FOCK),
        ];
        energy_numerator_rhf(&mut ctx, &mut args).expect("rank 6");
        // (((e2 + e1) + e1) - e3) - e3 - e3 = -5 - 1.5
        assert_eq!(args[0].data[0], -6.5);
        let mut ctx = layout(&[2, 3]);
        let mut args = vec![
            ones_block(vec![2, 1, 2, 1], vec![3, 2, 3, 2]),
            fock(&NOTES_FOCK),
        ];
        energy_numerator_rhf(&mut ctx, &mut args).expect("rank 4");
        assert_eq!(args[0].data[0], -5.0);
        let mut args = vec![
            Arg::block("t", vec![2, 1], vec![3, 2], vec![2.0; 6]),
            fock(&NOTES_FOCK),
        ];
        energy_numerator_rhf(&mut ctx, &mut args).expect("rank 2");
        // 2 (e_i - e_a), a = 3..5 rows, i = 1..2 columns
        assert_eq!(args[0].data, vec![-5.0, -6.0, -10.0, -3.0, -4.0, -8.0]);
    }

    #[test]
    fn numerator_errors() {
        let mut ctx = layout(&[2, 3]);
        let mut args = vec![ones_block(vec![2], vec![3]), fock(&NOTES_FOCK)];
        assert_eq!(
            energy_numerator_rhf(&mut ctx, &mut args),
            Err("argument 1 must be a block of rank 2, 4 or 6, got t[2] (rank 1)".into())
        );
        let mut args = vec![
            ones_block(vec![2, 1], vec![3, 2]),
            Arg::whole_array("fock_a", vec![5], NOTES_FOCK.to_vec()),
        ];
        assert_eq!(
            energy_numerator_rhf(&mut ctx, &mut args),
            Err(
                "argument 2 (the Fock matrix) must be an array of rank 2, got fock_a (rank 1)"
                    .into()
            )
        );
        let mut args = vec![ones_block(vec![2, 1], vec![3, 2])];
        assert_eq!(
            energy_numerator_rhf(&mut ctx, &mut args),
            Err("expects 2 arguments (an amplitude block and the Fock matrix), got 1".into())
        );
    }

    /// D of the element at local position `p`, as ACES4 associates it: the energies of the
    /// even positions (2, 4, 6) summed, then those of the odd positions subtracted one by one.
    fn even_minus_odd(e: &[Vec<f64>], p: &[usize]) -> f64 {
        let at = |d: usize| e[d][p[d]];
        match e.len() {
            2 => at(1) - at(0),
            4 => ((at(1) + at(3)) - at(0)) - at(2),
            _ => ((((at(1) + at(3)) + at(5)) - at(0)) - at(2)) - at(4),
        }
    }

    #[test]
    fn rows_give_the_bits_of_the_element_by_element_sums() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        };
        for shape in [
            vec![5, 3],
            vec![7, 2, 9, 3],
            vec![3, 1, 4, 1, 5, 2],
            vec![17, 2, 3, 2, 2, 3],
        ] {
            let e: Vec<Vec<f64>> = shape
                .iter()
                .map(|&n| (0..n).map(|_| next()).collect())
                .collect();
            let n = shape.iter().product();
            let data: Vec<f64> = (0..n).map(|_| next()).collect();
            for op in [Apply::Divide, Apply::DivideShifted(0.37), Apply::Multiply] {
                let mut got = data.clone();
                apply(&shape, &mut got, &e, op).expect("rank 2, 4 or 6");
                let mut want = data.clone();
                super::super::update_each(&shape, &mut want, |p, x| {
                    let d = even_minus_odd(&e, p);
                    match op {
                        Apply::Divide => x / d,
                        Apply::DivideShifted(w) => x / (d + w),
                        Apply::Multiply => x * d,
                    }
                });
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{shape:?}");
            }
        }
        let mut odd = vec![1.0; 6];
        assert!(
            apply(
                &[2, 3, 1],
                &mut odd,
                &[vec![0.0; 2], vec![0.0; 3], vec![0.0]],
                Apply::Divide
            )
            .is_err()
        );
    }
}
