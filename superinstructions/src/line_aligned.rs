//! The global allocator of the `sial` binary and of the permutation benchmark: the system
//! allocator, with every allocation of at least [`LARGE`] bytes starting on a 64-byte cache
//! line.
//!
//! glibc puts a large allocation 16 bytes past a page boundary (its chunk header), so every
//! row of a block, and every 32- or 64-byte vector load of the permutation, GEMM and sum
//! kernels, straddled two cache lines every other time. Aligned, a 32⁴ transpose ran 1.5×
//! faster, and only rows of whole lines can be streamed (see `permute`; docs/benchmarks.md,
//! "Permutations that stream their destination").
//!
//! A large allocation asks the system for [`LINE`] bytes more, at the system's own alignment
//! (so `malloc`, `calloc` and `realloc` keep their fast paths: fresh zero pages for large
//! `calloc`, `mremap` for large `realloc`), and hands out the first line boundary at least
//! one word past the start; the word before the handed-out pointer holds the start.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// The allocator; register it with `#[global_allocator]`.
pub struct LineAligned;

/// The alignment given to large allocations.
pub const LINE: usize = 64;

/// Allocations from this many bytes are line-aligned: blocks, and the kernels' scratch.
/// Smaller ones (messages, names, maps) keep the system's placement and size.
pub const LARGE: usize = 512;

/// The system allocation behind a large one of `size` bytes.
fn outer(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(LINE)?, std::mem::align_of::<usize>()).ok()
}

/// Whether `layout` is served line-aligned (alignments over a line pass to the system).
fn large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= LINE
}

/// The offset from `start` of the first line boundary at least one word past it (at most
/// [`LINE`]: the system's allocations are word-aligned).
fn line_offset(start: *mut u8) -> usize {
    let word = std::mem::size_of::<usize>();
    word + (LINE - (start as usize + word) % LINE) % LINE
}

/// The pointer handed out for the system allocation at `start`, with the start stored in the
/// word before it; null stays null.
///
/// # Safety
/// `start` must be null or point to at least `LINE + size` writable bytes for the size to be
/// handed out.
unsafe fn hand_out(start: *mut u8) -> *mut u8 {
    if start.is_null() {
        return start;
    }
    // SAFETY: `word <= offset <= LINE`, inside the allocation; the stored start sits in the
    // word just before the handed-out pointer, which is line-aligned.
    unsafe {
        let p = start.add(line_offset(start));
        p.cast::<usize>().sub(1).write(start as usize);
        p
    }
}

/// The system allocation's start behind a handed-out pointer.
///
/// # Safety
/// `p` must come from [`hand_out`].
unsafe fn start_of(p: *mut u8) -> *mut u8 {
    // SAFETY: `hand_out` wrote the start in the word before `p`.
    unsafe { p.cast::<usize>().sub(1).read() as *mut u8 }
}

/// A new allocation by `system` (`System`'s `alloc` or `alloc_zeroed`): the layout itself,
/// or, for a large one, `outer(size)` bytes handed out from their first line.
///
/// # Safety
/// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
unsafe fn allocate(layout: Layout, system: unsafe fn(&System, Layout) -> *mut u8) -> *mut u8 {
    if !large(layout) {
        // SAFETY: the caller's contract, passed on.
        return unsafe { system(&System, layout) };
    }
    match outer(layout.size()) {
        // SAFETY: a non-zero size; `hand_out` gets `LINE + size` bytes.
        Some(o) => unsafe { hand_out(system(&System, o)) },
        None => ptr::null_mut(),
    }
}

