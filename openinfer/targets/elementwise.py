"""The element-wise ops' one expression table: for every op its arity, its semantics (the doc
that heads its kernels' comments) and, where the semantics can be written once, its formula
against `Lang`, the small set of primitives every language implements.

The languages, one thin `Lang` subclass each in its own wing:

- C scalar (openinfer/targets/c/kernels/elementwise.py `Ctx`), which every CPU target falls
  back to;
- GLSL (openinfer/targets/vulkan/glsl/elementwise.py `Ew`);
- the x86 vector intrinsics (openinfer/targets/x86/elementwise.py `VectorLang`), f32 only.

A language whose semantics need code of their own for an op (C's integer wrap through unsigned
arithmetic, GLSL's guarded integer division, casts, fill, arange, ...) registers a delta for it,
keyed by the op's name: the delta renders the op in that language (and may hand the cases it does
not change back to the formula). The op's existence, arity and doc come from this table only;
`check_deltas` holds each scalar wing to it. Adding an element-wise op is one `Op` row here (plus
a delta where a language differs), besides its registry entry and reference kernel.

The formulas spell the generated code exactly (the C scalar output is compared bit for bit with
the NumPy reference, and a restructuring must leave the generated trees byte-identical): every
primitive returns its text unparenthesised and a formula says where parentheses go (`group`), so
the evaluation order is the formula's.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..synth.program import KernelRequest


class NotExpressible(Exception):  # noqa: N818  (a verdict, not an error: the caller falls back)
    """A language has no form for a primitive (the vector kernels have no bitwise operations, no
    vector log ...): a kernel family that has a fallback (the x86 vector kernels fall back to the
    portable C loop) catches it; a scalar language never raises it."""


class Lang(ABC):
    """The primitives a formula is written in. Operands and results are expression texts of the
    language; a value is of the working dtype's compute type (the accumulator in accumulate mode,
    else input 0's dtype) unless said otherwise; a condition is the language's truth value."""

    # ------------------------------------------------------------ the working dtype
    @property
    @abstractmethod
    def is_float(self) -> bool: ...

    @property
    @abstractmethod
    def is_bool(self) -> bool: ...

    @property
    @abstractmethod
    def is_unsigned(self) -> bool:
        """An unsigned integer (or bitset) type."""

    # ------------------------------------------------------------ values
    @abstractmethod
    def lit(self, value: float) -> str:
        """A constant of the compute type."""

    @abstractmethod
    def attr(self, name: str) -> str:
        """The op's scalar attribute `name` in the compute type: a constant, or the value a
        run-time variable gives."""

    @abstractmethod
    def static(self, name: str):
        """The op's attribute `name`, one that decides the expression (gelu's `approximate`)."""

    @abstractmethod
    def let(self, name: str, value: str) -> str:
        """`value` computed once into the intermediate `name` (a statement before the value);
        returns the text that reads it."""

    @abstractmethod
    def int_const(self, value: int) -> str:
        """An int constant (an int-valued op's result, `Op.int_valued`)."""

    # ------------------------------------------------------------ expressions
    @abstractmethod
    def group(self, e: str) -> str:
        """`e` parenthesised where the language's infix syntax needs it."""

    @abstractmethod
    def arith(self, sym: str, a: str, b: str) -> str:
        """a + b, a - b, a * b, a / b (sym: + - * /)."""

    @abstractmethod
    def bitwise(self, sym: str, a: str, b: str) -> str:
        """a & b, a | b, a ^ b."""

    @abstractmethod
    def neg(self, x: str) -> str:
        """-x of a float."""

    @abstractmethod
    def call(self, fn: str, *args: str) -> str:
        """The math function `fn` of the compute type, with the special values the reference
        gives: exp, expm1, log, log1p, tanh, erf, sqrt, abs, pow, floor, ceil, trunc, round, sin,
        cos, tan, asin, acos, atan, sinh, cosh."""

    @abstractmethod
    def minimum(self, a: str, b: str) -> str:
        """IEEE 754-2019 minimum of floats (NaN propagates, -0.0 < +0.0)."""

    @abstractmethod
    def maximum(self, a: str, b: str) -> str:
        """IEEE 754-2019 maximum of floats."""

    # ------------------------------------------------------------ conditions
    @abstractmethod
    def compare(self, sym: str, a: str, b: str) -> str:
        """The condition a sym b (sym: == != < <= > >=; IEEE: NaN compares unequal)."""

    @abstractmethod
    def compare_zero(self, sym: str, x: str) -> str:
        """The condition x sym 0."""

    @abstractmethod
    def select(self, cond: str, a: str, b: str) -> str:
        """cond ? a : b."""

    @abstractmethod
    def flag(self, cond: str) -> str:
        """The condition as an int 0 / 1, parenthesised."""

    @abstractmethod
    def classify(self, test: str, x: str) -> str:
        """Whether float x is NaN, +-inf or finite (test: isnan, isinf, isfinite) as an int 0 / 1."""


class InfixLang(Lang):
    """What C and GLSL spell alike: infix operators, `?:` and parentheses; and the rendering of a
    request's formula. (The vector intrinsics implement `Lang` from scratch, so that no primitive
    reaches them in infix by default.)"""

    # a scalar language's context (its dataclass fields)
    req: KernelRequest
    ct: str                     # the compute type's name in the language
    xs: tuple[str, ...]         # the loaded operands
    lines: list[str]            # the statements `let` makes

    def neutral(self, *operands: str) -> tuple[list[str], str, str]:
        """The table's formula for the request's op over `operands` (default: the loaded x0, x1,
        ...): (statements, value, value's type: the compute type, or int)."""
        op = OPS[self.req.op]
        value = op.formula(self, *(operands or self.xs))
        return list(self.lines), value, "int" if op.int_valued else self.ct

    def int_const(self, value: int) -> str:
        return str(value)

    def group(self, e: str) -> str:
        return f"({e})"

    def arith(self, sym: str, a: str, b: str) -> str:
        return f"{a} {sym} {b}"

    def bitwise(self, sym: str, a: str, b: str) -> str:
        return f"{a} {sym} {b}"

    def neg(self, x: str) -> str:
        return f"-{x}"

    def compare(self, sym: str, a: str, b: str) -> str:
        return f"{a} {sym} {b}"

    def select(self, cond: str, a: str, b: str) -> str:
        return f"{cond} ? {a} : {b}"


Formula = Callable[..., str]          # (lang, *operands) -> the value's text


@dataclass(frozen=True)
class Op:
    """One element-wise op: what every language's kernel computes."""

    name: str
    arity: int                        # operands (fill and arange read only their input's shape)
    doc: str                          # the semantics: heads the kernels' comments
    formula: Formula | None = None    # written once against Lang; None: every language has a delta
    int_valued: bool = False          # the value is an int (a truth value, sign's -1 / 0 / 1), not the compute type


# ------------------------------------------------------------------------------------ formulas

def _arith(sym: str, bool_sym: str = "") -> Formula:
    def formula(lang: Lang, a: str, b: str) -> str:
        if lang.is_bool and bool_sym:       # bool add is OR, mul is AND
            return lang.group(lang.bitwise(bool_sym, a, b))
        return lang.group(lang.arith(sym, a, b))
    return formula


def _div(lang: Lang, a: str, b: str) -> str:
    return lang.group(lang.select(lang.compare_zero("==", b), lang.attr("div_by_zero_mask"), lang.arith("/", a, b)))


def _neg(lang: Lang, x: str) -> str:
    return lang.neg(x) if lang.is_float else lang.group(lang.arith("-", lang.lit(0), x))


def _recip(lang: Lang, x: str) -> str:
    return lang.group(lang.select(lang.compare_zero("==", x), lang.attr("div_by_zero_mask"),
                                  lang.arith("/", lang.lit(1), x)))


def _abs(lang: Lang, x: str) -> str:
    if lang.is_float:
        return lang.call("abs", x)
    return lang.group(lang.select(lang.compare_zero("<", x), lang.arith("-", lang.lit(0), x), x))


def _sign(lang: Lang, x: str) -> str:
    if lang.is_unsigned:
        return lang.flag(lang.compare_zero("!=", x))
    return lang.group(lang.arith("-", lang.flag(lang.compare_zero(">", x)), lang.flag(lang.compare_zero("<", x))))


def _extreme(is_max: bool) -> Formula:
    def formula(lang: Lang, a: str, b: str) -> str:
        if lang.is_float:
            return lang.maximum(a, b) if is_max else lang.minimum(a, b)
        return lang.group(lang.select(lang.compare(">" if is_max else "<", a, b), a, b))
    return formula


def _clamp(lang: Lang, x: str) -> str:
    lo, hi = lang.attr("min"), lang.attr("max")
    if lang.is_float:
        return lang.minimum(lang.maximum(x, lo), hi)      # IEEE: NaN stays NaN; min > max gives max
    y = lang.let("y", lang.select(lang.compare("<", x, lo), lo, x))
    return lang.group(lang.select(lang.compare(">", y, hi), hi, y))


def _call(fn: str) -> Formula:
    def formula(lang: Lang, *xs: str) -> str:
        return lang.call(fn, *xs)
    return formula


def _bitwise(sym: str) -> Formula:
    def formula(lang: Lang, a: str, b: str) -> str:
        return lang.group(lang.bitwise(sym, a, b))
    return formula


def _compare(sym: str) -> Formula:
    def formula(lang: Lang, a: str, b: str) -> str:
        return lang.flag(lang.compare(sym, a, b))
    return formula


def _filter(lang: Lang, a: str, b: str, cond: str) -> str:
    return lang.group(lang.select(lang.compare_zero("!=", cond), a, b))     # NaN != 0: a NaN cond is true


def _classify(test: str) -> Formula:
    def formula(lang: Lang, x: str) -> str:
        return lang.classify(test, x)
    return formula


def _is_neg(lang: Lang, x: str) -> str:
    return lang.int_const(0) if lang.is_unsigned else lang.flag(lang.compare_zero("<", x))


def _rsqrt(lang: Lang, x: str) -> str:
    return lang.arith("/", lang.lit(1), lang.call("sqrt", x))


def _sigmoid(lang: Lang, x: str) -> str:
    """1 / (1 + exp(-x)), parenthesised (sigmoid, and inside silu)."""
    one = lang.lit(1)
    return lang.group(lang.arith("/", one, lang.group(lang.arith("+", one, lang.call("exp", lang.neg(x))))))


def _silu(lang: Lang, x: str) -> str:
    return lang.arith("*", x, _sigmoid(lang, x))


def _gelu(lang: Lang, x: str) -> str:
    half, one = lang.lit(0.5), lang.lit(1)
    if lang.static("approximate") == "tanh":
        k, a = lang.lit(math.sqrt(2 / math.pi)), lang.lit(0.044715)
        cube = lang.arith("*", lang.arith("*", lang.arith("*", a, x), x), x)
        inner = lang.let("inner", lang.arith("*", k, lang.group(lang.arith("+", x, cube))))
        return lang.arith("*", lang.arith("*", half, x), lang.group(lang.arith("+", one, lang.call("tanh", inner))))
    r2 = lang.lit(math.sqrt(2))
    return lang.arith("*", lang.arith("*", half, x),
                      lang.group(lang.arith("+", one, lang.call("erf", lang.arith("/", x, r2)))))


def _softplus(lang: Lang, x: str) -> str:
    """log1p(exp(-|x|)) + max(x, 0), parenthesised: no overflow for large x, and log1p keeps the
    small values of large negative x (log(1 + e) would round them to 0)."""
    small = lang.call("log1p", lang.call("exp", lang.neg(lang.call("abs", x))))
    return lang.group(lang.arith("+", small, lang.maximum(x, lang.lit(0))))


def _softsign(lang: Lang, x: str) -> str:
    return lang.arith("/", x, lang.group(lang.arith("+", lang.lit(1), lang.call("abs", x))))


def _unit_clamp(lang: Lang, v: str) -> str:
    """max(0, min(1, v)), IEEE (NaN stays NaN)."""
    return lang.maximum(lang.lit(0), lang.minimum(lang.lit(1), v))


def _hard_sigmoid(lang: Lang, x: str) -> str:
    return _unit_clamp(lang, lang.arith("+", lang.arith("*", lang.attr("alpha"), x), lang.attr("beta")))


def _hard_swish(lang: Lang, x: str) -> str:
    return lang.arith("*", x, _unit_clamp(lang, lang.arith("+", lang.arith("/", x, lang.lit(6)), lang.lit(0.5))))


def _elu(lang: Lang, x: str) -> str:
    """x >= 0 ? x : alpha * expm1(x), parenthesised (elu, and inside selu): expm1 does not cancel
    near 0 as exp(x) - 1 would."""
    return lang.group(lang.select(lang.compare_zero(">=", x), x,
                                  lang.arith("*", lang.attr("alpha"), lang.call("expm1", x))))


def _selu(lang: Lang, x: str) -> str:
    return lang.arith("*", lang.attr("gamma"), _elu(lang, x))


def _celu(lang: Lang, x: str) -> str:
    alpha, zero = lang.attr("alpha"), lang.lit(0)
    negative = lang.arith("*", alpha, lang.call("expm1", lang.arith("/", x, alpha)))
    return lang.group(lang.arith("+", lang.maximum(zero, x), lang.minimum(zero, negative)))


def _leaky_relu(lang: Lang, x: str) -> str:
    return lang.group(lang.select(lang.compare_zero(">=", x), x, lang.arith("*", lang.attr("alpha"), x)))


def _mish(lang: Lang, x: str) -> str:
    return lang.arith("*", x, lang.call("tanh", _softplus(lang, x)))


# ------------------------------------------------------------------------------------ the table

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_TABLE = (
    # arithmetic
    Op("add", 2, "a + b (bool: OR; integers wrap)", _arith("+", "|")),
    Op("sub", 2, "a - b (integers wrap)", _arith("-")),
    Op("mul", 2, "a * b (bool: AND; integers wrap)", _arith("*", "&")),
    Op("div", 2, "a / b; b == 0 (either zero) gives div_by_zero_mask; integers truncate, INT_MIN / -1 wraps",
       _div),
    Op("floor_div", 2, "a // b (floor, as NumPy); b == 0 gives div_by_zero_mask; INT_MIN // -1 wraps"),
    Op("rem", 2, "truncated remainder a % b (sign of a); a % 0 = 0, INT_MIN % -1 = 0"),
    Op("pow", 2, "a ** b in the compute type: C99's special cases, as the reference's NumPy", _call("pow")),
    Op("fma", 3, "a * b + c computed in double (no rounding of the product below f64), rounded once on store"),
    Op("neg", 1, "-x; integers wrap (-INT_MIN = INT_MIN)", _neg),
    Op("recip", 1, "1 / x; x == 0 (either zero) gives div_by_zero_mask", _recip),
    Op("abs", 1, "|x|; integers wrap (abs(INT_MIN) = INT_MIN) unless accumulating wider", _abs),
    Op("relu", 1, "y = x >= 0 ? x : alpha * x, then min(y, clamp_max), then max(y, clamp_min)"),
    Op("sign", 1, "-1, 0 or 1 by the sign of x, as i8 (NaN and zeros give 0)", _sign, int_valued=True),
    Op("min", 2, "IEEE 754-2019 minimum (NaN propagates, -0.0 < +0.0)", _extreme(False)),
    Op("max", 2, "IEEE 754-2019 maximum (NaN propagates, -0.0 < +0.0)", _extreme(True)),
    Op("clamp", 1, "min(max(x, min), max); floats IEEE (NaN stays NaN); min > max gives max", _clamp),
    Op("floor", 1, "round toward -inf", _call("floor")),
    Op("ceil", 1, "round toward +inf", _call("ceil")),
    Op("trunc", 1, "round toward zero", _call("trunc")),
    Op("round", 1, "round half away from zero (C round)", _call("round")),
    # bitwise
    Op("and", 2, "a & b (bool: logical AND)", _bitwise("&")),
    Op("or", 2, "a | b (bool: logical OR)", _bitwise("|")),
    Op("xor", 2, "a ^ b (bool: logical XOR)", _bitwise("^")),
    Op("not", 1, "bitwise NOT within the type's width (bool: logical)"),
    Op("shl", 1, "x << (bits & 63) on the 64-bit pattern, wrapped to T"),
    Op("shr", 1, "x >> (bits & 63): arithmetic for signed types, logical for unsigned"),
    Op("popcount", 1, "set bits of x's two's-complement pattern within its width, as u8"),
    # comparison
    *(Op(op, 2, f"a {sym} b as bool (IEEE: NaN compares unequal)", _compare(sym), int_valued=True)
      for op, sym in _CMP.items()),
    Op("filter", 3, "cond != 0 ? a : b (a NaN cond counts as non-zero)", _filter),
    Op("is_nan", 1, "x is NaN", _classify("isnan"), int_valued=True),
    Op("is_inf", 1, "x is +inf or -inf", _classify("isinf"), int_valued=True),
    Op("is_finite", 1, "x is finite (element-wise form)", _classify("isfinite"), int_valued=True),
    Op("is_neg", 1, "x < 0 (-0.0 and NaN are not negative; unsigned: never)", _is_neg, int_valued=True),
    # math
    Op("exp", 1, "e^x in the compute type", _call("exp")),
    Op("log", 1, "natural logarithm in the compute type (log 0 = -inf, x < 0 gives NaN)", _call("log")),
    Op("sqrt", 1, "square root; sqrt(-0.0) = -0.0, x < 0 gives NaN", _call("sqrt")),
    Op("tanh", 1, "hyperbolic tangent in the compute type", _call("tanh")),
    Op("rsqrt", 1, "1 / sqrt(x); rsqrt(+-0) = +-inf", _rsqrt),
    Op("sigmoid", 1, "1 / (1 + exp(-x))", _sigmoid),
    Op("silu", 1, "x * (1 / (1 + exp(-x)))", _silu),
    Op("erf", 1, "the Gauss error function in the compute type, as the reference", _call("erf")),
    Op("gelu", 1, "0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation", _gelu),
    *(Op(op, 1, f"{op} in the compute type", _call(op))
      for op in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh")),
    Op("softplus", 1, "log1p(exp(-|x|)) + max(x, 0)", _softplus),
    Op("softsign", 1, "x / (1 + |x|)", _softsign),
    Op("hard_sigmoid", 1, "max(0, min(1, alpha * x + beta))", _hard_sigmoid),
    Op("hard_swish", 1, "x * max(0, min(1, x / 6 + 0.5))", _hard_swish),
    Op("elu", 1, "x >= 0 ? x : alpha * expm1(x)", _elu),
    Op("selu", 1, "gamma * (x >= 0 ? x : alpha * expm1(x))", _selu),
    Op("celu", 1, "max(0, x) + min(0, alpha * expm1(x / alpha))", _celu),
    Op("leaky_relu", 1, "x >= 0 ? x : alpha * x", _leaky_relu),
    Op("mish", 1, "x * tanh(log1p(exp(-|x|)) + max(x, 0))", _mish),
    # cast, fill
    Op("cast", 1, "convert to `to`: floats round on store; float -> int rounds by mode, NaN -> 0, "
                  "saturates or wraps; to bool: x != 0; bool: 0 or 1"),
    Op("fill", 1, "every element = value (rounded / stored as T)"),
    Op("arange", 1, "start + i * step along `axis`: integers wrap to T; floats in double (the product "
                    "rounded, then the sum), rounded once to T"),
)

#: op name -> its entry
OPS: Mapping[str, Op] = {op.name: op for op in _TABLE}


def check_deltas(language: str, deltas: Mapping[str, object], notes: Mapping[str, str]) -> None:
    """A scalar language's deltas and comment notes name table ops, and every op without a
    formula has a delta (checked when the wing is imported: a missing one would otherwise only
    show when a model used the op)."""
    unknown = sorted((set(deltas) | set(notes)) - set(OPS))
    missing = sorted(name for name, op in OPS.items() if op.formula is None and name not in deltas)
    if unknown or missing:
        raise AssertionError(f"{language} element-wise deltas: not in the table {unknown}, "
                             f"no formula and no delta {missing}")
