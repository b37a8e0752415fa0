"""Dynamic sizes (issue 18) on every target: the scenarios both tests/synth/test_dynamic_sizes.py
(the C targets) and tests/vulkan/test_vulkan_dynamic.py (lavapipe, the validation layer on) run.

Examples with a natural dynamic dim (the MLP's batch, the encoder's sequence, the CNN's batch, the
decoder's attention length, the streaming window) run at lengths 1, a prime, the bound and a
varying sequence in one executor, each against the reference bound at that length, with the
library built once.

Small graphs whose extents depend on a dynamic size, one per kernel family (CASES):

Each case puts the dynamic size T where kernels meet it in real models: the leading (row) dim of
element-wise, row and GEMM kernels; a middle dim (after a transpose, heads first); the last dim
(softmax over attention scores, a reduction axis, a conv's length); the inner dims of products
(Q @ K^T's columns, scores @ V's depth); an attention's key count. The same records run on every
target that runs here: tests/synth/test_dynamic_ops.py (the C targets) and
tests/vulkan/test_vulkan_dynamic.py (lavapipe), each at several sizes from one library, against
the reference bound at each size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from example_modules import load_example

import openinfer as oi
from openinfer.errors import ExecutionError
from openinfer.ir.nodes import MemoryKind
from openinfer.oinf.values import TensorSpec
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator

encoder, cnn, decoder = load_example("encoder"), load_example("cnn"), load_example("decoder")
ENC = encoder.SIZES["test"]


@dataclass(frozen=True)
class DynamicCase:
    id: str
    graph: str
    outputs: tuple[str, ...]
    bound: int = 12
    lengths: tuple[int, ...] = (1, 5, 12, 2, 7)
    #: model tensors: name -> shape (f32, seeded normal values)
    tensors: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: quantized model tensors: name -> (dtype, shape) of i8 / u8 / i4 / u4 (seeded values over the
    #: dtype's range) or i32 zero points (within half of the i8 range)
    quantized: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    #: integer inputs: name -> exclusive upper bound of their values
    int_high: dict[str, int] = field(default_factory=dict)
    sizevars: dict[str, int] = field(default_factory=dict)
    #: absolute tolerance (sums over thousands of terms round differently in each kernel)
    atol: float = 2e-5
    #: the host reads `outputs` only (`--outputs`): the other variables are planned memory, which
    #: the passes may fold away (a pool computed by its convolution never stores the conv's result)
    outputs_only: bool = False

    def write_model(self, path: Path) -> Path:
        rng = np.random.default_rng(11)
        tensors = {k: (rng.standard_normal(s) * 0.5).astype(np.float32) for k, s in self.tensors.items()}
        for k, (dtype, shape) in self.quantized.items():
            lo, hi = {"i8": (-128, 127), "u8": (0, 255), "i4": (-8, 7), "u4": (0, 15), "i32": (-64, 63)}[dtype]
            values = rng.integers(lo, hi + 1, shape)
            tensors[k] = (values.astype(np.int32) if dtype == "i32"
                          else TensorSpec(values.astype(np.int8 if dtype[0] == "i" else np.uint8), dtype=dtype))
        oi.write_oinf(path, tensors=tensors, sizevars={"T": 1, **self.sizevars})
        return path


def inputs(bound, rng, case: DynamicCase | None = None) -> dict[str, np.ndarray]:
    """Random values of every dynamic input of `bound` (a graph bound at one size); integers below
    the case's `int_high` (50 by default)."""
    out = {}
    for name, v in bound.vars.items():
        if v.kind is not MemoryKind.DYNAMIC:
            continue
        shape = tuple(int(d) for d in v.shape)
        if v.dtype.name == "bool":
            a = rng.random(shape) < 0.8
            a.reshape(-1)[0] = True         # at least one key per row (sdpa: no all-masked row)
        elif v.dtype.is_int:
            high = case.int_high.get(name, 50) if case else 50
            a = rng.integers(0, high, shape).astype(v.dtype.np_dtype)
        else:
            a = rng.standard_normal(shape).astype(v.dtype.np_dtype)
        out[name] = a
    return out


