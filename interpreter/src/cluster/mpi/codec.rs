//! The messages on the wire. A message is a batch of records back to back; a record is one
//! request or reply: a tag, then its fields in the fixed layouts of [`fixed`](super::fixed) for
//! gets, puts and blocks, or serialised with postcard for the rest, with the shape and length of
//! its block data but not the data (`message::data_length`), followed by that data when it is
//! small (up to [`INLINE_BYTES`] in all): the header says how long it is, so records need no
//! framing. Larger data follows the batch as raw `f64` messages received straight into the
//! block's buffer. Many small requests to one server (or replies to one worker) thus cost one
//! MPI message.

use super::fixed::*;
use super::*;

pub(super) fn malformed() -> RuntimeError {
    RuntimeError::new("internal: malformed MPI message")
}

/// Block data up to this many bytes goes in the record of its header. Copying it in and out
/// costs more than a second message from a few KiB on (docs/benchmarks.md, "Small messages").
pub(super) const INLINE_BYTES: usize = 1 << 10;

/// A postcard record's header, and the bytes after it (its inline data, then the next records).
fn header<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> Result<(T, &[u8])> {
    postcard::take_from_bytes(bytes).map_err(|_| malformed())
}

/// Whether `bytes` of block data go in the record of their header.
fn inline(bytes: usize) -> bool {
    bytes > 0 && bytes <= INLINE_BYTES
}

/// Appends a record's tag and its header in postcard to a batch.
fn append_header<T: serde::Serialize>(batch: &mut Vec<u8>, msg: &T) -> Result<()> {
    batch.push(Tag::Postcard as u8);
    postcard::to_io(msg, batch)
        .map(|_| ())
        .map_err(|e| RuntimeError::new(format!("internal: cannot encode an MPI message: {e}")))
}

/// Appends inline block data to a batch (in the machine's byte order, as data messages are).
fn append_data(batch: &mut Vec<u8>, data: &[f64]) {
    batch.extend_from_slice(bytemuck::cast_slice(data));
}

/// Fills `buffers` with their data: from `rest` when it travels inline (by the same rule as
/// the sender's), otherwise from the data messages that follow the batch (`receive`). Returns
/// the bytes after the record.
fn fill<'b>(
    buffers: &mut [&mut [f64]],
    rest: &'b [u8],
    receive: &mut dyn FnMut(&mut [f64]),
) -> Result<&'b [u8]> {
    let total: usize = buffers.iter().map(|b| b.len() * 8).sum();
    if !inline(total) {
        buffers.iter_mut().for_each(|b| receive(b));
        return Ok(rest);
    }
    if rest.len() < total {
        return Err(malformed());
    }
    let (mut data, after) = rest.split_at(total);
    for b in buffers.iter_mut() {
        let (mine, others) = data.split_at(b.len() * 8);
        bytemuck::cast_slice_mut::<f64, u8>(b).copy_from_slice(mine);
        data = others;
    }
    Ok(after)
}

/// Appends a request to a batch; returns the block data that must follow the batch as its own
/// message, if any.
pub(super) fn encode_request(msg: ToServer, batch: &mut Vec<u8>) -> Result<Option<Vec<f64>>> {
    match &msg {
        ToServer::Get {
            from,
            array,
            key,
            prefetch,
        } => {
            Writer(batch)
                .u8(Tag::Get as u8)
                .origin(from)
                .u32(*array)
                .key(key)
                .u8(u8::from(*prefetch));
        }
        ToServer::Put {
            from,
            array,
            key,
            shape,
            op,
            payload,
        } => {
            let mut w = Writer(batch);
            w.u8(Tag::Put as u8)
                .origin(from)
                .u32(*array)
                .key(key)
                .extents(shape)
                .put_op(*op);
            match payload {
                Payload::Block(d) => w.u8(0).u64(d.len() as u64),
                Payload::Scalar(v) => w.u8(1).u64(v.to_bits()),
            };
        }
        ToServer::Claims { from, blocks } => {
            Writer(batch)
                .u8(Tag::Claims as u8)
                .origin(from)
                .claims(blocks);
        }
        _ => append_header(batch, &msg)?,
    }
    Ok(match msg {
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } if inline(d.len() * 8) => {
            append_data(batch, &d);
            None
        }
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } => Some(d),
        _ => None,
    })
}

