"""cast and fill."""

from __future__ import annotations

import numpy as np

from ..registry import Inference
from .common import as_int, float_to_int, store, t_in

Arrays = list[np.ndarray]


def cast(xs: Arrays, inf: Inference) -> np.ndarray:
    src, to = t_in(inf), inf.out_dtype
    x = xs[0]
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


KERNELS = {"cast": cast, "fill": fill}