CASES = (
    DynamicCase("elementwise", """
dynamic { x: f32[T, 8]; x3: f32[2, T, 4]; c: bool[T, 8]; }
constant { b: f32[8]; b3: f32[2, 1, 4]; }
volatile { y: f32[T, 8]; z: f32[T, 8]; h: f16[T, 8]; y3: f32[2, T, 4]; m: f32[T, 8]; }
block entry {
    op add(x, b) >> y;
    op tanh(y) >> y;
    op mul(y, x) >> z;
    op cast(z, to=f16) >> h;
    op filter(x, z, y) >> m;
    op add(x3, b3) >> y3;
    op relu(y3, alpha=0.1, clamp_max=0.5) >> y3;
    return;
}
""", ("y", "z", "h", "y3", "m"), tensors={"b": (8,), "b3": (2, 1, 4)}),
    DynamicCase("rows", """
dynamic { x: f32[T, 8]; s: f32[4, T]; }
constant { g: f32[8]; bb: f32[8]; }
volatile { ln: f32[T, 8]; rn: f32[T, 8]; sm: f32[4, T]; ls: f32[4, T]; sm0: f32[4, T]; }
block entry {
    op layer_norm(x, g, bb, eps=1e-5) >> ln;
    op rms_norm(x, g, eps=1e-5) >> rn;
    op softmax(s, axis=-1) >> sm;
    op log_softmax(s, axis=1) >> ls;
    op softmax(s, axis=0) >> sm0;
    return;
}
""", ("ln", "rn", "sm", "ls", "sm0"), tensors={"g": (8,), "bb": (8,)}),
    DynamicCase("reductions", """
dynamic { x: f32[T, 8]; s: f32[4, T]; n: i32[T, 3]; }
volatile { c: f32[8]; r: f32[4]; mx: f32[8]; mn: f32[4]; all: f32; am: i64[4]; an: i64[3]; ni: i32[3]; }
block entry {
    op sum_axis(x, axes=[0]) >> c;
    op mean_axis(s, axes=[1]) >> r;
    op max_axis(x, axes=[0]) >> mx;
    op min_axis(s, axes=[1]) >> mn;
    op sum_axis(s, axes=[0, 1]) >> all;
    op argmax_axis(s, axis=1) >> am;
    op argmin_axis(n, axis=0) >> an;
    op sum_axis(n, axes=[0]) >> ni;
    return;
}
""", ("c", "r", "mx", "mn", "all", "am", "an", "ni")),
    DynamicCase("matmul-rows", """
dynamic { x: f32[T, 8]; x3: f32[T, 2, 8]; }
constant { w: f32[8, 16]; wt: f32[16, 8]; }
volatile { y: f32[T, 16]; yt: f32[T, 16]; y3: f32[T, 2, 16]; }
block entry {
    op matmul(x, w) >> y;
    op add(y, y) >> y;
    op matmul(x, wt, transpose_b=true) >> yt;
    op matmul(x3, w) >> y3;
    return;
}
""", ("y", "yt", "y3"), bound=40, lengths=(1, 3, 40, 17, 8), tensors={"w": (8, 16), "wt": (16, 8)}),
    DynamicCase("matmul-few-rows", """
dynamic { x: f32[T, 8]; v: f32[8]; }
constant { w: f32[8, 16]; }
volatile { y: f32[T, 16]; mv: f32[T]; }
block entry { op matmul(x, w) >> y; op matmul(x, v) >> mv; return; }
""", ("y", "mv"), bound=6, lengths=(1, 6, 4), tensors={"w": (8, 16)}),
    DynamicCase("attention-products", """
dynamic { q: f32[T, 8]; k: f32[T, 8]; v: f32[T, 8]; q3: f32[2, T, 4]; k3: f32[2, T, 4]; }
volatile { s: f32[T, T]; p: f32[T, T]; o: f32[T, 8]; s3: f32[2, T, T]; kt: f32[8, T]; o2: f32[T, 8]; }
block entry {
    op matmul(q, k, transpose_b=true) >> s;
    op softmax(s, axis=-1) >> p;
    op matmul(p, v) >> o;
    op matmul(q3, k3, transpose_b=true) >> s3;
    op transpose(k, perm=[1, 0]) >> kt;
    op matmul(p, kt, transpose_b=true) >> o2;
    return;
}
""", ("s", "p", "o", "s3", "kt", "o2")),
    DynamicCase("sdpa", """
dynamic { q: f32[2, T, 4]; k: f32[2, T, 4]; v: f32[2, T, 4]; mask: bool[T]; q1: f32[2, 1, 4]; }
volatile { o: f32[2, T, 4]; oc: f32[2, T, 4]; o1: f32[2, 1, 4]; }
block entry {
    op sdpa(q, k, v, mask) >> o;
    op sdpa(q, k, v, causal=true) >> oc;
    op sdpa(q1, k, v) >> o1;
    return;
}
""", ("o", "oc", "o1")),
    DynamicCase("layout", """
dynamic { x: f32[T, 8]; idx: i32[T]; sel: i32[2]; a: f32[T, 4]; }
constant { table: f32[10, 8]; }
volatile { x3: f32[T, 2, 4]; xt: f32[2, T, 4]; back: f32[T, 8]; first: f32[1, 8]; mid: f32[T, 4];
           cat: f32[T, 12]; g: f32[T, 8]; gx: f32[T, 2]; rest: f32[T, 8]; }
block entry {
    op reshape(x) >> x3;
    op transpose(x3, perm=[1, 0, 2]) >> xt;
    op transpose(xt, perm=[1, 0, 2]) >> x3;
    op reshape(x3) >> back;
    op slice(x, starts=[0], ends=[1]) >> first;
    op slice(x, starts=[2], ends=[6], axes=[1]) >> mid;
    op concat(a, x, axis=1) >> cat;
    op gather(table, idx) >> g;
    op gather(x, sel, axis=1) >> gx;
    op slice(x, starts=[0], ends=[T]) >> rest;
    return;
}
""", ("xt", "back", "first", "mid", "cat", "g", "gx", "rest"), tensors={"table": (10, 8)},
        int_high={"idx": 10, "sel": 8}),
    # index tuples: T of them into a constant table, per batch of a T-long batch, and rows
    # combined into a T-row x (row 0: the one in range at every length)
    DynamicCase("index-tuples", """
dynamic { tup: i32[T, 1]; xb: f32[T, 5, 3]; bt: i64[T, 2, 1]; x: f32[T, 8]; row: i64[2, 1]; upd: f32[2, 8]; }
constant { table: f32[10, 8]; }
volatile { g: f32[T, 8]; gb: f32[T, 2, 3]; s: f32[T, 8]; }
block entry {
    op gather_nd(table, tup) >> g;
    op gather_nd(xb, bt, batch_dims=1) >> gb;
    op scatter_nd(x, row, upd, reduction="add") >> s;
    return;
}
""", ("g", "gb", "s"), tensors={"table": (10, 8)}, int_high={"tup": 10, "bt": 5, "row": 1}),
    DynamicCase("conv-length", """
dynamic { x: f32[1, 3, T]; x2: f32[1, 2, T, 5]; x4: f32[1, 2, 4, T]; }
constant { w: f32[4, 3, 3]; b: f32[4]; w2: f32[4, 2, 3, 3]; }
volatile { y: f32[1, 4, T]; y2: f32[1, 4, T, 5]; mp: f32[1, 2, 4, T]; ap: f32[1, 2, 4, T]; }
block entry {
    op conv1d(x, w, b, padding=1) >> y;
    op conv2d(x2, w2, padding=1) >> y2;
    op max_pool2d(x4, kernel=[1, 3], stride=[1, 1], padding=[0, 1]) >> mp;
    op avg_pool2d(x4, kernel=[1, 3], stride=[1, 1], padding=[0, 1]) >> ap;
    return;
}
""", ("y", "y2", "mp", "ap"), tensors={"w": (4, 3, 3), "b": (4,), "w2": (4, 2, 3, 3)}),
    DynamicCase("conv-batch", """
dynamic { x: f32[T, 2, 6, 6]; }
constant { w: f32[4, 2, 3, 3]; b: f32[4]; }
volatile { y: f32[T, 4, 6, 6]; mp: f32[T, 4, 3, 3]; ap: f32[T, 4, 3, 3]; }
block entry {
    op conv2d(x, w, b, padding=1) >> y;
    op max_pool2d(y, kernel=2) >> mp;
    op avg_pool2d(y, kernel=2) >> ap;
    return;
}
""", ("y", "mp", "ap"), bound=5, lengths=(1, 5, 3), tensors={"w": (4, 2, 3, 3), "b": (4,)}),
    # pools computed by their convolutions on the AVX targets (openinfer/synth/fusion.py
    # `fold_pools`) over a run-time batch: row bands padding their own rows, then a serial conv
    DynamicCase("conv-batch-pooled", """
dynamic { x: f32[T, 3, 18, 20]; }
constant { w: f32[16, 3, 3, 3]; b: f32[16]; w2: f32[8, 16, 3, 3]; }
volatile { a: f32[T, 16, 18, 20]; p: f32[T, 16, 9, 10]; a2: f32[T, 8, 9, 10]; q: f32[T, 8, 4, 5]; }
block entry {
    op conv2d(x, w, b, padding=1) >> a;
    op relu(a) >> a;
    op max_pool2d(a, kernel=2) >> p;
    op conv2d(p, w2, padding=1) >> a2;
    op avg_pool2d(a2, kernel=2) >> q;
    return;
}
""", ("p", "q"), bound=8, lengths=(1, 8, 3), tensors={"w": (16, 3, 3, 3), "b": (16,), "w2": (8, 16, 3, 3)},
                outputs_only=True),
    DynamicCase("positions", """
dynamic { x: f32[T, 2, 4]; }
volatile { pos: i32[T]; r: f32[T, 2, 4]; ramp: f32[T]; rows: i32[4, T]; }
block entry {
    op arange(pos, start=3) >> pos;
    op rope(x, pos, theta=10000.0) >> r;
    op arange(ramp, start=0.5, step=0.25) >> ramp;
    op arange(rows, start=1, axis=0) >> rows;
    return;
}
""", ("pos", "r", "ramp", "rows")),
    # few run-time rows of A (a bound the GEMV paths take): the vecmat (a kernel per row count; a
    # bias and GELU as its epilogue; B^T and A^T as stored; a batch of B; f16 with an f32
    # accumulator; a narrow B split along K over the pool), the matrix-vector product
    DynamicCase("gemv-rows", """
dynamic { x: f32[T, 65]; xt: f32[65, T]; x3: f32[2, T, 8]; xh: f16[T, 65]; wh: f16[65, 37]; xk: f32[T, 4096];
          v: f32[65]; }
constant { w: f32[65, 37]; wt: f32[37, 65]; bias: f32[37]; w3: f32[2, 8, 16]; wk: f32[4096, 64]; bk: f32[64]; }
volatile { y: f32[T, 37]; yt: f32[T, 37]; ya: f32[T, 37]; y3: f32[2, T, 16]; yh: f16[T, 37]; yk: f32[T, 64];
           mv: f32[T]; }
block entry {
    op matmul(x, w) >> y;
    op add(y, bias) >> y;
    op gelu(y) >> y;
    op matmul(x, wt, transpose_b=true) >> yt;
    op matmul(xt, w, transpose_a=true) >> ya;
    op matmul(x3, w3) >> y3;
    op matmul(xh, wh, acc=[f32]) >> yh;
    op matmul(xk, wk) >> yk;
    op add(yk, bk) >> yk;
    op matmul(x, v) >> mv;
    return;
}
""", ("y", "yt", "ya", "y3", "yh", "yk", "mv"), bound=4, lengths=(1, 4, 3, 2),
        tensors={"w": (65, 37), "wt": (37, 65), "bias": (37,), "w3": (2, 8, 16), "wk": (4096, 64), "bk": (64,)},
        atol=1e-3),
    # run-time rows of x in the dequantizing GEMVs: whole row groups and every height of the last
    # (8- and 4-bit weights, a zero point, an epilogue, a narrow w split along K over the pool)
    DynamicCase("dequant-rows", """
dynamic { x: f32[T, 65]; xk: f32[T, 1100]; }
constant { w8: i8[65, 70]; s8: f32[70]; z8: i32[70]; w4: u4[65, 64]; s4: f32[1]; wk: i4[1100, 520]; sk: f32[520];
           b4: f32[64]; }
volatile { y8: f32[T, 70]; y4: f32[T, 64]; yk: f32[T, 520]; }
block entry {
    op dequant_matmul(x, w8, s8, z8) >> y8;
    op dequant_matmul(x, w4, s4) >> y4;
    op add(y4, b4) >> y4;
    op relu(y4, alpha=0.0) >> y4;
    op dequant_matmul(xk, wk, sk) >> yk;
    return;
}
""", ("y8", "y4", "yk"), bound=9, lengths=(1, 9, 4, 5, 2, 7),
        tensors={"s8": (70,), "s4": (1,), "sk": (520,), "b4": (64,)},
        quantized={"w8": ("i8", (65, 70)), "z8": ("i32", (70,)), "w4": ("u4", (65, 64)), "wk": ("i4", (1100, 520))},
        atol=1e-3),
    # run-time row lengths: softmax and the norms over rows of T (a gamma and beta of T), and
    # reductions whose reduced or inner extent is T (lengths with and without a partial vector,
    # on both ISAs: multiples of 8 and 16)
    DynamicCase("row-length", """
dynamic { x: f32[3, T]; g: f32[T]; b: f32[T]; x3: f32[2, T, 5]; }
volatile { sm: f32[3, T]; ln: f32[3, T]; lp: f32[3, T]; rn: f32[3, T]; rp: f32[3, T]; s0: f32[T, 5]; m1: f32[2, 5];
           mx1: f32[2, 5]; mn2: f32[2, T]; s12: f32[2]; mr: f32[3]; }
block entry {
    op softmax(x) >> sm;
    op layer_norm(x, g, b, eps=1e-5) >> ln;
    op layer_norm(x, eps=1e-5) >> lp;
    op rms_norm(x, g, eps=1e-5) >> rn;
    op rms_norm(x3, axis=1, eps=1e-5) >> x3;
    op sum_axis(x3, axes=[0]) >> s0;
    op mean_axis(x3, axes=[1]) >> m1;
    op max_axis(x3, axes=[1]) >> mx1;
    op min_axis(x3, axes=[2]) >> mn2;
    op sum_axis(x3, axes=[1, 2]) >> s12;
    op mean_axis(x, axes=[1]) >> mr;
    op softmax(x) >> rp;
    op rms_norm(rp, eps=1e-5) >> rp;
    return;
}
""", ("sm", "ln", "lp", "rn", "x3", "s0", "m1", "mx1", "mn2", "s12", "mr", "rp"), bound=40,
        lengths=(1, 7, 8, 16, 17, 40, 33, 2)),
    # run-time N and K of products (a run-time number of rows too, or few static ones): attention
    # scores (N = T, B^T as stored; a batch; an epilogue), P @ V (K = T, several K slices, over the
    # pool), A^T; the GEMV paths with a run-time N (a vecmat, a matvec of W^T, A^T @ x) or K (a
    # decoding step's scores @ V, a matrix times a vector of T)
    DynamicCase("products-nk", """
dynamic { q: f32[T, 8]; k: f32[T, 8]; v: f32[T, 32]; q3: f32[2, T, 4]; k3: f32[2, T, 4]; xt: f32[8, T];
          x2: f32[2, 8]; q1: f32[1, 8]; p1: f32[1, T]; a: f32[8, T]; t: f32[T]; u: f32[8]; }
constant { w: f32[8, 24]; }
volatile { s: f32[T, T]; o: f32[T, 32]; s3: f32[2, T, T]; kt: f32[8, T]; o2: f32[T, 8]; ya: f32[T, 24];
           y2: f32[2, T]; s1: f32[1, T]; o1: f32[1, 32]; av: f32[8]; at: f32[T]; }
block entry {
    op matmul(q, k, transpose_b=true) >> s;
    op relu(s, alpha=0.5) >> s;
    op matmul(s, v) >> o;
    op matmul(q3, k3, transpose_b=true) >> s3;
    op transpose(k, perm=[1, 0]) >> kt;
    op matmul(s, kt, transpose_b=true) >> o2;
    op matmul(xt, w, transpose_a=true) >> ya;
    op matmul(x2, kt) >> y2;
    op matmul(q1, k, transpose_b=true) >> s1;
    op matmul(p1, v) >> o1;
    op matmul(a, t) >> av;
    op matmul(xt, u, transpose_a=true) >> at;
    return;
}
""", ("s", "o", "s3", "o2", "ya", "y2", "s1", "o1", "av", "at"), bound=300, lengths=(1, 17, 129, 300, 256, 40),
        tensors={"w": (8, 24)}, atol=1e-3),
    # pooling over a run-time plane (its width: the inside columns at run time, none at the
    # smallest; its height) and a run-time batch, rows wide enough for the vectors of both ISAs,
    # column strides 1 and 2 (a strided output of a run-time width has no DSL spelling)
    DynamicCase("pool-plane", """
dynamic { x: f32[1, 2, 5, T]; xh: f32[1, 2, T, 40]; xb: f32[T, 3, 6, 40]; }
volatile { m1: f32[1, 2, 5, T]; a1: f32[1, 2, 5, T]; a2: f32[1, 2, 4, T]; mh: f32[1, 2, T, 40]; ah: f32[1, 2, T, 20];
           ab: f32[T, 3, 3, 20]; mb: f32[T, 3, 6, 40]; }
block entry {
    op max_pool2d(x, kernel=3, stride=1, padding=1) >> m1;
    op avg_pool2d(x, kernel=3, stride=1, padding=1) >> a1;
    op avg_pool2d(x, kernel=[2, 3], stride=1, padding=[0, 1], count_include_pad=false) >> a2;
    op max_pool2d(xh, kernel=3, stride=1, padding=1) >> mh;
    op avg_pool2d(xh, kernel=[3, 2], stride=[1, 2], padding=[1, 0]) >> ah;
    op avg_pool2d(xb, kernel=2, stride=2) >> ab;
    op max_pool2d(xb, kernel=[3, 5], stride=1, padding=[1, 2]) >> mb;
    return;
}
""", ("m1", "a1", "a2", "mh", "ah", "ab", "mb"), bound=40, lengths=(1, 2, 3, 40, 33, 17, 6)),
    # lrn over a run-time batch, channel count (windows clipped at a run-time C) and plane (its
    # last partial vector's count at run time), with windows of 3, 4 and 5; f16 (the portable kernel)
    DynamicCase("lrn", """
dynamic { x: f32[T, 5, 3, 7]; c: f32[1, T, 9]; p: f32[2, 4, T]; h: f16[1, 3, T]; }
volatile { yx: f32[T, 5, 3, 7]; yc: f32[1, T, 9]; yp: f32[2, 4, T]; yh: f16[1, 3, T]; }
block entry {
    op lrn(x, size=5, alpha=1.0) >> yx;
    op lrn(c, size=3, alpha=1.0, bias=2.0) >> yc;
    op lrn(p, size=4, alpha=2.0, beta=0.5) >> yp;
    op lrn(h, size=3, alpha=1.0) >> yh;
    return;
}
""", ("yx", "yc", "yp", "yh"), bound=40, lengths=(1, 2, 7, 8, 9, 40, 16, 17, 33)),
    # element-wise rows of a run-time length: a row of T broadcast over static rows, [T, T] (one run
    # of T * T), a column over rows of T, a run longer than a chunk at its bound (over the pool)
    DynamicCase("elementwise-rows", """
dynamic { x: f32[3, T]; r: f32[T]; c: f32[3, 1]; s: f32[T, T]; big: f32[3, T*512]; }
volatile { y: f32[3, T]; z: f32[3, T]; e: f32[3, T*512]; }
block entry {
    op add(x, r) >> y;
    op gelu(y) >> y;
    op mul(x, c) >> z;
    op relu(s, alpha=0.25) >> s;
    op sigmoid(big) >> e;
    return;
}
""", ("y", "z", "s", "e"), bound=40, lengths=(1, 7, 8, 40, 33)),
)


