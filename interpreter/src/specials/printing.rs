//! General specials that print (§8.4). ACES4 writes these straight to stdout on every rank, so
//! they go through [`Context::print_all_ranks`], not the rank-0 SIAL `print` path.

use std::fmt::Write as _;

use super::{Arg, Context, expect_args};
use crate::print::fixed;

/// Most elements `print_block` shows (ACES4's limit for this special).
pub const PRINT_BLOCK_MAX: usize = 1024;

/// `print_block` (r): a header `printing m elements of block NAME[v1(e1),v2(e2)], size=n`
/// (m = min(n, 1024)), then the first m elements, each right-aligned in 14 columns with 14
/// decimals and followed by a space, one line per `extent_0` elements.
pub fn print_block(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    ctx.print_all_ranks(&print_block_text(&args[0]));
    Ok(())
}

fn print_block_text(a: &Arg) -> String {
    let n = a.data.len();
    let shown = n.min(PRINT_BLOCK_MAX);
    let dims: Vec<String> = a
        .index_values()
        .iter()
        .enumerate()
        .map(|(d, v)| format!("{v}({})", a.shape.get(d).copied().unwrap_or(1)))
        .collect();
    let mut out = format!(
        "printing {shown} elements of block {}[{}], size={n}\n",
        a.name,
        dims.join(",")
    );
    let row = a.shape.first().copied().filter(|&e| e > 0).unwrap_or(1);
    for (i, v) in a.data.iter().take(shown).enumerate() {
        // Writing to a String cannot fail.
        let _ = write!(out, "{:>14} ", fixed(*v, 14));
        if (i + 1) % row == 0 || i + 1 == shown {
            out.push('\n');
        }
    }
    out
}

/// `print_static_array` (r): `static array NAME size=n`, then every element with 8 decimals,
/// each followed by a space, all on one line.
pub fn print_static_array(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let a = &args[0];
    let mut out = format!("static array {} size={}\n", a.name, a.data.len());
    for v in &a.data {
        let _ = write!(out, "{} ", fixed(*v, 8));
    }
    out.push('\n');
    ctx.print_all_ranks(&out);
    Ok(())
}

/// `list_block_map` (): `LISTING CURRENT BLOCKS`, then one line per block of this worker, as
/// the runtime describes them.
pub fn list_block_map(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    let mut out = String::from("LISTING CURRENT BLOCKS\n");
    for b in ctx.block_list() {
        out.push_str(&b);
        out.push('\n');
    }
    ctx.print_all_ranks(&out);
    Ok(())
}

/// `list_blocks_with_number` (): one line per block of this worker. ACES4 adds each block's
/// number; here the runtime's description is printed as it is (it should include the number).
pub fn list_blocks_with_number(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    let mut out = String::new();
    for b in ctx.block_list() {
        out.push_str(&b);
        out.push('\n');
    }
    ctx.print_all_ranks(&out);
    Ok(())
}

/// `get_and_print_mpi_rank` (): test helper, prints `rank = R` with the worker rank.
pub fn get_and_print_mpi_rank(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    let text = format!("rank = {}\n", ctx.worker_rank());
    ctx.print_all_ranks(&text);
    Ok(())
}

/// `print_something` (): test helper, prints `something`.
pub fn print_something(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    ctx.print_all_ranks("something\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    #[test]
    fn print_block_rows() {
        let mut ctx = Fake::new();
        let a = Arg::block("a", vec![2, 1], vec![2, 2], vec![1.0, 2.0, 3.0, -4.5]);
        print_block(&mut ctx, &mut [a]).expect("print");
        assert_eq!(
            ctx.printed_all,
            "printing 4 elements of block a[2(2),1(2)], size=4\n\
             1.00000000000000 2.00000000000000 \n\
             3.00000000000000 -4.50000000000000 \n"
        );
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn print_block_pads_short_values_and_cuts_at_1024() {
        let a = Arg::block("b", vec![1], vec![2], vec![f64::INFINITY, 1.0]);
        assert_eq!(
            print_block_text(&a),
            "printing 2 elements of block b[1(2)], size=2\n           inf 1.00000000000000 \n"
        );
        let big = Arg::block("c", vec![3], vec![1030], vec![0.0; 1030]);
        let text = print_block_text(&big);
        assert!(text.starts_with("printing 1024 elements of block c[3(1030)], size=1030\n"));
        assert_eq!(text.matches("0.00000000000000 ").count(), 1024);
        assert!(text.ends_with(" \n"));
        // A whole array shows segment 1 in every dimension, as ACES4's index values.
        let w = Arg::whole_array("s", vec![1, 1], vec![5.0]);
        assert_eq!(
            print_block_text(&w),
            "printing 1 elements of block s[1(1),1(1)], size=1\n5.00000000000000 \n"
        );
    }

    #[test]
    fn static_array_one_line() {
        let mut ctx = Fake::new();
        let s = Arg::whole_array("s", vec![2, 2], vec![1.0, 0.5, -2.0, 1.0 / 3.0]);
        print_static_array(&mut ctx, &mut [s]).expect("print");
        assert_eq!(
            ctx.printed_all,
            "static array s size=4\n1.00000000 0.50000000 -2.00000000 0.33333333 \n"
        );
    }

    #[test]
    fn listings() {
        let mut ctx = Fake {
            blocks: vec!["a[1,1]".into(), "b[2]".into()],
            ..Fake::new()
        };
        list_block_map(&mut ctx, &mut []).expect("list");
        assert_eq!(ctx.printed_all, "LISTING CURRENT BLOCKS\na[1,1]\nb[2]\n");
        ctx.printed_all.clear();
        list_blocks_with_number(&mut ctx, &mut []).expect("list");
        assert_eq!(ctx.printed_all, "a[1,1]\nb[2]\n");
        assert!(list_block_map(&mut ctx, &mut [Arg::literal(0.0)]).is_err());
    }

    #[test]
    fn test_helpers_print() {
        let mut ctx = Fake {
            rank: 2,
            ..Fake::new()
        };
        get_and_print_mpi_rank(&mut ctx, &mut []).expect("rank");
        print_something(&mut ctx, &mut []).expect("something");
        assert_eq!(ctx.printed_all, "rank = 2\nsomething\n");
    }
}
