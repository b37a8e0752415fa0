"""Generated conformance cases: every op x every allowed dtype x every allowed mode, from the registry.

`generate_cases()` returns plain records (NumPy arrays in OpenInfer's unpacked representation,
dtype objects, attribute values as `OpSpec.infer` takes them), deterministic across runs. The
reference kernels are checked against `oracle.expected(case)` here; the interpreter and the
compiled targets reuse the same records and `assert_matches`.

Values include the edge cases each op's semantics single out: NaN, ±inf, -0.0, the largest and
smallest values of the type, integer min/max, division by zero, ties for rounding and argmax.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from openinfer import dtypes as dt
from openinfer.dtypes import DTypeInfo, Kind
from openinfer.numerics import round_float, wrap_int
from openinfer.ops import Inference, OpSpec, TensorType, all_ops, get
from openinfer.ops.registry import cast_allowed
from openinfer.reference.kernels import run_kernel

# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Tolerance:
    """|actual - expected| <= atol + rtol * |expected| for finite floats; NaN and ±inf must match
    exactly; `zero_sign`: a zero result must have the expected sign."""

    rtol: float = 0.0
    atol: float = 0.0
    zero_sign: bool = True


@dataclass(frozen=True)
class ConformanceCase:
    id: str                                  # "add/f32/normal/broadcast"
    op: str
    mode: str                                # normal | inplace (aliasing input 0) | accumulate
    inputs: tuple[np.ndarray, ...]
    input_dtypes: tuple[DTypeInfo, ...]
    attrs: Mapping[str, object]
    out_dtype: DTypeInfo
    out_shape: tuple[int, ...]
    tolerance: Tolerance = field(default_factory=Tolerance)

    @property
    def input_types(self) -> tuple[TensorType, ...]:
        return tuple(TensorType(d, x.shape) for d, x in zip(self.input_dtypes, self.inputs, strict=True))

    @property
    def output(self) -> TensorType:
        return TensorType(self.out_dtype, self.out_shape)

    @property
    def spec(self) -> OpSpec:
        return get(self.op)

    def infer(self) -> Inference:
        return self.spec.infer(self.input_types, dict(self.attrs), self.output,
                               output_name_is_input=self.mode == "inplace")

    def run_reference(self) -> np.ndarray:
        inf = self.infer()
        return run_kernel(self.spec, list(self.inputs), inf.attrs, inf)


def mismatches(case: ConformanceCase, actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Boolean mask of the elements of `actual` that do not match `expected` under the case's rules."""
    if not case.out_dtype.is_float:
        return actual != expected
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    tol = case.tolerance
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    both = ~a_nan & ~e_nan
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.where(np.isinf(e) | np.isinf(a), a == e, np.abs(a - e) <= tol.atol + tol.rtol * np.abs(e))
    bad = (a_nan != e_nan) | (both & ~close)
    if tol.zero_sign:
        bad |= both & (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))
    return bad