def run_lengths(sim: Simulator, model, graph, name: str, lengths, outputs, *, case: DynamicCase | None = None,
                rtol: float = 2e-5, atol: float = 2e-5) -> None:
    """Run `sim`'s library at each of `lengths` of the dynamic size `name` in one executor, each
    step's `outputs` against the reference bound at that length; the library must not change."""
    lib = sim.library.stat()
    ex = sim.make_executor()
    ref = Reference(model, graph, dynamic={name: int(sim.bound.dynamic[name])}).make_executor()
    rng = np.random.default_rng(7)
    for n in lengths:
        ex.set_sizes(**{name: n})
        ref.set_sizes(**{name: n})
        feed = inputs(ref.bound, rng, case)
        ex.insert(**feed)
        ref.insert(**feed)
        ex.run_step()
        ref.run_step()
        for out in outputs:
            want, got = ref.fetch(out), ex.fetch(out)
            assert got.shape == want.shape, (out, n)
            f16 = got.dtype == np.float16            # an f16 result may round across a step
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-3 if f16 else rtol,
                                       atol=2e-3 if f16 else atol, err_msg=f"{out} at {name}={n}")
    after = sim.library.stat()
    assert (after.st_ino, after.st_mtime_ns) == (lib.st_ino, lib.st_mtime_ns), "the library was rebuilt"


