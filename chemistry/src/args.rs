//! Checked access to the arguments of a special: counts, kinds, ranks, and where the elements of
//! a block sit among all orbitals or basis functions.
//!
//! Every check returns `Err(message)`, which the runtime reports as "error returned from special
//! super instruction NAME: message at program:line"; messages name the argument by position and
//! by what the program passed (`a[1,2]`, `fock_a`, ...), never the special (the runtime adds it).

use sial_superinstructions::special::{Arg, ArgKind, Context};

/// The arguments as exactly `N` mutable references, or an error naming what was expected.
pub fn exactly<'a, const N: usize>(
    args: &'a mut [Arg],
    what: &str,
) -> Result<&'a mut [Arg; N], String> {
    let got = args.len();
    <&mut [Arg; N]>::try_from(args).map_err(|_| {
        format!(
            "expects {N} argument{} ({what}), got {got}",
            if N == 1 { "" } else { "s" }
        )
    })
}

/// Position of an argument in messages (1-based, as written in `execute`).
fn nth(k: usize) -> String {
    format!("argument {}", k + 1)
}

/// Checks that argument `k` is a block (or a contiguous region) of rank `rank`.
pub fn block(arg: &Arg, k: usize, rank: usize) -> Result<(), String> {
    if arg.kind != ArgKind::Block || arg.shape.len() != rank {
        return Err(format!(
            "{} must be a block of rank {rank}, got {} (rank {})",
            nth(k),
            arg.describe(),
            arg.shape.len()
        ));
    }
    Ok(())
}

/// Checks that argument `k` holds a whole matrix (a static array passed by name, or a block)
/// of rank 2 and returns its extents.
pub fn matrix(arg: &Arg, k: usize) -> Result<(usize, usize), String> {
    if !matches!(arg.kind, ArgKind::Block | ArgKind::WholeArray) || arg.shape.len() != 2 {
        return Err(format!(
            "{} must be an array of rank 2, got {} (rank {})",
            nth(k),
            arg.describe(),
            arg.shape.len()
        ));
    }
    Ok((arg.shape[0], arg.shape[1]))
}

/// Checks that argument `k` is a square matrix and returns its order.
pub fn square(arg: &Arg, k: usize) -> Result<usize, String> {
    let (r, c) = matrix(arg, k)?;
    if r != c {
        return Err(format!(
            "{} must be square, {} is {r} x {c}",
            nth(k),
            arg.describe()
        ));
    }
    Ok(r)
}

/// Checks that argument `k` is a scalar (or a 1-element block, which ACES4 accepts alike).
pub fn scalar(arg: &Arg, k: usize) -> Result<f64, String> {
    match arg.data.as_slice() {
        [v] => Ok(*v),
        _ => Err(format!(
            "{} must be a scalar, got {} with {} elements",
            nth(k),
            arg.describe(),
            arg.data.len()
        )),
    }
}

/// Sets the value of scalar argument `k` (checked with [`scalar`]).
pub fn set_scalar(arg: &mut Arg, k: usize, value: f64) -> Result<(), String> {
    scalar(arg, k)?;
    arg.data[0] = value;
    Ok(())
}

/// A predefined int from the setup, or an error naming it.
pub fn int_constant(ctx: &dyn Context, name: &str) -> Result<i32, String> {
    ctx.int_constant(name).ok_or_else(|| {
        format!("the setup has no predefined int {name} (give it in the job file or with --set)")
    })
}

/// A predefined int array from the setup, or an error naming it.
pub fn int_array(ctx: &dyn Context, name: &str) -> Result<Vec<i64>, String> {
    ctx.predefined_int_array(name)
        .map(|(_, data)| data)
        .ok_or_else(|| format!("the setup has no predefined int array {name}"))
}

/// A predefined double array from the setup (shape, column-major data), or an error naming it.
pub fn array(ctx: &dyn Context, name: &str) -> Result<(Vec<usize>, Vec<f64>), String> {
    ctx.predefined_array(name)
        .ok_or_else(|| format!("the setup has no predefined array {name}"))
}

/// For each dimension of block argument `arg`, the 0-based number of its first element among
/// all elements of that dimension's index kind (for an MO index: the orbital number minus 1;
/// for an AO index: the basis function number minus 1), from the program's segment tables.
/// `None` for a dimension over a simple index.
pub fn offsets(ctx: &dyn Context, arg: &Arg) -> Vec<Option<usize>> {
    (0..arg.shape.len())
        .map(|d| {
            arg.segments
                .get(d)
                .and_then(|&seg| ctx.global_offset(&arg.name, d, seg))
        })
        .collect()
}

/// Like [`offsets`] but every dimension must have one (no simple indices).
pub fn all_offsets(ctx: &dyn Context, arg: &Arg, k: usize) -> Result<Vec<usize>, String> {
    offsets(ctx, arg)
        .into_iter()
        .enumerate()
        .map(|(d, o)| {
            o.ok_or_else(|| {
                format!(
                    "{}: cannot locate dimension {} of {} among the orbitals or basis functions (it must be an index with a segment table)",
                    nth(k),
                    d + 1,
                    arg.describe()
                )
            })
        })
        .collect()
}

/// Column-major position of `(i, j)` in a matrix with `rows` rows.
#[inline]
pub fn at(rows: usize, i: usize, j: usize) -> usize {
    i + rows * j
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    #[test]
    fn counts_and_kinds() {
        let mut args = vec![Arg::scalar("x", 2.0), Arg::literal(1.0)];
        assert!(exactly::<2>(&mut args, "two scalars").is_ok());
        assert_eq!(
            exactly::<1>(&mut args, "a block").err(),
            Some("expects 1 argument (a block), got 2".into())
        );
        assert_eq!(scalar(&args[0], 0), Ok(2.0));
        set_scalar(&mut args[0], 0, 5.0).expect("scalar");
        assert_eq!(args[0].data, vec![5.0]);
        let b = Arg::block("t", vec![1, 2], vec![2, 3], vec![0.0; 6]);
        assert!(block(&b, 0, 2).is_ok());
        assert!(block(&b, 0, 4).is_err());
        assert_eq!(matrix(&b, 0), Ok((2, 3)));
        assert!(square(&b, 0).is_err());
        assert!(scalar(&b, 0).is_err());
        assert_eq!(at(3, 1, 2), 7);
    }

    #[test]
    fn offsets_come_from_the_context() {
        let mut ctx = Fake::new();
        ctx.offsets.insert(("t".into(), 0, 2), 5);
        let b = Arg::block("t", vec![2, 1], vec![2, 3], vec![0.0; 6]);
        assert_eq!(offsets(&ctx, &b), vec![Some(5), None]);
        assert!(all_offsets(&ctx, &b, 0).is_err());
        ctx.offsets.insert(("t".into(), 1, 1), 0);
        assert_eq!(all_offsets(&ctx, &b, 0), Ok(vec![5, 0]));
        assert!(int_constant(&ctx, "norb").is_err());
        ctx.ints.insert("norb".into(), 4);
        assert_eq!(int_constant(&ctx, "norb"), Ok(4));
    }
}
