"""Element-wise GLSL kernels: one expression per op over compute-typed operands x0, x1, ...

Mirrors openinfer/reference/kernels/elementwise.py and cast.py (and the C emitter's structure): each
`_EXPR` entry maps a context to (statements, value, value's compute type); operands are loaded
in the working dtype's compute type (the accumulator in accumulate mode, else T) and the
skeleton stores the value with the reference's rounding / wrapping.

Integer division guards its divisor (0 and -1 never reach the hardware divide: on CPU devices
such as lavapipe INT_MIN / -1 and x / 0 trap), and literals that a driver could fold into
non-IEEE results (0 * x) are avoided.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....dtypes import DTypeInfo, Kind
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...geometry import arange_index, broadcast_strides
from .reduce import emit_all_finite
from .registry import Body, family
from .types import FLOAT_CT, KernelCtx, conv, index_expr, lit, round_to, signed


@dataclass(frozen=True)
class Ew:
    req: KernelRequest
    k: KernelCtx
    t: DTypeInfo        # input 0's dtype (T)
    w: DTypeInfo        # working dtype: the accumulator or T
    ct: str             # operands' compute type
    xs: tuple[str, ...]

    @property
    def is_float(self) -> bool:
        return self.ct in FLOAT_CT

    @property
    def d(self) -> bool:
        return self.ct == "double"

    def f(self, name: str) -> str:
        """A common.glsl float function for this compute type: oi_expf / oi_exp_d ..."""
        return f"oi_{name}_d" if self.d else f"oi_{name}f"

    def lit(self, value, ct: str | None = None, wrap: bool = False) -> str:
        return lit(ct or self.ct, value, wrap)

    def zero(self) -> str:
        return self.lit(0)

    def attr(self, name: str, wrap: bool = False) -> str:
        return self.k.attr(name, self.ct, wrap)


Result = tuple[list[str], str, str]
_EXPR: dict[str, Callable[[Ew], Result]] = {}
_DOC: dict[str, str] = {}


def expr(*ops: str, doc: str = ""):
    def deco(f):
        for op in ops:
            _EXPR[op] = f
            _DOC[op] = doc
        return f
    return deco


def _minmax_fn(c: Ew, is_max: bool) -> str:
    return ("oi_max_d" if is_max else "oi_min_d") if c.d else ("oi_maxf" if is_max else "oi_minf")


# ------------------------------------------------------------------------------------ arithmetic

@expr("add", "sub", "mul", doc="a (+ - *) b; bool: OR / AND; integers wrap")
def _arith(c: Ew) -> Result:
    a, b = c.xs
    if c.w.kind is Kind.BOOL:
        return [], f"({a} {'|' if c.req.op == 'add' else '&'} {b})", "int"
    return [], f"({a} {dict(add='+', sub='-', mul='*')[c.req.op]} {b})", c.ct


def _safe_divisor(c: Ew, b: str) -> str:
    one = c.lit(1)
    if signed(c.ct):
        return f"(({b} == {c.zero()} || {b} == {c.lit(-1)}) ? {one} : {b})"
    return f"({b} == {c.zero()} ? {one} : {b})"


@expr("div", doc="a / b; b == 0 gives div_by_zero_mask; integers truncate, INT_MIN / -1 wraps")
def _div(c: Ew) -> Result:
    a, b = c.xs
    mask = c.attr("div_by_zero_mask", wrap=True)
    if c.is_float:
        return [], f"({b} == {c.zero()} ? {mask} : {a} / {b})", c.ct
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};"]
    q = f"({b} == {c.lit(-1)} ? {c.zero()} - {a} : {a} / d)" if signed(c.ct) else f"{a} / d"
    return lines, f"({b} == {c.zero()} ? {mask} : {q})", c.ct


@expr("floor_div", doc="a // b (floor); b == 0 gives div_by_zero_mask; INT_MIN // -1 wraps")
def _floor_div(c: Ew) -> Result:
    a, b = c.xs
    mask = c.attr("div_by_zero_mask", wrap=True)
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};", f"{c.ct} q = {a} / d;"]
    if signed(c.ct):
        lines += [f"{c.ct} r = {a} - q * d;",
                  f"if (r != {c.zero()} && ((r < {c.zero()}) != ({b} < {c.zero()}))) q = q - {c.lit(1)};",
                  f"if ({b} == {c.lit(-1)}) q = {c.zero()} - {a};"]
    return lines, f"({b} == {c.zero()} ? {mask} : q)", c.ct


@expr("rem", doc="truncated remainder (sign of a); a % 0 = 0, INT_MIN % -1 = 0")
def _rem(c: Ew) -> Result:
    a, b = c.xs
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};"]
    if signed(c.ct):
        return lines, f"(({b} == {c.zero()} || {b} == {c.lit(-1)}) ? {c.zero()} : {a} - ({a} / d) * d)", c.ct
    return lines, f"({b} == {c.zero()} ? {c.zero()} : {a} % d)", c.ct


@expr("fma", doc="a * b + c: in double (the product exact below f64), rounded once on store")
def _fma(c: Ew) -> Result:
    a, b, d = c.xs
    if c.d:
        return [f"precise double p = {a} * {b};", f"precise double s = p + {d};"], "s", "double"
    if c.k.caps.fp64:
        c.k.use("double", "fma's exact product")
        return [f"precise double s = double({a}) * double({b}) + double({d});"], "s", "double"
    return [], f"fma({a}, {b}, {d})", c.ct      # single rounding in f32: within the op's tolerance


@expr("neg", doc="-x; integers wrap (-INT_MIN = INT_MIN)")
def _neg(c: Ew) -> Result:
    return [], (f"-{c.xs[0]}" if c.is_float else f"({c.zero()} - {c.xs[0]})"), c.ct


@expr("recip", doc="1 / x; x == 0 gives div_by_zero_mask")
def _recip(c: Ew) -> Result:
    x = c.xs[0]
    return [], f"({x} == {c.zero()} ? {c.attr('div_by_zero_mask', wrap=True)} : {c.lit(1)} / {x})", c.ct


@expr("abs", doc="|x|; integers wrap (abs(INT_MIN) = INT_MIN) unless accumulating wider")
def _abs(c: Ew) -> Result:
    x = c.xs[0]
    if c.is_float:
        return [], f"abs({x})", c.ct
    return [], f"({x} < {c.zero()} ? {c.zero()} - {x} : {x})", c.ct


@expr("relu", doc="y = x >= 0 ? x : alpha * x, then min(y, clamp_max), then max(y, clamp_min)")
def _relu(c: Ew) -> Result:
    x = c.xs[0]
    cmax, cmin = c.attr("clamp_max"), c.attr("clamp_min")
    if c.is_float:
        mx, mn = _minmax_fn(c, True), _minmax_fn(c, False)
        if c.k.runtime_dtype("alpha") is None and float(c.req.attr("alpha")) == 0.0:
            # 0 * x spelled out: a driver may fold a literal 0.0 * x to 0 (wrong for inf / NaN)
            z = c.lit(-0.0 if math.copysign(1.0, float(c.req.attr("alpha"))) > 0 else 0.0)
            nan = "OI_NAN_D" if c.d else "OI_NAN"
            fin = "oi_isfinite_d" if c.d else "oi_isfinite"
            neg_part = f"({fin}({x}) ? {z} : ({nan}))"
        else:
            neg_part = f"{c.attr('alpha')} * {x}"
        return [f"{c.ct} y = {x} >= {c.zero()} ? {x} : {neg_part};",
                f"y = {mn}(y, {cmax});",
                f"y = {mx}(y, {cmin});"], "y", c.ct
    # integers: alpha * x in double, truncated and saturated to T like `cast`
    alpha_rt = c.k.runtime_dtype("alpha") is not None
    alpha_v = None if alpha_rt else float(c.req.attr("alpha"))
    bits = c.t.bits
    if alpha_v == 0.0:
        neg_part = c.zero()
    else:
        c.k.need("fp64", "an integer relu's alpha * x (computed in f64, as the reference)")
        alpha = c.k.attr("alpha", "double")
        if c.ct == "int64_t":
            neg_part = f"oi_d2s64_sat(oi_trunc_d({alpha} * double({x})), {bits}u)"
        else:
            neg_part = f"oi_d2s_sat(oi_trunc_d({alpha} * double({x})), {bits}u)"
    return [f"{c.ct} y = {x} >= {c.zero()} ? {x} : {neg_part};",
            f"y = y > {cmax} ? {cmax} : y;",
            f"y = y < {cmin} ? {cmin} : y;"], "y", c.ct


@expr("sign", doc="-1, 0 or 1 by the sign of x, as i8 (NaN and zeros give 0)")
def _sign(c: Ew) -> Result:
    x = c.xs[0]
    if not c.is_float and not signed(c.ct):
        return [], f"({x} != {c.zero()} ? 1 : 0)", "int"
    return [], f"(({x} > {c.zero()} ? 1 : 0) - ({x} < {c.zero()} ? 1 : 0))", "int"


@expr("min", "max", doc="element-wise min / max; floats: IEEE 754-2019 (NaN propagates, -0.0 < +0.0)")
def _minmax(c: Ew) -> Result:
    a, b = c.xs
    is_max = c.req.op == "max"
    if c.is_float:
        return [], f"{_minmax_fn(c, is_max)}({a}, {b})", c.ct
    return [], f"({a} {'>' if is_max else '<'} {b} ? {a} : {b})", c.ct


@expr("clamp", doc="min(max(x, min), max); floats IEEE (NaN stays NaN); min > max gives max")
def _clamp(c: Ew) -> Result:
    x = c.xs[0]
    lo, hi = c.attr("min"), c.attr("max")
    if c.is_float:
        return [], f"{_minmax_fn(c, False)}({_minmax_fn(c, True)}({x}, {lo}), {hi})", c.ct
    return [f"{c.ct} y = {x} < {lo} ? {lo} : {x};"], f"(y > {hi} ? {hi} : y)", c.ct


def _signed(c: Ew, r: str, x: str) -> str:
    """r with x's sign: a rounding's zero keeps its input's sign on any driver (oi_sign_of)."""
    return f"oi_sign_of{'_d' if c.d else ''}({r}, {x})"


