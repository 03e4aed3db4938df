//! Output, special instructions and persistence: the instructions that talk to the world
//! outside the block computations.

use super::Worker;
use super::access::BlockRead;
use crate::error::{Result, RuntimeError};
use crate::print;
use crate::specials::{Arg, ArgData, ArgKind, Context};
use crate::store::{Block, BlockKey, Extents, Storage};
use sial_bytecode::{
    ArrayKind, BlockRef, ExecArg, Intent, Operand, Persistent, PrintItem, SpecialSlot,
};

impl Worker<'_> {
    fn emit(&mut self, text: &str) -> Result<()> {
        // Printing happens on worker 0 unless every rank prints (SIAL-SPEC §7.12).
        if self.rank != 0 && !self.all_rank_print {
            return Ok(());
        }
        self.env
            .out
            .write_all(text.as_bytes())
            .map_err(|e| RuntimeError::new(format!("cannot write output: {e}")))
    }

    pub(super) fn print(&mut self, item: &PrintItem, newline: bool) -> Result<()> {
        let line = self.line;
        let p = self.program;
        let mut text = match item {
            PrintItem::Str(s) => print::string(&p.strings[s.index()]),
            PrintItem::IntVar(s) => {
                print::named_int(line, &p.ints[s.index()].name, self.ints[s.index()])
            }
            PrintItem::Index(s) => {
                print::named_int(line, &p.indices[s.index()].name, self.index_value(*s)?)
            }
            PrintItem::ScalarVar(s) => {
                print::named_scalar(line, &p.scalars[s.index()].name, self.scalars[s.index()])
            }
            PrintItem::IntExpr(e) => print::int_value(self.eval_int(*e)?),
            PrintItem::ScalarExpr(e) => print::scalar_value(self.eval_scalar(*e)?),
            PrintItem::Block(Operand::Block(r)) => {
                let b = self.read_block(r)?;
                let (key, _) = self.locate(r)?;
                let rank = r.indices.len();
                print::block(
                    line,
                    self.array_name(r.array),
                    key.rank_segments(rank),
                    &b.shape,
                    &b.data,
                )
            }
            PrintItem::Block(Operand::Region(r)) => {
                let b = self.read_region(r)?;
                let (lower, upper, _) = self.region_bounds(r)?;
                print::region(
                    line,
                    self.array_name(r.array),
                    &lower,
                    &upper,
                    &b.shape,
                    &b.data,
                )
            }
            PrintItem::Array(a) => match &self.memory[a.index()] {
                Storage::Whole(b) => {
                    print::static_array(line, self.array_name(*a), &b.shape, &b.data)
                }
                _ => {
                    return Err(RuntimeError::new(
                        "internal: print of a whole non-static array",
                    ));
                }
            },
        };
        if newline {
            text.push('\n');
        }
        self.emit(&text)
    }

    pub(super) fn execute(&mut self, slot: SpecialSlot, args: &[ExecArg]) -> Result<()> {
        let special = &self.program.specials[slot.index()];
        let name = special.name.clone();
        let Some(f) = self.env.registry.get(&name) else {
            return Err(RuntimeError::new(format!(
                "special instruction {name} at slot {} not installed",
                slot.0
            )));
        };
        if args.len() > 6 {
            return Err(RuntimeError::new(
                "Implementation restriction:  At most 6 arguments to a super instruction supported",
            ));
        }
        let intents = special.intents.clone();
        let intent = |i: usize| intents.get(i).copied().unwrap_or(Intent::Read);
        let lendable = self.lendable(args)?;
        // The key and shape of each block lent, to put it back.
        let mut lent: Vec<Option<(BlockKey, Extents)>> = vec![None; args.len()];
        let mut passed = Vec::with_capacity(args.len());
        let mut acquired = Ok(());
        for (i, a) in args.iter().enumerate() {
            let arg = match (a, lendable[i]) {
                (ExecArg::Block(r), Some(key)) if intent(i) != Intent::Write => {
                    self.lend(r, key, intent(i)).map(|(arg, shape)| {
                        lent[i] = Some((key, shape));
                        arg
                    })
                }
                _ => self.special_arg(a, intent(i)),
            };
            match arg {
                Ok(arg) => passed.push(arg),
                Err(e) => {
                    acquired = Err(e);
                    break;
                }
            }
        }
        let result = match acquired {
            Ok(()) => f(self, &mut passed),
            Err(_) => Ok(()),
        };
        // Lent blocks go back to their maps whatever happened, before any error is reported.
        let mut returned = Ok(());
        for (i, (a, arg)) in args.iter().zip(passed).enumerate() {
            let back = match (a, lent[i]) {
                (ExecArg::Block(r), Some(key_shape)) => {
                    self.give_back(r, key_shape, arg, intent(i), (&name, i))
                }
                _ if intent(i) != Intent::Read => self.return_arg(a, arg),
                _ => Ok(()),
            };
            if returned.is_ok() {
                returned = back;
            }
        }
        acquired?;
        if let Err(msg) = result {
            return Err(RuntimeError::new(format!(
                "error returned from special super instruction {name}: {msg}"
            )));
        }
        returned
    }

    /// The keys of the arguments that are blocks held in one of this worker's block maps,
    /// named by no other argument: those are lent to the special (taken out of the map, and
    /// put back after the call) instead of copied, as ACES4 hands a special the block's own
    /// memory. A block of two million elements copied for every `stripi` of CCSD(T) cost a
    /// tenth of the job (docs/benchmarks.md, "Specials' block arguments lent, not copied").
    fn lendable(&self, args: &[ExecArg]) -> Result<Vec<Option<BlockKey>>> {
        let mut held = Vec::with_capacity(args.len());
        for a in args {
            held.push(match a {
                ExecArg::Block(r) if matches!(self.memory[r.array.index()], Storage::Blocks(_)) => {
                    Some((r.array, self.locate(r)?.0))
                }
                _ => None,
            });
        }
        Ok(held
            .iter()
            .map(|h| {
                h.filter(|h| held.iter().filter(|o| **o == Some(*h)).count() == 1)
                    .map(|h| h.1)
            })
            .collect())
    }

    /// Held block `key` lent to a special: taken out of its map (it must exist), and its shape.
    fn lend(&mut self, r: &BlockRef, key: BlockKey, intent: Intent) -> Result<(Arg, Extents)> {
        let taken = match &mut self.memory[r.array.index()] {
            Storage::Blocks(map) => map.remove(&key),
            _ => None,
        };
        let Some(b) = taken else {
            return Err(self.missing_block(r.array, &key, intent));
        };
        let arg = Arg {
            kind: ArgKind::Block,
            name: self.array_name(r.array).to_string(),
            rank: r.indices.len(),
            segments: key.rank_segments(r.indices.len()).to_vec(),
            shape: b.shape.to_vec(),
            data: if intent == Intent::Read {
                ArgData::lent(b.data)
            } else {
                b.data.into()
            },
        };
        Ok((arg, b.shape))
    }

    /// A lent block back into its map: as it was lent for a read, with what the special left
    /// in it for an update (argument `i` of special `name`).
    fn give_back(
        &mut self,
        r: &BlockRef,
        (key, shape): (BlockKey, Extents),
        arg: Arg,
        intent: Intent,
        (name, i): (&str, usize),
    ) -> Result<()> {
        let data = if intent == Intent::Read {
            arg.data
                .take_lent()
                .ok_or_else(|| RuntimeError::new("internal: a lent block was not lent"))?
        } else {
            arg.data.into_vec()
        };
        let elements: usize = shape.iter().product();
        if data.len() != elements {
            return Err(RuntimeError::new(format!(
                "special super instruction {name} changed the size of its argument {} ({} elements, not {elements})",
                i + 1,
                data.len(),
            )));
        }
        if let Storage::Blocks(map) = &mut self.memory[r.array.index()] {
            map.insert(key, Block { shape, data });
        }
        Ok(())
    }

    fn special_arg(&mut self, a: &ExecArg, intent: Intent) -> Result<Arg> {
        let zero = intent == Intent::Write;
        Ok(match a {
            ExecArg::Block(r) => {
                let (key, shape) = self.locate(r)?;
                let data = if zero {
                    Block::zeros(shape)?.data.into()
                } else if intent == Intent::Update {
                    self.update_block(r)?.data.into()
                } else {
                    match self.read_block(r)? {
                        // A fetched copy, which the cache holds too: shared for reading.
                        BlockRead::Shared(b) => ArgData::shared(b),
                        read => read.into_owned()?.data.into(),
                    }
                };
                Arg {
                    kind: ArgKind::Block,
                    name: self.array_name(r.array).to_string(),
                    rank: r.indices.len(),
                    segments: key.rank_segments(r.indices.len()).to_vec(),
                    shape: shape.to_vec(),
                    data,
                }
            }
            ExecArg::Region(r) => {
                let b = self.read_region(r)?;
                let (lower, _, _) = self.region_bounds(r)?;
                let data = if zero {
                    vec![0.0; b.data.len()]
                } else {
                    b.data
                };
                Arg {
                    kind: ArgKind::Block,
                    name: self.array_name(r.array).to_string(),
                    rank: b.shape.len(),
                    segments: lower,
                    shape: b.shape.to_vec(),
                    data: data.into(),
                }
            }
            ExecArg::Scalar(s) => Arg {
                kind: ArgKind::Scalar,
                name: self.program.scalars[s.index()].name.clone(),
                rank: 0,
                segments: Vec::new(),
                shape: Vec::new(),
                data: vec![if zero { 0.0 } else { self.scalars[s.index()] }].into(),
            },
            ExecArg::Array(arr) => {
                let name = self.array_name(*arr).to_string();
                let rank = self.program.arrays[arr.index()].dims.len();
                match &self.memory[arr.index()] {
                    Storage::Whole(b) => Arg {
                        kind: ArgKind::WholeArray,
                        name,
                        rank,
                        segments: Vec::new(),
                        shape: b.shape.to_vec(),
                        data: if zero {
                            vec![0.0; b.data.len()]
                        } else {
                            b.data.clone()
                        }
                        .into(),
                    },
                    _ => Arg {
                        kind: ArgKind::WholeArray,
                        name,
                        rank,
                        segments: Vec::new(),
                        shape: Vec::new(),
                        data: Vec::new().into(),
                    },
                }
            }
            ExecArg::Literal(v) => Arg {
                kind: ArgKind::Literal,
                name: String::new(),
                rank: 0,
                segments: Vec::new(),
                shape: Vec::new(),
                data: vec![*v].into(),
            },
        })
    }

    /// Writes a `w`/`u` argument back where it came from.
    fn return_arg(&mut self, a: &ExecArg, arg: Arg) -> Result<()> {
        match a {
            ExecArg::Block(r) => self.write_block(
                r,
                Block {
                    shape: Extents::of(&arg.shape)?,
                    data: arg.data.into_vec(),
                },
            ),
            ExecArg::Region(r) => self.write_region(
                r,
                &Block {
                    shape: Extents::of(&arg.shape)?,
                    data: arg.data.into_vec(),
                },
            ),
            ExecArg::Scalar(s) => {
                self.scalars[s.index()] = arg.data.first().copied().unwrap_or(0.0);
                Ok(())
            }
            ExecArg::Array(arr) => {
                if let Storage::Whole(b) = &mut self.memory[arr.index()]
                    && b.data.len() == arg.data.len()
                {
                    b.data = arg.data.into_vec();
                }
                Ok(())
            }
            ExecArg::Literal(_) => Ok(()),
        }
    }

    /// At the end of the program: saves every object marked with `set_persistent`.
    pub(super) fn save_persistent(&mut self) -> Result<()> {
        for (object, label) in std::mem::take(&mut self.marks) {
            match object {
                Persistent::Scalar(s) => {
                    let old = self
                        .env
                        .persisted
                        .scalars
                        .insert(label.clone(), self.scalars[s.index()]);
                    self.warn_overwrite(old.is_some(), &label);
                }
                // The servers save distributed and served arrays.
                Persistent::Array(a) if self.program.arrays[a.index()].kind.is_remote() => {}
                Persistent::Array(a) => match &self.memory[a.index()] {
                    Storage::Whole(b) => {
                        let old = self.env.persisted.statics.insert(label.clone(), b.clone());
                        self.warn_overwrite(old.is_some(), &label);
                    }
                    _ => {
                        return Err(RuntimeError::new(format!(
                            "internal: {} cannot be persistent",
                            self.array_name(a)
                        )));
                    }
                },
            }
        }
        Ok(())
    }

    fn warn_overwrite(&self, replaced: bool, label: &str) {
        if replaced {
            self.warn(&format!("Label {label} already used for a persistent object. Overwriting previously saved object"));
        }
    }

    /// A warning on stderr: `WARNING:  message at program:line` (SIAL-SPEC §7.15).
    pub(super) fn warn(&self, message: &str) {
        self.warn_at(self.line, message);
    }

    /// A warning naming source line `line` rather than the current one.
    pub(super) fn warn_at(&self, line: u32, message: &str) {
        if self.rank != 0 {
            return;
        }
        crate::report::say(&format!(
            "WARNING:  {message} at {}:{line}",
            self.program.name
        ));
    }

    pub(super) fn restore(&mut self, object: Persistent, label: &str) -> Result<()> {
        let missing = || {
            RuntimeError::program(format!(
                "no persistent object \"{label}\": nothing was saved under this label by an earlier program of the job (or it was already restored)"
            ))
        };
        match object {
            Persistent::Scalar(s) => {
                self.scalars[s.index()] = self
                    .env
                    .persisted
                    .scalars
                    .remove(label)
                    .ok_or_else(missing)?;
            }
            Persistent::Array(a) => {
                let kind = self.program.arrays[a.index()].kind;
                if kind == ArrayKind::Static {
                    let saved = self
                        .env
                        .persisted
                        .statics
                        .remove(label)
                        .ok_or_else(missing)?;
                    let Storage::Whole(b) = &mut self.memory[a.index()] else {
                        return Err(RuntimeError::new("internal: static storage"));
                    };
                    if b.shape != saved.shape {
                        return Err(RuntimeError::program(format!(
                            "restore_persistent \"{label}\": shape inconsistent, saved {:?}, {} has {:?}",
                            saved.shape,
                            self.program.arrays[a.index()].name,
                            b.shape
                        )));
                    }
                    *b = saved;
                } else {
                    return Err(RuntimeError::new(format!(
                        "internal: {} is restored by the servers",
                        self.program.arrays[a.index()].name
                    )));
                }
            }
        }
        Ok(())
    }
}

