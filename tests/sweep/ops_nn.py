"""Sweep cases of the linear-algebra and nn ops: matmul (GEMV, GEMM, transposed and batched
operands, 1-D operands, pre-packed constant B, the pool's thresholds), dequant_matmul, conv1d /
conv2d (padding, stride, dilation and groups crossed; output columns and channels at every tile
and vector width +-1), the 2-D pools, sdpa and rope."""

from __future__ import annotations

import numpy as np

from openinfer.dtypes import lookup
from openinfer.targets.c.kernels import nn as cnn
from openinfer.targets.x86 import renderer as avx

from .case import SweepCase, single
from .pick import Picker
from .widths import around


def matmul() -> list[SweepCase]:
    pick, out = Picker("matmul"), []

    def mm(m, k, n, t="f32", *, ta=False, tb=False, a_batch=(), b_batch=(), attrs=None, const=False, **ext):
        a = (*a_batch, *((k, m) if ta else (m, k)))
        b = (*b_batch, *((n, k) if tb else (k, n)))
        at = {**({"transpose_a": True} if ta else {}), **({"transpose_b": True} if tb else {}), **(attrs or {})}
        out.append(single("matmul", "matmul", [(t, a), (t, b)], at,
                          extents={"m": m, "k": k, "n": n, **ext}, const=(1,) if const else (), sums=True,
                          small_ints=True))

    # the GEMV paths: up to `skinny` rows of A, columns and K at every vector width +-1
    for n in [1, *around("lanes8", "lanes16"), 97]:
        mm(pick.one_of([1, 2, 3, 4]), pick.prime(), n)
    for k in [1, *around("vecmat_ku", "skinny")]:
        mm(pick.one_of([1, 3, 4]), k, pick.prime())
    for m in around("skinny", "vk_gemv_m"):
        mm(m, pick.prime(), pick.one_of(around("lanes8", "lanes16")))
    # the GEMM: rows around each microkernel's height, columns around each panel's width, K around its block
    for m in around("gemm_mr_avx2", "gemm_mr_avx512", "gemm_mr_neon"):
        mm(m, pick.prime(), pick.one_of(around("gemm_nr_avx2", "gemm_nr_avx512", "gemm_nr_neon")))
    for n in around("gemm_nr_avx2", "gemm_nr_avx512", "gemm_nr_neon"):
        mm(pick.one_of([5, 7, 9, 13]), pick.prime(), n)
    for k in around("gemm_kc"):
        mm(pick.one_of([6, 11]), k, pick.one_of([17, 33]))
    for d in around("vk_gemm_tile"):
        mm(d, pick.prime(), d)
    # operands read transposed, as GEMV and as GEMM; batches broadcast either way; 1-D operands
    for m, n in ((1, 17), (3, 33), (13, 31), (7, 9)):
        mm(m, pick.prime(), n, ta=True)
        mm(m, pick.prime(), n, tb=True)
        mm(m, pick.prime(), n, ta=True, tb=True)
    mm(5, 11, 17, a_batch=(3,), b_batch=())
    mm(1, 11, 17, a_batch=(2, 3), b_batch=(3,))
    mm(9, 7, 16, a_batch=(2, 1), b_batch=(3,))
    mm(2, 13, 9, a_batch=(), b_batch=(3,))
    for shapes in (((13,), (13, 17)), ((9, 13), (13,)), ((17,), (17,)), ((13,), (2, 13, 9))):
        out.append(single("matmul", "matmul", [("f32", shapes[0]), ("f32", shapes[1])], extents={}, sums=True))
    # a model constant as B: the AVX targets pack it at create() (openinfer/synth/prepack.py)
    for m, k, n in ((7, 13, 17), (6, 129, 33), (9, 5, 31)):
        mm(m, k, n, const=True)
    # other dtypes: f64 (portable), f16 / bf16 with an f32 accumulator (the AVX GEMV paths), integers
    for m, k, n in ((3, 7, 9), (7, 11, 17)):
        mm(m, k, n, "f64")
        mm(m, k, n, "i32")
    for t in ("f16", "bf16"):
        for m, k, n in ((1, 13, 17), (3, 7, 9)):
            mm(m, k, n, t, attrs={"acc": lookup("f32")})
    mm(4, 9, 15, "i8", attrs={"acc": lookup("i32")})
    # the pool's thresholds: multiply-adds of the GEMM, bytes a GEMV streams, a narrow B split along K
    side = round(avx._PAR_MACS ** (1 / 3))
    mm(side, side - 1, side)
    mm(side, side + 1, side)
    k_stream = avx._PAR_STREAM_BYTES // 4 // 256
    mm(1, k_stream, 255)
    mm(1, k_stream, 257)
    mm(1, 2049, 97)
    return out


