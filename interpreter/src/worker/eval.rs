//! Expression evaluation: the stack programs of `bytecode::Expr`, with SIAL-SPEC §5.2
//! arithmetic (32-bit wrapping ints, truncating division, `(int)` rounding half to even) and
//! every floating-point fault turned into an error with the line.

use super::Worker;
use super::access::Labels;
use crate::error::{Result, RuntimeError};
use crate::store::Block;
use sial_bytecode::{CmpOp, ExprId, ExprOp, ValueType};
use sial_superinstructions::{Operand, Shape, check_full_contraction, dot_in_order};

/// Expressions up to this many steps evaluate on stacks on the machine stack.
const SHORT: usize = 8;

impl Worker<'_> {
    /// `Σ l * r` over every label: element by element where both blocks are laid out alike,
    /// else by the contraction plan kept for these labels and shapes (`plans`): planning costs
    /// more than the whole sum of small blocks, and finding a kept plan more than a sum of a
    /// few elements.
    fn full_contraction(&self, left: (&Block, &[u32]), right: (&Block, &[u32])) -> Result<f64> {
        let ((l, ll), (r, rl)) = (left, right);
        check_full_contraction(ll, rl)?;
        if ll == rl && l.shape == r.shape {
            let shape = Shape::new(&l.shape)?;
            let (lo, ro) = (
                Operand::new(&l.data, shape, ll),
                Operand::new(&r.data, shape, rl),
            );
            if let Some(s) = dot_in_order(&lo, &ro)? {
                return Ok(s);
            }
        }
        let plan = self
            .plans
            .borrow_mut()
            .plan((&[], &[]), (ll, &l.shape), (rl, &r.shape))?;
        let mut sum = [0.0];
        plan.execute(&mut sum, &l.data, &r.data, 0.0)?;
        Ok(sum[0])
    }

    pub(crate) fn eval_int(&self, id: ExprId) -> Result<i32> {
        let expr = self.program.expr(id);
        if expr.ty == ValueType::Scalar {
            return Err(RuntimeError::new(
                "internal: int expression produced a scalar",
            ));
        }
        Ok(self.eval(&expr.ops)?.0)
    }

    pub(crate) fn eval_scalar(&self, id: ExprId) -> Result<f64> {
        let expr = self.program.expr(id);
        if expr.ty != ValueType::Scalar {
            return Err(RuntimeError::new(
                "internal: scalar expression produced an int",
            ));
        }
        Ok(self.eval(&expr.ops)?.1)
    }

    /// A relational expression (`if`, `where`).
    pub(crate) fn eval_bool(&self, id: ExprId) -> Result<bool> {
        Ok(self.eval_int(id)? != 0)
    }

    /// Runs a stack program; returns the tops of the int and the scalar stack (the caller knows
    /// the expression's type). Ints and scalars live on separate untagged stacks, as in ACES4's
    /// control and expression stacks.
    fn eval(&self, ops: &[ExprOp]) -> Result<(i32, f64)> {
        if ops.len() <= SHORT {
            let mut ints = [0i32; SHORT];
            let mut scalars = [0f64; SHORT];
            self.run_ops(ops, &mut ints, &mut scalars)
        } else {
            let mut ints = vec![0i32; ops.len()];
            let mut scalars = vec![0f64; ops.len()];
            self.run_ops(ops, &mut ints, &mut scalars)
        }
    }

    /// Each stack holds at most `ops.len()` values, the size of both buffers.
    fn run_ops(&self, ops: &[ExprOp], is: &mut [i32], fs: &mut [f64]) -> Result<(i32, f64)> {
        let (mut ni, mut nf) = (0usize, 0usize);
        let underflow = || RuntimeError::new("internal: expression stack underflow");
        for op in ops {
            match op {
                ExprOp::Int(v) => {
                    is[ni] = *v;
                    ni += 1;
                }
                ExprOp::LoadInt(s) => {
                    is[ni] = self.ints[s.index()];
                    ni += 1;
                }
                ExprOp::LoadIndex(s) => {
                    is[ni] = self.index_value(*s)?;
                    ni += 1;
                }
                ExprOp::Scalar(v) => {
                    fs[nf] = *v;
                    nf += 1;
                }
                ExprOp::LoadScalar(s) => {
                    fs[nf] = self.scalars[s.index()];
                    nf += 1;
                }
                ExprOp::LoadBlockScalar(r) => {
                    let b = self.read_block(r)?;
                    fs[nf] = b.data.first().copied().unwrap_or(0.0);
                    nf += 1;
                }
                ExprOp::Dot { left, right, .. } => {
                    let l = self.read_block(left)?;
                    // `x * x` reads its block once.
                    let read_right;
                    let r: &Block = if left == right {
                        &l
                    } else {
                        read_right = self.read_block(right)?;
                        &read_right
                    };
                    let (ll, rl) = (Labels::of(left), Labels::of(right));
                    fs[nf] = self.full_contraction((&l, &ll), (r, &rl))?;
                    nf += 1;
                }
                ExprOp::IntNeg => {
                    let top = ni.checked_sub(1).ok_or_else(underflow)?;
                    is[top] = is[top].wrapping_neg();
                }
                ExprOp::ScalarNeg => {
                    let top = nf.checked_sub(1).ok_or_else(underflow)?;
                    fs[top] = -fs[top];
                }
                ExprOp::ScalarSqrt => {
                    let top = nf.checked_sub(1).ok_or_else(underflow)?;
                    let x = fs[top];
                    if x < 0.0 {
                        return Err(RuntimeError::new(format!(
                            "domain error in sqrt expression: sqrt of {}",
                            num(x)
                        )));
                    }
                    fs[top] = x.sqrt();
                }
                ExprOp::ToInt => {
                    nf = nf.checked_sub(1).ok_or_else(underflow)?;
                    let x = fs[nf];
                    let r = x.round_ties_even();
                    if !r.is_finite() || r < i32::MIN as f64 || r > i32::MAX as f64 {
                        return Err(RuntimeError::new(format!(
                            "(int) of {} does not fit in a 32-bit int",
                            num(x)
                        )));
                    }
                    is[ni] = r as i32;
                    ni += 1;
                }
                ExprOp::ToScalar => {
                    ni = ni.checked_sub(1).ok_or_else(underflow)?;
                    fs[nf] = is[ni] as f64;
                    nf += 1;
                }
                ExprOp::IntAdd
                | ExprOp::IntSub
                | ExprOp::IntMul
                | ExprOp::IntDiv
                | ExprOp::IntCmp(_) => {
                    if ni < 2 {
                        return Err(underflow());
                    }
                    let (a, b) = (is[ni - 2], is[ni - 1]);
                    ni -= 1;
                    is[ni - 1] = match op {
                        ExprOp::IntAdd => a.wrapping_add(b),
                        ExprOp::IntSub => a.wrapping_sub(b),
                        ExprOp::IntMul => a.wrapping_mul(b),
                        ExprOp::IntDiv => {
                            if b == 0 {
                                return Err(RuntimeError::new(format!(
                                    "integer division by zero ({a} / 0)"
                                )));
                            }
                            a.wrapping_div(b)
                        }
                        ExprOp::IntCmp(c) => i32::from(compare(*c, a.cmp(&b))),
                        _ => return Err(underflow()),
                    };
                }
                ExprOp::ScalarCmp(c) => {
                    if nf < 2 {
                        return Err(underflow());
                    }
                    let (a, b) = (fs[nf - 2], fs[nf - 1]);
                    nf -= 2;
                    let result = match a.partial_cmp(&b) {
                        Some(o) => compare(*c, o),
                        None => matches!(c, CmpOp::Ne),
                    };
                    is[ni] = i32::from(result);
                    ni += 1;
                }
                ExprOp::ScalarAdd
                | ExprOp::ScalarSub
                | ExprOp::ScalarMul
                | ExprOp::ScalarDiv
                | ExprOp::ScalarPow => {
                    if nf < 2 {
                        return Err(underflow());
                    }
                    let (a, b) = (fs[nf - 2], fs[nf - 1]);
                    nf -= 1;
                    let r = match op {
                        ExprOp::ScalarAdd => a + b,
                        ExprOp::ScalarSub => a - b,
                        ExprOp::ScalarMul => a * b,
                        ExprOp::ScalarDiv => {
                            if b == 0.0 {
                                return Err(RuntimeError::new(format!(
                                    "floating-point division by zero ({} / 0.0)",
                                    num(a)
                                )));
                            }
                            a / b
                        }
                        _ => a.powf(b),
                    };
                    if !r.is_finite() {
                        check_float(op, a, b, r)?;
                    }
                    fs[nf - 1] = r;
                }
            }
        }
        let int = if ni > 0 { is[ni - 1] } else { 0 };
        let scalar = if nf > 0 { fs[nf - 1] } else { 0.0 };
        Ok((int, scalar))
    }
}