def run_case(case: DynamicCase, arch, tmp_path: Path, build_options: list[str] | None = None) -> Simulator:
    """Build `case` once for `arch` (with meson `build_options`) and run it at each of its lengths
    (run_lengths)."""
    model = case.write_model(tmp_path / f"{case.id}.oinf")
    sim = Simulator(model, case.graph, arch=arch, dynamic={"T": case.bound}, build_options=build_options,
                    outputs=set(case.outputs) if case.outputs_only else None)
    run_lengths(sim, model, case.graph, "T", case.lengths, case.outputs, case=case, atol=case.atol)
    return sim


# ---------------------------------------------------------------------------------------- examples

MLP = """
dynamic { x: f32[B, D]; }
constant { w: f32[D, H]; }
volatile { h: f32[B, H]; }
block entry { op matmul(x, w) >> h; op relu(h, alpha=0.0) >> h; return; }
"""

#: [B, 3, D] @ [D, H]: the B items' rows stacked into one product of 3B run-time rows
BATCHED = """
dynamic { x: f32[B, 3, D]; }
constant { w: f32[D, H]; }
volatile { h: f32[B, 3, H]; }
block entry { op matmul(x, w) >> h; op gelu(h) >> h; return; }
"""

#: [B, D] @ [D]: a matrix-vector product over run-time rows
MATVEC = """
dynamic { x: f32[B, D]; v: f32[D]; }
volatile { h: f32[B]; }
block entry { op matmul(x, v) >> h; return; }
"""


