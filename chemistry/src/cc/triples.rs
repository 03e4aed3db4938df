//! Helpers of the CCSD(T) and Λ-CCSD(T) programs (`rccsdpt_*`, `rlamccsdpt_*`): `stripi` takes
//! the slice of one occupied orbital out of a block, `set_ijk_*` lists the (i, j, k) work items
//! (occupied segment triples cut into chunks of a few orbitals).

use sial_superinstructions::special::{Arg, Context};

use super::{Orbitals, array_arg, array_of_rank, locate, nth, one_of};
use crate::args;

/// `stripi X Y` (`ru`): `Y[x1,…,x(r−1), s] = X[x1,…,x(r−1), s]` for X of rank r = 2, 3 or 4,
/// where Y's last dimension is a simple index whose value s is an occupied orbital inside X's
/// last segment (`stripi t4pppp[a1,a2,k1,j1] t2ppps[a1,a2,k1,jj]`). The first r − 1 dimensions
/// of X and Y must cover the same orbitals (ACES4 writes out of Y's bounds otherwise); ACES4
/// silently ignores other ranks, we refuse them.
pub(super) fn stripi(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [x, y] = args::exactly::<2>(
        args,
        "a block and a block whose last index is a simple index",
    )?;
    array_arg(x, 0)?;
    let rank = x.shape.len();
    if !(2..=4).contains(&rank) {
        return Err(format!(
            "{} must be a block of rank {}, got {} (rank {rank})",
            nth(0),
            one_of(&[2, 3, 4]),
            x.describe()
        ));
    }
    array_of_rank(y, 1, rank)?;
    let from = locate(ctx, x, 0)?;
    let to = locate(ctx, y, 1)?;
    same_leading_orbitals(x, &from, y, &to)?;
    let orbital = stripped_orbital(x, from[rank - 1], y, to[rank - 1])?;
    let slice: usize = x.shape[..rank - 1].iter().product();
    let start = slice * (orbital - from[rank - 1].first);
    y.data.copy_from_slice(&x.data[start..start + slice]);
    Ok(())
}

/// Checks that dimensions 1..r−1 of X and Y cover the same orbitals, so that the slice of X has
/// Y's shape.
fn same_leading_orbitals(
    x: &Arg,
    from: &[Orbitals],
    y: &Arg,
    to: &[Orbitals],
) -> Result<(), String> {
    let leading = from.len() - 1;
    for (d, (f, t)) in from.iter().zip(to).take(leading).enumerate() {
        if f != t {
            return Err(format!(
                "dimension {} of {} ({}) covers orbitals {}, but that of {} ({}) covers orbitals {}",
                d + 1,
                nth(1),
                y.describe(),
                t.range_text(),
                nth(0),
                x.describe(),
                f.range_text()
            ));
        }
    }
    Ok(())
}

/// The 0-based orbital that Y's last dimension holds (the simple index value minus 1), checked
/// to be one orbital among those of X's last dimension.
fn stripped_orbital(x: &Arg, from: Orbitals, y: &Arg, to: Orbitals) -> Result<usize, String> {
    if to.count != 1 {
        return Err(format!(
            "the last dimension of {} ({}) must hold one orbital (a simple index), it covers orbitals {}",
            nth(1),
            y.describe(),
            to.range_text()
        ));
    }
    if !from.contains(to.first) {
        return Err(format!(
            "orbital {} (the last index of {}, {}) is not among the orbitals {} of the last dimension of {} ({})",
            to.first + 1,
            nth(1),
            y.describe(),
            from.range_text(),
            nth(0),
            x.describe()
        ));
    }
    Ok(to.first)
}

/// Rows of the `Xijk` table: ACES4 declares `static Xijk[NT,i7]` with `NT = 1:10000`, `i7 = 1:7`.
const ROWS: usize = 10000;
/// Columns of a row: i, first and last orbital of i's chunk, j, first and last orbital of j's
/// chunk, k.
const COLUMNS: usize = 7;
/// ACES4's hard-coded largest chunk, in orbitals, before it is shrunk for small segments.
const LARGEST_CHUNK: usize = 5;

/// `set_ijk_aaa Xijk` (`w`): the (T) work list of the same-spin triples, i ≤ j ≤ k.
pub(super) fn set_ijk_aaa(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    set_ijk(ctx, args, Triples::Ordered)
}

