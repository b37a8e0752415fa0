"""The element-wise table (openinfer/targets/elementwise.py) in x86 vector intrinsics: one step of
an element-wise kernel or chain (templates/x86/chain.c.j2) as a vector expression over f32
vectors, for AVX2 and AVX-512 alike (the intrinsics' prefix differs).

An op is vectorised when its formula renders in `VectorLang`, or when it has a delta here (where
the vector kernels compute it their own way); a formula that uses a primitive the vectors lack
raises NotExpressible and the request falls back to the portable C kernel. The attributes a step
reads become the kernel's float constants (k<step>_<attr>), and a step that calls the prelude's
math functions (oiv_exp, oiv_tanh, oiv_erf) asks for its `math` section.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...synth.program import KernelRequest
from ..c.kernels.common import float_literal, literal
from ..elementwise import OPS, Lang, NotExpressible

#: the prelude's `math` section (templates/x86/prelude.c.j2); its `log` section serves lrn, and an
#: element-wise log, pow or rounding has no vector kernel
_MATH = {"exp": "oiv_exp", "tanh": "oiv_tanh", "erf": "oiv_erf"}
#: the comparisons the vector formulas make, ordered (false on NaN) as C's; another comes with its
#: formula and tests (filter's `!=`, true on NaN, would be _CMP_NEQ_UQ: it has no vector kernel)
_PREDICATES = {"==": "_CMP_EQ_OQ", ">=": "_CMP_GE_OQ"}
_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
#: the constants the chain template declares (chain.c.j2 `constants()`)
_NAMED = {0.0: "zero", 1.0: "one", 0.5: "half"}


def is_runtime(req: KernelRequest, attr: str) -> bool:
    return any(a == attr for a, _ in req.runtime_attrs)


def attr_value(req: KernelRequest, attr: str) -> str:
    """C float expression of a scalar attribute: a literal, or the runtime parameter."""
    if is_runtime(req, attr):
        return f"(float)rt_{attr}"
    return literal(req.output.dtype, req.attr(attr))


@dataclass(frozen=True)
class VectorConst:
    """A float attribute of a step, set once per kernel call (a vector `name` of `value`)."""

    name: str
    value: str


@dataclass(frozen=True)
class VectorStep:
    """One step of a chain as the template writes it: `const oiv s<j> = value;`."""

    op: str
    args: tuple[str, ...]           # x<i>: the kernel's input i, s<k>: step k's value
    value: str
    consts: tuple[VectorConst, ...]
    math: bool          # calls the prelude's math functions


@dataclass(frozen=True)
class VectorLang(Lang):
    """The table's primitives in f32 vector intrinsics (function-call syntax: no parentheses to
    place). `pre`: the intrinsics' prefix, _mm256 or _mm512; `step`: the step's index, which
    names its constants."""

    pre: str
    req: KernelRequest
    step: int
    consts: dict[str, VectorConst] = field(default_factory=dict)
    sections: set[str] = field(default_factory=set)

    # f32 only (the renderer takes no other request)
    is_float = True
    is_bool = False
    is_unsigned = False

    def lit(self, value: float) -> str:
        v = float(value)
        named = _NAMED.get(v) if math.copysign(1.0, v) > 0 else None     # (-0.0 is not `zero`)
        return named if named is not None else self.set1(float_literal("float", v))

    def set1(self, text: str) -> str:
        """A vector of the C float literal `text`."""
        return f"{self.pre}_set1_ps({text})"

    def attr(self, name: str) -> str:
        if name not in self.consts:
            self.consts[name] = VectorConst(f"k{self.step}_{name}", attr_value(self.req, name))
        return self.consts[name].name

    def static(self, name: str):
        return self.req.attr(name)

    def let(self, name: str, value: str) -> str:
        return value        # a step is one expression: the value is written where it is read

    def int_const(self, value: int) -> str:
        raise NotExpressible("an int result")

    def group(self, e: str) -> str:
        return e

    def arith(self, sym: str, a: str, b: str) -> str:
        return f"{self.pre}_{_ARITH[sym]}_ps({a}, {b})"

    def fmadd(self, a: str, b: str, c: str) -> str:
        """a * b + c, one rounding (the vector deltas' own primitive)."""
        return f"{self.pre}_fmadd_ps({a}, {b}, {c})"

    def bitwise(self, sym: str, a: str, b: str) -> str:
        raise NotExpressible("bitwise operations")

    def neg(self, x: str) -> str:
        return f"oiv_neg({x})"

    def call(self, fn: str, *args: str) -> str:
        if fn in _MATH:
            self.sections.add("math")
            return f"{_MATH[fn]}({args[0]})"
        if fn == "sqrt":
            return f"{self.pre}_sqrt_ps({args[0]})"
        if fn == "abs":
            return f"oiv_abs({args[0]})"
        raise NotExpressible(f"a vector {fn}")

    def minimum(self, a: str, b: str) -> str:
        return f"oiv_ieee_min({a}, {b})"

    def maximum(self, a: str, b: str) -> str:
        return f"oiv_ieee_max({a}, {b})"

    def compare(self, sym: str, a: str, b: str) -> str:
        if sym not in _PREDICATES:
            raise NotExpressible(f"the comparison {sym}")
        return f"OIV_CMP({a}, {b}, {_PREDICATES[sym]})"

    def compare_zero(self, sym: str, x: str) -> str:
        return self.compare(sym, x, "zero")

    def select(self, cond: str, a: str, b: str) -> str:
        return f"oiv_select({cond}, {a}, {b})"

    def flag(self, cond: str) -> str:
        raise NotExpressible("an int result")

    def classify(self, test: str, x: str) -> str:
        raise NotExpressible("an int result")


# ------------------------------------------------------------------------------------ deltas

#: ops the vector kernels compute their own way (each as it always has: the chain's results are
#: compared with the scalar kernels' within the ops' tolerances, not bit for bit)
_DELTAS: dict[str, Callable[..., str]] = {}


def delta(op: str):
    def deco(f: Callable[..., str]) -> Callable[..., str]:
        if op not in OPS:
            raise AssertionError(f"x86 vector delta for `{op}`, which the element-wise table lacks")
        _DELTAS[op] = f
        return f
    return deco


@delta("fma")
def _fma(v: VectorLang, a: str, b: str, c: str) -> str:
    return v.fmadd(a, b, c)          # one rounding in f32, within the op's tolerance


@delta("relu")
def _relu(v: VectorLang, x: str) -> str:
    y = v.select(v.compare_zero(">=", x), x, v.arith("*", v.attr("alpha"), x))
    # the default clamps are infinite: IEEE min(y, +inf) and max(y, -inf) are y, NaN included
    if _bounded(v.req, "clamp_max", math.inf):
        y = v.minimum(y, v.attr("clamp_max"))
    if _bounded(v.req, "clamp_min", -math.inf):
        y = v.maximum(y, v.attr("clamp_min"))
    return y


def _bounded(req: KernelRequest, attr: str, unbounded: float) -> bool:
    return is_runtime(req, attr) or float(req.attr(attr)) != unbounded


@delta("silu")
def _silu(v: VectorLang, x: str) -> str:
    return v.arith("/", x, v.arith("+", v.lit(1), v.call("exp", v.neg(x))))


@delta("gelu")
def _gelu(v: VectorLang, x: str) -> str:
    half_x, one = v.arith("*", v.lit(0.5), x), v.lit(1)
    if v.static("approximate") == "tanh":
        # sqrt(2 / pi) (x + 0.044715 x^3), the cube as (0.044715 x) x^2 + x in one fma
        poly = v.fmadd(v.arith("*", v.set1("0.044715f"), x), v.arith("*", x, x), x)
        return v.arith("*", half_x, v.arith("+", one, v.call("tanh", v.arith("*", v.set1("0.7978845608f"), poly))))
    return v.arith("*", half_x, v.arith("+", one, v.call("erf", v.arith("*", x, v.set1("0.70710678118f")))))


def vector_step(pre: str, req: KernelRequest, j: int, args: list[str],
                lang: type[VectorLang] = VectorLang) -> VectorStep | None:
    """Element-wise op `req` (f32) as step j of a chain over the vector arguments `args` (x<i>:
    input i, s<k>: step k's value); None if the vector kernels have no form for it. `lang`: the
    intrinsics the step is spelled in (the NEON wing's subclass; the deltas are written against
    VectorLang's primitives, so they serve every vector ISA)."""
    own = _DELTAS.get(req.op)
    formula = own or OPS[req.op].formula
    if formula is None:
        return None
    lang = lang(pre, req, j)
    try:
        value = formula(lang, *args)
    except NotExpressible:
        return None
    return VectorStep(req.op, tuple(args), value, tuple(lang.consts.values()), "math" in lang.sections)
