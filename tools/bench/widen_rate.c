/*
 * widen_rate.c: how fast one core turns int8 weights into f32 FMAs for a GEMV (one row of x), with
 * the weights in L2 so that memory does not limit it: the bound of the AVX2 i8 dequantizing GEMV
 * (templates/x86/dequant.c.j2) on a core, against the f32 FMA-and-load rate of the same loop.
 *
 *     cc -O3 -mavx2 -mfma -mf16c tools/bench/widen_rate.c -o /tmp/widen_rate && /tmp/widen_rate [K]
 *
 * Loop: y[0:256] = sum_k x[k] w[k, 0:256] in chunks of 64 columns (8 accumulators, one broadcast
 * of x[k] per row), K = 1024 rows (256 KiB of int8). Variants, each 8 weights -> one FMA:
 *   pmovsx  sign-extending load (vpmovsxbd) + vcvtdq2ps: what dequant.c.j2 does;
 *   shift   32 bytes as 8 dwords, byte b of each as (dword << (24 - 8b)) & 0xFF000000 = w * 2^24
 *           (exact in f32; the scale would take the 2^-24) + vcvtdq2ps: no lane-crossing widening,
 *           columns permuted;
 *   magic   no convert: (u8 | 0x4B000000) is the float 2^23 + u, minus 2^23 + 128 (u = w ^ 0x80);
 *   f32     the weights already f32 (K / 4 rows, the same bytes): the FMA-and-load rate alone;
 *   nocvt   pmovsx without the vcvtdq2ps (the integers' bits taken as floats: wrong sums, a bound,
 *           not a kernel): what the convert costs;
 *   half    through f16: the bytes u = w ^ 0x80 interleaved with 0x64 are the halves 1024 + u,
 *           vcvtph2ps, minus 1152 (the F16C convert instead of vcvtdq2ps).
 * Prints G weights/s, best of 200 runs, five times. Host A of docs/performance.md (Zen 3 VM):
 * pmovsx 8.0, shift 8.0, magic 6.0, f32 12.0. Host C (Zen 4 VM, ~3.7 GHz): pmovsx 27-30 (about
 * one vector of 8 weights a cycle), shift 25-29, magic 18-23, f32 24-28, nocvt 35-37, half 16.3
 * (22.2 without its subtraction).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N 256
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
/* y[j:j+64] = sum_k x[k] w[k, j:j+64], 64 columns at a time in 8 accumulators `a`, one broadcast
 * `xb` of x[k] a row; the statements given turn the row's bytes at `p` (type T) into 8 FMAs */
#define GEMV_ROWS(T, ...)                                                          \
    for (int j = 0; j < N; j += 64) {                                              \
        __m256 a[8];                                                               \
        for (int q = 0; q < 8; ++q) a[q] = _mm256_setzero_ps();                    \
        for (int k = 0; k < K; ++k) {                                              \
            const __m256 xb = _mm256_set1_ps(x[k]);                                \
            const T *p = w + (size_t)k * N + j;                                    \
            __VA_ARGS__                                                            \
        }                                                                          \
        for (int q = 0; q < 8; ++q) _mm256_storeu_ps(y + j + 8 * q, a[q]);         \
    }
/* sign-extending loads, then TO_F32 on each vector of 8 */
#define WIDEN_KERNEL(NAME, TO_F32)                                                                   \
    static __attribute__((noinline)) void NAME(const float *x, const int8_t *w, float *y, int K) {  \
        GEMV_ROWS(int8_t, for (int q = 0; q < 8; ++q) a[q] = _mm256_fmadd_ps(                         \
                      xb, TO_F32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * q)))), a[q]);) \
    }
