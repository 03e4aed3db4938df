//! The messages' headers in a compact binary form: little-endian fixed-width fields, and the
//! servers' figures encoded with postcard. Block data never goes through here; it follows the
//! header as raw `f64` messages.

use super::*;

#[derive(Default)]
pub(super) struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn origin(&mut self, o: Origin) {
        self.u32(o.worker);
        self.u32(o.section);
        self.u32(o.line);
    }
    fn key(&mut self, k: &BlockKey) {
        for v in k.segments.iter().chain(&k.parents) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn shape(&mut self, s: &[usize]) {
        self.u64(s.len() as u64);
        for &e in s {
            self.u64(e as u64);
        }
    }
    fn text(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

pub(super) struct Reader<'a>(&'a [u8]);

pub(super) fn malformed() -> RuntimeError {
    RuntimeError::new("internal: malformed MPI message")
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(malformed)?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn len(&mut self) -> Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| malformed())
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    fn origin(&mut self) -> Result<Origin> {
        Ok(Origin {
            worker: self.u32()?,
            section: self.u32()?,
            line: self.u32()?,
        })
    }
    fn key(&mut self) -> Result<BlockKey> {
        let mut k = BlockKey {
            segments: [0; 6],
            parents: [0; 6],
        };
        for v in k.segments.iter_mut().chain(k.parents.iter_mut()) {
            *v = i32::from_le_bytes(self.take()?);
        }
        Ok(k)
    }
    fn shape(&mut self) -> Result<Vec<usize>> {
        let n = self.len()?;
        if n > 64 {
            return Err(malformed());
        }
        (0..n).map(|_| self.len()).collect()
    }
    fn text(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| malformed())
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.len()?;
        if n > self.0.len() {
            return Err(malformed());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head.to_vec())
    }
    fn end(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(malformed())
        }
    }
}

pub(super) fn put_op(op: PutOp) -> u8 {
    match op {
        PutOp::Replace => 0,
        PutOp::Accumulate => 1,
        PutOp::Scale => 2,
    }
}

pub(super) fn put_op_of(v: u8) -> Result<PutOp> {
    match v {
        0 => Ok(PutOp::Replace),
        1 => Ok(PutOp::Accumulate),
        2 => Ok(PutOp::Scale),
        _ => Err(malformed()),
    }
}

/// The header of a request, and the block data that follows it.
pub(super) fn encode_request(msg: ToServer) -> (Vec<u8>, Option<Vec<f64>>) {
    let mut w = Writer::default();
    let mut data = None;
    match msg {
        ToServer::Get {
            from,
            array,
            key,
            prefetch,
        } => {
            w.u8(0);
            w.origin(from);
            w.u32(array);
            w.key(&key);
            w.u8(u8::from(prefetch));
        }
        ToServer::Put {
            from,
            array,
            key,
            shape,
            op,
            payload,
        } => {
            w.u8(1);
            w.origin(from);
            w.u32(array);
            w.key(&key);
            w.shape(&shape);
            w.u8(put_op(op));
            match payload {
                Payload::Block(d) => {
                    w.u8(0);
                    w.u64(d.len() as u64);
                    data = Some(d);
                }
                Payload::Scalar(v) => {
                    w.u8(1);
                    w.f64(v);
                }
            }
        }
        ToServer::Delete { from, array } => {
            w.u8(2);
            w.origin(from);
            w.u32(array);
        }
        ToServer::Sync { from } => {
            w.u8(3);
            w.origin(from);
        }
        ToServer::SetPersistent { from, array, label } => {
            w.u8(4);
            w.origin(from);
            w.u32(array);
            w.text(&label);
        }
        ToServer::RestorePersistent { from, array, label } => {
            w.u8(5);
            w.origin(from);
            w.u32(array);
            w.text(&label);
        }
        ToServer::Snapshot { from, array } => {
            w.u8(6);
            w.origin(from);
            w.u32(array);
        }
        ToServer::EndProgram { from } => {
            w.u8(7);
            w.origin(from);
        }
        ToServer::Claims { from, blocks } => {
            w.u8(8);
            w.origin(from);
            w.u64(blocks.len() as u64);
            for c in blocks {
                w.u32(c.array);
                w.key(&c.key);
                w.u32(c.line);
            }
        }
    }
    (w.0, data)
}