/// The first request of `bytes` (a batch, or what is left of one) and the bytes after it;
/// `data` receives the values of its block, if they follow the batch, into the buffer it is
/// given.
pub(super) fn decode_request<'b>(
    bytes: &'b [u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<(ToServer, &'b [u8])> {
    let mut r = Reader(bytes);
    let (mut msg, rest): (ToServer, _) = match r.tag()? {
        Tag::Postcard => header(r.rest())?,
        Tag::Get => {
            let msg = ToServer::Get {
                from: r.origin()?,
                array: r.u32()?,
                key: r.key()?,
                prefetch: r.bool()?,
            };
            (msg, r.rest())
        }
        Tag::Put => {
            let msg = ToServer::Put {
                from: r.origin()?,
                array: r.u32()?,
                key: r.key()?,
                shape: r.extents()?,
                op: r.put_op()?,
                payload: match r.u8()? {
                    0 => Payload::Block(r.buffer()?),
                    1 => Payload::Scalar(r.f64()?),
                    _ => return Err(malformed()),
                },
            };
            (msg, r.rest())
        }
        Tag::Claims => {
            let msg = ToServer::Claims {
                from: r.origin()?,
                blocks: r.claims()?,
            };
            (msg, r.rest())
        }
        Tag::Block => return Err(malformed()),
    };
    // One block at most: its buffer on the stack (a request is decoded per small put).
    let rest = match &mut msg {
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } => fill(&mut [&mut d[..]], rest, data)?,
        _ => fill(&mut [], rest, data)?,
    };
    Ok((msg, rest))
}

/// Appends a reply to a batch; returns the blocks whose data must follow the batch, in order.
pub(super) fn encode_reply(msg: ToWorker, batch: &mut Vec<u8>) -> Result<Vec<Arc<Block>>> {
    match &msg {
        ToWorker::Block {
            array,
            key,
            section,
            block,
        } => {
            Writer(batch)
                .u8(Tag::Block as u8)
                .u32(*array)
                .key(key)
                .u32(*section)
                .extents(&block.shape)
                .u64(block.data.len() as u64);
        }
        _ => append_header(batch, &msg)?,
    }
    let blocks: Vec<Arc<Block>> = match msg {
        // The common reply, without a vector of its one block where its data goes inline.
        ToWorker::Block { block, .. } if inline(block.data.len() * 8) => {
            append_data(batch, &block.data);
            return Ok(Vec::new());
        }
        ToWorker::Block { block, .. } => vec![block],
        ToWorker::Snapshot { blocks, .. } => blocks.into_iter().map(|(_, b)| b).collect(),
        ToWorker::Missing { .. } | ToWorker::SnapshotKeys { .. } | ToWorker::Ended { .. } => {
            Vec::new()
        }
    };
    let bytes: usize = blocks.iter().map(|b| b.data.len() * 8).sum();
    if inline(bytes) {
        for b in &blocks {
            append_data(batch, &b.data);
        }
        return Ok(Vec::new());
    }
    Ok(blocks)
}

