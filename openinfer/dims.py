"""Dynamic dimensions: sizes chosen at run time, within bounds fixed when code is generated.

A dynamic sizevar (`--dynamic S=512`) binds to a `Dim`: an `int` whose value is the bound (the
capacity every buffer, offset and memory plan is computed for) that also carries the symbolic
expression of its run-time value (`S`, `S*64`, `(S - 3) // 2 + 1`). Shape rules, the lowering and
the kernel emitters need no second code path: arithmetic on a Dim keeps the expression beside
the capacity, and where a Dim reaches generated C, `str()` renders the run-time expression over
`sz_<NAME>` (a kernel parameter, or a local copy of the handle's size in the schedule).

Why an int subclass: the memory plan, the ABI's capacities and every check written for static
sizes keep working on the bound unchanged; only code that *renders* a dim sees the expression.
The risk is the opposite leak (a dim used as a plain int where its run-time value was meant, as
`range(d)` does): decisions that would differ within the range refuse instead of guessing
(`S < 4` raises DynamicDimError; `S >= 1` is True), and the tests run every dynamic graph at
several lengths against the reference.

Expressions are polynomials with integer coefficients over atoms; an atom is a sizevar or an
exact floor division / remainder of a polynomial by a constant (conv and pool output lengths).
Polynomials are kept in a canonical form, so equal expressions compare and hash equal: two
operands of shape [S, 64] have one shape, and [S, 64] differs from a static [512, 64].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property


class DynamicDimError(ValueError):
    """A decision about a dynamic dim that is not the same for every value it may take."""


#: how `str(dim)` renders while code for another language is generated (`rendering`)
_TEXT: ContextVar[Callable[[Dim], str] | None] = ContextVar("dim_text", default=None)


@contextmanager
def rendering(text: Callable[[Dim], str]) -> Iterator[None]:
    """Within the block, `str(dim)` (and so every f-string an emitter writes) is `text(dim)`.

    The GLSL emitters use it to name each run-time extent with a macro whose definition reads the
    push constants (openinfer/targets/vulkan/glsl/__init__.py): the C text over `sz_S` means nothing there."""
    token = _TEXT.set(text)
    try:
        yield
    finally:
        _TEXT.reset(token)


@dataclass(frozen=True, order=True)
class SizeVar:
    """A dynamic sizevar: its run-time value lies in [1, bound]."""

    name: str
    bound: int

    def c(self) -> str:
        return f"sz_{self.name}"

    def interval(self) -> tuple[int, int]:
        return 1, self.bound

    def pretty(self) -> str:
        return self.name

    def evaluate(self, env) -> int:
        return env.get(self.name, self.bound)


@dataclass(frozen=True)
class Quotient:
    """floor(poly / divisor) (`mod` False) or poly mod divisor (`mod` True), divisor > 0."""

    poly: Poly
    divisor: int
    mod: bool

    def c(self) -> str:
        a, k = self.poly.c(), self.divisor
        if self.poly.interval()[0] >= 0:     # C's truncating division is the floor here
            return f"({a} {'%' if self.mod else '/'} {k})"
        # a conv's (S - 3) // 2 is negative below its smallest size (refused by set_size): floor anyway
        rem = f"((({a} % {k}) + {k}) % {k})"
        return rem if self.mod else f"(({a} - {rem}) / {k})"

    def pretty(self) -> str:
        inner = self.poly.pretty()
        inner = f"({inner})" if len(self.poly.terms) > 1 else inner
        return f"{inner} {'%' if self.mod else '//'} {self.divisor}"

    def evaluate(self, env) -> int:
        return divmod(self.poly.evaluate(env), self.divisor)[1 if self.mod else 0]

    def interval(self) -> tuple[int, int]:
        lo, hi = self.poly.interval()
        if self.mod:
            return (lo, hi) if 0 <= lo and hi < self.divisor else (0, self.divisor - 1)
        return lo // self.divisor, hi // self.divisor


Atom = SizeVar | Quotient


def _atom_key(a: Atom):
    return (0, a.name, a.bound) if isinstance(a, SizeVar) else (1, a.poly.c(), a.divisor, a.mod)


@dataclass(frozen=True)
class Poly:
    """sum(coeff * prod(atoms)); `terms` sorted, no zero coefficients; () is 0."""

    terms: tuple[tuple[tuple[Atom, ...], int], ...]

    @staticmethod
    def make(acc: dict[tuple[Atom, ...], int]) -> Poly:
        items = [(m, c) for m, c in acc.items() if c != 0]
        items.sort(key=lambda mc: (not mc[0], tuple(_atom_key(a) for a in mc[0])))   # constant last
        return Poly(tuple(items))

    @staticmethod
    def const(c: int) -> Poly:
        return Poly.make({(): c})

    @staticmethod
    def atom(a: Atom) -> Poly:
        return Poly.make({(a,): 1})

    @property
    def constant(self) -> int | None:
        """The value when the polynomial has no atom, else None."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None

    def __add__(self, other: Poly) -> Poly:
        acc = dict(self.terms)
        for m, c in other.terms:
            acc[m] = acc.get(m, 0) + c
        return Poly.make(acc)

    def scale(self, k: int) -> Poly:
        return Poly.make({m: c * k for m, c in self.terms})

    def __mul__(self, other: Poly) -> Poly:
        acc: dict[tuple[Atom, ...], int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2, key=_atom_key))
                acc[m] = acc.get(m, 0) + c1 * c2
        return Poly.make(acc)

    def divides(self, k: int) -> bool:
        return all(c % k == 0 for _, c in self.terms)

    def interval(self) -> tuple[int, int]:
        """Bounds over every atom's interval (interval arithmetic: exact for the polynomials of
        shapes, whose atoms are non-negative, conservative otherwise)."""
        lo_sum = hi_sum = 0
        for m, c in self.terms:
            lo, hi = 1, 1
            for a in m:
                alo, ahi = a.interval()
                corners = (lo * alo, lo * ahi, hi * alo, hi * ahi)
                lo, hi = min(corners), max(corners)
            lo, hi = sorted((lo * c, hi * c))
            lo_sum += lo
            hi_sum += hi
        return lo_sum, hi_sum

    def evaluate(self, env) -> int:
        """The value with sizevars at `env` (name -> value; others at their bound)."""
        total = 0
        for m, c in self.terms:
            for a in m:
                c *= a.evaluate(env)
            total += c
        return total

    def sizevars(self) -> set[SizeVar]:
        out: set[SizeVar] = set()
        for m, _ in self.terms:
            for a in m:
                out |= {a} if isinstance(a, SizeVar) else a.poly.sizevars()
        return out

    def _render(self, atom_text) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in self.terms:
            factors = [atom_text(a) for a in m]
            if abs(c) != 1 or not factors:
                factors.insert(0, str(abs(c)))
            text = " * ".join(factors)
            parts.append(("- " if c < 0 else "+ ") + text)
        out = " ".join(parts)
        out = out[2:] if out.startswith("+ ") else "-" + out[2:]
        return out

    def c(self) -> str:
        return "(" + self._render(lambda a: a.c()) + ")"

    def pretty(self) -> str:
        text = self._render(lambda a: a.pretty())
        return text.replace(" * ", "*")


