"""The fast matmul kernels (openinfer/targets/vulkan/glsl/linalg.py) at shapes that select them: GEMV
(few rows of A; vector and scalar weight loads, f32 / f16 / bf16 weights, batches), the
register-blocked GEMM (each tile configuration, edge tiles, f16 / bf16 operands with acc=f32,
narrow outputs) on the test device and on descriptors with small limits, and the
cooperative-matrix GEMM (generated and compiled everywhere; run where the device has it).
Results are compared with NumPy at the f32 reduction tolerance (tests/conformance/cases.py):
rtol 1e-4 plus 2e-5 x the largest magnitude."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import SimulationError
from openinfer.sim import Simulator

from .conftest import ON_LAVAPIPE, REPO, VK_ARCH

TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def _model():
    from synth.test_c_conformance import empty_model

    return empty_model()


def _bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to bf16 (nearest even), as f32 values."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


#: (a shape, b shape, input dtype, acc, output dtype, the kernel the doc line names)
CASES = [
    ((1, 200), (200, 96), "f32", None, "f32", "loaded at once"),       # vec4 weight loads, every row at once
    ((2, 5000), (5000, 64), "f32", None, "f32", "4-wide loads)"),      # K too long for that: the loop
    ((3, 37), (37, 10), "f32", None, "f32", "GEMV"),                   # scalar loads, odd K
    ((8, 256), (256, 40), "f32", None, "f32", "GEMV"),                 # GEMV_MAX_M rows
    ((2, 4, 1, 32), (4, 32, 64), "f32", None, "f32", "GEMV"),          # batch broadcast
    ((64,), (64, 36), "f32", None, "f32", "GEMV"),                     # 1-D a
    ((5, 64), (64, 40), "f16", "f32", "f32", "GEMV"),                  # uvec4 (8 halves)
    ((2, 48), (48, 36), "bf16", "f32", "f32", "GEMV"),                 # uvec2 (4 halves)
    ((1, 33), (33, 7), "f16", "[f32, f32]", "f16", "GEMV"),            # scalar, f16 output
    ((200, 136), (136, 160), "f32", None, "f32", "GEMM: 128x128"),     # edge tiles
    ((256, 256), (256, 256), "f32", None, "f32", "GEMM: 128x128"),
    ((130, 70), (70, 129), "f32", None, "f32", "GEMM: 128x128"),       # scalar B loads
    ((2, 96, 80), (80, 64), "f32", None, "f32", "GEMM: 64x64"),
    ((40, 64), (64,), "f32", None, "f32", "GEMM: 32x32"),              # 1-D b
    ((3, 20, 16), (16, 44), "f16", "f32", "f32", "GEMM: 32x32"),
    ((96, 80), (80, 64), "bf16", "f32", "f32", "GEMM: 64x64"),
    ((130, 72), (72, 136), "f16", "[f32, f32]", "f16", "GEMM: 128x128"),
    ((20, 16), (16, 24), "f16", None, "f16", "(the per-element loop)"),  # f16 running sums: k order
]
#: as CASES, shapes as stored, with the transposes: every path reading A^T / B^T (the GEMV over a
#: Hugging Face [N, K] weight splits K over a workgroup per column; the GEMM loads B^T's tile
#: element by element; f16 operands take the plain GEMM, not cooperative matrices)
TRANSPOSED = [
    ((1, 200), (96, 200), "f16", "f32", "f32", "GEMV", "transpose_b"),
    ((3, 37), (10, 37), "f32", None, "f32", "GEMV", "transpose_b"),        # the NaN in a[1, 5]
    ((2, 4, 1, 32), (4, 64, 32), "f32", None, "f32", "GEMV", "transpose_b"),        # batch broadcast
    ((64,), (36, 64), "f32", None, "f32", "GEMV", "transpose_b"),                     # 1-D a
    ((37, 3), (37, 10), "f32", None, "f32", "GEMV", "transpose_a"),
    ((136, 200), (136, 160), "f32", None, "f32", "GEMM: 128x128", "transpose_a"),
    ((130, 70), (129, 70), "f32", None, "f32", "GEMM: 128x128", "transpose_b"),
    ((2, 80, 96), (64, 80), "f32", None, "f32", "GEMM: 64x64", "transpose_a, transpose_b"),
    ((3, 20, 16), (44, 16), "f16", "f32", "f32", "GEMM: 32x32", "transpose_b"),
    ((64, 40), (64,), "f32", None, "f32", "GEMM: 32x32", "transpose_a"),                # 1-D b
    ((16, 20), (24, 16), "f16", None, "f16", "(the per-element loop)", "transpose_a, transpose_b"),
    ((16, 20), (24, 16), "f64", None, "f64", "(tiled", "transpose_a, transpose_b"),
]


def _graph_and_data(cases, seed: int = 0):
    rng = np.random.default_rng(seed)
    decl, vol, ops, inputs = [], [], [], {}
    for i, (sa, sb, d, acc, od, _, *transposes) in enumerate(cases):
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        if d == "f16":
            a, b = a.astype(np.float16), b.astype(np.float16)
        elif d == "bf16":
            a, b = _bf16(a), _bf16(b)
        elif d == "f64":
            a, b = a.astype(np.float64), b.astype(np.float64)
        if i == 1:
            a[1, 5] = np.nan                                   # a NaN spreads along its row
        inputs[f"a{i}"], inputs[f"b{i}"] = a, b
        attrs = "".join(f", {t}=true" for t in transposes[0].split(", ")) if transposes else ""
        r = np.matmul(np.swapaxes(a, -1, -2) if "transpose_a" in attrs else a,
                      np.swapaxes(b, -1, -2) if "transpose_b" in attrs else b)
        decl.append(f"a{i}: {d}{list(sa)}; b{i}: {d}{list(sb)};")
        vol.append(f"c{i}: {od}{list(r.shape)};")
        ops.append(f"op matmul(a{i}, b{i}{', acc=' + acc if acc else ''}{attrs}) >> c{i};")
    text = f"dynamic {{ {' '.join(decl)} }} volatile {{ {' '.join(vol)} }} block entry {{ {' '.join(ops)} return; }}"
    return oi.graph(text), inputs


def _docs(sim) -> dict[int, str]:
    """kernel index -> the doc line of its matmul shader."""
    out = {}
    for name, src in sim.plan.files.items():
        if name.endswith("_matmul.comp"):
            k = int(name.rsplit("_k", 1)[1].split("_", 1)[0])
            out[k] = src.decode().splitlines()[1]
    return out


def _check(ex, g, inputs, cases):
    """Against the NumPy reference executor: f32 outputs at the f32 reduction tolerance; f16
    outputs within one f16 rounding of it (the f32 sums may round the other way)."""
    ref = oi.Reference(None, g).make_executor()
    ref.insert(**inputs)
    ref.run_step()
    for i, case in enumerate(cases):
        got = ex.fetch(f"c{i}").astype(np.float64)
        r = ref.fetch(f"c{i}").astype(np.float64)
        big = np.nanmax(np.abs(r))
        tol = dict(rtol=1e-4, atol=2e-5 * big) if case[4] == "f32" else dict(rtol=2e-3, atol=1e-3 * big)
        np.testing.assert_allclose(got, r, equal_nan=True, err_msg=f"case {i}: {case}", **tol)


def _descriptor(tmp_path, name: str, **changes) -> str:
    doc = json.loads(VK_ARCH.read_text())
    for key, value in changes.items():
        section, field = key.split("__")
        doc[section][field] = value
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_fast_matmul_kernels_match_numpy():
    g, inputs = _graph_and_data(CASES)
    sim = Simulator(_model(), g, arch=VK_ARCH)
    _check_kernel_choice(sim, CASES)
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _check(ex, g, inputs, CASES)
    assert sim.validation_messages() == 0


def _check_kernel_choice(sim, cases):
    """Each case's doc line holds what its row names (`GEMV`, `GEMM: 128x128`, `(tiled`), or for
    "(the per-element loop)" no fast matmul kernel; kernel numbering follows the graph's ops (one
    distinct request each)."""
    docs = _docs(sim)
    assert len(docs) == len(cases)
    for i, case in enumerate(cases):
        want = case[5]
        if want.startswith("(the"):
            assert "GEMV" not in docs[i] and "GEMM" not in docs[i], docs[i]
        else:
            assert want in docs[i], (case, docs[i])


def test_transposed_operands_match_numpy():
    g, inputs = _graph_and_data(TRANSPOSED, seed=3)
    sim = Simulator(_model(), g, arch=VK_ARCH)
    _check_kernel_choice(sim, TRANSPOSED)
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _check(ex, g, inputs, TRANSPOSED)
    # _check compares with the reference executor; the reference itself against NumPy's transposes
    for i, (*_, od, _, transposes) in enumerate(TRANSPOSED):
        if od == "f32":
            a = np.swapaxes(inputs[f"a{i}"], -1, -2) if "transpose_a" in transposes else inputs[f"a{i}"]
            b = np.swapaxes(inputs[f"b{i}"], -1, -2) if "transpose_b" in transposes else inputs[f"b{i}"]
            want = np.matmul(a.astype(np.float64), b.astype(np.float64))
            np.testing.assert_allclose(ex.fetch(f"c{i}"), want, rtol=1e-4, atol=2e-5 * np.nanmax(np.abs(want)))
    assert sim.validation_messages() == 0


def test_generated_matmul_kernels_are_deterministic():
    from openinfer.synthesizer import Synthesizer

    g1, _ = _graph_and_data(CASES)
    g2, _ = _graph_and_data(CASES, seed=1)
    s1 = Synthesizer.from_arch(VK_ARCH).synthesize(_model(), g1).files
    s2 = Synthesizer.from_arch(VK_ARCH).synthesize(_model(), g2).files
    shaders = {k: v for k, v in s1.items() if k.endswith(".comp")}
    assert shaders and all(s2[k] == v for k, v in shaders.items())


@pytest.mark.skipif(not ON_LAVAPIPE, reason="descriptor variants of lavapipe")
@pytest.mark.parametrize("limits, expect", [
    ({"limits__max_workgroup_invocations": 64}, "GEMM: 32x32"),          # no 256-invocation tiles
    ({"limits__max_workgroup_invocations": 32, "limits__max_shared_memory_bytes": 4096}, "tiled 4x4"),
])
def test_matmul_on_small_devices(tmp_path, limits, expect):
    cases = [c for c in CASES if c[5].startswith("GEMM") and c[2] == "f32"] + [CASES[0], CASES[5]]
    g, inputs = _graph_and_data(cases)
    sim = Simulator(_model(), g, arch=_descriptor(tmp_path, "small", **limits))
    docs = _docs(sim)
    assert any(expect in d for d in docs.values()), docs
    assert all("GEMV" in docs[i] for i in (len(cases) - 2, len(cases) - 1))
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _check(ex, g, inputs, cases)
    assert sim.validation_messages() == 0


COOP_CASES = [
    ((256, 256), (256, 256), "f16", "f32", "f32", "cooperative-matrix"),
    ((2, 100, 40), (40, 72), "f16", "[f32, f32]", "f16", "cooperative-matrix"),   # edge tiles, f16 out
    ((136, 64), (64, 136), "f16", "f32", "f32", "cooperative-matrix"),
    ((64, 36), (36, 40), "f16", "f32", "f32", "GEMM: 32x32"),                     # K % 8: no fragments
]


def test_cooperative_matrix_gemm(tmp_path):
    """Generated (and compiled by glslc) for a descriptor declaring cooperative matrices; runs
    where the device has them, and elsewhere create() names what the device lacks."""
    has = json.loads(VK_ARCH.read_text())["features"].get("cooperative_matrix", False)
    arch = str(VK_ARCH) if has else _descriptor(tmp_path, "coop", features__cooperative_matrix=True,
                                                features__subgroup_size=32, limits__max_shared_memory_bytes=49152)
    g, inputs = _graph_and_data(COOP_CASES)
    sim = Simulator(_model(), g, arch=arch)
    docs = _docs(sim)
    for i, case in enumerate(COOP_CASES):
        assert case[5] in docs[i], (case, docs[i])
    src = next(v for k, v in sim.plan.files.items() if k.endswith("k0_matmul.comp"))
    assert b"coopMatMulAddNV" in src and b"GL_NV_cooperative_matrix" in src
    if not has:
        with pytest.raises(SimulationError):
            sim.make_executor()
        return
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _check(ex, g, inputs, COOP_CASES)
    assert sim.validation_messages() == 0
