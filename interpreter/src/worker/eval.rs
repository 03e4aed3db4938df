//! Expression evaluation: the stack programs of `bytecode::Expr`, with SIAL-SPEC §5.2
//! arithmetic (32-bit wrapping ints, truncating division, `(int)` rounding half to even) and
//! every floating-point fault turned into an error with the line.

use super::Worker;
use crate::error::{Result, RuntimeError};
use sial_compiler::bytecode::{CmpOp, ExprId, ExprOp};
use sial_superinstructions::{Operand, Shape, dot};
use smallvec::SmallVec;

/// Expression stacks are shallow; this keeps them off the heap.
type Stack = SmallVec<[Value; 16]>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Int(i32),
    Scalar(f64),
}

impl Worker<'_> {
    pub(crate) fn eval_int(&self, id: ExprId) -> Result<i32> {
        match self.eval(id)? {
            Value::Int(v) => Ok(v),
            Value::Scalar(_) => Err(RuntimeError::new(
                "internal: int expression produced a scalar",
            )),
        }
    }

    pub(crate) fn eval_scalar(&self, id: ExprId) -> Result<f64> {
        match self.eval(id)? {
            Value::Scalar(v) => Ok(v),
            Value::Int(_) => Err(RuntimeError::new(
                "internal: scalar expression produced an int",
            )),
        }
    }

    /// A relational expression (`if`, `where`).
    pub(crate) fn eval_bool(&self, id: ExprId) -> Result<bool> {
        Ok(self.eval_int(id)? != 0)
    }

    fn eval(&self, id: ExprId) -> Result<Value> {
        let expr = self.program.expr(id);
        let mut stack = Stack::new();
        for op in &expr.ops {
            let v = match op {
                ExprOp::Int(v) => Value::Int(*v),
                ExprOp::Scalar(v) => Value::Scalar(*v),
                ExprOp::LoadInt(s) => Value::Int(self.ints[s.index()]),
                ExprOp::LoadIndex(s) => Value::Int(self.index_value(*s)?),
                ExprOp::LoadScalar(s) => Value::Scalar(self.scalars[s.index()]),
                ExprOp::LoadBlockScalar(r) => {
                    let b = self.read_block(r)?;
                    Value::Scalar(b.data.first().copied().unwrap_or(0.0))
                }
                ExprOp::Dot { left, right, .. } => {
                    let (l, r) = (self.read_block(left)?, self.read_block(right)?);
                    let ll: Vec<u32> = left.indices.iter().map(|i| i.0).collect();
                    let rl: Vec<u32> = right.indices.iter().map(|i| i.0).collect();
                    let v = dot(
                        Operand::new(&l.data, Shape::new(&l.shape)?, &ll),
                        Operand::new(&r.data, Shape::new(&r.shape)?, &rl),
                    )?;
                    Value::Scalar(v)
                }
                ExprOp::IntNeg => Value::Int(pop_int(&mut stack)?.wrapping_neg()),
                ExprOp::ScalarNeg => Value::Scalar(-pop_scalar(&mut stack)?),
                ExprOp::ScalarSqrt => {
                    let x = pop_scalar(&mut stack)?;
                    if x < 0.0 {
                        return Err(RuntimeError::new(format!(
                            "domain error in sqrt expression: sqrt of {}",
                            num(x)
                        )));
                    }
                    Value::Scalar(x.sqrt())
                }
                ExprOp::ToInt => {
                    let x = pop_scalar(&mut stack)?;
                    let r = x.round_ties_even();
                    if !r.is_finite() || r < i32::MIN as f64 || r > i32::MAX as f64 {
                        return Err(RuntimeError::new(format!(
                            "(int) of {} does not fit in a 32-bit int",
                            num(x)
                        )));
                    }
                    Value::Int(r as i32)
                }
                ExprOp::ToScalar => Value::Scalar(pop_int(&mut stack)? as f64),
                ExprOp::IntAdd
                | ExprOp::IntSub
                | ExprOp::IntMul
                | ExprOp::IntDiv
                | ExprOp::IntCmp(_) => {
                    let b = pop_int(&mut stack)?;
                    let a = pop_int(&mut stack)?;
                    match op {
                        ExprOp::IntAdd => Value::Int(a.wrapping_add(b)),
                        ExprOp::IntSub => Value::Int(a.wrapping_sub(b)),
                        ExprOp::IntMul => Value::Int(a.wrapping_mul(b)),
                        ExprOp::IntDiv => {
                            if b == 0 {
                                return Err(RuntimeError::new(format!(
                                    "integer division by zero ({a} / 0)"
                                )));
                            }
                            Value::Int(a.wrapping_div(b))
                        }
                        ExprOp::IntCmp(c) => Value::Int(i32::from(compare(*c, a.cmp(&b)))),
                        _ => unreachable_op()?,
                    }
                }
                ExprOp::ScalarAdd
                | ExprOp::ScalarSub
                | ExprOp::ScalarMul
                | ExprOp::ScalarDiv
                | ExprOp::ScalarPow
                | ExprOp::ScalarCmp(_) => {
                    let b = pop_scalar(&mut stack)?;
                    let a = pop_scalar(&mut stack)?;
                    match op {
                        ExprOp::ScalarCmp(c) => {
                            let ord = a.partial_cmp(&b);
                            let result = match ord {
                                Some(o) => compare(*c, o),
                                None => matches!(c, CmpOp::Ne),
                            };
                            Value::Int(i32::from(result))
                        }
                        ExprOp::ScalarDiv if b == 0.0 => {
                            return Err(RuntimeError::new(format!(
                                "floating-point division by zero ({} / 0.0)",
                                num(a)
                            )));
                        }
                        _ => {
                            let r = match op {
                                ExprOp::ScalarAdd => a + b,
                                ExprOp::ScalarSub => a - b,
                                ExprOp::ScalarMul => a * b,
                                ExprOp::ScalarDiv => a / b,
                                _ => a.powf(b),
                            };
                            check_float(op, a, b, r)?;
                            Value::Scalar(r)
                        }
                    }
                }
            };
            stack.push(v);
        }
        stack
            .pop()
            .ok_or_else(|| RuntimeError::new("internal: empty expression"))
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

fn pop_int(stack: &mut Stack) -> Result<i32> {
    match stack.pop() {
        Some(Value::Int(v)) => Ok(v),
        _ => Err(RuntimeError::new(
            "internal: expected an int on the expression stack",
        )),
    }
}

fn pop_scalar(stack: &mut Stack) -> Result<f64> {
    match stack.pop() {
        Some(Value::Scalar(v)) => Ok(v),
        _ => Err(RuntimeError::new(
            "internal: expected a scalar on the expression stack",
        )),
    }
}

fn unreachable_op() -> Result<Value> {
    Err(RuntimeError::new("internal: unexpected expression step"))
}
