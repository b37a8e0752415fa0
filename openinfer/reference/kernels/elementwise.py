"""Element-wise kernels: arithmetic, rounding, bitwise, comparison, filter/predicates, math, activations.

Floats compute in f32 (f64 for f64) and round on store; integers compute in 64 bits and wrap to
their width on store (see common.py). Inputs already have their bound shapes; binary ops broadcast
with NumPy (the registry only lets broadcasting ops get here with differing shapes).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...dtypes import Kind
from ...ops.registry import Inference
from .common import as_float, as_int, compute_dtype, finish, float_to_int, store, t_in, work_dtype

Arrays = list[np.ndarray]


# --------------------------------------------------------------------------- arithmetic

def _arith(fn: Callable, bool_fn: Callable | None = None):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t, w = t_in(inf), work_dtype(inf)
        if t.kind is Kind.BOOL:
            return bool_fn(*xs)
        if w.is_float:
            return finish(fn(*(as_float(x, w) for x in xs)), w, inf)
        # An integer accumulator is strictly wider than T, so the wide computation is exact.
        return finish(fn(*(as_int(x, w) for x in xs)), w, inf)
    return kernel


add = _arith(np.add, np.logical_or)
mul = _arith(np.multiply, np.logical_and)
sub = _arith(np.subtract)


def abs_(xs: Arrays, inf: Inference) -> np.ndarray:
    w = work_dtype(inf)
    # int64 abs wraps at INT64_MIN only; narrower INT_MIN becomes positive and wraps back on store.
    return finish(np.abs(as_float(xs[0], w) if w.is_float else as_int(xs[0], w)), w, inf)


def neg(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    return store(-as_float(xs[0], t) if t.is_float else np.int64(0) - as_int(xs[0], t), t)


def trunc_divmod(a: np.ndarray, b: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """C-style (truncating) quotient and remainder of 64-bit integers, wrapping INT64_MIN / -1.
    Where b == 0 the results are meaningless (callers mask them)."""
    a, b = np.broadcast_arrays(a, b)
    safe = np.where(b == 0, 1, b).astype(b.dtype)
    if not signed:
        return a // safe, a % safe
    minus_one = safe == -1
    safe = np.where(minus_one, 1, safe)
    q = np.floor_divide(a, safe)
    r = a - q * safe
    adjust = (r != 0) & ((a < 0) != (safe < 0))  # floor -> trunc where the exact quotient is negative
    q = q + adjust
    r = r - adjust * safe
    return np.where(minus_one, np.int64(0) - a, q), np.where(minus_one, 0, r)


def div(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    mask = inf.attrs["div_by_zero_mask"]
    if t.is_float:
        a, b = (as_float(x, t) for x in xs)
        return store(np.where(b == 0, compute_dtype(t)(mask), a / np.where(b == 0, 1, b)), t)
    a, b = (as_int(x, t) for x in xs)
    q, _ = trunc_divmod(a, b, t.is_signed)
    return store(np.where(b == 0, mask, q), t)


def floor_div(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    a, b = (as_int(x, t) for x in xs)
    q, r = trunc_divmod(a, b, t.is_signed)
    if t.is_signed:
        q = q - ((r != 0) & ((r < 0) != (b < 0)))  # trunc -> floor
    return store(np.where(b == 0, inf.attrs["div_by_zero_mask"], q), t)


def rem(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    a, b = (as_int(x, t) for x in xs)
    _, r = trunc_divmod(a, b, t.is_signed)
    return store(np.where(b == 0, 0, r), t)


def pow_(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    a, b = (as_float(x, t) for x in xs)
    with np.errstate(all="ignore"):        # overflow, 0 ** -y and negative ** fraction are defined results
        return store(np.power(a, b), t)


def fma(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    a, b, c = (np.asarray(x, dtype=np.float64) for x in xs)
    return store(a * b + c, t)


def recip(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    x = as_float(xs[0], t)
    one = compute_dtype(t)(1)
    return store(np.where(x == 0, compute_dtype(t)(inf.attrs["div_by_zero_mask"]), one / np.where(x == 0, 1, x)), t)


def relu(xs: Arrays, inf: Inference) -> np.ndarray:
    t, a = t_in(inf), inf.attrs
    if t.is_float:
        ct = compute_dtype(t)
        x = as_float(xs[0], t)
        y = np.where(x >= 0, x, ct(a["alpha"]) * x)
        bounded = ieee_min(y, np.full_like(y, ct(a["clamp_max"])))
        return store(ieee_max(bounded, np.full_like(y, ct(a["clamp_min"]))), t)
    x = as_int(xs[0], t)
    slope = float_to_int(a["alpha"] * x.astype(np.float64), t).astype(np.int64)
    y = np.where(x >= 0, x, slope)
    return store(np.maximum(np.minimum(y, a["clamp_max"]), a["clamp_min"]), t)


def sign(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    x = as_float(xs[0], t) if t.is_float else as_int(xs[0], t)
    s = np.sign(x)
    if t.is_float:
        s = np.where(np.isnan(s), 0, s)
    return s.astype(np.int8)


def ieee_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum: NaN propagates, +0.0 > -0.0."""
    r = np.maximum(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0).astype(r.dtype), r)


