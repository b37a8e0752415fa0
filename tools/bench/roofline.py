"""The machine's roofline: DRAM bandwidth (STREAM-style copy and triad, and `read`, a read-only sum
in 1, 2, 4 or 8 interleaved streams per thread, the best kept: the access pattern of a GEMV
streaming its weights; all over arrays far larger than the last-level cache) and f32 FMA peak
(independent FMA chains in AVX2 or AVX-512 registers), at 1 and 2 threads. Every performance
figure in tools/bench is reported against these floors.

    python tools/bench/roofline.py [--out roofline.json]

Compiled with the system C compiler at run time; best of several repetitions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

enum { N = 1 << 25 };              /* 32 Mi floats = 128 MiB per array, far beyond any L3 here */
static float *a, *b, *c;
static int threads;

typedef struct { int id; int kind; double flops; } job;

static void *stream(void *p) {
    job *j = p;
    size_t lo = (size_t)N / threads * j->id, hi = (size_t)N / threads * (j->id + 1);
    if (j->kind == 0) memcpy(c + lo, a + lo, (hi - lo) * sizeof(float));
    else if (j->kind == 1) for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
    else {                         /* read: sum b in j->kind - 1 interleaved streams, as a GEMV reads its weights
                                      (one sequential stream alone does not reach the DRAM bandwidth) */
        int ns = j->kind - 1;
#if defined(__AVX512F__)
        enum { W = 16 };
        __m512 acc[8];
        for (int s = 0; s < ns; ++s) acc[s] = _mm512_setzero_ps();
        size_t len = (hi - lo) / ns / W * W;
        for (size_t i = 0; i < len; i += W)
            for (int s = 0; s < ns; ++s) acc[s] = _mm512_add_ps(acc[s], _mm512_loadu_ps(b + lo + s * len + i));
        for (int s = 0; s < ns; ++s) j->flops += _mm512_reduce_add_ps(acc[s]);
#else
        enum { W = 8 };
        __m256 acc[8];
        for (int s = 0; s < ns; ++s) acc[s] = _mm256_setzero_ps();
        size_t len = (hi - lo) / ns / W * W;
        for (size_t i = 0; i < len; i += W)
            for (int s = 0; s < ns; ++s) acc[s] = _mm256_add_ps(acc[s], _mm256_loadu_ps(b + lo + s * len + i));
        float v[8];
        for (int s = 0; s < ns; ++s) { _mm256_storeu_ps(v, acc[s]); for (int q = 0; q < 8; ++q) j->flops += v[q]; }
#endif
    }
    return NULL;
}

static void *fma_peak(void *p) {
    job *j = p;
#if defined(__AVX512F__)
    __m512 acc[12], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps((float)k);
    for (long it = 0; it < 20000000; ++it)
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], x, y);
    float s = 0; for (int k = 0; k < 12; ++k) s += _mm512_reduce_add_ps(acc[k]);
    j->flops = 20000000.0 * 12 * 16 * 2 + s * 0;
#else
    __m256 acc[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps((float)k);
    for (long it = 0; it < 20000000; ++it)
        for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], x, y);
    float t[8], s = 0; for (int k = 0; k < 12; ++k) { _mm256_storeu_ps(t, acc[k]); for (int q = 0; q < 8; ++q) s += t[q]; }
    j->flops = 20000000.0 * 12 * 8 * 2 + s * 0;
#endif
    return NULL;
}

static double run(void *(*fn)(void *), int kind, double *flops) {
    pthread_t th[64]; job jobs[64];
    double t0 = now();
    for (int i = 0; i < threads; ++i) { jobs[i] = (job){i, kind, 0}; pthread_create(&th[i], NULL, fn, &jobs[i]); }
    double f = 0;
    for (int i = 0; i < threads; ++i) { pthread_join(th[i], NULL); f += jobs[i].flops; }
    if (flops) *flops = f;
    return now() - t0;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 1;
    a = aligned_alloc(64, N * sizeof(float)); b = aligned_alloc(64, N * sizeof(float)); c = aligned_alloc(64, N * sizeof(float));
    for (size_t i = 0; i < N; ++i) { a[i] = 1; b[i] = 2; c[i] = 3; }
    double copy = 1e30, triad = 1e30, read = 1e30, sink = 0;
    for (int r = 0; r < 7; ++r) {
        double t = run(stream, 0, NULL); if (t < copy) copy = t;
        t = run(stream, 1, NULL); if (t < triad) triad = t;
        for (int ns = 1; ns <= 8; ns *= 2) { t = run(stream, 1 + ns, &sink); if (t < read) read = t; }
    }
    double flops = 0, best = 1e30;
    for (int r = 0; r < 3; ++r) { double f, t = run(fma_peak, 0, &f); if (t < best) { best = t; flops = f; } }
    printf("{\"threads\": %d, \"copy_gbs\": %.2f, \"triad_gbs\": %.2f, \"read_gbs\": %.2f, \"fma_gflops\": %.1f}\n",
           threads, 2.0 * N * sizeof(float) / copy / 1e9, 3.0 * N * sizeof(float) / triad / 1e9,
           1.0 * N * sizeof(float) / read / 1e9 + sink * 0, flops / best / 1e9);
    return 0;
}
"""


def measure(threads: int, work: Path, vector_bits: int | None = None) -> dict:
    """The floors at `threads`; the FMA peak in `vector_bits`-wide registers (256: AVX2, 512:
    AVX-512), by default the widest this CPU has. A benchmark of code for a narrower ISA than the
    host's (the AVX2 descriptor on an AVX-512 host) takes that ISA's peak: AVX2 code cannot use
    the host's 512-bit FMAs, and against their peak it would look half as fast as it is."""
    if vector_bits is None:
        vector_bits = 512 if "avx512f" in Path("/proc/cpuinfo").read_text() else 256
    exe = work / f"roofline{vector_bits}"
    if not exe.exists():
        flags = ["-mavx512f"] if vector_bits == 512 else ["-mavx2", "-mfma"]
        (work / "roofline.c").write_text(SOURCE)
        subprocess.run(["cc", "-std=c11", "-O3", *flags, str(work / "roofline.c"), "-o", str(exe), "-pthread"],
                       check=True)
    out = subprocess.run([str(exe), str(threads)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--vector-bits", type=int, choices=[256, 512],
                    help="FMA peak in AVX2 (256) or AVX-512 (512) registers (default: the widest this CPU has)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="oi-roofline-"))
    rows = [measure(t, work, args.vector_bits) for t in (1, 2)]
    for r in rows:
        print(f"{r['threads']} thread(s): copy {r['copy_gbs']:.1f} GB/s, triad {r['triad_gbs']:.1f} GB/s, "
              f"read {r['read_gbs']:.1f} GB/s, "
              f"f32 FMA peak {r['fma_gflops']:.0f} GFLOP/s")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