#: GLSL's roundings, and common.glsl's exact f64 ones (some drivers' f64 trunc is wrong near 2^52)
_ROUNDING_F = {"trunc": "trunc", "floor": "floor", "ceil": "ceil", "nearest": "roundEven"}
_ROUNDING_D = {"trunc": "oi_trunc_d", "floor": "oi_floor_d", "ceil": "oi_ceil_d", "nearest": "oi_round_even_d"}


def _rounding_fn(c: Ew, mode: str) -> str:
    return (_ROUNDING_D if c.d else _ROUNDING_F)[mode]


@expr("floor", "ceil", "trunc", doc="rounding to an integral value; a zero result has the input's sign")
def _rounding(c: Ew) -> Result:
    return [], _signed(c, f"{_rounding_fn(c, c.req.op)}({c.xs[0]})", c.xs[0]), c.ct


@expr("round", doc="round half away from zero (exact: no x + 0.5); a zero result has the input's sign")
def _round(c: Ew) -> Result:
    x = c.xs[0]
    half = c.lit(0.5)
    away = f"(abs({x} - t) >= {half} ? t + sign({x}) : t)"
    return [f"{c.ct} t = {_rounding_fn(c, 'trunc')}({x});"], _signed(c, away, x), c.ct


# ------------------------------------------------------------------------------------ bitwise

