//! GPU measurements for docs/benchmarks.md (issue "GPU execution"), for a machine with a GPU:
//!
//!     cargo run --release -p sial-interpreter --example gpu_measure
//!
//! 1. 4-index contractions with segment sizes 27, 32, 48, 64 (`R[a,b,i,j] = T[a,b,c,d]
//!    V[c,d,i,j]`, no permutes, and `R[a,b,i,j] = T[a,c,i,k] V[k,c,j,b]`, every operand
//!    permuted) against one DGEMM of the same flops (target: >= 70%).
//! 2. Permutations against a device copy of the same bytes: all 24 of 16^4, 27^4, 32^4, 48^4
//!    and 64^4, six common ones of 8^6, 10^6, 12^6 and 16^6, each checked against the CPU.
//! 3. Host<->device bandwidth from pinned buffers, 1 MiB to 256 MiB.
//! 4. A chain of 10 contractions on resident blocks through the versioned copies: only the
//!    inputs go up and the final result comes down.
//!
//! `-- --host` runs the same on the host-memory device, with segment sizes 8 and 12 (edges 8
//! and 12, and 4^6): a check of this tool, not a GPU figure.

use sial_interpreter::device::{
    DevBuf, Device, DeviceCopies, GemmSpec, HostDevice, Intent, PinnedBuf, contract_on,
};
use sial_superinstructions::permute_cases::{BENZENE_631G, SIX_INDEX, all_permutations};
use sial_superinstructions::{ContractionPlan, Shape};
use std::error::Error;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn Error>>;

fn open(host: bool) -> Res<Box<dyn Device>> {
    if host {
        return Ok(Box::new(HostDevice::with_defaults()?));
    }
    match sial_interpreter::device::CudaDevice::open(0)? {
        Some(d) => Ok(Box::new(d)),
        None => {
            Err("no GPU found (run with -- --host to check the tool on the host device)".into())
        }
    }
}

/// The values [`filled`] writes: `0.001 * (i % 97)`.
fn values(len: usize) -> Vec<f64> {
    (0..len).map(|i| 0.001 * (i % 97) as f64).collect()
}

/// A device buffer holding [`values`].
fn filled(dev: &mut dyn Device, len: usize) -> Res<DevBuf> {
    let buf = dev.alloc(len)?;
    let mut p = dev.pinned_allocator().alloc(len)?;
    p.write()?.copy_from_slice(&values(len));
    let e = dev.upload(&buf, &p, 0)?;
    dev.wait(e)?;
    Ok(buf)
}

