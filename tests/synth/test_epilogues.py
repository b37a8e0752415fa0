"""Matmul epilogues (openinfer/synth/fusion.py): which element-wise calls join the matmul before
them as its epilogue, on the targets that render epilogues (Vulkan, AVX2, AVX-512) and on one
that does not (portable C). tests/vulkan/test_vulkan_epilogues.py runs the same graph against the
reference."""

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

#: e1: a residual added in place (x[i] read, then the sum written: one kernel); e2: bias and GELU
#: (a two-step epilogue); n3: not (the sum replaces the product's own operand x3, which the
#: product reads whole); n4: not (the product p is observable); n5: not on Vulkan (16 rows: the
#: GEMM, which stores tiles), but on AVX (its chain reads no operand aliasing the output); e6: the
#: dequantizing GEMV with a residual; e7: the per-element dequant kernel (N = 7) with a bias; e8: a
#: cast to f16 (the stored dtype is the epilogue's)
GRAPH = """
dynamic { x: f32[1, 64]; r: f32[1, 48]; x3: f32[1, 32]; a16: f32[16, 64]; c16: f32[16, 48]; r6: f32[1, 64]; }
constant {
    w: f32[64, 48]; b: f32[48]; w3: f32[32, 32]; wq: i8[64, 64]; sq: f32[64] @ref("wq#scale");
    w7: i8[64, 7]; s7: f32[7] @ref("w7#scale"); b7: f32[7];
}
volatile {
    o: f32[1, 48]; y: f32[1, 48]; t3: f32[1, 32]; p: f32[1, 48]; q: f32[1, 48]; g16: f32[16, 48];
    d6: f32[1, 64]; d7: f32[1, 7]; p8: f32[1, 48]; h8: f16[1, 48];
}
block entry {
    op matmul(x, w) >> o;
    op add(r, o) >> r;                 // e1
    op matmul(x, w) >> y;
    op add(y, b) >> y;                 // e2
    op gelu(y) >> y;
    op matmul(x3, w3) >> t3;
    op add(x3, t3) >> x3;              // n3
    op matmul(x, w) >> p;
    op add(p, b) >> q;                 // n4
    op matmul(a16, w) >> g16;
    op add(g16, c16) >> g16;           // n5
    op dequant_matmul(x, wq, sq) >> d6;
    op add(r6, d6) >> r6;              // e6
    op dequant_matmul(x, w7, s7) >> d7;
    op add(d7, b7) >> d7;              // e7
    op matmul(x, w) >> p8;
    op cast(p8, to=f16) >> h8;         // e8
    return;
}
"""
OUTPUTS = {"r", "y", "x3", "p", "q", "g16", "r6", "d7", "h8"}