// SAFETY: every large allocation is `outer(size)` bytes from `System`, freed and resized
// through the start stored before the pointer handed out; everything else is `System`'s own.
// Whether an allocation is large depends only on its layout, which the caller passes back
// unchanged to `dealloc` and `realloc`.
unsafe impl GlobalAlloc for LineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { allocate(layout, System::alloc) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() < LARGE {
            // Small ones from `malloc`, zeroed here: glibc's `calloc` skips the per-thread
            // cache that `malloc` takes them from, and cost 190 instructions for a block of
            // one element, twice per small put and get (docs/benchmarks.md, "Small gets: fewer
            // instructions per block"). Larger ones keep `calloc`'s fresh zero pages.
            // SAFETY: the caller's contract, passed on; a non-null result holds
            // `layout.size()` writable bytes.
            unsafe {
                let p = System.alloc(layout);
                if !p.is_null() {
                    ptr::write_bytes(p, 0, layout.size());
                }
                return p;
            }
        }
        // SAFETY: the caller's contract, passed on; every byte handed out is zero.
        unsafe { allocate(layout, System::alloc_zeroed) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if !large(layout) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.dealloc(p, layout) };
        }
        if let Some(o) = outer(layout.size()) {
            // SAFETY: `p` was handed out for this layout, from `o` bytes at its start.
            unsafe { System.dealloc(start_of(p), o) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees a valid new layout of the same alignment.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (large(layout), large(new)) {
            // SAFETY: the caller's contract, passed on.
            (false, false) => unsafe { System.realloc(p, layout, new_size) },
            (true, true) => {
                let (Some(old_outer), Some(new_outer)) = (outer(layout.size()), outer(new_size))
                else {
                    return ptr::null_mut();
                };
                // SAFETY: `p` was handed out for `layout`; the system moves the whole outer
                // allocation, so the data sits at its old offset from the new start until it
                // is moved to the new start's line boundary (overlapping: `copy`).
                unsafe {
                    let start = start_of(p);
                    let offset = p as usize - start as usize;
                    let moved = System.realloc(start, old_outer, new_outer.size());
                    if moved.is_null() {
                        return moved;
                    }
                    // The data first, then the stored start, which may lie in the old data.
                    let new_offset = line_offset(moved);
                    if new_offset != offset {
                        let n = layout.size().min(new_size);
                        ptr::copy(moved.add(offset), moved.add(new_offset), n);
                    }
                    hand_out(moved)
                }
            }
            _ => {
                // Across the line: a new allocation of the other kind, the data copied over.
                // SAFETY: `new` has a non-zero size (realloc's contract); both pointers are
                // valid for the smaller size; `p` is freed with its own layout.
                unsafe {
                    let q = self.alloc(new);
                    if !q.is_null() {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap_or_else(|e| panic!("{size}/{align}: {e}"))
    }

    fn fill(p: *mut u8, n: usize, seed: u8) {
        for i in 0..n {
            // SAFETY: the tests pass allocations of at least `n` bytes.
            unsafe { p.add(i).write(seed.wrapping_add(i as u8)) }
        }
    }

    fn holds(p: *const u8, n: usize, seed: u8) -> bool {
        // SAFETY: as in `fill`.
        (0..n).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add(i as u8))
    }

    #[test]
    fn large_allocations_start_on_a_line_and_small_ones_are_the_systems() {
        let a = LineAligned;
        for size in [LARGE, LARGE + 8, 4096, 1 << 20, 3 << 20] {
            for align in [8, 16, 64] {
                let l = layout(size, align);
                // SAFETY: a non-zero size, freed with the same layout.
                unsafe {
                    let p = a.alloc(l);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % LINE, 0, "{size} bytes, align {align}");
                    fill(p, size, 3);
                    assert!(holds(p, size, 3));
                    a.dealloc(p, l);
                    let z = a.alloc_zeroed(l);
                    assert_eq!(z as usize % LINE, 0);
                    assert!((0..size).all(|i| z.add(i).read() == 0));
                    a.dealloc(z, l);
                }
            }
        }
        let l = layout(24, 8);
        // SAFETY: as above.
        unsafe {
            let p = a.alloc(l);
            assert_eq!(p as usize % 8, 0);
            fill(p, 24, 1);
            a.dealloc(p, l);
        }
    }

    /// Small zeroed allocations come from `malloc`'s cache of freed chunks, dirty ones
    /// included, and are zeroed all the same.
    #[test]
    fn small_zeroed_allocations_are_zero_after_dirty_ones() {
        let a = LineAligned;
        for (size, align) in [(1, 8), (8, 8), (24, 8), (100, 8), (LARGE - 8, 8), (200, 64)] {
            let l = layout(size, align);
            // SAFETY: a non-zero size, freed with the same layout.
            unsafe {
                for _ in 0..4 {
                    let p = a.alloc(l);
                    assert!(!p.is_null());
                    fill(p, size, 7);
                    a.dealloc(p, l);
                    let z = a.alloc_zeroed(l);
                    assert!(!z.is_null());
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| z.add(i).read() == 0), "{size} bytes");
                    a.dealloc(z, l);
                }
            }
        }
    }

    #[test]
    fn realloc_keeps_the_data_within_and_across_the_line() {
        let a = LineAligned;
        // Small to large, large to larger (the system may move it), large to small, and
        // growth in small steps that shifts the start's offset from the line.
        let steps = [
            100,
            LARGE - 1,
            LARGE,
            600,
            8192,
            1 << 20,
            5 << 20,
            700,
            64,
            8,
        ];
        // SAFETY: every pointer is reallocated or freed with the layout it has.
        unsafe {
            let mut l = layout(steps[0], 8);
            let mut p = a.alloc(l);
            fill(p, l.size(), 7);
            for &size in &steps[1..] {
                let q = a.realloc(p, l, size);
                assert!(!q.is_null());
                let kept = l.size().min(size);
                assert!(holds(q, kept, 7), "{} -> {size} bytes", l.size());
                if size >= LARGE {
                    assert_eq!(q as usize % LINE, 0, "{size} bytes");
                }
                l = layout(size, 8);
                fill(q, size, 7);
                p = q;
            }
            a.dealloc(p, l);
        }
    }

    proptest::proptest! {
        /// Any chain of sizes and alignments keeps the data through every `realloc`, and every
        /// large allocation on a line.
        #[test]
        fn realloc_chains_keep_their_data(
            sizes in proptest::collection::vec(1usize..20_000, 1..12),
            align in proptest::sample::select(vec![1usize, 8, 16, 32, 64, 128]),
        ) {
            let a = LineAligned;
            // SAFETY: every pointer is reallocated or freed with the layout it has.
            unsafe {
                let mut l = layout(sizes[0], align);
                let mut p = a.alloc(l);
                proptest::prop_assert!(!p.is_null());
                fill(p, l.size(), 11);
                for &size in &sizes[1..] {
                    let q = a.realloc(p, l, size);
                    proptest::prop_assert!(!q.is_null());
                    proptest::prop_assert!(holds(q, l.size().min(size), 11));
                    proptest::prop_assert_eq!(q as usize % align, 0);
                    if size >= LARGE {
                        proptest::prop_assert_eq!(q as usize % LINE, 0);
                    }
                    l = layout(size, align);
                    fill(q, size, 11);
                    p = q;
                }
                a.dealloc(p, l);
            }
        }
    }

    #[test]
    fn a_vec_of_f64_through_the_allocator_is_line_aligned() {
        let a = LineAligned;
        let l = layout(1000 * 8, 8);
        // SAFETY: allocated and freed with the same layout.
        unsafe {
            let p = a.alloc_zeroed(l).cast::<f64>();
            assert_eq!(p as usize % LINE, 0);
            assert_eq!(p.add(999).read(), 0.0);
            a.dealloc(p.cast(), l);
        }
    }
}