/// `set_ijk_aab Xijk` (`w`): the (T) work list of the mixed-spin triples, i ≤ j, every k.
pub(super) fn set_ijk_aab(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    set_ijk(ctx, args, Triples::EveryK)
}

/// Which segment k goes with a pair i ≤ j.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Triples {
    /// k ≥ j (`set_ijk_aaa`).
    Ordered,
    /// every k (`set_ijk_aab`).
    EveryK,
}

/// An occupied segment: its first orbital (1-based, as the table holds it) and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    first: usize,
    size: usize,
}

/// Fills argument 1 (the 10000 × 7 `Xijk`) with the rows of [`table_rows`] for the occupied
/// segments `baocc..eaocc`, then a sentinel row of −1, then zeros (ACES4's work array is zero
/// on the first call). The programs scan the rows up to the sentinel.
///
/// The segment sizes come from the setup array `moa_seg_ranges`, as in ACES4: the argument is
/// over simple indices, so the runtime's segment tables cannot be reached through it. ACES4
/// also reads `naocc` without using it; we do not require it.
///
/// Beyond ACES4's fixed-size work arrays (more than 10 occupied segments or 10 chunks in one),
/// where ACES4's behaviour is undefined and its -O2 build gave the natural continuation, we give
/// that continuation. Where ACES4 fails (chunk size 0: division by zero; more than 9999 rows)
/// we return an error.
fn set_ijk(ctx: &mut dyn Context, args: &mut [Arg], triples: Triples) -> Result<(), String> {
    let [table] = args::exactly::<1>(args, "the array Xijk")?;
    array_of_rank(table, 0, 2)?;
    if table.shape != [ROWS, COLUMNS] {
        return Err(format!(
            "{} ({}) must be a {ROWS} x {COLUMNS} array, it is {} x {}",
            nth(0),
            table.describe(),
            table.shape[0],
            table.shape[1]
        ));
    }
    let segments = occupied_segments(ctx)?;
    let chunk = chunk_size(&segments)?;
    let count = row_count(&segments, chunk, triples);
    if count >= ROWS as u128 {
        return Err(format!(
            "the occupied segments give {count} (i, j, k) rows, more than the {} that fit in {} ({})",
            ROWS - 1,
            nth(0),
            table.describe()
        ));
    }
    let rows = table_rows(&segments, chunk, triples);
    table.data.fill(0.0);
    let sentinel = [-1.0; COLUMNS];
    for (r, row) in rows.iter().chain([&sentinel]).enumerate() {
        for (c, &value) in row.iter().enumerate() {
            table.data[args::at(ROWS, r, c)] = value;
        }
    }
    Ok(())
}

/// The occupied segments `baocc..eaocc` (setup ints) with their sizes from the moaindex segment
/// table (or, without one, `moa_seg_ranges`)
/// and their first orbitals counted from orbital 1 (a frozen core in segment 1 shifts them).
fn occupied_segments(ctx: &dyn Context) -> Result<Vec<Segment>, String> {
    let baocc = args::int_constant(ctx, "baocc")?;
    let eaocc = args::int_constant(ctx, "eaocc")?;
    // The job's moaindex segment table; ACES4 reads the same numbers from `moa_seg_ranges`.
    let sizes: Vec<i64> = match ctx.segment_extents("moaindex") {
        Some(extents) => extents.iter().map(|&e| e as i64).collect(),
        None => args::int_array(ctx, "moa_seg_ranges")?,
    };
    let last = usize::try_from(eaocc).unwrap_or(0);
    if baocc < 1 || eaocc < baocc || last > sizes.len() {
        return Err(format!(
            "the occupied segments baocc = {baocc} to eaocc = {eaocc} are not among the {} segments of moa_seg_ranges",
            sizes.len()
        ));
    }
    let mut segments = Vec::new();
    let mut first = 1;
    for (s, &size) in sizes.iter().enumerate().take(last) {
        let size = usize::try_from(size)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("moa_seg_ranges gives segment {} {size} orbitals", s + 1))?;
        if s + 1 >= baocc as usize {
            segments.push(Segment { first, size });
        }
        first = first
            .checked_add(size)
            .ok_or_else(|| format!("moa_seg_ranges gives segment {} {size} orbitals", s + 1))?;
    }
    Ok(segments)
}