/// Best seconds of `reps` runs of `f`, each followed by a device synchronisation.
fn best(
    dev: &mut dyn Device,
    reps: usize,
    mut f: impl FnMut(&mut dyn Device) -> Res<()>,
) -> Res<f64> {
    f(dev)?;
    dev.synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        f(dev)?;
        dev.synchronize()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn plan(d: (&[u32], usize), l: (&[u32], usize), r: (&[u32], usize)) -> Res<ContractionPlan> {
    let shape = |n: usize| Shape::new(&[n, n, n, n]);
    Ok(ContractionPlan::new(
        (d.0, &shape(d.1)?),
        (l.0, &shape(l.1)?),
        (r.0, &shape(r.1)?),
    )?)
}

/// The device's result in `r` against the CPU's contraction of the same operands: the largest
/// difference relative to the largest element.
fn deviation(dev: &mut dyn Device, p: &ContractionPlan, r: &DevBuf, len: usize) -> Res<f64> {
    let mut pinned = dev.pinned_allocator().alloc(len)?;
    let e = dev.download(&mut pinned, r, 0)?;
    dev.wait(e)?;
    // Both operands were filled with the same values.
    let operand = values(len);
    let mut want = vec![0.0; len];
    p.execute(&mut want, &operand, &operand, 0.0)?;
    let got = pinned.read()?;
    let scale = want
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    let diff = want
        .iter()
        .zip(got.iter())
        .fold(0.0f64, |m, (w, g)| m.max((w - g).abs()));
    Ok(diff / scale)
}

fn contractions(dev: &mut dyn Device, segments: &[usize]) -> Res<()> {
    println!("== 4-index contractions against DGEMM of the same flops");
    println!(
        "{:>4} {:>10} {:>12} {:>12} {:>12} {:>7} {:>10}",
        "seg", "pattern", "GEMM GF/s", "contract GF/s", "ms", "ratio", "vs CPU"
    );
    let (a, b, c, d, i, j, k) = (1, 2, 3, 4, 5, 6, 7);
    for &s in segments {
        let n = s * s;
        let len = n * n;
        let (t, v, r) = (filled(dev, len)?, filled(dev, len)?, dev.alloc(len)?);
        let spec = GemmSpec {
            m: n,
            n,
            k: n,
            transa: false,
            transb: false,
            alpha: 1.0,
            beta: 0.0,
        };
        let flops = 2.0 * (n * n * n) as f64;
        let gemm = best(dev, 5, |dev| Ok(dev.gemm(&spec, &t, &v, &r)?))?;
        let plain = plan((&[a, b, i, j], s), (&[a, b, c, d], s), (&[c, d, i, j], s))?;
        let permuted = plan((&[a, b, i, j], s), (&[a, c, i, k], s), (&[k, c, j, b], s))?;
        if s == segments[0] {
            let show = |(_, p): (bool, Option<(Shape, Shape, sial_superinstructions::Perm)>)| {
                p.map_or("none".to_string(), |(from, _, perm)| {
                    format!("{from} {:?}", perm.as_slice())
                })
            };
            println!(
                "permuted pattern's permutes: left {}, right {}, result {}",
                show(permuted.left_prep()),
                show(permuted.right_prep()),
                show(permuted.dst_prep())
            );
        }
        for (name, p) in [("plain", &plain), ("permuted", &permuted)] {
            let secs = best(dev, 5, |dev| Ok(contract_on(dev, p, &r, &t, &v, 0.0)?))?;
            println!(
                "{s:>4} {name:>10} {:>12.1} {:>12.1} {:>12.3} {:>7.2} {:>10.1e}",
                flops / gemm / 1e9,
                flops / secs / 1e9,
                secs * 1e3,
                gemm / secs,
                deviation(dev, p, &r, len)?
            );
        }
        for buf in [t, v, r] {
            dev.free(buf)?;
        }
    }
    Ok(())
}

/// A permutation case: the source's extents and the permutation.
type Case = (Vec<usize>, Vec<usize>);

/// Permutations of 4-index blocks (all 24) and 6-index blocks (the common ones) against a
/// device copy of the same bytes, each checked against the CPU's permutation; the worst and
/// the median ratio of each shape. An error if any result differs.
fn permutations(dev: &mut dyn Device, edges4: &[usize], edges6: &[usize]) -> Res<()> {
    println!("== permutations against a device copy of the same bytes");
    println!(
        "{:>17} {:>14} {:>12} {:>12} {:>7} {:>8}",
        "extents", "perm", "copy GB/s", "perm GB/s", "ratio", "vs CPU"
    );
    // The CPU bench's 6-index list, and two swaps of all three pairs.
    let six: Vec<Vec<usize>> = SIX_INDEX
        .iter()
        .chain([[1, 0, 3, 2, 5, 4]].iter())
        .map(|p| p.to_vec())
        .collect();
    let cube = |rank: usize, e: usize| vec![e; rank];
    let mut shapes: Vec<(String, Vec<Case>)> = Vec::new();
    for &e in edges4 {
        let list = all_permutations(4)
            .into_iter()
            .map(|p| (cube(4, e), p))
            .collect();
        shapes.push((format!("{e}^4"), list));
    }
    for &e in edges6 {
        let list = six.iter().map(|p| (cube(6, e), p.clone())).collect();
        shapes.push((format!("{e}^6"), list));
    }
    if !edges4.is_empty() && edges4[0] > 12 {
        // The CPU bench's costliest permutations of benzene/6-31G CCSD.
        let list = BENZENE_631G
            .iter()
            .map(|(e, p)| (e.to_vec(), p.to_vec()))
            .collect();
        shapes.push(("job".into(), list));
    }
    let mut differ = 0;
    let mut summary = Vec::new();
    for (group, list) in shapes {
        for (extents, perm) in list {
            let r = one_permutation(dev, &extents, &perm)?;
            differ += usize::from(!r.1);
            summary.push((group.clone(), r.0));
        }
    }
    println!("== permutations: worst and median ratio to a copy, by group");
    let mut groups: Vec<String> = summary.iter().map(|(g, _)| g.clone()).collect();
    groups.dedup();
    for g in groups {
        let mut ratios: Vec<f64> = summary
            .iter()
            .filter(|(h, _)| *h == g)
            .map(|x| x.1)
            .collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "{g}: worst {:.2} median {:.2}",
            ratios[0],
            ratios[ratios.len() / 2]
        );
    }
    if differ > 0 {
        return Err(format!("{differ} permutations differ from the CPU's").into());
    }
    Ok(())
}

