//! The worker–server protocol (SIAL-SPEC §7.5). Every request carries the worker's rank, its
//! section number (barriers passed) and the source line of the instruction, so that a server
//! can check consistency (§7.7) and name the line in its messages.

use crate::store::{Block, BlockKey, Extents};
use serde::{Deserialize, Serialize};
use sial_bytecode::PutOp;
use std::sync::Arc;

/// What a put sends: a whole block, or one value for the scalar forms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Payload {
    Block(#[serde(with = "data_length")] Vec<f64>),
    Scalar(f64),
}

/// Which request of a worker: rank, section, source line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub worker: u32,
    pub section: u32,
    pub line: u32,
}

/// A request to a server. Serialised (for the MPI transport), a message holds the shape and
/// length of its block data but not the data, which travels on its own (`data_length`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToServer {
    /// `get`/`request`: reply with the block. A `prefetch` is speculative (docs/ARCHITECTURE.md
    /// "Prefetch"): it is not a read for consistency checking until a `Claims` names it, and
    /// a missing block is answered with `Missing` instead of an error.
    Get {
        from: Origin,
        array: u32,
        key: BlockKey,
        prefetch: bool,
    },
    /// Prefetched blocks that the worker's program did get in this section: each is a read
    /// for consistency checking, at its `get` line.
    Claims { from: Origin, blocks: Vec<Claim> },
    /// `put`/`prepare` in any form; `shape` creates the block when absent.
    Put {
        from: Origin,
        array: u32,
        key: BlockKey,
        shape: Extents,
        op: PutOp,
        payload: Payload,
    },
    /// `delete`/`destroy`: drop every block of the array.
    Delete { from: Origin, array: u32 },
    /// A barrier: this worker's requests of its section end here. No reply; the server counts
    /// it (see `Expect`).
    Sync { from: Origin },
    /// This worker's later requests wait until the server has applied `syncs` `Sync`s in all:
    /// those of every worker's earlier sections, which the workers counted at their barriers.
    /// Sent before the first request to a server after a barrier that sent it a `Sync`.
    Expect { from: Origin, syncs: u64 },
    /// Save the array under the label at the end of the program.
    SetPersistent {
        from: Origin,
        array: u32,
        label: String,
    },
    /// Replace the array's blocks with those saved under the label.
    RestorePersistent {
        from: Origin,
        array: u32,
        label: String,
    },
    /// Reply with the keys of the array's blocks here (`--dump`, before their data).
    SnapshotKeys { from: Origin, array: u32 },
    /// Reply with these blocks of the array (`--dump`: a bounded batch at a time).
    Snapshot {
        from: Origin,
        array: u32,
        keys: Vec<BlockKey>,
    },
    /// The program is over: save what was marked, reply `Ended` with the statistics.
    EndProgram { from: Origin },
}

impl ToServer {
    /// The request's kind, for timelines.
    pub fn name(&self) -> &'static str {
        match self {
            ToServer::Get { prefetch: true, .. } => "prefetch",
            ToServer::Get { .. } => "get",
            ToServer::Claims { .. } => "claims",
            ToServer::Put { .. } => "put",
            ToServer::Delete { .. } => "delete",
            ToServer::Sync { .. } => "sync",
            ToServer::Expect { .. } => "expect",
            ToServer::SetPersistent { .. } => "set_persistent",
            ToServer::RestorePersistent { .. } => "restore_persistent",
            ToServer::SnapshotKeys { .. } | ToServer::Snapshot { .. } => "snapshot",
            ToServer::EndProgram { .. } => "end_program",
        }
    }

    pub fn origin(&self) -> Origin {
        match self {
            ToServer::Get { from, .. }
            | ToServer::Put { from, .. }
            | ToServer::Delete { from, .. }
            | ToServer::Claims { from, .. }
            | ToServer::Sync { from }
            | ToServer::Expect { from, .. }
            | ToServer::SetPersistent { from, .. }
            | ToServer::RestorePersistent { from, .. }
            | ToServer::SnapshotKeys { from, .. }
            | ToServer::Snapshot { from, .. }
            | ToServer::EndProgram { from } => *from,
        }
    }

    /// The array it is about; `None` for those about the worker's whole section.
    pub fn array(&self) -> Option<u32> {
        match self {
            ToServer::Get { array, .. }
            | ToServer::Put { array, .. }
            | ToServer::Delete { array, .. }
            | ToServer::SetPersistent { array, .. }
            | ToServer::RestorePersistent { array, .. }
            | ToServer::SnapshotKeys { array, .. }
            | ToServer::Snapshot { array, .. } => Some(*array),
            ToServer::Claims { .. }
            | ToServer::Sync { .. }
            | ToServer::Expect { .. }
            | ToServer::EndProgram { .. } => None,
        }
    }

    /// The array whose blocks it changes at the server.
    pub fn changes(&self) -> Option<u32> {
        match self {
            ToServer::Put { array, .. }
            | ToServer::Delete { array, .. }
            | ToServer::RestorePersistent { array, .. } => Some(*array),
            ToServer::Get { .. }
            | ToServer::Claims { .. }
            | ToServer::Sync { .. }
            | ToServer::Expect { .. }
            | ToServer::SetPersistent { .. }
            | ToServer::SnapshotKeys { .. }
            | ToServer::Snapshot { .. }
            | ToServer::EndProgram { .. } => None,
        }
    }

    /// Whether the server answers it. The worker will wait for the answer, so it has the
    /// transport send this one before it turns to other work (`WorkerLink::send_held`).
    pub fn has_reply(&self) -> bool {
        match self {
            ToServer::Get { .. }
            | ToServer::SnapshotKeys { .. }
            | ToServer::Snapshot { .. }
            | ToServer::EndProgram { .. } => true,
            ToServer::Claims { .. }
            | ToServer::Sync { .. }
            | ToServer::Expect { .. }
            | ToServer::Put { .. }
            | ToServer::Delete { .. }
            | ToServer::SetPersistent { .. }
            | ToServer::RestorePersistent { .. } => false,
        }
    }

    /// Bytes of block data the message carries.
    pub fn payload_bytes(&self) -> usize {
        match self {
            ToServer::Put {
                payload: Payload::Block(d),
                ..
            } => d.len() * 8,
            _ => 0,
        }
    }
}

