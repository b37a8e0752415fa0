"""Element-wise calls folded into the GEMVs that read them (openinfer/synth/fusion.py
`fold_elementwise`): which calls go on the target that renders such prologues (Vulkan's GEMVs and
dequantizing GEMVs), which must stay, and that the C targets keep every call.
tests/vulkan/test_vulkan_prologues.py runs the same graph against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from quantized import quantized_weight

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synthesizer import Synthesizer

REPO = Path(__file__).resolve().parents[2]
VULKAN = REPO / "devices" / "nvidia-h200.json"

#: f1: SwiGLU's product, in place, into a GEMV that keeps its residual epilogue; f2: into an i8
#: and an i4 dequantizing GEMV; n3: not (s is read again after the GEMV); n4: not (c broadcasts);
#: n5: not (16 rows: the GEMM); n6: not (its output is the GEMV's own output)
GRAPH = """
dynamic { g: f32[1, 64]; u: f32[1, 64]; b: f32[1, 64]; r: f32[1, 32]; c: f32[64]; a16: f32[16, 64]; }
constant {
    w: f32[64, 32]; w8: i8[64, 32]; s8: f32[32] @ref("w8#scale"); w4: i4[64, 32]; s4: f32[32] @ref("w4#scale");
    wsq: f32[64, 64];
}
volatile {
    gs: f32[1, 64]; y1: f32[1, 32]; t: f32[1, 64]; y2: f32[1, 32]; y3: f32[1, 32]; s: f32[1, 64]; y4: f32[1, 32];
    s2: f32[1, 64]; e: f32[1, 64]; y5: f32[1, 32]; a2: f32[16, 64]; y16: f32[16, 32]; p: f32[1, 64];
}
block entry {
    op silu(g) >> gs;
    op mul(gs, u) >> gs;                   // f1
    op matmul(gs, w) >> y1;
    op add(y1, r) >> y1;
    op sub(u, b) >> t;                     // f2
    op dequant_matmul(t, w8, s8) >> y2;
    op dequant_matmul(t, w4, s4) >> y3;
    op silu(b) >> s;                       // n3
    op matmul(s, w) >> y4;
    op add(s, b) >> s2;
    op add(b, c) >> e;                     // n4
    op matmul(e, w) >> y5;
    op mul(a16, a16) >> a2;                // n5
    op matmul(a2, w) >> y16;
    op mul(u, b) >> p;                     // n6
    op matmul(p, wsq) >> p;
    return;
}
"""
OUTPUTS = {"y1", "y2", "y3", "y4", "s2", "y5", "y16", "p"}


def model(path: Path) -> Path:
    rng = np.random.default_rng(8)
    q8 = quantized_weight(rng, "i8", 64, 32)
    q4 = quantized_weight(rng, "i4", 64, 32, scales=(0.05, 0.2))
    oi.write_oinf(path, {"w": (rng.standard_normal((64, 32)) / 4).astype(np.float32), "w8": q8, "w4": q4,
                         "wsq": (rng.standard_normal((64, 64)) / 8).astype(np.float32)})
    return path


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(9)
    shapes = {"g": (1, 64), "u": (1, 64), "b": (1, 64), "r": (1, 32), "c": (64,), "a16": (16, 64)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def calls(prog: P.Program) -> list[P.Call]:
    return [s for s in prog.blocks[prog.entry] if isinstance(s, P.Call)]


def test_elementwise_calls_fold_where_the_target_renders_them(tmp_path):
    prog = Synthesizer.from_arch(VULKAN).synthesize(str(model(tmp_path / "m.oinf")), oi.graph(GRAPH),
                                                    outputs=OUTPUTS).program
    folded = {s.desc: prog.kernels[s.kernel] for s in calls(prog) if prog.kernels[s.kernel].prologue}
    assert sorted(folded) == sorted([
        "op mul(gs,u) >> gs; op matmul(gs,w) >> y1; op add(y1,r) >> y1",
        "op sub(u,b) >> t; op dequant_matmul(t,w8,s8) >> y2", "op sub(u,b) >> t; op dequant_matmul(t,w4,s4) >> y3"])
    kept = [s.desc for s in calls(prog) if ";" not in s.desc and prog.kernels[s.kernel].op in ("silu", "add", "mul")]
    assert kept == ["op silu(g) >> gs", "op silu(b) >> s", "op add(s,b) >> s2", "op add(b,c) >> e",
                    "op mul(a16,a16) >> a2", "op mul(u,b) >> p"]
    y1 = folded["op mul(gs,u) >> gs; op matmul(gs,w) >> y1; op add(y1,r) >> y1"]
    # the kernel reads gs, w, the epilogue's r, then the prologue's u; own inputs are the matmul's
    assert [t.shape for t in y1.inputs] == [(1, 64), (64, 32), (1, 32), (1, 64)] and len(y1.own_inputs) == 2
    assert y1.prologue_inputs == y1.inputs[3:] and [s.op for s in y1.prologue.chain] == ["mul"]
    assert [s.op for s in y1.epilogue.chain] == ["add"]
    y2 = folded["op sub(u,b) >> t; op dequant_matmul(t,w8,s8) >> y2"]
    assert [t.shape for t in y2.inputs] == [(1, 64), (64, 32), (32,), (1, 64)] and len(y2.own_inputs) == 3


def test_c_targets_keep_their_elementwise_calls(tmp_path):
    m = model(tmp_path / "m.oinf")
    for arch in ("x86_64-generic", "x86_64-avx2"):
        prog = Synthesizer.from_arch(arch).synthesize(str(m), oi.graph(GRAPH), outputs=OUTPUTS).program
        assert not any(k.prologue for k in prog.kernels), arch
