"""Element-wise C kernels: one expression per op over compute-typed operands x0, x1, ...

Each `_EXPR` entry maps (request, context) to (extra statement lines, value expression, value C
type); operands are loaded in the compute type of the working dtype (the accumulator in
accumulate mode, else the input type) and the value is stored into the output with the
reference's rounding/wrapping. Semantics follow openinfer/reference/kernels/elementwise.py and
cast.py exactly (integer overflow goes through unsigned arithmetic: no UB).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....dtypes import DTypeInfo, Kind
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import arange_index, broadcast_strides, contiguous_strides
from .common import compute_ctype, fn, literal_ct, load, offset, round_to, scalar_attr, static_attr, store
from .reduce import emit_all_finite
from .registry import family, prototype


@dataclass(frozen=True)
class Ctx:
    req: KernelRequest
    t: DTypeInfo        # input 0's dtype (T)
    w: DTypeInfo        # the working dtype: accumulator or T
    ct: str             # operands' C type (compute_ctype(w))
    xs: tuple[str, ...]

    @property
    def is_float(self) -> bool:
        return self.w.is_float

    @property
    def signed(self) -> bool:
        return self.ct == "int64_t"

    def attr(self, name: str) -> str:
        return scalar_attr(self.req, name, self.ct)

    def bound(self, name: str) -> str:
        """A clamp limit: run-time values clipped into T's range first."""
        return scalar_attr(self.req, name, self.ct, self.t)

    def one(self) -> str:
        return literal_ct(self.ct, 1)


Result = tuple[list[str], str, str]        # (statements, value, value's C type)
Expr = Callable[[Ctx], Result]
_EXPR: dict[str, Expr] = {}
_DOC: dict[str, str] = {}


def expr(*ops: str, doc: str | dict[str, str] = ""):
    """Register an expression builder; `doc` (one per op, or shared) heads the kernel's comment."""
    def deco(f: Expr) -> Expr:
        for op in ops:
            _EXPR[op] = f
            _DOC[op] = doc[op] if isinstance(doc, dict) else doc
        return f
    return deco


def work(req: KernelRequest) -> DTypeInfo:
    return req.acc[-1] if req.acc else req.inputs[0].dtype


def _neg_wrap(x: str) -> str:
    return f"(int64_t)(0u - (uint64_t){x})"


# ------------------------------------------------------------------------------------ arithmetic

@expr("add", "sub", "mul", doc={"add": "a + b (bool: OR; integers wrap)", "sub": "a - b (integers wrap)",
                                "mul": "a * b (bool: AND; integers wrap)"})
def _arith(c: Ctx) -> Result:
    a, b = c.xs
    sym = {"add": "+", "sub": "-", "mul": "*"}[c.req.op]
    if c.w.kind is Kind.BOOL:
        return [], f"({a} {'|' if c.req.op == 'add' else '&'} {b})", "int"
    if c.is_float or not c.signed:
        return [], f"({a} {sym} {b})", c.ct
    return [], f"(int64_t)((uint64_t){a} {sym} (uint64_t){b})", c.ct


@expr("div", doc="a / b; b == 0 (either zero) gives div_by_zero_mask; integers truncate, INT_MIN / -1 wraps")
def _div(c: Ctx) -> Result:
    a, b = c.xs
    mask = c.attr("div_by_zero_mask")
    if c.signed:
        q = f"oi_div_s64({a}, {b})"
    else:
        q = f"{a} / {b}"
    return [], f"({b} == 0 ? {mask} : {q})", c.ct


@expr("floor_div", doc="a // b (floor, as NumPy); b == 0 gives div_by_zero_mask; INT_MIN // -1 wraps")
def _floor_div(c: Ctx) -> Result:
    a, b = c.xs
    q = f"oi_floordiv_s64({a}, {b})" if c.signed else f"{a} / {b}"
    return [], f"({b} == 0 ? {c.attr('div_by_zero_mask')} : {q})", c.ct


