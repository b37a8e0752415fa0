"""Sweep cases of the integer-only int8 ops (TFLite's int8 kernels) and `pad`: channel counts and
rows at every vector width -1 / +0 / +1 (a kernel vectorising over the channels, NHWC's innermost
axis, meets its tails there), with the requantization inputs drawn valid (multipliers in
[2^30, 2^31), shifts that keep outputs off the clamp) and the attributes TFLite's Prepare would
compute (openinfer/tflite/quantization.py)."""

from __future__ import annotations

import numpy as np

from openinfer.tflite import quantization as Q

from .case import SweepCase, single
from .pick import Picker
from .widths import around


def _requant(rng: np.random.Generator, n: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    return (rng.integers(1 << 30, (1 << 31) - 1, n).astype(np.int32), rng.integers(lo, hi + 1, n).astype(np.int32))


def quantized() -> list[SweepCase]:
    pick, out = Picker("quantized"), []
    rng = np.random.default_rng(41)
    for j, c in enumerate([1, *around("lanes4", "lanes8", "lanes16")]):
        h, w = pick.one_of([1, 2, 3, 5]), pick.one_of([1, 3, 4, 7])
        o = pick.one_of([1, 3, 4, 8, 9, 17])
        ext = {"c": c}
        mult, shift = _requant(rng, o, -9, -6)
        depthwise = j % 3 == 1
        wshape = (c, 3, 3, 1) if depthwise else (o, 3, 3, c)
        n_out = c if depthwise else o
        if depthwise:
            mult, shift = _requant(rng, c, -7, -5)
        attrs = {"padding": 1, "x_zero": pick.one_of([-128, 0, 83]), "y_zero": pick.one_of([-5, 0, 17]),
                 **({"groups": c} if depthwise else {}), **({"stride": 2} if j % 4 == 2 else {})}
        out.append(single("elementwise", "qconv2d", [("i8", (1, h, w, c)), ("i8", wshape), ("i32", (n_out,)),
                                                      ("i32", (n_out,))], attrs, extents=ext,
                          values={2: mult, 3: shift}))
        scale = rng.uniform(2e-4, 2e-3, o)
        out.append(single("elementwise", "qlinear", [("i8", (pick.one_of([1, 2]), c)), ("i8", (o, c)), ("f64", (o,)),
                                                     ("i32", (o,))], {"x_zero": -3, "y_zero": 9}, extents=ext,
                          values={2: scale, 3: rng.integers(-2000, 2000, o).astype(np.int32)}))
        pool_attrs = {"kernel": [min(2, h), min(2, w)], "stride": 1}
        for op in ("qavg_pool2d", "qmax_pool2d"):
            out.append(single("elementwise", op, [("i8", (1, h, w, c))], pool_attrs, extents=ext))
        add = {"a_zero": 3, "b_zero": -7, "y_zero": 1, **Q.add_params(0.05, 0.11, 0.09)}
        for op in ("qadd", "qsub"):
            out.append(single("elementwise", op, [("i8", (2, c)), ("i8", (c,))], add, extents=ext))
        m, s = Q.mul_params(0.05, 0.11, 0.3)
        out.append(single("elementwise", "qmul", [("i8", (2, c)), ("i8", (2, c))],
                          {"a_zero": 1, "b_zero": -2, "y_zero": 4, "multiplier": m, "shift": s}, extents=ext))
        m, s = Q.mean_params(0.05, 0.04)
        out.append(single("elementwise", "qmean", [("i8", (1, h, w, c))],
                          {"axes": [1, 2], "keepdims": j % 2 == 0, "x_zero": 2, "y_zero": -1, "multiplier": m,
                           "shift": s}, extents=ext))
        out.append(single("elementwise", "qsoftmax", [("i8", (2, c))], Q.softmax_params(1.0, 0.1), extents=ext))
        out.append(single("elementwise", "qlut", [("i8", (3, c)), ("i8", (256,))], extents=ext))
        out.append(single("elementwise", "qhard_swish", [("i8", (3, c))],
                          {"x_zero": 4, "y_zero": -3, **Q.hard_swish_params(0.05, 0.04)}, extents=ext))
        out.append(single("elementwise", "quantize", [("f32", (3, c))], {"scale": 0.05, "zero": -3}, extents=ext))
        out.append(single("elementwise", "dequantize", [("i8", (3, c))], {"scale": 0.0123, "zero": 7}, extents=ext))
        m, s = Q.requantize_params(0.05, 0.02)
        out.append(single("elementwise", "requantize", [("i8", (3, c))],
                          {"x_zero": 3, "y_zero": -5, "multiplier": m, "shift": s}, extents=ext))
        out.append(single("elementwise", "pad", [(pick.one_of(["f32", "i8", "i32"]), (2, c))],
                          {"pads": [1, 0, j % 3, 2]}, extents=ext))
    return out