def _poly(x) -> Poly:
    return x.poly if isinstance(x, Dim) else Poly.const(int(x))


def _dim(value: int, poly: Poly) -> int:
    """A Dim, or a plain int when the expression has no sizevar left."""
    c = poly.constant
    if c is not None:
        assert c == value, (c, value)
        return c
    return Dim(value, poly)


class Dim(int):
    """A dimension whose run-time value is `poly` and whose capacity (int value) is its bound."""

    poly: Poly

    def __new__(cls, value: int, poly: Poly) -> Dim:
        obj = super().__new__(cls, value)
        obj.poly = poly
        return obj

    @staticmethod
    def var(name: str, bound: int) -> Dim:
        return Dim(bound, Poly.atom(SizeVar(name, bound)))

    # ---------------------------------------------------------------- what it depends on
    @cached_property
    def sizevars(self) -> tuple[str, ...]:
        return tuple(sorted(v.name for v in self.poly.sizevars()))

    def interval(self) -> tuple[int, int]:
        return self.poly.interval()

    # ---------------------------------------------------------------- text
    def __str__(self) -> str:
        """The C expression of the run-time value (over `sz_<NAME>`), or within `rendering`, the
        text that gives."""
        other = _TEXT.get()
        return self.c() if other is None else other(self)

    def c(self) -> str:
        """The C expression of the run-time value, over `sz_<NAME>`."""
        text = self.poly.c()
        return text[1:-1] if text.count("(") == 1 and " " not in text[1:-1] else text

    def __repr__(self) -> str:
        """For people (`list(shape)` in messages and kernel comments): `S*64`."""
        return self.poly.pretty()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def pretty(self) -> str:
        """For people: `S*64` (the capacity is the int value)."""
        return self.poly.pretty()

    # ---------------------------------------------------------------- identity
    def __eq__(self, other) -> bool:
        if isinstance(other, Dim):
            return self.poly == other.poly
        if isinstance(other, int):
            return False       # a dynamic dim is never one static size
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self.poly)

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _dim(int(self) + int(other), self.poly + _poly(other))

    __radd__ = __add__

    def __sub__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _dim(int(self) - int(other), self.poly + _poly(other).scale(-1))

    def __rsub__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _dim(int(other) - int(self), _poly(other) + self.poly.scale(-1))

    def __mul__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _dim(int(self) * int(other), self.poly * _poly(other))

    __rmul__ = __mul__

    def __neg__(self):
        terms = self.poly.terms
        if len(terms) == 1 and terms[0][1] == 1 and len(terms[0][0]) == 1:
            q = terms[0][0][0]
            if isinstance(q, Quotient) and not q.mod:
                # -floor(p / k) = floor((k - 1 - p) / k): the ceiling division `-(-n // k)` reads
                # as (n + k - 1) // k in generated code
                inner = q.poly.scale(-1) + Poly.const(q.divisor - 1)
                return _dim(-int(self), Poly.atom(Quotient(inner, q.divisor, False)))
        return _dim(-int(self), self.poly.scale(-1))

    def __pos__(self):
        return self

    def __abs__(self):
        # int.__abs__ would return the bound: a dim's sign is decided by its interval instead
        return self if self >= 0 else -self

    def _quotient(self, other, mod: bool):
        if isinstance(other, Dim) or not isinstance(other, int):
            raise DynamicDimError(f"cannot divide {self.pretty()} by the dynamic size {pretty(other)}")
        k = int(other)
        if k <= 0:
            raise DynamicDimError(f"cannot divide the dynamic size {self.pretty()} by {k}")
        value = divmod(int(self), k)[1 if mod else 0]
        if k == 1:
            return _dim(value, Poly.const(0) if mod else self.poly)
        if self.poly.divides(k):    # exact: (64*S) // 8 is 8*S, (64*S) % 8 is 0
            return _dim(value, Poly.const(0) if mod else Poly.make({m: c // k for m, c in self.poly.terms}))
        return _dim(value, Poly.atom(Quotient(self.poly, k, mod)))

    def __floordiv__(self, other):
        return self._quotient(other, mod=False)

    def __mod__(self, other):
        return self._quotient(other, mod=True)

    def __rfloordiv__(self, other):
        raise DynamicDimError(f"cannot divide by the dynamic size {self.pretty()}")

    __rmod__ = __rfloordiv__

    def __divmod__(self, other):
        return self // other, self % other

    def __truediv__(self, other):
        raise DynamicDimError(f"the dynamic size {self.pretty()} has no float value at generation time")

    __rtruediv__ = __truediv__

    def _bitwise(self, *_):
        raise DynamicDimError(f"bitwise arithmetic on the dynamic size {self.pretty()}")

    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _bitwise
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __pow__ = __rpow__ = _bitwise

    # ---------------------------------------------------------------- decisions
    def _compare(self, other, op: str) -> bool:
        if not isinstance(other, int):
            return NotImplemented
        lo, hi = (self.poly + _poly(other).scale(-1)).interval()
        results = {"<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0), ">": (lo > 0, hi <= 0), ">=": (lo >= 0, hi < 0)}
        true, false = results[op]
        if true:
            return True
        if false:
            return False
        raise DynamicDimError(f"whether {self.pretty()} {op} "
                              f"{other.pretty() if isinstance(other, Dim) else other} depends on the run-time "
                              f"size (sizes {', '.join(self.sizevars)} range from 1 to their bounds)")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __bool__(self) -> bool:
        lo, hi = self.interval()
        if lo > 0 or hi < 0:
            return True
        raise DynamicDimError(f"whether {self.pretty()} is 0 depends on the run-time size")

    def __reduce__(self):
        return (Dim, (int(self), self.poly))


def evaluate(d, env) -> int:
    """A size at the run-time sizes `env` (name -> value; sizevars not in it at their bound)."""
    return d.poly.evaluate(env) if isinstance(d, Dim) else d


def host_expr(x) -> str:
    """`x` as C in the host schedule, where the sizes live in the handle (`m->sz_S`)."""
    return re.sub(r"\bsz_", "m->sz_", x.c()) if isinstance(x, Dim) else str(x)


def capacity(x):
    """The static bound of a size or shape (plain ints for Dims, recursively in tuples)."""
    if isinstance(x, tuple):
        return tuple(capacity(v) for v in x)
    return int(x) if isinstance(x, Dim) else x


def shape_sizevars(*shapes) -> tuple[str, ...]:
    """The dynamic sizevars the dims of `shapes` depend on, sorted."""
    names: set[str] = set()
    for shape in shapes:
        for d in shape:
            if isinstance(d, Dim):
                names.update(d.sizevars)
    return tuple(sorted(names))


def pretty(d) -> str:
    return d.pretty() if isinstance(d, Dim) else str(d)


def pretty_shape(shape) -> str:
    return "[" + ", ".join(pretty(d) for d in shape) + "]"


def smallest_sizes(dims, bounds: dict[str, int]) -> dict[str, tuple[int, str]]:
    """For each dynamic sizevar: the smallest value at which every dim of `dims` that depends on it
    is at least 1 (the others at their bounds), and the dim that sets it ("" when 1 does).

    A conv's output length `(S - 3) // 2 + 1` needs S >= 3: set_size refuses smaller values
    rather than run kernels over empty or negative extents. Dims of shapes grow with their sizes,
    so a binary search finds the edge; a linear scan confirms it where a dim does not."""
    by_var: dict[str, list[Dim]] = {name: [] for name in bounds}
    for d in dims:
        if isinstance(d, Dim):
            for name in d.sizevars:
                by_var[name].append(d)
    out: dict[str, tuple[int, str]] = {}
    for name, bound in bounds.items():
        ds = list(dict.fromkeys(by_var[name]))

        def ok(n: int) -> bool:
            return all(d.poly.evaluate({name: n}) >= 1 for d in ds)   # noqa: B023

        if ok(1):
            out[name] = (1, "")
            continue
        lo, hi = 1, bound            # ok(hi) holds: the graph was bound there
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        if not all(ok(n) for n in range(hi, min(bound, hi + 64) + 1)):
            hi = next(n for n in range(bound, 0, -1) if not ok(n)) + 1
        worst = next(d for d in ds if d.poly.evaluate({name: hi - 1}) < 1)
        out[name] = (hi, worst.pretty())
    return out