def write_mlp_model(path: Path) -> Path:
    """w: [8, 16]; B dynamic up to 32 by the model's metadata."""
    rng = np.random.default_rng(0)
    oi.write_oinf(path, tensors={"w": rng.standard_normal((8, 16)).astype(np.float32)},
                  sizevars={"B": 2, "D": 8, "H": 16}, metadata={"dynamic.B": 32})
    return path


def write_examples(out: Path) -> dict[str, tuple[Path, Path]]:
    """The CNN, the streaming conv (per frame and per chunk: T dynamic by its metadata) and the
    encoder (S dynamic by its metadata) as (graph, model)."""
    files = cnn.write(out)
    files["encoder"] = encoder.write(ENC, out, dynamic=True)
    return files


def mlp_batch(arch, model_path: Path) -> Simulator:
    model = oi.ModelLoader.open(model_path)
    sim = Simulator(model, MLP, arch=arch)
    run_lengths(sim, model, MLP, "B", [1, 7, 32, 5, 32, 1, 13], ["h"])
    return sim


def errors_and_stale_inputs(arch, model_path: Path) -> Simulator:
    """Sizes out of range and names that are not dynamic are errors; after a size change, an input
    it shapes must be set again (at its new shape) before the next step."""
    sim = Simulator(model_path, MLP, arch=arch)
    ex = sim.make_executor()
    for bad in (0, 33):
        with pytest.raises(ExecutionError, match="outside 1..32"):
            ex.set_sizes(B=bad)
    with pytest.raises(ExecutionError, match="not dynamic"):
        ex.set_sizes(D=4)
    ex.set_sizes(B=3)
    ex.insert(x=np.ones((3, 8), np.float32))
    ex.run_step()
    assert ex.fetch("h").shape == (3, 16)
    ex.set_sizes(B=4)                                   # x's size changed: it must be set again
    with pytest.raises(ExecutionError, match="not set before this step"):
        ex.run_step()
    with pytest.raises(ExecutionError):
        ex.insert(x=np.ones((3, 8), np.float32))       # the old shape
    return sim


