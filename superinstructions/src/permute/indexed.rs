//! Small blocks moved whole by AVX-512 gathers through a table of source offsets.
//! (On AMD's CPUs, whose gathers are slow, only the smallest: [`MAX_ELEMENTS_SLOW_GATHERS`].)
//!
//! A block of a small-segment job (ACES4's test job: `[9,5,9,5]`, 2,025 elements; water's
//! `[19,5,19,5]`) is a few hundred vectors, cut by the other paths into dozens of planes of
//! 5 × 9 or 5 × 19, each with its own tile or gather setup, edge and tail: the bookkeeping
//! cost more than the moves (the test job's block at 0.06–0.16 of memcpy, 0.5–1.5 µs).
//! Here the destination is written from start to end, 8 elements per gather, each gather's
//! offsets read from a table of the whole block's source offsets in the destination's order.
//! The table depends only on the loop nest, so each thread keeps the last [`KEPT`] it built;
//! building one costs about half a permute of its block (docs/benchmarks.md, "Permutations:
//! small blocks by one table of offsets").

use super::{Loop, Loops, Store};
use crate::shape::MAX_RANK;
use std::cell::RefCell;

/// Blocks up to this many elements go by table (but for their runs on AMD's CPUs, which move
/// them in 8-element moves, `tile::wide_runs`): their source (96 KiB), destination and table
/// stay in L2 and the gathers' scattered reads cost little. From 18,000 (cc-pVTZ's
/// `[27,5,27,5]`, 12⁴) the table lost where the source's unit-stride loop is the
/// destination's outermost, and from memory, and no contraction gained.
const MAX_ELEMENTS: usize = 12 * 1024;

/// Where gathers are slow (AMD's), blocks up to this many elements only: on a Zen 5 the test
/// job's `[9,5,9,5]` (2,025 elements) still ran 1.3–1.5× as fast by table, water's
/// `[19,5,19,5]` (9,025) up to 2× slower.
const MAX_ELEMENTS_SLOW_GATHERS: usize = 4 * 1024;

/// Destination rows from this length on keep the other paths, which then move whole vectors
/// with little bookkeeping per row: water's `[1,2,0,3]` (rows of 95) ran 0.88× as fast by
/// table, and the test job's `[0,1,3,2]` (runs of 45, contiguous in the source) 0.7×.
const LONG_ROW: usize = 32;

/// Tables kept per thread.
const KEPT: usize = 32;

/// Whether the nest `l` (of `size` elements) goes by table: a small block with destination
/// rows shorter than [`LONG_ROW`], where gathers are on (`gathers::present`; on CPUs other than
/// Intel's only up to [`MAX_ELEMENTS_SLOW_GATHERS`]), unless its planes' sides are both
/// multiples of 8 (those move as whole 8 × 8 blocks in registers), and unless it moves
/// contiguous runs that go in 8-element moves (on AMD's CPUs).
pub(super) fn pays(l: &[Loop], size: usize) -> bool {
    let Some(&a) = l.first() else {
        return false;
    };
    let most = if super::intel() {
        MAX_ELEMENTS
    } else {
        MAX_ELEMENTS_SLOW_GATHERS
    };
    if size > most || a.n >= LONG_ROW || !super::gathers::present() {
        return false;
    }
    match l.iter().find(|lp| lp.ss == 1) {
        Some(b) if a.ss != 1 => !(a.n.is_multiple_of(8) && b.n.is_multiple_of(8)),
        // Runs (the first dimension kept), where they go in 8-element moves (AMD's CPUs):
        // the test job's `[0,2,1,3]`, `[0,3,2,1]` (runs of 9) ran 1.5–1.8× as fast so in the
        // caches, 1.6–2.1× from memory.
        _ => !super::tile::wide_runs(),
    }
}

