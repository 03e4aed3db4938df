//! Consistency checking at the server (SIAL-SPEC §7.7): per block and section, which workers
//! read, wrote or accumulated it. A combination that depends on timing is a data race.

/// How a request touches a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// GET
    Read,
    /// PUT, PUT_INITIALIZE, PUT_SCALE
    Write,
    /// PUT_ACCUMULATE, PUT_INCREMENT
    Accumulate,
}

impl Access {
    /// How a put with operator `op` touches its block.
    pub fn of_put(op: sial_bytecode::PutOp) -> Access {
        match op {
            sial_bytecode::PutOp::Accumulate => Access::Accumulate,
            sial_bytecode::PutOp::Replace | sial_bytecode::PutOp::Scale => Access::Write,
        }
    }
}

/// A block's state in the current section; `u32` is the worker that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    None,
    Read(u32),
    ReadMany,
    Write(u32),
    Acc(u32),
    AccMany,
    Single(u32),
}

impl Mode {
    /// The state after worker `w` accesses the block, or `Err(previous worker)` for a race.
    pub fn next(self, access: Access, w: u32) -> Result<Mode, Option<u32>> {
        use Access as A;
        use Mode::*;
        Ok(match (self, access) {
            (None, A::Read) => Read(w),
            (None, A::Write) => Write(w),
            (None, A::Accumulate) => Acc(w),
            (Read(v), A::Read) if v == w => Read(w),
            (Read(_), A::Read) => ReadMany,
            (Read(v), _) if v == w => Single(w),
            (ReadMany, A::Read) => ReadMany,
            (Write(v), _) | (Single(v), _) if v == w => Single(w),
            (Acc(v), A::Accumulate) if v == w => Acc(w),
            (Acc(v), _) if v == w => Single(w),
            (Acc(_), A::Accumulate) | (AccMany, A::Accumulate) => AccMany,
            (Read(v), _) | (Write(v), _) | (Acc(v), _) | (Single(v), _) => return Err(Some(v)),
            (ReadMany, _) | (AccMany, _) => return Err(Option::None),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Access::{Accumulate, Read as Get, Write as Put};
    use super::Mode::*;

    /// Every cell of the table in SIAL-SPEC §7.7 (w = 1 set the state, w1 = 2 is another).
    #[test]
    fn transition_table_of_the_spec() {
        let rows = [
            (
                None,
                [
                    Ok(Read(1)),
                    Ok(Write(1)),
                    Ok(Acc(1)),
                    Ok(Read(2)),
                    Ok(Write(2)),
                    Ok(Acc(2)),
                ],
            ),
            (
                Read(1),
                [
                    Ok(Read(1)),
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Ok(ReadMany),
                    Err(()),
                    Err(()),
                ],
            ),
            (
                ReadMany,
                [
                    Ok(ReadMany),
                    Err(()),
                    Err(()),
                    Ok(ReadMany),
                    Err(()),
                    Err(()),
                ],
            ),
            (
                Write(1),
                [
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Err(()),
                    Err(()),
                    Err(()),
                ],
            ),
            (
                Acc(1),
                [
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Ok(Acc(1)),
                    Err(()),
                    Err(()),
                    Ok(AccMany),
                ],
            ),
            (
                AccMany,
                [Err(()), Err(()), Ok(AccMany), Err(()), Err(()), Ok(AccMany)],
            ),
            (
                Single(1),
                [
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Ok(Single(1)),
                    Err(()),
                    Err(()),
                    Err(()),
                ],
            ),
        ];
        let ops = [
            (Get, 1),
            (Put, 1),
            (Accumulate, 1),
            (Get, 2),
            (Put, 2),
            (Accumulate, 2),
        ];
        for (state, expected) in rows {
            for ((access, w), want) in ops.iter().zip(expected) {
                let got = state.next(*access, *w).map_err(|_| ());
                assert_eq!(got, want, "{state:?} + {access:?} by {w}");
            }
        }
    }
}
