"""`step()` never touches the heap, at any thread count.

A C driver links the generated program (examples/streaming_pipeline.oig: two consumer blocks,
which run on the HAL thread pool from 2 threads on) with `-Wl,--wrap` around malloc, calloc,
realloc, posix_memalign and aligned_alloc, so every allocation the generated code or the HAL
makes goes through a counter; it counts the calls made during 50 steps, after a first step, and
checks the outputs against NumPy so the steps did run. The pool used to malloc one task node per
consumer per yield (2 a step).

The kernels that need room beyond their operands (the GEMM's panel of a B that is not
pre-packed, the tiled conv's padded input, the tiled sdpa's K^T and scores) take it from the
per-thread workspace of oi_kctx, allocated at create(); they used to malloc it on every call.
A second driver runs those three on this machine's widest target.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

import openinfer as oi
from openinfer import Synthesizer
from openinfer.resources import hal_sources

#: The drivers link with -Wl,--wrap for each allocator: while `counting` is set, every call
#: adds to `allocations` (step() must make none).
MALLOC_COUNTER = r"""
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

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
"""

DRIVER = MALLOC_COUNTER + r"""
#include "sp.h"

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


def build_driver(out: Path, name: str, source: str, cflags) -> Path:
    """Compile `source` with the program `name` emitted in `out` and the HAL, every allocator
    wrapped (MALLOC_COUNTER)."""
    (out / "main.c").write_text(source)
    exe = out / "driver"
    wrap = "-Wl," + ",".join(f"--wrap={f}" for f in WRAPPED)
    subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", *cflags, "-I", str(out),
                    "-I", str(out / "hal" / "include"), str(out / "main.c"), str(out / f"{name}.c"),
                    str(out / f"{name}_kernels.c"), *hal_sources(root=out), wrap, "-lm", "-pthread",
                    "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="module")
def driver(tmp_path_factory, example_models):
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    model = oi.ModelLoader.open(example_models / "streaming_pipeline.oinf")
    graph = oi.load_graph(EXAMPLES / "streaming_pipeline.oig")
    out = tmp_path_factory.mktemp("no_heap")
    Synthesizer.from_arch("x86_64-generic").synthesize(model, graph, name="sp").emit(out)
    return build_driver(out, "sp", DRIVER, ()), model


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
    from openinfer.resources import hal_dir, hal_sources

    (tmp_path / "pool.c").write_text(POOL_STRESS)
    exe = tmp_path / "pool"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", str(hal_dir() / "include"), str(tmp_path / "pool.c"),
                    *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(threads), str(40 * threads)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


WORKSPACE_GRAPH = """
dynamic { a: f32[64, 96]; b: f32[96, 80]; x: f32[1, 3, 12, 12]; q: f32[2, 40, 16]; k: f32[2, 40, 16];
          v: f32[2, 40, 16]; }
constant { w: f32[8, 3, 3, 3]; }
volatile { c: f32[64, 80]; y: f32[1, 8, 12, 12]; o: f32[2, 40, 16]; }
block entry {
    op matmul(a, b) >> c;              // B an input: packed per K slice into the workspace
    op conv2d(x, w, padding=1) >> y;   // the zero-padded copy of x
    op sdpa(q, k, v) >> o;             // K^T and a block's scores
    return;
}
"""

