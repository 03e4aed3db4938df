//! Named super instructions ("specials", SIAL-SPEC §8): the argument model, the services the
//! runtime offers them ([`Context`]), the [`Registry`] that maps SIAL names to Rust functions, and
//! every general-purpose special ACES4 ships (§8.4).
//!
//! A special is a plain function `fn(&mut dyn Context, &mut [Arg]) -> Result<(), String>`. The
//! runtime copies each argument into an [`Arg`] before the call and copies `w`/`u` arguments back
//! afterwards, so a special never sees the runtime's block storage and cannot corrupt it; an
//! `Err` is what ACES4 reports through a nonzero `ierr` (the runtime turns it into the fatal
//! "error returned from special super instruction NAME", §8.2). Messages therefore do not repeat
//! the special's name.
//!
//! Submodules group the general specials by what they touch: `general` (block data and runtime
//! switches), `printing` (text output), `files` (block files) and `dummies` (test helpers of
//! the §8.3 services).

mod chemistry;
mod dummies;
#[cfg(test)]
mod fake;
mod files;
mod general;
mod printing;

use std::collections::HashMap;
use std::path::PathBuf;

pub use dummies::{INT_ARRAY_NAME, SCALAR_ARRAY_NAME};
pub use files::{
    BLOCK_FILE_EXTENSION, TEXT_FILE_EXTENSION, block_file_name, decode_block_file,
    encode_block_file,
};
pub use printing::PRINT_BLOCK_MAX;

/// What an argument is (§4.16 argument forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A block `a[i,j]`, or a region `c[l1:u1,…]` of a contiguous local array.
    Block,
    /// The bare name of a scalar: a 1-element block aliasing the scalar, so `w`/`u` write it.
    Scalar,
    /// The bare name of a static or contiguous array: the whole array.
    WholeArray,
    /// A DOUBLE literal: a read-only 1-element block.
    Literal,
}

/// One argument of a special, passed by value: the interpreter copies the data in, and copies it
/// back after the call for `w`/`u` arguments (for `w` it is zero-filled before the call).
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub kind: ArgKind,
    /// Array or scalar name (`""` for a literal).
    pub name: String,
    /// Declared rank (0 for scalars and literals).
    pub rank: usize,
    /// Segment number per dimension (empty for scalars, literals and whole arrays).
    pub segments: Vec<i32>,
    /// Extent per dimension (empty for scalars and literals).
    pub shape: Vec<usize>,
    /// Column-major elements (first index fastest); one element for scalars and literals.
    pub data: Vec<f64>,
}

impl Arg {
    /// A block `name[segments…]` of the given shape and data.
    pub fn block(name: &str, segments: Vec<i32>, shape: Vec<usize>, data: Vec<f64>) -> Arg {
        Arg {
            kind: ArgKind::Block,
            name: name.to_string(),
            rank: shape.len(),
            segments,
            shape,
            data,
        }
    }

    /// The bare name of a scalar holding `value`.
    pub fn scalar(name: &str, value: f64) -> Arg {
        Arg {
            kind: ArgKind::Scalar,
            name: name.to_string(),
            rank: 0,
            segments: Vec::new(),
            shape: Vec::new(),
            data: vec![value],
        }
    }

    /// A DOUBLE literal.
    pub fn literal(value: f64) -> Arg {
        Arg {
            kind: ArgKind::Literal,
            name: String::new(),
            rank: 0,
            segments: Vec::new(),
            shape: Vec::new(),
            data: vec![value],
        }
    }

    /// The bare name of a static or contiguous array: the whole array.
    pub fn whole_array(name: &str, shape: Vec<usize>, data: Vec<f64>) -> Arg {
        Arg {
            kind: ArgKind::WholeArray,
            name: name.to_string(),
            rank: shape.len(),
            segments: Vec::new(),
            shape,
            data,
        }
    }