@expr("and", "or", "xor", doc="bitwise (bool: logical) and / or / xor")
def _bitwise(c: Ew) -> Result:
    a, b = c.xs
    return [], f"({a} {dict(zip(('and', 'or', 'xor'), '&|^', strict=True))[c.req.op]} {b})", c.ct


@expr("not", doc="bitwise NOT within the type's width (bool: logical)")
def _not(c: Ew) -> Result:
    x = c.xs[0]
    return [], (f"(1 - {x})" if c.w.kind is Kind.BOOL else f"(~{x})"), c.ct


def _shift_amount(c: Ew) -> str:
    if c.k.runtime_dtype("bits") is not None:
        return c.k.push("bits", "uint", "(uint32_t)((uint64_t)rt_bits & 63u)")
    return f"{int(c.req.attr('bits')) & 63}u"


@expr("shl", doc="x << (bits & 63) on the 64-bit pattern, wrapped to T")
def _shl(c: Ew) -> Result:
    x, s = c.xs[0], _shift_amount(c)
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"({x} << {s})", c.ct
    return [], f"({s} >= 32u ? {c.zero()} : {x} << ({s} & 31u))", c.ct


@expr("shr", doc="x >> (bits & 63): arithmetic for signed types, logical for unsigned")
def _shr(c: Ew) -> Result:
    x, s = c.xs[0], _shift_amount(c)
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"({x} >> {s})", c.ct
    big = f"({x} >> 31)" if signed(c.ct) else c.zero()
    return [], f"({s} >= 32u ? {big} : {x} >> ({s} & 31u))", c.ct


