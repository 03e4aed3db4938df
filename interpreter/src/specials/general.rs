//! General specials that act on block data or on runtime switches (§8.4).

use sial_superinstructions as kernels;

use super::{Arg, ArgKind, Context, expect_args, first, first_mut};

/// The start value of a fill: arg1 must have rank 0 (a scalar or a literal). ACES4 sets `ierr`
/// to arg1's rank otherwise; the message reports that rank.
fn fill_start(args: &[Arg]) -> Result<f64, String> {
    expect_args(args, 2)?;
    let start = &args[1];
    if start.rank != 0 {
        return Err(format!(
            "second argument {} must be a scalar, but has rank {}",
            start.describe(),
            start.rank
        ));
    }
    first(start)
}

/// `fill_block_sequential` (wr): arg0 in memory order gets v, v+1, v+2, … from the scalar v,
/// counted in single precision as ACES4 does.
pub fn fill_block_sequential(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let start = fill_start(args)?;
    kernels::fill_sequential(&mut args[0].data, start);
    Ok(())
}

/// `fill_block_cyclic` (wr): like `fill_block_sequential`, but after 20 the counter restarts at 1.
pub fn fill_block_cyclic(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let start = fill_start(args)?;
    kernels::fill_cyclic(&mut args[0].data, start);
    Ok(())
}

/// `get_my_rank` (w): element 0 of the argument (usually a scalar) becomes the worker rank.
pub fn get_my_rank(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    // Ranks are far below 2^53, so the conversion is exact.
    *first_mut(&mut args[0])? = ctx.worker_rank() as f64;
    Ok(())
}

/// `get_first_block_element` (rw): element 0 of arg0 into element 0 of arg1.
pub fn get_first_block_element(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 2)?;
    let v = first(&args[0])?;
    *first_mut(&mut args[1])? = v;
    Ok(())
}

/// `swap_blocks` (uu): exchanges the contents of two blocks of equal size (shapes may differ, as
/// in ACES4, which compares sizes only).
pub fn swap_blocks(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 2)?;
    let (a, b) = args.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    if a.data.len() != b.data.len() {
        return Err(format!(
            "blocks {} ({} elements) and {} ({} elements) differ in size",
            a.describe(),
            a.data.len(),
            b.describe(),
            b.data.len()
        ));
    }
    kernels::swap_blocks(&mut a.data, &mut b.data).map_err(|e| e.to_string())
}

/// `one_arg_no_op` (r): does nothing; SIAL programs use it to "use" a fetched block. Any number
/// of arguments is accepted, since nothing is read.
pub fn one_arg_no_op(_: &mut dyn Context, _: &mut [Arg]) -> Result<(), String> {
    Ok(())
}

/// `enable_all_rank_print` (): `print` output from every worker from now on.
pub fn enable_all_rank_print(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    ctx.set_all_rank_print(true);
    Ok(())
}

/// `disable_all_rank_print` (): back to printing from rank 0 only.
pub fn disable_all_rank_print(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    ctx.set_all_rank_print(false);
    Ok(())
}

/// `enable_debug_print` (): developer debug logging on.
pub fn enable_debug_print(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    ctx.set_debug_print(true);
    Ok(())
}

/// `disable_debug_print` (): developer debug logging off.
pub fn disable_debug_print(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 0)?;
    ctx.set_debug_print(false);
    Ok(())
}

/// `check_block_number_calculation` (w): ACES4's test of the block-number ↔ block-id conversion.
///
/// Block numbers are the runtime's business and are not visible through [`Context`], so this
/// checks only what a special can see: the argument is a block with one segment number ≥ 1 per
/// declared dimension. ACES4 then deletes the block; here the (zero-filled) block is left to the
/// runtime.
pub fn check_block_number_calculation(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let a = &args[0];
    if a.kind != ArgKind::Block {
        return Err(format!("argument {} must be a block", a.describe()));
    }
    if a.segments.len() != a.rank || a.shape.len() != a.rank {
        return Err(format!(
            "block {} has {} segments and {} extents for rank {}",
            a.describe(),
            a.segments.len(),
            a.shape.len(),
            a.rank
        ));
    }
    if let Some(s) = a.segments.iter().find(|&&s| s < 1) {
        return Err(format!(
            "block {} has invalid segment number {s}",
            a.describe()
        ));
    }
    Ok(())
}

