"""The generated C ABI from a plain C program, compiled with AddressSanitizer + UBSan: a full
@fixed table, an unset input, a corrupted or truncated model file, caller-provided memory and an
output bound to caller memory (bind) all give status codes (never a crash, leak or out-of-bounds
access)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import openinfer as oi
from openinfer.resources import hal_sources
from openinfer.synthesizer import Synthesizer

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kv.h"

#define CHECK(expr, want) do { oi_status st_ = (expr); if (st_ != (want)) { \
    fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #expr, (int)st_, \
            oi_status_str(st_), (int)(want)); return 1; } } while (0)

static void fill_q(float *q, int step) { for (int i = 0; i < 16; ++i) q[i] = (float)(step * 100 + i); }

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    oi_kv *m = NULL;
    float q[16], hist[4 * 16];
    CHECK(oi_kv_create(argv[1], &m), OI_OK);
    CHECK(oi_kv_step(m), OI_ERR_INPUT_NOT_SET);
    printf("unset: %s\n", oi_kv_error(m));
    for (int step = 0; step < 4; ++step) {
        fill_q(q, step);
        CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
        CHECK(oi_kv_step(m), OI_OK);
    }
    CHECK(oi_kv_get(m, OI_KV_VAR_k_hist, hist, sizeof hist), OI_OK);
    for (int r = 0; r < 4; ++r) if (hist[r * 16 + 1] != (float)(r * 100 + 1)) { fprintf(stderr, "row %d\n", r); return 1; }
    fill_q(q, 4);
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
    CHECK(oi_kv_step(m), OI_ERR_TABLE_FULL);
    printf("full: %s\n", oi_kv_error(m));
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, 3), OI_ERR_INVALID_ARGUMENT);
    CHECK(oi_kv_get(m, OI_KV_VAR_COUNT, hist, sizeof hist), OI_ERR_INVALID_ARGUMENT);
    CHECK(oi_kv_reset(m), OI_OK);
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
    CHECK(oi_kv_step(m), OI_OK);

    /* k_hist in caller memory (bind): an exact-size heap block, so ASan sees any access past it */
    float *bound_hist = malloc(sizeof hist);
    CHECK(oi_kv_bind(m, OI_KV_VAR_q, q, sizeof q), OI_ERR_INVALID_ARGUMENT);   /* the graph writes q */
    CHECK(oi_kv_bind(m, OI_KV_VAR_k_hist, bound_hist, sizeof hist - 4), OI_ERR_INVALID_ARGUMENT);
    CHECK(oi_kv_bind(m, OI_KV_VAR_k_hist, (char *)bound_hist + 2, sizeof hist), OI_ERR_INVALID_ARGUMENT);
    CHECK(oi_kv_bind(m, OI_KV_VAR_k_hist, bound_hist, sizeof hist), OI_OK);
    fill_q(q, 9);
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
    CHECK(oi_kv_step(m), OI_OK);
    if (bound_hist[16 + 3] != 903.0f) { fprintf(stderr, "bound k_hist\n"); return 1; }   /* row 1: step 9's q */
    CHECK(oi_kv_bind(m, OI_KV_VAR_k_hist, NULL, 0), OI_OK);
    free(bound_hist);                        /* a step writing it now would be a use after free */
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
    CHECK(oi_kv_step(m), OI_OK);
    oi_kv_destroy(m);

    /* corrupted and truncated model files are refused */
    CHECK(oi_kv_create(argv[2], &m), OI_ERR_MODEL_FORMAT);
    CHECK(oi_kv_create(argv[3], &m), OI_ERR_MODEL_FORMAT);
    CHECK(oi_kv_create("/nonexistent/model.oinf", &m), OI_ERR_IO);

    /* no heap: caller memory of the macro sizes, the model image in memory */
    static _Alignas(OI_ALIGN) unsigned char context[OI_KV_CONTEXT_BYTES];
    static _Alignas(OI_ALIGN) unsigned char arena[OI_KV_ARENA_BYTES + 1];
    static _Alignas(OI_ALIGN) unsigned char persistent[OI_KV_PERSISTENT_BYTES + 1];
    FILE *f = fopen(argv[1], "rb");
    static unsigned char image[1 << 16];
    size_t n = fread(image, 1, sizeof image, f);
    fclose(f);
    CHECK(oi_kv_create_in(context, arena, persistent, image, n, &m), OI_OK);
    fill_q(q, 7);
    CHECK(oi_kv_set(m, OI_KV_VAR_q, q, sizeof q), OI_OK);
    CHECK(oi_kv_step(m), OI_OK);
    CHECK(oi_kv_get(m, OI_KV_VAR_k_hist, hist, sizeof hist), OI_OK);
    if (hist[5] != 705.0f || hist[16] != 0.0f) { fprintf(stderr, "create_in result\n"); return 1; }
    oi_kv_destroy(m);
    CHECK(oi_kv_create_in(context, arena, persistent, image, 40, &m), OI_ERR_MODEL_FORMAT);
    printf("ok\n");
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_abi_under_asan_and_ubsan(tmp_path, example_models, example):
    model, graph = example("kv_cache_decode")
    plan = Synthesizer.from_arch("x86_64-generic").synthesize(model, graph, name="kv")
    out = tmp_path / "kv"
    plan.emit(out)
    (out / "main.c").write_text(HARNESS)
    good = example_models / "kv_cache_decode.oinf"
    data = bytearray(good.read_bytes())
    corrupt = tmp_path / "corrupt.oinf"
    data[45:53] = (1 << 40).to_bytes(8, "little")        # offset_tensors far past the end
    corrupt.write_bytes(bytes(data))
    truncated = tmp_path / "truncated.oinf"
    truncated.write_bytes(good.read_bytes()[:150])
    exe = tmp_path / "harness"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-I", str(out), "-I",
                    str(out / "hal" / "include"), str(out / "main.c"), str(out / "kv.c"), str(out / "kv_kernels.c"),
                    *hal_sources(root=out), "-lm", "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(good), str(corrupt), str(truncated)], capture_output=True, text=True,
                         env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("ok")
    assert "dynamic variable `q` not set" in run.stdout
    assert "exceeds fixed size 4" in run.stdout and "cache.write q >> K[t]" in run.stdout
    assert "ERROR: AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr


def test_random_corruptions_of_the_model_never_crash_the_c_reader(tmp_path, example_models):
    """Fuzz the HAL's .oinf reader through oi_oinf_open_memory with byte flips and truncations
    (under ASan): it returns OI_OK or OI_ERR_MODEL_FORMAT, and never reads out of bounds."""
    from openinfer.resources import hal_dir, hal_sources

    src = tmp_path / "fuzz.c"
    src.write_text(r"""