@expr("rem", doc="truncated remainder a % b (sign of a); a % 0 = 0, INT_MIN % -1 = 0")
def _rem(c: Ctx) -> Result:
    a, b = c.xs
    r = f"oi_rem_s64({a}, {b})" if c.signed else f"{a} % {b}"
    return [], f"({b} == 0 ? {literal_ct(c.ct, 0)} : {r})", c.ct


@expr("pow", doc="libm pow in the compute type (powf for f8..f32): C99's special cases, as the reference's NumPy")
def _pow(c: Ctx) -> Result:
    a, b = c.xs
    if c.t.name == "f8":        # f8 NaN decodes as a signalling NaN, which pow(NaN, 0) = 1 does not cover
        a, b = f"oi_quiet_f32({a})", f"oi_quiet_f32({b})"
    return [], f"{fn('pow', c.ct)}({a}, {b})", c.ct


@expr("fma", doc="a * b + c computed in double (no rounding of the product below f64), rounded once on store")
def _fma(c: Ctx) -> Result:
    a, b, d = c.xs
    return [], f"(double){a} * (double){b} + (double){d}", "double"


@expr("neg", doc="-x; integers wrap (-INT_MIN = INT_MIN)")
def _neg(c: Ctx) -> Result:
    return [], (f"-{c.xs[0]}" if c.is_float else _neg_wrap(c.xs[0])), c.ct


@expr("recip", doc="1 / x; x == 0 (either zero) gives div_by_zero_mask")
def _recip(c: Ctx) -> Result:
    x = c.xs[0]
    return [], f"({x} == 0 ? {c.attr('div_by_zero_mask')} : {c.one()} / {x})", c.ct


@expr("abs", doc="|x|; integers wrap (abs(INT_MIN) = INT_MIN) unless accumulating wider")
def _abs(c: Ctx) -> Result:
    x = c.xs[0]
    if c.is_float:
        return [], f"{fn('fabs', c.ct)}({x})", c.ct
    return [], f"({x} < 0 ? {_neg_wrap(x)} : {x})", c.ct


@expr("relu", doc="y = x >= 0 ? x : alpha * x, then min(y, clamp_max), then max(y, clamp_min)")
def _relu(c: Ctx) -> Result:
    x = c.xs[0]
    cmax, cmin = c.bound("clamp_max"), c.bound("clamp_min")
    if c.is_float:
        # IEEE minimum/maximum as the reference: NaN propagates, -0.0 < +0.0
        alpha = scalar_attr(c.req, "alpha", c.ct)
        mx, mn = ("oi_maxf", "oi_minf") if c.ct == "float" else ("oi_max_f64", "oi_min_f64")
        return [f"{c.ct} y = {x} >= 0 ? {x} : {alpha} * {x};",
                f"y = {mn}(y, {cmax});",
                f"y = {mx}(y, {cmin});"], "y", c.ct
    # integers: alpha * x in double, truncated and saturated to T like `cast`
    alpha = scalar_attr(c.req, "alpha", "double")
    return [f"int64_t y = {x} >= 0 ? {x} : oi_f64_to_sint_sat(trunc({alpha} * (double){x}), {c.t.bits});",
            f"y = y > {cmax} ? {cmax} : y;",
            f"y = y < {cmin} ? {cmin} : y;"], "y", "int64_t"


@expr("sign", doc="-1, 0 or 1 by the sign of x, as i8 (NaN and zeros give 0)")
def _sign(c: Ctx) -> Result:
    x = c.xs[0]
    if c.ct == "uint64_t":
        return [], f"({x} != 0)", "int"
    return [], f"(({x} > 0) - ({x} < 0))", "int"


@expr("min", "max", doc={"min": "IEEE 754-2019 minimum (NaN propagates, -0.0 < +0.0)",
                          "max": "IEEE 754-2019 maximum (NaN propagates, -0.0 < +0.0)"})
