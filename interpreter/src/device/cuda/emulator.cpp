// The permute kernels of `KERNELS` (cuda/mod.rs) run on the CPU, for the tests: a block's
// threads are OS threads that meet at a barrier for __syncthreads, and blocks run one after
// the other, so that a block's __shared__ arrays can be statics. The test writes the kernel
// source beside this file as kernels.cu, and a case file whose lines are
//   rank  extents[rank]  perm[rank]  accumulate  kind  edge  words  word[words]
// (source extents, first fastest; kind 0 the gather, 1 the tiled kernel of that edge; the
// words are the argument block exactly as the host code fills it). Each result is compared
// with a direct loop over the permutation. Prints "checked N gather G tiled16 A tiled32 B" and
// exits 1 on any difference.
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
std::barrier<>* block_barrier;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() block_barrier->arrive_and_wait()
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
#include "kernels.cu"

// Runs `kernel` on a grid of `grid` blocks of bx × by threads.
template <class F>
void launch(unsigned grid, unsigned bx, unsigned by, F kernel) {
    gridDim = {grid, 1, 1};
    blockDim = {bx, by, 1};
    for (unsigned b = 0; b < grid; ++b) {
        std::barrier<> bar(bx * by);
        block_barrier = &bar;
        std::vector<std::thread> threads;
        for (unsigned y = 0; y < by; ++y)
            for (unsigned x = 0; x < bx; ++x)
                threads.emplace_back([=] {
                    threadIdx = {x, y, 1};
                    blockIdx = {b, 1, 1};
                    kernel();
                });
        for (auto& t : threads) t.join();
    }
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::ifstream in(argv[1]);
    unsigned rank;
    int checked = 0, differ = 0, gathers = 0, tiled16 = 0, tiled32 = 0;
    while (in >> rank) {
        std::vector<unsigned> ext(rank), perm(rank);
        for (auto& e : ext) in >> e;
        for (auto& p : perm) in >> p;
        unsigned acc, kind, edge, words;
        in >> acc >> kind >> edge >> words;
        std::vector<unsigned> w(words);
        for (auto& x : w) in >> x;
        size_t n = 1;
        for (auto e : ext) n *= e;
        std::vector<double> src(n), dst(n), want(n);
        for (size_t i = 0; i < n; ++i) {
            src[i] = double(i % 1013) - 500.25;
            dst[i] = double(i % 7);
        }
        double alpha = acc ? -0.75 : 1.0;
        // The direct loop: destination dimension k is source dimension perm[k].
        std::vector<size_t> sstride(rank);
        for (size_t k = 0, s = 1; k < rank; s *= ext[k], ++k) sstride[k] = s;
        for (size_t i = 0; i < n; ++i) {
            size_t rem = i, off = 0;
            for (size_t k = 0; k < rank; ++k) {
                size_t e = ext[perm[k]];
                off += (rem % e) * sstride[perm[k]];
                rem /= e;
            }
            want[i] = acc ? dst[i] + alpha * src[off] : src[off];
        }
        double* d = dst.data();
        const double* s = src.data();
        int a = int(acc);
        if (kind == 0) {
            PermArgs p;
            if (words * 4 != sizeof p) return 3;
            std::memcpy(&p, w.data(), sizeof p);
            unsigned count = unsigned(n), grid = unsigned(std::min<size_t>((n + 255) / 256, 3));
            launch(grid, 256, 1, [=] { sial_permute(d, s, p, alpha, a, count); });
            ++gathers;
        } else {
            TileArgs p;
            if (words * 4 != sizeof p) return 3;
            std::memcpy(&p, w.data(), sizeof p);
            unsigned grid = std::min(p.tiles, 3u);
            if (edge == 16) {
                launch(grid, 16, 16, [=] { sial_permute_tiled16(d, s, p, alpha, a); });
                ++tiled16;
            } else {
                launch(grid, 32, 8, [=] { sial_permute_tiled32(d, s, p, alpha, a); });
                ++tiled32;
            }
        }
        ++checked;
        if (dst != want) {
            ++differ;
            std::printf("differs: extents");
            for (auto e : ext) std::printf(" %u", e);
            std::printf(" perm");
            for (auto p : perm) std::printf(" %u", p);
            std::printf(" accumulate %u kind %u edge %u\n", acc, kind, edge);
        }
    }
    std::printf("checked %d gather %d tiled16 %d tiled32 %d\n", checked, gathers, tiled16, tiled32);
    return differ == 0 ? 0 : 1;
}