/// One permutation against a device copy of the same bytes, printed; its ratio, and whether
/// it equals the CPU's.
fn one_permutation(dev: &mut dyn Device, extents: &[usize], perm: &[usize]) -> Res<(f64, bool)> {
    let src_shape = Shape::new(extents)?;
    let len = src_shape.len();
    let (src, dst) = (filled(dev, len)?, dev.alloc(len)?);
    let src_values = values(len);
    let copy = best(dev, 5, |dev| Ok(dev.copy(&dst, &src)?))?;
    let dst_shape = src_shape.permuted(perm)?;
    let secs = best(dev, 5, |dev| {
        Ok(dev.permute(&dst, &dst_shape, &src, &src_shape, perm)?)
    })?;
    let mut pinned = dev.pinned_allocator().alloc(len)?;
    let ev = dev.download(&mut pinned, &dst, 0)?;
    dev.wait(ev)?;
    let mut want = vec![0.0; len];
    sial_superinstructions::permute(&mut want, &dst_shape, &src_values, &src_shape, perm)?;
    let same = want.as_slice() == &*pinned.read()?;
    let bytes = 2.0 * (len * 8) as f64;
    println!(
        "{:>17} {:>14} {:>12.0} {:>12.0} {:>7.2} {:>8}",
        format!("{extents:?}").replace(' ', ""),
        format!("{perm:?}").replace(' ', ""),
        bytes / copy / 1e9,
        bytes / secs / 1e9,
        copy / secs,
        if same { "same" } else { "DIFFERS" }
    );
    for buf in [src, dst] {
        dev.free(buf)?;
    }
    Ok((copy / secs, same))
}

fn bandwidth(dev: &mut dyn Device) -> Res<()> {
    println!("== pinned transfers");
    println!("{:>8} {:>14} {:>14}", "MiB", "up GB/s", "down GB/s");
    for mib in [1usize, 8, 64, 256] {
        let len = mib << 17;
        let buf = dev.alloc(len)?;
        let mut p: PinnedBuf = dev.pinned_allocator().alloc(len)?;
        let up = best(dev, 5, |dev| {
            let e = dev.upload(&buf, &p, 0)?;
            Ok(dev.wait(e)?)
        })?;
        let mut down = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            let e = dev.download(&mut p, &buf, 1 % dev.streams().max(1))?;
            dev.wait(e)?;
            down = down.min(t.elapsed().as_secs_f64());
        }
        let bytes = (len * 8) as f64;
        println!(
            "{mib:>8} {:>14.2} {:>14.2}",
            bytes / up / 1e9,
            bytes / down / 1e9
        );
        dev.free(buf)?;
    }
    Ok(())
}

fn chain(dev: Box<dyn Device>, s: usize) -> Res<()> {
    println!("== chain of 10 contractions on resident blocks (segment {s})");
    let len = s * s * s * s;
    let (a, b, c, d, i, j) = (1, 2, 3, 4, 5, 6);
    let p = plan((&[a, b, i, j], s), (&[a, b, c, d], s), (&[c, d, i, j], s))?;
    let mut copies: DeviceCopies<u32> = DeviceCopies::new(dev, usize::MAX, 1 << 30);
    let host: Vec<f64> = (0..len).map(|x| 1e-3 * (x % 89) as f64).collect();
    let mut written_back = Vec::new();
    // Blocks 0 and 1 are the inputs; each step writes block 2 + step from the previous result.
    for step in 0..10u32 {
        copies.begin_instruction()?;
        let left = if step == 0 { 0 } else { step + 1 };
        let l = copies.for_device(left, len, Intent::Read, &host, &mut written_back)?;
        let r = copies.for_device(1, len, Intent::Read, &host, &mut written_back)?;
        let dst = copies.for_device(step + 2, len, Intent::Write, &[], &mut written_back)?;
        contract_on(copies.device(), &p, &dst, &l, &r, 0.0)?;
    }
    let mut result = vec![0.0; len];
    copies.for_host(11, Intent::Read, &mut result)?;
    let g = copies.stats();
    println!(
        "uploads {} ({} bytes), downloads {} ({} bytes); expected 2 uploads and 1 download of {} bytes",
        g.uploads,
        g.upload_bytes,
        g.downloads,
        g.download_bytes,
        len * 8
    );
    Ok(())
}

fn main() -> Res<()> {
    let host = std::env::args().any(|a| a == "--host");
    let mut dev = open(host)?;
    println!("device: {}", dev.name());
    // The host-memory device computes on one core: small segments only.
    let segments: &[usize] = if host { &[8, 12] } else { &[27, 32, 48, 64] };
    contractions(dev.as_mut(), segments)?;
    if host {
        permutations(dev.as_mut(), &[8, 12], &[4])?;
    } else {
        permutations(dev.as_mut(), &[16, 27, 32, 48, 64], &[8, 10, 12, 16])?;
    }
    bandwidth(dev.as_mut())?;
    chain(dev, segments[0])
}
