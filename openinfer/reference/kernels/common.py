"""Helpers every kernel family shares: compute types, store (round/wrap) and integer views."""

from __future__ import annotations

import numpy as np

from ...dtypes import DTypeInfo, Kind
from ...numerics import round_float, wrap_int
from ...ops.registry import Inference


def compute_dtype(t: DTypeInfo) -> type[np.floating]:
    """Floats compute in f32, f64 in f64 (digest §3.6: f8/bf16/f16 compute in f32, round on store)."""
    return np.float64 if t.name == "f64" else np.float32


def as_float(x: np.ndarray, t: DTypeInfo) -> np.ndarray:
    """Float values of type `t` in t's compute type (exact: every narrow float fits in f32)."""
    return np.asarray(x).astype(compute_dtype(t))


def as_int(x: np.ndarray, t: DTypeInfo) -> np.ndarray:
    """Integer values widened to 64 bits: signed types (and bool) to int64, unsigned/bitset to uint64.
    Arithmetic there wraps modulo 2^64, which agrees with wrapping to any narrower width afterwards."""
    return np.asarray(x).astype(np.uint64 if t.kind in (Kind.UNSIGNED, Kind.BITSET) else np.int64)


def store(x: np.ndarray, t: DTypeInfo) -> np.ndarray:
    """Values (floats in any precision, 64-bit integers) stored as `t`: floats round (through f32
    for f16/bf16/f8), integers wrap two's-complement to t's width, bool is non-zero."""
    x = np.asarray(x)
    if t.is_float:
        return round_float(x, t)
    if t.kind is Kind.BOOL:
        return x.astype(np.bool_)
    return wrap_int(x, t)


def t_in(inf: Inference, i: int = 0) -> DTypeInfo:
    return inf.inputs[i].dtype


def work_dtype(inf: Inference) -> DTypeInfo:
    """The dtype an op computes in: the accumulator in accumulate mode, otherwise T."""
    return inf.acc_dtype or t_in(inf)


def finish(x: np.ndarray, w: DTypeInfo, inf: Inference) -> np.ndarray:
    """Store in the working dtype, then in the output dtype (a float accumulator rounded into T)."""
    y = store(x, w)
    return y if w == inf.out_dtype else store(y, inf.out_dtype)


def float_to_int(x: np.ndarray, t: DTypeInfo, mode: str = "trunc", saturate: bool = True) -> np.ndarray:
    """Float values -> integer type `t` as `cast` defines it: round by `mode`, NaN -> 0, then
    saturate (±inf -> min/max) or wrap two's-complement (±inf -> 0). Exact for every f64 value."""
    v = np.asarray(x, dtype=np.float64)
    r = {"trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "nearest": np.rint}[mode](v)
    bad = ~np.isfinite(r)
    signed = t.kind is Kind.SIGNED
    if saturate:
        lo, hi_excl = float(t.lo), float(t.hi + 1)  # both powers of two (or 0): exact in f64
        inside = np.where(bad | (r < lo) | (r >= hi_excl), 0.0, r)
        out = inside.astype(np.int64) if signed else inside.astype(np.uint64)
        out = np.where(r >= hi_excl, t.hi, out)
        out = np.where(r < lo, t.lo, out)
        out = np.where(np.isnan(r), 0, out)
        return out.astype(np.int64 if signed else np.uint64).astype(t.np_dtype)
    # Wrap: reduce modulo 2^64 exactly (fmod is exact), split into 32-bit halves that convert
    # exactly, and recombine with wrapping 64-bit arithmetic.
    m = np.fmod(np.where(bad, 0.0, r), 2.0 ** 64)
    hi = np.trunc(m / 2.0 ** 32)
    lo32 = m - hi * 2.0 ** 32
    w = (hi.astype(np.int64) << np.int64(32)) + lo32.astype(np.int64)
    return wrap_int(w if signed else w.view(np.uint64), t)