pub(super) fn decode_request(
    header: &[u8],
    data: &mut dyn FnMut(usize) -> Vec<f64>,
) -> Result<ToServer> {
    let mut r = Reader(header);
    let msg = match r.u8()? {
        0 => ToServer::Get {
            from: r.origin()?,
            array: r.u32()?,
            key: r.key()?,
            prefetch: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(malformed()),
            },
        },
        1 => {
            let from = r.origin()?;
            let array = r.u32()?;
            let key = r.key()?;
            let shape = r.shape()?;
            let op = put_op_of(r.u8()?)?;
            let payload = match r.u8()? {
                0 => {
                    let n = r.len()?;
                    r.end()?;
                    Payload::Block(data(n))
                }
                1 => Payload::Scalar(r.f64()?),
                _ => return Err(malformed()),
            };
            ToServer::Put {
                from,
                array,
                key,
                shape,
                op,
                payload,
            }
        }
        2 => ToServer::Delete {
            from: r.origin()?,
            array: r.u32()?,
        },
        3 => ToServer::Sync { from: r.origin()? },
        4 => ToServer::SetPersistent {
            from: r.origin()?,
            array: r.u32()?,
            label: r.text()?,
        },
        5 => ToServer::RestorePersistent {
            from: r.origin()?,
            array: r.u32()?,
            label: r.text()?,
        },
        6 => ToServer::Snapshot {
            from: r.origin()?,
            array: r.u32()?,
        },
        7 => ToServer::EndProgram { from: r.origin()? },
        8 => {
            let from = r.origin()?;
            let n = r.len()?;
            let mut blocks = Vec::new();
            for _ in 0..n {
                blocks.push(Claim {
                    array: r.u32()?,
                    key: r.key()?,
                    line: r.u32()?,
                });
            }
            ToServer::Claims { from, blocks }
        }
        _ => return Err(malformed()),
    };
    r.end()?;
    Ok(msg)
}

/// The header of a reply, and the blocks whose data follows it (in order).
pub(super) fn encode_reply(msg: ToWorker) -> (Vec<u8>, Vec<Arc<Block>>) {
    let mut w = Writer::default();
    let mut blocks = Vec::new();
    match msg {
        ToWorker::Block {
            array,
            key,
            section,
            block,
        } => {
            w.u8(0);
            w.u32(array);
            w.key(&key);
            w.u32(section);
            w.shape(&block.shape);
            w.u64(block.data.len() as u64);
            blocks.push(block);
        }
        ToWorker::Synced { server } => {
            w.u8(1);
            w.u32(server);
        }
        ToWorker::Missing {
            array,
            key,
            section,
        } => {
            w.u8(4);
            w.u32(array);
            w.key(&key);
            w.u32(section);
        }
        ToWorker::Snapshot {
            server,
            array,
            blocks: all,
        } => {
            w.u8(2);
            w.u32(server);
            w.u32(array);
            w.u64(all.len() as u64);
            for (key, block) in all {
                w.key(&key);
                w.shape(&block.shape);
                w.u64(block.data.len() as u64);
                blocks.push(block);
            }
        }
        ToWorker::Ended { server, stats } => {
            w.u8(3);
            w.u32(server);
            // Encoding plain figures into a Vec cannot fail.
            w.bytes(&postcard::to_stdvec(&stats).unwrap_or_default());
        }
    }
    (w.0, blocks)
}

/// A reply from its header; `data(n)` receives the `n` values of each block that follows.
pub(super) fn decode_reply(
    header: &[u8],
    data: &mut dyn FnMut(usize) -> Vec<f64>,
) -> Result<ToWorker> {
    let mut r = Reader(header);
    // Shape and number of values of a block whose data follows.
    fn block(r: &mut Reader<'_>) -> Result<(Vec<usize>, usize)> {
        let shape = r.shape()?;
        let n = r.len()?;
        Ok((shape, n))
    }
    let msg = match r.u8()? {
        0 => {
            let array = r.u32()?;
            let key = r.key()?;
            let section = r.u32()?;
            let (shape, n) = block(&mut r)?;
            r.end()?;
            ToWorker::Block {
                array,
                key,
                section,
                block: Arc::new(Block {
                    shape,
                    data: data(n),
                }),
            }
        }
        1 => ToWorker::Synced { server: r.u32()? },
        4 => ToWorker::Missing {
            array: r.u32()?,
            key: r.key()?,
            section: r.u32()?,
        },
        2 => {
            let server = r.u32()?;
            let array = r.u32()?;
            let count = r.len()?;
            let mut heads = Vec::new();
            for _ in 0..count {
                let key = r.key()?;
                heads.push((key, block(&mut r)?));
            }
            r.end()?;
            let blocks = heads
                .into_iter()
                .map(|(key, (shape, n))| {
                    (
                        key,
                        Arc::new(Block {
                            shape,
                            data: data(n),
                        }),
                    )
                })
                .collect();
            ToWorker::Snapshot {
                server,
                array,
                blocks,
            }
        }
        3 => ToWorker::Ended {
            server: r.u32()?,
            stats: postcard::from_bytes(&r.bytes()?).map_err(|_| malformed())?,
        },
        _ => return Err(malformed()),
    };
    r.end()?;
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::blocks::DiskStats;

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
            ToServer::Snapshot { from, array: 0 },
            ToServer::EndProgram { from },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, data) = encode_request(msg);
            let mut data = data;
            let back = decode_request(&header, &mut |n| {
                let d = data.take().unwrap_or_default();
                assert_eq!(d.len(), n);
                d
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
            assert!(decode_request(&header[..header.len() - 1], &mut |_| Vec::new()).is_err());
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
            ToWorker::Ended { server: 0, stats },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, blocks) = encode_reply(msg);
            let mut blocks = blocks.into_iter();
            let back = decode_reply(&header, &mut |n| {
                let b = blocks.next().expect("a block follows");
                assert_eq!(b.data.len(), n);
                b.data.clone()
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
        }
    }
}