@expr("popcount", doc="set bits of x's two's-complement pattern within its width, as u8")
def _popcount(c: Ew) -> Result:
    x = c.xs[0]
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"oi_popcount64(uint64_t({x}))", "uint"
    mask = "" if c.t.bits >= 32 else f" & {(1 << c.t.bits) - 1}u"
    return [], f"uint(bitCount(uint({x}){mask}))", "uint"


# ------------------------------------------------------------------------------------ comparison

@expr("eq", "ne", "lt", "le", "gt", "ge", doc="comparison as bool (IEEE: NaN compares unequal)")
def _compare(c: Ew) -> Result:
    sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[c.req.op]
    return [], f"({c.xs[0]} {sym} {c.xs[1]} ? 1 : 0)", "int"


@expr("filter", doc="cond != 0 ? a : b (a NaN cond counts as non-zero)")
def _filter(c: Ew) -> Result:
    a, b, cond = c.xs
    return [], f"({cond} != {c.zero()} ? {a} : {b})", c.ct


def _isfn(c: Ew, name: str) -> str:
    return f"oi_{name}_d" if c.d else f"oi_{name}"


@expr("is_nan", doc="x is NaN")
def _is_nan(c: Ew) -> Result:
    return [], f"({_isfn(c, 'isnan')}({c.xs[0]}) ? 1 : 0)", "int"


@expr("is_inf", doc="x is +inf or -inf")
def _is_inf(c: Ew) -> Result:
    return [], f"({_isfn(c, 'isinf')}({c.xs[0]}) ? 1 : 0)", "int"


@expr("is_finite", doc="x is finite (element-wise form)")
def _is_finite(c: Ew) -> Result:
    return [], f"({_isfn(c, 'isfinite')}({c.xs[0]}) ? 1 : 0)", "int"


@expr("is_neg", doc="x < 0 (-0.0 and NaN are not negative; unsigned: never)")
def _is_neg(c: Ew) -> Result:
    if not c.is_float and not signed(c.ct):
        return [], "0", "int"
    return [], f"({c.xs[0]} < {c.zero()} ? 1 : 0)", "int"


# ------------------------------------------------------------------------------------ math

@expr("pow", doc="oi_powf / oi_pow_d (templates/vulkan/glsl/oi_common.glsl): C99's special cases, then exp(y * log|x|)")
def _pow(c: Ew) -> Result:
    return [], f"{c.f('pow')}({c.xs[0]}, {c.xs[1]})", c.ct


@expr("exp", "log", "tanh", doc="fdlibm ports in the compute type (templates/vulkan/glsl/oi_common.glsl)")
def _math(c: Ew) -> Result:
    return [], f"{c.f(c.req.op)}({c.xs[0]})", c.ct


def _sqrt(c: Ew, x: str) -> str:
    nan = "OI_NAN_D" if c.d else "OI_NAN"
    return f"(({x} == {c.zero()} || {_isfn(c, 'isnan')}({x})) ? {x} : ({x} < {c.zero()} ? {nan} : sqrt({x})))"


@expr("sqrt", doc="square root; sqrt(-0.0) = -0.0, x < 0 gives NaN")
def _sqrt_e(c: Ew) -> Result:
    return [], _sqrt(c, c.xs[0]), c.ct


