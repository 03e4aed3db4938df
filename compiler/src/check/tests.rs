//! What the checker emits for the block forms: each plan is worked out by hand here.

use crate::bytecode::{
    ContractPlan, ExprOp, Layout, Op, Program, PutOp, ScalarUpdate, Sign, ValueType,
};
use crate::{Options, compile_source};

fn compile(body: &str) -> Program {
    let src = format!(
        "sial t\naoindex i = 1:2\naoindex j = 1:2\naoindex k = 1:2\naoindex l = 1:2\nindex s = 1:3\n\
         temp a[i,j]\ntemp b[j,i]\ntemp c[i,k]\ntemp d[k,j]\ntemp e[i,j,k,l]\ntemp f[k,l]\ntemp g[i,j,s]\n\
         temp v[s]\ndistributed x[i,j]\nscalar y\nint n\n{body}\nendsial t\n"
    );
    let c = compile_source(std::path::Path::new("t.sial"), src, &Options::default());
    let text = c.diagnostics.render(&c.sources);
    c.program
        .unwrap_or_else(|| panic!("does not compile:\n{text}"))
}

/// The ops of the first statement inside `do i / do j / do k / do l`.
fn op_of(stmt: &str) -> (Program, Op) {
    let p = compile(&format!(
        "do i\ndo j\ndo k\ndo l\ndo s\n{stmt}\nenddo s\nenddo l\nenddo k\nenddo j\nenddo i"
    ));
    let op = p.code[5].op.clone();
    (p, op)
}

fn layout(perm: &[Option<u8>]) -> Layout {
    Layout {
        perm: perm.to_vec(),
    }
}

#[test]
fn matrix_product_plan() {
    let (_, op) = op_of("a[i,j] = c[i,k] * d[k,j]");
    let Op::BlockContract {
        plan, accumulate, ..
    } = op
    else {
        panic!("{op:?}")
    };
    assert!(!accumulate);
    assert_eq!(
        plan,
        ContractPlan {
            contracted: vec![(1, 0)],
            left_free: vec![(0, 0)],
            right_free: vec![(1, 1)]
        }
    );
}

#[test]
fn transposed_result_and_accumulate() {
    let (_, op) = op_of("b[j,i] += c[i,k] * d[k,j]");
    let Op::BlockContract {
        plan, accumulate, ..
    } = op
    else {
        panic!("{op:?}")
    };
    assert!(accumulate);
    assert_eq!(
        plan,
        ContractPlan {
            contracted: vec![(1, 0)],
            left_free: vec![(0, 1)],
            right_free: vec![(1, 0)]
        }
    );
}