/// Moves the block by its table. Returns false, having moved nothing, where the CPU lacks
/// AVX-512 or the nest would reach outside the buffers (never for a validated nest).
pub(super) fn run<S: Store>(dst: &mut [f64], src: &[f64], loops: &Loops, st: S) -> bool {
    let l = loops.as_slice();
    let reach = super::reach(l, |lp| lp.ss);
    if dst.len() != loops.size || reach.is_none_or(|r| r > src.len()) {
        return false;
    }
    // A thread whose tables are already gone (at its exit) takes the other paths.
    let moved = TABLES.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        let table = kept.table(l);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present; the table holds `dst.len()` offsets (padded with
            // zeros to whole vectors, lanes past the end not stored), each below `reach`,
            // which is within `src`.
            unsafe {
                match st.alpha() {
                    None => x86::gather::<false>(dst, src, table, 0.0),
                    Some(alpha) => x86::gather::<true>(dst, src, table, alpha),
                }
            }
            return true;
        }
        let _ = (table, st);
        false
    });
    moved.unwrap_or(false)
}

thread_local! {
    static TABLES: RefCell<Kept> = const { RefCell::new(Kept { tables: Vec::new(), clock: 0 }) };
}

/// A loop nest, compared whole.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Nest {
    loops: [Loop; MAX_RANK],
    len: usize,
}

impl Nest {
    fn of(l: &[Loop]) -> Nest {
        let mut loops = [Loop::default(); MAX_RANK];
        loops[..l.len()].copy_from_slice(l);
        Nest {
            loops,
            len: l.len(),
        }
    }
}

struct Table {
    nest: Nest,
    /// The source offset of each destination element, then zeros to a whole vector.
    offsets: Vec<i32>,
    used: u64,
}

/// The tables of one thread, the least recently used replaced first.
struct Kept {
    tables: Vec<Table>,
    clock: u64,
}

impl Kept {
    fn table(&mut self, l: &[Loop]) -> &[i32] {
        self.clock += 1;
        let nest = Nest::of(l);
        let at = match self.tables.iter().position(|t| t.nest == nest) {
            Some(i) => i,
            None => {
                let i = if self.tables.len() < KEPT {
                    self.tables.push(Table {
                        nest,
                        offsets: Vec::new(),
                        used: 0,
                    });
                    self.tables.len() - 1
                } else {
                    self.tables
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, t)| t.used)
                        .map_or(0, |(i, _)| i)
                };
                let table = &mut self.tables[i];
                table.nest = nest;
                build(&mut table.offsets, l);
                i
            }
        };
        let table = &mut self.tables[at];
        table.used = self.clock;
        &table.offsets
    }
}