@expr("rsqrt", doc="1 / sqrt(x); rsqrt(+-0) = +-inf")
def _rsqrt(c: Ew) -> Result:
    x = c.xs[0]
    inf = "OI_INF_D" if c.d else "OI_INF"
    return [f"{c.ct} r = {_sqrt(c, x)};"], f"({x} == {c.zero()} ? ({_isfn(c, 'signbit')}({x}) ? -{inf} : {inf}) : " \
                                           f"{c.lit(1)} / r)", c.ct


def _sigmoid_of(c: Ew, x: str) -> str:
    one = c.lit(1)
    return f"({one} / ({one} + {c.f('exp')}(-{x})))"


@expr("sigmoid", doc="1 / (1 + exp(-x))")
def _sigmoid(c: Ew) -> Result:
    return [], _sigmoid_of(c, c.xs[0]), c.ct


@expr("silu", doc="x * (1 / (1 + exp(-x)))")
def _silu(c: Ew) -> Result:
    return [], f"{c.xs[0]} * {_sigmoid_of(c, c.xs[0])}", c.ct


@expr("erf", doc="erf (fdlibm) in the compute type")
def _erf(c: Ew) -> Result:
    return [], f"{c.f('erf')}({c.xs[0]})", c.ct


@expr("gelu", doc="0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation")
def _gelu(c: Ew) -> Result:
    x = c.xs[0]
    half, one = c.lit(0.5), c.lit(1)
    if c.k.static("approximate") == "tanh":
        k, a = c.lit(float(np.sqrt(2 / np.pi))), c.lit(0.044715)
        return [f"{c.ct} inner = {k} * ({x} + {a} * {x} * {x} * {x});"], \
            f"{half} * {x} * ({one} + {c.f('tanh')}(inner))", c.ct
    r2 = c.lit(float(np.sqrt(2)))
    return [], f"{half} * {x} * ({one} + {c.f('erf')}({x} / {r2}))", c.ct


# ------------------------------------------------------------------------------------ cast, fill

@expr("cast", doc="convert to `to`: floats round on store; float -> int rounds by mode, NaN -> 0, "
                  "saturates or wraps; to bool: x != 0; bool: 0 or 1")
def _cast(c: Ew) -> Result:
    src, to = c.t, c.req.output.dtype
    x = c.xs[0]
    if to.kind is Kind.BOOL:
        if c.is_float:      # NaN is true: spelled out, as a driver may fold NaN comparisons
            return [], f"((isnan({x}) || {x} != {c.zero()}) ? 1 : 0)", "int"
        return [], f"({x} != {c.zero()} ? 1 : 0)", "int"
    if to.is_float:
        if src.is_float:
            return [], x, c.ct                        # rounds once on store (from f32, or from f64)
        if to.name == "f64":
            return [], f"double({x})", "double"
        return [], f"float({x})", "float"            # int -> f32 (nearest), then the narrow store
    if src.is_float:
        r = f"{_rounding_fn(c, c.k.static('rounding_mode'))}({x})"
        sfx = "d" if c.d else "f"
        if to.bits == 64:
            c.k.use("int64_t", "a cast to a 64-bit integer")
            if not c.k.static("saturate"):
                return [], f"oi_{sfx}2bits64_wrap({r})", "uint64_t"
            if to.is_signed:
                return [], f"oi_{sfx}2s64_sat({r}, 64u)", "int64_t"
            return [], f"oi_{sfx}2u64_sat({r}, 64u)", "uint64_t"
        if not c.k.static("saturate"):
            return [], f"oi_{sfx}2bits_wrap({r})", "uint"
        if to.is_signed:
            return [], f"oi_{sfx}2s_sat({r}, {to.bits}u)", "int"
        return [], f"oi_{sfx}2u_sat({r}, {to.bits}u)", "uint"
    return [], x, c.ct                                 # widening integer cast: exact


