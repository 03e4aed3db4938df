// Memory access patterns of a transpose of f64 blocks, against memcpy of the same bytes
// (docs/benchmarks.md, "Transposes in the caches: the stores bound them"). Each case moves an
// N x N block (column-major, rows N*8 bytes apart) in 8 x 8 register blocks, or, where named
// "pattern", only touches memory as a transpose would (the data lands elsewhere); "hot" reuses
// one pair of buffers (L2/L3), "cold" takes 16 pairs in turn (memory). The reversal of an 8^6
// block is timed the same two ways. Medians of 9 rounds of 16 calls.
//   cc -O2 -mavx512f -o /tmp/tp benches/transpose_patterns.c && /tmp/tp [N]
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t N = 512;
static double *src, *dst, *S[16], *D[16];
static int cold, cur;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// One 8 x 8 block: rows of s (ss apart) become rows of d (ds apart).
static inline void tr8(const double *s, size_t ss, double *d, size_t ds) {
    __m512d r0 = _mm512_load_pd(s), r1 = _mm512_load_pd(s + ss), r2 = _mm512_load_pd(s + 2 * ss),
            r3 = _mm512_load_pd(s + 3 * ss), r4 = _mm512_load_pd(s + 4 * ss),
            r5 = _mm512_load_pd(s + 5 * ss), r6 = _mm512_load_pd(s + 6 * ss),
            r7 = _mm512_load_pd(s + 7 * ss);
    __m512d t0 = _mm512_unpacklo_pd(r0, r1), t1 = _mm512_unpackhi_pd(r0, r1),
            t2 = _mm512_unpacklo_pd(r2, r3), t3 = _mm512_unpackhi_pd(r2, r3),
            t4 = _mm512_unpacklo_pd(r4, r5), t5 = _mm512_unpackhi_pd(r4, r5),
            t6 = _mm512_unpacklo_pd(r6, r7), t7 = _mm512_unpackhi_pd(r6, r7);
    __m512d s0 = _mm512_shuffle_f64x2(t0, t2, 0x88), s1 = _mm512_shuffle_f64x2(t0, t2, 0xdd),
            s2 = _mm512_shuffle_f64x2(t1, t3, 0x88), s3 = _mm512_shuffle_f64x2(t1, t3, 0xdd),
            s4 = _mm512_shuffle_f64x2(t4, t6, 0x88), s5 = _mm512_shuffle_f64x2(t4, t6, 0xdd),
            s6 = _mm512_shuffle_f64x2(t5, t7, 0x88), s7 = _mm512_shuffle_f64x2(t5, t7, 0xdd);
    _mm512_store_pd(d, _mm512_shuffle_f64x2(s0, s4, 0x88));
    _mm512_store_pd(d + ds, _mm512_shuffle_f64x2(s2, s6, 0x88));
    _mm512_store_pd(d + 2 * ds, _mm512_shuffle_f64x2(s1, s5, 0x88));
    _mm512_store_pd(d + 3 * ds, _mm512_shuffle_f64x2(s3, s7, 0x88));
    _mm512_store_pd(d + 4 * ds, _mm512_shuffle_f64x2(s0, s4, 0xdd));
    _mm512_store_pd(d + 5 * ds, _mm512_shuffle_f64x2(s2, s6, 0xdd));
    _mm512_store_pd(d + 6 * ds, _mm512_shuffle_f64x2(s1, s5, 0xdd));
    _mm512_store_pd(d + 7 * ds, _mm512_shuffle_f64x2(s3, s7, 0xdd));
}

static void copy(void) { memcpy(dst, src, N * N * 8); }
// Patterns only (the data lands in the wrong place): 8 lines read from rows N*8 bytes apart and
// written one after another; and the reverse.
static void strided_loads(void) {
    for (size_t r = 0; r < N; r += 8)
        for (size_t c = 0; c < N; c += 8)
            for (size_t k = 0; k < 8; k++)
                _mm512_store_pd(dst + r * N + c * 8 + k * 8, _mm512_load_pd(src + (r + k) * N + c));
}
static void strided_stores(void) {
    for (size_t r = 0; r < N; r += 8)
        for (size_t c = 0; c < N; c += 8)
            for (size_t k = 0; k < 8; k++)
                _mm512_store_pd(dst + (c + k) * N + r, _mm512_load_pd(src + r * N + c * 8 + k * 8));
}
// Transposes: blocks along the source's rows; along the destination's; 64 x 64 tiles staged
// in a 32 KiB buffer, read and written as runs of 8 lines.
static void along_source(void) {
    for (size_t r = 0; r < N; r += 8)
        for (size_t c = 0; c < N; c += 8) tr8(src + r * N + c, N, dst + c * N + r, N);
}
static void along_destination(void) {
    for (size_t c = 0; c < N; c += 8)
        for (size_t r = 0; r < N; r += 8) tr8(src + r * N + c, N, dst + c * N + r, N);
}
static double buf[64 * 64] __attribute__((aligned(64)));
static void staged64(void) {
    for (size_t r0 = 0; r0 < N; r0 += 64)
        for (size_t c0 = 0; c0 < N; c0 += 64) {
            for (size_t r = 0; r < 64; r += 8)
                for (size_t c = 0; c < 64; c += 8) tr8(src + (r0 + r) * N + c0 + c, N, buf + c * 64 + r, 64);
            for (size_t c = 0; c < 64; c++)
                for (size_t r = 0; r < 64; r += 8)
                    _mm512_store_pd(dst + (c0 + c) * N + r0 + r, _mm512_load_pd(buf + c * 64 + r));
        }
}

