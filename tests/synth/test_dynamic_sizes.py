"""Dynamic sizevars (issue 18): one generated library serves every size up to a bound.

The symbolic dims themselves (openinfer/dims.py), the binder's rules, and the examples with a
natural dynamic dim (the MLP's batch, the encoder's sequence, the CNN's batch) run at lengths 1, a
prime, the bound and a varying sequence in one executor, each against the reference bound at that
length, on x86_64-generic and this machine's widest target, with the library built once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import dynamic_cases as dc
import numpy as np
import pytest

import openinfer as oi
from openinfer.dims import Dim, DynamicDimError, evaluate, host_expr, smallest_sizes
from openinfer.errors import BindError, ExecutionError
from openinfer.ir.bind import bind
from openinfer.reference.executor import Reference
from openinfer.resources import hal_sources
from openinfer.synthesizer import Synthesizer
from openinfer.targets.devices import best_host_target
from openinfer.testing import skip_unless_runs_here

ENC = dc.ENC
TARGETS = sorted({"x86_64-generic", best_host_target()})


# ---------------------------------------------------------------------------------------- Dim

def test_dim_arithmetic_keeps_the_run_time_expression_beside_the_bound():
    s = Dim.var("S", 512)
    assert int(s * 64) == 32768 and str(s * 64) == "(64 * sz_S)" and repr(s * 64) == "64*S"
    assert s * 64 == 64 * s and hash(s * 64) == hash(64 * s)
    assert s * 64 != 32768 and s != 512          # a dynamic dim is never one static size
    assert s - s == 0 and type(s - s) is int and (2 * s) // 2 == s and (4 * s) % 2 == 0
    conv = (s - 3) // 2 + 1
    assert repr(conv) == "(S - 3) // 2 + 1" and int(conv) == 255
    for n in (1, 2, 3, 4, 5, 17, 512):
        assert evaluate(conv, {"S": n}) == (n - 3) // 2 + 1
        # the C text computes the floor for negative numerators too
        text = host_expr(conv).replace("m->sz_S", str(n))
        c_value = int(eval(text.replace("/", "//")))          # every division in it is exact
        assert c_value == (n - 3) // 2 + 1


def test_decisions_a_dynamic_dim_leaves_open_refuse_instead_of_guessing():
    s = Dim.var("S", 512)
    assert s >= 1 and s > 0 and s <= 512 and bool(s) and max(s, 1) is s
    for decide in (lambda: s < 4, lambda: s > 16, lambda: s % 8 == 0 or bool(s % 8), lambda: s / 2):
        with pytest.raises(DynamicDimError):
            decide()


def test_smallest_sizes_name_the_dim_that_needs_them():
    s = Dim.var("S", 64)
    assert smallest_sizes([s * 2, (s - 3) // 2 + 1], {"S": 64}) == {"S": (3, "(S - 3) // 2 + 1")}
    assert smallest_sizes([s, s * 4], {"S": 64}) == {"S": (1, "")}


# ---------------------------------------------------------------------------------------- binding

MLP = dc.MLP


@pytest.fixture
def mlp_model(tmp_path):
    return dc.write_mlp_model(tmp_path / "mlp.oinf")


def test_model_metadata_gives_the_bound_and_flags_override_it(mlp_model):
    bound = bind(oi.graph(MLP), oi.ModelLoader.open(mlp_model))
    assert bound.dynamic == {"B": 32} and repr(bound.vars["h"].shape[0]) == "B"
    assert bound.vars["h"].shape == (Dim.var("B", 32), 16)
    assert bind(oi.graph(MLP), oi.ModelLoader.open(mlp_model), {"B": 3}).dynamic == {}
    assert bind(oi.graph(MLP), oi.ModelLoader.open(mlp_model), dynamic={"B": 7}).dynamic == {"B": 7}


@pytest.mark.parametrize("text, dynamic, message", [
    (MLP, {"B": 0}, "the bound must be an integer from 1 to 2\\^63 - 1"),
    (MLP, {"B x": 4}, "is not an identifier"),
    ("dynamic { x: f32[B]; }\npersistent { p: f32[B]; }\nblock entry { return; }", {"B": 4},
     "persistent state outlives a step"),
    ("dynamic { x: f32[4]; }\npersistent { K(i): f32[4] @table @fixed(i=4); }\nvolatile { w: f32[B, 4]; }\n"
     "block entry { cache.read K[0..B] >> w; return; }", {"B": 6}, "ends at B \\(at most 6\\), past the fixed size 4"),
    ("dynamic { n: i32; }\npersistent { K(i): f32[4] @table @fixed(i=8); }\nvolatile { w: f32[2*P, 4]; }\n"
     "block entry { cache.read K[0..n] >> w; return; }", {"P": 4}, "sets a size only where the dim is that size"),
    ("dynamic { n: i32; x: f32[P]; }\npersistent { K(i): f32[4] @table @fixed(i=8); }\nvolatile { w: f32[P, 4]; }\n"
     "block entry { cache.read K[0..n] >> w; return; }", {"P": 8}, "the input `x` is shaped by it"),
])
def test_binding_refuses_what_a_dynamic_size_cannot_be(text, dynamic, message):
    with pytest.raises(BindError, match=message):
        bind(oi.graph(text), None, {"D": 8, "H": 16}, dynamic)


def test_fixed_and_dynamic_at_once_is_an_error(mlp_model):
    with pytest.raises(BindError, match="both a fixed value"):
        bind(oi.graph(MLP), oi.ModelLoader.open(mlp_model), {"B": 3}, {"B": 8})


def test_a_model_tensor_may_be_dynamic_in_its_first_dim_only(tmp_path):
    path = tmp_path / "m.oinf"
    oi.write_oinf(path, tensors={"t": np.zeros((4, 8), np.float32)}, sizevars={"S": 8})
    text = "constant { t: f32[4, S]; }\nvolatile { y: f32[4, S]; }\nblock entry { op relu(t, alpha=0.0) >> y; return; }"
    with pytest.raises(BindError, match="only the first dim of a model tensor may be dynamic"):
        bind(oi.graph(text), oi.ModelLoader.open(path), dynamic={"S": 8})


def test_vulkan_shaders_read_the_sizes_from_push_constants(mlp_model):
    """Generation only (tests/vulkan/test_vulkan_dynamic.py runs it): the kernel's extents are
    macros over a push constant, and the host computes the workgroups from the run-time size."""
    files = Synthesizer.from_arch("lavapipe").synthesize(mlp_model, MLP, name="mlp").files
    shaders = [v.decode() for k, v in files.items() if k.endswith(".comp") and k != "shaders/oi_copy.comp"]
    assert shaders and all("#define sz_B pc.oi_sz_B" in s for s in shaders)
    assert any(re.search(r"#define OI_DIM\d+ \(16 \* sz_B\)  // 16\*B \(at most 512\)", s) for s in shaders)
    host = files["mlp.c"].decode()
    assert "split_groups((uint64_t)(" in host and "m->sz_B" in host and "int64_t sz_B;" in host


# ---------------------------------------------------------------------------------------- engines
# (the scenarios live in tests/dynamic_cases.py: tests/vulkan/test_vulkan_dynamic.py runs them too)

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return dc.write_examples(tmp_path_factory.mktemp("dynamic"))


@pytest.mark.parametrize("arch", TARGETS)
def test_mlp_batch_at_every_length_from_one_library(arch, mlp_model):
    skip_unless_runs_here(arch)
    dc.mlp_batch(arch, mlp_model)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("graph", [dc.BATCHED, dc.MATVEC], ids=["batch-of-matrices", "matvec"])
def test_dynamic_rows_of_other_products(arch, graph, mlp_model):
    """[B, 3, D] @ [D, H]: the B items' rows stacked into one product of 3B run-time rows;
    [B, D] @ [D]: a matrix-vector product over run-time rows (its blocks of 4 rows counted at run time)."""
    skip_unless_runs_here(arch)
    dc.other_products(arch, mlp_model, graph)


@pytest.mark.parametrize("arch", TARGETS)
def test_encoder_sequence_at_every_length_from_one_library(arch, built):
    skip_unless_runs_here(arch)
    dc.encoder_sequence(arch, built)


@pytest.mark.parametrize("arch", TARGETS)
def test_cnn_batch_at_every_length_from_one_library(arch, built):
    skip_unless_runs_here(arch)
    dc.cnn_batch(arch, built)


@pytest.mark.parametrize("arch", TARGETS)
def test_streaming_window_of_frames_per_call(arch, built):
    skip_unless_runs_here(arch)
    dc.stream_chunks(arch, built)


@pytest.mark.parametrize("arch", TARGETS)
def test_loops_cache_indices_and_table_windows_take_a_dynamic_size(arch, tmp_path):
    skip_unless_runs_here(arch)
    dc.loops_and_table_windows(arch, tmp_path)


@pytest.mark.parametrize("arch", TARGETS)
def test_a_scalar_slice_bound_sets_a_dynamic_size(arch, tmp_path):
    skip_unless_runs_here(arch)
    dc.read_sets_size(arch, tmp_path)


@pytest.mark.parametrize("arch", TARGETS)
def test_decoder_attends_over_the_rows_in_use(arch, tmp_path):
    skip_unless_runs_here(arch)
    dc.decoder_window(arch, tmp_path)


@pytest.mark.parametrize("arch", TARGETS if os.environ.get("OI_SLOW") == "1" else (best_host_target(),))
@pytest.mark.parametrize("case", dc.CASES, ids=lambda c: c.id)
def test_every_kernel_family_takes_its_extents_at_run_time(arch, case, tmp_path):
    """One small graph per kernel family with the dynamic size where real models put it (rows, a
    middle dim, the last dim, a product's inner dims, an attention's keys, a conv's length). On
    the host's widest target (whose programs take the portable kernel wherever they have no
    vector one); every target with OI_SLOW=1 or as OI_HOST_ISA caps the host."""
    skip_unless_runs_here(arch)
    dc.run_case(case, arch, tmp_path)


def test_reference_at_a_length_equals_plain_numpy(built):
    """The reference bound at S = 5 (model rows beyond 5 unused) against plain NumPy."""
    graph, path = built["encoder"]
    model = oi.ModelLoader.open(path)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    ex.set_sizes(S=5)
    tokens = np.arange(5, dtype=np.int32) * 7 % ENC.vocab
    mask = np.array([True, True, True, True, False])
    ex.insert(tokens=tokens, mask=mask)
    ex.run_step()
    w = {k: np.asarray(model.tensor(k)) for k in model.tensor_names}
    w["pos_emb"] = w["pos_emb"][:5]
    np.testing.assert_allclose(ex.fetch("pooled"), _flagship().numpy_encoder(w, tokens, mask), rtol=1e-4, atol=1e-5)


def _flagship():
    """tests/flagship/test_encoder_cnn.py, whose plain-NumPy encoder takes any sequence length."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "flagship" / "test_encoder_cnn.py"
    spec = importlib.util.spec_from_file_location("flagship_encoder_numpy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch", TARGETS)
