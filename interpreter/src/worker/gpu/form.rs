//! The device form of a block instruction: which blocks it uses and how (`Place`), the kernel
//! that computes it (`Kernel`), and what the placement model is told about it.

use super::*;
use crate::store::Extents;
use crate::worker::access::Labels;

/// How an instruction the device can run uses one block.
pub(super) struct Place {
    pub(super) key: Key,
    pub(super) shape: Extents,
    pub(super) intent: Intent,
    /// A fetched copy of a distributed/served block (read-only).
    pub(super) fetched: bool,
}

/// The kernel of a device instruction, with its operands in `places` order (dst first).
pub(super) enum Kernel {
    Scalar(ScalarUpdate, f64),
    Copy(Option<Vec<usize>>),
    Accumulate(f64, Option<Vec<usize>>),
    Sum(Sign),
    Contract(Arc<k::ContractionPlan>, f64),
    ScaleCopy(f64, bool),
}

/// An instruction's result block, operand blocks, result intent and kernel.
type KernelForm = (BlockRef, Vec<BlockRef>, Intent, Kernel);

impl Worker<'_> {
    /// The result block, operand blocks, result intent and kernel of an instruction of a kind
    /// the device can run; `None` for other instructions.
    fn device_kernel(&self, op: &Op) -> Result<Option<KernelForm>> {
        let block = |o: &Operand| match o {
            Operand::Block(b) => Some(b.clone()),
            Operand::Region(_) => None,
        };
        let form = match op {
            Op::BlockScalar { dst, update, value } => {
                let Some(d) = block(dst) else { return Ok(None) };
                let intent = if *update == ScalarUpdate::Fill {
                    Intent::Write
                } else {
                    Intent::Update
                };
                let v = self.eval_scalar(*value)?;
                (d, vec![], intent, Kernel::Scalar(*update, v))
            }
            Op::BlockCopy { dst, src, layout } => {
                let (Some(d), Some(s)) = (block(dst), block(src)) else {
                    return Ok(None);
                };
                (d, vec![s], Intent::Write, Kernel::Copy(perm_of(layout)))
            }
            Op::BlockAccumulate {
                dst,
                src,
                sign,
                layout,
            } => {
                let alpha = if *sign == Sign::Plus { 1.0 } else { -1.0 };
                (
                    dst.clone(),
                    vec![src.clone()],
                    Intent::Update,
                    Kernel::Accumulate(alpha, perm_of(layout)),
                )
            }
            Op::BlockSum {
                dst,
                left,
                right,
                sign,
            } => (
                dst.clone(),
                vec![left.clone(), right.clone()],
                Intent::Write,
                Kernel::Sum(*sign),
            ),
            Op::BlockContract {
                dst,
                left,
                right,
                accumulate,
                ..
            } => {
                let intent = if *accumulate {
                    Intent::Update
                } else {
                    Intent::Write
                };
                let beta = if *accumulate { 1.0 } else { 0.0 };
                let (ds, ls, rs) = (
                    self.shape_of(dst)?,
                    self.shape_of(left)?,
                    self.shape_of(right)?,
                );
                let plan = self.plans.borrow_mut().plan(
                    (&Labels::of(dst), &ds),
                    (&Labels::of(left), &ls),
                    (&Labels::of(right), &rs),
                )?;
                (
                    dst.clone(),
                    vec![left.clone(), right.clone()],
                    intent,
                    Kernel::Contract(plan, beta),
                )
            }
            Op::BlockScaleCopy {
                dst,
                src,
                factor,
                accumulate,
            } => {
                let f = self.eval_scalar(*factor)?;
                let intent = if *accumulate {
                    Intent::Update
                } else {
                    Intent::Write
                };
                (
                    dst.clone(),
                    vec![src.clone()],
                    intent,
                    Kernel::ScaleCopy(f, *accumulate),
                )
            }
            // The host runs these (slices, specials, allocation, remote and output work), and
            // `step` itself the rest.
            Op::Slice { .. }
            | Op::Insert { .. }
            | Op::Execute { .. }
            | Op::Allocate { .. }
            | Op::Deallocate { .. }
            | Op::AllocateRegion { .. }
            | Op::DeallocateRegion { .. }
            | Op::Create { .. }
            | Op::Delete { .. }
            | Op::Get { .. }
            | Op::Put { .. }
            | Op::Print { .. }
            | Op::SetPersistent { .. }
            | Op::RestorePersistent { .. }
            | Op::Jump { .. }
            | Op::JumpUnless { .. }
            | Op::Call { .. }
            | Op::Return
            | Op::End
            | Op::Stop
            | Op::DoStart { .. }
            | Op::DoInStart { .. }
            | Op::PardoStart { .. }
            | Op::LoopEnd { .. }
            | Op::Exit { .. }
            | Op::SectionStart
            | Op::SectionEnd
            | Op::Barrier { .. }
            | Op::AssignInt { .. }
            | Op::AssignScalar { .. }
            | Op::Collective { .. }
            | Op::AssertSame { .. }
            | Op::BroadcastFrom { .. }
            | Op::GpuOn
            | Op::GpuOff
            | Op::Gpu { .. } => return Ok(None),
        };
        Ok(Some(form))
    }

    /// The blocks and kernel of a block instruction of a kind the device can run, and whether
    /// it can here: every operand a block of a local/temp array or a fetched block, the result
    /// a local/temp block. Otherwise the host runs it, and the blocks name the local ones it
    /// uses. `None` for other instructions.
    pub(super) fn device_form(&self, op: &Op) -> Result<Option<(Vec<Place>, Kernel, bool)>> {
        let Some((dst, srcs, dst_intent, kernel)) = self.device_kernel(op)? else {
            return Ok(None);
        };
        // The device runs it when every block is a local/temp block or a fetched one; else
        // the host does, and `places` still names the local blocks it uses.
        let mut device = self.local_blocks(dst.array);
        let mut places = Vec::with_capacity(1 + srcs.len());
        if device {
            let (key, shape) = self.locate(&dst)?;
            places.push(Place {
                key: (dst.array.0, key),
                shape,
                intent: dst_intent,
                fetched: false,
            });
        }
        for s in &srcs {
            let fetched = matches!(self.memory[s.array.index()], Storage::Remote);
            if !fetched && !self.local_blocks(s.array) {
                device = false;
                continue;
            }
            let (key, shape) = self.locate(s)?;
            // An operand that is also the result: the host handles aliasing (and reads it).
            if let Some(d) = places.first_mut()
                && d.key == (s.array.0, key)
            {
                d.intent = Intent::Update;
                device = false;
                continue;
            }
            places.push(Place {
                key: (s.array.0, key),
                shape,
                intent: Intent::Read,
                fetched,
            });
        }
        // Blocks that do not exist: the host path reports them.
        for p in &places {
            let exists = match &self.memory[p.key.0 as usize] {
                Storage::Blocks(map) => map.contains_key(&p.key.1),
                Storage::Remote => true,
                _ => false,
            };
            if !exists && p.intent != Intent::Write {
                device = false;
            }
        }
        Ok(Some((places, kernel, device)))
    }
}

/// The permutation of a copy, or `None` for a plain copy.
pub(super) fn perm_of(layout: &sial_bytecode::Layout) -> Option<Vec<usize>> {
    (!layout.is_identity()).then(|| {
        layout
            .perm
            .iter()
            .enumerate()
            .map(|(d, p)| p.map_or(d, usize::from))
            .collect()
    })
}

/// The placement model's description of a device-capable instruction.
pub(super) fn instr(places: &[Place], kernel: &Kernel) -> Instr<Key> {
    let bytes: f64 = places
        .iter()
        .map(|p| (p.shape.iter().product::<usize>() * 8) as f64)
        .sum();
    let op = match kernel {
        Kernel::Contract(plan, _) => OpKind::Contraction {
            flops: plan.flops(),
            bytes,
        },
        Kernel::Copy(Some(_)) | Kernel::Accumulate(_, Some(_)) => OpKind::Permute { bytes },
        _ => OpKind::Elementwise { bytes },
    };
    Instr {
        op,
        uses: places
            .iter()
            .map(|p| Use {
                key: p.key,
                bytes: p.shape.iter().product::<usize>() * 8,
                intent: p.intent,
            })
            .collect(),
        result_to_host: false,
    }
}
