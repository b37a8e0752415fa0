"""Element-wise C kernels: one expression per op over compute-typed operands x0, x1, ...

The expression is the op's formula in the element-wise table (openinfer/targets/elementwise.py)
rendered in C by `Ctx`, or this file's delta for the op where C's semantics need code of their
own: integer overflow goes through unsigned arithmetic (no UB), signed division calls the HAL's
helpers (INT_MIN / -1 wraps), f8's signalling NaNs are quieted, and cast, fill and arange store
as the reference does. Operands are loaded in the compute type of the working dtype (the
accumulator in accumulate mode, else the input type) and the value is stored into the output
with the reference's rounding/wrapping. Semantics follow openinfer/reference/kernels/elementwise.py
and cast.py exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ....dtypes import DTypeInfo, Kind
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...elementwise import OPS, InfixLang, check_deltas
from ...env import render
from ...geometry import arange_index, broadcast_strides, contiguous_strides
from .common import compute_ctype, fn, literal_ct, load, offset, round_to, scalar_attr, static_attr, store
from .reduce import emit_all_finite
from .registry import family, prototype

Result = tuple[list[str], str, str]        # (statements, value, value's C type)


@dataclass(frozen=True)
class Ctx(InfixLang):
    """One op's expression in C: the request, its dtypes and operands, and the table's primitives
    in C (the statements a formula's `let`s make collect in `lines`)."""

    req: KernelRequest
    t: DTypeInfo        # input 0's dtype (T)
    w: DTypeInfo        # the working dtype: accumulator or T
    ct: str             # operands' C type (compute_ctype(w))
    xs: tuple[str, ...]
    lines: list[str] = field(default_factory=list)
    #: the CPU computes single precision only (Device.single_precision): float libm, no double
    single: bool = False

    @property
    def is_float(self) -> bool:
        return self.w.is_float

    @property
    def is_bool(self) -> bool:
        return self.w.kind is Kind.BOOL

    @property
    def is_unsigned(self) -> bool:
        return self.ct == "uint64_t"

    @property
    def signed(self) -> bool:
        return self.ct == "int64_t"

    def lit(self, value: float) -> str:
        return literal_ct(self.ct, value)

    def attr(self, name: str) -> str:
        return scalar_attr(self.req, name, self.ct)

    def bound(self, name: str) -> str:
        """A clamp limit: run-time values clipped into T's range first."""
        return scalar_attr(self.req, name, self.ct, self.t)

    def static(self, name: str):
        return static_attr(self.req, name)

    def let(self, name: str, value: str) -> str:
        self.lines.append(f"const {self.ct} {name} = {value};")
        return name

    def call(self, fn_name: str, *args: str) -> str:
        if fn_name == "erf" and self.ct != "double" and not self.single:
            # the reference evaluates erf in f64 and rounds to the compute type (a single-precision
            # FPU takes erff: within an ulp or two, and no software double routine)
            return f"(float)erf((double)({args[0]}))"
        if fn_name == "pow":
            # C99: pow(x, NaN) is NaN but for x = +1. newlib's pow and powf (a microcontroller's
            # C library) give 1 for x = -1 too, as for an infinite exponent: decided here, so that
            # every C library gives the reference's NaN
            a, b = args
            return f"({b} != {b} && {a} != 1 ? {a} + {b} : {fn('pow', self.ct)}({a}, {b}))"
        return f"{fn('fabs' if fn_name == 'abs' else fn_name, self.ct)}({', '.join(args)})"

    def minimum(self, a: str, b: str) -> str:
        return f"{'oi_minf' if self.ct == 'float' else 'oi_min_f64'}({a}, {b})"

    def maximum(self, a: str, b: str) -> str:
        return f"{'oi_maxf' if self.ct == 'float' else 'oi_max_f64'}({a}, {b})"

    def compare_zero(self, sym: str, x: str) -> str:
        return f"{x} {sym} 0"

    def flag(self, cond: str) -> str:
        return f"({cond})"           # C's comparisons are ints already

    def classify(self, test: str, x: str) -> str:
        return f"{test}({x})"


_DELTAS: dict[str, Callable[[Ctx], Result]] = {}

#: kernel comments that say how C computes an op, in place of the table's doc
_NOTES = {
    "pow": "libm pow in the compute type (powf for f8..f32): C99's special cases, as the reference's NumPy",
    **{op: f"libm {op} in the compute type" for op in ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "asin",
                                                         "acos", "atan", "sinh", "cosh")},
    "erf": "erf, evaluated in double and rounded to the compute type (as the reference)",
}


def delta(*ops: str):
    """Register C's own expression for `ops` (table ops whose C needs code of its own)."""
    def deco(f: Callable[[Ctx], Result]) -> Callable[[Ctx], Result]:
        for op in ops:
            _DELTAS[op] = f
        return f
    return deco


def expression(c: Ctx) -> Result:
    """The op's value in C: its delta, else the table's formula."""
    own = _DELTAS.get(c.req.op)
    return own(c) if own is not None else c.neutral()


def work(req: KernelRequest) -> DTypeInfo:
    return req.acc[-1] if req.acc else req.inputs[0].dtype


def _neg_wrap(x: str) -> str:
    return f"(int64_t)(0u - (uint64_t){x})"


# ------------------------------------------------------------------------------------ arithmetic

@delta("add", "sub", "mul")
def _arith(c: Ctx) -> Result:
    if not c.signed:
        return c.neutral()
    a, b = c.xs
    sym = {"add": "+", "sub": "-", "mul": "*"}[c.req.op]
    return [], f"(int64_t)((uint64_t){a} {sym} (uint64_t){b})", c.ct