def test_sizes_out_of_range_and_stale_inputs_are_errors(arch, mlp_model):
    skip_unless_runs_here(arch)
    dc.errors_and_stale_inputs(arch, mlp_model)
    ref = Reference(mlp_model, MLP).make_executor()
    with pytest.raises(ExecutionError, match="outside 1..32"):
        ref.set_sizes(B=33)


def test_generation_is_deterministic_and_the_header_documents_the_sizes(mlp_model):
    synth = Synthesizer.from_arch("x86_64-generic")
    a = synth.synthesize(mlp_model, MLP, name="mlp").files
    assert a == synth.synthesize(mlp_model, MLP, name="mlp").files
    header = a["mlp.h"].decode()
    assert "OI_MLP_SIZE_B = 0,  /* 1..32: x, h */" in header
    assert "#define OI_MLP_SIZE_B_MAX 32u" in header and "oi_mlp_set_size(" in header
    assert "dynamic f32[B, 8] (at most [32, 8]), input" in header


HARNESS = r"""
#include <stdio.h>
#include "mlp.h"
#define CHECK(expr, want) do { oi_status st_ = (expr); if (st_ != (want)) { \
    fprintf(stderr, "%d: %s returned %d, wanted %d (%s)\n", __LINE__, #expr, (int)st_, (int)(want), \
            m ? oi_mlp_error(m) : ""); return 1; } } while (0)
int main(int argc, char **argv) {
    (void)argc;
    oi_mlp *m = NULL;
    float x[32 * 8], h[32 * 16];
    CHECK(oi_mlp_create(argv[1], &m), OI_OK);
    CHECK(oi_mlp_set_size(m, OI_MLP_SIZE_B, 0), OI_ERR_SIZE_OUT_OF_RANGE);
    printf("%s\n", oi_mlp_error(m));
    CHECK(oi_mlp_set_size(m, OI_MLP_SIZE_B, 33), OI_ERR_SIZE_OUT_OF_RANGE);
    CHECK(oi_mlp_set_size(m, OI_MLP_SIZE_COUNT, 3), OI_ERR_INVALID_ARGUMENT);
    for (uint64_t b = 1; b <= 32; ++b) {
        CHECK(oi_mlp_set_size(m, OI_MLP_SIZE_B, b), OI_OK);
        if (oi_mlp_get_size(m, OI_MLP_SIZE_B) != b) return 3;
        for (uint64_t i = 0; i < b * 8; ++i) x[i] = (float)((int)(i * 7 % 13) - 6) * 0.25f;
        CHECK(oi_mlp_set(m, OI_MLP_VAR_x, x, (b + 1) * 8 * sizeof(float)), OI_ERR_INVALID_ARGUMENT);
        CHECK(oi_mlp_set(m, OI_MLP_VAR_x, x, b * 8 * sizeof(float)), OI_OK);
        CHECK(oi_mlp_step(m), OI_OK);
        uint64_t dims[2];
        CHECK(oi_mlp_shape(m, OI_MLP_VAR_h, dims, 2), OI_OK);
        if (dims[0] != b || dims[1] != 16) return 4;
        CHECK(oi_mlp_get(m, OI_MLP_VAR_h, h, b * 16 * sizeof(float)), OI_OK);
        for (uint64_t i = 0; i < b * 16; ++i) printf("%a ", (double)h[i]);
        printf("\n");
    }
    oi_mlp_destroy(m);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_every_size_under_asan_and_ubsan(tmp_path, mlp_model):
    """set_size at 1..bound from a C program under ASan + UBSan: exact byte counts, shapes and
    values (against the reference at each size); out-of-range sizes are status codes."""
    plan = Synthesizer.from_arch("x86_64-generic").synthesize(mlp_model, MLP, name="mlp")
    out = tmp_path / "mlp"
    plan.emit(out)
    (out / "main.c").write_text(HARNESS)
    exe = tmp_path / "harness"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-I", str(out), "-I",
                    str(out / "hal" / "include"), str(out / "main.c"), str(out / "mlp.c"), str(out / "mlp_kernels.c"),
                    *hal_sources(root=out), "-lm", "-pthread", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(mlp_model)], capture_output=True, text=True,
                         env={"ASAN_OPTIONS": "detect_leaks=1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "set_size: B = 0 is outside 1..32"
    ref = Reference(mlp_model, MLP).make_executor()
    for b, line in enumerate(lines[1:], start=1):
        ref.set_sizes(B=b)
        i = np.arange(b * 8)
        ref.insert(x=(((i * 7 % 13) - 6) * 0.25).astype(np.float32).reshape(b, 8))
        ref.run_step()
        got = np.array([float.fromhex(t) for t in line.split()], np.float32).reshape(b, 16)
        np.testing.assert_allclose(got, ref.fetch("h"), rtol=1e-6, atol=1e-6)
    assert len(lines) == 33


ENCODER_HARNESS = r"""
#include <stdio.h>
#include "enc.h"
int main(int argc, char **argv) {
    (void)argc;
    oi_enc *m = NULL;
    int32_t tokens[OI_ENC_SIZE_S_MAX];
    uint8_t mask[OI_ENC_SIZE_S_MAX];
    float x[OI_ENC_SIZE_S_MAX * 32], pooled[32];
    if (oi_enc_create(argv[1], &m) != OI_OK) return 2;
    for (uint64_t s = OI_ENC_SIZE_S_MIN; s <= OI_ENC_SIZE_S_MAX; ++s) {
        for (uint64_t i = 0; i < s; ++i) { tokens[i] = (int32_t)((i * 7 + s) % 100); mask[i] = i + 1 < s || s == 1; }
        if (oi_enc_set_size(m, OI_ENC_SIZE_S, s) != OI_OK ||
            oi_enc_set(m, OI_ENC_VAR_tokens, tokens, s * sizeof *tokens) != OI_OK ||
            oi_enc_set(m, OI_ENC_VAR_mask, mask, s) != OI_OK || oi_enc_step(m) != OI_OK ||
            oi_enc_get(m, OI_ENC_VAR_x, x, s * 32 * sizeof(float)) != OI_OK ||
            oi_enc_get(m, OI_ENC_VAR_pooled, pooled, 32 * sizeof(float)) != OI_OK) {
            fprintf(stderr, "S=%llu: %s\n", (unsigned long long)s, oi_enc_error(m));
            return 1;
        }
        for (int i = 0; i < 32; ++i) printf("%a ", (double)pooled[i]);
        printf("\n");
    }
    oi_enc_destroy(m);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("arch", TARGETS)
def test_encoder_at_every_length_under_asan_and_ubsan(arch, tmp_path, built):
    """The encoder (run-time GEMM edges, the tiled sdpa's run-time tails, the row kernels) at S =
    1..bound from a C program under ASan + UBSan, with the target's ISA flags; each length's
    pooled output against the reference."""
    skip_unless_runs_here(arch)
    graph, path = built["encoder"]
    synth = Synthesizer.from_arch(arch)
    plan = synth.synthesize(path, graph, name="enc")
    out = tmp_path / "enc"
    plan.emit(out)
    (out / "main.c").write_text(ENCODER_HARNESS)
    exe = tmp_path / "harness"
    subprocess.run(["cc", "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *synth.device.cflags,
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
                    "-I", str(out), "-I", str(out / "hal" / "include"), str(out / "main.c"), str(out / "enc.c"),
                    str(out / "enc_kernels.c"), *hal_sources(root=out), "-lm", "-pthread",
                    "-o", str(exe)], check=True)
    run = subprocess.run([str(exe), str(path)], capture_output=True, text=True,
                         env={"ASAN_OPTIONS": "detect_leaks=1", "PATH": "/usr/bin:/bin", "OI_NUM_THREADS": "2"})
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == ENC.seq
    ref = Reference(path, graph).make_executor()
    for s, line in enumerate(lines, start=1):
        ref.set_sizes(S=s)
        i = np.arange(s)
        ref.insert(tokens=((i * 7 + s) % 100).astype(np.int32), mask=(i + 1 < s) | (s == 1))
        ref.run_step()
        got = np.array([float.fromhex(t) for t in line.split()], np.float32)
        np.testing.assert_allclose(got, ref.fetch("pooled")[0], rtol=1e-4, atol=1e-5, err_msg=f"S={s}")


def test_cli_sim_runs_at_a_chosen_size(tmp_path, mlp_model, capsys):
    from openinfer.cli import main

    graph = tmp_path / "mlp.oig"
    graph.write_text(MLP)
    assert main(["sim", str(graph), "-m", str(mlp_model), "--arch", "x86_64-generic", "--size", "B=5"]) == 0
    text = capsys.readouterr().out
    assert "h       f32    [5, 16]" in text and "match the reference" in text
    assert main(["run", str(graph), "-m", str(mlp_model), "--size", "B=40"]) != 0
    assert "B = 40 is outside 1..32" in capsys.readouterr().err
