"""The NEON wing's kernels (openinfer/targets/arm/) against the reference, cross-built and run under
qemu-aarch64 (openinfer/emulate.py; natively on an AArch64 machine): element-wise ops and fused
chains with the vector exp / tanh / erf, the f32 GEMM (every microkernel edge: rows and columns one
short of, at and one past the 8 x 12 tile and its vectors; K across a K slice) and the GEMVs, with
their epilogues, also over transposed operands (A^T / B^T packed as stored, x @ W^T as the matvec,
A^T times a column as the vecmat), the GEMVs over f16 / bf16 operands with an f32 accumulator on
Armv8.0-A and Armv8.2-A (ties, infinities and NaN rounded as the reference), and the dequantizing
GEMV of i8 / u8 / i4 / u4 weights on Armv8.0-A and, with SDOT, on Armv8.2-A (also run as a
Cortex-A53, which lacks the dot product: create() refuses the v8.2 program); softmax, layer_norm,
rms_norm and the axis reductions over rows of every length around the vector; convolutions (tile,
channel-block and vector edges, padding, strides, dilation, groups, conv1d, epilogues), pooling and
lrn. Every build is -Wall -Wextra -Werror (the Simulator's, at -O3; the rows, conv and pool kernels
also compile at -O2); one graph per test keeps the builds few.

    OI_SLOW=1   also the Armv8.2-A descriptor for every kernel (default: the v8.2-only ones),
                and more convolutions (5 x 5, stride 4, four-sided padding, groups)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from compilers import compile_kernels_at  # noqa: E402
from conv_shapes import conv2d_terms, conv_out  # noqa: E402
from test_avx_kernels import BINARY, UNARY, decls, run, special  # noqa: E402
from test_dequant_avx import WTYPES, _dot  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.compare import compare, table  # noqa: E402
from openinfer.dtypes import lookup  # noqa: E402
from openinfer.errors import SimulationError  # noqa: E402
from openinfer.oinf.values import TensorSpec  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.synth.program import Call  # noqa: E402
from openinfer.targets import devices  # noqa: E402
from openinfer.targets.arm import NeonRenderer, V82Renderer  # noqa: E402
from openinfer.targets.base import target_for  # noqa: E402

SLOW = os.environ.get("OI_SLOW") == "1"
DEVICES = ("aarch64-neon", "aarch64-v82") if SLOW else ("aarch64-neon",)


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("neon-cache")))
        yield


def test_renderer_follows_the_device_isa():
    assert target_for(devices.load("aarch64-neon")).renderer_class is NeonRenderer
    assert target_for(devices.load("aarch64-v82")).renderer_class is V82Renderer
    assert target_for(devices.load("aarch64-generic")).renderer_class.__name__ == "CRenderer"


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.parametrize("device", DEVICES)
def test_elementwise(tmp_path, device):
    rng = np.random.default_rng(1)
    # 7 x 37: partial vectors on every row; 5: one whole vector and one lane; 3: shorter than a vector
    shapes = {"x": (7, 37), "z": (7, 37), "brow": (37,), "bcol": (7, 1), "bs": (1,), "u": (5,), "w": (3,),
              "big": (67, 1031)}
    inputs = {k: rng.uniform(-4, 4, s).astype(np.float32) for k, s in shapes.items()}
    special(inputs["x"])
    inputs["z"][0, :6] = [0.0, -0.0, np.nan, 2.0, -0.0, 0.0]
    inputs["x"][1] = rng.uniform(-90, 90, 37)           # exp overflow / underflow, saturated tanh
    inputs["x"][2] = rng.uniform(-1e-3, 1e-3, 37)        # small |x|: polynomial branches
    ops = UNARY + BINARY
    outs = {f"y{i}": (7, 37) for i in range(len(ops))}
    body = "".join(f"  op {o} >> y{i};\n" for i, o in enumerate(ops))
    body += "  op exp(u) >> u;\n  op mul(w, w) >> w;\n  op add(brow, z) >> z;\n  op silu(big) >> big;\n"
    outs["h"] = outs["t"] = outs["f"] = (7, 37)
    body += ("  op add(x, brow) >> h;\n  op relu(h, alpha=0.1) >> h;\n  op mul(h, bcol) >> h;\n  op gelu(h) >> h;\n"
             "  op sub(z, x) >> t;\n  op exp(t) >> t;\n  op div(t, brow) >> f;\n")
    text = decls("dynamic", shapes) + decls("volatile", outs) + f"block entry {{\n{body}  return;\n}}\n"
    sim = run(tmp_path, device, text, {}, inputs, [*outs, "u", "w", "z", "big"], threads=("1", "2"))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    fused = [i for i, k in enumerate(sim.program.kernels) if k.op == "fused"]
    assert len(fused) == 2 and all(f"_k{i}_fused_units" in source for i in fused)
    assert "vfmaq_f32" in source and "oiv_exp" in source          # the NEON kernels, not the portable ones


def _out_shape(a, b):
    return np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape


#: (A, B, B constant): GEMM edges around the 8 x 12 tile (rows 7, 8, 9, 17; columns 11, 12, 13, 4,
#: 5, 25), K across the 128-row K slice (127, 129, 257), batches; vecmats of 1-4 rows with columns
#: around the 16-column block and its vectors, K around the 4-row step; matvecs around 4 rows
MATMULS = {
    "g_tile": ((8, 5), (5, 12), False),
    "g_edges": ((9, 127), (127, 13), False),
    "g_short": ((7, 3), (3, 11), True),
    "g_rows17": ((17, 129), (129, 25), True),
    "g_narrow": ((33, 7), (7, 5), False),
    "g_four": ((10, 9), (9, 4), False),
    "g_kslices": ((31, 257), (257, 47), True),
    "g_parallel": ((130, 300), (300, 257), True),
    "g_batch_shared_b": ((3, 5, 17), (17, 40), True),
    "g_batch_both": ((2, 3, 17, 9), (3, 9, 31), False),
    "v_row": ((1, 65), (65, 129), True),
    "v_rows": ((3, 257), (257, 63), True),
    "v_four": ((4, 5), (5, 17), True),
    "v_two": ((2, 3), (3, 15), False),
    "v_1d": ((127,), (127, 3), True),
    "v_1d_batch": ((9,), (2, 9, 33), False),
    "v_wide": ((1, 1024), (1024, 2049), True),
    "mv": ((13, 67), (67, 1), True),
    "mv_short": ((3, 7), (7, 1), False),
    "mv_1d": ((33, 12), (12,), False),
    "mv_big": ((1031, 301), (301,), True),
}


@pytest.mark.parametrize("device", DEVICES)
def test_matmul(tmp_path, device):
    rng = np.random.default_rng(2)
    weights, inputs, dyn, const, outs, body, terms = {}, {}, {}, {}, {}, [], {}
    for name, (sa, sb, constant) in MATMULS.items():
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        terms[name] = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        (weights if constant else inputs)[f"{name}_b"] = b
        (const if constant else dyn)[f"{name}_b"] = sb
        inputs[f"{name}_a"], dyn[f"{name}_a"] = a, sa
        outs[name] = _out_shape(sa, sb)
        body.append(f"  op matmul({name}_a, {name}_b) >> {name};\n")
    inputs["sq"], dyn["sq"] = rng.standard_normal((19, 19)).astype(np.float32), (19, 19)
    terms["sq"] = np.abs(inputs["sq"].astype(np.float64)) @ np.abs(inputs["sq"].astype(np.float64))
    body.append("  op matmul(sq, sq) >> sq;\n")
    text = (decls("dynamic", dyn) + decls("constant", const) + decls("volatile", outs)
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    sim = run(tmp_path, device, text, weights, inputs, [*outs, "sq"], threads=("1", "2"), terms=terms)
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert "vfmaq_laneq_f32" in source and "_uk8x3(" in source


#: matmul epilogues (arm/renderer.py `takes_epilogue`): every chain below joins its matmul except
#: ar @ w's (a GEMM whose chain reads the output's old value). Paths: vecmat (1 and 3 rows of A),
#: matvec, the GEMM with 3 K slices and an edge tile, a batch of A rows sharing B; the chains'
#: inputs full, row (bias), col, scalar, the output itself (a residual in place), with exp / erf.
EPILOGUES = """
dynamic {
    x: f32[1, 65]; r: f32[1, 129]; x3: f32[3, 71]; r3: f32[3, 101]; c3: f32[3, 1]; s1: f32[1];
    v: f32[257]; rv: f32[37]; a: f32[31, 300]; c31: f32[31, 47]; col31: f32[31, 1]; ab: f32[2, 17, 9];
    r17: f32[2, 17, 31]; ar: f32[40, 65]; res: f32[40, 129];
}
constant {
    w: f32[65, 129]; b: f32[129]; w3: f32[71, 101];
    wv: f32[37, 257]; wa: f32[300, 47]; ba: f32[47]; wb: f32[9, 31];
}
volatile {
    y1: f32[1, 129]; y2: f32[1, 129]; t3: f32[3, 101]; o3: f32[3, 101]; mv: f32[37]; g: f32[31, 47];
    g2: f32[31, 47]; gb: f32[2, 17, 31]; gr: f32[40, 129];
}
block entry {
    op matmul(x, w) >> y1;
    op add(r, y1) >> r;
    op matmul(x, w) >> y2;
    op add(y2, b) >> y2;
    op gelu(y2) >> y2;
    op matmul(x3, w3) >> t3;
    op add(r3, t3) >> r3;
    op silu(r3) >> r3;
    op matmul(x3, w3) >> o3;
    op mul(o3, c3) >> o3;
    op add(o3, s1) >> o3;
    op matmul(wv, v) >> mv;
    op add(rv, mv) >> rv;
    op relu(rv) >> rv;
    op matmul(a, wa) >> g;
    op add(g, ba) >> g;
    op gelu(g) >> g;
    op matmul(a, wa) >> g2;
    op add(g2, c31) >> g2;
    op mul(g2, col31) >> g2;
    op matmul(ab, wb) >> gb;
    op add(gb, r17) >> gb;
    op matmul(ar, w) >> gr;
    op add(res, gr) >> res;
    return;
}
"""


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_epilogues(tmp_path, device):
    rng = np.random.default_rng(11)
    graph = oi.graph(EPILOGUES)
    shapes = {name: tuple(int(d) for d in v.dims) for name, v in graph.vars.items()}
    weights = {n: rng.standard_normal(shapes[n]).astype(np.float32) for n in ("w", "b", "w3", "wv", "wa", "ba", "wb")}
    inputs = {n: rng.standard_normal(shapes[n]).astype(np.float32)
              for n in ("x", "r", "x3", "r3", "c3", "s1", "v", "rv", "a", "c31", "col31", "ab", "r17", "ar", "res")}
    special(inputs["r"])                # NaN, infinities, signed zeros through a residual
    special(inputs["c31"])
    outputs = ["r", "y2", "r3", "o3", "rv", "g", "g2", "gb", "res"]
    sim = run(tmp_path, device, EPILOGUES, weights, inputs, outputs, threads=("1", "2"), only_outputs=True)
    fused = sorted(s.desc.split(";")[0] for s in sim.plan.program.blocks["entry"]
                   if isinstance(s, Call) and sim.plan.program.kernels[s.kernel].epilogue)
    assert fused == sorted(f"op matmul({a},{b}) >> {o}" for a, b, o in (
        ("x", "w", "y1"), ("x", "w", "y2"), ("x3", "w3", "t3"), ("x3", "w3", "o3"), ("wv", "v", "mv"),
        ("a", "wa", "g"), ("a", "wa", "g2"), ("ab", "wb", "gb")))


#: name: (a shape, b shape as stored, b constant?, transposes), arm/renderer.py `_gemv` and the
#: GEMM's packs: the GEMM from B^T (the TRN 4 x 4 blocks: column counts around the 12-column panel
#: and its fours, 11 / 12 / 13 and 25, K prime and across the 128-row K slice), from A^T and from
#: both, rows 7 / 8 / 9 / 17 around the 8-row tile, batched; 2 and 3 rows with both transposed
#: (the GEMM); a few rows against B^T's stored rows (the matvec form: 1-4 rows, 1-D and batched
#: x, streamed over the pool); vecmat rows of A^T (2-4 rows, K not a multiple of 4); A^T times a
#: column (the vecmat with the operands swapped); transposes that change nothing in memory.
TRANSPOSED = {
    "tb_tile": ((8, 13), (12, 13), False, "b"),
    "tb_edges": ((9, 127), (13, 127), True, "b"),
    "tb_short": ((7, 5), (11, 5), False, "b"),
    "tb_rows17": ((17, 131), (25, 131), True, "b"),
    "tb_parallel": ((130, 300), (257, 300), True, "b"),
    "tb_batch": ((2, 9, 17), (2, 13, 17), False, "b"),
    "ta_tile": ((13, 8), (13, 12), False, "a"),
    "ta_edges": ((131, 9), (131, 11), True, "a"),
    "ta_short": ((5, 7), (5, 13), False, "a"),
    "ta_batch_shared_b": ((3, 17, 5), (17, 40), True, "a"),
    "tab_gemm": ((11, 9), (13, 11), False, "ab"),
    "tab_kslices": ((257, 17), (25, 257), False, "ab"),
    "tab_batch": ((2, 3, 7, 8), (3, 12, 7), False, "ab"),
    "tab_small": ((9, 3), (20, 9), False, "ab"),
    "tab_two": ((7, 2), (13, 7), True, "ab"),
    "tb_row": ((1, 65), (129, 65), True, "b"),
    "tb_rows2": ((2, 31), (67, 31), False, "b"),
    "tb_rows3": ((3, 257), (63, 257), True, "b"),
    "tb_rows4": ((4, 7), (9, 7), True, "b"),
    "tb_1d": ((127,), (3, 127), True, "b"),
    "tb_1d_batch": ((9,), (2, 33, 9), False, "b"),
    "tb_stream": ((1, 1031), (1031, 1031), True, "b"),
    "ta_vecmat2": ((257, 2), (257, 63), False, "a"),
    "ta_vecmat3": ((13, 3), (13, 17), True, "a"),
    "ta_vecmat4": ((203, 4), (203, 16), True, "a"),
    "ta_col": ((65, 67), (65, 1), True, "a"),
    "ta_vec_batch": ((2, 19, 5), (19,), False, "a"),
    "tab_col": ((65, 67), (1, 65), True, "ab"),
    "tb_col": ((67, 65), (1, 65), True, "b"),
}


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_transposed(tmp_path, device):
    rng = np.random.default_rng(12)
    weights, inputs, dyn, const, outs, body, terms = {}, {}, {}, {}, {}, [], {}
    for name, (sa, sb, constant, transposed) in TRANSPOSED.items():
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        # the operands as multiplied (transposes read the stored arrays with the last two dims swapped)
        am = np.swapaxes(a, -1, -2) if "a" in transposed else a
        bm = np.swapaxes(b, -1, -2) if "b" in transposed else b
        terms[name] = np.matmul(np.abs(am.astype(np.float64)), np.abs(bm.astype(np.float64)))
        (weights if constant else inputs)[f"{name}_b"] = b
        (const if constant else dyn)[f"{name}_b"] = sb
        inputs[f"{name}_a"], dyn[f"{name}_a"] = a, sa
        outs[name] = _out_shape(am.shape, bm.shape)
        attrs = "".join(f", transpose_{x}=true" for x in transposed)
        body.append(f"  op matmul({name}_a, {name}_b{attrs}) >> {name};\n")
    text = (decls("dynamic", dyn) + decls("constant", const) + decls("volatile", outs)
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    sim = run(tmp_path, device, text, weights, inputs, list(outs), threads=("1", "2"), terms=terms)
    source = next(sim.project.glob("*_kernels.c")).read_text()
    # every product is a NEON kernel (the GEMM's work items or a GEMV's units), B^T packed by TRN
    kernels = [i for i, k in enumerate(sim.program.kernels) if k.op == "matmul"]
    assert len(kernels) == len(TRANSPOSED)
    assert all(f"_k{i}_matmul_items(" in source or f"_k{i}_matmul_units" in source for i in kernels)
    assert "vtrnq_f32" in source and "a[k * 8 + 7]" in source       # B^T's and A^T's packs


#: epilogues after transposed products: the GEMM from B^T (bias + relu; and from A^T with a
#: residual read from another variable, then gelu) and from both (bias), x @ W^T for 1 and 3 rows
#: (the matvec form: bias + gelu, a residual in place), vecmat rows of A^T (bias + relu) and A^T
#: times a column (relu). Every chain joins its product.
EPILOGUES_T = """
dynamic {
    x9: f32[9, 33]; at: f32[17, 10]; r10: f32[10, 13]; x1: f32[1, 65]; x3: f32[3, 31]; r3: f32[3, 67];
    a2t: f32[29, 2]; mt: f32[19, 11]; v: f32[19]; abt: f32[12, 7];
}
constant {
    w9: f32[13, 33]; b13: f32[13]; bt: f32[17, 13]; w1: f32[129, 65]; b129: f32[129]; w3: f32[67, 31];
    w2: f32[29, 21]; b21: f32[21]; wab: f32[25, 12]; b25: f32[25];
}
volatile {
    g9: f32[9, 13]; ga: f32[10, 13]; y1: f32[1, 129]; t3: f32[3, 67]; v2: f32[2, 21]; mv: f32[11];
    gab: f32[7, 25];
}
block entry {
    op matmul(x9, w9, transpose_b=true) >> g9;
    op add(g9, b13) >> g9;
    op relu(g9) >> g9;
    op matmul(at, bt, transpose_a=true) >> ga;
    op add(ga, r10) >> ga;
    op gelu(ga) >> ga;
    op matmul(abt, wab, transpose_a=true, transpose_b=true) >> gab;
    op add(gab, b25) >> gab;
    op matmul(x1, w1, transpose_b=true) >> y1;
    op add(y1, b129) >> y1;
    op gelu(y1) >> y1;
    op matmul(x3, w3, transpose_b=true) >> t3;
    op add(r3, t3) >> r3;
    op matmul(a2t, w2, transpose_a=true) >> v2;
    op add(v2, b21) >> v2;
    op relu(v2) >> v2;
    op matmul(mt, v, transpose_a=true) >> mv;
    op relu(mv) >> mv;
    return;
}
"""


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_transposed_epilogues(tmp_path, device):
    rng = np.random.default_rng(13)
    graph = oi.graph(EPILOGUES_T)
    shapes = {name: tuple(int(d) for d in v.dims) for name, v in graph.vars.items()}
    weights = {n: rng.standard_normal(shapes[n]).astype(np.float32)
               for n in ("w9", "b13", "bt", "w1", "b129", "w3", "w2", "b21", "wab", "b25")}
    inputs = {n: rng.standard_normal(shapes[n]).astype(np.float32)
              for n in ("x9", "at", "r10", "x1", "x3", "r3", "a2t", "mt", "v", "abt")}
    special(inputs["r3"])               # NaN, infinities, signed zeros through a residual
    outputs = ["g9", "ga", "gab", "y1", "r3", "v2", "mv"]
    sim = run(tmp_path, device, EPILOGUES_T, weights, inputs, outputs, threads=("1", "2"), only_outputs=True)
    program = sim.plan.program
    fused = [program.kernels[s.kernel] for s in program.blocks["entry"] if isinstance(s, Call)]
    assert len(fused) == 7 and all(k.op == "matmul" and k.epilogue for k in fused)
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert source.count("_epi(const") == 7 and "vtrnq_f32" in source


#: f16 / bf16 GEMVs with an f32 accumulator (acc=[f32]): name -> (A, B, transposed). Vecmats of
#: 1-4 rows with N around the 4-lane vector and the 16-column block (3, 5, 15, 16, 17, 63, 129) and
#: K around the 4-row step (3, 4, 5, 13, 67, 257); matvecs of rows around the 4-row block with K
#: around the 8-value step (7, 8, 9, 67), x @ W^T for 1-4 rows, A^T times a column, a vecmat over
#: rows of A^T, one over the pool. `ties`: sums exactly halfway between two halves, and ones that
#: round to inf (f16's 65520) or are NaN, as the vecmat, the matvec over W^T and the 1-D matvec.
HALF_GEMVS = {
    "v1": ((1, 67), (67, 129), ""),
    "v2": ((2, 3), (3, 15), ""),
    "v3": ((3, 257), (257, 63), ""),
    "v4": ((4, 5), (5, 17), ""),
    "v4_16": ((4, 13), (13, 16), ""),
    "v1_3": ((1, 4), (4, 3), ""),
    "v1d": ((127,), (127, 5), ""),
    "v_pool": ((1, 300), (300, 1031), ""),
    "mv": ((13, 67), (67, 1), ""),
    "mv_7": ((3, 7), (7,), ""),
    "mv_8": ((5, 8), (8,), ""),
    "mv_9": ((4, 9), (9, 1), ""),
    "t1": ((1, 65), (17, 65), "b"),
    "t2": ((2, 7), (9, 7), "b"),
    "t3": ((3, 31), (67, 31), "b"),
    "t4": ((4, 8), (5, 8), "b"),
    "ta_col": ((19, 11), (19,), "a"),
    "ta_rows": ((29, 2), (29, 21), "a"),
    "ties": ((2, 2), (2, 5), ""),
    "ties_t": ((2, 2), (5, 2), "b"),
    "ties_mv": ((5, 2), (2,), ""),
}


def _ties(t: str) -> tuple[np.ndarray, np.ndarray]:
    """([1, 1], 5 columns of B): sums 1 + half an ulp (rounds to even: 1), 1 + 1.5 ulps (rounds up to
    the even 1 + 2 ulps), f16's 65504 + 16 = 65520 (halfway to 65536: inf) and 65504 + 15 (65504),
    a NaN; bf16 (no sum overflows it from these inputs): an inf, and inf + -inf (NaN)."""
    ulp = 2.0 ** (-10 if t == "f16" else -7)
    big = [65504.0, 65504.0] if t == "f16" else [np.inf, np.inf]
    b = np.array([[1.0, 1.0, big[0], big[1], np.nan],
                  [ulp / 2, 1.5 * ulp, 16.0 if t == "f16" else 1.0, 15.0 if t == "f16" else -np.inf, 1.0]],
                 np.float32)
    expect = np.array([1.0, 1.0 + 2 * ulp, np.inf, 65504.0 if t == "f16" else np.nan, np.nan], np.float32)
    return b, expect


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_half_gemv(tmp_path, device):
    """f16 / bf16 operands with an f32 accumulator take the NEON GEMVs (widened as loaded, rounded
    once as stored) on Armv8.0-A and Armv8.2-A; without an accumulator, and the GEMM shapes, the
    portable kernel. Special values (inf, NaN) in operands; the ties round as the reference does,
    bit for bit."""
    rng = np.random.default_rng(21)
    decl, vol, body, inputs, exact = [], [], [], {}, {}
    for t in ("f16", "bf16"):
        for name, (sa, sb, tr) in HALF_GEMVS.items():
            a = rng.uniform(-2, 2, sa).astype(np.float32)
            b = rng.uniform(-2, 2, sb).astype(np.float32)
            if name.startswith("ties"):
                bt, want = _ties(t)
                if name == "ties_mv":       # the rows of A as B's columns: the same five sums
                    a, b, exact[f"{name}_{t}"] = bt.T.copy(), np.ones(2, np.float32), want
                else:                       # both rows of A are [1, 1]
                    a, b, exact[f"{name}_{t}"] = np.ones(sa, np.float32), bt.T.copy() if tr else bt, np.tile(want, 2)
            elif name in ("v1", "mv", "t3"):
                a.flat[3], b.flat[5] = np.inf, -np.inf          # an inf row and column, NaN where they meet
                (b if name == "v1" else a).flat[-1] = np.nan    # a NaN column (v1) or row of the product
            am = np.swapaxes(a, -1, -2) if "a" in tr else a
            bm = np.swapaxes(b, -1, -2) if "b" in tr else b
            inputs[f"{name}_a_{t}"], inputs[f"{name}_b_{t}"] = a, b
            decl += [f"{name}_a_{t}: {t}[{', '.join(map(str, sa))}];", f"{name}_b_{t}: {t}[{', '.join(map(str, sb))}];"]
            vol.append(f"{name}_{t}: {t}[{', '.join(map(str, _out_shape(am.shape, bm.shape)))}];")
            attrs = "".join(f", transpose_{x}=true" for x in tr)
            body.append(f"  op matmul({name}_a_{t}, {name}_b_{t}, acc=[f32]{attrs}) >> {name}_{t};\n")
        # portable: no f32 accumulator (rounds after every add), and the GEMM's shape
        for out, acc, sa, sb in (("seq", "", (1, 9), (9, 7)), ("gemm", ", acc=[f32]", (9, 9), (9, 13))):
            inputs[f"{out}_a_{t}"] = rng.uniform(-2, 2, sa).astype(np.float32)
            inputs[f"{out}_b_{t}"] = rng.uniform(-2, 2, sb).astype(np.float32)
            decl += [f"{out}_a_{t}: {t}[{', '.join(map(str, sa))}];", f"{out}_b_{t}: {t}[{', '.join(map(str, sb))}];"]
            vol.append(f"{out}_{t}: {t}[{sa[0]}, {sb[1]}];")
            body.append(f"  op matmul({out}_a_{t}, {out}_b_{t}{acc}) >> {out}_{t};\n")
    text = (f"dynamic {{ {' '.join(decl)} }}\nvolatile {{ {' '.join(vol)} }}\n"
            f"block entry {{\n{''.join(body)}  return;\n}}\n")
    outs = [v.split(":")[0] for v in vol]
    sim = run(tmp_path, device, text, {}, inputs, outs, threads=("1", "2"))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    kernels = sim.program.kernels
    neon = [k for i, k in enumerate(kernels) if f"_k{i}_matmul_units" in source]
    # every acc=[f32] GEMV shape is a NEON kernel; the two portable ones per dtype are not
    assert len(neon) == 2 * len(HALF_GEMVS) and len(kernels) == len(neon) + 4
    assert "oiv_load_f16(" in source and "oiv_load_bf16(" in source and "oiv_store_bf16_n(" in source
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    for name, want in exact.items():
        got = np.asarray(ex.fetch(name), np.float32).reshape(-1)
        assert np.array_equal(got, want, equal_nan=True), (name, got, want)


#: lrn (templates/arm/lrn.c.j2): name -> (x, attributes). Planes of every size around the 4-lane
#: vector (1, 3, 4, 5, 7, 8, 9, 13 positions), odd channel counts (fewer than the window too),
#: windows of 1, 3, 5 and an even one, 2-d to 5-d x, specials (NaN, infinities, signed zeros, a
#: square that overflows), a zero denominator (NaN), a negative one, a subnormal bias (the
#: vector log's subnormal path), a plane count for the pool; beta = 0 takes the portable kernel.
LRNS = {
    "p1": ((1, 5, 1), {"size": 3, "alpha": 1.0}),
    "p3": ((2, 7, 3), {"size": 5, "alpha": 2.0}),
    "p4": ((1, 3, 2, 2), {"size": 5, "alpha": 1.0, "bias": 2.0}),        # fewer channels than the window
    "p5": ((1, 9, 5), {"size": 1, "alpha": 1.5}),
    "p7": ((2, 5, 7), {"size": 3, "alpha": 1.0, "beta": 0.5}),
    "p8": ((1, 11, 2, 4), {"size": 4, "alpha": 1.0, "beta": 1.25}),
    "p9": ((1, 3, 3, 3), {"size": 5}),
    "p13": ((1, 7, 13), {"size": 3, "alpha": 3.0, "beta": 2.0}),
    "nc": ((4, 9), {"size": 3, "alpha": 1.0}),
    "x5d": ((1, 5, 2, 3, 5), {"size": 3, "alpha": 1.0, "beta": 0.3}),
    "specials": ((1, 5, 2, 9), {"size": 3, "alpha": 1.0}),
    "zeros": ((1, 3, 17), {"size": 3, "alpha": 1.0, "bias": 0.0}),
    "negative": ((1, 3, 2, 11), {"size": 3, "alpha": 1.0, "bias": -1.5}),
    "subnormal": ((1, 4, 19), {"size": 3, "bias": 1e-40}),
    "big": ((1, 64, 23, 29), {"size": 5, "alpha": 1.0}),
    "beta0": ((1, 3, 2, 13), {"size": 3, "alpha": 1.0, "beta": 0.0}),
}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_lrn(tmp_path, device):
    rng = np.random.default_rng(14)
    inputs = {f"{k}_x": rng.normal(0, 1, xs).astype(np.float32) for k, (xs, _) in LRNS.items()}
    inputs["specials_x"][0, 0, 0, :4] = [np.nan, np.inf, -0.0, 0.0]
    inputs["specials_x"][0, 2, 1, 3:6] = [-np.inf, 1e18, -1e20]       # (-1e20)^2 overflows
    inputs["zeros_x"][:, :, 4:13] = 0.0                               # bias 0: 0 / 0 = NaN there
    inputs["subnormal_x"] *= np.float32(1e-30)
    inputs["big_x"] = np.abs(inputs["big_x"]) * 20
    inputs["inplace"] = rng.normal(0, 1, (2, 7, 3, 5)).astype(np.float32)
    body = "".join(f"  op lrn({k}_x, {', '.join(f'{a}={v!r}' for a, v in attrs.items())}) >> {k};\n"
                   for k, (_, attrs) in LRNS.items())
    body += "  op lrn(inplace, size=3, alpha=1.0) >> inplace;\n"
    text = (decls("dynamic", {**{f"{k}_x": xs for k, (xs, _) in LRNS.items()}, "inplace": (2, 7, 3, 5)})
            + decls("volatile", {k: xs for k, (xs, _) in LRNS.items()})
            + "block entry {\n" + body + "  return;\n}\n")
    sim = run(tmp_path, device, text, {}, inputs, [*LRNS, "inplace"], threads=("1", "2"))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    # every case but beta = 0, and the in-place call, is the NEON kernel (its power through oiv_log)
    vector = [chunk for chunk in source.split("/* lrn of ")[1:] if "oiv_log(d)" in chunk]
    assert len(vector) == len(LRNS) - 1 + 1 and "vld1q_f32(g->x + plane + j)" in source
    _builds_at_o2(sim)


#: dequant_matmul: name -> (M or None for 1-D x, K, N, per channel?, zero point?, weight dtype). K around
#: the SDOT step (4 rows) and its 16-row digit vectors, N around the 16-column block; 5 rows of x
#: take the portable kernel. 4-bit: odd N (every other row of w starts mid-byte, a row's last
#: block mid-byte too) and an even one, every M.
DEQUANT = {
    "v1d": (None, 67, 33, True, False, "i8"),
    "k1": (1, 1, 17, False, True, "u8"),
    "k15": (3, 15, 16, True, True, "i8"),
    "k17": (4, 17, 15, False, False, "u8"),
    "k33": (2, 33, 47, True, True, "u8"),
    "k64": (1, 64, 100, False, True, "i8"),
    "par": (1, 1031, 300, True, True, "i8"),      # over the pool in column chunks
    "m5": (5, 20, 20, True, True, "i8"),
    "i4_v1d": (None, 33, 47, True, False, "i4"),
    "u4_k15": (1, 15, 17, False, True, "u4"),
    "i4_k17": (2, 17, 15, True, True, "i4"),
    "u4_k33": (3, 33, 47, True, False, "u4"),
    "i4_m4": (4, 31, 32, False, True, "i4"),      # even N: every row starts on a byte
    "u4_m4": (4, 17, 1, True, True, "u4"),        # one column: a block of one nibble
    "i4_k1": (3, 1, 15, False, False, "i4"),
    "u4_par": (1, 1031, 521, True, True, "u4"),   # over the pool in column chunks
}


def _dequant_graph(rng):
    weights, inputs, dyn, const, outs, body, want, terms = {}, {}, [], [], [], [], {}, {}
    for name, (m, k, n, per_channel, zp, wt) in DEQUANT.items():
        lo, hi = WTYPES[wt]
        w = rng.integers(lo, hi + 1, (k, n)).astype(np.int8 if wt[0] == "i" else np.uint8)
        w[0, :2] = (lo, hi)[:n]
        xs = (k,) if m is None else (m, k)
        x = rng.standard_normal(xs).astype(np.float32)
        x.reshape(-1)[0] = 40.0             # one large |x|: the others' digits are small
        nc = n if per_channel else 1
        s = rng.uniform(0.01, 0.2, nc).astype(np.float32)
        weights[f"w_{name}"], weights[f"s_{name}"] = TensorSpec(w, dtype=wt), s
        const += [f"w_{name}: {wt}[{k}, {n}];", f"s_{name}: f32[{nc}];"]
        args, deq = f"x_{name}, w_{name}, s_{name}", w.astype(np.float64)
        if zp:
            z = rng.integers(lo // 2, hi // 2 + 1, nc).astype(np.int32)
            weights[f"z_{name}"] = z
            const.append(f"z_{name}: i32[{nc}];")
            args += f", z_{name}"
            deq = deq - z
        inputs[f"x_{name}"] = x
        dyn.append(f"x_{name}: f32[{', '.join(map(str, xs))}];")
        outs.append(f"y_{name}: f32[{', '.join(map(str, (n,) if m is None else (m, n)))}];")
        body.append(f"  op dequant_matmul({args}) >> y_{name};\n")
        want[f"y_{name}"], terms[f"y_{name}"] = _dot(x, deq * s.astype(np.float64))
    # an infinity in x (the f32 sums), and an epilogue (bias, GELU) after a zero-pointed u8 GEMV
    for name, at in (("k15", (1, 3)), ("i4_k17", (1, 16))):
        inputs[f"x_{name}"][at] = np.inf
        want[f"y_{name}"], terms[f"y_{name}"] = _dot(inputs[f"x_{name}"], (
            weights[f"w_{name}"].data.astype(np.float64) - weights[f"z_{name}"]) * weights[f"s_{name}"])
    weights["bias"] = rng.standard_normal(47).astype(np.float32)
    const.append("bias: f32[47];")
    outs.append("e: f32[2, 47];")
    body.append("  op dequant_matmul(x_k33, w_k33, s_k33, z_k33) >> e;\n  op add(e, bias) >> e;\n  op gelu(e) >> e;\n")
    text = (f"dynamic {{ {' '.join(dyn)} }}\nconstant {{ {' '.join(const)} }}\n"
            f"volatile {{ {' '.join(outs)} }}\nblock entry {{\n{''.join(body)}  return;\n}}\n")
    return text, weights, inputs, want, terms


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", ("aarch64-neon", "aarch64-v82"))
def test_dequant_gemv(tmp_path, device):
    text, weights, inputs, want, terms = _dequant_graph(np.random.default_rng(5))
    model = tmp_path / "model.oinf"
    oi.write_oinf(model, weights)
    sim = Simulator(oi.ModelLoader.open(model), oi.graph(text), arch=device)
    for threads in ("1", "2"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OI_NUM_THREADS", threads)
            ex = sim.make_executor()
        ex.insert(**inputs)
        ex.run_step()
        f32 = lookup("f32")
        rows = [compare(n, f32, want[n].astype(np.float32), ex.fetch(n), terms[n]) for n in want]
        assert all(r.ok for r in rows), f"{device} threads={threads}\n" + table(rows)
        e = ex.fetch("e")
        assert np.isfinite(e).all()
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert ("vdotq_laneq_s32" in source) == (device == "aarch64-v82")
    if device == "aarch64-v82":         # the SDOT program never runs on a CPU without the dot product
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("QEMU_CPU", "cortex-a53")
            with pytest.raises(SimulationError, match="lacks asimddp"):
                sim.make_executor()
    # every case but M = 5 has the NEON kernel, and so has the epilogue's GEMV
    assert source.count("_f32(const") == len(DEQUANT)


def _builds_at_o2(sim: Simulator) -> None:
    """The kernels of `sim` (built at meson's -O3) also compile warning-free at -O2."""
    compile_kernels_at(sim.project, "-O2")


#: row lengths around the 4-lane vector and the 2-vector sum step: 1, 3, 4, 5, 7, 8, 9, 127
ROW_LENGTHS = (1, 3, 4, 5, 7, 8, 9, 127)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_and_reductions(tmp_path, device):
    """softmax, layer_norm, rms_norm and the axis reductions over rows of every length around the
    vector (NaN rows, signed-zero maxima, a softmax far from 0), the reductions also over a
    leading axis (the output row accumulated in place), and large ones over the pool."""
    rng = np.random.default_rng(3)
    shapes, ops = {}, {}
    for n in ROW_LENGTHS:
        shapes.update({f"x{n}": (3, n), f"g{n}": (n,), f"b{n}": (n,)})
        ops.update({f"sm{n}": (f"softmax(x{n})", (3, n)), f"ln{n}": (f"layer_norm(x{n}, g{n}, b{n})", (3, n)),
                    f"lnp{n}": (f"layer_norm(x{n}, eps=0.01)", (3, n)), f"rms{n}": (f"rms_norm(x{n}, g{n})", (3, n)),
                    f"rmsp{n}": (f"rms_norm(x{n})", (3, n))})
        for red in ("sum", "mean", "max", "min"):
            ops[f"{red}{n}"] = (f"{red}_axis(x{n}, axes=[1])", (3,))
            ops[f"{red}_lead{n}"] = (f"{red}_axis(x{n}, axes=[0])", (n,))
    shapes.update(z=(2, 3, 5), big=(64, 4099), wide=(65, 509))
    ops.update(ln_axis=("layer_norm(z, axis=1)", (2, 3, 5)), max_two=("max_axis(z, axes=[1, 2])", (2,)),
               min_mid=("min_axis(z, axes=[1])", (2, 5)), rms_big=("rms_norm(big)", (64, 4099)),
               sum_big=("sum_axis(big, axes=[1])", (64,)), sm_wide=("softmax(wide)", (65, 509)))
    inputs = {k: rng.uniform(-6, 6, s).astype(np.float32) for k, s in shapes.items()}
    inputs["x127"][0, 3] = np.nan                           # a NaN row
    inputs["x9"][1, :] = -0.0
    inputs["x9"][1, 8] = 0.0                                # max +0.0 in the partial vector
    inputs["x5"][2, :] = -0.0                               # max -0.0
    inputs["x7"][0] = rng.uniform(-1e4, 1e4, 7)             # softmax far from 0
    outs = {k: s for k, (_, s) in ops.items()}
    body = "".join(f"  op {o} >> {k};\n" for k, (o, _) in ops.items())
    text = decls("dynamic", shapes) + decls("volatile", outs) + f"block entry {{\n{body}  return;\n}}\n"
    sim = run(tmp_path, device, text, {}, inputs, list(outs), threads=("1", "2"))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert source.count("_rows(void *arg") == len(ops)      # every one is a NEON row / reduction kernel
    _builds_at_o2(sim)


#: name -> (x, w, attributes, bias?, epilogue): widths around the 4-lane vector and the 8-column
#: tile (3, 4, 5, 7, 8, 9, 11, 14 outputs), odd and prime channel counts (3, 5, 17: an edge block
#: of 1 channel after two of 8), taps not a multiple of 4, H-only padding, strides 2 and 3
#: (LD2 / LD3), dilation, groups, an unpadded input read in place, conv1d; epilogues of the sums
CONVS = {
    "c32": ((1, 32, 14, 14), (32, 32, 3, 3), {"padding": 1}, True, "relu"),
    "c_hpad": ((1, 5, 9, 13), (17, 5, 3, 3), {"padding": [1, 0]}, True, None),
    "c_s2": ((2, 3, 15, 17), (8, 3, 3, 3), {"stride": 2, "padding": 1}, False, "gelu"),
    "c_dil": ((1, 4, 12, 11), (5, 4, 3, 3), {"dilation": 2, "padding": 2}, True, None),
    "c_1x1": ((1, 17, 7, 7), (9, 17, 1, 1), {}, False, None),
    "c_inplace": ((1, 3, 10, 10), (4, 3, 3, 3), {}, True, None),
    "c_dw": ((1, 8, 9, 9), (8, 1, 3, 3), {"padding": 1, "groups": 8}, True, "relu"),
    "c_w3": ((1, 2, 3, 3), (3, 2, 3, 3), {"padding": 1}, False, None),
    "c_w4": ((1, 2, 4, 4), (5, 2, 3, 3), {"padding": 1}, True, None),
    "c_w9": ((1, 3, 5, 9), (7, 3, 3, 3), {"padding": 1}, False, None),
    "c_1d": ((2, 5, 31), (7, 5, 5), {"stride": 3, "padding": 2}, True, "relu"),
}
#: the convolutions Winograd's kernel takes (openinfer/targets/arm/winograd.py `winograd_covers`)
CONVS_WINOGRAD = {"c32", "c_wide"}
#: convolutions whose weights are inputs: packed on every call (the others' by create())
CONV_DYNAMIC_W = {"c_w9", "c_1d", "c_groups"}
#: OI_SLOW=1: 5 x 5 taps, stride 4 (LD4), four-sided padding, a wider image, grouped channels
CONVS_SLOW = {
    "c_5x5": ((1, 6, 17, 19), (11, 6, 5, 5), {"padding": 2}, True, None),
    "c_s4": ((1, 3, 23, 29), (5, 3, 3, 3), {"stride": 4, "padding": [1, 2, 0, 1]}, False, "relu"),
    "c_wide": ((1, 16, 28, 28), (24, 16, 3, 3), {"padding": 1}, True, "silu"),
    "c_groups": ((1, 12, 10, 10), (9, 4, 3, 3), {"padding": 1, "groups": 3}, True, None),
    "c_1d_dil": ((1, 4, 40), (6, 4, 3), {"dilation": 3, "padding": [0, 2]}, False, None),
}
CONVS_ALL = {**CONVS, **CONVS_SLOW}


def conv_program(cases: dict, rng, weights_as_inputs: set[str], scaled: bool = False):
    """(text, weights, inputs, output shapes) of a program of convolutions: `cases` name -> (x, w,
    attributes, bias?, epilogue); random inputs, weights and biases (weights / sqrt(fan-in) when
    `scaled`, as trained ones; else unit-scale), weights of `weights_as_inputs` dynamic inputs."""
    weights, inputs, dyn, const, outs, body = {}, {}, {}, {}, {}, []
    for name, (xs, ws, attrs, bias, epi) in cases.items():
        inputs[f"{name}_x"], dyn[f"{name}_x"] = rng.standard_normal(xs).astype(np.float32), xs
        w = rng.standard_normal(ws)
        w = (w / np.sqrt(np.prod(ws[1:])) if scaled else w).astype(np.float32)
        if name in weights_as_inputs:
            inputs[f"{name}_w"], dyn[f"{name}_w"] = w, ws
        else:
            weights[f"{name}_w"], const[f"{name}_w"] = w, ws
        args = f"{name}_x, {name}_w"
        if bias:
            weights[f"{name}_b"], const[f"{name}_b"] = rng.standard_normal(ws[0]).astype(np.float32), (ws[0],)
            args += f", {name}_b"
        args += "".join(f", {k}={v}" for k, v in attrs.items())
        body.append(f"  op conv{len(xs) - 2}d({args}) >> {name};\n")
        if epi:
            body.append(f"  op {epi}({name}) >> {name};\n")
        outs[name] = conv_out(xs, ws, attrs)
    text = (decls("dynamic", dyn) + decls("constant", const) + decls("volatile", outs)
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    return text, weights, inputs, outs


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_conv(tmp_path, device):
    text, weights, inputs, outs = conv_program({**CONVS, **(CONVS_SLOW if SLOW else {})}, np.random.default_rng(7),
                                               CONV_DYNAMIC_W)
    special(inputs["c_hpad_x"])             # NaN, infinities, signed zeros through the sums
    # Winograd's sums round relative to their terms (its transforms add and scale them), which these
    # unscaled weights make large: rtol of the terms' magnitude there (its epilogues are ReLU / SiLU)
    terms = {n: conv2d_terms(inputs[f"{n}_x"], weights[f"{n}_w"], weights.get(f"{n}_b"), CONVS_ALL[n][2])
             for n in CONVS_WINOGRAD if n in outs}
    sim = run(tmp_path, device, text, weights, inputs, list(outs), threads=("1", "2"), only_outputs=True,
              terms=terms)
    source = next(sim.project.glob("*_kernels.c")).read_text()
    convs = [k for k in sim.program.kernels if k.op.startswith("conv")]
    # every one a NEON kernel: the 3 x 3 stride-1 ones with 8 channels or more Winograd's
    # (tests/synth/test_winograd.py), the others the direct one
    winograd = {n for n in CONVS_WINOGRAD if n in outs}
    assert len(convs) == len(outs) and source.count("_gemm(const float *restrict V,") == len(winograd)
    assert source.count("_off[") >= len(outs) - len(winograd)
    assert source.count("_pack1(const float") == len(outs) - len(CONV_DYNAMIC_W & set(outs))
    assert sum(k.epilogue is not None for k in convs) == sum(c[4] is not None for c in CONVS.values()) + (
        SLOW and sum(c[4] is not None for c in CONVS_SLOW.values()))
    _builds_at_o2(sim)


#: name -> (x, w, conv attributes, epilogue, pool, pooled output): convolutions that pool their own
#: result (a last channel block of 1 after two of 8, a conv row the pool drops, groups, 3 x 3
#: windows), pooled over the pool at 2 threads (the CNN's first: 32 x 32 image, 16 channels)
CONV_POOLS = {
    "cp_max": ((1, 5, 14, 13), (17, 5, 3, 3), {"padding": 1}, "relu",
               "max_pool2d({}, kernel=[2, 2], stride=[2, 2])", (1, 17, 7, 6)),
    "cp_avg": ((1, 3, 15, 15), (6, 3, 3, 3), {}, None, "avg_pool2d({}, kernel=[3, 3], stride=[3, 3])", (1, 6, 4, 4)),
    "cp_groups": ((2, 8, 9, 11), (8, 2, 3, 3), {"padding": 1, "groups": 4}, "gelu",
                  "max_pool2d({}, kernel=[2, 2], stride=[2, 2])", (2, 8, 4, 5)),
    "cp_cnn": ((1, 3, 32, 32), (16, 3, 3, 3), {"padding": 1}, "relu",
               "max_pool2d({}, kernel=[2, 2], stride=[2, 2])", (1, 16, 16, 16)),
}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_conv_pools_its_result(tmp_path, device):
    rng = np.random.default_rng(8)
    weights, inputs, dyn, const, convs, outs, body = {}, {}, {}, {}, {}, {}, []
    for name, (xs, ws, attrs, epi, pool, pooled) in CONV_POOLS.items():
        inputs[f"{name}_x"], dyn[f"{name}_x"] = rng.standard_normal(xs).astype(np.float32), xs
        weights[f"{name}_w"], const[f"{name}_w"] = rng.standard_normal(ws).astype(np.float32), ws
        weights[f"{name}_b"], const[f"{name}_b"] = rng.standard_normal(ws[0]).astype(np.float32), (ws[0],)
        args = f"{name}_x, {name}_w, {name}_b" + "".join(f", {k}={v}" for k, v in attrs.items())
        body.append(f"  op conv2d({args}) >> {name}_c;\n")
        if epi:
            body.append(f"  op {epi}({name}_c) >> {name}_c;\n")
        body.append(f"  op {pool.format(name + '_c')} >> {name};\n")
        convs[f"{name}_c"], outs[name] = conv_out(xs, ws, attrs), pooled
    special(inputs["cp_max_x"])             # NaN, infinities, signed zeros through sums and maxima
    text = (decls("dynamic", dyn) + decls("constant", const) + decls("volatile", {**convs, **outs})
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    sim = run(tmp_path, device, text, weights, inputs, list(outs), threads=("1", "2"), only_outputs=True)
    kernels = [k for k in sim.program.kernels if k.op in ("conv2d", "max_pool2d", "avg_pool2d")]
    assert all(k.op == "conv2d" and k.pool is not None for k in kernels), [k.op for k in kernels]
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert source.count("_pool(g->ctx, rows") == len(CONV_POOLS) and source.count("_off[") >= len(CONV_POOLS)
    _builds_at_o2(sim)


#: name -> (x, op and attributes, output): strides 1 and 2 with and without padding, windows of
#: 2 and 3, widths around the vector (LD2 stops where it would read past a row), odd planes
POOLS = {
    "mp2": ((2, 3, 16, 17), "max_pool2d(mp2_x, kernel=[2, 2], stride=[2, 2])", (2, 3, 8, 8)),
    "mp3": ((1, 5, 13, 19), "max_pool2d(mp3_x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])", (1, 5, 7, 10)),
    "mp_s1": ((1, 3, 7, 9), "max_pool2d(mp_s1_x, kernel=[3, 3], stride=[1, 1], padding=[1, 1])", (1, 3, 7, 9)),
    "ap2": ((1, 4, 10, 18), "avg_pool2d(ap2_x, kernel=[2, 2], stride=[2, 2])", (1, 4, 5, 9)),
    "ap3": ((1, 3, 11, 21), "avg_pool2d(ap3_x, kernel=[3, 3], stride=[2, 2], padding=[1, 1])", (1, 3, 6, 11)),
    "ap_cnt": ((1, 2, 9, 12), "avg_pool2d(ap_cnt_x, kernel=[3, 3], stride=[1, 1], padding=[1, 1], "
               "count_include_pad=true)", (1, 2, 9, 12)),
}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_pool(tmp_path, device):
    rng = np.random.default_rng(9)
    inputs = {f"{k}_x": rng.standard_normal(xs).astype(np.float32) for k, (xs, _, _) in POOLS.items()}
    special(inputs["mp2_x"])
    inputs["mp3_x"][0, 0, 2:4, 4:8] = -0.0                 # signed zeros in a window's maximum
    inputs["mp3_x"][0, 0, 3, 5] = 0.0
    text = (decls("dynamic", {f"{k}_x": xs for k, (xs, _, _) in POOLS.items()})
            + decls("volatile", {k: s for k, (_, _, s) in POOLS.items()})
            + "block entry {\n" + "".join(f"  op {o} >> {k};\n" for k, (_, o, _) in POOLS.items()) + "  return;\n}\n")
    sim = run(tmp_path, device, text, {}, inputs, list(POOLS), threads=("1", "2"))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert source.count("ov + OIV_LANES <=") == len(POOLS)          # every one has the NEON interior
    _builds_at_o2(sim)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
def test_sdpa(tmp_path, device):
    """The tiled sdpa with NEON tiles (templates/c/ops/sdpa_vector_tile.j2): the f32 cases of
    tests/synth/test_nn_kernels.py (bool and additive masks, causal, grouped heads, NaN and inf
    scores, key counts off the 16-key tile, a pool's share), whose sums must equal the portable
    tile's bit for bit where both run."""
    from test_nn_kernels import _sdpa_cases, graph_text, run_and_compare

    cases = [(f"sdpa{k}", c) for k, c in enumerate(_sdpa_cases("float32", np.random.default_rng(11)))]
    sim = run_and_compare(tmp_path / "model.oinf", device, *graph_text(cases))
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert "vfmaq_f32(s0_0, w, x0)" in source and "vdupq_n_f32(qr[" in source and "vdupq_n_f32(sc[" in source
    _builds_at_o2(sim)