def _minmax(c: Ctx) -> Result:
    a, b = c.xs
    is_max = c.req.op == "max"
    if c.is_float:
        f = ("oi_maxf" if is_max else "oi_minf") if c.ct == "float" else ("oi_max_f64" if is_max else "oi_min_f64")
        return [], f"{f}({a}, {b})", c.ct
    return [], f"({a} {'>' if is_max else '<'} {b} ? {a} : {b})", c.ct


@expr("clamp", doc="min(max(x, min), max); floats IEEE (NaN stays NaN); min > max gives max")
def _clamp(c: Ctx) -> Result:
    x = c.xs[0]
    if c.is_float:
        mx, mn = ("oi_maxf", "oi_minf") if c.ct == "float" else ("oi_max_f64", "oi_min_f64")
        return [], f"{mn}({mx}({x}, {c.attr('min')}), {c.attr('max')})", c.ct
    lo_v, hi_v = c.req.attr("min"), c.req.attr("max")
    lo, hi = c.bound("min"), c.bound("max")
    lines = [f"{c.ct} y = {x};"]
    # skip comparisons that are always false for the type (-Wtype-limits)
    if not (c.ct == "uint64_t" and lo_v == 0 and not _runtime(c.req, "min")):
        lines.append(f"y = y < {lo} ? {lo} : y;")
    if not (c.ct == "uint64_t" and hi_v == (1 << 64) - 1 and not _runtime(c.req, "max")):
        lines.append(f"y = y > {hi} ? {hi} : y;")
    return lines, "y", c.ct


def _runtime(req: KernelRequest, name: str) -> bool:
    return any(k == name for k, _ in req.runtime_attrs)


@expr("floor", "ceil", "trunc", "round", doc={"floor": "round toward -inf", "ceil": "round toward +inf",
                                              "trunc": "round toward zero",
                                              "round": "round half away from zero (C round)"})
def _rounding(c: Ctx) -> Result:
    return [], f"{fn(c.req.op, c.ct)}({c.xs[0]})", c.ct


# ------------------------------------------------------------------------------------ bitwise

@expr("and", "or", "xor", doc={"and": "a & b (bool: logical AND)", "or": "a | b (bool: logical OR)",
                                "xor": "a ^ b (bool: logical XOR)"})
def _bitwise(c: Ctx) -> Result:
    a, b = c.xs
    return [], f"({a} {dict(zip(('and', 'or', 'xor'), '&|^', strict=True))[c.req.op]} {b})", c.ct


@expr("not", doc="bitwise NOT within the type's width (bool: logical)")
def _not(c: Ctx) -> Result:
    x = c.xs[0]
    return [], (f"!{x}" if c.ct == "int" else f"~{x}"), c.ct


def _shift_amount(c: Ctx) -> str:
    if _runtime(c.req, "bits"):
        return "(unsigned)(rt_bits & 63)"
    return str(int(c.req.attr("bits")) & 63)


@expr("shl", doc="x << (bits & 63) on the 64-bit pattern, wrapped to T")
def _shl(c: Ctx) -> Result:
    return [], f"((uint64_t){c.xs[0]} << {_shift_amount(c)})", "uint64_t"


@expr("shr", doc="x >> (bits & 63): arithmetic for signed types, logical for unsigned")
def _shr(c: Ctx) -> Result:
    return [], f"({c.xs[0]} >> {_shift_amount(c)})", c.ct


@expr("popcount", doc="set bits of x's two's-complement pattern within its width, as u8")
def _popcount(c: Ctx) -> Result:
    mask = "" if c.t.bits == 64 else f" & UINT64_C({(1 << c.t.bits) - 1})"
    return [], f"oi_popcount64((uint64_t){c.xs[0]}{mask})", "uint64_t"


# ------------------------------------------------------------------------------------ comparison

