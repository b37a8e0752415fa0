"""Row norms folded into the matmuls that read them (openinfer/synth/fusion.py `fold_norms`):
which `rms_norm` calls go, on the target that renders norm prologues (Vulkan's GEMVs), and that
the C targets keep every norm. tests/vulkan/test_vulkan_prologues.py runs the same graph against
the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from example_modules import load_example
from quantized import quantized_weight

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synthesizer import Synthesizer

REPO = Path(__file__).resolve().parents[2]
VULKAN = REPO / "devices" / "nvidia-h200.json"

#: f1: folds into its three projections (a decoder layer's q, k, v); f2: two rows, no gamma; f7:
#: into a dequantizing GEMV that also has an epilogue (a residual); n3: not (h3 is also read by an
#: add); n4: not (y changes between the norm's two readers); n5: not (h5 is observable); n6: not
#: (16 rows: the GEMM, which has no prologue)
GRAPH = """
dynamic { x: f32[1, 64]; x2: f32[2, 64]; y: f32[1, 64]; a16: f32[16, 64]; }
constant {
    g: f32[64]; wq: f32[64, 48]; wk: f32[64, 16]; wv: f32[64, 16]; w2: f32[64, 32];
    w8: i8[64, 64]; s8: f32[64] @ref("w8#scale");
}
volatile {
    h: f32[1, 64]; q: f32[1, 48]; k: f32[1, 16]; v: f32[1, 16]; h2: f32[2, 64]; p2: f32[2, 32];
    h3: f32[1, 64]; p3: f32[1, 32]; t3: f32[1, 64]; h4: f32[1, 64]; p4: f32[1, 32]; p5: f32[1, 32];
    h5: f32[1, 64]; p6: f32[1, 32]; h16: f32[16, 64]; p16: f32[16, 32]; h7: f32[1, 64]; d7: f32[1, 64];
    r7: f32[1, 64];
}
block entry {
    op rms_norm(x, g, eps=1e-5) >> h;      // f1
    op matmul(h, wq) >> q;
    op matmul(h, wk) >> k;
    op matmul(h, wv) >> v;
    op rms_norm(x2, eps=1e-6) >> h2;       // f2
    op matmul(h2, w2) >> p2;
    op rms_norm(x, g) >> h3;               // n3
    op matmul(h3, w2) >> p3;
    op add(h3, x) >> t3;
    op rms_norm(y, g) >> h4;               // n4
    op matmul(h4, w2) >> p4;
    op add(y, y) >> y;
    op matmul(h4, w2) >> p5;
    op rms_norm(x, g) >> h5;               // n5
    op matmul(h5, w2) >> p6;
    op rms_norm(a16, g) >> h16;            // n6
    op matmul(h16, w2) >> p16;
    op rms_norm(y, g) >> h7;               // f7
    op dequant_matmul(h7, w8, s8) >> d7;
    op add(y, d7) >> r7;
    return;
}
"""
OUTPUTS = {"q", "k", "v", "p2", "p3", "t3", "p4", "p5", "y", "h5", "p6", "p16", "r7"}


def model(path: Path) -> Path:
    rng = np.random.default_rng(5)
    shapes = {"g": (64,), "wq": (64, 48), "wk": (64, 16), "wv": (64, 16), "w2": (64, 32)}
    w8 = quantized_weight(rng, "i8", 64, 64)
    oi.write_oinf(path, {**{k: (rng.standard_normal(s) / 4).astype(np.float32) for k, s in shapes.items()}, "w8": w8})
    return path


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(6)
    shapes = {"x": (1, 64), "x2": (2, 64), "y": (1, 64), "a16": (16, 64)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def descs(prog: P.Program) -> list[str]:
    return [s.desc for s in prog.blocks[prog.entry] if isinstance(s, P.Call)]


def test_norms_fold_where_the_target_renders_them(tmp_path):
    plan = Synthesizer.from_arch(VULKAN).synthesize(str(model(tmp_path / "m.oinf")), oi.graph(GRAPH), outputs=OUTPUTS)
    prog = plan.program
    folded = {s.desc: prog.kernels[s.kernel] for s in prog.blocks[prog.entry]
              if isinstance(s, P.Call) and prog.kernels[s.kernel].prologue}
    assert sorted(folded) == sorted([
        "op rms_norm(x,g) >> h; op matmul(h,wq) >> q", "op rms_norm(x,g) >> h; op matmul(h,wk) >> k",
        "op rms_norm(x,g) >> h; op matmul(h,wv) >> v", "op rms_norm(x2) >> h2; op matmul(h2,w2) >> p2",
        "op rms_norm(y,g) >> h7; op dequant_matmul(h7,w8,s8) >> d7; op add(y,d7) >> r7"])
    norms = [d for d in descs(prog) if d.startswith("op rms_norm") and ";" not in d]
    assert norms == ["op rms_norm(x,g) >> h3", "op rms_norm(y,g) >> h4", "op rms_norm(x,g) >> h5",
                     "op rms_norm(a16,g) >> h16"]
    q = folded["op rms_norm(x,g) >> h; op matmul(h,wq) >> q"]
    # the kernel reads x (not h), then w, then the norm's gamma; own inputs are the matmul's
    assert [t.shape for t in q.inputs] == [(1, 64), (64, 48), (64,)] and len(q.own_inputs) == 2
    assert q.prologue.attr("eps") == 1e-5
    d7 = folded["op rms_norm(y,g) >> h7; op dequant_matmul(h7,w8,s8) >> d7; op add(y,d7) >> r7"]
    # own inputs (x, w, scale), the epilogue's (y), then the prologue's (gamma)
    assert [t.shape for t in d7.inputs] == [(1, 64), (64, 64), (64,), (1, 64), (64,)]
    assert len(d7.own_inputs) == 3 and d7.prologue_inputs == d7.inputs[4:] and d7.epilogue is not None
    assert "h" not in {o.var for s in prog.blocks[prog.entry] if isinstance(s, P.Call) for o in s.inputs}


def test_c_targets_keep_their_norms(tmp_path):
    m = model(tmp_path / "m.oinf")
    for arch in ("x86_64-generic", "x86_64-avx2"):
        prog = Synthesizer.from_arch(arch).synthesize(str(m), oi.graph(GRAPH), outputs=OUTPUTS).program
        assert not any(k.prologue for k in prog.kernels), arch
        assert sum(d.startswith("op rms_norm") for d in descs(prog)) == 7, arch


def test_decoder_layers_norms_join_their_projections(tmp_path):
    """A decoder layer: both norms go into the projections after them, the SwiGLU product g * u
    into the down projection (fold_elementwise), and the final norm into the LM head."""
    decoder = load_example("decoder")
    graph, weights = decoder.write(decoder.SIZES["test"], tmp_path)
    prog = Synthesizer.from_arch(VULKAN).synthesize(str(weights), str(graph), outputs={"next"}).program
    calls = []

    def visit(stmts):
        for s in stmts:
            if isinstance(s, P.Loop):
                visit(s.body)
            elif isinstance(s, P.Call):
                calls.append((s.desc, prog.kernels[s.kernel]))
    visit(prog.blocks[prog.entry])
    assert not [d for d, k in calls if k.op == "rms_norm"]
    assert [d.split("; ")[1] for d, k in calls if k.prologue] == [
        "op matmul(h,wq[l]) >> q", "op matmul(h,wk[l]) >> k", "op matmul(h,wv[l]) >> v",
        "op matmul(h,w_gate[l]) >> g", "op matmul(h,w_up[l]) >> u", "op matmul(g,w_down[l]) >> o",
        "op matmul(h,lm_head) >> logits"]
    assert [[s.op for s in k.prologue.chain] for d, k in calls if "w_down" in d] == [["mul"]]
    assert not [d for d, k in calls if k.op == "mul"], "g * u runs inside the down projection"
