//! The worker's own block data: per array its storage (block maps, whole static arrays,
//! contiguous regions, or `Remote` for arrays whose blocks live at the servers), and the bytes
//! it holds, which count against `--worker-memory` together with the fetched blocks.

use super::access;
use crate::error::{Result, RuntimeError};
use crate::layout::Layout;
use crate::options::Options;
use crate::setup::Setup;
use crate::store::{Block, BlockMap, Extents, Held, Storage};
use sial_bytecode::{ArrayKind, Program};
use std::io::Write;
use std::ops::{Index, IndexMut};
use std::rc::Rc;

pub(crate) struct Memory {
    arrays: Vec<Storage>,
    /// Bytes in the block maps (each map counts its inserts and removals here).
    held: Held,
    /// Bytes of the static arrays (their size never changes).
    fixed_bytes: usize,
    /// Bytes of the contiguous regions allocated.
    region_bytes: usize,
}

impl Memory {
    /// Storage for every array of `program`: static arrays made (predefined ones from the
    /// setup data, within `--worker-memory`), the others empty. Worker `rank` 0 alone warns.
    pub(crate) fn new(
        program: &Program,
        layout: &Layout,
        setup: &Setup,
        options: &Options,
        rank: usize,
    ) -> Result<Memory> {
        let held: Held = Rc::default();
        let mut arrays = Vec::with_capacity(program.arrays.len());
        for a in &program.arrays {
            if !a.used {
                arrays.push(Storage::Unused);
                continue;
            }
            for &d in &a.dims {
                let r = layout.range(d);
                if r.kind != sial_bytecode::IndexKind::Sub && r.count() == 0 {
                    return Err(RuntimeError::input(format!(
                        "array {} has a dimension over index {} with no segments ({}:{})",
                        a.name, r.name, r.lo, r.hi
                    )));
                }
            }
            arrays.push(match a.kind {
                ArrayKind::Static => {
                    let shape: Vec<usize> = a.dims.iter().map(|&d| layout.full_extent(d)).collect();
                    access::fits_budget(&shape, options.worker_memory, &|| {
                        format!("static array {}", a.name)
                    })?;
                    let block = if a.predefined {
                        let mut warnings: Box<dyn Write> = if rank == 0 {
                            Box::new(std::io::stderr())
                        } else {
                            Box::new(std::io::sink())
                        };
                        predefined_array(setup, &a.name, &shape, &mut warnings)?
                    } else {
                        Block::zeros(shape)?
                    };
                    Storage::Whole(block)
                }
                ArrayKind::ContiguousLocal => Storage::Regions(Vec::new()),
                ArrayKind::Distributed | ArrayKind::Served => Storage::Remote,
                _ => Storage::Blocks(BlockMap::new(Rc::clone(&held))),
            });
        }
        let fixed_bytes = arrays
            .iter()
            .map(|s| match s {
                Storage::Whole(b) => b.data.len() * 8,
                _ => 0,
            })
            .sum();
        Ok(Memory {
            arrays,
            held,
            fixed_bytes,
            region_bytes: 0,
        })
    }

    /// Every array's storage, in the program's order.
    pub(crate) fn arrays(&self) -> &[Storage] {
        &self.arrays
    }

    /// Bytes of the worker's own blocks: block maps, static arrays, contiguous regions.
    pub(crate) fn own_bytes(&self) -> usize {
        self.held.get() + self.fixed_bytes + self.region_bytes
    }

    /// A contiguous region of `bytes` was allocated (`true`) or freed (`false`).
    pub(crate) fn region(&mut self, bytes: usize, allocated: bool) {
        self.region_bytes = if allocated {
            self.region_bytes + bytes
        } else {
            self.region_bytes.saturating_sub(bytes)
        };
    }
}

impl Index<usize> for Memory {
    type Output = Storage;
    fn index(&self, array: usize) -> &Storage {
        &self.arrays[array]
    }
}

impl IndexMut<usize> for Memory {
    fn index_mut(&mut self, array: usize) -> &mut Storage {
        &mut self.arrays[array]
    }
}

/// A predefined static array from the setup data; zero-filled, with a warning, when the setup
/// has none.
fn predefined_array(
    setup: &Setup,
    name: &str,
    shape: &[usize],
    warnings: &mut dyn Write,
) -> Result<Block> {
    match setup.arrays.get(name) {
        Some(a) if a.shape == shape => Ok(Block {
            shape: Extents::of(shape)?,
            data: a.data.clone(),
        }),
        Some(a) => Err(RuntimeError::input(format!(
            "array {name} shape inconsistent in Sial program and inserted array: the program needs {shape:?}, the setup data has {:?}",
            a.shape
        ))),
        None => {
            let _ = writeln!(
                warnings,
                "WARNING:  No data for predefined static array {name}; it is zero-filled"
            );
            Ok(Block::zeros(shape)?)
        }
    }
}