@delta("div")
def _div(c: Ctx) -> Result:
    if not c.signed:
        return c.neutral()
    a, b = c.xs
    return [], f"({b} == 0 ? {c.attr('div_by_zero_mask')} : oi_div_s64({a}, {b}))", c.ct


@delta("floor_div")
def _floor_div(c: Ctx) -> Result:
    a, b = c.xs
    q = f"oi_floordiv_s64({a}, {b})" if c.signed else f"{a} / {b}"
    return [], f"({b} == 0 ? {c.attr('div_by_zero_mask')} : {q})", c.ct


@delta("rem")
def _rem(c: Ctx) -> Result:
    a, b = c.xs
    r = f"oi_rem_s64({a}, {b})" if c.signed else f"{a} % {b}"
    return [], f"({b} == 0 ? {literal_ct(c.ct, 0)} : {r})", c.ct


@delta("pow")
def _pow(c: Ctx) -> Result:
    if c.t.name != "f8":
        return c.neutral()
    # f8 NaN decodes as a signalling NaN, which pow(NaN, 0) = 1 does not cover
    return c.neutral(*(f"oi_quiet_f32({x})" for x in c.xs))


@delta("fma")
def _fma(c: Ctx) -> Result:
    a, b, d = c.xs
    return [], f"(double){a} * (double){b} + (double){d}", "double"


@delta("neg")
def _neg(c: Ctx) -> Result:
    return c.neutral() if c.is_float else ([], _neg_wrap(c.xs[0]), c.ct)


@delta("abs")
def _abs(c: Ctx) -> Result:
    if c.is_float:
        return c.neutral()
    x = c.xs[0]
    return [], f"({x} < 0 ? {_neg_wrap(x)} : {x})", c.ct


@delta("relu")
def _relu(c: Ctx) -> Result:
    x = c.xs[0]
    cmax, cmin = c.bound("clamp_max"), c.bound("clamp_min")
    if c.is_float:
        # IEEE minimum/maximum as the reference: NaN propagates, -0.0 < +0.0
        alpha = scalar_attr(c.req, "alpha", c.ct)
        return [f"{c.ct} y = {x} >= 0 ? {x} : {alpha} * {x};",
                f"y = {c.minimum('y', cmax)};",
                f"y = {c.maximum('y', cmin)};"], "y", c.ct
    # integers: alpha * x in double, truncated and saturated to T like `cast`
    alpha = scalar_attr(c.req, "alpha", "double")
    return [f"int64_t y = {x} >= 0 ? {x} : oi_f64_to_sint_sat(trunc({alpha} * (double){x}), {c.t.bits});",
            f"y = y > {cmax} ? {cmax} : y;",
            f"y = y < {cmin} ? {cmin} : y;"], "y", "int64_t"


@delta("clamp")
def _clamp(c: Ctx) -> Result:
    if c.is_float:
        return c.neutral()
    x = c.xs[0]
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


# ------------------------------------------------------------------------------------ bitwise

@delta("not")
def _not(c: Ctx) -> Result:
    x = c.xs[0]
    return [], (f"!{x}" if c.ct == "int" else f"~{x}"), c.ct


def _shift_amount(c: Ctx) -> str:
    if _runtime(c.req, "bits"):
        return "(unsigned)(rt_bits & 63)"
    return str(int(c.req.attr("bits")) & 63)


@delta("shl")
def _shl(c: Ctx) -> Result:
    return [], f"((uint64_t){c.xs[0]} << {_shift_amount(c)})", "uint64_t"


@delta("shr")
def _shr(c: Ctx) -> Result:
    return [], f"({c.xs[0]} >> {_shift_amount(c)})", c.ct


@delta("popcount")
def _popcount(c: Ctx) -> Result:
    mask = "" if c.t.bits == 64 else f" & UINT64_C({(1 << c.t.bits) - 1})"
    return [], f"oi_popcount64((uint64_t){c.xs[0]}{mask})", "uint64_t"


# ------------------------------------------------------------------------------------ cast, fill

_ROUND = {"trunc": "trunc", "floor": "floor", "ceil": "ceil", "nearest": "nearbyint"}


@delta("cast")
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


@delta("fill")
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


@delta("arange")
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


check_deltas("C", _DELTAS, _NOTES)


# ------------------------------------------------------------------------------------ emitter

def _used(name: str, texts: list[str]) -> bool:
    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(s) for s in texts)


def _single(renderer) -> bool:
    """Whether the renderer's CPU computes single precision only (None: a kernel rendered alone)."""
    return renderer is not None and renderer.device.single_precision


@family(*OPS)
def emit(req: KernelRequest, name: str, renderer) -> str:
    out = req.output
    if req.op == "is_finite" and out.shape != req.inputs[0].shape:
        return emit_all_finite(req, name, renderer)
    w = work(req)
    ct = compute_ctype(w)
    c = Ctx(req, req.inputs[0].dtype, w, ct, tuple(f"x{i}" for i in range(len(req.inputs))),
            single=_single(renderer))
    pre, value, vct = expression(c)
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
           + f": {_NOTES.get(req.op, OPS[req.op].doc)}")
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
    used_inputs = set()            # read by some step's expression (fill and arange read only the shape)
    for step, args in zip(req.chain, req.chain_args, strict=True):
        w = work(step)
        xs = tuple(f"x{k}" for k in range(len(args)))
        pre, value, _ = expression(Ctx(step, step.inputs[0].dtype, w, compute_ctype(w), xs, single=_single(renderer)))
        used_inputs |= {i for k, (kind, i) in enumerate(args) if kind == "in" and _used(f"x{k}", pre + [value])}
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
        pre, value, vct = expression(Ctx(step, step.inputs[0].dtype, w, ct, xs, single=_single(renderer)))
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