    /// Segment numbers as ACES4 passes them (`index_values`, §8.2): the block's segments, or all
    /// 1 for whole arrays (and nothing for rank 0). Used for file names and listings.
    pub fn index_values(&self) -> Vec<i32> {
        if self.segments.len() == self.rank {
            self.segments.clone()
        } else {
            vec![1; self.rank]
        }
    }

    /// How the argument is named in messages: `a[1,2]`, `x`, or the literal's value.
    pub fn describe(&self) -> String {
        match self.kind {
            ArgKind::Block => {
                let segs: Vec<String> = self.segments.iter().map(i32::to_string).collect();
                format!("{}[{}]", self.name, segs.join(","))
            }
            ArgKind::Scalar | ArgKind::WholeArray => self.name.clone(),
            ArgKind::Literal => format!("literal {}", self.data.first().copied().unwrap_or(0.0)),
        }
    }
}

/// Services the runtime offers to specials (§8.3).
pub trait Context {
    /// This worker's rank among the workers (0 in a single-worker run).
    fn worker_rank(&self) -> usize;
    /// Current SIAL source line.
    fn line(&self) -> u32;
    /// Program name.
    fn program(&self) -> &str;
    /// SIAL output (the runtime decides which ranks print, §4.17).
    fn print(&mut self, text: &str);
    /// Output that ACES4 writes straight to stdout on every rank (`print_block`, the listings,
    /// the test helpers), bypassing the rank-0 rule of SIAL `print`. The default sends it through
    /// [`Context::print`]; a multi-worker runtime that wants ACES4's behaviour overrides it.
    fn print_all_ranks(&mut self, text: &str) {
        self.print(text);
    }
    /// Element offset of segment `segment` of dimension `dim` of array `array`, counted from
    /// segment 1 of that dimension's index kind (for an MO index: the orbital number minus 1).
    /// Chemistry specials use it to find the orbitals of a block. `None` when unknown.
    fn global_offset(&self, _array: &str, _dim: usize, _segment: i32) -> Option<usize> {
        None
    }
    /// The first segment of the declared range of dimension `dim` of `array`.
    fn declared_lower(&self, _array: &str, _dim: usize) -> Option<i32> {
        None
    }
    fn set_all_rank_print(&mut self, on: bool);
    fn set_debug_print(&mut self, on: bool);
    /// Predefined int from setup.
    fn int_constant(&self, name: &str) -> Option<i32>;
    /// Predefined scalar from setup.
    fn scalar_constant(&self, name: &str) -> Option<f64>;
    /// Current value of a SIAL scalar.
    fn scalar(&self, name: &str) -> Option<f64>;
    /// Sets a SIAL scalar; false if there is none of that name.
    fn set_scalar(&mut self, name: &str, value: f64) -> bool;
    /// Predefined double array from setup: shape and column-major data.
    fn predefined_array(&self, name: &str) -> Option<(Vec<usize>, Vec<f64>)>;
    /// Predefined int array from setup: shape and column-major data.
    fn predefined_int_array(&self, name: &str) -> Option<(Vec<usize>, Vec<i64>)>;
    /// Per-program configuration (`SialConfiguration`).
    fn config(&self, key: &str) -> Option<String>;
    /// Descriptions of the worker's blocks, one per block (`list_block_map`).
    fn block_list(&self) -> Vec<String>;
    /// Directory for block files.
    fn work_dir(&self) -> PathBuf;
}

/// A special: returns `Err(message)` for what ACES4 reports with a nonzero `ierr`.
pub type SpecialFn = fn(&mut dyn Context, &mut [Arg]) -> Result<(), String>;