/// ACES4's chunk size: 5 orbitals, less one for every occupied segment (in order) not larger
/// than the current size. Five small segments bring it to 0, where ACES4 divides by zero.
fn chunk_size(segments: &[Segment]) -> Result<usize, String> {
    let mut chunk = LARGEST_CHUNK;
    for s in segments {
        if chunk >= s.size {
            chunk -= 1;
        }
    }
    if chunk == 0 {
        let sizes: Vec<usize> = segments.iter().map(|s| s.size).collect();
        return Err(format!(
            "the occupied segments of sizes {sizes:?} shrink the (T) chunk of {LARGEST_CHUNK} orbitals to 0, where ACES4 divides by zero (use fewer or larger occupied segments)"
        ));
    }
    Ok(chunk)
}

/// Cuts a segment into ⌈size / chunk⌉ consecutive chunks of ⌊size / count⌋ orbitals, the last
/// taking the rest (it may exceed `chunk`); returns (first, last) orbital of each.
fn split(segment: Segment, chunk: usize) -> Vec<(usize, usize)> {
    let count = segment.size.div_ceil(chunk);
    let each = segment.size / count;
    let end = segment.first + segment.size - 1;
    (0..count)
        .map(|c| {
            let first = segment.first + c * each;
            let last = if c + 1 == count {
                end
            } else {
                first + each - 1
            };
            (first, last)
        })
        .collect()
}

/// How many rows [`table_rows`] gives, counted without listing them (a nonsensical setup could
/// ask for more rows than memory holds): Σ over segment pairs i ≤ j of chunks(i) · chunks(j) ·
/// (number of k).
fn row_count(segments: &[Segment], chunk: usize, triples: Triples) -> u128 {
    let chunks: Vec<u128> = segments
        .iter()
        .map(|s| s.size.div_ceil(chunk) as u128)
        .collect();
    let n = chunks.len();
    let mut total: u128 = 0;
    for (i, &ci) in chunks.iter().enumerate() {
        for (j, &cj) in chunks.iter().enumerate().skip(i) {
            let ks = match triples {
                Triples::Ordered => n - j,
                Triples::EveryK => n,
            };
            total = total.saturating_add(ci.saturating_mul(cj).saturating_mul(ks as u128));
        }
    }
    total
}

