"""The conformance oracle: expected results computed independently of the reference kernels.

Every value is a Python scalar: integers are exact Python ints wrapped explicitly, floats are
float64 with `math`, and rounding to the narrow float types has its own implementation (struct's
IEEE half/single packing, an frexp-based rounder for bf16 and f8, exact integer rounding for
int -> float) rather than openinfer.numerics. It reads only the case record (op name, dtype names,
attrs as given, arrays), never the registry, so a wrong default or rule there shows up here.
Slow and simple on purpose: the shapes are small.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

INF, NAN = math.inf, math.nan

# --------------------------------------------------------------------------- dtypes (own table)

_INTS = {"i8": (8, True), "i16": (16, True), "i32": (32, True), "i64": (64, True),
         "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False),
         "i4": (4, True), "i2": (2, True), "i1": (1, True), "u4": (4, False), "u2": (2, False),
         "u1": (1, False), "bitset": (8, False)}
_FLOATS = ("f8", "bf16", "f16", "f32", "f64")
_NUMPY = {"f16": np.float16, "f32": np.float32, "bf16": np.float32, "f8": np.float32, "f64": np.float64,
          "bool": np.bool_, "bitset": np.uint8, "i4": np.int8, "i2": np.int8, "i1": np.int8, "u4": np.uint8,
          "u2": np.uint8, "u1": np.uint8}


def is_float(name: str) -> bool:
    return name in _FLOATS


def int_range(name: str) -> tuple[int, int]:
    bits, signed = _INTS[name]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def signed(name: str) -> bool:
    return _INTS[name][1]


def wrap(v: int, name: str) -> int:
    bits, sgn = _INTS[name]
    v &= (1 << bits) - 1
    return v - (1 << bits) if sgn and v >> (bits - 1) else v


# --------------------------------------------------------------------------- float rounding

def r32(x: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def r16(x: float) -> float:
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def _round_precision(x: float, p: int, emin: int, max_finite: float) -> float:
    """x rounded to nearest-even with p significant bits and minimum exponent emin."""
    if x != x or math.isinf(x) or x == 0:
        return x
    _, e = math.frexp(x)                     # |x| in [2^(e-1), 2^e)
    q = max(e - 1, emin) - (p - 1)           # exponent of the last kept bit
    y = math.ldexp(round(math.ldexp(x, -q)), q)
    if abs(y) > max_finite:
        return math.copysign(INF, x)
    return y if y != 0 else math.copysign(0.0, x)


def rbf16(x: float) -> float:
    return _round_precision(x, 8, -126, math.ldexp(2 - 2 ** -7, 127))


def rf8(x: float) -> float:
    return _round_precision(x, 3, -14, 57344.0)


def store(x, name: str, *, direct_f16: bool = False):
    """A computed value stored as dtype `name`. Narrow floats compute in f32, so the value is
    rounded to f32 first; `direct_f16`: an f64 value (cast, fma) rounds to f16 once, as C's
    (_Float16)double does. bf16 and f8 always round from f32."""
    if name == "bool":
        return bool(x)
    if name in _INTS:
        return wrap(int(x), name)
    x = float(x)
    if name == "f64":
        return x
    if name == "f16" and direct_f16:
        return r16(x)
    x = r32(x)
    return {"f32": lambda v: v, "f16": r16, "bf16": rbf16, "f8": rf8}[name](x)


def compute_round(name: str) -> Callable[[float], float]:
    """Rounding to the compute type of float dtype `name` (f32, or f64 for f64)."""
    return (lambda v: v) if name == "f64" else r32


def int_to_f32(v: int) -> float:
    """Exact integer -> f32, nearest-even (no detour through f64)."""
    mag = abs(v)
    n = mag.bit_length()
    if n > 24:
        shift = n - 24
        q, r = divmod(mag, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        mag = q << shift
    return math.copysign(float(mag), v) if v else 0.0


# --------------------------------------------------------------------------- tensors

class Arr:
    """A flat list of Python values with a shape."""

    def __init__(self, shape: Sequence[int], flat: list):
        self.shape = tuple(shape)
        self.flat = flat

    @classmethod
    def of(cls, a: np.ndarray) -> Arr:
        a = np.asarray(a)
        return cls(a.shape, a.reshape(-1).tolist())

    def __getitem__(self, idx: Sequence[int]):
        pos = 0
        for i, d in zip(idx, self.shape, strict=True):
            pos = pos * d + i
        return self.flat[pos]


def indices(shape: Sequence[int]):
    return itertools.product(*(range(d) for d in shape))


def bshape(*shapes: Sequence[int]) -> tuple[int, ...]:
    n = max(len(s) for s in shapes)
    padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded, strict=True):
        big = max(dims)
        assert all(d in (1, big) for d in dims), shapes
        out.append(big if 0 not in dims else 0)
    return tuple(out)


def bindex(idx: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    """The index into a tensor of `shape` that broadcasting maps output index `idx` to."""
    tail = idx[len(idx) - len(shape):] if shape else ()
    return tuple(0 if d == 1 else i for i, d in zip(tail, shape, strict=True))


def build(shape: Sequence[int], fn: Callable) -> Arr:
    return Arr(shape, [fn(idx) for idx in indices(shape)])


def to_array(arr: Arr, name: str) -> np.ndarray:
    if name in _FLOATS:
        return np.array(arr.flat, dtype=np.float64).astype(_NUMPY[name]).reshape(arr.shape)
    if name in _NUMPY:
        dtype = _NUMPY[name]
    else:
        dtype = np.dtype(("int" if name[0] == "i" else "uint") + name[1:])
    return np.array(arr.flat, dtype=dtype).reshape(arr.shape)


# --------------------------------------------------------------------------- scalar math

def ieee_max(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b == 0:
        return 0.0 if not (math.copysign(1, a) < 0 and math.copysign(1, b) < 0) else -0.0
    return a if a > b else b


def ieee_min(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b == 0:
        return -0.0 if (math.copysign(1, a) < 0 or math.copysign(1, b) < 0) else 0.0
    return a if a < b else b


def sdiv(a: float, b: float) -> float:
    """IEEE division (Python raises on /0)."""
    if b == 0:
        if a != a or a == 0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1, b)
    return a / b


def fexp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def flog(x: float) -> float:
    if x != x or x < 0:
        return NAN
    if x == 0:
        return -INF
    return math.log(x)


def fsqrt(x: float) -> float:
    if x != x or x < 0:
        return NAN
    return math.sqrt(x)


def fsum(vals) -> float:
    """Exact sum; where IEEE specials or overflow make fsum give up, the plain (IEEE) sum."""
    vals = list(vals)
    try:
        return math.fsum(vals)
    except (ValueError, OverflowError):
        return sum(vals)


def sigmoid(x: float) -> float:
    return sdiv(1.0, 1.0 + fexp(-x))


def fround(x: float, mode: str) -> float | int:
    """Round to an integer value: exact via math/Fraction; non-finite values pass through."""
    if not math.isfinite(x):
        return x
    if mode == "away":   # C round
        f = Fraction(x)
        r = math.floor(abs(f) + Fraction(1, 2))
        return -r if f < 0 else r
    return {"trunc": math.trunc, "floor": math.floor, "ceil": math.ceil, "nearest": round}[mode](x)


def rounded_float(x: float, mode: str) -> float:
    r = fround(x, mode)
    if isinstance(r, float):
        return r
    return math.copysign(float(r), x) if r == 0 else float(r)


def float_to_int(x: float, name: str, mode: str = "trunc", saturate: bool = True) -> int:
    lo, hi = int_range(name)
    if x != x:
        return 0
    if math.isinf(x):
        return (hi if x > 0 else lo) if saturate else 0
    r = fround(x, mode)
    if saturate:
        return min(max(r, lo), hi)
    return wrap(r, name)


def tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def trem(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return -r if a < 0 else r


# --------------------------------------------------------------------------- op oracles

class Ctx:
    """What an oracle needs from a case: dtype names, attributes (as given) and acc."""

    def __init__(self, case):
        self.op = case.op
        self.t = case.input_dtypes[0].name
        self.in_names = [d.name for d in case.input_dtypes]
        self.attrs = dict(case.attrs)
        self.out = case.out_dtype.name
        self.out_shape = tuple(case.out_shape)
        acc = self.attrs.get("acc")
        if acc is None:
            self.acc = None
        else:
            acc = acc if isinstance(acc, list | tuple) else [acc]
            self.acc = [a.name for a in acc]

    def attr(self, name: str, default=None):
        v = self.attrs.get(name)
        return default if v is None else v

    @property
    def w(self) -> str:
        """The accumulator dtype (T without acc)."""
        return self.acc[-1] if self.acc else self.t

    def finish(self, v):
        """Store in the accumulator, then in the output dtype."""
        v = store(v, self.w)
        return v if self.w == self.out else store(v, self.out)


def _elementwise(fn: Callable) -> Callable:
    """fn(ctx, *scalars) -> stored value; inputs broadcast."""
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        shape = bshape(*(x.shape for x in xs))
        return build(shape, lambda idx: fn(c, *(x[bindex(idx, x.shape)] for x in xs)))
    return oracle


def _num(v):
    return float(v) if isinstance(v, float) else int(v)


def _arith(float_fn, int_fn, bool_fn=None):
    def fn(c: Ctx, *vals):
        if c.t == "bool":
            return bool_fn(*vals)
        if is_float(c.w):
            return c.finish(float_fn(*(float(v) for v in vals)))
        return c.finish(int_fn(*(int(v) for v in vals)))
    return _elementwise(fn)


def _div(c: Ctx, a, b):
    if is_float(c.t):
        mask = float(c.attr("div_by_zero_mask", NAN))
        return store(mask if b == 0 else compute_round(c.t)(a / b), c.t)
    mask = int(c.attr("div_by_zero_mask", 0))
    return store(mask if b == 0 else tdiv(a, b), c.t)


def _floor_div(c: Ctx, a, b):
    return store(int(c.attr("div_by_zero_mask", 0)) if b == 0 else a // b, c.t)


def _rem(c: Ctx, a, b):
    return store(0 if b == 0 else trem(a, b), c.t)


def fpow(a: float, b: float) -> float:
    """C99's pow (Annex F special cases), written out; the general case in Python's f64 pow."""
    if b == 0 or a == 1:
        return 1.0
    if a != a or b != b:
        return NAN
    if math.isinf(b):
        if abs(a) == 1:
            return 1.0
        return 0.0 if (abs(a) < 1) == (b > 0) else INF
    odd = b == math.floor(b) and abs(b) < 2.0 ** 53 and b % 2 == 1
    if a == 0 or math.isinf(a):
        r = INF if (a == 0) == (b < 0) else 0.0
        return -r if odd and math.copysign(1.0, a) < 0 else r
    if a < 0 and b != math.floor(b):
        return NAN
    try:
        r = abs(a) ** b
    except OverflowError:
        r = INF
    return -r if a < 0 and odd else r


def _pow(c: Ctx, a, b):
    return store(compute_round(c.t)(fpow(float(a), float(b))), c.t)


def _fma(c: Ctx, a, b, cc):
    return store(a * b + cc, c.t, direct_f16=True)


def _neg(c: Ctx, x):
    return store(-x, c.t)


def _recip(c: Ctx, x):
    return store(float(c.attr("div_by_zero_mask", NAN)) if x == 0 else 1.0 / x, c.t)


def _abs(c: Ctx, x):
    return c.finish(abs(float(x)) if is_float(c.w) else abs(int(x)))


def _relu(c: Ctx, x):
    alpha = float(c.attr("alpha", c.attr("negative_slope", 0.0)))
    if is_float(c.t):
        y = x if x >= 0 else compute_round(c.t)(alpha * x)
        y = ieee_min(y, float(c.attr("clamp_max", INF)))
        return store(ieee_max(y, float(c.attr("clamp_min", -INF))), c.t)
    lo, hi = int_range(c.t)
    y = x if x >= 0 else float_to_int(alpha * x, c.t)
    cmax, cmin = float(c.attr("clamp_max", INF)), float(c.attr("clamp_min", -INF))
    y = min(y, hi if cmax == INF else int(cmax))
    y = max(y, lo if cmin == -INF else int(cmin))
    return store(min(max(y, lo), hi), c.t)


def _sign(c: Ctx, x):
    if x != x or x == 0:
        return 0
    return 1 if x > 0 else -1


def _minmax(fn_float, fn_int):
    def fn(c: Ctx, a, b):
        return store(fn_float(a, b) if is_float(c.t) else fn_int(a, b), c.t)
    return fn


def _clamp(c: Ctx, x):
    if is_float(c.t):
        return store(ieee_min(ieee_max(x, float(c.attr("min", -INF))), float(c.attr("max", INF))), c.t)
    tlo, thi = int_range(c.t)
    vmin, vmax = c.attr("min"), c.attr("max")
    lo = tlo if vmin is None or vmin == -INF else int(vmin)
    hi = thi if vmax is None or vmax == INF else int(vmax)
    return store(min(max(min(max(x, lo), hi), tlo), thi), c.t)


def _rounding(mode: str):
    def fn(c: Ctx, x):
        return store(rounded_float(x, mode), c.t)
    return fn


def _bitwise(int_fn, bool_fn):
    def fn(c: Ctx, *vals):
        return bool_fn(*vals) if c.t == "bool" else store(int_fn(*vals), c.t)
    return fn


def _shl(c: Ctx, x):
    return store((x << (c.attrs["bits"] & 63)) & ((1 << 64) - 1), c.t)


def _shr(c: Ctx, x):
    return store(x >> (c.attrs["bits"] & 63), c.t)


def _popcount(c: Ctx, x):
    bits = _INTS[c.t][0]
    return bin(x & ((1 << bits) - 1)).count("1")


def _compare(fn):
    return lambda c, a, b: bool(fn(a, b))


def _filter(c: Ctx, a, b, cond):
    return a if cond != 0 else b


def _unary_float(fn):
    def oracle_fn(c: Ctx, x):
        return store(fn(float(x)), c.t)
    return oracle_fn


def _gelu(c: Ctx, x):
    if c.attr("approximate", "none") == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return store(0.5 * x * (1 + math.tanh(inner)), c.t)
    return store(0.5 * x * (1 + math.erf(x / math.sqrt(2))), c.t)


def _real(fn: Callable[[float], float], overflow: Callable[[float], float] = lambda x: math.copysign(INF, x)):
    """`fn` of `math` with IEEE's results where Python raises: NaN outside the domain (sin(inf),
    asin(2)), `overflow(x)` past the largest double (sinh, cosh, expm1 of large x)."""
    def f(x: float) -> float:
        try:
            return fn(x)
        except ValueError:
            return NAN
        except OverflowError:
            return overflow(x)
    return f


fexpm1 = _real(math.expm1)


def softplus(x: float) -> float:
    """log(1 + e^x), arranged so that e^x never overflows."""
    return x + math.log1p(fexp(-x)) if x > 0 else math.log1p(fexp(x))


def _unit_clamp(v: float) -> float:
    return ieee_max(0.0, ieee_min(1.0, v))


def _hard_sigmoid(c: Ctx, x):
    return store(_unit_clamp(float(c.attr("alpha", 0.2)) * x + float(c.attr("beta", 0.5))), c.t)


def _elu_value(x: float, alpha: float) -> float:
    return x if x >= 0 else alpha * fexpm1(x)


def _selu(c: Ctx, x):
    alpha, gamma = float(c.attr("alpha", 1.67326319217681884765625)), float(c.attr("gamma", 1.05070102214813232421875))
    return store(gamma * _elu_value(x, alpha), c.t)


def _celu(c: Ctx, x):
    alpha = float(c.attr("alpha", 1.0))
    return store(ieee_max(0.0, x) + ieee_min(0.0, alpha * fexpm1(sdiv(x, alpha))), c.t)


def _leaky_relu(c: Ctx, x):
    alpha = float(c.attr("alpha", 0.01))
    return store(x if x >= 0 else alpha * x, c.t)


def _rsqrt(x: float) -> float:
    if x == 0:
        return math.copysign(INF, x)
    return sdiv(1.0, fsqrt(x))


def _is_neg(c: Ctx, x):
    return x < 0


def _cast(c: Ctx, x):
    to, t = c.attrs["to"].name, c.t
    if to == "bool":
        return bool(x != 0)                      # NaN != 0 (C, NumPy); -0.0 == 0
    if t == "bool":
        x = int(x)
    if is_float(to):
        if is_float(t):
            return store(x, to, direct_f16=True)
        if to == "f64":
            return float(x)
        return store(int_to_f32(x), to)
    if is_float(t):
        return float_to_int(x, to, c.attr("rounding_mode", "trunc"), c.attr("saturate", True))
    return int(x)


ELEMENTWISE: dict[str, Callable] = {
    "add": _arith(lambda a, b: a + b, lambda a, b: a + b, lambda a, b: a or b),
    "mul": _arith(lambda a, b: a * b, lambda a, b: a * b, lambda a, b: a and b),
    "sub": _arith(lambda a, b: a - b, lambda a, b: a - b),
    "div": _elementwise(_div), "floor_div": _elementwise(_floor_div), "rem": _elementwise(_rem),
    "pow": _elementwise(_pow),
    "fma": _elementwise(_fma), "neg": _elementwise(_neg), "recip": _elementwise(_recip),
    "abs": _elementwise(_abs), "relu": _elementwise(_relu), "sign": _elementwise(_sign),
    "min": _elementwise(_minmax(ieee_min, min)), "max": _elementwise(_minmax(ieee_max, max)),
    "clamp": _elementwise(_clamp),
    "floor": _elementwise(_rounding("floor")), "ceil": _elementwise(_rounding("ceil")),
    "trunc": _elementwise(_rounding("trunc")), "round": _elementwise(_rounding("away")),
    "and": _elementwise(_bitwise(lambda a, b: a & b, lambda a, b: a and b)),
    "or": _elementwise(_bitwise(lambda a, b: a | b, lambda a, b: a or b)),
    "xor": _elementwise(_bitwise(lambda a, b: a ^ b, lambda a, b: a != b)),
    "not": _elementwise(_bitwise(lambda a: ~a, lambda a: not a)),
    "shl": _elementwise(_shl), "shr": _elementwise(_shr), "popcount": _elementwise(_popcount),
    "eq": _elementwise(_compare(lambda a, b: a == b)), "ne": _elementwise(_compare(lambda a, b: a != b)),
    "lt": _elementwise(_compare(lambda a, b: a < b)), "le": _elementwise(_compare(lambda a, b: a <= b)),
    "gt": _elementwise(_compare(lambda a, b: a > b)), "ge": _elementwise(_compare(lambda a, b: a >= b)),
    "filter": _elementwise(_filter),
    "is_nan": _elementwise(lambda c, x: x != x), "is_inf": _elementwise(lambda c, x: math.isinf(x)),
    "is_neg": _elementwise(_is_neg),
    "exp": _elementwise(_unary_float(fexp)), "log": _elementwise(_unary_float(flog)),
    "sqrt": _elementwise(_unary_float(fsqrt)), "rsqrt": _elementwise(_unary_float(_rsqrt)),
    "tanh": _elementwise(_unary_float(math.tanh)), "sigmoid": _elementwise(_unary_float(sigmoid)),
    "erf": _elementwise(_unary_float(math.erf)), "gelu": _elementwise(_gelu),
    "silu": _elementwise(_unary_float(lambda x: x * sigmoid(x))),
    **{op: _elementwise(_unary_float(_real(getattr(math, op)))) for op in ("sin", "cos", "tan", "asin", "acos", "atan",
                                                                          "sinh")},
    "cosh": _elementwise(_unary_float(_real(math.cosh, lambda x: INF))),
    "softplus": _elementwise(_unary_float(softplus)),
    "softsign": _elementwise(_unary_float(lambda x: sdiv(x, 1 + abs(x)))),
    "hard_sigmoid": _elementwise(_hard_sigmoid),
    "hard_swish": _elementwise(_unary_float(lambda x: x * _unit_clamp(x / 6 + 0.5))),
    "elu": _elementwise(lambda c, x: store(_elu_value(x, float(c.attr("alpha", 1.0))), c.t)),
    "selu": _elementwise(_selu), "celu": _elementwise(_celu), "leaky_relu": _elementwise(_leaky_relu),
    "mish": _elementwise(_unary_float(lambda x: x * math.tanh(softplus(x)))),
    "cast": _elementwise(_cast),
}


def _is_finite(xs: list[Arr], c: Ctx) -> Arr:
    x = xs[0]
    if c.out_shape == ():
        return Arr((), [all(math.isfinite(v) for v in x.flat)])
    return Arr(x.shape, [math.isfinite(v) for v in x.flat])


def _fill(xs: list[Arr], c: Ctx) -> Arr:
    v = c.attrs["value"]
    return Arr(xs[0].shape, [store(v, c.t)] * len(xs[0].flat))


def _arange(xs: list[Arr], c: Ctx) -> Arr:
    shape = xs[0].shape
    axis = c.attr("axis", -1) % len(shape)
    start, step = c.attr("start", 0), c.attr("step", 1)
    if is_float(c.t):   # the product rounded to f64, then the sum, rounded once to T
        return build(shape, lambda idx: store(float(start) + float(idx[axis]) * float(step), c.t, direct_f16=True))
    return build(shape, lambda idx: store(int(start) + idx[axis] * int(step), c.t))   # exact, then wrapped


# --------------------------------------------------------------------------- reductions, matmul

def _norm_axes(axes, ndim: int) -> list[int]:
    return sorted({a + ndim if a < 0 else a for a in axes})


def _groups(x: Arr, axes: list[int], keepdims: bool):
    """(output shape, [(output index, [reduced values in row-major order])])."""
    kept = [i for i in range(len(x.shape)) if i not in axes]
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    groups = []
    for k in indices([x.shape[i] for i in kept]):
        vals = []
        for r in indices([x.shape[i] for i in axes]):
            full = [0] * len(x.shape)
            for i, v in zip(kept, k, strict=True):
                full[i] = v
            for i, v in zip(axes, r, strict=True):
                full[i] = v
            vals.append(x[full])
        groups.append(vals)
    return out_shape, groups


def _fold_narrow(vals, w: str, start: float, op) -> float:
    s = start
    for v in vals:
        s = store(r32(op(s, v)), w)
    return s


def _sum_like(kind: str):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        shape, groups = _groups(x, _norm_axes(c.attrs["axes"], len(x.shape)), c.attr("keepdims", False))
        out = []
        for vals in groups:
            n = len(vals)
            if not is_float(c.w):
                if kind == "prod":
                    r = math.prod(int(v) for v in vals)
                else:
                    r = sum(int(v) for v in vals)
                    if kind == "mean":
                        r = tdiv(r, n)
                out.append(c.finish(r))
                continue
            narrow = c.w in ("f8", "bf16", "f16")
            if kind == "prod":
                r = _fold_narrow(vals, c.w, 1.0, lambda a, b: a * b) if narrow else math.prod(vals)
            else:
                r = _fold_narrow(vals, c.w, 0.0, lambda a, b: a + b) if narrow else fsum(vals)
            if kind == "mean":
                r = compute_round(c.w)(store(r, c.w) / n)
            out.append(c.finish(r))
        return Arr(shape, out)
    return oracle


def _extreme(is_max: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        shape, groups = _groups(x, _norm_axes(c.attrs["axes"], len(x.shape)), c.attr("keepdims", False))
        out = []
        for vals in groups:
            r = vals[0]
            for v in vals[1:]:
                if is_float(c.t):
                    r = ieee_max(r, v) if is_max else ieee_min(r, v)
                else:
                    r = max(r, v) if is_max else min(r, v)
            out.append(store(r, c.t))
        return Arr(shape, out)
    return oracle


def _arg(is_max: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        axis = c.attrs["axis"] % len(x.shape)
        keep, first = c.attr("keepdims", False), c.attr("select_first", True)
        shape, groups = _groups(x, [axis], keep)
        out = []
        for vals in groups:
            order = range(len(vals)) if first else range(len(vals) - 1, -1, -1)
            nans = [i for i in order if vals[i] != vals[i]]
            if nans:
                out.append(nans[0])
                continue
            best = None
            for i in order:
                if best is None or (vals[i] > vals[best] if is_max else vals[i] < vals[best]):
                    best = i
            out.append(best)
        return Arr(shape, out)
    return oracle


def _cumsum(xs: list[Arr], c: Ctx) -> Arr:
    """Each row along the axis summed in scan order, element by element from -0.0, the running
    sum stored in the accumulator after every add."""
    x = xs[0]
    axis = c.attrs["axis"] % len(x.shape)
    exclusive, reverse = c.attr("exclusive", False), c.attr("reverse", False)
    n = x.shape[axis]
    out = Arr(x.shape, [None] * len(x.flat))
    for o in indices(x.shape[:axis] + x.shape[axis + 1:]):
        s = -0.0 if is_float(c.w) else 0
        for jj in range(n):
            at = (*o[:axis], n - 1 - jj if reverse else jj, *o[axis:])
            pos = 0
            for i, d in zip(at, x.shape, strict=True):
                pos = pos * d + i
            before = s
            v = x[at]
            s = store(compute_round(c.w)(s + float(v)), c.w) if is_float(c.w) else store(s + int(v), c.w)
            out.flat[pos] = c.finish((0.0 if jj == 0 else before) if exclusive else s)
    return out


def _swap_last(x: Arr) -> Arr:
    """x with its last two dims swapped (the operand transpose_a / transpose_b reads)."""
    shape = (*x.shape[:-2], x.shape[-1], x.shape[-2])
    return build(shape, lambda o: x[(*o[:-2], o[-1], o[-2])])


def _matmul(xs: list[Arr], c: Ctx) -> Arr:
    a, b = xs
    a = _swap_last(a) if c.attr("transpose_a") else a
    b = _swap_last(b) if c.attr("transpose_b") else b
    av = a.shape if len(a.shape) > 1 else (1, *a.shape)
    bv = b.shape if len(b.shape) > 1 else (*b.shape, 1)
    batch = bshape(av[:-2], bv[:-2])
    m, k, n = av[-2], av[-1], bv[-1]
    p = c.acc[0] if c.acc else c.w

    def aval(bi, i, kk):
        return a[(*bindex(bi, av[:-2]), i, kk)] if len(a.shape) > 1 else a[(kk,)]

    def bval(bi, kk, j):
        return b[(*bindex(bi, bv[:-2]), kk, j)] if len(b.shape) > 1 else b[(kk,)]

    def elem(bi, i, j):
        pairs = [(aval(bi, i, kk), bval(bi, kk, j)) for kk in range(k)]
        if c.t == "bool":
            return any(x and y for x, y in pairs)
        if not is_float(c.w):
            prods = [int(x) * int(y) for x, y in pairs]
            if p != c.w:
                prods = [wrap(v, p) for v in prods]
            return c.finish(sum(prods))
        if p != c.w:
            return c.finish(fsum(store(x * y, p) for x, y in pairs))
        if c.w in ("f8", "bf16", "f16"):
            return c.finish(_fold_narrow([x * y for x, y in pairs], c.w, 0.0, lambda s, v: s + v))
        return c.finish(fsum(x * y for x, y in pairs))

    full = (*batch, m, n)
    res = build(full, lambda idx: elem(idx[:-2], idx[-2], idx[-1]))
    out_shape = (*batch, *((m,) if len(a.shape) > 1 else ()), *((n,) if len(b.shape) > 1 else ()))
    return Arr(out_shape, res.flat)


def _dequant_matmul(xs: list[Arr], c: Ctx) -> Arr:
    """Exact sum of x[m, k] * (w[k, n] - zp) * scale, rounded once to x's dtype."""
    x, w, scale = xs[:3]
    zp = xs[3] if len(xs) > 3 else None
    k, n = w.shape
    rows = x.shape[0] if len(x.shape) == 2 else 1

    def per_channel(a: Arr, j: int):
        return a.flat[j if len(a.flat) > 1 else 0]

    def elem(idx):
        i, j = (idx if len(x.shape) == 2 else (0, idx[0]))
        off = per_channel(zp, j) if zp is not None else 0
        xv = [x.flat[i * k + q] for q in range(k)]
        return store(fsum(v * ((w[(q, j)] - off) * per_channel(scale, j)) for q, v in enumerate(xv)), c.out)

    shape = (rows, n) if len(x.shape) == 2 else (n,)
    return build(shape, elem)