def dequant() -> list[SweepCase]:
    pick, out = Picker("dequant"), []
    for j, wt in enumerate(("i8", "u8", "i4", "u4") * 3):
        m = [1, *around("dequant_mr"), *around("vk_gemv_m")][j % 7]
        n = pick.one_of(around("lanes8", "lanes16"))
        k = pick.prime()
        per_tensor = j % 3 == 2
        ins = [("f32", (m, k) if m > 1 or j % 2 else (k,)), (wt, (k, n)), ("f32", (1,) if per_tensor else (n,))]
        if j % 2:
            ins.append(("i32", (1,) if per_tensor else (n,)))
        rng = np.random.default_rng(j)
        values = {2: rng.uniform(0.01, 0.2, ins[2][1]).astype(np.float32)}
        if j % 2:
            values[3] = rng.integers(-3, 4, ins[3][1]).astype(np.int32)
        out.append(single("dequant", "dequant_matmul", ins, extents={"m": m, "n": n}, values=values, sums=True))
    return out


def _conv_input(o: int, k: int, s: int, d: int, pads: int, extra: int) -> int:
    """An input extent that gives `o` outputs for kernel k, stride s, dilation d and `pads`
    padding cells in all (plus `extra` < s cells the last window does not reach)."""
    return max(1, (o - 1) * s + d * (k - 1) + 1 - pads + extra)


#: (kernel h, w, padding, stride, dilation): padding as the op takes it (an int, [h, w], or
#: [top, left, bottom, right]); H-only and W-only padding, asymmetric padding
_CONV2D = [((3, 3), 1, 1, 1), ((3, 3), 0, 1, 1), ((1, 1), 0, 1, 1), ((3, 1), [1, 0], 1, 1), ((7, 1), [3, 0], 1, 1),
           ((3, 3), [1, 0], 1, 1), ((1, 3), [0, 1], 1, 1), ((5, 5), 2, 2, 1), ((3, 3), [1, 0, 2, 1], [2, 1], 1),
           ((2, 3), [0, 2, 1, 0], 3, 1), ((3, 3), 2, 1, 2), ((3, 2), 1, [1, 2], [2, 1]), ((7, 7), 3, 2, 1)]


