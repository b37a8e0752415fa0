"""cast, fill and arange."""

from __future__ import annotations

import numpy as np

from ...dtypes import Kind
from ...ops.registry import Inference
from .common import as_int, float_to_int, store, t_in

Arrays = list[np.ndarray]


def cast(xs: Arrays, inf: Inference) -> np.ndarray:
    src, to = t_in(inf), inf.out_dtype
    x = xs[0]
    if to.kind is Kind.BOOL:
        return np.asarray(x) != 0          # NaN != 0: true; -0.0 == 0: false
    if to.is_float:
        if src.is_float or to.name == "f64":
            return store(np.asarray(x, dtype=np.float64), to)
        # Integers convert to f32 (correctly rounded), then round on store to the narrow type.
        return store(as_int(x, src).astype(np.float32), to)
    if src.is_float:
        a = inf.attrs
        return float_to_int(x, to, a["rounding_mode"], a["saturate"])
    return as_int(x, src).astype(to.np_dtype)  # a widening integer cast is exact


def fill(xs: Arrays, inf: Inference) -> np.ndarray:
    return store(np.full(inf.out_shape, inf.attrs["value"]), inf.out_dtype)


def arange(xs: Arrays, inf: Inference) -> np.ndarray:
    shape, axis, t = inf.out_shape, inf.attrs["axis"], inf.out_dtype
    along = [1] * len(shape)
    along[axis] = shape[axis]
    i = np.arange(shape[axis]).reshape(along)
    start, step = inf.attrs["start"], inf.attrs["step"]
    if t.is_float:
        # i * step rounded to f64, then the sum, then one rounding to T
        v = np.float64(start) + i.astype(np.float64) * np.float64(step)
    else:
        w = np.uint64 if t.kind is Kind.UNSIGNED else np.int64    # wraps modulo 2^64, then to T
        v = np.asarray(start).astype(w) + i.astype(w) * np.asarray(step).astype(w)
    return store(np.broadcast_to(v, shape), t)


KERNELS = {"cast": cast, "fill": fill, "arange": arange}