def other_products(arch, model_path: Path, graph: str) -> Simulator:
    model = oi.ModelLoader.open(model_path)
    sim = Simulator(model, graph, arch=arch)
    run_lengths(sim, model, graph, "B", [1, 2, 32, 11], ["h"])
    return sim


def encoder_sequence(arch, files) -> Simulator:
    graph, path = files["encoder"]
    model, g = oi.ModelLoader.open(path), oi.load_graph(graph)
    sim = Simulator(model, g, arch=arch)
    assert sim.bound.dynamic == {"S": ENC.seq}     # from the model's metadata, no flag
    run_lengths(sim, model, g, "S", [1, 5, ENC.seq, 3, 2, ENC.seq], ["x", "pooled"])
    return sim


def cnn_batch(arch, files) -> Simulator:
    graph, path = files["cnn"]
    model, g = oi.ModelLoader.open(path), oi.load_graph(graph)
    sim = Simulator(model, g, arch=arch, dynamic={"N": 4})
    run_lengths(sim, model, g, "N", [1, 3, 4, 2], ["logits"])
    return sim


def stream_chunks(arch, files) -> Simulator:
    """The streaming window (examples/cnn.py `stream_chunk`): chunks of 1, 5, 16, 3 and 7 frames
    through one library, each chunk's states against the reference at that length and against
    the per-frame graph run frame by frame (an independent formulation of the same stream)."""
    graph, path = files["stream_chunk"]
    frame_graph, frame_path = files["stream"]
    sim = Simulator(path, oi.load_graph(graph), arch=arch)
    assert sim.bound.dynamic == {"T": 16}
    lib = sim.library.stat()
    ex = sim.make_executor()
    ref = Reference(path, oi.load_graph(graph)).make_executor()
    per_frame = Reference(frame_path, oi.load_graph(frame_graph)).make_executor()
    rng = np.random.default_rng(3)
    for t in (1, 5, 16, 3, 7):
        frames = rng.standard_normal((1, 8, t)).astype(np.float32)
        for e in (ex, ref):
            e.set_sizes(T=t)
            e.insert(frames=frames)
            e.run_step()
        np.testing.assert_allclose(ex.fetch("hs"), ref.fetch("hs"), rtol=2e-5, atol=2e-5, err_msg=f"T={t}")
        for k in range(t):
            per_frame.insert(frame=frames[:, :, k:k + 1])
            per_frame.run_step()
            np.testing.assert_allclose(ex.fetch("hs")[k], per_frame.fetch("h"), rtol=1e-4, atol=1e-5)
    after = sim.library.stat()
    assert (after.st_ino, after.st_mtime_ns) == (lib.st_ino, lib.st_mtime_ns), "the library was rebuilt"
    return sim


