//! Test helpers of ACES4 that exercise the runtime services of §8.3 (scratch arrays, predefined
//! arrays) and copy what they got into their block argument, so a SIAL test can check it.
//!
//! ACES4 hard-codes the predefined array each helper reads; the names here are
//! [`INT_ARRAY_NAME`] and [`SCALAR_ARRAY_NAME`].

use std::fmt::Write as _;

use super::{Arg, Context, expect_args};
use crate::print::fixed;

/// Values `get_scratch_array_dummy` copies (ACES4's scratch array has 32).
const SCRATCH_VALUES: usize = 32;
/// Most values the predefined-array helpers copy.
const ARRAY_VALUES: usize = 32;
/// The predefined int array `get_and_print_int_array_dummy` reads.
pub const INT_ARRAY_NAME: &str = "predef_int_array";
/// The predefined scalar array `get_and_print_scalar_array_dummy` reads.
pub const SCALAR_ARRAY_NAME: &str = "predef_scalar_array";

/// `get_scratch_array_dummy` (w): takes a zeroed scratch array of 32 doubles, sets it to
/// 1, 2, …, 32 and copies it into the first 32 elements of the block.
pub fn get_scratch_array_dummy(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let mut scratch = vec![0.0; SCRATCH_VALUES];
    for (i, s) in scratch.iter_mut().enumerate() {
        // i < 32: exact.
        *s = (i + 1) as f64;
    }
    copy_into(&mut args[0], &scratch)
}

/// `get_and_print_int_array_dummy` (w): prints the predefined int array
/// [`INT_ARRAY_NAME`] (`predefined int array NAME rank=R dims=[…]`, then its values on one line)
/// and copies its first 32 values (or all, if fewer) into the block.
pub fn get_and_print_int_array_dummy(
    ctx: &mut dyn Context,
    args: &mut [Arg],
) -> Result<(), String> {
    expect_args(args, 1)?;
    let (shape, values) = ctx
        .predefined_int_array(INT_ARRAY_NAME)
        .ok_or_else(|| missing(INT_ARRAY_NAME))?;
    let mut text = header("int", INT_ARRAY_NAME, &shape);
    for v in &values {
        let _ = write!(text, "{v} ");
    }
    text.push('\n');
    ctx.print_all_ranks(&text);
    // Setup ints are 32-bit in ACES4; an i64 beyond 2^53 would round, which is acceptable for a
    // test helper.
    let copied: Vec<f64> = values
        .iter()
        .take(ARRAY_VALUES)
        .map(|&v| v as f64)
        .collect();
    copy_into(&mut args[0], &copied)
}

/// `get_and_print_scalar_array_dummy` (w): prints the predefined scalar array
/// [`SCALAR_ARRAY_NAME`] (header as for ints, values with 14 decimals) and copies its first 32
/// values (or all, if fewer) into the block.
pub fn get_and_print_scalar_array_dummy(
    ctx: &mut dyn Context,
    args: &mut [Arg],
) -> Result<(), String> {
    expect_args(args, 1)?;
    let (shape, values) = ctx
        .predefined_array(SCALAR_ARRAY_NAME)
        .ok_or_else(|| missing(SCALAR_ARRAY_NAME))?;
    let mut text = header("scalar", SCALAR_ARRAY_NAME, &shape);
    for v in &values {
        let _ = write!(text, "{} ", fixed(*v, 14));
    }
    text.push('\n');
    ctx.print_all_ranks(&text);
    let n = values.len().min(ARRAY_VALUES);
    copy_into(&mut args[0], &values[..n])
}

fn header(kind: &str, name: &str, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!(
        "predefined {kind} array {name} rank={} dims=[{}]\n",
        shape.len(),
        dims.join(",")
    )
}

/// §8.3's message for a missing predefined array.
fn missing(name: &str) -> String {
    format!("predefined array {name} not in predefined array map")
}

/// Copies `values` to the start of the block; a block too small is an error (ACES4 would write
/// past its end).
fn copy_into(arg: &mut Arg, values: &[f64]) -> Result<(), String> {
    if arg.data.len() < values.len() {
        return Err(format!(
            "block {} has {} elements, {} are needed",
            arg.describe(),
            arg.data.len(),
            values.len()
        ));
    }
    arg.data[..values.len()].copy_from_slice(values);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    #[test]
    fn scratch() {
        let mut ctx = Fake::new();
        let mut args = [Arg::block("a", vec![1], vec![34], vec![0.0; 34])];
        get_scratch_array_dummy(&mut ctx, &mut args).expect("scratch");
        let mut want: Vec<f64> = (1..=32).map(f64::from).collect();
        want.extend([0.0, 0.0]);
        assert_eq!(args[0].data, want);
        let mut small = [Arg::block("a", vec![1], vec![8], vec![0.0; 8])];
        assert_eq!(
            get_scratch_array_dummy(&mut ctx, &mut small),
            Err("block a[1] has 8 elements, 32 are needed".into())
        );
    }

    #[test]
    fn int_array() {
        let mut ctx = Fake::new();
        ctx.int_arrays
            .insert(INT_ARRAY_NAME.into(), (vec![2, 2], vec![1, 2, 3, -4]));
        let mut args = [Arg::block("a", vec![1, 1], vec![2, 2], vec![0.0; 4])];
        get_and_print_int_array_dummy(&mut ctx, &mut args).expect("ints");
        assert_eq!(args[0].data, vec![1.0, 2.0, 3.0, -4.0]);
        assert_eq!(
            ctx.printed_all,
            "predefined int array predef_int_array rank=2 dims=[2,2]\n1 2 3 -4 \n"
        );
        let mut ctx = Fake::new();
        assert_eq!(
            get_and_print_int_array_dummy(&mut ctx, &mut args),
            Err("predefined array predef_int_array not in predefined array map".into())
        );
    }

    #[test]
    fn scalar_array_copies_at_most_32() {
        let mut ctx = Fake::new();
        let values: Vec<f64> = (0..40).map(f64::from).collect();
        ctx.arrays
            .insert(SCALAR_ARRAY_NAME.into(), (vec![40], values));
        let mut args = [Arg::block("a", vec![1], vec![40], vec![0.0; 40])];
        get_and_print_scalar_array_dummy(&mut ctx, &mut args).expect("scalars");
        let want: Vec<f64> = (0..40)
            .map(|i| if i < 32 { f64::from(i) } else { 0.0 })
            .collect();
        assert_eq!(args[0].data, want);
        assert!(ctx.printed_all.starts_with(
            "predefined scalar array predef_scalar_array rank=1 dims=[40]\n0.00000000000000 1.00000000000000 "
        ));
        assert!(ctx.printed_all.ends_with("39.00000000000000 \n"));
    }
}