/// The rows in ACES4's order: i over segments and its chunks, j over segments and its chunks,
/// kept when i ≤ j (segment positions, so two chunks of one segment pair both ways), then k
/// over segments (k ≥ j for [`Triples::Ordered`]). i, j, k count from 1 = segment baocc.
fn table_rows(segments: &[Segment], chunk: usize, triples: Triples) -> Vec<[f64; COLUMNS]> {
    let chunks: Vec<Vec<(usize, usize)>> = segments.iter().map(|&s| split(s, chunk)).collect();
    let mut rows = Vec::new();
    for (i, i_chunks) in chunks.iter().enumerate() {
        for &(i_first, i_last) in i_chunks {
            for (j, j_chunks) in chunks.iter().enumerate().skip(i) {
                for &(j_first, j_last) in j_chunks {
                    let ks = match triples {
                        Triples::Ordered => j..segments.len(),
                        Triples::EveryK => 0..segments.len(),
                    };
                    for k in ks {
                        rows.push(
                            [i + 1, i_first, i_last, j + 1, j_first, j_last, k + 1]
                                .map(|v| v as f64),
                        );
                    }
                }
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// The rows of a filled Xijk up to and including the sentinel, as integers.
    fn listed(table: &Arg) -> Vec<[i64; COLUMNS]> {
        let mut rows = Vec::new();
        for r in 0..ROWS {
            let row: [i64; COLUMNS] =
                std::array::from_fn(|c| table.data[args::at(ROWS, r, c)] as i64);
            rows.push(row);
            if row[0] < 0 {
                break;
            }
        }
        rows
    }

    fn xijk() -> Arg {
        Arg::whole_array("xijk", vec![ROWS, COLUMNS], vec![0.0; ROWS * COLUMNS])
    }

    fn setup(table: &[i64], baocc: i32, eaocc: i32) -> Fake {
        let mut ctx = Fake::new();
        ctx.ints.insert("baocc".into(), baocc);
        ctx.ints.insert("eaocc".into(), eaocc);
        ctx.ints.insert("naocc".into(), 5);
        ctx.int_arrays
            .insert("moa_seg_ranges".into(), (vec![table.len()], table.to_vec()));
        ctx
    }

    fn run(
        f: fn(&mut dyn Context, &mut [Arg]) -> Result<(), String>,
        ctx: &mut Fake,
    ) -> Result<Vec<[i64; COLUMNS]>, String> {
        let mut args = vec![xijk()];
        f(ctx, &mut args)?;
        let rows = listed(&args[0]);
        let after: f64 = args[0].data.iter().map(|v| v.abs()).sum::<f64>()
            - rows.iter().flatten().map(|&v| v.abs() as f64).sum::<f64>();
        assert_eq!(after, 0.0, "everything after the sentinel is zero");
        Ok(rows)
    }

    const END: [i64; 7] = [-1; 7];

    #[test]
    fn one_occupied_segment_of_five() {
        // cc_utils.md §5.2: second_ccsdpt / ccsdpt (moa [5,6]): chunks 1-2 and 3-5.
        let expected = vec![
            [1, 1, 2, 1, 1, 2, 1],
            [1, 1, 2, 1, 3, 5, 1],
            [1, 3, 5, 1, 1, 2, 1],
            [1, 3, 5, 1, 3, 5, 1],
            END,
        ];
        let mut ctx = setup(&[5, 6], 1, 1);
        assert_eq!(run(set_ijk_aaa, &mut ctx), Ok(expected.clone()));
        assert_eq!(run(set_ijk_aab, &mut ctx), Ok(expected));
    }

    #[test]
    fn a_frozen_core_in_segment_one_shifts_the_orbitals() {
        // cc_utils.md §5.2: lamccsdpt (moa [1,4,6], baocc = eaocc = 2).
        let expected = vec![[1, 2, 5, 1, 2, 5, 1], END];
        let mut ctx = setup(&[1, 4, 6], 2, 2);
        assert_eq!(run(set_ijk_aaa, &mut ctx), Ok(expected.clone()));
        assert_eq!(run(set_ijk_aab, &mut ctx), Ok(expected));
    }

    #[test]
    fn two_occupied_segments_notes_vector() {
        // cc_utils.md §14.2: moa [5,5,8,8], baocc 1, eaocc 2.
        let mut ctx = setup(&[5, 5, 8, 8], 1, 2);
        let aaa = run(set_ijk_aaa, &mut ctx).expect("aaa");
        let mut expected = vec![
            [1, 1, 2, 1, 1, 2, 1],
            [1, 1, 2, 1, 1, 2, 2],
            [1, 1, 2, 1, 3, 5, 1],
            [1, 1, 2, 1, 3, 5, 2],
            [1, 1, 2, 2, 6, 7, 2],
            [1, 1, 2, 2, 8, 10, 2],
            [1, 3, 5, 1, 1, 2, 1],
            [1, 3, 5, 1, 1, 2, 2],
            [1, 3, 5, 1, 3, 5, 1],
            [1, 3, 5, 1, 3, 5, 2],
            [1, 3, 5, 2, 6, 7, 2],
            [1, 3, 5, 2, 8, 10, 2],
            [2, 6, 7, 2, 6, 7, 2],
            [2, 6, 7, 2, 8, 10, 2],
            [2, 8, 10, 2, 6, 7, 2],
            [2, 8, 10, 2, 8, 10, 2],
        ];
        expected.push(END);
        assert_eq!(aaa, expected);
        let aab = run(set_ijk_aab, &mut ctx).expect("aab");
        assert_eq!(aab.len(), 24 + 1);
        // The aab rows from the numpy model (tests/data/cc/set_ijk.py, case "[5,5] aab").
        assert_eq!(
            aab[..8],
            [
                [1, 1, 2, 1, 1, 2, 1],
                [1, 1, 2, 1, 1, 2, 2],
                [1, 1, 2, 1, 3, 5, 1],
                [1, 1, 2, 1, 3, 5, 2],
                [1, 1, 2, 2, 6, 7, 1],
                [1, 1, 2, 2, 6, 7, 2],
                [1, 1, 2, 2, 8, 10, 1],
                [1, 1, 2, 2, 8, 10, 2],
            ]
        );
        assert_eq!(aab[23], [2, 8, 10, 2, 8, 10, 2]);
    }

    #[test]
    fn small_segments_shrink_the_chunk() {
        // cc_utils.md §14.2: five segments of 2 → chunk 1, 140 aaa rows; numpy model
        // (tests/data/cc/set_ijk.py, case "[2]*5") gives 300 aab rows and the rows checked here.
        let mut ctx = setup(&[2, 2, 2, 2, 2, 9], 1, 5);
        let aaa = run(set_ijk_aaa, &mut ctx).expect("aaa");
        assert_eq!(aaa.len(), 140 + 1);
        assert_eq!(aaa[0], [1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(aaa[1], [1, 1, 1, 1, 1, 1, 2]);
        assert_eq!(aaa[139], [5, 10, 10, 5, 10, 10, 5]);
        let aab = run(set_ijk_aab, &mut ctx).expect("aab");
        assert_eq!(aab.len(), 300 + 1);
        assert_eq!(aab[299], [5, 10, 10, 5, 10, 10, 5]);
    }

    #[test]
    fn many_segments_and_oversized_last_chunks_continue_naturally() {
        // Beyond ACES4's fixed arrays (more than 10 segments, more than 10 chunks in a
        // segment), where ACES4's -O2 build gave the natural continuation: numpy model
        // (tests/data/cc/set_ijk.py, cases "[6]*12" and "[51]").
        let mut ctx = setup(&[6; 12], 1, 12);
        let aaa = run(set_ijk_aaa, &mut ctx).expect("aaa");
        assert_eq!(aaa.len(), 1456 + 1);
        assert_eq!(aaa[0], [1, 1, 3, 1, 1, 3, 1]);
        assert_eq!(aaa[1221], [6, 34, 36, 10, 55, 57, 11]);
        assert_eq!(aaa[1455], [12, 70, 72, 12, 70, 72, 12]);
        let aab = run(set_ijk_aab, &mut ctx).expect("aab");
        assert_eq!(aab.len(), 3744 + 1);
        let mut ctx = setup(&[51, 10], 1, 1);
        let aaa = run(set_ijk_aaa, &mut ctx).expect("aaa");
        assert_eq!(aaa.len(), 121 + 1);
        assert_eq!(aaa[10], [1, 1, 4, 1, 41, 51, 1]);
        assert_eq!(aaa[120], [1, 41, 51, 1, 41, 51, 1]);
    }

    #[test]
    fn rows_are_counted_as_they_are_listed() {
        for sizes in [&[5][..], &[3, 7, 1], &[2, 2, 2, 2, 2], &[6; 12], &[51, 4]] {
            let segments: Vec<Segment> = sizes
                .iter()
                .scan(1, |first, &size| {
                    let s = Segment {
                        first: *first,
                        size,
                    };
                    *first += size;
                    Some(s)
                })
                .collect();
            let chunk = chunk_size(&segments).expect("chunk");
            for triples in [Triples::Ordered, Triples::EveryK] {
                let listed = table_rows(&segments, chunk, triples).len() as u128;
                assert_eq!(row_count(&segments, chunk, triples), listed, "{sizes:?}");
            }
        }
    }

    #[test]
    fn five_one_orbital_segments_are_refused() {
        // cc_utils.md §14.2: ACES4 dies with SIGFPE.
        let mut ctx = setup(&[1, 1, 1, 1, 1, 7], 1, 5);
        let err = "the occupied segments of sizes [1, 1, 1, 1, 1] shrink the (T) chunk of 5 orbitals to 0, where ACES4 divides by zero (use fewer or larger occupied segments)";
        assert_eq!(run(set_ijk_aaa, &mut ctx), Err(err.into()));
        assert_eq!(run(set_ijk_aab, &mut ctx), Err(err.into()));
    }

    #[test]
    fn a_table_longer_than_xijk_is_refused() {
        // numpy model (tests/data/cc/set_ijk.py, case "[6]*20"): 16800 aab rows.
        let mut ctx = setup(&[6; 20], 1, 20);
        assert_eq!(
            run(set_ijk_aab, &mut ctx),
            Err("the occupied segments give 16800 (i, j, k) rows, more than the 9999 that fit in argument 1 (xijk)".into())
        );
    }

    #[test]
    fn absurd_segment_sizes_are_refused_without_listing_the_rows() {
        // One segment of 10^12 orbitals: chunk 5, 2·10^11 chunks, (2·10^11)² aaa rows.
        let mut ctx = setup(&[1_000_000_000_000], 1, 1);
        assert_eq!(
            run(set_ijk_aaa, &mut ctx),
            Err("the occupied segments give 40000000000000000000000 (i, j, k) rows, more than the 9999 that fit in argument 1 (xijk)".into())
        );
        // Orbital numbers beyond usize.
        let mut ctx = setup(&[i64::MAX; 3], 1, 3);
        assert_eq!(
            run(set_ijk_aaa, &mut ctx),
            Err(format!(
                "moa_seg_ranges gives segment 3 {} orbitals",
                i64::MAX
            ))
        );
    }

    #[test]
    fn set_ijk_setup_errors() {
        let mut ctx = setup(&[5, 6], 1, 1);
        ctx.ints.remove("eaocc");
        assert_eq!(
            run(set_ijk_aaa, &mut ctx),
            Err(
                "the setup has no predefined int eaocc (give it in the job file or with --set)"
                    .into()
            )
        );
        let mut ctx = setup(&[5, 6], 1, 1);
        ctx.int_arrays.clear();
        assert_eq!(
            run(set_ijk_aab, &mut ctx),
            Err("the setup has no predefined int array moa_seg_ranges".into())
        );
        let mut ctx = setup(&[5, 6], 1, 3);
        let beyond = "the occupied segments baocc = 1 to eaocc = 3 are not among the 2 segments of moa_seg_ranges";
        assert_eq!(run(set_ijk_aaa, &mut ctx), Err(beyond.into()));
        let mut ctx = setup(&[5, 6], 2, 1);
        assert_eq!(
            run(set_ijk_aaa, &mut ctx),
            Err("the occupied segments baocc = 2 to eaocc = 1 are not among the 2 segments of moa_seg_ranges".into())
        );
        let mut ctx = setup(&[5, 6], 0, 1);
        assert!(run(set_ijk_aaa, &mut ctx).is_err());
        let mut ctx = setup(&[0, 6], 1, 1);
        assert_eq!(
            run(set_ijk_aaa, &mut ctx),
            Err("moa_seg_ranges gives segment 1 0 orbitals".into())
        );
    }

    #[test]
    fn set_ijk_argument_errors() {
        let mut ctx = setup(&[5, 6], 1, 1);
        let mut args = vec![Arg::whole_array("xijk", vec![100, 7], vec![0.0; 700])];
        assert_eq!(
            set_ijk_aaa(&mut ctx, &mut args),
            Err("argument 1 (xijk) must be a 10000 x 7 array, it is 100 x 7".into())
        );
        let mut args = vec![Arg::scalar("x", 0.0)];
        assert_eq!(
            set_ijk_aab(&mut ctx, &mut args),
            Err("argument 1 must be an array or a block, got x".into())
        );
        let mut args = vec![xijk(), xijk()];
        assert_eq!(
            set_ijk_aab(&mut ctx, &mut args),
            Err("expects 1 argument (the array Xijk), got 2".into())
        );
    }

    /// The stripi layout of cc_utils.md §14.3: moa [1,4,6] for the arrays `x` and `y`, whose
    /// last dimension is a simple index in `y` (no segment table).
    fn strip_layout(rank: usize) -> Fake {
        let mut ctx = Fake::new();
        for (seg, first) in [(1, 0), (2, 1), (3, 5)] {
            for d in 0..rank {
                ctx.offsets.insert(("x".into(), d, seg), first);
                if d + 1 < rank {
                    ctx.offsets.insert(("y".into(), d, seg), first);
                }
            }
        }
        ctx
    }

    fn numbered(segments: Vec<i32>, shape: Vec<usize>) -> Arg {
        let n = shape.iter().product();
        Arg::block("x", segments, shape, (0..n).map(|v| v as f64).collect())
    }

    #[test]
    fn stripi_notes_vector_rank4() {
        // X = t4pppp[3,3,2,2] (6×6×4×4), Y = t2ppps[3,3,2,jj=4]: Y = X[:,:,:,3] (orbital 4 is
        // local position 3 of segment 2).
        let mut ctx = strip_layout(4);
        let x = numbered(vec![3, 3, 2, 2], vec![6, 6, 4, 4]);
        let y = Arg::block("y", vec![3, 3, 2, 4], vec![6, 6, 4, 1], vec![-1.0; 144]);
        let mut args = vec![x, y];
        stripi(&mut ctx, &mut args).expect("rank 4");
        let expected: Vec<f64> = (2 * 144..3 * 144).map(|v| v as f64).collect();
        assert_eq!(args[1].data, expected);
        assert_eq!(args[0].data[0], 0.0, "X is read only");
        // jj = 1 is the core orbital, outside segment 2 (orbitals 2..5).
        args[1].segments[3] = 1;
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("orbital 1 (the last index of argument 2, y[3,3,2,1]) is not among the orbitals 2 to 5 of the last dimension of argument 1 (x[3,3,2,2])".into())
        );
    }

    #[test]
    fn stripi_ranks_3_and_2() {
        let mut ctx = strip_layout(3);
        let x = numbered(vec![3, 3, 2], vec![6, 6, 4]);
        let y = Arg::block("y", vec![3, 3, 5], vec![6, 6, 1], vec![0.0; 36]);
        let mut args = vec![x, y];
        stripi(&mut ctx, &mut args).expect("rank 3");
        let expected: Vec<f64> = (3 * 36..4 * 36).map(|v| v as f64).collect();
        assert_eq!(args[1].data, expected);

        // stripi t1a_old[a,i1] tps[a,ii]; ii = 1 outside segment 2 (cc_utils.md §4.3).
        let mut ctx = strip_layout(2);
        let x = numbered(vec![3, 2], vec![6, 4]);
        let y = Arg::block("y", vec![3, 2], vec![6, 1], vec![0.0; 6]);
        let mut args = vec![x, y];
        stripi(&mut ctx, &mut args).expect("rank 2");
        assert_eq!(args[1].data, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        args[1].segments[1] = 1;
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("orbital 1 (the last index of argument 2, y[3,1]) is not among the orbitals 2 to 5 of the last dimension of argument 1 (x[3,2])".into())
        );
    }

    #[test]
    fn stripi_refuses_mismatched_blocks() {
        let mut ctx = strip_layout(4);
        let x = numbered(vec![3, 3, 2, 2], vec![6, 6, 4, 4]);
        let y = Arg::block("y", vec![3, 2, 2, 4], vec![6, 4, 4, 1], vec![0.0; 96]);
        let mut args = vec![x.clone(), y];
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("dimension 2 of argument 2 (y[3,2,2,4]) covers orbitals 2 to 5, but that of argument 1 (x[3,3,2,2]) covers orbitals 6 to 11".into())
        );
        let y = Arg::block("y", vec![3, 3, 4], vec![6, 6, 1], vec![0.0; 36]);
        let mut args = vec![x.clone(), y];
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("argument 2 must be an array of rank 4, got y[3,3,4] (rank 3)".into())
        );
        // Y's last dimension over a real segment of 4 orbitals.
        ctx.offsets.insert(("y".into(), 3, 2), 1);
        let y = Arg::block("y", vec![3, 3, 2, 2], vec![6, 6, 4, 4], vec![0.0; 576]);
        let mut args = vec![x.clone(), y];
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("the last dimension of argument 2 (y[3,3,2,2]) must hold one orbital (a simple index), it covers orbitals 2 to 5".into())
        );
        let x5 = numbered(vec![3, 3, 2, 2, 2], vec![6, 6, 4, 4, 4]);
        let mut args = vec![x5, x];
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("argument 1 must be a block of rank 2, 3 or 4, got x[3,3,2,2,2] (rank 5)".into())
        );
        let mut args = vec![Arg::scalar("s", 1.0)];
        assert_eq!(
            stripi(&mut ctx, &mut args),
            Err("expects 2 arguments (a block and a block whose last index is a simple index), got 1".into())
        );
    }
}
