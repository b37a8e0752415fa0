"""Sweep cases of the fused paths (openinfer/synth/fusion.py, views.py): several statements whose
intermediate values die, so that a target that renders the path computes them as one kernel.
Every target runs every case (fused where it renders the path, as separate kernels where it does
not), and `PATHS` says, per path, how a kernel request that took it looks, so the sweep can check
that the targets that render it did (tests/sweep/test_shape_sweep.py)."""

from __future__ import annotations

from collections.abc import Callable

from openinfer.dtypes import lookup
from openinfer.targets.c.kernels import nn as cnn

from .case import SweepCase, Var, call, draw, rng_for, widths_of
from .pick import Picker
from .widths import around

#: fused path -> (targets rendering it, how a kernel request that took it looks)
PATHS: dict[str, tuple[tuple[str, ...], Callable]] = {
    "chain": (("generic", "avx2", "avx512", "neon", "v82", "vulkan"), lambda r: r.op == "fused"),
    "matmul+epilogue": (("avx2", "avx512", "neon", "v82", "vulkan"), lambda r: r.op in ("matmul", "dequant_matmul")
                        and r.epilogue is not None),
    "conv+epilogue": (("avx2", "avx512", "neon", "v82"), lambda r: r.op in ("conv1d", "conv2d")
                      and r.epilogue is not None),
    "conv+pool": (("avx2", "avx512", "neon", "v82"), lambda r: r.op == "conv2d" and r.pool is not None),
    "norm+gemv": (("vulkan",), lambda r: r.prologue is not None and r.prologue.op == "rms_norm"),
    "elementwise+gemv": (("vulkan",), lambda r: r.prologue is not None and r.prologue.op != "rms_norm"),
    "gemv+rope": (("vulkan",), lambda r: r.epilogue is not None and r.epilogue.op == "rope"),
    "transpose+sdpa": (("vulkan",), lambda r: bool(r.input_perms)),
}


class _Builder:
    """Statements over named variables, for one fused case."""

    def __init__(self, path: str, family: str, desc: str):
        self.path, self.family, self.desc = path, family, f"{path}: {desc}"
        self.rng = rng_for(self.desc)
        self.vars: list[Var] = []
        self.body: list[str] = []
        self.ops: list[str] = []

    def var(self, name: str, t: str, shape, role: str, **draw_kw) -> str:
        value = draw(lookup(t), tuple(shape), self.rng, **draw_kw) if role in ("in", "inout", "const") else None
        self.vars.append(Var(name, t, tuple(shape), role, value))
        return name

    def op(self, op: str, args: list[str], out: str, **attrs) -> None:
        self.ops.append(op)
        self.body.append(call(op, args, attrs, out))

    def case(self, extents: dict[str, int], sums: bool = False) -> SweepCase:
        return SweepCase(self.desc, self.family, tuple(dict.fromkeys(self.ops)), self.path, tuple(self.vars),
                         tuple(self.body), covers=widths_of(self.family, extents), sums=sums)


def chains() -> list[SweepCase]:
    """Element-wise chains (one kernel on every target): bias and per-row operands, transcendental
    steps, in place, rows of every vector width +-1."""
    pick, out = Picker("chain"), []
    for j, n in enumerate([1, *around("lanes4", "lanes8", "lanes16"), 97]):
        r = pick.small()
        b = _Builder("chain", "elementwise", f"[{r},{n}] #{j}")
        x = b.var("x", "f32", (r, n), "inout" if j % 3 == 0 else "in")
        bias = b.var("b", "f32", (n,) if j % 2 else (r, 1), "in")
        y = x if j % 3 == 0 else b.var("y", "f32", (r, n), "out")
        t = b.var("t", "f32", (r, n), "tmp") if y != x else x
        b.op("add", [x, bias], t)
        b.op(("mul", "sub", "div")[j % 3], [t, bias], t)
        b.op(("relu", "exp", "tanh", "silu", "gelu", "sigmoid")[j % 6], [t], y)
        out.append(b.case({"n": n}))
    return out