// The reversal of an 8^6 block: source strides a 1 ... f 8^5, destination f 1 ... a 8^5.
#define SS(a, b, c, d, e, f) ((a) + 8 * (b) + 64 * (c) + 512 * (d) + 4096 * (e) + 32768 * (f))
#define DS(a, b, c, d, e, f) ((f) + 8 * (e) + 64 * (d) + 512 * (c) + 4096 * (b) + 32768 * (a))
static void reversal_direct(void) {
    for (int b = 0; b < 8; b++)
        for (int c = 0; c < 8; c++)
            for (int d = 0; d < 8; d++)
                for (int e = 0; e < 8; e++) tr8(src + SS(0, b, c, d, e, 0), 32768, dst + DS(0, b, c, d, e, 0), 32768);
}
static void reversal_staged(void) {
    for (int c = 0; c < 8; c++)
        for (int d = 0; d < 8; d++) {
            for (int e = 0; e < 8; e++)
                for (int b = 0; b < 8; b++) tr8(src + SS(0, b, c, d, e, 0), 32768, buf + b * 8 * 64 + e * 8, 64);
            for (int b = 0; b < 8; b++)
                for (int a = 0; a < 8; a++)
                    for (int j = 0; j < 64; j += 8)
                        _mm512_store_pd(dst + DS(a, b, c, d, 0, 0) + j, _mm512_load_pd(buf + (b * 8 + a) * 64 + j));
        }
}

static double median_time(void (*f)(void)) {
    double ts[9];
    for (int r = 0; r < 9; r++) {
        double t = 0;
        for (int i = 0; i < 16; i++) {
            if (cold) cur = (cur + 1) % 16;
            src = S[cur], dst = D[cur];
            double t0 = now();
            f();
            t += now() - t0;
        }
        ts[r] = t / 16;
    }
    for (int i = 0; i < 9; i++)
        for (int j = i + 1; j < 9; j++)
            if (ts[j] < ts[i]) { double x = ts[i]; ts[i] = ts[j]; ts[j] = x; }
    return ts[4];
}

static int transposed(void) {
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < N; c++)
            if (dst[c * N + r] != src[r * N + c]) return 0;
    return 1;
}

static int reversed(void) {
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            for (int c = 0; c < 8; c++)
                for (int d = 0; d < 8; d++)
                    for (int e = 0; e < 8; e++)
                        for (int f = 0; f < 8; f++)
                            if (dst[DS(a, b, c, d, e, f)] != src[SS(a, b, c, d, e, f)]) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc > 1) N = strtoul(argv[1], 0, 10);
    if (N % 64 || N < 64) { fprintf(stderr, "N must be a multiple of 64\n"); return 1; }
    size_t len = N * N > 262144 ? N * N : 262144;
    for (int k = 0; k < 16; k++) {
        // 64 bytes past a page, as the sial binary's allocator places large blocks.
        S[k] = (double *)aligned_alloc(4096, len * 8 + 4096) + 8;
        D[k] = (double *)aligned_alloc(4096, len * 8 + 4096) + 8;
        for (size_t i = 0; i < len; i++) S[k][i] = (double)i, D[k][i] = 0;
    }
    struct { const char *name; void (*f)(void); int check; } cases[] = {
        {"memcpy", copy, 0}, {"pattern: strided loads", strided_loads, 0},
        {"pattern: strided stores", strided_stores, 0}, {"8x8 along source", along_source, 1},
        {"8x8 along destination", along_destination, 1}, {"64x64 staged", staged64, 1},
    };
    src = S[0], dst = D[0];
    for (int i = 0; i < 6; i++)
        if (cases[i].check) { memset(dst, 0, N * N * 8); cases[i].f(); if (!transposed()) printf("%s: wrong\n", cases[i].name); }
    for (cold = 0; cold < 2; cold++) {
        printf("%zu x %zu, %s\n", N, N, cold ? "cold" : "hot");
        double base = median_time(copy);
        for (int i = 0; i < 6; i++) {
            double t = median_time(cases[i].f);
            printf("  %-26s %9.1f us  ratio to memcpy %.2f\n", cases[i].name, t * 1e6, base / t);
        }
    }
    void (*reversals[])(void) = {reversal_direct, reversal_staged};
    for (int i = 0; i < 2; i++) {
        memset(dst, 0, 262144 * 8);
        reversals[i]();
        if (!reversed()) printf("reversal %d: wrong\n", i);
    }
    for (cold = 0; cold < 2; cold++) {
        printf("8^6 [5,4,3,2,1,0], %s\n", cold ? "cold" : "hot");
        size_t keep = N;
        N = 512;  // 8^6 elements, for memcpy
        double base = median_time(copy);
        double t1 = median_time(reversal_direct), t2 = median_time(reversal_staged);
        N = keep;
        printf("  %-26s %9.1f us  ratio to memcpy %.2f\n", "8x8 (a, f) planes", t1 * 1e6, base / t1);
        printf("  %-26s %9.1f us  ratio to memcpy %.2f\n", "64x64 staged", t2 * 1e6, base / t2);
    }
    return 0;
}