WINDOW = """
dynamic { x: f32[4]; }
persistent { K(i): f32[4] @table @fixed(i=9); }
volatile { y: f32[4]; win: f32[T, 4]; s: f32[4]; }
block entry {
    loop rep (i in 0..T) { op add(y, x) >> y; }     // a loop over the run-time T
    cache.write y >> K[T];                           // a cache index
    cache.read K[0..T] >> win;                       // the first T rows of a table
    op sum_axis(win, axes=[0]) >> s;
    return;
}
"""


def loops_and_table_windows(arch, tmp_path: Path) -> Simulator:
    """Each step: y = T * x, written at K[T]; the window of the first T rows and its sum, whose
    rows were written in earlier steps at other sizes (NumPy states the expected values)."""
    path = tmp_path / "w.oinf"
    oi.write_oinf(path, tensors={}, sizevars={"T": 3})
    sim = Simulator(path, WINDOW, arch=arch, dynamic={"T": 8})
    ex = sim.make_executor()
    ref = Reference(path, WINDOW, dynamic={"T": 8}).make_executor()
    table = np.zeros((9, 4), np.float32)
    for t in (1, 5, 8, 2, 7):
        x = np.arange(4, dtype=np.float32) + t
        table[t] = t * x
        for e in (ex, ref):
            e.set_sizes(T=t)
            e.insert(x=x)
            e.run_step()
            np.testing.assert_array_equal(e.fetch("y"), t * x)
            np.testing.assert_array_equal(e.fetch("win"), table[:t])
            np.testing.assert_array_equal(e.fetch("s"), table[:t].sum(0))
    return sim


