"""`step()` never touches the heap, at any thread count.

A C driver links the generated program (examples/streaming_pipeline.oig: two consumer blocks,
which run on the HAL thread pool from 2 threads on) with `-Wl,--wrap` around malloc, calloc,
realloc, posix_memalign and aligned_alloc, so every allocation the generated code or the HAL
makes goes through a counter; it counts the calls made during 50 steps, after a first step, and
checks the outputs against NumPy so the steps did run. The pool used to malloc one task node per
consumer per yield (2 a step).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import EXAMPLES

import openinfer as oi
from openinfer import Synthesizer

DRIVER = r"""
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "sp.h"

static atomic_int counting, allocations;
void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
int __real_posix_memalign(void **, size_t, size_t);
void *__real_aligned_alloc(size_t, size_t);
static void count(void) { if (atomic_load(&counting)) atomic_fetch_add(&allocations, 1); }
void *__wrap_malloc(size_t n) { count(); return __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { count(); return __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { count(); return __real_realloc(p, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { count(); return __real_posix_memalign(p, a, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { count(); return __real_aligned_alloc(a, n); }

int main(int argc, char **argv) {
    oi_sp *m = NULL;
    float x[4 * 16], h[4 * 16], h2[4 * 16];
    if (argc != 2 || oi_sp_create(argv[1], &m) != OI_OK) return 2;
    for (int step = 0; step < 51; ++step) {
        for (int i = 0; i < 64; ++i) x[i] = (float)((i * 7 + step) % 13) - 6.0f;
        if (oi_sp_set(m, OI_SP_VAR_x, x, sizeof x) != OI_OK) return 3;
        if (step == 1) atomic_store(&counting, 1);        /* the first step may warm up */
        if (oi_sp_step(m) != OI_OK) { fprintf(stderr, "%s\n", oi_sp_error(m)); return 4; }
    }
    atomic_store(&counting, 0);
    if (oi_sp_get(m, OI_SP_VAR_x, x, sizeof x) != OI_OK || oi_sp_get(m, OI_SP_VAR_h, h, sizeof h) != OI_OK ||
        oi_sp_get(m, OI_SP_VAR_h2, h2, sizeof h2) != OI_OK)
        return 5;
    printf("%d\n", atomic_load(&allocations));
    for (int i = 0; i < 64; ++i) printf("%.9g %.9g %.9g\n", (double)x[i], (double)h[i], (double)h2[i]);
    oi_sp_destroy(m);
    return 0;
}
"""
WRAPPED = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc")


@pytest.fixture(scope="module")
def driver(tmp_path_factory, example_models):
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    model = oi.ModelLoader.open(example_models / "streaming_pipeline.oinf")
    graph = oi.load_graph(EXAMPLES / "streaming_pipeline.oig")
    out = tmp_path_factory.mktemp("no_heap")
    Synthesizer.from_arch("x86_64-generic").synthesize(model, graph, name="sp").emit(out)
    (out / "main.c").write_text(DRIVER)
    exe = out / "driver"
    wrap = "-Wl," + ",".join(f"--wrap={f}" for f in WRAPPED)
    subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(out), "-I",
                    str(out / "hal" / "include"), str(out / "main.c"), str(out / "sp.c"), str(out / "sp_kernels.c"),
                    str(out / "hal" / "src" / "oi_hal.c"), wrap, "-lm", "-pthread", "-o", str(exe)], check=True)
    return exe, model


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_step_makes_no_heap_allocation(driver, threads):
    exe, model = driver
    run = subprocess.run([str(exe), str(model.path)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OI_NUM_THREADS=str(threads)))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    assert int(lines[0]) == 0, f"{lines[0]} heap allocations in 50 steps at {threads} threads"
    got = np.array([line.split() for line in lines[1:65]], np.float64).T
    # the last step's input, and what the graph computes from it (the comments of the .oig)
    x_in = np.array([(i * 7 + 50) % 13 - 6.0 for i in range(64)], np.float32).reshape(4, 16)
    w, bias = model.tensor("w").astype(np.float32), model.tensor("bias").astype(np.float32)
    h = np.clip(x_in @ w, 0, 6)
    np.testing.assert_allclose(got[0].reshape(4, 16), x_in + bias, rtol=1e-6)
    np.testing.assert_allclose(got[1].reshape(4, 16), h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2].reshape(4, 16), np.clip(x_in, 0, 6), rtol=1e-6)


POOL_STRESS = r"""
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "oi_hal.h"

static oi_pool *pool;
static atomic_llong sum;
static atomic_int done;

static void add_range(void *ctx, int64_t begin, int64_t end) {
    (void)ctx;
    for (int64_t i = begin; i < end; ++i) atomic_fetch_add(&sum, i);
}

/* A consumer-like task running a kernel: its parallel_for finds the slot busy while the caller's
 * runs, so it queues helper tasks too. */
static void task(void *arg) {
    (void)arg;
    oi_pool_parallel_for(pool, 1000, 7, add_range, NULL);
    atomic_fetch_add(&done, 1);
}

int main(int argc, char **argv) {
    int threads = atoi(argv[1]), tasks = atoi(argv[2]);
    if (argc != 3 || oi_pool_create(threads, &pool) != OI_OK) return 2;
    for (int round = 0; round < 20; ++round) {
        for (int k = 0; k < tasks; ++k)
            if (oi_pool_submit(pool, task, NULL) != OI_OK) return 3;
        oi_pool_parallel_for(pool, 1000, 7, add_range, NULL);
        oi_pool_wait(pool);
    }
    oi_pool_destroy(pool);
    long long want = 20LL * (tasks + 1) * (999LL * 1000 / 2);
    printf("%d %lld %lld\n", atomic_load(&done), atomic_load(&sum), want);
    return atomic_load(&done) == 20 * tasks && atomic_load(&sum) == want ? 0 : 1;
}
"""


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_pool_runs_every_task_when_its_slots_run_out(tmp_path, threads):
    """More tasks at once than the pool has slots (16 a thread), each running a parallel_for: every
    task and every index runs exactly once (the excess runs in the submitting thread), clean under
    ASan/UBSan."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    from openinfer.resources import hal_dir

    (tmp_path / "pool.c").write_text(POOL_STRESS)
    exe = tmp_path / "pool"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", str(hal_dir() / "include"), str(tmp_path / "pool.c"),
                    str(hal_dir() / "src" / "oi_hal.c"), "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(threads), str(40 * threads)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