def ieee_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 minimum: NaN propagates, -0.0 < +0.0."""
    r = np.minimum(a, b)
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0).astype(r.dtype), r)


def _minmax(float_fn: Callable, int_fn: Callable):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        if t.is_float:
            return store(float_fn(*(as_float(x, t) for x in xs)), t)
        return store(int_fn(*(as_int(x, t) for x in xs)), t)
    return kernel


min_ = _minmax(ieee_min, np.minimum)
max_ = _minmax(ieee_max, np.maximum)


def clamp(xs: Arrays, inf: Inference) -> np.ndarray:
    t, lo, hi = t_in(inf), inf.attrs["min"], inf.attrs["max"]
    if t.is_float:
        ct = compute_dtype(t)
        x = as_float(xs[0], t)
        return store(ieee_min(ieee_max(x, np.full_like(x, ct(lo))), np.full_like(x, ct(hi))), t)
    return store(np.minimum(np.maximum(as_int(xs[0], t), lo), hi), t)


# --------------------------------------------------------------------------- rounding

def _rounding(fn: Callable):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        return store(fn(as_float(xs[0], t)), t)
    return kernel


def round_half_away(x: np.ndarray) -> np.ndarray:
    """C `round`: ties away from zero; exact (no x + 0.5 rounding error), keeps -0.0."""
    t = np.trunc(x)
    frac = x - t
    return np.where(np.abs(frac) >= 0.5, t + np.sign(x), t)


floor = _rounding(np.floor)
ceil = _rounding(np.ceil)
trunc = _rounding(np.trunc)
round_ = _rounding(round_half_away)


# --------------------------------------------------------------------------- bitwise

def _bitwise(fn: Callable, bool_fn: Callable):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        if t.kind is Kind.BOOL:
            return bool_fn(*xs)
        return store(fn(*(as_int(x, t) for x in xs)), t)
    return kernel


and_ = _bitwise(np.bitwise_and, np.logical_and)
or_ = _bitwise(np.bitwise_or, np.logical_or)
xor = _bitwise(np.bitwise_xor, np.logical_xor)
not_ = _bitwise(np.invert, np.logical_not)


def shl(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    # Shift the 64-bit pattern as unsigned (well-defined wrap-around), like Rust wrapping_shl.
    u = as_int(xs[0], t).view(np.uint64) if t.is_signed else as_int(xs[0], t)
    r = u << np.uint64(inf.attrs["bits"] & 63)
    return store(r.view(np.int64) if t.is_signed else r, t)


def shr(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    x = as_int(xs[0], t)
    return store(x >> x.dtype.type(inf.attrs["bits"] & 63), t)


def popcount(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    pattern = as_int(xs[0], t).view(np.uint64) if t.is_signed else as_int(xs[0], t)
    if t.bits < 64:
        pattern = pattern & np.uint64((1 << t.bits) - 1)
    return np.bitwise_count(pattern).astype(np.uint8)


# --------------------------------------------------------------------------- comparison, filter, predicates

def _compare(fn: Callable):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        if t.kind is Kind.BOOL:
            return fn(*xs).astype(np.bool_)
        conv = as_float if t.is_float else as_int
        return fn(*(conv(x, t) for x in xs)).astype(np.bool_)
    return kernel


eq = _compare(np.equal)
ne = _compare(np.not_equal)
lt = _compare(np.less)
le = _compare(np.less_equal)
gt = _compare(np.greater)
ge = _compare(np.greater_equal)


def filter_(xs: Arrays, inf: Inference) -> np.ndarray:
    a, b, cond = xs
    return np.where(cond != 0, a, b).astype(inf.out_dtype.np_dtype)


def is_finite(xs: Arrays, inf: Inference) -> np.ndarray:
    finite = np.isfinite(as_float(xs[0], t_in(inf)))
    return np.asarray(finite.all()) if inf.out_shape == () else finite


def is_nan(xs: Arrays, inf: Inference) -> np.ndarray:
    return np.isnan(as_float(xs[0], t_in(inf)))


def is_inf(xs: Arrays, inf: Inference) -> np.ndarray:
    return np.isinf(as_float(xs[0], t_in(inf)))


def is_neg(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    if t.kind is Kind.UNSIGNED:
        return np.zeros(inf.out_shape, np.bool_)
    return np.asarray((as_float(xs[0], t) if t.is_float else as_int(xs[0], t)) < 0)


# --------------------------------------------------------------------------- math and activations

_ERF = np.frompyfunc(math.erf, 1, 1)


def erf_values(x: np.ndarray) -> np.ndarray:
    """erf in f64 (NumPy has none; the libm erf via Python is correctly rounded enough)."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _unary(fn: Callable):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        return store(fn(as_float(xs[0], t)), t)
    return kernel