impl Context for Worker<'_> {
    fn worker_rank(&self) -> usize {
        self.rank
    }

    fn line(&self) -> u32 {
        self.line
    }

    fn program(&self) -> &str {
        &self.program.name
    }

    fn print(&mut self, text: &str) {
        if self.rank == 0 || self.all_rank_print {
            let _ = self.env.out.write_all(text.as_bytes());
        }
    }

    fn set_all_rank_print(&mut self, on: bool) {
        self.all_rank_print = on;
    }

    fn set_debug_print(&mut self, _on: bool) {}

    fn int_constant(&self, name: &str) -> Option<i32> {
        self.env.setup.ints.get(name).copied()
    }

    fn scalar_constant(&self, name: &str) -> Option<f64> {
        self.env.setup.scalars.get(name).copied()
    }

    fn scalar(&self, name: &str) -> Option<f64> {
        self.program
            .scalars
            .iter()
            .position(|s| s.name == name)
            .map(|i| self.scalars[i])
    }

    fn set_scalar(&mut self, name: &str, value: f64) -> bool {
        match self.program.scalars.iter().position(|s| s.name == name) {
            Some(i) => {
                self.scalars[i] = value;
                true
            }
            None => false,
        }
    }

    fn predefined_array(&self, name: &str) -> Option<(Vec<usize>, Vec<f64>)> {
        self.env
            .setup
            .arrays
            .get(name)
            .map(|a| (a.shape.clone(), a.data.clone()))
    }

    fn predefined_int_array(&self, name: &str) -> Option<(Vec<usize>, Vec<i64>)> {
        self.env
            .setup
            .int_arrays
            .get(name)
            .map(|a| (a.shape.clone(), a.data.clone()))
    }

    fn config(&self, key: &str) -> Option<String> {
        self.env
            .setup
            .config
            .get(&self.program.name)
            .and_then(|c| c.get(key))
            .cloned()
    }

    fn block_list(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, s) in self.memory.arrays().iter().enumerate() {
            if let Storage::Blocks(map) = s {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                for k in keys {
                    out.push(self.block_text(sial_bytecode::ArraySlot(i as u32), k));
                }
            }
        }
        out
    }

    fn work_dir(&self) -> std::path::PathBuf {
        self.env.options.work_dir.clone()
    }

    fn global_offset(&self, array: &str, dim: usize, segment: i32) -> Option<usize> {
        let slot = *self
            .program
            .arrays
            .iter()
            .find(|a| a.name == array)?
            .dims
            .get(dim)?;
        match self.layout.range(slot).kind {
            sial_bytecode::IndexKind::Simple | sial_bytecode::IndexKind::Sub => None,
            _ => Some(self.layout.offset(slot, 1, segment)),
        }
    }

    fn segment_extents(&self, kind: &str) -> Option<Vec<usize>> {
        self.env.setup.segments.get(kind).cloned()
    }

    fn state(&mut self) -> &mut sial_superinstructions::special::State {
        &mut self.special_state
    }

    fn declared_lower(&self, array: &str, dim: usize) -> Option<i32> {
        let slot = *self
            .program
            .arrays
            .iter()
            .find(|a| a.name == array)?
            .dims
            .get(dim)?;
        Some(self.layout.range(slot).lo)
    }
}