READ_SETS = """
dynamic { x: f32[4]; n: i32; }
persistent { K(i): f32[4] @table @fixed(i=8); at: i32 @init(0); }
volatile { win: f32[P, 4]; s: f32[4]; d: f32[P, 4]; }
block entry {
    cache.write x >> K[at];
    cache.increment at;
    cache.read K[0..n] >> win;          // n rows: sets P
    op sum_axis(win, axes=[0]) >> s;
    op add(win, win) >> d;
    return;
}
"""


def read_sets_size(arch, tmp_path: Path) -> Simulator:
    """A scalar variable as a slice bound sets the dynamic size of the destination's dim: each step
    appends x, then reads the first n rows (n an input): P = n, the window's sum and double at
    that size (NumPy states the values); n = 0 (an empty window) and n = 9 (past the table) are
    errors of the step on both engines."""
    path = tmp_path / "rs.oinf"
    oi.write_oinf(path, tensors={}, sizevars={"P": 8}, metadata={"dynamic.P": 8})
    sim = Simulator(path, READ_SETS, arch=arch)
    ex, ref = sim.make_executor(), Reference(path, READ_SETS).make_executor()
    table = np.zeros((8, 4), np.float32)
    for step, n in enumerate((1, 2, 2, 4, 3)):
        x = np.arange(4, dtype=np.float32) * (step + 1)
        table[step] = x
        for e in (ex, ref):
            e.insert(x=x, n=np.array(n, np.int32))
            e.run_step()
            assert e.sizes() == {"P": n}
            np.testing.assert_array_equal(e.fetch("win"), table[:n])
            np.testing.assert_array_equal(e.fetch("s"), table[:n].sum(0))
            np.testing.assert_array_equal(e.fetch("d"), 2 * table[:n])
    for n, message in ((0, "outside 1..8"), (9, "outside 0..8|past its current size 8")):
        for e in (ex, ref):
            e.insert(x=np.zeros(4, np.float32), n=np.array(n, np.int32))
            with pytest.raises(ExecutionError, match=message):
                e.run_step()
    return sim


def decoder_window(arch, tmp_path: Path) -> Simulator:
    """examples/decoder.py --window: each step's attention reads the rows in use, `cache.read
    Kc[l, 0..pos] >> kc` with kc: [P, 1, KV], the read setting P (no set_sizes from the host).
    16 greedy steps (the whole cache) match the reference, and the logits of the masked
    whole-cache graph (the same weights, an independent formulation); after each step P is the
    number of tokens cached."""
    cfg = decoder.SIZES["test"]
    g, m = decoder.write(cfg, tmp_path, window=True)
    gs, ms = decoder.write(cfg, tmp_path)
    sim = Simulator(m, g, arch=arch)
    assert sim.bound.dynamic == {"P": cfg.max_seq}
    ex, ref = sim.make_executor(), Reference(m, g).make_executor()
    masked = Reference(ms, gs).make_executor()
    token = 3
    for t in range(cfg.max_seq):
        feed = {"token": np.array([token], np.int32)}
        for e in (ex, ref):
            e.insert(**feed)
            e.run_step()
            assert e.sizes() == {"P": t + 1}
        masked.insert(**feed)
        masked.run_step()
        np.testing.assert_allclose(ex.fetch("logits"), ref.fetch("logits"), rtol=1e-4, atol=1e-4, err_msg=f"step {t}")
        np.testing.assert_allclose(ref.fetch("logits"), masked.fetch("logits"), rtol=1e-4, atol=1e-4)
        assert ex.fetch("kc").shape == (t + 1, 1, cfg.kv_dim)
        token = int(ref.fetch("next")[0])
    assert int(ex.fetch("next")[0]) == int(masked.fetch("next")[0])
    return sim