def matmul_epilogues() -> list[SweepCase]:
    """A matmul (GEMV and GEMM shapes, K around the GEMM's block) or a dequantizing GEMV, then a
    bias and an activation, or a residual that reads the output's old value (the GEMV paths)."""
    pick, out = Picker("matmul+epilogue"), []
    ns = [*around("lanes8", "lanes16", "gemm_nr_avx2", "gemm_nr_avx512", "gemm_nr_neon"), 1]
    shapes = [([1, 3, *around("gemm_mr_avx2"), 4, 9][j % 7], pick.prime(), n) for j, n in enumerate(ns)]
    shapes += [(pick.one_of([2, 7]), k, pick.one_of([9, 17])) for k in around("gemm_kc")]
    for j, (m, k, n) in enumerate(shapes):
        b = _Builder("matmul+epilogue", "matmul", f"m{m} k{k} n{n} #{j}")
        a = b.var("a", "f32", (m, k), "in")
        w = b.var("w", "f32", (k, n), "const" if j % 4 == 1 else "in")
        bias = b.var("b", "f32", (n,), "in")
        if j % 3 == 2 and m <= 4:           # residual: the product added to the output's old value
            r = b.var("r", "f32", (m, n), "inout")
            t = b.var("t", "f32", (m, n), "tmp")
            b.op("matmul", [a, w], t)
            b.op("add", [r, t], r)
        else:
            y = b.var("y", "f32", (m, n), "out")
            b.op("matmul", [a, w], y)
            b.op("add", [y, bias], y)
            b.op(("relu", "gelu", "silu")[j % 3], [y], y)
        out.append(b.case({"n": n, "m": m, "k": k}, sums=True))
    for j, wt in enumerate(("i8", "u4", "i4", "u8")):
        n = around("lanes8", "lanes16")[j]
        b = _Builder("matmul+epilogue", "dequant", f"{wt} n{n}")
        x = b.var("x", "f32", (1 + j % 3, 13), "in")
        w = b.var("w", wt, (13, n), "in")
        s = b.var("s", "f32", (n,), "in", positive=True, scale=0.05)
        y = b.var("y", "f32", (1 + j % 3, n), "out")
        b.op("dequant_matmul", [x, w, s], y)
        b.op("add", [y, s], y)
        b.op("silu", [y], y)
        out.append(b.case({"n": n, "m": 1 + j % 3}, sums=True))
    return out