/// The source offsets of the nest's elements in the destination's order (loop 0 fastest):
/// each loop repeats the table so far once per further step, shifted by its source stride.
/// Offsets fit in `i32`: blocks here have at most [`MAX_ELEMENTS`] elements.
fn build(offsets: &mut Vec<i32>, l: &[Loop]) {
    let size: usize = l.iter().map(|lp| lp.n).product();
    offsets.clear();
    offsets.resize(size.next_multiple_of(8), 0);
    let mut len = 1;
    for lp in l {
        for j in 1..lp.n {
            let shift = (j * lp.ss) as i32;
            let (done, next) = offsets.split_at_mut(j * len);
            for (o, &d) in next[..len].iter_mut().zip(&done[..len]) {
                *o = d + shift;
            }
        }
        len *= lp.n;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256i, __mmask8, _mm256_loadu_si256, _mm512_add_pd, _mm512_i32gather_pd, _mm512_loadu_pd,
        _mm512_mask_storeu_pd, _mm512_maskz_loadu_pd, _mm512_mul_pd, _mm512_set1_pd,
        _mm512_storeu_pd,
    };

    /// `dst[k] = src[table[k]]`, or `dst[k] += alpha · src[table[k]]` (multiplied, then
    /// added, as the other kernels do: the same bits).
    ///
    /// # Safety
    /// AVX-512F; `table` holds `dst.len()` offsets into `src`, then zeros to a multiple of 8.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gather<const ADD: bool>(
        dst: &mut [f64],
        src: &[f64],
        table: &[i32],
        alpha: f64,
    ) {
        let n = dst.len();
        let (d, s, t) = (dst.as_mut_ptr(), src.as_ptr(), table.as_ptr());
        let scale = _mm512_set1_pd(alpha);
        let mut k = 0;
        // SAFETY (all loads, gathers and stores): the caller's contract; `k + 8 <= n` for
        // whole vectors, and the last one's lanes past `n` are masked off (its offsets are
        // the table's zeros, inside `src`).
        unsafe {
            while k + 8 <= n {
                let ix = _mm256_loadu_si256(t.add(k).cast::<__m256i>());
                let x = _mm512_i32gather_pd::<8>(ix, s);
                if ADD {
                    let old = _mm512_loadu_pd(d.add(k));
                    _mm512_storeu_pd(d.add(k), _mm512_add_pd(old, _mm512_mul_pd(scale, x)));
                } else {
                    _mm512_storeu_pd(d.add(k), x);
                }
                k += 8;
            }
            if k < n {
                let m = ((1u16 << (n - k)) - 1) as __mmask8;
                let ix = _mm256_loadu_si256(t.add(k).cast::<__m256i>());
                let x = _mm512_i32gather_pd::<8>(ix, s);
                if ADD {
                    let old = _mm512_maskz_loadu_pd(m, d.add(k));
                    let new = _mm512_add_pd(old, _mm512_mul_pd(scale, x));
                    _mm512_mask_storeu_pd(d.add(k), m, new);
                } else {
                    _mm512_mask_storeu_pd(d.add(k), m, x);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permute::plan;
    use crate::permute_cases::TEST_T2;
    use crate::shape::Shape;

    /// Which blocks go by table (where the CPU has gathers): short destination rows of a
    /// small block, runs or transposes; not rows of 32 or more, nor large blocks.
    #[test]
    fn small_blocks_with_short_rows_go_by_table() -> Result<(), crate::KernelError> {
        let goes = |ext: &[usize], perm: &[usize]| -> Result<bool, crate::KernelError> {
            let src = Shape::new(ext)?;
            let dst = src.permuted(perm)?;
            let loops = plan(dst.len(), &dst, src.len(), &src, perm)?;
            Ok(pays(loops.as_slice(), loops.size))
        };
        let on = super::super::gathers::present();
        assert_eq!(goes(&TEST_T2, &[1, 0, 2, 3])?, on, "rows of 5");
        let runs_by_table = on && !super::super::tile::wide_runs();
        assert_eq!(goes(&TEST_T2, &[0, 2, 1, 3])?, runs_by_table, "runs of 9");
        assert!(!goes(&TEST_T2, &[0, 1, 3, 2])?, "runs of 45");
        assert!(!goes(&TEST_T2, &[1, 2, 0, 3])?, "rows of 45");
        assert!(!goes(&TEST_T2, &[0, 1, 2, 3])?, "one run");
        assert!(!goes(&[16; 4], &[3, 2, 1, 0])?, "65,536 elements");
        assert!(!goes(&[8, 8, 8], &[1, 0, 2])?, "planes of 8 × 8");
        Ok(())
    }

    /// Offsets in the destination's order: loop 0 fastest, each loop's source stride.
    #[test]
    fn a_table_lists_source_offsets_in_destination_order() {
        let l = [Loop { n: 2, ds: 1, ss: 3 }, Loop { n: 3, ds: 2, ss: 1 }];
        let mut t = Vec::new();
        build(&mut t, &l);
        assert_eq!(t, [0, 3, 1, 4, 2, 5, 0, 0]);
    }

    /// More nests than a thread keeps: each call still finds its own offsets.
    #[test]
    fn tables_replaced_give_their_own_nests() {
        let mut kept = Kept {
            tables: Vec::new(),
            clock: 0,
        };
        for round in 0..3 {
            for n in 2..KEPT + 10 {
                let l = [Loop { n, ds: 1, ss: 5 }];
                let t = kept.table(&l);
                assert_eq!(t.len(), n.next_multiple_of(8), "round {round}, n {n}");
                assert!(t[..n].iter().enumerate().all(|(i, &o)| o as usize == 5 * i));
                assert!(t[n..].iter().all(|&o| o == 0));
            }
        }
        assert_eq!(kept.tables.len(), KEPT);
    }
}