@expr("fill", doc="every element = value (rounded / stored as T)")
def _fill(c: Ew) -> Result:
    t = c.t
    d = c.k.runtime_dtype("value")
    if d is None:
        v = ref_store(np.full((), c.req.attr("value")), t)   # the reference's stored value, exactly
        return [], c.lit(float(v) if t.is_float else int(v), wrap=True), c.ct
    rt = "rt_value"
    if t.name in ("f16", "bf16", "f8"):
        host = f"oi_{t.name}_to_f32(oi_f64_to_{t.name}((double){rt}))"   # rounded once from the variable
    elif t.is_float:
        host = f"({'double' if c.d else 'float'}){rt}"
    elif t.kind is Kind.BOOL:
        host = f"({rt} != 0 ? 1 : 0)"
    else:
        wide = f"oi_f64_to_bits_wrap(trunc({rt}))" if d.is_float else f"(uint64_t)({rt})"
        host = {"int": f"(int32_t)(uint32_t)({wide})", "uint": f"(uint32_t)({wide})",
                "int64_t": f"(int64_t)({wide})", "uint64_t": f"(uint64_t)({wide})"}[c.ct]
    return [], c.k.push("value", c.ct, host), c.ct


@expr("arange", doc="start + i * step along `axis`: integers wrap to T; floats in double (the product "
                    "rounded, then the sum), rounded once to T")
def _arange(c: Ew) -> Result:

    idx = arange_index(c.req, "i", suffix="u")
    if c.is_float or c.t.is_float:
        c.k.need("fp64", "arange's count (computed in f64, as the reference)")
        start, step = c.k.attr("start", "double"), c.k.attr("step", "double")
        return [f"precise double p = double({idx}) * {step};", f"precise double s = {start} + p;"], "s", "double"
    start, step = c.attr("start", wrap=True), c.attr("step", wrap=True)
    return [], f"({start} + {c.ct}({idx}) * {step})", c.ct


# ------------------------------------------------------------------------------------ emitter

def _used(name: str, texts: list[str]) -> bool:
    import re

    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(s) for s in texts)


@family(*_EXPR)
def emit(req: KernelRequest, k: KernelCtx) -> Body:
    out = req.output
    if req.op == "is_finite" and out.shape != req.inputs[0].shape:
        return emit_all_finite(req, k)
    w = req.acc[-1] if req.acc else req.inputs[0].dtype
    ct = k.ct(w)
    c = Ew(req, k, req.inputs[0].dtype, w, ct, tuple(f"x{i}" for i in range(len(req.inputs))))
    pre, value, vct = _EXPR[req.op](c)
    texts = pre + [value]
    lines = []
    for i, t in enumerate(req.inputs):
        if not _used(f"x{i}", texts):
            continue   # fill reads only its input's shape
        idx = index_expr("i", out.shape, broadcast_strides(t.shape, out.shape))
        lines.append(f"{ct} x{i} = {k.load(t.dtype, f'in{i}', idx, ct)};")
    lines += pre
    lines.append(f"return {value};")
    k.use(vct, "the result")
    doc = f"{req.op}: {_DOC[req.op]}" + (f" (accumulating in {w.name})" if req.acc else "") + \
        f"; {', '.join(str(t) for t in req.inputs)} -> {out}"
    return Body(value="\n".join(lines), vct=vct, doc=doc)


__all__ = ["emit", "index_expr", "conv", "epilogue_function"]