# --------------------------------------------------------------------------- real-model ops

def _rows(x: Arr, axis: int):
    """Index lists of each 1-D line of x along `axis`."""
    other = [d if i != axis else 1 for i, d in enumerate(x.shape)]
    for base in indices(other):
        yield [tuple(base[:axis]) + (j,) + tuple(base[axis + 1:]) for j in range(x.shape[axis])]


def _softmax(log: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        axis = c.attr("axis", -1) % len(x.shape)
        out = {}
        for line in _rows(x, axis):
            vals = [x[i] for i in line]
            mx = max(vals) if not any(v != v for v in vals) else NAN
            shifted = [v - mx for v in vals]
            e = [fexp(v) for v in shifted]
            s = fsum(e)
            for i, v, ev in zip(line, shifted, e, strict=True):
                out[i] = v - flog(s) if log else sdiv(ev, s)
        return build(x.shape, lambda idx: store(out[idx], c.t))
    return oracle


def _norm(rms: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        axis = c.attr("axis", -1) % len(x.shape)
        eps = float(c.attr("eps", 1e-6 if rms else 1e-5))
        inner = x.shape[axis:]
        out = {}
        for outer in indices(x.shape[:axis]):
            idxs = [outer + r for r in indices(inner)]
            vals = [x[i] for i in idxs]
            n = len(vals)
            if rms:
                scale = 1 / math.sqrt(fsum(v * v for v in vals) / n + eps)
                ys = [v * scale for v in vals]
            else:
                mean = fsum(vals) / n
                var = fsum((v - mean) * (v - mean) for v in vals) / n
                ys = [(v - mean) / math.sqrt(var + eps) for v in vals]
            for r, i, y in zip(indices(inner), idxs, ys, strict=True):
                if len(xs) > 1:
                    y *= xs[1][r]
                if len(xs) > 2:
                    y += xs[2][r]
                out[i] = y
        return build(x.shape, lambda idx: store(out[idx], c.t))
    return oracle


def _gather(xs: list[Arr], c: Ctx) -> Arr:
    table, idx = xs
    axis = c.attr("axis", 0) % len(table.shape)
    n = table.shape[axis]
    shape = table.shape[:axis] + idx.shape + table.shape[axis + 1:]

    def at(o):
        i = idx[o[axis:axis + len(idx.shape)]]
        i = i + n if i < 0 else i
        return table[o[:axis] + (i,) + o[axis + len(idx.shape):]]
    return build(shape, at)


def _transpose(xs: list[Arr], c: Ctx) -> Arr:
    x = xs[0]
    nd = len(x.shape)
    perm = [p % nd for p in c.attr("perm", list(range(nd))[::-1])]
    shape = tuple(x.shape[p] for p in perm)

    def at(o):
        src = [0] * nd
        for i, p in enumerate(perm):
            src[p] = o[i]
        return x[src]
    return build(shape, at)


def _reshape(xs: list[Arr], c: Ctx) -> Arr:
    return Arr(c.out_shape, list(xs[0].flat))


def _concat(xs: list[Arr], c: Ctx) -> Arr:
    nd = len(xs[0].shape)
    axis = c.attr("axis", 0) % nd
    total = sum(x.shape[axis] for x in xs)
    shape = xs[0].shape[:axis] + (total,) + xs[0].shape[axis + 1:]

    def at(o):
        j = o[axis]
        for x in xs:
            if j < x.shape[axis]:
                return x[o[:axis] + (j,) + o[axis + 1:]]
            j -= x.shape[axis]
        raise AssertionError
    return build(shape, at)


def _slice(xs: list[Arr], c: Ctx) -> Arr:
    x = xs[0]
    nd = len(x.shape)
    starts, ends = c.attrs["starts"], c.attrs["ends"]
    axes = [a % nd for a in c.attr("axes", list(range(len(starts))))]
    steps = c.attr("steps", [1] * len(starts))
    picks = [list(range(d)) for d in x.shape]
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        picks[a] = list(range(x.shape[a]))[s:e:st]
    shape = tuple(len(p) for p in picks)
    return build(shape, lambda o: x[[picks[i][j] for i, j in enumerate(o)]])


def _rope(xs: list[Arr], c: Ctx) -> Arr:
    x, pos = xs
    dh = x.shape[-1]
    half = dh // 2
    theta = float(c.attr("theta", 10000.0))
    inter = c.attr("interleaved", False)

    def at(o):
        p = pos[(o[-3],)] if pos.shape else pos[()]
        i, d = o[-1], None
        pair = i // 2 if inter else i % half
        ang = p * theta ** (-2.0 * pair / dh)
        cs, sn = math.cos(ang), math.sin(ang)
        if inter:
            a, b = x[o[:-1] + (2 * pair,)], x[o[:-1] + (2 * pair + 1,)]
            d = a * cs - b * sn if i % 2 == 0 else b * cs + a * sn
        else:
            a, b = x[o[:-1] + (pair,)], x[o[:-1] + (pair + half,)]
            d = a * cs - b * sn if i < half else b * cs + a * sn
        return store(d, c.t)
    return build(x.shape, at)


def _sdpa(xs: list[Arr], c: Ctx) -> Arr:
    q, k, v = xs[:3]
    mask = xs[3] if len(xs) > 3 else None
    qb, kb, vb = q.shape[:-2], k.shape[:-2], v.shape[:-2]
    kvb = bshape(kb, vb)
    grouped = bool(qb and kvb and kvb[-1] not in (1, qb[-1]))
    batch = (*bshape(qb[:-1], kvb[:-1]), qb[-1]) if grouped else bshape(qb, kvb)
    sq, sk, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    scale = float(c.attr("scale", 1 / math.sqrt(d)))
    causal = c.attr("causal", False)
    out = {}
    for bi in indices(batch):
        kv_bi = bi
        if grouped:
            kv_bi = bi[:-1] + (bi[-1] // (batch[-1] // kvb[-1]),)
        for i in range(sq):
            scores = []
            for j in range(sk):
                s = fsum(q[(*bindex(bi, qb), i, dd)] * k[(*bindex(kv_bi, kb), j, dd)] for dd in range(d)) * scale
                if mask is not None:
                    mv = mask[bindex((*bi, i, j), mask.shape)]
                    if isinstance(mv, bool):
                        s = s if mv else -INF
                    else:
                        s = s + mv
                if causal and j > i + (sk - sq):
                    s = -INF
                scores.append(s)
            mx = max(scores) if not any(s != s for s in scores) else NAN
            for e in range(dv):
                if mx == -INF:
                    out[(*bi, i, e)] = 0.0
                    continue
                w = [fexp(s - mx) for s in scores]
                out[(*bi, i, e)] = fsum(w[j] * v[(*bindex(kv_bi, vb), j, e)] for j in range(sk)) / fsum(w)
    return build((*batch, sq, dv), lambda idx: store(out[idx], c.t))


def _ints(v, n: int) -> list[int]:
    vals = [v] if isinstance(v, int) else list(v)
    return vals * n if len(vals) == 1 else vals


def _pads(v, n: int) -> list[int]:
    vals = _ints(v, n)
    return vals * 2 if len(vals) == n else vals


def _conv(xs: list[Arr], c: Ctx) -> Arr:
    x, w = xs[:2]
    n = len(x.shape) - 2
    stride, dil = _ints(c.attr("stride", 1), n), _ints(c.attr("dilation", 1), n)
    pad = _pads(c.attr("padding", 0), n)
    groups = c.attr("groups", 1)
    cin, o = x.shape[1], w.shape[0]
    cg, og = cin // groups, o // groups
    ks = w.shape[2:]
    sp = [(x.shape[2 + i] + pad[i] + pad[n + i] - dil[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(n)]

    def at(idx):
        nb, oc, pos = idx[0], idx[1], idx[2:]
        g = oc // og
        terms = []
        for ci in range(cg):
            for kk in indices(ks):
                src = [pos[i] * stride[i] + kk[i] * dil[i] - pad[i] for i in range(n)]
                if all(0 <= s < x.shape[2 + i] for i, s in enumerate(src)):
                    terms.append(x[(nb, g * cg + ci, *src)] * w[(oc, ci, *kk)])
        total = fsum(terms)
        if len(xs) > 2:
            total += xs[2][(oc,)]
        return store(total, c.t)
    return build((x.shape[0], o, *sp), at)


def _pool(is_max: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        kern = _ints(c.attrs["kernel"], 2)
        stride = _ints(c.attr("stride", kern), 2)
        pad = _pads(c.attr("padding", 0), 2)
        include = c.attr("count_include_pad", False)
        sp = [(x.shape[2 + i] + pad[i] + pad[2 + i] - kern[i]) // stride[i] + 1 for i in range(2)]

        def at(idx):
            vals = []
            for kk in indices(kern):
                src = [idx[2 + i] * stride[i] + kk[i] - pad[i] for i in range(2)]
                if all(0 <= s < x.shape[2 + i] for i, s in enumerate(src)):
                    vals.append(x[(idx[0], idx[1], *src)])
            if is_max:
                return store(NAN if any(v != v for v in vals) else max(vals), c.t)
            return store(fsum(vals) / (kern[0] * kern[1] if include else len(vals)), c.t)
        return build((x.shape[0], x.shape[1], *sp), at)
    return oracle


def _lrn(xs: list[Arr], c: Ctx) -> Arr:
    """ONNX's definition as written: channels c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped."""
    x, size = xs[0], c.attrs["size"]
    alpha, beta, bias = (float(c.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))

    def at(idx):
        first, last = idx[1] - math.floor((size - 1) / 2), idx[1] + math.ceil((size - 1) / 2)
        window = [x[(idx[0], k, *idx[2:])] for k in range(max(first, 0), min(last, x.shape[1] - 1) + 1)]
        squares = [v * v for v in window]
        return store(sdiv(x[idx], fpow(bias + alpha / size * fsum(squares), beta)), c.t)
    return build(x.shape, at)


def _dynamic_slice(xs: list[Arr], c: Ctx) -> Arr:
    x = xs[0]
    first = [0] * len(x.shape)
    out = list(x.shape)
    for k, size in enumerate(c.attrs["sizes"]):
        axis = c.attr("axes", list(range(len(c.attrs["sizes"]))))[k] % len(x.shape)
        first[axis] = min(max(int(xs[1 + k].flat[0]), 0), x.shape[axis] - size)
        out[axis] = size
    return build(out, lambda idx: x[tuple(f + i for f, i in zip(first, idx, strict=True))])


WHOLE: dict[str, Callable] = {
    "is_finite": _is_finite, "fill": _fill, "arange": _arange,
    "sum_axis": _sum_like("sum"), "mean_axis": _sum_like("mean"), "prod_axis": _sum_like("prod"),
    "max_axis": _extreme(True), "min_axis": _extreme(False), "argmax_axis": _arg(True), "argmin_axis": _arg(False),
    "cumsum": _cumsum, "matmul": _matmul, "dequant_matmul": _dequant_matmul,
    "softmax": _softmax(False), "log_softmax": _softmax(True), "layer_norm": _norm(False),
    "rms_norm": _norm(True), "gather": _gather,
    "transpose": _transpose, "reshape": _reshape, "concat": _concat,
    "slice": _slice, "dynamic_slice": _dynamic_slice, "rope": _rope, "sdpa": _sdpa, "conv1d": _conv,
    "conv2d": _conv,
    "max_pool2d": _pool(True), "avg_pool2d": _pool(False), "lrn": _lrn,
}


def expected(case) -> np.ndarray:
    """The oracle's result for a ConformanceCase, in the output dtype's unpacked representation."""
    c = Ctx(case)
    xs = [Arr.of(x) for x in case.inputs]
    from .detection_oracle import DETECTION
    from .indexing_oracle import INDEXING
    from .quant_oracle import QUANT
    from .resample_oracle import RESAMPLE

    fn = ELEMENTWISE.get(case.op) or WHOLE.get(case.op) or RESAMPLE.get(case.op) or INDEXING.get(case.op) \
        or DETECTION.get(case.op) or QUANT[case.op]
    return to_array(fn(xs, c), c.out)