/// The first reply of `bytes` and the bytes after it; `data` receives the values of each
/// block that follows the batch.
pub(super) fn decode_reply<'b>(
    bytes: &'b [u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<(ToWorker, &'b [u8])> {
    let mut r = Reader(bytes);
    let (mut msg, rest): (ToWorker, _) = match r.tag()? {
        Tag::Postcard => header(r.rest())?,
        Tag::Block => {
            let msg = ToWorker::Block {
                array: r.u32()?,
                key: r.key()?,
                section: r.u32()?,
                block: Arc::new(Block {
                    shape: r.extents()?,
                    data: r.buffer()?,
                }),
            };
            (msg, r.rest())
        }
        Tag::Get | Tag::Put | Tag::Claims => return Err(malformed()),
    };
    // Just deserialised: no block is held elsewhere. A reply of one block (one per small get)
    // keeps its buffer on the stack.
    let rest = match &mut msg {
        ToWorker::Block { block, .. } => {
            let b = Arc::get_mut(block).ok_or_else(malformed)?;
            fill(&mut [&mut b.data[..]], rest, data)?
        }
        ToWorker::Snapshot { blocks, .. } => {
            let mut buffers = Vec::with_capacity(blocks.len());
            for (_, b) in blocks.iter_mut() {
                buffers.push(&mut Arc::get_mut(b).ok_or_else(malformed)?.data[..]);
            }
            fill(&mut buffers, rest, data)?
        }
        ToWorker::Missing { .. } | ToWorker::SnapshotKeys { .. } | ToWorker::Ended { .. } => {
            fill(&mut [], rest, data)?
        }
    };
    Ok((msg, rest))
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

    /// A batch of one request, and the data that follows it.
    fn alone(msg: ToServer) -> (Vec<u8>, Option<Vec<f64>>) {
        let mut batch = Vec::new();
        let data = encode_request(msg, &mut batch).expect("encodes");
        (batch, data)
    }

    /// A batch of one reply, and the blocks that follow it.
    fn alone_reply(msg: ToWorker) -> (Vec<u8>, Vec<Arc<Block>>) {
        let mut batch = Vec::new();
        let blocks = encode_reply(msg, &mut batch).expect("encodes");
        (batch, blocks)
    }

    #[test]
    fn requests_survive_the_codec() {
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
                shape: [2, 3].into(),
                op: PutOp::Accumulate,
                payload: Payload::Block(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]),
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: [4].into(),
                op: PutOp::Scale,
                payload: Payload::Scalar(-0.25),
            },
            ToServer::Delete { from, array: 5 },
            ToServer::Sync { from },
            ToServer::Expect { from, syncs: 7 },
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
            let (batch, mut data) = alone(msg);
            let (back, rest) = decode_request(&batch, &mut |buf| {
                let d = data.take().unwrap_or_default();
                assert_eq!(d.len(), buf.len());
                buf.copy_from_slice(&d);
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
            assert!(rest.is_empty());
            assert!(decode_request(&batch[..batch.len() - 1], &mut |_| {}).is_err());
        }
    }

    #[test]
    fn replies_survive_the_codec() {
        let block = |n: usize| {
            Arc::new(Block {
                shape: [n, 1].into(),
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
            let (batch, blocks) = alone_reply(msg);
            let mut blocks = blocks.into_iter();
            let (back, rest) = decode_reply(&batch, &mut |buf| {
                let b = blocks.next().expect("a block follows");
                assert_eq!(b.data.len(), buf.len());
                buf.copy_from_slice(&b.data);
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
            assert!(rest.is_empty());
        }
    }

    #[test]
    fn small_blocks_travel_in_the_record_and_large_ones_after_the_batch() {
        let from = Origin {
            worker: 1,
            section: 2,
            line: 3,
        };
        let put = |n: usize| ToServer::Put {
            from,
            array: 1,
            key: key(),
            shape: [n].into(),
            op: PutOp::Replace,
            payload: Payload::Block((0..n).map(|i| i as f64 + 0.5).collect()),
        };
        let small = INLINE_BYTES / 8;
        for (n, inline) in [(1, true), (small, true), (small + 1, false)] {
            let msg = put(n);
            let text = format!("{msg:?}");
            let (batch, data) = alone(msg);
            assert_eq!(data.is_none(), inline, "{n} values");
            let mut after = data.into_iter();
            let (back, _) = decode_request(&batch, &mut |buf| {
                buf.copy_from_slice(&after.next().expect("data follows"));
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
        }
        // Inline data cut short is refused, not read past; bytes after a record that are no
        // record are refused when decoded.
        let (mut batch, _) = alone(put(4));
        batch.pop();
        assert!(decode_request(&batch, &mut |_| {}).is_err());
        let (mut batch, _) = alone_reply(ToWorker::Missing {
            array: 0,
            key: key(),
            section: 0,
        });
        batch.extend([0u8; 8]);
        let (_, rest) = decode_reply(&batch, &mut |_| {}).expect("decodes");
        assert_eq!(rest.len(), 8);
        assert!(decode_reply(rest, &mut |_| {}).is_err());
        assert!(decode_request(&[], &mut |_| {}).is_err());
    }

    #[test]
    fn a_batch_decodes_to_its_requests_in_order() {
        let from = |line| Origin {
            worker: 1,
            section: 4,
            line,
        };
        let put = |line, n: usize| ToServer::Put {
            from: from(line),
            array: 2,
            key: key(),
            shape: [n].into(),
            op: PutOp::Accumulate,
            payload: Payload::Block((0..n).map(|i| line as f64 + i as f64 / 8.0).collect()),
        };
        let mut msgs: Vec<ToServer> = (0..100).map(|i| put(i, 1 + i as usize % 3)).collect();
        msgs.push(ToServer::Delete {
            from: from(200),
            array: 3,
        });
        // The last record's data is too large to go inline: it follows the batch.
        msgs.push(put(201, INLINE_BYTES / 8 + 1));
        let texts: Vec<String> = msgs.iter().map(|m| format!("{m:?}")).collect();
        let mut batch = Vec::new();
        let mut following = Vec::new();
        for m in msgs {
            following.extend(encode_request(m, &mut batch).expect("encodes"));
        }
        assert_eq!(following.len(), 1);
        let mut following = following.into_iter();
        let mut rest = &batch[..];
        let mut back = Vec::new();
        while !rest.is_empty() {
            let (m, after) = decode_request(rest, &mut |buf| {
                buf.copy_from_slice(&following.next().expect("data follows"));
            })
            .expect("decodes");
            back.push(format!("{m:?}"));
            rest = after;
        }
        assert_eq!(back, texts);
    }

    #[test]
    fn a_batch_decodes_to_its_replies_in_order() {
        let block = |n: usize, v: f64| {
            Arc::new(Block {
                shape: [n].into(),
                data: vec![v; n],
            })
        };
        let mut msgs: Vec<ToWorker> = (0..50)
            .map(|i| ToWorker::Block {
                array: i,
                key: key(),
                section: 2,
                block: block(1 + i as usize % 4, f64::from(i)),
            })
            .collect();
        msgs.push(ToWorker::Missing {
            array: 3,
            key: key(),
            section: 2,
        });
        msgs.push(ToWorker::Block {
            array: 9,
            key: key(),
            section: 2,
            block: block(INLINE_BYTES, -1.0),
        });
        let texts: Vec<String> = msgs.iter().map(|m| format!("{m:?}")).collect();
        let mut batch = Vec::new();
        let mut following = Vec::new();
        for m in msgs {
            following.extend(encode_reply(m, &mut batch).expect("encodes"));
        }
        let mut following = following.into_iter();
        let mut rest = &batch[..];
        let mut back = Vec::new();
        while !rest.is_empty() {
            let (m, after) = decode_reply(rest, &mut |buf| {
                buf.copy_from_slice(&following.next().expect("a block follows").data);
            })
            .expect("decodes");
            back.push(format!("{m:?}"));
            rest = after;
        }
        assert_eq!(back, texts);
        assert!(following.next().is_none());
    }

    /// Records cut anywhere, or with an unknown tag, are refused: never read past, never a
    /// panic (a damaged or foreign message names itself as malformed).
    #[test]
    fn cut_or_unknown_records_are_refused() {
        let from = Origin {
            worker: 2,
            section: 5,
            line: 8,
        };
        let requests = [
            ToServer::Get {
                from,
                array: 1,
                key: key(),
                prefetch: false,
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: [3, 1].into(),
                op: PutOp::Replace,
                payload: Payload::Block(vec![1.0, 2.0, 3.0]),
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: [2].into(),
                op: PutOp::Scale,
                payload: Payload::Scalar(2.0),
            },
            ToServer::Claims {
                from,
                blocks: vec![Claim {
                    array: 3,
                    key: key(),
                    line: 9,
                }],
            },
            ToServer::Delete { from, array: 4 },
        ];
        for msg in requests {
            let (batch, _) = alone(msg);
            for cut in 0..batch.len() {
                assert!(
                    decode_request(&batch[..cut], &mut |_| {}).is_err(),
                    "cut at {cut}"
                );
            }
            for tag in [5u8, 200, Tag::Block as u8] {
                let mut wrong = batch.clone();
                wrong[0] = tag;
                assert!(decode_request(&wrong, &mut |_| {}).is_err(), "tag {tag}");
            }
        }
        let (batch, _) = alone_reply(ToWorker::Block {
            array: 2,
            key: key(),
            section: 1,
            block: Arc::new(Block {
                shape: [2].into(),
                data: vec![4.0, 5.0],
            }),
        });
        for cut in 0..batch.len() {
            assert!(
                decode_reply(&batch[..cut], &mut |_| {}).is_err(),
                "cut at {cut}"
            );
        }
        for tag in [Tag::Get as u8, Tag::Put as u8, Tag::Claims as u8, 9] {
            let mut wrong = batch.clone();
            wrong[0] = tag;
            assert!(decode_reply(&wrong, &mut |_| {}).is_err(), "tag {tag}");
        }
        // A rank beyond any block's is refused before it is read.
        let (mut batch, _) = alone(ToServer::Put {
            from,
            array: 1,
            key: key(),
            shape: [1].into(),
            op: PutOp::Replace,
            payload: Payload::Block(vec![1.0]),
        });
        batch[1 + 12 + 4 + 48] = 7;
        assert!(decode_request(&batch, &mut |_| {}).is_err());
    }
}