def conv() -> list[SweepCase]:
    pick, out = Picker("conv"), []
    ows = around("lanes4", "lanes8", "lanes16", "conv_owt_avx2", "conv_owt_neon")
    ocs = [1, *around("conv_ocb_avx2", "conv_ocb_avx512", "conv_ocb_neon", "conv_ocb_max")]
    for j, ow in enumerate([*ows, *ows]):
        (kh, kw), pad, stride, dil = _CONV2D[j % len(_CONV2D)]
        groups = (1, 1, 2, 3)[j % 4]
        oc = ocs[j % len(ocs)]
        if oc % groups:
            oc = oc * groups
        cg = pick.one_of([1, 2, 3, 5])
        t = "f32" if j % 6 else "f64"
        out.append(_conv2d(t, pick.one_of([1, 2]), cg * groups, oc, pick.one_of([1, 2, 5, 7, 14]), ow,
                           (kh, kw), pad, stride, dil, groups, pick, bias=j % 3 != 1))
    for oc in ocs:                                               # every channel tail, 14 x 14 (ResNet's 3x3 pad 1)
        out.append(_conv2d("f32", 1, pick.one_of([3, 8]), oc, 14, 14, (3, 3), 1, 1, 1, 1, pick))
    out.append(_conv2d("f32", 1, 8, 8, 14, 14, (3, 3), 1, 1, 1, 8, pick))       # depthwise
    # GCC 12.2 -O3 miscompiled these (tests/synth/test_compiler_matrix.py): 64 channels on 14x14,
    # Inception's 7x1 and 1x7 padded on one axis, a 3x3 padded on H only
    out.append(_conv2d("f32", 1, 64, 64, 14, 14, (3, 3), 1, 1, 1, 1, pick))
    out.append(_conv2d("f32", 1, 4, 8, 17, 17, (7, 1), [3, 0], 1, 1, 1, pick))
    out.append(_conv2d("f32", 1, 4, 8, 17, 17, (1, 7), [0, 3], 1, 1, 1, pick))
    out.append(_conv2d("f32", 2, 3, 7, 12, 14, (3, 3), [1, 0], 1, 1, 1, pick))
    out.append(_conv2d("f16", 1, 3, 5, 6, 9, (3, 3), 1, 1, 1, 1, pick))         # the direct loops
    # the pool: past the parallel threshold, in row bands (small weights, each claim padding its
    # rows; two images; unpadded) and in the channel-block order (weights past the band limit)
    band_oc = cnn._BAND_WEIGHT_BYTES // 4 // (16 * 9)
    out.append(_conv2d("f32", 1, 16, band_oc, 31, 33, (3, 3), 1, 1, 1, 1, pick))
    out.append(_conv2d("f32", 1, 16, band_oc + 1, 31, 33, (3, 3), 1, 1, 1, 1, pick))
    out.append(_conv2d("f32", 2, 8, 12, 17, 31, (3, 3), [1, 1, 2, 0], [2, 1], [1, 2], 2, pick))
    out.append(_conv2d("f32", 1, 16, 24, 47, 47, (1, 1), 0, 1, 1, 1, pick))
    out.append(_conv2d("f64", 1, 12, 16, 29, 17, (3, 3), 1, 1, 1, 1, pick))
    for j, ow in enumerate(around("lanes4", "lanes8", "lanes16", "conv_owt_neon")):
        (kh, _), pad, stride, dil = _CONV2D[(3 * j) % len(_CONV2D)]
        pad1 = pad if isinstance(pad, int) else [pad[0], pad[-1]] if len(pad) == 4 else pad[0]
        stride1, dil1 = (stride if isinstance(stride, int) else stride[0]), (dil if isinstance(dil, int) else dil[0])
        groups = (1, 2)[j % 2]
        oc = ocs[(j + 3) % len(ocs)] * groups
        c = pick.one_of([1, 3]) * groups
        pads = pad1 * 2 if isinstance(pad1, int) else sum(pad1)
        length = _conv_input(ow, kh, stride1, dil1, pads, j % stride1)
        ins = [("f32" if j % 4 else "f64", (pick.one_of([1, 2]), c, length)), ("f32" if j % 4 else "f64",
                                                                                 (oc, c // groups, kh))]
        if j % 3:
            ins.append((ins[0][0], (oc,)))
        out.append(single("conv", "conv1d", ins, {"padding": pad1, "stride": stride1, "dilation": dil1,
                                                  "groups": groups},
                          extents={"ow": ow, "oc": oc}, sums=True))
    return out


def _conv2d(t, n, c, oc, oh, ow, k, pad, stride, dil, groups, pick, *, bias=True) -> SweepCase:
    kh, kw = k
    p = [pad] * 4 if isinstance(pad, int) else (list(pad) * 2 if len(pad) == 2 else list(pad))
    s = [stride] * 2 if isinstance(stride, int) else list(stride)
    d = [dil] * 2 if isinstance(dil, int) else list(dil)
    h = _conv_input(oh, kh, s[0], d[0], p[0] + p[2], pick.one_of(range(s[0])))
    w = _conv_input(ow, kw, s[1], d[1], p[1] + p[3], pick.one_of(range(s[1])))
    ins = [(t, (n, c, h, w)), (t, (oc, c // groups, kh, kw))] + ([(t, (oc,))] if bias else [])
    attrs = {"padding": pad, "stride": stride, "dilation": dil, "groups": groups}
    return single("conv", "conv2d", ins, attrs, extents={"ow": ow, "oc": oc // groups}, sums=True)


def pools() -> list[SweepCase]:
    pick, out = Picker("pool"), []
    shapes = [(2, 2, 0, False), ((3, 2), (2, 1), 1, False), (3, 1, [1, 0, 0, 1], False), (3, 2, 1, True),
              ((2, 3), 1, 0, False), (3, 3, 1, False), (2, 1, 0, True)]
    for j, ow in enumerate([1, *around("lanes4", "lanes8", "lanes16"), 29]):
        for op in ("max_pool2d", "avg_pool2d"):
            kernel, stride, pad, count = shapes[(j + (op == "avg_pool2d")) % len(shapes)]
            ks = [kernel] * 2 if isinstance(kernel, int) else list(kernel)
            ss = ks if stride is None else [stride] * 2 if isinstance(stride, int) else list(stride)
            ps = [pad] * 4 if isinstance(pad, int) else list(pad)
            h = _conv_input(pick.one_of([1, 3, 6]), ks[0], ss[0], 1, ps[0] + ps[2], 0)
            w = _conv_input(ow, ks[1], ss[1], 1, ps[1] + ps[3], pick.one_of(range(ss[1])))
            attrs = {"kernel": kernel, "stride": stride, "padding": pad}
            if op == "avg_pool2d" and count:
                attrs["count_include_pad"] = True
            x = (pick.one_of([1, 2]), pick.small(), h, w)
            t = "f32" if j % 5 else "f64"
            v = np.random.default_rng(j).normal(0, 1, x).astype(np.float32 if t == "f32" else np.float64)
            if op == "max_pool2d" and j % 3 == 0:
                v.reshape(-1)[::7] = np.nan          # NaN propagates through the windows that hold one
            out.append(single("pool", op, [(t, x)], attrs, extents={"ow": ow}, values={0: v}))
    return out


def sdpa() -> list[SweepCase]:
    pick, out = Picker("sdpa"), []
    keys = [1, *around("lanes8", "lanes16", "sdpa_tile_keys", "sdpa_tile_keys_neon", "vk_sdpa_key_lanes"), 97]
    queries = [1, *around("sdpa_rows", "sdpa_tile_rows")]
    for j, sk in enumerate(keys):
        sq = queries[j % len(queries)]
        d = pick.one_of(around("lanes8", "lanes16"))
        dv = pick.one_of([1, 7, 8, 9, 16, 17])
        h, hk = pick.one_of([(1, 1), (2, 2), (4, 2), (3, 1)])
        b = pick.one_of([(), (2,)])
        t = "f32" if j % 5 else "f64"
        ins = [(t, (*b, h, sq, d)), (t, (*b, hk, sk, d)), (t, (*b, hk, sk, dv))]
        attrs = {"causal": j % 2 == 1}
        values = {}
        if j % 4 == 2:                  # a bool mask broadcast over heads (a row with no key: zeros)
            ins.append(("bool", (sq, sk)))
            keep = np.random.default_rng(j).random((sq, sk)) < 0.7
            keep[0] = False
            values[3] = keep
        elif j % 4 == 3:                # an additive mask
            ins.append((t, (1, sq, sk)))
        if j % 3 == 0:
            attrs["scale"] = 0.3
        out.append(single("sdpa", "sdpa", ins, attrs, extents={"sk": sk, "sq": sq, "d": d}, values=values))
    for sk in (cnn.SDPA_STACK_KEYS - 1, cnn.SDPA_STACK_KEYS + 1):      # scores on the stack, then online
        out.append(single("sdpa", "sdpa", [("f32", (2, 1, 8)), ("f32", (2, sk, 8)), ("f32", (2, sk, 8))],
                          extents={"sk": sk}))
    return out


def rope() -> list[SweepCase]:
    pick, out = Picker("rope"), []
    for j, half in enumerate([1, *around("lanes4", "lanes8", "lanes16")]):
        d = 2 * half
        s, h = pick.small(), pick.one_of([1, 2, 3])
        t = "f32" if j % 4 else "f64"
        attrs = {"interleaved": j % 2 == 1, **({"theta": 500.0} if j % 3 == 0 else {})}
        if j % 3 == 2:
            ins, values = [(t, (h, d)), ("i32", ())], {1: np.array(pick.prime(), np.int32)}
        else:
            ins, values = [(t, (s, h, d)), ("i32", (s,))], {1: np.arange(s, dtype=np.int32) * 3 + 1}
        out.append(single("rope", "rope", ins, attrs, extents={"d": half}, values=values, inplace=j % 2 == 0))
    return out


def lrn() -> list[SweepCase]:
    """LRN over planes of every vector width +-1 (the AVX kernel's lanes run over a channel's
    positions), windows wider and narrower than the channels, f32 and f64."""
    pick, out = Picker("lrn"), []
    for j, plane in enumerate([1, *around("lanes4", "lanes8", "lanes16"), 97]):
        h = next((d for d in (3, 2) if plane % d == 0 and plane > d), 1)
        size = (1, 3, 5, 7)[j % 4]
        c = pick.one_of([1, 2, 3, 5, 8, 13])
        t = "f32" if j % 5 else "f64"
        attrs = {"size": size, **({"alpha": 0.02, "beta": 0.5, "bias": 2.0} if j % 3 == 1 else {})}
        out.append(single("pool", "lrn", [(t, (pick.one_of([1, 2]), c, h, plane // h))], attrs,
                          extents={"plane": plane}))
    return out
