"""Pre-packed weights (openinfer/synth/prepack.py): on the AVX targets a model constant that is the
B of a GEMM-path matmul is packed once at create time, a prefix table entry by entry; the results
equal NumPy, under ASan/UBSan too, across reset() and for every table index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from sanitized import SANITIZE, run_sanitized

import openinfer as oi
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices

#: a loop over a prefix table of weights (K = 300 > one K slice of 128, N = 1100 > the 1024-column
#: N block, so the packed layout has a partial slice and a partial, padded block), a plain weight
#: stored transposed ([out, in], read with transpose_b: packed from that layout into the same panels),
#: a weight read as a GEMV (one row: not packed) and a dynamic B (not a constant: not packed)
GRAPH = """
dynamic { x: f32[9, 300]; row: f32[1, 300]; bd: f32[300, 40]; }
constant {
    w(l): f32[300, 1100] @pattern("layer.{l}.w");
    back: f32[300, 1100];
    v: f32[300, 40];
}
volatile { h: f32[9, 1100]; y: f32[9, 300]; g: f32[1, 40]; d: f32[9, 40]; }
block entry {
    loop layers (l in 0..L) {
        op matmul(x, w[l]) >> h;
        op matmul(h, back, transpose_b=true) >> y;
        op add(x, y) >> x;
    }
    op matmul(row, v) >> g;
    op matmul(x, bd) >> d;
    return;
}
"""
LAYERS = 3


def _weights(rng) -> dict[str, np.ndarray]:
    out = {f"layer.{l}.w": (rng.standard_normal((300, 1100)) / 30).astype(np.float32) for l in range(LAYERS)}
    out["back"] = (rng.standard_normal((300, 1100)) / 40).astype(np.float32)
    out["v"] = rng.standard_normal((300, 40)).astype(np.float32)
    return out


def _write(d: Path) -> tuple[Path, Path, dict[str, np.ndarray]]:
    (d / "g.oig").write_text(GRAPH)
    weights = _weights(np.random.default_rng(0))
    oi.write_oinf(d / "m.oinf", tensors=weights, sizevars={"L": LAYERS})
    return d / "g.oig", d / "m.oinf", weights


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("prepack"))


def _numpy(weights, x, row, bd):
    x = x.astype(np.float64)
    for layer in range(LAYERS):
        x = x + (x @ weights[f"layer.{layer}.w"]) @ weights["back"].T
    return {"x": x, "g": row.astype(np.float64) @ weights["v"], "d": x @ bd}


def _packed(prog) -> dict[str, object]:
    return {b.packed_from[0]: b for b in prog.buffers.values() if b.storage == "packed"}


def test_the_pass_packs_only_gemm_constants(model):
    graph, path, _ = model
    plan = Synthesizer.from_arch("x86_64-avx512").synthesize(str(path), str(graph))
    packed = _packed(plan.program)
    assert set(packed) == {"w", "back"}                # not v (a GEMV), not bd (dynamic)
    w = packed["w"]
    assert w.shape == (LAYERS, 300 * 1120)             # per entry K x N padded to the 32-column panels
    assert packed["back"].shape == (1100 * 320,)         # K = 1100 rows of N = 300 padded to 320
    for b in packed.values():
        assert plan.memory.placements[b.name].region == "persistent"
        kernel = plan.program.kernels[b.packed_from[1]]
        assert kernel.op == "matmul" and kernel.packed == (1,)
    source = plan.files[f"{plan.name}.c"].decode()
    assert source.count("_pack1(m->p_w[") == LAYERS and source.count("_pack1(m->w") == 1
    assert not any(k.packed for k in plan.program.kernels if k.inputs[0].shape[0] == 1)


@pytest.mark.parametrize("arch", ["x86_64-generic", "nvidia-h200"])
def test_targets_without_a_packed_layout_are_unchanged(model, arch):
    graph, path, _ = model
    plan = Synthesizer.from_arch(arch).synthesize(str(path), str(graph))
    assert not _packed(plan.program) and not any(k.packed for k in plan.program.kernels)


def test_the_descriptor_can_turn_packing_off(model, tmp_path):
    graph, path, _ = model
    doc = devices.load("x86_64-avx2").doc
    arch = tmp_path / "no-prepack.json"
    arch.write_text(json.dumps({**doc, "preferences": {**doc["preferences"], "prepack_weights": False}}))
    plan = Synthesizer.from_arch(str(arch)).synthesize(str(path), str(graph))
    assert not _packed(plan.program)
    assert "_pack1" not in plan.files[f"{plan.name}_kernels.c"].decode()


def _check(model, arch: str, options) -> None:
    graph, path, weights = model
    sim = oi.Simulator(str(path), str(graph), arch=arch, build_options=options)
    ex = sim.make_executor()
    rng = np.random.default_rng(1)
    for step in range(2):
        feeds = {"x": rng.standard_normal((9, 300)).astype(np.float32),
                 "row": rng.standard_normal((1, 300)).astype(np.float32),
                 "bd": rng.standard_normal((300, 40)).astype(np.float32)}
        ex.insert(**feeds)
        ex.run_step()
        want = _numpy(weights, feeds["x"], feeds["row"], feeds["bd"])
        for name, value in want.items():
            got = ex.fetch(name)
            err = np.abs(got - value).max() / np.abs(value).max()
            assert err < 1e-5, (arch, step, name, err)
        ex.reset()                                     # reset() re-initialises state, not the packed weights


@pytest.mark.parametrize("arch", ["x86_64-avx512", "x86_64-avx2"])
def test_packed_matmuls_equal_numpy(model, arch, monkeypatch):
    monkeypatch.setenv("OI_NUM_THREADS", "2")
    _check(model, arch, None)


def _sanitized_child(directory: str, arch: str) -> int:
    """Runs in the child interpreter (libasan preloaded)."""
    os.environ["OI_CACHE_DIR"] = str(Path(directory) / "cache")
    _check(_write(Path(directory)), arch, SANITIZE)
    print("sanitized prepack: ok", flush=True)
    return 0


@pytest.mark.parametrize("arch", ["x86_64-avx512", "x86_64-avx2"])
def test_packing_is_clean_under_asan_and_ubsan(tmp_path, arch):
    assert "sanitized prepack: ok" in run_sanitized(__file__, "_sanitized_child", str(tmp_path), arch)
