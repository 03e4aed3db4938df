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

mod dummies;
#[cfg(test)]
use sial_superinstructions::special::fake;
mod files;
mod general;
pub mod plugin;
mod printing;

pub use dummies::{INT_ARRAY_NAME, SCALAR_ARRAY_NAME};
pub use files::{
    BLOCK_FILE_EXTENSION, TEXT_FILE_EXTENSION, block_file_name, decode_block_file,
    encode_block_file,
};
pub use printing::PRINT_BLOCK_MAX;
pub use sial_superinstructions::special::{
    Arg, ArgData, ArgKind, Context, Elements, Registry, SpecialFn,
};

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

/// A registry holding every general special of §8.4.
pub fn general_registry() -> Registry {
    let mut r = Registry::new();
    r.register_all(GENERAL);
    r
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
        let r = general_registry();
        assert_eq!(r.names().len(), GENERAL.len());
        // The 24 general specials of SIAL-SPEC §8.4.
        assert_eq!(GENERAL.len(), 24);
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
        let mut r = general_registry();
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
        let mut specials = general_registry();
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
