"""Element-wise GLSL kernels: one expression per op over compute-typed operands x0, x1, ...

The expression is the op's formula in the element-wise table (openinfer/targets/elementwise.py)
rendered in GLSL by `Ew`, or this file's delta for the op where GLSL needs code of its own.
Operands are loaded in the working dtype's compute type (the accumulator in accumulate mode, else
T) and the skeleton stores the value with the reference's rounding / wrapping (as the C emitter,
openinfer/reference/kernels/elementwise.py and cast.py).

Integer division guards its divisor (0 and -1 never reach the hardware divide: on CPU devices
such as lavapipe INT_MIN / -1 and x / 0 trap), and literals that a driver could fold into
non-IEEE results (0 * x) are avoided.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ....dtypes import DTypeInfo, Kind
from ....errors import SynthesisError
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...elementwise import OPS, InfixLang, check_deltas
from ...geometry import arange_index, broadcast_strides
from .reduce import emit_all_finite
from .registry import Body, family
from .types import FLOAT_CT, KernelCtx, conv, index_expr, lit, round_to, signed

Result = tuple[list[str], str, str]        # (statements, value, value's compute type)

#: the math functions templates/vulkan/glsl/oi_common.glsl and oi_trig.glsl define for float and
#: double (oi_expf / oi_exp_d ...): GLSL's builtins are float only and too coarse
_OWN_MATH = ("exp", "expm1", "log", "log1p", "tanh", "erf", "pow", "sin", "cos", "tan", "asin", "acos", "atan",
             "sinh", "cosh")


@dataclass(frozen=True)
class Ew(InfixLang):
    """One op's expression in GLSL: the request, the kernel's context (features, push constants),
    the dtypes and operands, and the table's primitives in GLSL (the statements a formula's
    `let`s make collect in `lines`)."""

    req: KernelRequest
    k: KernelCtx
    t: DTypeInfo        # input 0's dtype (T)
    w: DTypeInfo        # working dtype: the accumulator or T
    ct: str             # operands' compute type
    xs: tuple[str, ...]
    lines: list[str] = field(default_factory=list)

    @property
    def is_float(self) -> bool:
        return self.ct in FLOAT_CT

    @property
    def is_bool(self) -> bool:
        return self.w.kind is Kind.BOOL

    @property
    def is_unsigned(self) -> bool:
        return self.ct in ("uint", "uint64_t")

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
        """`wrap`: an integer value that is stored (div's mask) wraps to the type; without it an
        integer saturates, as a bound (clamp's limits) does. (The table's formulas read integer
        attributes only as bounds.)"""
        return self.k.attr(name, self.ct, wrap)

    def static(self, name: str):
        return self.k.static(name)

    def let(self, name: str, value: str) -> str:
        self.lines.append(f"{self.ct} {name} = {value};")
        return name

    def call(self, fn: str, *args: str) -> str:
        x = args[0]
        if fn in _OWN_MATH:
            return f"{self.f(fn)}({', '.join(args)})"
        if fn == "abs":
            return f"abs({x})"
        if fn == "sqrt":
            return _sqrt(self, x)
        if fn in ("floor", "ceil", "trunc"):
            return _signed(self, f"{_rounding_fn(self, fn)}({x})", x)
        if fn == "round":       # half away from zero, exact: no x + 0.5
            t = self.let("t", f"{_rounding_fn(self, 'trunc')}({x})")
            return _signed(self, f"(abs({x} - {t}) >= {self.lit(0.5)} ? {t} + sign({x}) : {t})", x)
        raise SynthesisError(f"internal: GLSL has no element-wise function `{fn}`")

    def minimum(self, a: str, b: str) -> str:
        return f"{_minmax_fn(self, False)}({a}, {b})"

    def maximum(self, a: str, b: str) -> str:
        return f"{_minmax_fn(self, True)}({a}, {b})"

    def compare_zero(self, sym: str, x: str) -> str:
        return f"{x} {sym} {self.zero()}"

    def flag(self, cond: str) -> str:
        return f"({cond} ? 1 : 0)"

    def classify(self, test: str, x: str) -> str:
        return f"({_isfn(self, test)}({x}) ? 1 : 0)"


_DELTAS: dict[str, Callable[[Ew], Result]] = {}

#: kernel comments that say how GLSL computes an op, in place of the table's doc
_NOTES = {
    "pow": "oi_powf / oi_pow_d (templates/vulkan/glsl/oi_common.glsl): C99's special cases, then exp(y * log|x|)",
    **{op: "fdlibm ports in the compute type (templates/vulkan/glsl/oi_common.glsl)" for op in ("exp", "log", "tanh")},
    "erf": "erf (fdlibm) in the compute type",
    **{op: f"oi_{op}f / oi_{op}_d (templates/vulkan/glsl/oi_trig.glsl) in the compute type"
       for op in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh")},
    **{op: "rounding to an integral value; a zero result has the input's sign" for op in ("floor", "ceil", "trunc")},
    "round": "round half away from zero (exact: no x + 0.5); a zero result has the input's sign",
}


def delta(*ops: str):
    """Register GLSL's own expression for `ops` (table ops whose GLSL needs code of its own)."""
    def deco(f: Callable[[Ew], Result]) -> Callable[[Ew], Result]:
        for op in ops:
            _DELTAS[op] = f
        return f
    return deco


def expression(c: Ew) -> Result:
    """The op's value in GLSL: its delta, else the table's formula."""
    own = _DELTAS.get(c.req.op)
    return own(c) if own is not None else c.neutral()


def _minmax_fn(c: Ew, is_max: bool) -> str:
    return ("oi_max_d" if is_max else "oi_min_d") if c.d else ("oi_maxf" if is_max else "oi_minf")


def _isfn(c: Ew, name: str) -> str:
    return f"oi_{name}_d" if c.d else f"oi_{name}"


def _signed(c: Ew, r: str, x: str) -> str:
    """r with x's sign: a rounding's zero keeps its input's sign on any driver (oi_sign_of)."""
    return f"oi_sign_of{'_d' if c.d else ''}({r}, {x})"


#: GLSL's roundings, and common.glsl's exact f64 ones (some drivers' f64 trunc is wrong near 2^52)
_ROUNDING_F = {"trunc": "trunc", "floor": "floor", "ceil": "ceil", "nearest": "roundEven"}
_ROUNDING_D = {"trunc": "oi_trunc_d", "floor": "oi_floor_d", "ceil": "oi_ceil_d", "nearest": "oi_round_even_d"}


def _rounding_fn(c: Ew, mode: str) -> str:
    return (_ROUNDING_D if c.d else _ROUNDING_F)[mode]


def _sqrt(c: Ew, x: str) -> str:
    nan = "OI_NAN_D" if c.d else "OI_NAN"
    return f"(({x} == {c.zero()} || {_isfn(c, 'isnan')}({x})) ? {x} : ({x} < {c.zero()} ? {nan} : sqrt({x})))"


# ------------------------------------------------------------------------------------ arithmetic

def _safe_divisor(c: Ew, b: str) -> str:
    one = c.lit(1)
    if signed(c.ct):
        return f"(({b} == {c.zero()} || {b} == {c.lit(-1)}) ? {one} : {b})"
    return f"({b} == {c.zero()} ? {one} : {b})"


@delta("div")
def _div(c: Ew) -> Result:
    if c.is_float:
        return c.neutral()
    a, b = c.xs
    mask = c.attr("div_by_zero_mask", wrap=True)
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};"]
    q = f"({b} == {c.lit(-1)} ? {c.zero()} - {a} : {a} / d)" if signed(c.ct) else f"{a} / d"
    return lines, f"({b} == {c.zero()} ? {mask} : {q})", c.ct