WIDEN_KERNEL(pmov, _mm256_cvtepi32_ps)
/* pmovsx without the convert: the integers' bits as floats (wrong sums; the rate without vcvtdq2ps) */
WIDEN_KERNEL(nocvt, _mm256_castsi256_ps)
/* 32 bytes as 8 dwords; byte b of each dword as (b << 24): w * 2^24, exact in f32; columns permuted */
static __attribute__((noinline)) void shift(const float *x, const int8_t *w, float *y, int K) {
    const __m256i hi = _mm256_set1_epi32((int)0xFF000000u);
    GEMV_ROWS(int8_t, for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * h));
        a[4*h+0] = _mm256_fmadd_ps(xb, _mm256_cvtepi32_ps(_mm256_slli_epi32(v, 24)), a[4*h+0]);
        a[4*h+1] = _mm256_fmadd_ps(xb, _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_slli_epi32(v, 16), hi)), a[4*h+1]);
        a[4*h+2] = _mm256_fmadd_ps(xb, _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_slli_epi32(v, 8), hi)), a[4*h+2]);
        a[4*h+3] = _mm256_fmadd_ps(xb, _mm256_cvtepi32_ps(_mm256_and_si256(v, hi)), a[4*h+3]);
    })
}
/* bytes to f32 without a convert: (u8 | 0x4B000000) is 2^23 + u exactly; u = w + 128 (xor 0x80) */
static __attribute__((noinline)) void magic(const float *x, const int8_t *w, float *y, int K) {
    const __m256i lo = _mm256_set1_epi32(0xFF), mg = _mm256_set1_epi32(0x4B000000), flip = _mm256_set1_epi8((char)0x80);
    const __m256 off = _mm256_set1_ps(8388608.0f + 128.0f);
    GEMV_ROWS(int8_t, for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + 32 * h)), flip);
        a[4*h+0] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(v, lo), mg)), off), a[4*h+0]);
        a[4*h+1] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 8), lo), mg)), off), a[4*h+1]);
        a[4*h+2] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 16), lo), mg)), off), a[4*h+2]);
        a[4*h+3] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_srli_epi32(v, 24), mg)), off), a[4*h+3]);
    })
}
/* through f16: byte u = w ^ 0x80 below 0x64 is the half 1024 + u; converted, minus 1152 */
static __attribute__((noinline)) void half(const float *x, const int8_t *w, float *y, int K) {
    const __m128i flip = _mm_set1_epi8((char)0x80), e = _mm_set1_epi8(0x64);
    const __m256 off = _mm256_set1_ps(1152.0f);
    GEMV_ROWS(int8_t, for (int h = 0; h < 4; ++h) {
        const __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + 16 * h)), flip);
        a[2*h+0] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_cvtph_ps(_mm_unpacklo_epi8(v, e)), off), a[2*h+0]);
        a[2*h+1] = _mm256_fmadd_ps(xb, _mm256_sub_ps(_mm256_cvtph_ps(_mm_unpackhi_epi8(v, e)), off), a[2*h+1]);
    })
}
/* f32 weights already converted (in L1/L2): the FMA-and-load rate alone */
static __attribute__((noinline)) void f32(const float *x, const float *w, float *y, int K) {
    GEMV_ROWS(float, for (int q = 0; q < 8; ++q) a[q] = _mm256_fmadd_ps(xb, _mm256_loadu_ps(p + 8 * q), a[q]);)
}
int main(int argc, char **argv) {
    int K = argc > 1 ? atoi(argv[1]) : 1024;   /* 256 KiB of w: L2 */
    int8_t *w = aligned_alloc(64, (size_t)K * N);
    float *x = aligned_alloc(64, K * 4), y[N], *wf = aligned_alloc(64, (size_t)K * N);
    for (size_t i = 0; i < (size_t)K * N / 4; ++i) wf[i] = 0.5f;
    for (size_t i = 0; i < (size_t)K * N; ++i) w[i] = (int8_t)(rand() % 255 - 127);
    for (int k = 0; k < K; ++k) x[k] = (float)(rand() % 100) / 50.0f - 1.0f;
    for (int rep = 0; rep < 5; ++rep) {
        double best[6] = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9};
        for (int it = 0; it < 200; ++it) {
            double t = now(); pmov(x, w, y, K); double d = now() - t; if (d < best[0]) best[0] = d;
            t = now(); shift(x, w, y, K); d = now() - t; if (d < best[1]) best[1] = d;
            t = now(); magic(x, w, y, K); d = now() - t; if (d < best[2]) best[2] = d;
            t = now(); f32(x, wf, y, K / 4); d = now() - t; if (d < best[3]) best[3] = d;
            t = now(); nocvt(x, w, y, K); d = now() - t; if (d < best[4]) best[4] = d;
            t = now(); half(x, w, y, K); d = now() - t; if (d < best[5]) best[5] = d;
        }
        printf("pmovsx %.2f  shift %.2f  magic %.2f  f32 %.2f  nocvt %.2f  half %.2f G weights/s\n", (double)K * N / best[0] / 1e9,
               (double)K * N / best[1] / 1e9, (double)K * N / best[2] / 1e9, (double)K / 4 * N / best[3] / 1e9,
               (double)K * N / best[4] / 1e9, (double)K * N / best[5] / 1e9);
    }
    int sink = (int)y[3] & 1;
    free(w);
    free(wf);
    free(x);
    return sink;
}