/// `return_sval` (rw): the scalar arg1 gets the last element, in loop order, of the 1- or
/// 2-dimensional block arg0 — its last element in memory.
pub fn return_sval(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 2)?;
    let a = &args[0];
    if !(1..=2).contains(&a.rank) {
        return Err(format!(
            "first argument {} must have rank 1 or 2, but has rank {}",
            a.describe(),
            a.rank
        ));
    }
    let v = a
        .data
        .last()
        .copied()
        .ok_or_else(|| format!("argument {} has no elements", a.describe()))?;
    *first_mut(&mut args[1])? = v;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    fn block(data: Vec<f64>) -> Arg {
        let n = data.len();
        Arg::block("a", vec![1, 2], vec![n, 1], data)
    }

    #[test]
    fn fill_sequential_and_cyclic() {
        let mut ctx = Fake::new();
        let mut args = [block(vec![0.0; 4]), Arg::scalar("x", 1.5)];
        fill_block_sequential(&mut ctx, &mut args).expect("fill");
        assert_eq!(args[0].data, vec![1.5, 2.5, 3.5, 4.5]);

        let mut args = [block(vec![0.0; 4]), Arg::literal(19.0)];
        fill_block_cyclic(&mut ctx, &mut args).expect("fill");
        assert_eq!(args[0].data, vec![19.0, 20.0, 1.0, 2.0]);

        // Single-precision counter: 0.1 is stored as the float nearest 0.1.
        let mut args = [block(vec![0.0; 2]), Arg::scalar("x", 0.1)];
        fill_block_sequential(&mut ctx, &mut args).expect("fill");
        assert_eq!(args[0].data, vec![f64::from(0.1f32), f64::from(1.1f32)]);
    }

    #[test]
    fn fill_requires_rank_zero_start() {
        let mut ctx = Fake::new();
        let mut args = [block(vec![0.0; 4]), block(vec![1.0])];
        let err = fill_block_sequential(&mut ctx, &mut args).expect_err("rank 2 start");
        assert_eq!(
            err,
            "second argument a[1,2] must be a scalar, but has rank 2"
        );
        assert!(fill_block_cyclic(&mut ctx, &mut args).is_err());
        assert!(fill_block_sequential(&mut ctx, &mut [block(vec![0.0])]).is_err());
    }

    #[test]
    fn rank_and_first_element() {
        let mut ctx = Fake {
            rank: 3,
            ..Fake::new()
        };
        let mut args = [Arg::scalar("r", 0.0)];
        get_my_rank(&mut ctx, &mut args).expect("rank");
        assert_eq!(args[0].data, vec![3.0]);

        let mut args = [block(vec![7.0, 8.0]), Arg::scalar("x", 0.0)];
        get_first_block_element(&mut ctx, &mut args).expect("first");
        assert_eq!(args[1].data, vec![7.0]);
        let mut args = [block(vec![]), Arg::scalar("x", 0.0)];
        assert!(get_first_block_element(&mut ctx, &mut args).is_err());
    }

    #[test]
    fn swap() {
        let mut ctx = Fake::new();
        let mut args = [
            block(vec![1.0, 2.0]),
            Arg::block("b", vec![3], vec![2], vec![3.0, 4.0]),
        ];
        swap_blocks(&mut ctx, &mut args).expect("swap");
        assert_eq!(args[0].data, vec![3.0, 4.0]);
        assert_eq!(args[1].data, vec![1.0, 2.0]);

        let mut args = [
            block(vec![1.0, 2.0]),
            Arg::block("b", vec![3], vec![3], vec![0.0; 3]),
        ];
        let err = swap_blocks(&mut ctx, &mut args).expect_err("sizes differ");
        assert_eq!(
            err,
            "blocks a[1,2] (2 elements) and b[3] (3 elements) differ in size"
        );
        assert_eq!(args[0].data, vec![1.0, 2.0]);
    }

    #[test]
    fn no_op_and_switches() {
        let mut ctx = Fake::new();
        one_arg_no_op(&mut ctx, &mut [block(vec![1.0])]).expect("no-op");
        enable_all_rank_print(&mut ctx, &mut []).expect("on");
        assert_eq!(ctx.all_rank_print, Some(true));
        disable_all_rank_print(&mut ctx, &mut []).expect("off");
        assert_eq!(ctx.all_rank_print, Some(false));
        enable_debug_print(&mut ctx, &mut []).expect("on");
        assert_eq!(ctx.debug_print, Some(true));
        disable_debug_print(&mut ctx, &mut []).expect("off");
        assert_eq!(ctx.debug_print, Some(false));
        assert!(enable_debug_print(&mut ctx, &mut [Arg::literal(1.0)]).is_err());
        assert!(ctx.printed.is_empty() && ctx.printed_all.is_empty());
    }

    #[test]
    fn check_block_number() {
        let mut ctx = Fake::new();
        check_block_number_calculation(&mut ctx, &mut [block(vec![0.0; 2])]).expect("ok");
        let bad = Arg::block("a", vec![0, 1], vec![1, 1], vec![0.0]);
        assert_eq!(
            check_block_number_calculation(&mut ctx, &mut [bad]),
            Err("block a[0,1] has invalid segment number 0".into())
        );
        assert!(check_block_number_calculation(&mut ctx, &mut [Arg::scalar("x", 0.0)]).is_err());
        let short = Arg {
            segments: vec![1],
            ..block(vec![0.0; 2])
        };
        assert!(check_block_number_calculation(&mut ctx, &mut [short]).is_err());
    }

    #[test]
    fn sval() {
        let mut ctx = Fake::new();
        let mut args = [block(vec![1.0, 2.0, 3.0]), Arg::scalar("s", 0.0)];
        return_sval(&mut ctx, &mut args).expect("2-d");
        assert_eq!(args[1].data, vec![3.0]);
        let mut args = [
            Arg::block("v", vec![1], vec![2], vec![4.0, 5.0]),
            Arg::scalar("s", 0.0),
        ];
        return_sval(&mut ctx, &mut args).expect("1-d");
        assert_eq!(args[1].data, vec![5.0]);
        let mut args = [
            Arg::block("t", vec![1, 1, 1], vec![1, 1, 1], vec![1.0]),
            Arg::scalar("s", 0.0),
        ];
        assert!(return_sval(&mut ctx, &mut args).is_err());
    }
}