@delta("floor_div")
def _floor_div(c: Ew) -> Result:
    a, b = c.xs
    mask = c.attr("div_by_zero_mask", wrap=True)
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};", f"{c.ct} q = {a} / d;"]
    if signed(c.ct):
        lines += [f"{c.ct} r = {a} - q * d;",
                  f"if (r != {c.zero()} && ((r < {c.zero()}) != ({b} < {c.zero()}))) q = q - {c.lit(1)};",
                  f"if ({b} == {c.lit(-1)}) q = {c.zero()} - {a};"]
    return lines, f"({b} == {c.zero()} ? {mask} : q)", c.ct


@delta("rem")
def _rem(c: Ew) -> Result:
    a, b = c.xs
    lines = [f"{c.ct} d = {_safe_divisor(c, b)};"]
    if signed(c.ct):
        return lines, f"(({b} == {c.zero()} || {b} == {c.lit(-1)}) ? {c.zero()} : {a} - ({a} / d) * d)", c.ct
    return lines, f"({b} == {c.zero()} ? {c.zero()} : {a} % d)", c.ct


@delta("fma")
def _fma(c: Ew) -> Result:
    a, b, d = c.xs
    if c.d:
        return [f"precise double p = {a} * {b};", f"precise double s = p + {d};"], "s", "double"
    if c.k.caps.fp64:
        c.k.use("double", "fma's exact product")
        return [f"precise double s = double({a}) * double({b}) + double({d});"], "s", "double"
    return [], f"fma({a}, {b}, {d})", c.ct      # single rounding in f32: within the op's tolerance