def _chain(req: KernelRequest, k: KernelCtx, operand) -> tuple[list[str], str, str]:
    """Lines computing the fused chain `req` (op "fused") for one output element, input j's value
    being the expression operand(j) (in k.ct of its dtype): (lines, result variable, its type).
    Each step computes as its own kernel would and its result is rounded / wrapped to the step's
    output dtype (what storing and reloading it would give)."""

    lines: list[str] = []
    results: list[tuple[str, str]] = []              # per step: (variable, compute type)
    used = {i for args in req.chain_args for kind, i in args if kind == "in"}
    for i, t in enumerate(req.inputs):
        if i in used:
            lines.append(f"{k.ct(t.dtype)} e{i} = {operand(i)};")
    for j, (step, args) in enumerate(zip(req.chain, req.chain_args, strict=True)):
        sk = KernelCtx(step, k.caps, k.where, features=k.features)   # the step's own attributes
        w = step.acc[-1] if step.acc else step.inputs[0].dtype
        ct = sk.ct(w)
        c = Ew(step, sk, step.inputs[0].dtype, w, ct, tuple(f"x{a}" for a in range(len(args))))
        pre, value, vct = _EXPR[step.op](c)
        rt = step.output.dtype
        rct = sk.ct(rt)
        lines.append(f"{rct} r{j};")
        lines.append(f"{{   // step {j}: {step.op} -> {rt.name}")
        texts = pre + [value]
        for a, (kind, src) in enumerate(args):
            if not _used(f"x{a}", texts):
                continue
            var, from_ct = (f"e{src}", k.ct(req.inputs[src].dtype)) if kind == "in" else results[src]
            lines.append(f"    {ct} x{a} = {conv(var, from_ct, ct)};")
        lines += [f"    {line}" for line in pre]
        after = "int" if rt.kind is Kind.BOOL else ("double" if rt.name == "f64" else
                                                   "float" if rt.is_float else vct)
        lines.append(f"    r{j} = {conv(round_to(sk, rt, value, vct), after, rct)};")
        lines.append("}")
        results.append((f"r{j}", rct))
    last, last_ct = results[-1]
    return lines, last, last_ct


@family("fused")
def emit_fused(req: KernelRequest, k: KernelCtx) -> Body:
    """A chain of element-wise steps (openinfer/synth/fusion.py) in one kernel, matching the
    unfused calls exactly while intermediates stay in registers (see _chain)."""
    out = req.output

    def load(i: int) -> str:
        t = req.inputs[i]
        return k.load(t.dtype, f"in{i}", index_expr("i", out.shape, broadcast_strides(t.shape, out.shape)))

    lines, last, last_ct = _chain(req, k, load)
    lines.append(f"return {last};")
    doc = (f"fused {' -> '.join(s.op for s in req.chain)} over {out}" + (" in place" if req.aliased else "")
           + ": intermediates rounded to their dtypes, kept in registers")
    return Body(value="\n".join(lines), vct=last_ct, doc=doc)


def epilogue_function(req: KernelRequest, k: KernelCtx) -> tuple[str, str]:
    """(`ct oi_epilogue(float acc, uint i)`, ct): req.epilogue (openinfer/synth/fusion.py) for
    output element i whose f32 product is acc; the epilogue's other inputs are the request's
    "epilogue" operands."""
    epi, out = req.epilogue, req.output
    operands = req.operand_indices("epilogue")

    def operand(j: int) -> str:
        t = epi.inputs[j]
        if j == 0:
            return conv("acc", "float", k.ct(t.dtype))
        return k.load(t.dtype, f"in{operands[j - 1]}",
                      index_expr("i", out.shape, broadcast_strides(t.shape, out.shape)))

    lines, last, ct = _chain(epi, k, operand)
    body = "\n".join(f"    {line}" for line in [*lines, f"return {last};"])
    doc = f"// epilogue: {' -> '.join(s.op for s in epi.chain)} of each product before it is stored"
    return f"{doc}\n{ct} oi_epilogue(float acc, uint i) {{\n{body}\n}}", ct


def prologue_function(req: KernelRequest, k: KernelCtx) -> str:
    """`float oi_prologue(float x0, uint i)`: req.prologue, an element-wise chain (openinfer/synth/
    fusion.py `fold_elementwise`), for element i of the matmul's input 0 whose chain input 0 is
    x0; the chain's other inputs are the request's "prologue" operands, read at the same element."""
    pro = req.prologue
    operands = req.operand_indices("prologue")

    def operand(j: int) -> str:
        return conv("x0", "float", k.ct(pro.inputs[0].dtype)) if j == 0 else \
            k.load(pro.inputs[j].dtype, f"in{operands[j - 1]}", "i")

    lines, last, ct = _chain(pro, k, operand)
    body = "\n".join(f"    {line}" for line in [*lines, f"return {conv(last, ct, 'float')};"])
    doc = f"// prologue: {' -> '.join(s.op for s in pro.chain)} computing each element of x as it is read"
    return f"{doc}\nfloat oi_prologue(float x0, uint i) {{\n{body}\n}}"