def _erf(x: np.ndarray) -> np.ndarray:
    return erf_values(x).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _gelu_kernel(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    x = as_float(xs[0], t)
    ct = x.dtype.type
    if inf.attrs["approximate"] == "tanh":
        inner = ct(math.sqrt(2 / math.pi)) * (x + ct(0.044715) * x * x * x)
        return store(ct(0.5) * x * (1 + np.tanh(inner)), t)
    return store(ct(0.5) * x * (1 + _erf(x / ct(math.sqrt(2)))), t)


def _softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x) without overflow: log1p(e^-|x|) + max(x, 0)."""
    return np.log1p(np.exp(-np.abs(x))) + ieee_max(x, np.zeros_like(x))


def _attr_kernel(fn: Callable):
    """A unary kernel of the float attributes too, each rounded to the compute type (as the
    generated kernels' constants)."""
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t = t_in(inf)
        x = as_float(xs[0], t)
        ct = x.dtype.type
        return store(fn(x, **{k: ct(v) for k, v in inf.attrs.items()}), t)
    return kernel


def _hard_sigmoid(x: np.ndarray, alpha, beta) -> np.ndarray:
    zero, one = np.zeros_like(x), np.ones_like(x)
    return ieee_max(zero, ieee_min(one, alpha * x + beta))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    ct = x.dtype.type
    zero, one = np.zeros_like(x), np.ones_like(x)
    return x * ieee_max(zero, ieee_min(one, x / ct(6) + ct(0.5)))


def _elu(x: np.ndarray, alpha) -> np.ndarray:
    return np.where(x >= 0, x, alpha * np.expm1(x))


def _celu(x: np.ndarray, alpha) -> np.ndarray:
    zero = np.zeros_like(x)
    return ieee_max(zero, x) + ieee_min(zero, alpha * np.expm1(x / alpha))


exp = _unary(np.exp)
log = _unary(np.log)
sqrt = _unary(np.sqrt)
rsqrt = _unary(lambda x: 1 / np.sqrt(x))
tanh = _unary(np.tanh)
sigmoid = _unary(_sigmoid)
erf = _unary(_erf)
gelu = _gelu_kernel
silu = _unary(lambda x: x * _sigmoid(x))
sin = _unary(np.sin)
cos = _unary(np.cos)
tan = _unary(np.tan)
asin = _unary(np.arcsin)
acos = _unary(np.arccos)
atan = _unary(np.arctan)
sinh = _unary(np.sinh)
cosh = _unary(np.cosh)
softplus = _unary(_softplus)
softsign = _unary(lambda x: x / (1 + np.abs(x)))
hard_sigmoid = _attr_kernel(_hard_sigmoid)
hard_swish = _unary(_hard_swish)
elu = _attr_kernel(_elu)
selu = _attr_kernel(lambda x, alpha, gamma: gamma * _elu(x, alpha))
celu = _attr_kernel(_celu)
leaky_relu = _attr_kernel(lambda x, alpha: np.where(x >= 0, x, alpha * x))
mish = _unary(lambda x: x * np.tanh(_softplus(x)))

KERNELS = {
    "add": add, "mul": mul, "sub": sub, "div": div, "floor_div": floor_div, "rem": rem, "fma": fma, "neg": neg,
    "pow": pow_,
    "recip": recip, "abs": abs_, "relu": relu, "sign": sign, "min": min_, "max": max_, "clamp": clamp,
    "floor": floor, "ceil": ceil, "trunc": trunc, "round": round_, "and": and_, "or": or_, "xor": xor, "not": not_,
    "shl": shl, "shr": shr, "popcount": popcount, "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "filter": filter_, "is_finite": is_finite, "is_nan": is_nan, "is_inf": is_inf, "is_neg": is_neg,
    "exp": exp, "log": log, "sqrt": sqrt, "rsqrt": rsqrt, "tanh": tanh, "sigmoid": sigmoid, "erf": erf,
    "gelu": gelu, "silu": silu, "sin": sin, "cos": cos, "tan": tan, "asin": asin, "acos": acos, "atan": atan,
    "sinh": sinh, "cosh": cosh, "softplus": softplus, "softsign": softsign, "hard_sigmoid": hard_sigmoid,
    "hard_swish": hard_swish, "elu": elu, "selu": selu, "celu": celu, "leaky_relu": leaky_relu, "mish": mish,
}