@delta("relu")
def _relu(c: Ew) -> Result:
    x = c.xs[0]
    cmax, cmin = c.attr("clamp_max"), c.attr("clamp_min")
    if c.is_float:
        if c.k.runtime_dtype("alpha") is None and float(c.req.attr("alpha")) == 0.0:
            # 0 * x spelled out: a driver may fold a literal 0.0 * x to 0 (wrong for inf / NaN)
            z = c.lit(-0.0 if math.copysign(1.0, float(c.req.attr("alpha"))) > 0 else 0.0)
            nan = "OI_NAN_D" if c.d else "OI_NAN"
            fin = "oi_isfinite_d" if c.d else "oi_isfinite"
            neg_part = f"({fin}({x}) ? {z} : ({nan}))"
        else:
            neg_part = f"{c.attr('alpha')} * {x}"
        return [f"{c.ct} y = {x} >= {c.zero()} ? {x} : {neg_part};",
                f"y = {c.minimum('y', cmax)};",
                f"y = {c.maximum('y', cmin)};"], "y", c.ct
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


# ------------------------------------------------------------------------------------ bitwise

@delta("not")
def _not(c: Ew) -> Result:
    x = c.xs[0]
    return [], (f"(1 - {x})" if c.w.kind is Kind.BOOL else f"(~{x})"), c.ct


def _shift_amount(c: Ew) -> str:
    if c.k.runtime_dtype("bits") is not None:
        return c.k.push("bits", "uint", "(uint32_t)((uint64_t)rt_bits & 63u)")
    return f"{int(c.req.attr('bits')) & 63}u"


@delta("shl")
def _shl(c: Ew) -> Result:
    x, s = c.xs[0], _shift_amount(c)
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"({x} << {s})", c.ct
    return [], f"({s} >= 32u ? {c.zero()} : {x} << ({s} & 31u))", c.ct


@delta("shr")
def _shr(c: Ew) -> Result:
    x, s = c.xs[0], _shift_amount(c)
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"({x} >> {s})", c.ct
    big = f"({x} >> 31)" if signed(c.ct) else c.zero()
    return [], f"({s} >= 32u ? {big} : {x} >> ({s} & 31u))", c.ct


@delta("popcount")
def _popcount(c: Ew) -> Result:
    x = c.xs[0]
    if c.ct in ("int64_t", "uint64_t"):
        return [], f"oi_popcount64(uint64_t({x}))", "uint"
    mask = "" if c.t.bits >= 32 else f" & {(1 << c.t.bits) - 1}u"
    return [], f"uint(bitCount(uint({x}){mask}))", "uint"


# ------------------------------------------------------------------------------------ math

@delta("rsqrt")
def _rsqrt(c: Ew) -> Result:
    """rsqrt(+-0) = +-inf spelled out rather than left to the division."""
    x = c.xs[0]
    inf = "OI_INF_D" if c.d else "OI_INF"
    return [f"{c.ct} r = {_sqrt(c, x)};"], f"({x} == {c.zero()} ? ({_isfn(c, 'signbit')}({x}) ? -{inf} : {inf}) : " \
                                           f"{c.lit(1)} / r)", c.ct


# ------------------------------------------------------------------------------------ cast, fill

@delta("cast")
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


@delta("fill")
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


@delta("arange")
def _arange(c: Ew) -> Result:

    idx = arange_index(c.req, "i", suffix="u")
    if c.is_float or c.t.is_float:
        c.k.need("fp64", "arange's count (computed in f64, as the reference)")
        start, step = c.k.attr("start", "double"), c.k.attr("step", "double")
        return [f"precise double p = double({idx}) * {step};", f"precise double s = {start} + p;"], "s", "double"
    start, step = c.attr("start", wrap=True), c.attr("step", wrap=True)
    return [], f"({start} + {c.ct}({idx}) * {step})", c.ct


check_deltas("GLSL", _DELTAS, _NOTES)


# ------------------------------------------------------------------------------------ emitter

def _used(name: str, texts: list[str]) -> bool:
    import re

    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(s) for s in texts)


@family(*OPS)
def emit(req: KernelRequest, k: KernelCtx) -> Body:
    out = req.output
    if req.op == "is_finite" and out.shape != req.inputs[0].shape:
        return emit_all_finite(req, k)
    w = req.acc[-1] if req.acc else req.inputs[0].dtype
    ct = k.ct(w)
    c = Ew(req, k, req.inputs[0].dtype, w, ct, tuple(f"x{i}" for i in range(len(req.inputs))))
    pre, value, vct = expression(c)
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
    doc = f"{req.op}: {_NOTES.get(req.op, OPS[req.op].doc)}" + (f" (accumulating in {w.name})" if req.acc else "") + \
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
        pre, value, vct = expression(c)
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