/// The general specials of §8.4: name, ACES4 signature (one intent letter per argument), function.
///
/// The signature is informative: it is what a SIAL program should declare
/// (`special fill_block_sequential wr`); the runtime may use it to warn about mismatches.
pub const GENERAL: &[(&str, &str, SpecialFn)] = &[
    (
        "fill_block_sequential",
        "wr",
        general::fill_block_sequential,
    ),
    ("fill_block_cyclic", "wr", general::fill_block_cyclic),
    (
        "energy_denominator_rhf",
        "ur",
        chemistry::energy_denominator_rhf,
    ),
    ("print_block", "r", printing::print_block),
    ("print_static_array", "r", printing::print_static_array),
    ("list_block_map", "", printing::list_block_map),
    (
        "list_blocks_with_number",
        "",
        printing::list_blocks_with_number,
    ),
    ("get_my_rank", "w", general::get_my_rank),
    (
        "get_first_block_element",
        "rw",
        general::get_first_block_element,
    ),
    ("swap_blocks", "uu", general::swap_blocks),
    ("one_arg_no_op", "r", general::one_arg_no_op),
    ("enable_all_rank_print", "", general::enable_all_rank_print),
    (
        "disable_all_rank_print",
        "",
        general::disable_all_rank_print,
    ),
    ("enable_debug_print", "", general::enable_debug_print),
    ("disable_debug_print", "", general::disable_debug_print),
    ("write_block_to_file", "r", files::write_block_to_file),
    ("read_block_from_file", "w", files::read_block_from_file),
    (
        "read_block_from_text_file",
        "w",
        files::read_block_from_text_file,
    ),
    (
        "check_block_number_calculation",
        "w",
        general::check_block_number_calculation,
    ),
    ("return_sval", "rw", general::return_sval),
    (
        "get_and_print_mpi_rank",
        "",
        printing::get_and_print_mpi_rank,
    ),
    ("print_something", "", printing::print_something),
    (
        "get_scratch_array_dummy",
        "w",
        dummies::get_scratch_array_dummy,
    ),
    (
        "get_and_print_int_array_dummy",
        "w",
        dummies::get_and_print_int_array_dummy,
    ),
    (
        "get_and_print_scalar_array_dummy",
        "w",
        dummies::get_and_print_scalar_array_dummy,
    ),
];

/// The ACES4 signature of a general special (see [`GENERAL`]), if `name` is one.
pub fn general_signature(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    GENERAL
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, sig, _)| *sig)
}

/// Name → implementation. Names are lower case, as the compiler lower-cases SIAL names (§1.3);
/// a missing name is not an error until a program executes it (§8.1).
#[derive(Clone, Debug, Default)]
pub struct Registry {
    map: HashMap<String, SpecialFn>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry holding every general special of §8.4.
    pub fn with_general() -> Registry {
        let mut r = Registry::new();
        for (name, _, f) in GENERAL {
            r.register(name, *f);
        }
        r
    }

    /// Registers `f` under the lower-cased `name`, replacing any earlier one (so an application can
    /// override a shipped special).
    pub fn register(&mut self, name: &str, f: SpecialFn) {
        self.map.insert(name.to_ascii_lowercase(), f);
    }

    /// The implementation of `name` (looked up lower-cased).
    pub fn get(&self, name: &str) -> Option<SpecialFn> {
        self.map.get(&name.to_ascii_lowercase()).copied()
    }

    /// Every registered name, sorted (for listings and deterministic messages).
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.map.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
}

/// Checks the argument count: a SIAL `special` declaration with the wrong signature would
/// otherwise make the special index past its arguments.
fn expect_args(args: &[Arg], n: usize) -> Result<(), String> {
    if args.len() == n {
        Ok(())
    } else {
        Err(format!(
            "expects {n} argument{}, got {}",
            if n == 1 { "" } else { "s" },
            args.len()
        ))
    }
}

/// Element 0 of an argument, or an error naming it when it has no elements.
fn first(arg: &Arg) -> Result<f64, String> {
    arg.data
        .first()
        .copied()
        .ok_or_else(|| format!("argument {} has no elements", arg.describe()))
}

