//! The messages on the wire: each message serialised with postcard, with the shape and length
//! of its block data but not the data (`message::data_length`). Small block data (up to
//! [`INLINE_BYTES`] in all) travels in the same message, after the header: one message per put
//! or reply instead of two, which is what many small blocks cost. Larger data follows as raw
//! `f64` messages received straight into the block's buffer.

use super::*;

pub(super) fn malformed() -> RuntimeError {
    RuntimeError::new("internal: malformed MPI message")
}

/// Block data up to this many bytes goes in the message of its header. Copying it in and out
/// costs more than a second message from a few KiB on (docs/benchmarks.md, "Small messages").
pub(super) const INLINE_BYTES: usize = 1 << 10;

/// A message from its header, and the bytes after the header (block data sent inline).
fn header<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> Result<(T, &[u8])> {
    postcard::take_from_bytes(bytes).map_err(|_| malformed())
}

/// Whether `bytes` of block data go in the message of their header.
fn inline(bytes: usize) -> bool {
    bytes > 0 && bytes <= INLINE_BYTES
}

/// Appends `data` to a message's header (inline block data, in the machine's byte order as
/// the data messages are).
fn append(header: &mut Vec<u8>, data: &[f64]) {
    header.extend_from_slice(bytemuck::cast_slice(data));
}

/// Fills `buffers` with their data: from `inline` when it was sent in the message (its length
/// then is exactly theirs), otherwise from the data messages that follow (`receive`).
fn fill(
    buffers: Vec<&mut [f64]>,
    inline: &[u8],
    receive: &mut dyn FnMut(&mut [f64]),
) -> Result<()> {
    if inline.is_empty() {
        buffers.into_iter().for_each(receive);
        return Ok(());
    }
    let total: usize = buffers.iter().map(|b| b.len() * 8).sum();
    if total != inline.len() {
        return Err(malformed());
    }
    let mut rest = inline;
    for b in buffers {
        let (mine, after) = rest.split_at(b.len() * 8);
        bytemuck::cast_slice_mut::<f64, u8>(b).copy_from_slice(mine);
        rest = after;
    }
    Ok(())
}

/// The header of a request, and the block data that follows it.
pub(super) fn encode_request(msg: ToServer) -> (Vec<u8>, Option<Vec<f64>>) {
    // Encoding plain data into a Vec cannot fail.
    let mut header = postcard::to_stdvec(&msg).unwrap_or_default();
    let data = match msg {
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } => Some(d),
        _ => None,
    };
    match data {
        Some(d) if inline(d.len() * 8) => {
            append(&mut header, &d);
            (header, None)
        }
        other => (header, other),
    }
}