def conv_paths() -> list[SweepCase]:
    """A conv2d and its ReLU (the epilogue), alone and then with a pool whose windows tile it (the
    fold): output columns and channels at every vector and tile width +-1, serial, in row bands
    (small weights) and in the channel-block order (large ones), padded or not, f32 and f64; and a
    pool that must stay a kernel of its own (overlapping windows)."""
    pick, out = Picker("conv+pool"), []
    ows = around("lanes4", "lanes8", "lanes16", "conv_owt_avx2", "conv_owt_neon")
    ocs = [1, *around("conv_ocb_avx2", "conv_ocb_avx512", "conv_ocb_neon", "conv_ocb_max")]
    band_oc = cnn._BAND_WEIGHT_BYTES // 4 // (16 * 9)
    # (batch, channels, output channels, output columns (pooled), pooled): the last three are past
    # the pool's threshold, in the channel-block order, then in row bands over two images
    configs = [(pick.one_of([1, 2]), pick.one_of([1, 3, 5]), ocs[j % len(ocs)], ow, pooled)
               for pooled in (True, False) for j, ow in enumerate(ows)]
    configs += [(1, 16, 2 * band_oc, 20, True), (2, 16, band_oc, 15, True), (1, 16, band_oc, 33, False)]
    for j, (n, c, oc, ow, pooled) in enumerate(configs):
        pool_k = (2, 2) if j % 3 else (2, 3) if j % 2 else (3, 2)
        pad = 1 if j % 2 == 0 else 0
        kh = 3
        t = "f64" if j % 7 == 6 else "f32"
        oh_conv = pool_k[0] * pick.one_of([1, 2, 5])
        ow_conv = pool_k[1] * ow if pooled else ow
        h, w = oh_conv + kh - 1 - 2 * pad, ow_conv + kh - 1 - 2 * pad
        path = "conv+pool" if pooled else "conv+epilogue"
        b = _Builder(path, "conv", f"{t} n{n} c{c} oc{oc} {h}x{w} pad{pad} pool{list(pool_k)} #{j}")
        x = b.var("x", t, (n, c, h, w), "in")
        wt = b.var("w", t, (oc, c, kh, kh), "in")
        bias = b.var("b", t, (oc,), "in")
        a = b.var("a", t, (n, oc, oh_conv, ow_conv), "tmp" if pooled else "out")
        b.op("conv2d", [x, wt, bias], a, padding=pad)
        b.op("relu", [a], a)
        if pooled:
            p = b.var("p", t, (n, oc, oh_conv // pool_k[0], ow), "out")
            b.op("max_pool2d" if j % 2 else "avg_pool2d", [a], p, kernel=list(pool_k))
        out.append(b.case({"ow": ow, "ow_conv": ow_conv, "oc": oc}, sums=True))
    # a pool whose windows overlap stays a kernel of its own after the fused conv + ReLU
    b = _Builder("conv+epilogue", "conv", "overlapping pool")
    x, wt = b.var("x", "f32", (1, 3, 12, 19), "in"), b.var("w", "f32", (5, 3, 3, 3), "in")
    a, p = b.var("a", "f32", (1, 5, 12, 19), "tmp"), b.var("p", "f32", (1, 5, 5, 9), "out")
    b.op("conv2d", [x, wt], a, padding=1)
    b.op("relu", [a], a)
    b.op("max_pool2d", [a], p, kernel=3, stride=2)
    out.append(b.case({"ow": 19}, sums=True))
    return out


def gemv_prologues() -> list[SweepCase]:
    """A decoder layer's fused paths (the Vulkan GEMVs): an RMS norm read only by projections, an
    element-wise gate read only by the down projection, a rotated projection, and a cache read
    transposed into sdpa."""
    pick, out = Picker("gemv"), []
    for j, d in enumerate([*around("lanes8", "lanes16"), 31]):
        m = [*around("skinny", "vk_gemv_m"), 1][j % 7]
        k = 2 * pick.one_of([5, 7, 8, 9, 16, 17])
        b = _Builder("norm+gemv", "gemv", f"m{m} k{k} n{d}")
        x = b.var("x", "f32", (m, k), "in")
        g = b.var("g", "f32", (k,), "in")
        h = b.var("h", "f32", (m, k), "tmp")
        ws = [b.var(f"w{i}", "f32", (k, d), "in") for i in range(2)]
        ys = [b.var(f"y{i}", "f32", (m, d), "out") for i in range(2)]
        b.op("rms_norm", [x, g], h)
        for w, y in zip(ws, ys, strict=True):
            b.op("matmul", [h, w], y)
        out.append(b.case({"n": d, "m": m}, sums=False))

        b = _Builder("elementwise+gemv", "gemv", f"m{m} k{k} n{d}")
        gate, up = b.var("g", "f32", (m, k), "in"), b.var("u", "f32", (m, k), "in")
        t = b.var("t", "f32", (m, k), "tmp")
        w, y = b.var("w", "f32", (k, d), "in"), b.var("y", "f32", (m, d), "out")
        b.op("silu", [gate], t)
        b.op("mul", [t, up], t)
        b.op("matmul", [t, w], y)
        out.append(b.case({"n": d, "m": m}, sums=True))
    for half in [1, *around("lanes4", "lanes8", "lanes16")]:
        heads, dh, k = pick.one_of([1, 2, 3]), 2 * half, pick.prime()
        b = _Builder("gemv+rope", "rope", f"k{k} heads{heads} dh{dh}")
        x, w = b.var("x", "f32", (1, k), "in"), b.var("w", "f32", (k, heads * dh), "in")
        q = b.var("q", "f32", (1, heads * dh), "tmp")
        qh = b.var("qh", "f32", (heads, dh), "out")
        pos = b.var("pos", "i32", (), "in", small_ints=True)
        b.op("matmul", [x, w], q)
        b.op("reshape", [q], qh)
        b.op("rope", [qh, pos], qh, theta=10000.0)
        out.append(b.case({"d": half}))
    for sk in [1, *around("lanes8", "lanes16", "vk_sdpa_key_lanes"), 97]:
        heads, dk = pick.one_of([1, 2, 3]), pick.one_of([8, 16, 17])
        b = _Builder("transpose+sdpa", "decode", f"sk{sk} dk{dk} heads{heads}")
        q = b.var("q", "f32", (heads, 1, dk), "in")
        kc, vc = b.var("kc", "f32", (sk, heads, dk), "in"), b.var("vc", "f32", (sk, heads, dk), "in")
        kt, vt = b.var("kt", "f32", (heads, sk, dk), "tmp"), b.var("vt", "f32", (heads, sk, dk), "tmp")
        y = b.var("y", "f32", (heads, 1, dk), "out")
        b.op("transpose", [kc], kt, perm=[1, 0, 2])
        b.op("transpose", [vc], vt, perm=[1, 0, 2])
        b.op("sdpa", [q, kt, vt], y)
        out.append(b.case({"sk": sk, "dk": dk}))
    return out


def all_fused() -> list[SweepCase]:
    return [*chains(), *matmul_epilogues(), *conv_paths(), *gemv_prologues()]