#[test]
fn four_index_and_tensor_products() {
    let (_, op) = op_of("e[i,j,k,l] = a[i,j] ^ f[k,l]");
    let Op::BlockContract { plan, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(
        plan,
        ContractPlan {
            contracted: vec![],
            left_free: vec![(0, 0), (1, 1)],
            right_free: vec![(0, 2), (1, 3)]
        }
    );
    let (_, op) = op_of("a[i,j] = e[i,j,k,l] * f[k,l]");
    let Op::BlockContract { plan, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(
        plan,
        ContractPlan {
            contracted: vec![(2, 0), (3, 1)],
            left_free: vec![(0, 0), (1, 1)],
            right_free: vec![]
        }
    );
}

#[test]
fn copies_permute_by_index_name() {
    let (_, op) = op_of("a[i,j] = b[j,i]");
    assert_eq!(
        op,
        Op::BlockCopy {
            dst: op_dst(&op),
            src: op_src(&op),
            layout: layout(&[Some(1), Some(0)])
        }
    );
    let (_, op) = op_of("g[i,j,s] = a[i,j]");
    let Op::BlockCopy { layout: l, .. } = op else {
        panic!()
    };
    assert_eq!(l, layout(&[Some(0), Some(1), None]));
    let (_, op) = op_of("a[i,j] -= b[j,i]");
    let Op::BlockAccumulate {
        sign, layout: l, ..
    } = op
    else {
        panic!()
    };
    assert_eq!((sign, l), (Sign::Minus, layout(&[Some(1), Some(0)])));
}

fn op_dst(op: &Op) -> crate::bytecode::Operand {
    match op {
        Op::BlockCopy { dst, .. } => dst.clone(),
        _ => panic!(),
    }
}

fn op_src(op: &Op) -> crate::bytecode::Operand {
    match op {
        Op::BlockCopy { src, .. } => src.clone(),
        _ => panic!(),
    }
}

#[test]
fn scalar_right_hand_sides_fill_and_scale() {
    let (p, op) = op_of("a[i,j] -= y * 2.0");
    let Op::BlockScalar { update, value, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(update, ScalarUpdate::Add);
    assert_eq!(p.expr(value).ops.last(), Some(&ExprOp::ScalarNeg));
    // A scalar-valued block times a scalar is a scalar: the block is filled with it.
    let (_, op) = op_of("a[i,j] = v[s] * y");
    assert!(
        matches!(
            op,
            Op::BlockScalar {
                update: ScalarUpdate::Fill,
                ..
            }
        ),
        "{op:?}"
    );
    let (_, op) = op_of("a[i,j] *= v[s]");
    assert!(
        matches!(
            op,
            Op::BlockScalar {
                update: ScalarUpdate::Scale,
                ..
            }
        ),
        "{op:?}"
    );
}

#[test]
fn full_contraction_inside_a_scalar_expression() {
    let (p, op) = op_of("y = a[i,j] * b[j,i] + 1.0");
    let Op::AssignScalar { value, .. } = op else {
        panic!("{op:?}")
    };
    let e = p.expr(value);
    assert_eq!(e.ty, ValueType::Scalar);
    let ExprOp::Dot { plan, .. } = &e.ops[0] else {
        panic!("{e:?}")
    };
    assert_eq!(plan.contracted, vec![(0, 1), (1, 0)]);
    assert_eq!(&e.ops[1..], &[ExprOp::Scalar(1.0), ExprOp::ScalarAdd]);
}

#[test]
fn puts_and_int_arithmetic() {
    let (_, op) = op_of("put x[i,j] += a[i,j]");
    assert!(
        matches!(
            op,
            Op::Put {
                op: PutOp::Accumulate,
                ..
            }
        ),
        "{op:?}"
    );
    let (p, op) = op_of("n = (int) 2.5 - 7 / 2");
    let Op::AssignInt { value, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(
        p.expr(value).ops,
        vec![
            ExprOp::Scalar(2.5),
            ExprOp::ToInt,
            ExprOp::Int(7),
            ExprOp::Int(2),
            ExprOp::IntDiv,
            ExprOp::IntSub
        ]
    );
}

#[test]
fn power_is_left_associative_and_minus_binds_tightest() {
    let (p, op) = op_of("y = -2.0 ** 2.0 ** 3.0");
    let Op::AssignScalar { value, .. } = op else {
        panic!("{op:?}")
    };
    assert_eq!(
        p.expr(value).ops,
        vec![
            ExprOp::Scalar(2.0),
            ExprOp::ScalarNeg,
            ExprOp::Scalar(2.0),
            ExprOp::ScalarPow,
            ExprOp::Scalar(3.0),
            ExprOp::ScalarPow
        ]
    );
}

#[test]
fn uncalled_procedures_generate_no_code() {
    let p = compile("y = 1.0");
    let src = "sial t\nscalar y\nproc used\ny = 2.0\nendproc used\nproc unused\ny = 3.0\nendproc unused\ncall used\nendsial t\n";
    let c = compile_source(
        std::path::Path::new("t.sial"),
        src.to_string(),
        &Options::default(),
    );
    let q = c.program.expect("compiles");
    assert_eq!(q.procs.len(), 1);
    assert_eq!(q.procs[0].name, "used");
    assert!(
        c.diagnostics
            .render(&c.sources)
            .contains("procedure unused at line 6 is never called")
    );
    assert_eq!(p.procs.len(), 0);
}