/// A request from its header; `data` receives the values of its block, if any, into the buffer
/// it is given.
pub(super) fn decode_request(
    header_bytes: &[u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<ToServer> {
    let (mut msg, inline): (ToServer, _) = header(header_bytes)?;
    let buffers: Vec<&mut [f64]> = match &mut msg {
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } => vec![&mut d[..]],
        _ => Vec::new(),
    };
    fill(buffers, inline, data)?;
    Ok(msg)
}

/// The header of a reply, and the blocks whose data follows it (in order).
pub(super) fn encode_reply(msg: ToWorker) -> (Vec<u8>, Vec<Arc<Block>>) {
    // Encoding plain data into a Vec cannot fail.
    let mut header = postcard::to_stdvec(&msg).unwrap_or_default();
    let blocks: Vec<Arc<Block>> = match msg {
        ToWorker::Block { block, .. } => vec![block],
        ToWorker::Snapshot { blocks, .. } => blocks.into_iter().map(|(_, b)| b).collect(),
        ToWorker::Missing { .. }
        | ToWorker::Synced { .. }
        | ToWorker::SnapshotKeys { .. }
        | ToWorker::Ended { .. } => Vec::new(),
    };
    let bytes: usize = blocks.iter().map(|b| b.data.len() * 8).sum();
    if inline(bytes) {
        for b in &blocks {
            append(&mut header, &b.data);
        }
        return (header, Vec::new());
    }
    (header, blocks)
}

/// A reply from its header; `data` receives the values of each block that follows.
pub(super) fn decode_reply(
    header_bytes: &[u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<ToWorker> {
    let (mut msg, inline): (ToWorker, _) = header(header_bytes)?;
    let blocks: Vec<&mut Arc<Block>> = match &mut msg {
        ToWorker::Block { block, .. } => vec![block],
        ToWorker::Snapshot { blocks, .. } => blocks.iter_mut().map(|(_, b)| b).collect(),
        ToWorker::Missing { .. }
        | ToWorker::Synced { .. }
        | ToWorker::SnapshotKeys { .. }
        | ToWorker::Ended { .. } => Vec::new(),
    };
    let mut buffers = Vec::with_capacity(blocks.len());
    for b in blocks {
        // Just deserialised: nothing else holds it.
        buffers.push(&mut Arc::get_mut(b).ok_or_else(malformed)?.data[..]);
    }
    fill(buffers, inline, data)?;
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::message::{Claim, Origin, ServerStats};
    use crate::server::blocks::DiskStats;
    use crate::store::BlockKey;
    use sial_bytecode::PutOp;

    fn key() -> BlockKey {
        BlockKey {
            segments: [1, -2, 3, 0, 0, 0],
            parents: [0, 0, 7, 0, 0, 0],
        }
    }

    #[test]
    fn requests_survive_the_header_codec() {
        let from = Origin {
            worker: 3,
            section: 9,
            line: 42,
        };
        let msgs = vec![
            ToServer::Get {
                from,
                array: 2,
                key: key(),
                prefetch: true,
            },
            ToServer::Claims {
                from,
                blocks: vec![
                    Claim {
                        array: 1,
                        key: key(),
                        line: 12,
                    },
                    Claim {
                        array: 4,
                        key: key(),
                        line: 13,
                    },
                ],
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: vec![2, 3],
                op: PutOp::Accumulate,
                payload: Payload::Block(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]),
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: vec![4],
                op: PutOp::Scale,
                payload: Payload::Scalar(-0.25),
            },
            ToServer::Delete { from, array: 5 },
            ToServer::Sync { from },
            ToServer::SetPersistent {
                from,
                array: 1,
                label: "t2_ab".into(),
            },
            ToServer::RestorePersistent {
                from,
                array: 1,
                label: "t2_ab".into(),
            },
            ToServer::Snapshot {
                from,
                array: 0,
                keys: vec![key()],
            },
            ToServer::SnapshotKeys { from, array: 1 },
            ToServer::EndProgram { from },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, data) = encode_request(msg);
            let mut data = data;
            let back = decode_request(&header, &mut |buf| {
                let d = data.take().unwrap_or_default();
                assert_eq!(d.len(), buf.len());
                buf.copy_from_slice(&d);
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
            assert!(decode_request(&header[..header.len() - 1], &mut |_| {}).is_err());
            let mut longer = header.clone();
            longer.push(0);
            assert!(decode_request(&longer, &mut |_| {}).is_err());
        }
    }

    #[test]
    fn replies_survive_the_header_codec() {
        let block = |n: usize| {
            Arc::new(Block {
                shape: vec![n, 1],
                data: (0..n).map(|i| i as f64 * 0.5).collect(),
            })
        };
        let stats = ServerStats {
            messages: 10,
            bytes_in: 800,
            busy_seconds: 0.125,
            disk: DiskStats {
                bytes_read: 64,
                ..DiskStats::default()
            },
            ..ServerStats::default()
        };
        let msgs = vec![
            ToWorker::Block {
                array: 1,
                key: key(),
                section: 4,
                block: block(3),
            },
            ToWorker::Synced { server: 2 },
            ToWorker::Missing {
                array: 2,
                key: key(),
                section: 7,
            },
            ToWorker::Snapshot {
                server: 1,
                array: 3,
                blocks: vec![
                    (key(), block(2)),
                    (
                        BlockKey {
                            segments: [0; 6],
                            parents: [0; 6],
                        },
                        block(0),
                    ),
                ],
            },
            ToWorker::SnapshotKeys {
                server: 1,
                array: 3,
                keys: vec![key()],
            },
            ToWorker::Ended { server: 0, stats },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, blocks) = encode_reply(msg);
            let mut blocks = blocks.into_iter();
            let back = decode_reply(&header, &mut |buf| {
                let b = blocks.next().expect("a block follows");
                assert_eq!(b.data.len(), buf.len());
                buf.copy_from_slice(&b.data);
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
        }
    }

    #[test]
    fn small_blocks_travel_in_the_header_and_large_ones_after_it() {
        let from = Origin {
            worker: 1,
            section: 2,
            line: 3,
        };
        let put = |n: usize| ToServer::Put {
            from,
            array: 1,
            key: key(),
            shape: vec![n],
            op: PutOp::Replace,
            payload: Payload::Block((0..n).map(|i| i as f64 + 0.5).collect()),
        };
        let small = INLINE_BYTES / 8;
        for (n, inline) in [(1, true), (small, true), (small + 1, false)] {
            let msg = put(n);
            let text = format!("{msg:?}");
            let (header, data) = encode_request(msg);
            assert_eq!(data.is_none(), inline, "{n} values");
            let mut after = data.into_iter();
            let back = decode_request(&header, &mut |buf| {
                buf.copy_from_slice(&after.next().expect("data follows"));
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
        }
        // Inline data of the wrong length is refused, not read past.
        let (mut header, _) = encode_request(put(4));
        header.pop();
        assert!(decode_request(&header, &mut |_| {}).is_err());
        let (mut header, _) = encode_reply(ToWorker::Synced { server: 0 });
        header.extend([0u8; 8]);
        assert!(decode_reply(&header, &mut |_| {}).is_err());
    }
}