/// Writable element 0 of an argument, or an error naming it when it has no elements.
fn first_mut(arg: &mut Arg) -> Result<&mut f64, String> {
    let what = arg.describe();
    arg.data
        .first_mut()
        .ok_or_else(|| format!("argument {what} has no elements"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing(_: &mut dyn Context, _: &mut [Arg]) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn registry_is_case_insensitive_and_sorted() {
        let mut r = Registry::new();
        assert!(r.names().is_empty());
        assert!(r.get("mine").is_none());
        r.register("My_Special", nothing);
        r.register("another", nothing);
        assert!(r.get("my_special").is_some());
        assert!(r.get("MY_SPECIAL").is_some());
        assert_eq!(r.names(), vec!["another", "my_special"]);
    }

    #[test]
    fn general_registry_has_every_shipped_special() {
        let r = Registry::with_general();
        assert_eq!(r.names().len(), GENERAL.len());
        // The 24 general specials of SIAL-SPEC §8.4 and energy_denominator_rhf (§8.5).
        assert_eq!(GENERAL.len(), 25);
        for (name, _, _) in GENERAL {
            assert!(r.get(name).is_some(), "{name}");
        }
        assert_eq!(general_signature("swap_blocks"), Some("uu"));
        assert_eq!(general_signature("Fill_Block_Cyclic"), Some("wr"));
        assert_eq!(general_signature("list_block_map"), Some(""));
        assert_eq!(general_signature("compute_diis"), None);
    }

    #[test]
    fn register_overrides() {
        fn fails(_: &mut dyn Context, _: &mut [Arg]) -> Result<(), String> {
            Err("mine".into())
        }
        let mut r = Registry::with_general();
        r.register("one_arg_no_op", fails);
        let mut ctx = fake::Fake::new();
        let f = r.get("one_arg_no_op").expect("registered");
        assert_eq!(f(&mut ctx, &mut [Arg::literal(1.0)]), Err("mine".into()));
    }

    /// The example of `docs/specials.md`, kept compiling and correct.
    fn scale_by_config(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
        let [block, factor] = args else {
            return Err(format!("expects 2 arguments, got {}", args.len()));
        };
        let extra: f64 = match ctx.config("scale_factor") {
            Some(text) => text
                .parse()
                .map_err(|_| format!("bad scale_factor '{text}'"))?,
            None => 1.0,
        };
        let f = factor
            .data
            .first()
            .copied()
            .ok_or("factor has no elements")?
            * extra;
        for x in &mut block.data {
            *x *= f;
        }
        Ok(())
    }

    #[test]
    fn documented_example() {
        let mut specials = Registry::with_general();
        specials.register("scale_by_config", scale_by_config);
        let f = specials.get("scale_by_config").expect("registered");
        let mut ctx = fake::Fake::new();
        ctx.config.insert("scale_factor".into(), "3".into());
        let mut args = [
            Arg::block("a", vec![1], vec![2], vec![1.0, 2.0]),
            Arg::literal(2.0),
        ];
        f(&mut ctx, &mut args).expect("runs");
        assert_eq!(args[0].data, vec![6.0, 12.0]);
        ctx.config.insert("scale_factor".into(), "x".into());
        assert_eq!(f(&mut ctx, &mut args), Err("bad scale_factor 'x'".into()));
    }

    #[test]
    fn arg_helpers() {
        let b = Arg::block("a", vec![2, 3], vec![2, 2], vec![0.0; 4]);
        assert_eq!(b.rank, 2);
        assert_eq!(b.describe(), "a[2,3]");
        assert_eq!(b.index_values(), vec![2, 3]);
        let w = Arg::whole_array("s", vec![3, 4], vec![0.0; 12]);
        assert_eq!(w.index_values(), vec![1, 1]);
        assert_eq!(Arg::scalar("x", 2.0).index_values(), Vec::<i32>::new());
        assert_eq!(Arg::literal(2.5).describe(), "literal 2.5");
        assert_eq!(expect_args(&[], 1), Err("expects 1 argument, got 0".into()));
        assert_eq!(
            expect_args(&[b], 2),
            Err("expects 2 arguments, got 1".into())
        );
        let mut e = Arg::block("e", vec![1], vec![0], vec![]);
        assert_eq!(first(&e), Err("argument e[1] has no elements".into()));
        assert!(first_mut(&mut e).is_err());
    }
}