@expr("eq", "ne", "lt", "le", "gt", "ge", doc={op: f"a {sym} b as bool (IEEE: NaN compares unequal)" for op, sym in (
    ("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))})
def _compare(c: Ctx) -> Result:
    sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[c.req.op]
    return [], f"({c.xs[0]} {sym} {c.xs[1]})", "int"


@expr("filter", doc="cond != 0 ? a : b (a NaN cond counts as non-zero)")
def _filter(c: Ctx) -> Result:
    a, b, cond = c.xs
    return [], f"({cond} != 0 ? {a} : {b})", c.ct


@expr("is_nan", doc="x is NaN")
def _is_nan(c: Ctx) -> Result:
    return [], f"isnan({c.xs[0]})", "int"


@expr("is_inf", doc="x is +inf or -inf")
def _is_inf(c: Ctx) -> Result:
    return [], f"isinf({c.xs[0]})", "int"


@expr("is_finite", doc="x is finite (element-wise form)")
def _is_finite(c: Ctx) -> Result:
    return [], f"isfinite({c.xs[0]})", "int"


@expr("is_neg", doc="x < 0 (-0.0 and NaN are not negative; unsigned: never)")
def _is_neg(c: Ctx) -> Result:
    if c.ct == "uint64_t":
        return [], "0", "int"
    return [], f"({c.xs[0]} < 0)", "int"


# ------------------------------------------------------------------------------------ math

@expr("exp", "log", "sqrt", "tanh", doc={op: f"libm {op} in the compute type" for op in ("exp", "log", "sqrt", "tanh")})
def _libm(c: Ctx) -> Result:
    return [], f"{fn(c.req.op, c.ct)}({c.xs[0]})", c.ct


@expr("rsqrt", doc="1 / sqrt(x)")
def _rsqrt(c: Ctx) -> Result:
    return [], f"{c.one()} / {fn('sqrt', c.ct)}({c.xs[0]})", c.ct


def _sigmoid_of(c: Ctx, x: str) -> str:
    return f"({c.one()} / ({c.one()} + {fn('exp', c.ct)}(-{x})))"


@expr("sigmoid", doc="1 / (1 + exp(-x))")
def _sigmoid(c: Ctx) -> Result:
    return [], _sigmoid_of(c, c.xs[0]), c.ct


@expr("silu", doc="x * (1 / (1 + exp(-x)))")
def _silu(c: Ctx) -> Result:
    return [], f"{c.xs[0]} * {_sigmoid_of(c, c.xs[0])}", c.ct


def _erf_of(c: Ctx, x: str) -> str:
    # the reference evaluates erf in f64 and rounds to the compute type
    return f"erf({x})" if c.ct == "double" else f"(float)erf((double)({x}))"


@expr("erf", doc="erf, evaluated in double and rounded to the compute type (as the reference)")
def _erf(c: Ctx) -> Result:
    return [], _erf_of(c, c.xs[0]), c.ct


@expr("gelu", doc="0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation")
def _gelu(c: Ctx) -> Result:
    x, ct = c.xs[0], c.ct
    half = literal_ct(ct, 0.5)
    if static_attr(c.req, "approximate") == "tanh":
        k = literal_ct(ct, float(np.sqrt(2 / np.pi)))
        a = literal_ct(ct, 0.044715)
        return [f"const {ct} inner = {k} * ({x} + {a} * {x} * {x} * {x});"], \
            f"{half} * {x} * ({c.one()} + {fn('tanh', ct)}(inner))", ct
    r2 = literal_ct(ct, float(np.sqrt(2)))
    return [], f"{half} * {x} * ({c.one()} + {_erf_of(c, f'{x} / {r2}')})", ct


# ------------------------------------------------------------------------------------ cast, fill

_ROUND = {"trunc": "trunc", "floor": "floor", "ceil": "ceil", "nearest": "nearbyint"}


@expr("cast", doc="convert to `to`: floats round on store; float -> int rounds by mode, NaN -> 0, "
                  "saturates or wraps; to bool: x != 0; bool: 0 or 1")
def _cast(c: Ctx) -> Result:
    src, to = c.t, c.req.output.dtype
    x = c.xs[0]
    if to.kind is Kind.BOOL:
        return [], f"({x} != 0)", "int"                # IEEE: NaN != 0 is true, -0.0 != 0 false
    if to.is_float:
        if src.is_float:
            if src.name == "f8":
                return [], f"oi_quiet_f32({x})", c.ct    # f8 NaN decodes as a signalling NaN
            return [], x, c.ct                         # rounds once on store (from f32, or from f64)
        if to.name == "f64":
            return [], f"(double){x}", "double"
        return [], f"(float){x}", "float"             # int -> f32 (nearest), then the narrow store
    if src.is_float:
        r = f"{_ROUND[static_attr(c.req, 'rounding_mode')]}((double){x})"
        if not static_attr(c.req, "saturate"):
            return [], f"oi_f64_to_bits_wrap({r})", "uint64_t"
        if to.is_signed:
            return [], f"oi_f64_to_sint_sat({r}, {to.bits})", "int64_t"
        return [], f"oi_f64_to_uint_sat({r}, {to.bits})", "uint64_t"
    return [], x, c.ct                                 # widening integer cast: exact


@expr("fill", doc="every element = value (rounded / stored as T)")
def _fill(c: Ctx) -> Result:
    t = c.t
    if _runtime(c.req, "value"):
        d = dict(c.req.runtime_attrs)["value"]
        if t.is_float or t.kind is Kind.BOOL:
            return [], "rt_value", "double" if d.is_float else "int64_t"
        if d.is_float:
            return [], "oi_f64_to_bits_wrap(trunc(rt_value))", "uint64_t"
        return [], "rt_value", "int64_t"
    v = ref_store(np.full((), c.req.attr("value")), t)   # the reference's stored value, exactly
    if t.is_float:
        return [], literal_ct(c.ct, float(v)), c.ct
    return [], literal_ct(c.ct, int(v)), c.ct


@expr("arange", doc="start + i * step along `axis`: integers wrap to T; floats in double (the product "
                    "rounded, then the sum), rounded once to T")
def _arange(c: Ctx) -> Result:
    idx = arange_index(c.req, "i")
    if c.is_float:
        start, step = scalar_attr(c.req, "start", "double"), scalar_attr(c.req, "step", "double")
        # two statements: no contraction into an fma (the reference rounds the product)
        return [f"const double p = (double){idx} * {step};"], f"{start} + p", "double"
    start, step = c.attr("start"), c.attr("step")
    if c.signed:
        return [], f"(int64_t)((uint64_t){start} + (uint64_t){idx} * (uint64_t){step})", c.ct
    return [], f"({start} + (uint64_t){idx} * {step})", c.ct


# ------------------------------------------------------------------------------------ emitter

def _used(name: str, texts: list[str]) -> bool:
    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(s) for s in texts)


@family(*_EXPR)
def emit(req: KernelRequest, name: str, renderer) -> str:
    out = req.output
    if req.op == "is_finite" and out.shape != req.inputs[0].shape:
        return emit_all_finite(req, name, renderer)
    w = work(req)
    ct = compute_ctype(w)
    c = Ctx(req, req.inputs[0].dtype, w, ct, tuple(f"x{i}" for i in range(len(req.inputs))))
    pre, value, vct = _EXPR[req.op](c)
    flat = all(t.shape == out.shape for t in req.inputs)
    ostr = contiguous_strides(out.shape)
    dims = list(out.shape)
    ivars = [f"i{d}" for d in range(len(dims))]
    texts = pre + [value]
    operands, unused = [], []
    for i, t in enumerate(req.inputs):
        if not _used(f"x{i}", texts):
            unused.append(f"in{i}")   # fill reads only its input's shape
            continue
        strides = broadcast_strides(t.shape, out.shape)
        operands.append({"name": f"x{i}", "ct": ct,
                         "load_flat": _conv(load(t.dtype, f"in{i}", "i"), compute_ctype(t.dtype), ct),
                         "load_nd": _conv(load(t.dtype, f"in{i}", offset(ivars, strides)), compute_ctype(t.dtype), ct)})
    doc = (f"{req.op}({', '.join(str(t) for t in req.inputs)}) -> {out}"
           + (f" accumulating in {w.name}" if req.acc else "") + (" in place" if req.aliased else "")
           + f": {_DOC[req.op]}")
    return render("c/ops/elementwise.c.j2", proto=prototype(req, name), doc=doc, flat=flat, numel=out.numel,
                  operands=operands, unused=unused, pre=pre, loops=[[v, n] for v, n in zip(ivars, dims, strict=True)],
                  out_index=offset(ivars, ostr),
                  store_flat=store(out.dtype, "out", "i", value, vct),
                  store_nd=store(out.dtype, "out", "o", value, vct))


@family("fused")
def emit_fused(req: KernelRequest, name: str, renderer) -> str:
    """A chain of element-wise steps (openinfer/synth/fusion.py) in one loop. Each step computes as
    its own kernel would and its result is rounded / wrapped to the step's output dtype
    (round_to: the value storing and reloading it would give), so the chain matches the unfused
    calls exactly while intermediates stay in registers."""
    out = req.output
    ivars = [f"i{d}" for d in range(len(out.shape))]
    flat = all(t.shape == out.shape for t in req.inputs)
    operands, unused = [], []
    results: list[tuple[str, str]] = []           # per step: (variable, C type)
    body: list[str] = []
    used_inputs = {i for args in req.chain_args for kind, i in args if kind == "in"}
    for i, t in enumerate(req.inputs):
        if i not in used_inputs:
            unused.append(f"in{i}")
            continue
        strides = broadcast_strides(t.shape, out.shape)
        ct = compute_ctype(t.dtype)
        operands.append({"name": f"e{i}", "ct": ct, "load_flat": load(t.dtype, f"in{i}", "i"),
                         "load_nd": load(t.dtype, f"in{i}", offset(ivars, strides))})
    for j, (step, args) in enumerate(zip(req.chain, req.chain_args, strict=True)):
        w = work(step)
        ct = compute_ctype(w)
        xs = tuple(f"x{k}" for k in range(len(args)))
        pre, value, vct = _EXPR[step.op](Ctx(step, step.inputs[0].dtype, w, ct, xs))
        rct = compute_ctype(step.output.dtype)
        body.append(f"{rct} r{j};")
        body.append(f"{{  /* step {j}: {step.op} -> {step.output.dtype.name} */")
        texts = pre + [value]
        for k, (kind, src) in enumerate(args):
            if not _used(f"x{k}", texts):
                continue
            if kind == "in":
                var, from_ct = f"e{src}", compute_ctype(req.inputs[src].dtype)
            else:
                var, from_ct = results[src]
            body.append(f"    const {ct} x{k} = {_conv(var, from_ct, ct)};")
        body += [f"    {line}" for line in pre]
        body.append(f"    r{j} = {round_to(step.output.dtype, value, vct)};")
        body.append("}")
        results.append((f"r{j}", rct))
    last, last_ct = results[-1]
    doc = (f"fused {' -> '.join(step.op for step in req.chain)} over {out}"
           + (" in place" if req.aliased else "") + ": intermediates rounded to their dtypes, kept in registers")
    return render("c/ops/elementwise.c.j2", proto=prototype(req, name), doc=doc, flat=flat, numel=out.numel,
                  operands=operands, unused=unused, pre=body,
                  loops=[[v, n] for v, n in zip(ivars, out.shape, strict=True)],
                  out_index=offset(ivars, contiguous_strides(out.shape)),
                  store_flat=store(out.dtype, "out", "i", last, last_ct),
                  store_nd=store(out.dtype, "out", "o", last, last_ct))


def _conv(expr_: str, from_ct: str, to_ct: str) -> str:
    return expr_ if from_ct == to_ct else f"({to_ct}){expr_}"

