//! The permute kernels of [`KERNELS`] run on an emulated GPU (`emulator.cpp`: the same source
//! compiled as C++, each block's threads as OS threads meeting at a barrier), with argument
//! blocks made by [`super::perm_launch`], against a direct loop: the kernels and their host side are
//! checked without a GPU. Needs a C++20 compiler (`c++`); where there is none the test says so
//! and checks nothing (CI installs one).

use super::{KERNELS, PermLaunch, perm_launch_of};
use sial_superinstructions::Shape;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The argument block as the 32-bit words the kernel reads.
fn words<T>(args: &T) -> Vec<u32> {
    let n = std::mem::size_of::<T>() / 4;
    // SAFETY: the argument blocks are #[repr(C)] structs of u32 fields only (their layout test
    // checks the sizes), so they are `n` initialised, aligned u32s.
    unsafe { std::slice::from_raw_parts((args as *const T).cast::<u32>(), n) }.to_vec()
}

/// A small deterministic generator (the cases must be the same on every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Random permutations of rank 1–6 (extents up to 40, 14 or 7 by rank), and fixed ones that
/// take each launch: 6-index reversals and pair swaps, folded sides, 16-wide tiles.
fn cases() -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut rng = Lcg(17);
    let mut out: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![6; 6], vec![5, 4, 3, 2, 1, 0]),
        (vec![6; 6], vec![1, 0, 2, 3, 4, 5]),
        (vec![6; 6], vec![1, 0, 3, 2, 5, 4]),
        (vec![64, 16, 10], vec![1, 0, 2]),
        (vec![8, 40, 10], vec![1, 0, 2]),
        (vec![4, 40, 10], vec![1, 0, 2]),
        (vec![16, 64], vec![1, 0]),
        (vec![33, 40, 2, 37], vec![3, 2, 1, 0]),
    ];
    // Small enough that the emulator's barriers (a block's 256 threads on the machine's
    // cores) stay cheap.
    for _ in 0..150 {
        let rank = 1 + rng.below(6);
        let hi = [40, 40, 14, 14, 7, 7][rank - 1];
        let ext: Vec<usize> = (0..rank).map(|_| 1 + rng.below(hi)).collect();
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        out.push((ext, perm));
    }
    out
}

fn have_compiler() -> bool {
    Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn kernels_permute_as_the_cpu_on_an_emulated_gpu() -> Result<(), Box<dyn std::error::Error>> {
    if !have_compiler() {
        eprintln!("note: no C++ compiler (c++): the CUDA kernels were not run on the emulator");
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("sial-cuda-emulator-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = emulate(&dir);
    std::fs::remove_dir_all(&dir)?;
    result
}

/// Writes the sources and cases into `dir`, builds the emulator there and runs it.
fn emulate(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(dir.join("kernels.cu"), KERNELS)?;
    std::fs::write(dir.join("emulator.cpp"), include_str!("emulator.cpp"))?;
    let (mut lines, mut folded_a, mut folded_b) = (String::new(), 0, 0);
    let cases = cases();
    for (i, (ext, perm)) in cases.iter().enumerate() {
        let src = Shape::new(ext)?;
        let (kind, edge, w) = match perm_launch_of(&src, perm)? {
            PermLaunch::Gather(p) => (0, 0, words(&p)),
            PermLaunch::Tiled { args, edge } => {
                folded_a += usize::from(args.a_lo.d != args.ea);
                folded_b += usize::from(args.b_lo.d != args.eb);
                (1, edge, words(&args))
            }
        };
        let list = |v: &[usize]| v.iter().map(|x| format!(" {x}")).collect::<String>();
        let words: String = w.iter().map(|x| format!(" {x}")).collect();
        let (rank, acc) = (ext.len(), i % 2);
        let (e, p, n) = (list(ext), list(perm), w.len());
        writeln!(lines, "{rank}{e}{p} {acc} {kind} {edge} {n}{words}")?;
    }
    std::fs::write(dir.join("cases.txt"), lines)?;
    let exe = dir.join("emulator");
    let built = Command::new("c++")
        .args(["-std=c++20", "-O1", "-pthread", "-w", "-o"])
        .arg(&exe)
        .arg(dir.join("emulator.cpp"))
        .output()?;
    assert!(
        built.status.success(),
        "the kernels do not build as C++: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).arg(dir.join("cases.txt")).output()?;
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "the emulated kernels differ:\n{said}");
    let counts: Vec<usize> = said
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // Every case ran, and each launch and each fold was taken.
    let [checked, gather, tiled16, tiled32] = counts[..] else {
        panic!("unexpected emulator output: {said}");
    };
    assert_eq!(checked, cases.len(), "{said}");
    assert!(gather > 0 && tiled16 > 0 && tiled32 > 0, "{said}");
    assert!(
        folded_a > 0 && folded_b > 0,
        "folds: a {folded_a}, b {folded_b}"
    );
    Ok(())
}