#include <stdio.h>
#include <stdlib.h>
#include "oi_hal.h"
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    srand((unsigned)atoi(argv[2]));
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        size_t len = n;
        unsigned char *copy = malloc(n);   /* exact size: ASan catches any read past it */
        for (size_t i = 0; i < n; ++i) copy[i] = buf[i];
        int flips = 1 + rand() % 4;
        for (int k = 0; k < flips; ++k) copy[rand() % n] = (unsigned char)rand();
        if (rand() % 4 == 0) len = (size_t)rand() % n;
        oi_oinf file;
        oi_status st = oi_oinf_open_memory(copy, len, &file);
        if (st == OI_OK) {
            for (uint32_t t = 0; t < file.n_tensors; ++t) {
                oi_oinf_tensor info;
                if (oi_oinf_tensor_at(&file, t, &info) != OI_OK) return 3;
                volatile unsigned char sink = 0;
                for (uint64_t b = 0; b < info.nbytes; ++b) sink ^= ((const unsigned char *)info.data)[b];
                (void)sink;
            }
            oi_oinf_close(&file);
            ok++;
        } else if (st == OI_ERR_MODEL_FORMAT) {
            bad++;
        } else {
            return 4;
        }
        free(copy);
    }
    printf("%d %d\n", ok, bad);
    return 0;
}
""")
    exe = tmp_path / "fuzz"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(hal_dir() / "include"), str(src), *hal_sources(), "-pthread",
                    "-o", str(exe)], check=True)
    for name in ("mlp_regression", "cache_window_slice"):
        run = subprocess.run([str(exe), str(example_models / f"{name}.oinf"), "7"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        ok, bad = map(int, run.stdout.split())
        assert ok + bad == 3000 and bad > 1000


def test_reference_agrees_with_the_harness_numbers(example):
    """The harness above checks rows by value; the reference gives the same rows."""
    model, graph = example("kv_cache_decode")
    ex = oi.Reference(model, graph).make_executor()
    for step in range(4):
        ex.insert(q=np.arange(16, dtype=np.float32) + step * 100)
        ex.run_step()
    assert ex.fetch("k_hist")[:, 1].tolist() == [1.0, 101.0, 201.0, 301.0]


def test_c_reader_resolves_quant_keys_and_rejects_bad_payloads(tmp_path):
    """oi_oinf_require finds `W#scale` / `W#zero_point` inside the quant payload (the values the
    Python reader gives), refuses wrong dtypes, sizes and suffixes, and under ASan never reads
    past a payload whose counts were corrupted (random flips over the quant bytes)."""
    from openinfer import QuantParams, TensorSpec, write_oinf
    from openinfer.resources import hal_dir, hal_sources

    rng = np.random.default_rng(3)
    scales, zps = rng.uniform(0.01, 1, 6).astype(np.float32), np.arange(-3, 3, dtype=np.int32)
    path = tmp_path / "q.oinf"
    write_oinf(path, {"plain": np.ones(4, np.float32),
                      "w": TensorSpec(rng.integers(-8, 8, (5, 6)).astype(np.int8), dtype="i4",
                                      quant=QuantParams.per_channel(1, scales, zps))})
    model = oi.ModelLoader.open(path)
    q_off = model.info("w").quant_offset
    src = tmp_path / "quant.c"
    src.write_text(r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oi_hal.h"
static int lookup(const unsigned char *img, size_t len, const char *key, uint32_t code, uint64_t nbytes) {
    oi_oinf f;
    const void *p = NULL;
    if (oi_oinf_open_memory(img, len, &f) != OI_OK) return -1;
    int st = oi_oinf_require(&f, key, code, nbytes, &p);
    if (st == OI_OK) {
        for (uint64_t i = 0; i < nbytes / 4; ++i) {
            if (code == 10) printf("%.9g ", (double)((const float *)p)[i]);
            else printf("%d ", ((const int32_t *)p)[i]);
        }
        printf("| ");
    }
    oi_oinf_close(&f);
    return st;
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *fp = fopen(argv[1], "rb");
    static unsigned char buf[1 << 14];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    size_t q = (size_t)atoll(argv[2]);
    printf("%d\n", lookup(buf, n, "w#scale", 10, 24));
    printf("%d\n", lookup(buf, n, "w#zero_point", 3, 24));
    printf("%d %d %d %d\n", lookup(buf, n, "w#scale", 3, 24), lookup(buf, n, "w#scale", 10, 20),
           lookup(buf, n, "w#bias", 10, 24), lookup(buf, n, "plain#scale", 10, 4));
    unsigned char *copy = malloc(n);
    memcpy(copy, buf, n);
    uint64_t huge = UINT64_MAX / 2;
    memcpy(copy + q + 24, &huge, 8);                 /* scale_count */
    printf("%d\n", lookup(copy, n, "w#scale", 10, 24));
    srand(5);
    int ok = 0, refused = 0;
    for (int iter = 0; iter < 2000; ++iter) {
        memcpy(copy, buf, n);
        for (int k = 0; k < 3; ++k) copy[q + (size_t)rand() % 96] = (unsigned char)rand();
        int st = lookup(copy, n, rand() % 2 ? "w#scale" : "w#zero_point", rand() % 2 ? 10 : 3, 24);
        if (st == OI_OK) ok++; else refused++;
    }
    free(copy);
    printf("\nfuzz %d %d\n", ok, refused);
    return 0;
}
""")
    exe = tmp_path / "quant"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", str(hal_dir() / "include"), str(src),
                    *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(path), str(q_off)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    got_scales = np.array(lines[0].split("|")[0].split(), np.float32)
    np.testing.assert_array_equal(got_scales, model.tensor("w#scale"))
    np.testing.assert_array_equal(got_scales, scales)
    assert lines[0].split("|")[1].strip() == "0"
    assert [int(v) for v in lines[1].split("|")[0].split()] == zps.tolist()
    mismatch = "5"      # OI_ERR_MODEL_MISMATCH
    assert lines[2].split() == [mismatch] * 4, lines[2]
    assert lines[3].strip() == "-1"                  # open refuses it: scale_count disagrees with quant_nbytes
    ok, refused = map(int, lines[-1].split()[1:])
    assert ok + refused == 2000 and refused > 0
    assert "AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr
