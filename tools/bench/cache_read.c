/*
 * cache_read.c: how fast T threads read a buffer of S MiB over and over, each its own contiguous
 * share, with 256-bit loads: the bound of a product whose weights stay cached between steps. The
 * suite's roofline reads a buffer far larger than the last-level cache (a DRAM bound); the MLP
 * row (32 MiB of f32 weights) sits at the edge of a 32 MiB L3 plus the cores' L2s, and at two
 * threads it runs from cache when the host's other tenants leave the L3 alone: then this, not the
 * roofline, is the floor it is judged against (docs/performance.md).
 *
 *     cc -O2 -mavx2 -pthread tools/bench/cache_read.c -o /tmp/cache_read && /tmp/cache_read T S
 *
 * Each thread times 400 passes over its share, the passes of all threads started together (a
 * barrier); prints the best pass of the slowest thread and the bytes it read per second. Host C
 * (Zen 4 VM, 32 MiB L3, 1 MiB L2 a core), two threads: 8 and 16 MiB ~190 GB/s, 24 MiB 129, 32 MiB
 * 99-105, 48 MiB 66, 128 MiB 52; one thread: 16 MiB 77, 32 MiB 48-50.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PASSES 400

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

typedef struct {
    const float *p;      /* this thread's share */
    size_t n;            /* its floats, a multiple of 32 */
    pthread_barrier_t *start;
    double best;         /* seconds of its fastest pass */
    float sink;          /* the sums, so that the loads are not removed */
} share;

static void *read_share(void *arg) {
    share *s = arg;
    /* four independent sums: one add chain would bound the loop by the add's latency */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    s->best = 1e9;
    for (int pass = 0; pass < PASSES; ++pass) {
        pthread_barrier_wait(s->start);
        const double t = now();
        for (size_t i = 0; i < s->n; i += 32) {
            a0 = _mm256_add_ps(a0, _mm256_load_ps(s->p + i));
            a1 = _mm256_add_ps(a1, _mm256_load_ps(s->p + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_load_ps(s->p + i + 16));
            a3 = _mm256_add_ps(a3, _mm256_load_ps(s->p + i + 24));
        }
        const double d = now() - t;
        if (d < s->best) s->best = d;
    }
    float out[8];
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    s->sink = out[0];
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[1]) > 64 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: %s THREADS MIB\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[1]);
    const size_t n = (size_t)atoi(argv[2]) << 18;          /* floats in S MiB */
    const size_t per = n / threads / 32 * 32;
    float *buf = aligned_alloc(64, n * sizeof(float));
    if (!buf) {
        fprintf(stderr, "cannot allocate %s MiB\n", argv[2]);
        return 1;
    }
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_t tid[64];
    share shares[64];
    for (int t = 0; t < threads; ++t) {
        shares[t] = (share){buf + per * t, per, &start, 0, 0};
        pthread_create(&tid[t], NULL, read_share, &shares[t]);
    }
    double slowest = 0, sink = 0;
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        if (shares[t].best > slowest) slowest = shares[t].best;
        sink += shares[t].sink;
    }
    printf("%d thread(s), %s MiB: %.1f GB/s (best pass %.3f ms)\n", threads, argv[2],
           (double)per * threads * sizeof(float) / slowest / 1e9, slowest * 1e3);
    pthread_barrier_destroy(&start);
    free(buf);
    return sink < 0;     /* never: the sums of ones are positive */
}
