//! The permutations the benchmarks measure, in one place: the CPU's
//! (`benches/permutations.rs`) and the GPU's (`sial-interpreter`'s `gpu_measure`) time the
//! same cases, and the tests walk every permutation of small ranks.

/// Every permutation of `0..rank`, in lexicographic order.
pub fn all_permutations(rank: usize) -> Vec<Vec<usize>> {
    if rank == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for first in 0..rank {
        for rest in all_permutations(rank - 1) {
            let mut p = vec![first];
            p.extend(rest.into_iter().map(|x| if x >= first { x + 1 } else { x }));
            out.push(p);
        }
    }
    out
}

/// 6-index permutations as (T) and EOM programs apply them to t3-like amplitudes: swaps of
/// one group, of both groups, the group exchange and the full reversal.
pub const SIX_INDEX: [[usize; 6]; 6] = [
    [1, 0, 2, 3, 4, 5],
    [0, 2, 1, 4, 3, 5],
    [2, 1, 0, 5, 4, 3],
    [3, 4, 5, 0, 1, 2],
    [0, 1, 2, 5, 4, 3],
    [5, 4, 3, 2, 1, 0],
];

/// The costliest permutations of a real job, `(source extents, permutation)`: benzene/6-31G
/// CCSD (`sial setup --molecule benches/molecules/benzene.xyz --basis 6-31g --method ccsd`, 2
/// workers + 1 server), AO segments 22-23, occupied 21, virtual 18-27: the first six by total
/// time.
pub const BENZENE_631G: [([usize; 4], [usize; 4]); 6] = [
    ([23, 21, 23, 21], [0, 3, 2, 1]),
    ([23, 21, 23, 21], [2, 3, 0, 1]),
    ([27, 21, 21, 21], [2, 3, 0, 1]),
    ([21, 21, 21, 21], [0, 2, 1, 3]),
    ([21, 27, 18, 27], [3, 2, 1, 0]),
    ([21, 21, 23, 21], [1, 0, 3, 2]),
];

/// An amplitude block `[a,i,b,j]` of water/cc-pVDZ CCSD (`sial setup`'s segments: virtual
/// 19, occupied 5): its 24 permutations are those of small-segment jobs, where one side of a
/// plane is shorter than a vector and the other no multiple of one.
pub const WATER_T2: [usize; 4] = [19, 5, 19, 5];

/// An amplitude block `[a,i,b,j]` of ACES4's `ccsdpt_test.dat` (virtual 9, occupied 5): 2,025
/// elements, a block that fits in L1 beside its destination, where a permute's bookkeeping
/// weighs as much as its moves.
pub const TEST_T2: [usize; 4] = [9, 5, 9, 5];

/// An amplitude block `[a,i,b,j]` of water/cc-pVTZ CCSD (`sial setup`'s segments: virtual
/// 27, occupied 5): 18,225 elements, beyond L1 but in L2.
pub const TZ_T2: [usize; 4] = [27, 5, 27, 5];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_permutation_once_in_order() {
        assert_eq!(all_permutations(0), [Vec::<usize>::new()]);
        assert_eq!(
            all_permutations(3),
            [
                [0, 1, 2],
                [0, 2, 1],
                [1, 0, 2],
                [1, 2, 0],
                [2, 0, 1],
                [2, 1, 0]
            ]
        );
        let four = all_permutations(4);
        assert_eq!(four.len(), 24);
        assert!(four.windows(2).all(|w| w[0] < w[1]));
    }
}