def model(path: Path) -> Path:
    rng = np.random.default_rng(5)
    oi.write_oinf(path, {
        "w": rng.standard_normal((64, 48)).astype(np.float32), "b": rng.standard_normal(48).astype(np.float32),
        "w3": rng.standard_normal((32, 32)).astype(np.float32),
        "wq": quantized_weight(rng, "i8", 64, 64), "w7": quantized_weight(rng, "i8", 64, 7),
        "b7": rng.standard_normal(7).astype(np.float32)})
    return path


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(6)
    shapes = {"x": (1, 64), "r": (1, 48), "x3": (1, 32), "a16": (16, 64), "c16": (16, 48), "r6": (1, 64)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def calls(prog: P.Program) -> dict[str, P.KernelRequest]:
    """Each call's description -> its kernel request."""
    return {s.desc: prog.kernels[s.kernel] for s in prog.blocks[prog.entry] if isinstance(s, P.Call)}


def test_epilogues_where_the_target_renders_them(tmp_path):
    plan = Synthesizer.from_arch(VULKAN).synthesize(str(model(tmp_path / "m.oinf")), oi.graph(GRAPH), outputs=OUTPUTS)
    got = {d: [s.op for s in k.epilogue.chain] for d, k in calls(plan.program).items() if k.epilogue}
    assert got == {
        "op matmul(x,w) >> o; op add(r,o) >> r": ["add"],
        "op matmul(x,w) >> y; op add(y,b) >> y; op gelu(y) >> y": ["add", "gelu"],
        "op dequant_matmul(x,wq,sq) >> d6; op add(r6,d6) >> r6": ["add"],
        "op dequant_matmul(x,w7,s7) >> d7; op add(d7,b7) >> d7": ["add"],
        "op matmul(x,w) >> p8; op cast(p8) >> h8": ["cast"],
    }
    left = sorted(d for d, k in calls(plan.program).items() if k.op == "add")
    assert left == ["op add(g16,c16) >> g16", "op add(p,b) >> q", "op add(x3,t3) >> x3"]
    residual = calls(plan.program)["op matmul(x,w) >> o; op add(r,o) >> r"]
    assert len(residual.own_inputs) == 2 and len(residual.inputs) == 3 and residual.epilogue.chain_args == (
        (("in", 1), ("in", 0)),)          # r + product, the operands in the add's order


def test_epilogues_on_the_c_targets(tmp_path):
    """The AVX targets fuse epilogues of vector ops after f32 matmuls (the GEMM too, its chain
    reading no operand aliasing the output) and dequantizing GEMVs, not a cast; portable C fuses
    none. tests/synth/test_avx_kernels.py and test_dequant_avx.py run such chains against the
    reference."""
    m = model(tmp_path / "m.oinf")
    plan = Synthesizer.from_arch("x86_64-generic").synthesize(str(m), oi.graph(GRAPH), outputs=OUTPUTS)
    assert not any(k.epilogue for k in plan.program.kernels)
    for arch in ("x86_64-avx2", "x86_64-avx512"):
        plan = Synthesizer.from_arch(arch).synthesize(str(m), oi.graph(GRAPH), outputs=OUTPUTS)
        got = {d: [s.op for s in k.epilogue.chain] for d, k in calls(plan.program).items() if k.epilogue}
        assert got == {
            "op matmul(x,w) >> o; op add(r,o) >> r": ["add"],
            "op matmul(x,w) >> y; op add(y,b) >> y; op gelu(y) >> y": ["add", "gelu"],
            "op matmul(a16,w) >> g16; op add(g16,c16) >> g16": ["add"],
            "op dequant_matmul(x,wq,sq) >> d6; op add(r6,d6) >> r6": ["add"],
            "op dequant_matmul(x,w7,s7) >> d7; op add(d7,b7) >> d7": ["add"],
        }, arch


def test_decoder_residuals_and_swiglu_join_their_projections(tmp_path):
    decoder = load_example("decoder")
    graph, weights = decoder.write(decoder.SIZES["test"], tmp_path)
    plan = Synthesizer.from_arch(VULKAN).synthesize(str(weights), str(graph), outputs={"next"})
    fused = []

    def visit(stmts):
        for s in stmts:
            if isinstance(s, P.Loop):
                visit(s.body)
            elif isinstance(s, P.Call) and plan.program.kernels[s.kernel].epilogue:
                fused.append(s.desc)
    visit(plan.program.blocks[plan.program.entry])
    # (the gate and up projections also took the norm before them, and g * u went into the down
    # projection as its prologue, not into the up projection: tests/synth/test_norm_prologues.py;
    # q and k their rope: tests/synth/test_rope_epilogues.py)
    assert fused == ["op rms_norm(x,attn_norm[l]) >> h; op matmul(h,wq[l]) >> q; op rope(q3,posv) >> q3",
                     "op rms_norm(x,attn_norm[l]) >> h; op matmul(h,wk[l]) >> k; op rope(k3,posv) >> k3",
                     "op matmul(attf,wo[l]) >> o; op add(x,o) >> x",
                     "op rms_norm(x,ffn_norm[l]) >> h; op matmul(h,w_gate[l]) >> g; op silu(g) >> g",
                     "op mul(g,u) >> g; op matmul(g,w_down[l]) >> o; op add(x,o) >> x"]


#: fusion's liveness: t is read three times in all, yet each of its values dies (overwritten, or
#: the step ends); in the loop, o's value of the last iteration is read after the loop, so the
#: `add(h, o)` there must not absorb the product, while `add(z, o) >> z` before the loop may (the
#: loop runs at least once and writes o before reading it)
LIVENESS = """
dynamic { a: f32[4, 8]; b: f32[4, 8]; c: f32[4, 8]; h: f32[1, 8]; s: f32[1, 8]; z: f32[1, 8]; }
constant { w: f32[8, 8]; }
volatile { t: f32[4, 8]; u: f32[4, 8]; out1: f32[4, 8]; out2: f32[4, 8]; o: f32[1, 8]; last: f32[1, 8]; }
block entry {
    op add(a, b) >> t;
    op mul(t, c) >> u;
    op add(u, a) >> out1;
    op sub(a, b) >> t;
    op mul(t, t) >> out2;
    op matmul(s, w) >> o;
    op add(z, o) >> z;
    loop steps (i in 0..3) {
        op matmul(h, w) >> o;
        op add(h, o) >> h;
    }
    op mul(o, o) >> last;
    return;
}
"""


def test_values_overwritten_later_are_dead(tmp_path):
    path = tmp_path / "w.oinf"
    oi.write_oinf(path, {"w": np.random.default_rng(7).standard_normal((8, 8)).astype(np.float32) / 4})
    outs = {"out1", "out2", "h", "z", "last"}
    for arch in ("x86_64-generic", VULKAN):
        prog = Synthesizer.from_arch(arch).synthesize(str(path), oi.graph(LIVENESS), outputs=outs).program
        descs = [s.desc for s in prog.blocks[prog.entry] if isinstance(s, P.Call)]
        assert "op add(a,b) >> t; op mul(t,c) >> u; op add(u,a) >> out1" in descs, arch
        assert "op sub(a,b) >> t; op mul(t,t) >> out2" in descs, arch
        loop = next(s for s in prog.blocks[prog.entry] if isinstance(s, P.Loop))
        assert [s.desc for s in loop.body if isinstance(s, P.Call)] == ["op matmul(h,w) >> o", "op add(h,o) >> h"]
        fused_before_loop = "op matmul(s,w) >> o; op add(z,o) >> z"
        assert (fused_before_loop in descs) == (arch == VULKAN), arch
    rng = np.random.default_rng(8)
    feeds = {k: rng.standard_normal(shape).astype(np.float32)
             for k, shape in {"a": (4, 8), "b": (4, 8), "c": (4, 8), "h": (1, 8), "s": (1, 8), "z": (1, 8)}.items()}
    m = oi.ModelLoader.open(path)
    ref = oi.Reference(m, oi.graph(LIVENESS)).make_executor()
    sim = oi.Simulator(m, oi.graph(LIVENESS), arch="x86_64-generic", outputs=outs).make_executor()
    for e in (ref, sim):
        e.insert(**feeds)
        e.run_step()
    for name in sorted(outs):
        np.testing.assert_allclose(sim.fetch(name), ref.fetch(name), rtol=1e-5, atol=1e-6, err_msg=name)
