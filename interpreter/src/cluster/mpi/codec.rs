//! The messages on the wire: each message serialised with postcard, with the shape and length
//! of its block data but not the data (`message::data_length`), which follows as raw `f64`
//! messages received straight into the block's buffer.

use super::*;

pub(super) fn malformed() -> RuntimeError {
    RuntimeError::new("internal: malformed MPI message")
}

/// A message from its header: the whole of it, nothing after it.
fn header<T: for<'de> serde::Deserialize<'de>>(bytes: &[u8]) -> Result<T> {
    match postcard::take_from_bytes(bytes) {
        Ok((msg, [])) => Ok(msg),
        _ => Err(malformed()),
    }
}

/// The header of a request, and the block data that follows it.
pub(super) fn encode_request(msg: ToServer) -> (Vec<u8>, Option<Vec<f64>>) {
    // Encoding plain data into a Vec cannot fail.
    let header = postcard::to_stdvec(&msg).unwrap_or_default();
    let data = match msg {
        ToServer::Put {
            payload: Payload::Block(d),
            ..
        } => Some(d),
        _ => None,
    };
    (header, data)
}

/// A request from its header; `data` receives the values of its block, if any, into the buffer
/// it is given.
pub(super) fn decode_request(
    header_bytes: &[u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<ToServer> {
    let mut msg: ToServer = header(header_bytes)?;
    if let ToServer::Put {
        payload: Payload::Block(d),
        ..
    } = &mut msg
    {
        data(d);
    }
    Ok(msg)
}

/// The header of a reply, and the blocks whose data follows it (in order).
pub(super) fn encode_reply(msg: ToWorker) -> (Vec<u8>, Vec<Arc<Block>>) {
    // Encoding plain data into a Vec cannot fail.
    let header = postcard::to_stdvec(&msg).unwrap_or_default();
    let blocks = match msg {
        ToWorker::Block { block, .. } => vec![block],
        ToWorker::Snapshot { blocks, .. } => blocks.into_iter().map(|(_, b)| b).collect(),
        ToWorker::Missing { .. }
        | ToWorker::Synced { .. }
        | ToWorker::SnapshotKeys { .. }
        | ToWorker::Ended { .. } => Vec::new(),
    };
    (header, blocks)
}

/// A reply from its header; `data` receives the values of each block that follows.
pub(super) fn decode_reply(
    header_bytes: &[u8],
    data: &mut dyn FnMut(&mut [f64]),
) -> Result<ToWorker> {
    let mut msg: ToWorker = header(header_bytes)?;
    let blocks: Vec<&mut Arc<Block>> = match &mut msg {
        ToWorker::Block { block, .. } => vec![block],
        ToWorker::Snapshot { blocks, .. } => blocks.iter_mut().map(|(_, b)| b).collect(),
        ToWorker::Missing { .. }
        | ToWorker::Synced { .. }
        | ToWorker::SnapshotKeys { .. }
        | ToWorker::Ended { .. } => Vec::new(),
    };
    for b in blocks {
        // Just deserialised: nothing else holds it.
        let b = Arc::get_mut(b).ok_or_else(malformed)?;
        data(&mut b.data);
    }
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
}
