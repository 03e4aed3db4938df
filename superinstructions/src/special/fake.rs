//! A small in-memory [`Context`] for the unit tests of libraries of specials.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Context, State};

/// Records what specials print and switch; serves constants, scalars and arrays from maps.
#[derive(Default)]
pub struct Fake {
    pub rank: usize,
    /// Text sent through `print` (the SIAL output).
    pub printed: String,
    /// Text sent through `print_all_ranks`.
    pub printed_all: String,
    pub all_rank_print: Option<bool>,
    pub debug_print: Option<bool>,
    pub ints: HashMap<String, i32>,
    pub scalar_constants: HashMap<String, f64>,
    pub scalars: HashMap<String, f64>,
    pub arrays: HashMap<String, (Vec<usize>, Vec<f64>)>,
    pub int_arrays: HashMap<String, (Vec<usize>, Vec<i64>)>,
    pub config: HashMap<String, String>,
    pub blocks: Vec<String>,
    /// `global_offset` answers: (array, dimension, segment) -> element offset.
    pub offsets: HashMap<(String, usize, i32), usize>,
    /// `declared_lower` answers: (array, dimension) -> first segment.
    pub lower: HashMap<(String, usize), i32>,
    /// `segment_extents` answers: index kind -> extents.
    pub segments: HashMap<String, Vec<usize>>,
    pub dir: PathBuf,
    pub state: State,
    /// Removes `dir` when the fake goes away (a field, so that `Fake { .., ..Fake::new() }` works).
    pub _cleanup: Option<Cleanup>,
}

/// Removes a test directory on drop.
pub struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

impl Fake {
    pub fn new() -> Fake {
        Fake::default()
    }

    /// A fake with its own fresh work directory (removed when dropped).
    pub fn with_dir() -> Fake {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("sial-specials-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test dir");
        Fake {
            dir: dir.clone(),
            _cleanup: Some(Cleanup(dir)),
            ..Fake::default()
        }
    }
}

impl Context for Fake {
    fn worker_rank(&self) -> usize {
        self.rank
    }
    fn line(&self) -> u32 {
        17
    }
    fn program(&self) -> &str {
        "fake"
    }
    fn print(&mut self, text: &str) {
        self.printed.push_str(text);
    }
    fn print_all_ranks(&mut self, text: &str) {
        self.printed_all.push_str(text);
    }
    fn set_all_rank_print(&mut self, on: bool) {
        self.all_rank_print = Some(on);
    }
    fn set_debug_print(&mut self, on: bool) {
        self.debug_print = Some(on);
    }
    fn int_constant(&self, name: &str) -> Option<i32> {
        self.ints.get(name).copied()
    }
    fn scalar_constant(&self, name: &str) -> Option<f64> {
        self.scalar_constants.get(name).copied()
    }
    fn scalar(&self, name: &str) -> Option<f64> {
        self.scalars.get(name).copied()
    }
    fn set_scalar(&mut self, name: &str, value: f64) -> bool {
        match self.scalars.get_mut(name) {
            Some(v) => {
                *v = value;
                true
            }
            None => false,
        }
    }
    fn predefined_array(&self, name: &str) -> Option<(Vec<usize>, Vec<f64>)> {
        self.arrays.get(name).cloned()
    }
    fn predefined_int_array(&self, name: &str) -> Option<(Vec<usize>, Vec<i64>)> {
        self.int_arrays.get(name).cloned()
    }
    fn config(&self, key: &str) -> Option<String> {
        self.config.get(key).cloned()
    }
    fn block_list(&self) -> Vec<String> {
        self.blocks.clone()
    }
    fn work_dir(&self) -> PathBuf {
        self.dir.clone()
    }
    fn global_offset(&self, array: &str, dim: usize, segment: i32) -> Option<usize> {
        self.offsets
            .get(&(array.to_string(), dim, segment))
            .copied()
    }
    fn declared_lower(&self, array: &str, dim: usize) -> Option<i32> {
        self.lower.get(&(array.to_string(), dim)).copied()
    }
    fn segment_extents(&self, kind: &str) -> Option<Vec<usize>> {
        self.segments.get(kind).cloned()
    }
    fn state(&mut self) -> &mut State {
        &mut self.state
    }
}

#[cfg(test)]
#[test]
fn default_print_all_ranks_goes_through_print() {
    struct Minimal(String);
    impl Context for Minimal {
        fn worker_rank(&self) -> usize {
            0
        }
        fn line(&self) -> u32 {
            0
        }
        fn program(&self) -> &str {
            ""
        }
        fn print(&mut self, text: &str) {
            self.0.push_str(text);
        }
        fn set_all_rank_print(&mut self, _: bool) {}
        fn set_debug_print(&mut self, _: bool) {}
        fn int_constant(&self, _: &str) -> Option<i32> {
            None
        }
        fn scalar_constant(&self, _: &str) -> Option<f64> {
            None
        }
        fn scalar(&self, _: &str) -> Option<f64> {
            None
        }
        fn set_scalar(&mut self, _: &str, _: f64) -> bool {
            false
        }
        fn predefined_array(&self, _: &str) -> Option<(Vec<usize>, Vec<f64>)> {
            None
        }
        fn predefined_int_array(&self, _: &str) -> Option<(Vec<usize>, Vec<i64>)> {
            None
        }
        fn config(&self, _: &str) -> Option<String> {
            None
        }
        fn block_list(&self) -> Vec<String> {
            Vec::new()
        }
        fn work_dir(&self) -> PathBuf {
            PathBuf::new()
        }
        fn state(&mut self) -> &mut State {
            unreachable!("not used by this test")
        }
    }
    let mut m = Minimal(String::new());
    m.print_all_ranks("x\n");
    assert_eq!(m.0, "x\n");
}