/// The FP traps ACES4 enables (invalid, overflow) as errors.
fn check_float(op: &ExprOp, a: f64, b: f64, r: f64) -> Result<()> {
    if r.is_finite() || !a.is_finite() || !b.is_finite() {
        return Ok(());
    }
    let (a, b) = (num(a), num(b));
    let sign = match op {
        ExprOp::ScalarAdd => "+",
        ExprOp::ScalarSub => "-",
        ExprOp::ScalarMul => "*",
        ExprOp::ScalarDiv => "/",
        _ => "**",
    };
    let msg = match (op, r.is_nan()) {
        (ExprOp::ScalarPow, true) => format!("domain error in exponent expression: {a} ** {b}"),
        (ExprOp::ScalarPow, false) => {
            format!("pole or range error in raise-to-power expression: {a} ** {b}")
        }
        (_, true) => format!("invalid floating-point operation: {a} {sign} {b}"),
        (_, false) => format!("floating-point overflow: {a} {sign} {b}"),
    };
    Err(RuntimeError::new(msg))
}

/// A number for a message: plain when short, in exponent form when very large or small.
fn num(x: f64) -> String {
    let m = x.abs();
    if x == 0.0 || (1e-4..1e15).contains(&m) {
        format!("{x:?}")
    } else {
        format!("{x:e}")
    }
}

fn compare(c: CmpOp, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match c {
        CmpOp::Lt => o == Less,
        CmpOp::Le => o != Greater,
        CmpOp::Gt => o == Greater,
        CmpOp::Ge => o != Less,
        CmpOp::Eq => o == Equal,
        CmpOp::Ne => o != Equal,
    }
}