WORKSPACE_DRIVER = MALLOC_COUNTER + r"""
#include "ws.h"

static float a[64 * 96], b[96 * 80], x[3 * 144], q[2 * 40 * 16], k[2 * 40 * 16], v[2 * 40 * 16];
static float c[64 * 80], y[8 * 144], o[2 * 40 * 16];

static void fill(float *p, int n, int seed) {
    for (int i = 0; i < n; ++i) p[i] = (float)((i * 37 + seed * 11) % 23 - 11) / 16.0f;
}

int main(int argc, char **argv) {
    oi_ws *m = NULL;
    if (argc != 2 || oi_ws_create(argv[1], &m) != OI_OK) return 2;
    fill(a, 64 * 96, 1); fill(b, 96 * 80, 2); fill(x, 3 * 144, 3); fill(q, 1280, 4); fill(k, 1280, 5); fill(v, 1280, 6);
    for (int step = 0; step < 21; ++step) {
        if (oi_ws_set(m, OI_WS_VAR_a, a, sizeof a) || oi_ws_set(m, OI_WS_VAR_b, b, sizeof b) ||
            oi_ws_set(m, OI_WS_VAR_x, x, sizeof x) || oi_ws_set(m, OI_WS_VAR_q, q, sizeof q) ||
            oi_ws_set(m, OI_WS_VAR_k, k, sizeof k) || oi_ws_set(m, OI_WS_VAR_v, v, sizeof v)) return 3;
        if (step == 1) atomic_store(&counting, 1);
        if (oi_ws_step(m) != OI_OK) { fprintf(stderr, "%s\n", oi_ws_error(m)); return 4; }
    }
    atomic_store(&counting, 0);
    if (oi_ws_get(m, OI_WS_VAR_c, c, sizeof c) || oi_ws_get(m, OI_WS_VAR_y, y, sizeof y) ||
        oi_ws_get(m, OI_WS_VAR_o, o, sizeof o)) return 5;
    printf("%d\n", atomic_load(&allocations));
    for (int i = 0; i < 64 * 80; ++i) printf("%a ", (double)c[i]);
    printf("\n");
    for (int i = 0; i < 8 * 144; ++i) printf("%a ", (double)y[i]);
    printf("\n");
    for (int i = 0; i < 1280; ++i) printf("%a ", (double)o[i]);
    printf("\n");
    oi_ws_destroy(m);
    return 0;
}
"""


def _fill(n: int, seed: int) -> np.ndarray:
    i = np.arange(n)
    return (((i * 37 + seed * 11) % 23 - 11) / 16.0).astype(np.float32)


@pytest.fixture(scope="module")
def workspace_driver(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    from openinfer.targets.devices import best_host_target

    out = tmp_path_factory.mktemp("workspace")
    path = out / "ws.oinf"
    rng = np.random.default_rng(3)
    oi.write_oinf(path, tensors={"w": (rng.standard_normal((8, 3, 3, 3)) / 4).astype(np.float32)})
    synth = Synthesizer.from_arch(best_host_target())
    synth.synthesize(path, WORKSPACE_GRAPH, name="ws").emit(out)
    kernels = (out / "ws_kernels.c").read_text()
    # the three kernels of the graph take their workspace from the context, and nothing allocates
    assert kernels.count("oi_kctx_scratch(") == (3 if synth.device.isa != "generic" else 2)
    assert "malloc" not in kernels and "aligned_alloc" not in kernels
    return build_driver(out, "ws", WORKSPACE_DRIVER, synth.device.cflags), path


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_kernels_take_their_workspace_from_the_context(workspace_driver, threads):
    """The GEMM over a B that is not pre-packed, the padded conv and the tiled sdpa at 1, 2 and 4
    threads: no allocation in 20 steps, and each output against NumPy."""
    exe, path = workspace_driver
    run = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OI_NUM_THREADS=str(threads)))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    assert int(lines[0]) == 0, f"{lines[0]} heap allocations in 20 steps at {threads} threads"
    c, y, o = (np.array([float.fromhex(t) for t in line.split()]) for line in lines[1:4])
    a, b = _fill(64 * 96, 1).reshape(64, 96), _fill(96 * 80, 2).reshape(96, 80)
    np.testing.assert_allclose(c.reshape(64, 80), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    x = np.pad(_fill(3 * 144, 3).reshape(3, 12, 12).astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    w = oi.ModelLoader.open(path).tensor("w").astype(np.float64)
    want = np.zeros((8, 12, 12))
    for i in range(3):
        for j in range(3):
            want += np.einsum("oc,chw->ohw", w[:, :, i, j], x[:, i:i + 12, j:j + 12])
    np.testing.assert_allclose(y.reshape(8, 12, 12), want, rtol=1e-5, atol=1e-5)
    q, k, v = (_fill(1280, s).reshape(2, 40, 16).astype(np.float64) for s in (4, 5, 6))
    scores = q @ k.transpose(0, 2, 1) / 4.0
    p = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(o.reshape(2, 40, 16), (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-5)