def assert_matches(case: ConformanceCase, actual: np.ndarray, expected: np.ndarray,
                   flushed_expected: np.ndarray | None = None) -> None:
    """Raise AssertionError naming the first mismatching elements unless `actual` matches.

    With `flushed_expected` (see `flushing_expected`), an element also matches when it equals
    the result the op gives with f32 subnormals flushed to zero."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    where = f"{case.id}: "
    if actual.shape != expected.shape:
        raise AssertionError(f"{where}shape {actual.shape}, expected {expected.shape}")
    if actual.dtype != case.out_dtype.np_dtype:
        raise AssertionError(f"{where}dtype {actual.dtype}, expected {case.out_dtype.np_dtype}")
    bad = mismatches(case, actual, expected)
    if flushed_expected is not None:
        bad &= mismatches(case, actual, np.asarray(flushed_expected))
    if np.any(bad):
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:5]]
        detail = "; ".join(f"at {i}: got {actual[i]!r}, expected {expected[i]!r}, inputs "
                           f"{_inputs_at(case, i)}" for i in idx)
        raise AssertionError(f"{where}{int(np.sum(bad))} of {bad.size} elements differ: {detail}")


#: dtypes whose values are f32 values where kernels compute (bf16 subnormals are f32 subnormals
#: once decoded; f16 and f8 subnormals are normal f32 numbers)
F32_DOMAIN = ("f32", "bf16")


def flush_f32_subnormals(x: np.ndarray) -> np.ndarray:
    """`x` with every f32 subnormal replaced by a zero of the same sign (what FTZ/DAZ hardware sees)."""
    x = np.asarray(x)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(invalid="ignore"):
        sub = (x != 0) & (np.abs(x) < tiny)
    return np.where(sub, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


def flushing_expected(case: ConformanceCase, oracle: Callable[[ConformanceCase], np.ndarray]) -> np.ndarray:
    """The case's result on a device that flushes f32 subnormals to zero (Vulkan allows it where
    `shaderDenormPreserveFloat32` is not enabled): the oracle on flushed inputs, output flushed."""
    inputs = tuple(flush_f32_subnormals(x) if d.name in F32_DOMAIN else x
                   for x, d in zip(case.inputs, case.input_dtypes, strict=True))
    out = oracle(replace(case, inputs=inputs))
    return flush_f32_subnormals(out) if case.out_dtype.name in F32_DOMAIN else out


def _inputs_at(case: ConformanceCase, idx: tuple[int, ...]) -> str:
    vals = []
    for x in case.inputs:
        if x.shape == case.out_shape:
            vals.append(repr(x[idx]))
        elif x.ndim == 0:
            vals.append(repr(x[()]))
    return "(" + ", ".join(vals) + ")" if vals else "(see case)"


# --------------------------------------------------------------------------- tolerances

_BASE = {"f64": (1e-12, 1e-300), "f32": (1e-5, 1e-37), "f16": (1e-3, 2.0 ** -24), "bf16": (1e-2, 2.0 ** -133),
         "f8": (0.25, 2.0 ** -16)}
_LOOSE = {"f64": (1e-9, 1e-9), "f32": (1e-4, 1e-5), "f16": (4e-3, 4e-3), "bf16": (3e-2, 3e-2), "f8": (0.5, 0.25)}
#: ops whose result is a sum of many terms or a chain of transcendental steps
_LOOSE_OPS = {"matmul", "dequant_matmul", "sum_axis", "mean_axis", "prod_axis", "softmax", "log_softmax",
              "layer_norm", "rms_norm", "rope", "sdpa", "conv1d", "conv2d", "avg_pool2d", "gelu", "silu", "sigmoid",
              "lrn", "resize"}
#: ops whose zero results may differ in sign between exact and f32 evaluation
_NO_ZERO_SIGN = _LOOSE_OPS | {"max_pool2d", "exp", "log", "tanh", "erf", "relu", "fma"}


def tolerance(op: str, out: DTypeInfo) -> Tolerance:
    if not out.is_float:
        return Tolerance()
    rtol, atol = (_LOOSE if op in _LOOSE_OPS else _BASE)[out.name]
    return Tolerance(rtol, atol, op not in _NO_ZERO_SIGN)


# --------------------------------------------------------------------------- values

def _float_edges(t: DTypeInfo) -> list[float]:
    big = {"f64": 1.7976931348623157e308, "f32": 3.4028234663852886e38, "f16": 65504.0,
           "bf16": 3.3895313892515355e38, "f8": 57344.0}[t.name]
    tiny = {"f64": 5e-324, "f32": 2.0 ** -149, "f16": 2.0 ** -24, "bf16": 2.0 ** -133, "f8": 2.0 ** -16}[t.name]
    return [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, np.nan, np.inf, -np.inf, 1.5, -0.5, big, -big, tiny]


def _int_edges(t: DTypeInfo) -> list[int]:
    cand = [t.lo, t.hi, 0, 1, -1, t.lo + 1, t.hi - 1, 2, -2, 3]
    out: list[int] = []
    for v in cand:
        if t.lo <= v <= t.hi and v not in out:
            out.append(v)
    return out


def as_type(x, t: DTypeInfo) -> np.ndarray:
    """Values made representable in t (its unpacked NumPy representation)."""
    # Python lists go through object arrays: NumPy would turn [2**64 - 1, 0] into float64.
    x = np.array(x, dtype=object) if isinstance(x, list | int) else np.asarray(x)
    if t.is_float:
        with np.errstate(over="ignore"):  # edge values past the type's range become ±inf
            return round_float(np.asarray(x, dtype=np.float64), t)
    if t.kind is Kind.BOOL:
        return x.astype(np.bool_)
    ints = [int(v) for v in np.asarray(x, dtype=object).reshape(-1)]
    wide = np.array(ints, dtype=np.uint64 if t.kind is Kind.UNSIGNED else np.int64).reshape(x.shape)
    return wrap_int(wide, t)


def values(t: DTypeInfo, shape: tuple[int, ...], rng: np.random.Generator, *, edges: bool = True,
           offset: int = 0, scale: float = 2.0, small: bool = False) -> np.ndarray:
    """Random values of t with (optionally) its edge values at the first positions, rotated by
    `offset` so that two inputs pair different edges. `small`: integers limited to -4..4."""
    n = int(np.prod(shape, dtype=np.int64))
    if t.kind is Kind.BOOL:
        flat = rng.random(n) < 0.5
        if edges and n >= 2:
            flat[:2] = [offset % 2 == 0, offset % 2 == 1]
        return flat.reshape(shape)
    if t.is_float:
        flat = rng.normal(0.0, scale, n)
        edge = _float_edges(t) if edges else []
    else:
        lo, hi = (max(t.lo, -4), min(t.hi, 4)) if small else (t.lo, t.hi)
        flat = np.array([int(v) for v in rng.integers(lo, hi, n, endpoint=True, dtype=np.int64
                                                      if t.kind is not Kind.UNSIGNED else np.uint64)], dtype=object)
        edge = _int_edges(t) if edges else []
    if edge and n:
        k = len(edge)
        rolled = edge[offset % k:] + edge[:offset % k]
        for i, v in enumerate(rolled[:n]):
            flat[i] = v
    if t.is_float:
        return as_type(np.asarray(flat, dtype=np.float64).reshape(shape), t)
    return np.array([int(v) for v in flat], dtype=np.int64 if t.kind is not Kind.UNSIGNED else np.uint64
                    ).astype(t.np_dtype).reshape(shape)


# --------------------------------------------------------------------------- variants

@dataclass
class Variant:
    tag: str
    inputs: list[tuple[DTypeInfo, np.ndarray]]
    attrs: dict = field(default_factory=dict)
    out: TensorType | None = None     # a declared output, where the op needs one
    inplace: bool = False             # also emit an in-place case (input 0 aliased)
    out_t: bool = False               # accumulate: declare the output as T (float accumulator rounded on store)


Builder = Callable[[OpSpec, DTypeInfo, np.random.Generator], list[Variant]]
SHAPE = (3, 5)


def _unary(attr_sets: Callable[[DTypeInfo], list[dict]] | None = None, *, edges: bool = True) -> Builder:
    def build(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
        x = values(t, SHAPE, rng, edges=edges)
        sets = attr_sets(t) if attr_sets else [{}]
        return [Variant(f"attrs{i}" if a else "edges", [(t, x)], a, inplace=i == 0) for i, a in enumerate(sets)]
    return build


def _binary(*, broadcast: bool = False, attr_sets: Callable[[DTypeInfo], list[dict]] | None = None,
            pairs: Callable[[DTypeInfo, np.random.Generator], tuple[np.ndarray, np.ndarray]] | None = None) -> Builder:
    def build(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
        a, b = pairs(t, rng) if pairs else (values(t, SHAPE, rng), values(t, SHAPE, rng, offset=3))
        out = [Variant("edges" if not i else f"attrs{i}", [(t, a), (t, b)], s, inplace=i == 0)
               for i, s in enumerate(attr_sets(t) if attr_sets else [{}])]
        if broadcast:
            out.append(Variant("broadcast", [(t, values(t, (2, 1, 4), rng, offset=1)),
                                             (t, values(t, (3, 1), rng, offset=5))]))
            out.append(Variant("scalar", [(t, values(t, (3, 4), rng, offset=2)), (t, values(t, (), rng, offset=2))]))
            out.append(Variant("inplace_broadcast", [(t, values(t, (3, 4), rng, offset=4)),
                                                     (t, values(t, (4,), rng, offset=6))], inplace=True))
        return out
    return build


def _div_pairs(t: DTypeInfo, rng) -> tuple[np.ndarray, np.ndarray]:
    """Division edge pairs first: INT_MIN / -1, x / 0, signs of both operands, then random."""
    if t.is_float:
        a = [1.0, -1.0, 0.0, np.nan, np.inf, 7.0, -7.0, 3.0, 1.0, -np.inf, 2.5, 0.0]
        b = [0.0, -0.0, 0.0, 2.0, 0.0, 2.0, 2.0, -2.0, np.inf, -np.inf, 0.5, -3.0]
    elif t.is_signed:
        a = [t.lo, t.lo, t.hi, 3, -3, 3, -3, 0, 5, t.lo, -1, 1]
        b = [-1, 0, -1, 2, 2, -2, -2, 0, 0, 1, 0, t.lo]
    else:
        a = [t.hi, t.hi, 0, 3, 1, 0, t.hi, 2, 1, 3, 0, 1]
        b = [0, 1, 0, 2, t.hi, 1, 2, 3, 1, 0, 2, 3]
    a = [v for v in a if t.is_float or t.lo <= v <= t.hi]
    b = b[:len(a)]
    b = [v if t.is_float or t.lo <= v <= t.hi else 1 for v in b]
    n = int(np.prod(SHAPE))
    ra, rb = values(t, (n,), rng, edges=False), values(t, (n,), rng, edges=False)
    ra[:len(a)], rb[:len(b)] = as_type(a, t), as_type(b, t)
    return ra.reshape(SHAPE), rb.reshape(SHAPE)


def _pow_pairs(t: DTypeInfo, rng) -> tuple[np.ndarray, np.ndarray]:
    """pow's special cases first (zeros, infinities, NaN, -1, negative bases with integer and
    fractional exponents), then random bases with exponents in [-4, 4], half of them integers."""
    a = [0.0, -0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, -2.0, -2.0, -8.0, 3.0]
    b = [-3.0, -3.0, 2.0, 3.0, -1.0, 3.0, 0.0, np.nan, np.inf, -np.inf, np.inf, 0.5, 3.0, 1 / 3, 40.0]
    n = int(np.prod(SHAPE))
    ra = values(t, (n,), rng, edges=False)
    rb = np.round(rng.uniform(-4, 4, n) * 4) / 4
    rb[::2] = np.round(rb[::2])
    rb = as_type(rb, t)
    ra[:len(a)], rb[:len(b)] = as_type(a, t), as_type(b, t)
    return ra.reshape(SHAPE), rb.reshape(SHAPE)


def _compare_pairs(t: DTypeInfo, rng) -> tuple[np.ndarray, np.ndarray]:
    a, b = values(t, SHAPE, rng), values(t, SHAPE, rng, offset=3)
    b.reshape(-1)[::3] = a.reshape(-1)[::3]   # equal pairs (NaN == NaN too)
    if t.is_float:
        a.reshape(-1)[1], b.reshape(-1)[1] = as_type(-0.0, t), as_type(0.0, t)
    return a, b


def _mask_attrs(t: DTypeInfo) -> list[dict]:
    return [{}, {"div_by_zero_mask": np.inf if t.is_float else (7 if t.hi >= 7 else 1)}]


def _floor_div_attrs(t: DTypeInfo) -> list[dict]:
    return [{}, {"div_by_zero_mask": -1 if t.is_signed else 3}]


def _relu_attrs(t: DTypeInfo) -> list[dict]:
    if t.is_float:
        return [{}, {"alpha": 0.1}, {"negative_slope": 0.25, "clamp_max": 6.0, "clamp_min": -1.0},
                {"clamp_min": 0.0}]
    return [{}, {"alpha": 0.5}, {"negative_slope": 2.0, "clamp_max": 6, "clamp_min": -3},
            {"alpha": 0.0, "clamp_max": float("inf"), "clamp_min": float("-inf")}]


def _clamp_attrs(t: DTypeInfo) -> list[dict]:
    if t.is_float:
        return [{}, {"min": -1.5, "max": 2.0}, {"min": 0.0}, {"max": -0.0}]
    return [{}, {"min": max(t.lo, -1), "max": min(t.hi, 2)}, {"min": 1}, {"max": float("inf"), "min": 0.0}]


def _shift_attrs(t: DTypeInfo) -> list[dict]:
    return [{"bits": b} for b in (1, 0, 3, t.bits - 1, t.bits, 63, 64, 70, -1)]


#: the largest binary exponent of each float dtype's finite values
_MAX_EXPONENT = {"f64": 1023, "f32": 127, "bf16": 127, "f16": 15, "f8": 15}


def _unary_float(attr_sets: Callable[[DTypeInfo], list[dict]] | None = None, *, scale: float = 2.0) -> Builder:
    """A float op of one input (the activations and the trigonometric and hyperbolic functions):
    the edge values (with each attribute set), random values of `scale` in an odd shape (the
    edges fill the whole of SHAPE), and random magnitudes over the dtype's whole exponent range
    with random signs (argument reduction, overflow, the saturated tails)."""
    edges = _unary(attr_sets)

    def build(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
        e = _MAX_EXPONENT[t.name]
        wide = rng.choice([-1.0, 1.0], (5, 13)) * np.exp2(rng.uniform(-e / 4, e + 0.99, (5, 13)))
        return [*edges(op, t, rng), Variant("random", [(t, values(t, (7, 11), rng, edges=False, scale=scale))]),
                Variant("wide", [(t, as_type(wide, t))])]
    return build


def _filter(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    a, b = values(t, SHAPE, rng), values(t, SHAPE, rng, offset=4)
    cond = values(t, SHAPE, rng, offset=7)
    cond.reshape(-1)[::2] = as_type(0, t)
    return [Variant("edges", [(t, a), (t, b), (t, cond)], inplace=True)]


def _fma(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    return [Variant("edges", [(t, values(t, SHAPE, rng, offset=o)) for o in (0, 4, 9)], inplace=True)]


def _is_finite(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, SHAPE, rng)
    finite = values(t, SHAPE, rng, edges=False)
    return [Variant("all", [(t, x)], out=TensorType(dt.BOOL, ())),
            Variant("all_true", [(t, finite)], out=TensorType(dt.BOOL, ())),
            Variant("elementwise", [(t, x)], out=TensorType(dt.BOOL, SHAPE))]


def _fill(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, SHAPE, rng)
    if t.is_float:
        vals: list = [1.5, -0.0, float("inf"), 3]
    elif t.kind is Kind.BOOL:
        vals = [True, False, 1]
    else:
        vals = [t.lo, t.hi, min(1, t.hi)]
    return [Variant(f"value{i}", [(t, x)], {"value": v}, inplace=i == 0) for i, v in enumerate(vals)]


def _arange(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """1-d counts up and down, past T's range (integers wrap), fractional float steps that do not
    sum exactly, and 2-d outputs counting along either axis."""
    x = values(t, (13,), rng)
    if t.is_float:
        sets: list[dict] = [{}, {"start": 0.1, "step": 0.1}, {"start": 100.0, "step": -7.25},
                            {"start": -3.0, "step": 1e-3}]
    else:
        sets = [{}, {"start": t.hi - 5, "step": 1}, {"start": min(t.hi, 7), "step": min(t.hi, 3)}]
        if t.is_signed:
            sets.append({"start": t.lo + 2, "step": -1})
    out = [Variant(f"attrs{i}" if a else "default", [(t, x)], a, inplace=i == 0) for i, a in enumerate(sets)]
    m = values(t, (3, 4), rng)
    out.append(Variant("axis0", [(t, m)], {"axis": 0, "start": 2, "step": 3}, inplace=True))
    out.append(Variant("axis_last", [(t, m)], {"axis": -1, "start": 1}))
    return out


def _cast(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    out = []
    x = values(t, SHAPE, rng)
    if t.is_float:
        extra = [2.5, -2.5, 3.5, -0.5, 0.5, 1e10, -1e10, 300.7, -129.5, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 70000.0,
                 255.5]
        x = as_type(np.concatenate([np.asarray(x, np.float64).reshape(-1), extra]), t)
    for to in dt.TENSOR_DTYPES:
        if not cast_allowed(t, to):
            continue
        if t.is_float and to.is_int:
            for mode in ("trunc", "floor", "ceil", "nearest"):
                for sat in (True, False):
                    attrs = {"to": to, "rounding_mode": mode, "saturate": sat}
                    out.append(Variant(f"{to.name}/{mode}/{'sat' if sat else 'wrap'}", [(t, x)], attrs))
        else:
            out.append(Variant(to.name, [(t, x)], {"to": to}))
    return out


def _reduce(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (2, 3, 4), rng, edges=False, small=True, scale=1.0)
    out = [Variant("axis1", [(t, x)], {"axes": [1]}), Variant("last_keep", [(t, x)], {"axes": [-1], "keepdims": True}),
           Variant("axes02", [(t, x)], {"axes": [0, 2]}), Variant("all_dup", [(t, x)], {"axes": [2, -1, 0, 1]})]
    if t.is_float:
        e = np.asarray(x, np.float64).copy()
        e[0, 0, :2] = [np.nan, 1.0]
        e[0, 1, :2] = [np.inf, -0.0]
        e[1, 0, :] = [-0.0, -0.0, -0.0, -0.0]
        e[1, 1, :] = [-0.0, 0.0, -1.0, -0.0]          # max: +0.0 wherever it sits
        e[0, 2, :] = [0.0, -0.0, 1.0, 0.0]            # min: -0.0 wherever it sits
        e[1, 2, :2] = [np.inf, -np.inf]
        out.append(Variant("specials", [(t, as_type(e, t))], {"axes": [2]}))
    elif t.kind is not Kind.BOOL:
        out.append(Variant("extremes", [(t, values(t, (2, 3, 4), rng))], {"axes": [1, 2]}))
    return out


def _arg_reduce(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (3, 4), rng, edges=False, small=True, scale=1.0)
    ties = np.asarray(x, np.float64 if t.is_float else np.int64).copy()
    ties[0, :] = [1, 3, 3, 0]
    ties[1, :] = [2, 2, 0, 2] if t.lo is None or t.lo < 0 or t.is_float else [2, 2, 1, 2]
    ties = as_type(ties, t)
    out = [Variant(f"axis{a}_{'first' if f else 'last'}{'_keep' if k else ''}", [(t, ties)],
                   {"axis": a, "select_first": f, "keepdims": k})
           for a, f, k in [(1, True, False), (1, False, False), (0, True, True), (-1, False, True), (-2, False, False)]]
    if t.is_float:
        e = np.asarray(ties, np.float64).copy()
        e[0, :] = [1.0, np.nan, 2.0, np.nan]
        e[1, :] = [-0.0, 0.0, -1.0, -np.inf]
        e[2, :] = [np.inf, -np.inf, np.inf, 0.0]
        e = as_type(e, t)
        out += [Variant("specials_first", [(t, e)], {"axis": 1}),
                Variant("specials_last", [(t, e)], {"axis": 1, "select_first": False})]
    return out


def _cumsum(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Each axis, exclusive and reverse, odd sizes; floats: NaN, ±inf, -0.0 (a leading -0.0 kept);
    integers: their extremes (the sums wrap)."""
    x = values(t, (3, 5, 7), rng, edges=False, small=True, scale=1.0)
    out = [Variant(f"axis{a}{'_excl' if e else ''}{'_rev' if r else ''}", [(t, x)],
                   {"axis": a, **({"exclusive": True} if e else {}), **({"reverse": True} if r else {})})
           for a, e, r in [(0, False, False), (1, True, False), (-1, False, True), (2, True, True), (-2, False, True)]]
    if t.is_float:
        e = np.asarray(values(t, (4, 5), rng, edges=False, scale=1.0), np.float64).copy()
        e[0, :] = [-0.0, -0.0, 1.0, -1.0, -0.0]
        e[1, :] = [1.0, np.nan, 2.0, 3.0, 4.0]
        e[2, :] = [np.inf, 1.0, -np.inf, 2.0, 0.5]
        e = as_type(e, t)
        out += [Variant("specials", [(t, e)], {"axis": 1}),
                Variant("specials_excl_rev", [(t, e)], {"axis": 1, "exclusive": True, "reverse": True})]
    else:
        out.append(Variant("extremes", [(t, values(t, (2, 9), rng))], {"axis": 1}))
    return out


