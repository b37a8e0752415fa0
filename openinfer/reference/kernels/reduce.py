"""Reductions (sum/mean/prod/max/min/argmax/argmin over axes), running sums (cumsum), ranking
(topk_indices) and matmul.

Accumulation order is defined so every target can reproduce it: f8/bf16/f16 without a wider
accumulator add sequentially (row-major over the reduced elements) and round the running value to
T after every step, as the original; f32/f64 accumulators may sum in any order (results agree
within tolerance); integers are exact modulo 2^64 and wrap to the output width.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTypeInfo, Kind
from ...ops.registry import Inference
from .common import as_float, as_int, finish, store, t_in, work_dtype
from .elementwise import trunc_divmod

Arrays = list[np.ndarray]


def _narrow(w: DTypeInfo) -> bool:
    """f8/bf16/f16: a running value in them rounds after every step."""
    return w.is_float and w.bits < 32


def _moved(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """x with the reduced axes flattened into one last axis, in row-major order."""
    kept = [i for i in range(x.ndim) if i not in axes]
    y = np.transpose(x, kept + list(axes))
    # the count spelled out: -1 cannot be inferred beside a kept dim of size 0 (an empty batch)
    return y.reshape(y.shape[:len(kept)] + (math.prod(y.shape[len(kept):]),))


def _sequential(v: np.ndarray, w: DTypeInfo, start: float, step) -> np.ndarray:
    """Fold the last axis of f32 values with `step`, rounding the running value to w each time."""
    r = np.full(v.shape[:-1], start, np.float32)
    for i in range(v.shape[-1]):
        r = as_float(store(step(r, v[..., i]), w), w)
    return r


def _sum_like(kind: str):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        w = work_dtype(inf)
        m = _moved(xs[0], inf.attrs["axes"])
        n = m.shape[-1]
        if not w.is_float:
            v = as_int(m, w)
            if kind == "mean" and w.bits == 64:
                # The exact sum can pass 64 bits: Python integers, truncating division, wrap mod 2^64.
                sums = v.astype(object).sum(axis=-1)
                means = [(abs(int(s)) // n * (1 if s >= 0 else -1)) % (1 << 64) for s in np.ravel(sums)]
                r = np.array(means, dtype=np.uint64).reshape(np.shape(sums))
                r = r.view(np.int64) if w.is_signed else r
            elif kind == "prod":
                r = np.prod(v, axis=-1)
            else:
                r = np.sum(v, axis=-1)
                if kind == "mean":
                    r, _ = trunc_divmod(r, np.asarray(n, dtype=r.dtype), w.is_signed)
        else:
            v = as_float(m, w)
            if _narrow(w):
                r = _sequential(v, w, 1.0 if kind == "prod" else 0.0, np.multiply if kind == "prod" else np.add)
            else:
                r = np.prod(v, axis=-1) if kind == "prod" else np.sum(v, axis=-1)
            if kind == "mean":
                with np.errstate(invalid="ignore"):     # no elements: 0 / 0 is NaN, as numpy.mean's
                    r = r / r.dtype.type(n)
        return finish(np.asarray(r).reshape(inf.out_shape), w, inf)
    return kernel


def _extreme(is_max: bool):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        m = _moved(xs[0], inf.attrs["axes"])
        if not t.is_float:
            v = as_int(m, t)
            return store((np.max if is_max else np.min)(v, axis=-1).reshape(inf.out_shape), t)
        v = as_float(m, t)
        r = (np.max if is_max else np.min)(v, axis=-1)  # NaN propagates
        # IEEE 754-2019: +0.0 beats -0.0 for max, -0.0 beats +0.0 for min, whatever the order.
        wanted_zero = (v == 0) & (np.signbit(v) != is_max)
        r = np.where((r == 0) & np.any(wanted_zero, axis=-1), r.dtype.type(0.0 if is_max else -0.0), r)
        return store(np.asarray(r).reshape(inf.out_shape), t)
    return kernel


def _arg(is_max: bool):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t, a = t_in(inf), inf.attrs
        x = as_float(xs[0], t) if t.is_float else as_int(xs[0], t)
        v = np.moveaxis(x, a["axis"], -1)
        first = a["select_first"]
        if not first:
            v = v[..., ::-1]
        # NumPy's argmax/argmin pick the first NaN, and the first of equal values.
        idx = (np.argmax if is_max else np.argmin)(v, axis=-1)
        if not first:
            idx = v.shape[-1] - 1 - idx
        return np.asarray(idx, dtype=np.int64).reshape(inf.out_shape)
    return kernel


def cumsum(xs: Arrays, inf: Inference) -> np.ndarray:
    """Running sums along the axis in scan order, in the working dtype: NumPy's cumsum adds
    sequentially, rounding to f32/f64 at every step as the targets do; narrow floats round to T
    after every add. Exclusive: the inclusive sums shifted one on, the first +0.0."""
    w, a = work_dtype(inf), inf.attrs
    x = np.moveaxis(xs[0], a["axis"], -1)
    if a["reverse"]:
        x = x[..., ::-1]
    if not w.is_float:
        r = np.cumsum(as_int(x, t_in(inf)), axis=-1)              # wraps modulo 2^64
    elif _narrow(w):
        v = as_float(x, t_in(inf))
        r = np.empty(v.shape, np.float32)
        s = np.full(v.shape[:-1], -0.0, np.float32)
        for i in range(v.shape[-1]):
            s = r[..., i] = as_float(store(s + v[..., i], w), w)
    else:
        v = as_float(x, w)
        r = np.cumsum(v, axis=-1, dtype=v.dtype)
    if a["exclusive"]:
        r = np.concatenate([np.zeros_like(r[..., :1]), r[..., :-1]], axis=-1)
    if a["reverse"]:
        r = r[..., ::-1]
    return finish(np.ascontiguousarray(np.moveaxis(r, -1, a["axis"])), w, inf)


def topk_indices(xs: Arrays, inf: Inference) -> np.ndarray:
    """The first k of a stable sort along the axis: ascending (NumPy puts NaN last) for the
    smallest; for the largest, the ascending stable sort of the row reversed, read backwards
    (NaN first, and equal values still lower index first)."""
    a = inf.attrs
    x = np.moveaxis(xs[0], a["axis"], -1)
    n = x.shape[-1]
    if a["largest"]:
        order = (n - 1 - np.argsort(x[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    else:
        order = np.argsort(x, axis=-1, kind="stable")
    return np.ascontiguousarray(np.moveaxis(order[..., :a["k"]], -1, a["axis"])).astype(np.int64)


def matmul(xs: Arrays, inf: Inference) -> np.ndarray:
    a, b = xs
    # transposed operands are views: the products and their order are those of the swapped operand
    if inf.attrs.get("transpose_a"):
        a = np.swapaxes(a, -1, -2)
    if inf.attrs.get("transpose_b"):
        b = np.swapaxes(b, -1, -2)
    # NumPy's 1-D rules: a vector operand is a one-row (a) or one-column (b) matrix, squeezed after.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    return _matmul2(a2, b2, inf).reshape(inf.out_shape)


def _matmul2(a: np.ndarray, b: np.ndarray, inf: Inference) -> np.ndarray:
    t, w = t_in(inf), work_dtype(inf)
    p = inf.product_dtype or w
    if t.kind is Kind.BOOL:
        return np.matmul(a.astype(np.int64), b.astype(np.int64)) > 0  # OR of ANDs
    conv = as_float if w.is_float else as_int
    if p != w:
        # Products rounded/wrapped to P first, then summed in the accumulator.
        prods = store(conv(a, p)[..., :, :, None] * conv(b, p)[..., None, :, :], p)
        return finish(np.sum(conv(prods, w), axis=-2), w, inf)
    if _narrow(w):
        af, bf = as_float(a, w), as_float(b, w)
        shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
        s = np.zeros(shape, np.float32)
        for k in range(a.shape[-1]):
            s = as_float(store(s + af[..., :, k:k + 1] * bf[..., k:k + 1, :], w), w)
        return finish(s, w, inf)
    return finish(np.matmul(conv(a, w), conv(b, w)), w, inf)


def dequant_matmul(xs: Arrays, inf: Inference) -> np.ndarray:
    """x @ ((w - zero_point) * scale), the sum in f32 (f64 for f64 x), rounded to x's dtype."""
    x, w, scale = xs[:3]
    work = np.float64 if t_in(inf).name == "f64" else np.float32
    deq = w.astype(np.float64)
    if len(xs) > 3:
        deq = deq - xs[3].astype(np.float64).reshape(-1)
    deq = (deq * scale.astype(np.float64).reshape(-1)).astype(work)
    return store(np.matmul(as_float(x, t_in(inf)).astype(work), deq), t_in(inf)).reshape(inf.out_shape)


KERNELS = {
    "sum_axis": _sum_like("sum"), "mean_axis": _sum_like("mean"), "prod_axis": _sum_like("prod"),
    "max_axis": _extreme(True), "min_axis": _extreme(False),
    "argmax_axis": _arg(True), "argmin_axis": _arg(False), "cumsum": cumsum, "topk_indices": topk_indices,
    "matmul": matmul,
    "dequant_matmul": dequant_matmul,
}
