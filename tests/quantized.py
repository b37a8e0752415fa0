"""A random quantized weight, as the dequant_matmul tests feed them."""

from __future__ import annotations

import numpy as np

from openinfer import QuantParams, TensorSpec

#: the values drawn for each storage dtype (i8 symmetric, as the decoder example quantizes)
_RANGE = {"i8": (-127, 127), "i4": (-8, 7)}


def quantized_weight(rng: np.random.Generator, dtype: str, k: int, n: int,
                     scales: tuple[float, float] = (0.01, 0.1)) -> TensorSpec:
    """A [k, n] `dtype` weight of uniform random values with a per-output-channel (axis 1) scale
    drawn uniformly from `scales`; the values are drawn first, then the scales."""
    lo, hi = _RANGE[dtype]
    w = rng.integers(lo, hi + 1, (k, n)).astype(np.int8)
    return TensorSpec(w, dtype=dtype, quant=QuantParams.per_channel(1, rng.uniform(*scales, n).astype(np.float32)))
