"""One sweep case: a few statements of the graph DSL over the case's own variables, their values,
and the widths its shapes straddle. Cases are assembled into programs by tests/sweep/runner.py
(names prefixed per case), so many cases share one build.

A case's values are drawn from a generator seeded by its description, so a case keeps its values
whatever the cases around it; its shapes come from the catalogue's fixed seed (catalog.py).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from openinfer.dtypes import DTypeInfo, Kind, lookup
from openinfer.numerics import round_float
from openinfer.ops import TensorType, get

from .widths import APPLIES, offsets


@dataclass(frozen=True, eq=False)
class Var:
    name: str                         # the case's own name; programs prefix it
    dtype: str
    shape: tuple[int, ...]
    role: str     # in (set each step) | inout (set, then read: an in-place result) | const (model tensor)
                  # | out (read) | tmp (not read: the planner and the fusion passes may fold it away)
    value: np.ndarray | None = None   # in / const


@dataclass(frozen=True, eq=False)
class SweepCase:
    desc: str                         # op (or fused path), dtype, shapes and attributes: the values' seed
    family: str                       # widths.APPLIES key
    ops: tuple[str, ...]              # the registry ops its statements call
    path: str                         # "kernel", or the fused path it exists for
    vars: tuple[Var, ...]
    body: tuple[str, ...]             # statements; {name} stands for the case's variable `name`
    covers: tuple[tuple[str, int], ...] = ()   # (width, offset) its deciding extents straddle
    sums: bool = False                # outputs are sums of products: rtol relative to the sum of |terms|
    id: str = field(default="", compare=False)   # set by the catalogue: `<op or path>-<n>`

    @property
    def outputs(self) -> tuple[Var, ...]:
        return tuple(v for v in self.vars if v.role in ("out", "inout"))


def rng_for(desc: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(desc.encode()))


def draw(t: DTypeInfo, shape: tuple[int, ...], rng: np.random.Generator, *, scale: float = 1.0,
         positive: bool = False, small_ints: bool = False) -> np.ndarray:
    """Random values of t in its NumPy representation: normal floats (|x| + 0.1 where `positive`),
    integers over the whole range (-7..7 where `small_ints`: sums that stay exact), random bools."""
    if t.kind is Kind.BOOL:
        return rng.random(shape) < 0.5
    if t.is_float:
        x = rng.normal(0.0, scale, shape)
        if positive:
            x = np.abs(x) + 0.1
        return round_float(x, t)
    lo, hi = (max(t.lo, -7), min(t.hi, 7)) if small_ints else (t.lo, t.hi)
    if positive:
        lo = max(lo, 1)
    wide = rng.integers(lo, hi, shape, endpoint=True, dtype=np.uint64 if t.kind is Kind.UNSIGNED else np.int64)
    return wide.astype(t.np_dtype)


def fmt(v) -> str:
    """An attribute value in the DSL."""
    if isinstance(v, DTypeInfo):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return repr(v)


def call(op: str, args: list[str], attrs: dict, out: str) -> str:
    return f"op {op}({', '.join([*(f'{{{a}}}' for a in args), *(f'{k}={fmt(v)}' for k, v in attrs.items())])}) " \
           f">> {{{out}}};"


def describe(op: str, inputs: list[tuple[str, tuple[int, ...]]], attrs: dict, extra: str = "") -> str:
    shapes = " ".join(f"{d}[{','.join(map(str, s))}]" for d, s in inputs)
    settings = " ".join(f"{k}={fmt(v)}" for k, v in attrs.items())
    return " ".join(x for x in (op, shapes, settings, extra) if x)


def single(family: str, op: str, inputs: list[tuple[str, tuple[int, ...]]], attrs: dict | None = None, *,
           out: tuple[str, tuple[int, ...]] | None = None, inplace: bool = False,
           extents: dict[str, int] | None = None, values: dict[int, np.ndarray] | None = None,
           const: tuple[int, ...] = (), sums: bool = False, **draw_kw) -> SweepCase:
    """One call of `op` on fresh random inputs (dtype, shape); `out` declares the output where the
    op needs one (reshape); `inplace` writes the result over input 0; `extents` names the deciding
    extents (their widths become the case's `covers`); `values` fixes some inputs; `const` lists
    inputs that are model tensors (a GEMM's B, prepacked by create())."""
    attrs = dict(attrs or {})
    spec = get(op)
    types = [TensorType(lookup(d), s) for d, s in inputs]
    declared = TensorType(lookup(out[0]), out[1]) if out else None
    inf = spec.infer(types, attrs, declared)
    inplace = inplace and inf.out == types[0]       # (sign's i8 result cannot overwrite an f32 input)
    desc = describe(op, inputs, attrs, ("inplace" if inplace else "") + (" const" + str(list(const)) if const else ""))
    rng = rng_for(desc)
    vars_, args = [], []
    for i, (d, s) in enumerate(inputs):
        value = (values or {}).get(i)
        if value is None:
            value = draw(lookup(d), s, rng, **draw_kw)
        vars_.append(Var(f"x{i}", d, tuple(s), "const" if i in const else "in", value))
        args.append(f"x{i}")
    if inplace:
        vars_[0] = Var("x0", inputs[0][0], tuple(inputs[0][1]), "inout", vars_[0].value)
        target = "x0"
    else:
        vars_.append(Var("y", inf.out_dtype.name, tuple(inf.out_shape), "out"))
        target = "y"
    return SweepCase(desc, family, (op,), "kernel", tuple(vars_), (call(op, args, attrs, target),),
                     covers=widths_of(family, extents or {}), sums=sums)


def widths_of(family: str, extents: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """The (width, offset) pairs of `family` that the extents straddle."""
    names = APPLIES[family]
    return tuple(sorted({c for e in extents.values() for c in offsets(e, names)}))