def _matmul_values(t: DTypeInfo, shape, rng, offset=0):
    if t.is_float:
        return values(t, shape, rng, edges=False, scale=1.0)
    return values(t, shape, rng, offset=offset)


def _matmul(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    def mv(shape, o=0):
        return (t, _matmul_values(t, shape, rng, o))
    return [Variant("2d", [mv((3, 4)), mv((4, 2), 3)], inplace=False),
            Variant("batch", [mv((2, 1, 3, 4)), mv((3, 4, 2), 2)]),
            Variant("vec_mat", [mv((4,)), mv((4, 3), 1)]),
            Variant("mat_vec", [mv((3, 4)), mv((4,), 5)]),
            Variant("vec_vec", [mv((4,)), mv((4,), 2)]),
            Variant("square_inplace", [mv((3, 3)), mv((3, 3), 4)], inplace=True),
            # operands read as stored with their last two dims swapped: b as an [N, K] weight, a as
            # [K, M], both, and batch dims broadcast with a vector a
            Variant("transpose_b", [mv((3, 4)), mv((2, 4), 3)], {"transpose_b": True}),
            Variant("transpose_a", [mv((4, 3)), mv((4, 2), 3)], {"transpose_a": True}),
            Variant("transpose_ab_batch", [mv((2, 1, 4, 3)), mv((3, 2, 4), 2)],
                    {"transpose_a": True, "transpose_b": True}),
            Variant("vec_transpose_b", [mv((4,)), mv((2, 3, 4), 1)], {"transpose_b": True})]


def _dequant_matmul(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Each weight dtype per channel (with and without zero points), per tensor, GEMV and GEMM;
    the weights span the dtype's whole range, odd K and N exercise the i4/u4 nibble tails."""
    out = []
    for wt in (dt.I8, dt.U8, dt.lookup("i4"), dt.lookup("u4")):
        w = rng.integers(wt.lo, wt.hi + 1, (5, 7)).astype(wt.np_dtype)
        w[0, :2] = (wt.lo, wt.hi)
        scale = rng.uniform(0.01, 0.2, 7).astype(np.float32)
        zp = rng.integers(wt.lo // 2, wt.hi // 2 + 1, 7).astype(np.int32)
        x2 = values(t, (3, 5), rng, edges=False, scale=1.0)
        x1 = values(t, (5,), rng, edges=False, scale=1.0)
        out += [Variant(f"{wt.name}/channel", [(t, x2), (wt, w), (dt.F32, scale)]),
                Variant(f"{wt.name}/channel_zp_gemv", [(t, x1), (wt, w), (dt.F32, scale), (dt.I32, zp)]),
                Variant(f"{wt.name}/tensor_zp", [(t, x2), (wt, w), (dt.F32, scale[:1]), (dt.I32, zp[:1])])]
    return out


def _softmax(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (3, 5), rng, edges=False, scale=3.0)
    e = np.asarray(x, np.float64).copy()
    e[1, :2] = -np.inf
    return [Variant("last", [(t, x)], inplace=True), Variant("axis0", [(t, x)], {"axis": 0}),
            Variant("neg_inf", [(t, as_type(e, t))], {"axis": -1}), *_extreme_rows(t, rng)]


def _extreme_rows(t: DTypeInfo, rng) -> list[Variant]:
    """Rows whose exp overflows or underflows every float type unless the row's maximum is
    subtracted first: near-equal large values (+/-1000), large values of both signs (one-hot),
    and tiny ones (uniform). Their results are ordinary numbers, so a kernel that skips the
    shift (inf / inf = NaN, 0 / 0 = NaN, log(inf)) fails."""
    ulp_at_1000 = {"f64": 2.0 ** -43, "f32": 2.0 ** -14, "f16": 0.5, "bf16": 4.0, "f8": 128.0}[t.name]
    spacing = np.array([0.0, 1.0, -2.0, 3.0, 0.5])[None, :] * max(1.0, ulp_at_1000)
    near = np.concatenate([1000.0 + spacing, -1000.0 + spacing, 30000.0 + spacing * 8])
    mixed = np.array([[3e4, -3e4, 1.0, -1.0, 0.0], [-2e4, 2e4, 2e4, -0.0, 5e3], [9e3, 8e3, -9e3, 0.0, 1e4]])
    tiny = rng.normal(0.0, 1.0, (3, 5)) * max(1e-30, 4.0 * _tiny(t))
    return [Variant("large", [(t, as_type(near, t))]), Variant("mixed_signs", [(t, as_type(mixed, t))]),
            Variant("tiny", [(t, as_type(tiny, t))])]


def _tiny(t: DTypeInfo) -> float:
    """The smallest normal value of float type t."""
    return {"f64": 2.0 ** -1022, "f32": 2.0 ** -126, "f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f8": 2.0 ** -14}[t.name]


def _norm(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (2, 3, 4), rng, edges=False)
    g, b = values(t, (4,), rng, edges=False), values(t, (4,), rng, edges=False)
    g2 = values(t, (3, 4), rng, edges=False)
    out = [Variant("plain", [(t, x)], inplace=True), Variant("gamma", [(t, x), (t, g)], {"eps": 1e-3}),
           Variant("axis1", [(t, x), (t, g2)], {"axis": 1})]
    if op.name == "layer_norm":
        out.append(Variant("gamma_beta", [(t, x), (t, g), (t, b)]))
    # Extreme magnitudes: x^2 near the top of the compute type (a narrow accumulator overflows),
    # values far below eps, and a mean 100 times the spread (E[x^2] - E[x]^2 cancels).
    big = {"f64": 1e150, "f32": 1e18, "f16": 3e4, "bf16": 1e18, "f8": 2e4}[t.name]
    out += [Variant("large", [(t, as_type(rng.normal(0.0, 1.0, (2, 3, 4)) * big, t))]),
            Variant("tiny", [(t, as_type(rng.normal(0.0, 1.0, (2, 3, 4)) * 1e-20, t))], {"eps": 1e-5}),
            Variant("offset", [(t, as_type(100.0 + rng.normal(0.0, 1.0, (2, 3, 4)), t))])]
    return out


def _gather(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    table = values(t, (5, 3), rng)
    idx_types = index_dtypes()
    it = idx_types[zlib.crc32(t.name.encode()) % len(idx_types)]
    idx = np.array([[0, 4, 2], [1, 1, 3]] if not it.is_signed else [[0, -1, 2], [-5, 1, 4]]).astype(it.np_dtype)
    out = [Variant(f"rows_{it.name}", [(t, table), (it, idx)]),
           Variant("axis1", [(t, table), (dt.I64, np.array([2, 0, 2, -3]))], {"axis": 1})]
    if t.name == "f32":
        out += [Variant(f"index_{d.name}", [(t, table), (d, np.array([3, 0, 1], dtype=d.np_dtype))])
                for d in idx_types]
    return out


def index_dtypes() -> list[DTypeInfo]:
    """The dtypes indices may have (gather, gather_nd, scatter_nd)."""
    return [d for d in dt.TENSOR_DTYPES if d.kind in (Kind.SIGNED, Kind.UNSIGNED) and not d.is_packed
            and not d.is_ternary]


def index_cases(op: OpSpec, t: DTypeInfo, make: Callable[[DTypeInfo], list[tuple[DTypeInfo, np.ndarray]]]
                 ) -> list[Variant]:
    """f32 only: the inputs `make(index dtype)` builds with the indices of every index dtype."""
    return [Variant(f"index_{d.name}", make(d)) for d in index_dtypes()] if t.name == "f32" else []


def index_tuples(d: DTypeInfo, signed: list, unsigned: list) -> tuple[DTypeInfo, np.ndarray]:
    """Index tuples of dtype d: `signed` (negative ones among them) where d is signed."""
    return d, np.array(signed if d.is_signed else unsigned).astype(d.np_dtype)


def _transpose(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (2, 3, 4), rng)
    return [Variant("perm", [(t, x)], {"perm": [2, 0, 1]}), Variant("default", [(t, x)]),
            Variant("negative", [(t, x)], {"perm": [0, -1, -2]})]


def _reshape(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (2, 6), rng)
    return [Variant("3x4", [(t, x)], out=TensorType(t, (3, 4))), Variant("flat", [(t, x)], out=TensorType(t, (12,)))]


def _concat(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    return [Variant("axis0", [(t, values(t, (2, 3), rng)), (t, values(t, (1, 3), rng, offset=2)),
                              (t, values(t, (2, 3), rng, offset=5))]),
            Variant("last", [(t, values(t, (2, 2), rng, offset=1)), (t, values(t, (2, 3), rng, offset=7))],
                    {"axis": -1}),
            Variant("single", [(t, values(t, (4,), rng))])]


def _slice(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (4, 6), rng)
    return [Variant("basic", [(t, x)], {"starts": [1, 2], "ends": [3, 5]}),
            Variant("negative", [(t, x)], {"starts": [-1], "ends": [-100], "axes": [1], "steps": [-2]}),
            Variant("clamped", [(t, x)], {"starts": [-10, 1], "ends": [100, 1000], "axes": [-1, 0],
                                          "steps": [2, 1]})]


def _dynamic_slice(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Starts inside, negative and past the end (clamped), of signed and unsigned index types, 0-d
    and one-element, on one and two axes."""
    x = values(t, (4, 5, 3), rng)
    at = lambda d, v: (d, np.array(v, dtype=d.np_dtype))   # noqa: E731
    i64, u8 = dt.lookup("i64"), dt.lookup("u8")
    return [Variant("row", [(t, x), at(i64, 2)], {"sizes": [1]}),
            Variant("negative", [(t, x), at(dt.lookup("i32"), -3)], {"sizes": [2], "axes": [0]}),
            Variant("past_end", [(t, x), at(u8, [200])], {"sizes": [3], "axes": [1]}),
            Variant("two_axes", [(t, x), at(i64, 1), at(dt.lookup("u32"), 1)], {"sizes": [2, 2], "axes": [-1, 1]}),
            Variant("whole", [(t, x), at(dt.lookup("i8"), 4)], {"sizes": [5], "axes": [1]})]


def _rope(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (3, 2, 4), rng, edges=False)
    pos = np.array([0, 5, 17], dtype=np.int32)
    x2 = values(t, (2, 6), rng, edges=False)
    return [Variant("halves", [(t, x), (dt.I32, pos)], inplace=True),
            Variant("interleaved", [(t, x), (dt.I32, pos)], {"interleaved": True, "theta": 500.0}),
            Variant("scalar_pos", [(t, x2), (dt.U16, np.array(9, dtype=np.uint16))]),
            Variant("batched", [(t, values(t, (2, 3, 1, 2), rng, edges=False)), (dt.I64, np.array([3, 2, 1]))],
                    {"interleaved": True})]


def _sdpa(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    def v(shape):
        return (t, values(t, shape, rng, edges=False, scale=1.0))
    keep = np.ones((3, 5), bool)
    keep[0, 1:] = False
    keep[2, :] = False                       # a query with no key: zeros
    add = as_type(rng.normal(0, 1, (1, 3, 5)), t)
    return [Variant("plain", [v((2, 3, 4)), v((2, 5, 4)), v((2, 5, 3))]),
            Variant("causal_scale", [v((2, 3, 4)), v((2, 5, 4)), v((2, 5, 3))], {"causal": True, "scale": 0.3}),
            Variant("bool_mask", [v((2, 3, 4)), v((2, 5, 4)), v((2, 5, 3)), (dt.BOOL, keep)]),
            Variant("float_mask", [v((2, 3, 4)), v((1, 5, 4)), v((2, 5, 3)), (t, add)]),
            Variant("gqa", [v((1, 4, 2, 4)), v((1, 2, 3, 4)), v((1, 2, 3, 4))], {"causal": True}),
            Variant("decode", [v((2, 1, 4)), v((2, 5, 4)), v((2, 5, 4))], {"causal": True}),
            Variant("prefill_gt_keys", [v((4, 4)), v((2, 4)), v((2, 2))], {"causal": True}),
            *_sdpa_extremes(t, rng)]


def _sdpa_extremes(t: DTypeInfo, rng) -> list[Variant]:
    """Scores of several hundred (f64: several thousand), whose exp overflows the compute type
    unless each row's maximum is subtracted; and tiny scores (uniform weights)."""
    big = 40.0 if t.name == "f64" else 10.0
    q, k = (as_type(rng.normal(0.0, big, s), t) for s in ((2, 3, 4), (2, 5, 4)))
    v = as_type(rng.normal(0.0, 1.0, (2, 5, 3)), t)
    tq = as_type(rng.normal(0.0, 1e-3, (2, 3, 4)), t)
    return [Variant("large_scores", [(t, q), (t, k), (t, v)], {"scale": 1.0}),
            Variant("large_scores_causal", [(t, q), (t, k), (t, v)], {"scale": 1.0, "causal": True}),
            Variant("tiny_scores", [(t, tq), (t, k), (t, v)], {"scale": 1e-3})]


def _conv(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    def v(shape):
        return (t, values(t, shape, rng, edges=False, scale=1.0))
    if op.name == "conv1d":
        return [Variant("groups_stride", [v((2, 4, 7)), v((6, 2, 3)), v((6,))],
                        {"groups": 2, "stride": 2, "padding": 1}),
                Variant("dilation", [v((1, 3, 8)), v((2, 3, 2))], {"padding": [2, 0], "dilation": 2})]
    return [Variant("bias_stride", [v((1, 2, 5, 6)), v((3, 2, 3, 3)), v((3,))], {"stride": [1, 2], "padding": 1}),
            Variant("groups_dilation", [v((2, 4, 5, 5)), v((4, 2, 2, 2))],
                    {"groups": 2, "padding": [0, 1, 1, 0], "dilation": 2})]


def _pool(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = values(t, (1, 2, 5, 6), rng, edges=False)
    out = [Variant("k2", [(t, x)], {"kernel": 2}),
           Variant("pad", [(t, x)], {"kernel": [3, 2], "stride": [2, 1], "padding": 1})]
    if op.name == "avg_pool2d":
        out.append(Variant("pad_count", [(t, x)], {"kernel": 3, "stride": 1, "padding": [1, 0, 0, 1],
                                                   "count_include_pad": True}))
    else:
        e = np.asarray(x, np.float64).copy()
        e[0, 0, 0, 0] = np.nan
        out.append(Variant("nan", [(t, as_type(e, t))], {"kernel": 2}))
    return out


def _lrn(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Windows of odd and even size, wider than the channels, of one channel; 2-, 3- and 4-d x; a
    large alpha (the window's sum decides the result); specials, which spread to the channels whose
    window holds them; squares near the top of the compute type."""
    def v(*shape, scale=1.0):
        return (t, values(t, shape, rng, edges=False, scale=scale))
    e = np.asarray(values(t, (1, 5, 2, 3), rng, edges=False), np.float64).copy()
    e[0, 0, 0, :3] = [np.nan, np.inf, -0.0]
    e[0, 3, 1, :3] = [-np.inf, 0.0, 1.0]
    big = {"f64": 1e150, "f32": 1e18, "f16": 3e4, "bf16": 1e18, "f8": 2e4}[t.name]
    return [Variant("default", [v(2, 7, 3, 5)], {"size": 5}, inplace=True),
            Variant("attrs", [v(1, 4, 9)], {"size": 3, "alpha": 0.5, "beta": 0.6, "bias": 2.0}),
            Variant("even", [v(1, 6, 2, 2, scale=2.0)], {"size": 4, "alpha": 1.0}),
            Variant("wider_than_c", [v(2, 3, 1, 5)], {"size": 7, "alpha": 2.0, "beta": 1.0}),
            Variant("one_channel", [v(1, 5, 2, 3)], {"size": 1, "alpha": 0.9, "bias": 0.5}),
            Variant("nc", [v(3, 4)], {"size": 2, "alpha": 1.5, "beta": 0.25}),
            Variant("specials", [(t, as_type(e, t))], {"size": 3, "alpha": 1.0}),
            Variant("large", [(t, as_type(rng.normal(0.0, 1.0, (1, 4, 2, 3)) * big, t))], {"size": 3})]


# ------------------------------------------------- integer-only int8 ops (TFLite's int8 kernels)

BUILDERS: dict[str, Builder] = {
    **{n: _binary(broadcast=True) for n in ("add", "mul", "sub")},
    "div": _binary(broadcast=True, pairs=_div_pairs, attr_sets=_mask_attrs),
    "floor_div": _binary(broadcast=True, pairs=_div_pairs, attr_sets=_floor_div_attrs),
    "rem": _binary(broadcast=True, pairs=_div_pairs),
    "pow": _binary(broadcast=True, pairs=_pow_pairs),
    "fma": _fma,
    **{n: _unary() for n in ("neg", "abs", "sign", "floor", "ceil", "trunc", "round", "not", "popcount", "is_nan",
                             "is_inf", "is_neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "silu")},
    "recip": _unary(lambda t: [{}, {"div_by_zero_mask": float("inf")}]),
    "relu": _unary(_relu_attrs),
    "clamp": _unary(_clamp_attrs),
    "shl": _unary(_shift_attrs), "shr": _unary(_shift_attrs),
    "gelu": _unary(lambda t: [{}, {"approximate": "tanh"}]),
    **{n: _unary_float() for n in ("sin", "cos", "tan", "atan", "sinh", "cosh", "softplus", "softsign", "hard_swish",
                                   "mish")},
    **{n: _unary_float(scale=0.5) for n in ("asin", "acos")},
    "hard_sigmoid": _unary_float(lambda t: [{}, {"alpha": 0.35, "beta": 0.25}]),
    "elu": _unary_float(lambda t: [{}, {"alpha": 0.5}]),
    "selu": _unary_float(lambda t: [{}, {"alpha": 2.0, "gamma": 1.5}]),
    "celu": _unary_float(lambda t: [{}, {"alpha": 2.5}]),
    "leaky_relu": _unary_float(lambda t: [{}, {"alpha": 0.2}]),
    **{n: _binary() for n in ("min", "max")},
    **{n: _binary(broadcast=True) for n in ("and", "or", "xor")},
    **{n: _binary(broadcast=True, pairs=_compare_pairs) for n in ("eq", "ne", "lt", "le", "gt", "ge")},
    "filter": _filter, "is_finite": _is_finite, "fill": _fill, "arange": _arange, "cast": _cast,
    **{n: _reduce for n in ("sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis")},
    "argmax_axis": _arg_reduce, "argmin_axis": _arg_reduce, "cumsum": _cumsum, "matmul": _matmul,
    "dequant_matmul": _dequant_matmul,
    "softmax": _softmax, "log_softmax": _softmax, "layer_norm": _norm, "rms_norm": _norm,
    "gather": _gather, "transpose": _transpose,
    "reshape": _reshape, "concat": _concat, "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "rope": _rope, "sdpa": _sdpa, "conv1d": _conv, "conv2d": _conv, "max_pool2d": _pool, "avg_pool2d": _pool,
    "lrn": _lrn,
}


# --------------------------------------------------------------------------- accumulate variants

def _acc_variants(op: OpSpec, t: DTypeInfo, a: DTypeInfo, rng) -> list[Variant]:
    """acc written as a bare dtype, a one-element and (same twice) two-element list; floats also
    rounded back into T on store; matmul with separate product dtypes."""
    def v(shape, o=0):
        if t.is_float:
            return (t, values(t, shape, rng, edges=False, scale=1.0))
        return (t, values(t, shape, rng, offset=o))
    if op.name in ("add", "mul", "sub"):
        ins = [v((3, 4)), v((4,), 3)]
    elif op.name == "abs":
        ins = [v(SHAPE)]
    elif op.name == "matmul":
        ins = [v((3, 4)), v((4, 2), 3)]
    else:
        ins = [v((2, 3, 4))]
    attrs = {"axes": [1]} if op.name.endswith("_axis") else {"axis": 1} if op.name == "cumsum" else {}
    out = [Variant(a.name, ins, {**attrs, "acc": a}), Variant(f"[{a.name}]", ins, {**attrs, "acc": [a]})]
    if t.is_float:
        out.append(Variant(f"[{a.name},{a.name}]->T", ins, {**attrs, "acc": (a, a)}, out_t=True))
    if op.name == "matmul":
        for p in dict.fromkeys((t, *op.acc_pairs[t.name])):
            if p != a and p.kind is a.kind and p.bits <= a.bits:
                out.append(Variant(f"[{p.name},{a.name}]", ins, {"acc": [p, a]}))
    return out


# --------------------------------------------------------------------------- driver

def _case(op: OpSpec, t: DTypeInfo, mode: str, v: Variant) -> ConformanceCase:
    types = [TensorType(d, x.shape) for d, x in v.inputs]
    declared = v.out
    if v.out_t:
        probe = op.infer(types, v.attrs, None)
        declared = TensorType(t, probe.out_shape)
    inf = op.infer(types, v.attrs, declared)
    if mode == "inplace":
        inf = op.infer(types, v.attrs, inf.out, output_name_is_input=True)
    return ConformanceCase(f"{op.name}/{t.name}/{mode}/{v.tag}", op.name, mode,
                           tuple(x for _, x in v.inputs), tuple(d for d, _ in v.inputs), dict(v.attrs),
                           inf.out_dtype, inf.out_shape, tolerance(op.name, inf.out_dtype))


@cache
def _builders_elsewhere() -> dict[str, Builder]:
    """The builders kept apart for this module's size (they build on its values and Variant, so
    they are imported here, late)."""
    from .detection_cases import DETECTION_BUILDERS
    from .indexing_cases import INDEXING_BUILDERS
    from .quant_cases import QUANT_BUILDERS
    from .resample_cases import RESAMPLE_BUILDERS

    return {**DETECTION_BUILDERS, **INDEXING_BUILDERS, **QUANT_BUILDERS, **RESAMPLE_BUILDERS}


def _op_cases(op: OpSpec) -> Iterator[ConformanceCase]:
    build = BUILDERS.get(op.name) or _builders_elsewhere()[op.name]
    for t in op.dtypes:
        rng = np.random.default_rng(zlib.crc32(f"{op.name}/{t.name}".encode()))
        for v in build(op, t, rng):
            yield _case(op, t, "normal", v)
            if op.inplace and v.inplace:
                probe = op.infer([TensorType(d, x.shape) for d, x in v.inputs], v.attrs, v.out)
                if probe.out == TensorType(t, v.inputs[0][1].shape):
                    yield _case(op, t, "inplace", v)
    for src, accs in op.acc_pairs.items():
        t = dt.lookup(src)
        for a in accs:
            rng = np.random.default_rng(zlib.crc32(f"{op.name}/{src}/acc/{a.name}".encode()))
            for v in _acc_variants(op, t, a, rng):
                yield _case(op, t, "accumulate", v)


@cache
def _all_cases() -> tuple[ConformanceCase, ...]:
    return tuple(c for op in all_ops() for c in _op_cases(op))


def generate_cases(ops: set[str] | None = None) -> list[ConformanceCase]:
    """Every conformance case (or those of `ops`), in a fixed order; ids are unique."""
    return [c for c in _all_cases() if ops is None or c.op in ops]


def variant_sample(cases: list[ConformanceCase]) -> list[ConformanceCase]:
    """`dtype_and_mode_sample`, and each variant of an op's mode (its shapes: edges, broadcast,
    scalar, ...; the id's last part) once per kind of input dtype, packing and float width: every
    shape path of every kernel family and type path, without repeating a shape for each width of
    an integer type."""
    keep = {c.id for c in dtype_and_mode_sample(cases)}
    variants: set[tuple] = set()
    for c in cases:
        d = c.input_dtypes[0]
        key = (c.op, c.mode, c.id.split("/", 3)[-1], d.kind, d.is_packed, d.bits if d.kind == "float" else 0)
        if key not in variants:
            variants.add(key)
            keep.add(c.id)
    return [c for c in cases if c.id in keep]


def dtype_and_mode_sample(cases: list[ConformanceCase]) -> list[ConformanceCase]:
    """Each (op, input dtype) once, and each mode of an op once per kind of input dtype (float,
    signed, unsigned, bool, ...) and packing: every kernel family, type path and mode."""
    dtypes: set[tuple] = set()
    modes: set[tuple] = set()
    out = []
    for c in cases:
        d = c.input_dtypes[0]
        by_dtype, by_mode = (c.op, d.name), (c.op, c.mode, d.kind, d.is_packed)
        if by_dtype not in dtypes or by_mode not in modes:
            dtypes.add(by_dtype)
            modes.add(by_mode)
            out.append(c)
    return out