/// A prefetched block a `get` used: array, block, source line of the `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub array: u32,
    pub key: BlockKey,
    pub line: u32,
}

/// Figures a server reports at the end of a program.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerStats {
    pub messages: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub blocks_held_peak: u64,
    pub bytes_held_peak: u64,
    pub busy_seconds: f64,
    pub disk: crate::server::blocks::DiskStats,
}

/// A reply to a worker; serialised like [`ToServer`], without the block data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToWorker {
    /// The reply to a `Get` of section `section`.
    Block {
        array: u32,
        key: BlockKey,
        section: u32,
        #[serde(with = "block_shape")]
        block: Arc<Block>,
    },
    /// The reply to a prefetch `Get` of a block the server does not hold.
    Missing {
        array: u32,
        key: BlockKey,
        section: u32,
    },
    SnapshotKeys {
        server: u32,
        array: u32,
        keys: Vec<BlockKey>,
    },
    Snapshot {
        server: u32,
        array: u32,
        #[serde(with = "blocks_shape")]
        blocks: Vec<(BlockKey, Arc<Block>)>,
    },
    Ended {
        server: u32,
        stats: ServerStats,
    },
}

impl ToWorker {
    pub fn payload_bytes(&self) -> usize {
        match self {
            ToWorker::Block { block, .. } => block.data.len() * 8,
            ToWorker::Snapshot { blocks, .. } => blocks.iter().map(|(_, b)| b.data.len() * 8).sum(),
            _ => 0,
        }
    }
}

/// Block data in a serialised message: its length only. Deserialised, the data is a buffer of
/// that length (old values of a spare buffer, or zeros), into which the transport receives
/// the data that follows the message.
mod data_length {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[f64], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(data.len() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        buffer(u64::deserialize(d)?)
    }

    pub fn buffer<E: serde::de::Error>(n: u64) -> Result<Vec<f64>, E> {
        super::data_buffer(n).map_err(E::custom)
    }
}

/// A buffer of `n` values for block data that follows its message's header (and overwrites
/// every one); a length beyond any block is a damaged message.
pub fn data_buffer(n: u64) -> Result<Vec<f64>, String> {
    /// More values than any block of any budget holds.
    const MOST: u64 = 1 << 40;
    if n > MOST {
        return Err("block data length out of range".into());
    }
    crate::spare::overwritable(n as usize)
        .ok_or_else(|| format!("out of memory for a block of {n} values"))
}

/// A block in a serialised message: its shape and the length of its data (see `data_length`).
mod block_shape {
    use super::data_length::buffer;
    use crate::store::{Block, Extents};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(b: &Arc<Block>, s: S) -> Result<S::Ok, S::Error> {
        (b.shape.as_slice(), b.data.len() as u64).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Block>, D::Error> {
        let (shape, n) = <(Extents, u64)>::deserialize(d)?;
        Ok(Arc::new(Block {
            shape,
            data: buffer(n)?,
        }))
    }
}

/// The blocks of a snapshot, as `block_shape`.
mod blocks_shape {
    use super::data_length::buffer;
    use crate::store::{Block, BlockKey, Extents};
    use serde::{Deserialize, Deserializer, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(
        blocks: &[(BlockKey, Arc<Block>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            blocks
                .iter()
                .map(|(k, b)| (k, b.shape.as_slice(), b.data.len() as u64)),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(BlockKey, Arc<Block>)>, D::Error> {
        Vec::<(BlockKey, Extents, u64)>::deserialize(d)?
            .into_iter()
            .map(|(key, shape, n)| {
                Ok((
                    key,
                    Arc::new(Block {
                        shape,
                        data: buffer(n)?,
                    }),
                ))
            })
            .collect()
    }
}
