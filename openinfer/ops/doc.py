"""Generate docs/ops.md from the registry: `python -m openinfer.ops.doc [--check] [PATH]`.

The general rules below are the semantics every kernel (reference, C, GLSL) implements; the
per-op sections come from ops.yaml, so the page cannot drift from the registry (a test compares
the committed file with `render()`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .registry import OpSpec, all_ops, categories, dtype_sets, get
from .shapes import SHAPE_RULE_DOCS

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "ops.md"

GENERAL = """\
## General rules

**Typing.** There is no implicit dtype promotion: every input of an op has the op's type T
(input 0's dtype) unless the op says otherwise (the indices of gather, gather_elements, gather_nd and
scatter_nd, rope's positions, sdpa's mask).
Mixed dtypes are a bind-time error; convert with `cast`. Supported dtypes are checked on T. The
declared output must have exactly the result's dtype and shape.

**Modes** (digest §3.6). *accumulate* when the op accepts `acc` and it is given; otherwise
*inplace* when the output variable is also an input (the op must allow it); otherwise *normal*.
In-place never changes results: kernels are pure and the runtime copies the result into the
buffer. With broadcasting, the in-place operand must already have the output shape. `acc` and
in-place output do not combine.

**Broadcasting** (digest §3.7) is NumPy's (right-aligned; equal dims or one of them 1), only
where the op allows it: add, mul, sub, div, floor_div, rem, pow, the comparisons eq, ne, lt, le, gt and
ge, the bitwise and, or and xor, matmul (batch dims) and sdpa (batch dims and mask). A 0-d variable
broadcasts everywhere, so a scalar variable is a broadcasting operand
(`op gt(x, threshold) >> mask;`). Every other multi-input op needs equal shapes.

**Floats.** f8 (E5M2), bf16 and f16 compute in f32 and round to nearest even on store; f32
computes in f32, f64 in f64. Composite ops (softmax, norms, rope, sdpa, conv, pooling) stay in
the compute type from start to end and round once. The few values computed in f64 (fma, arange,
casts from f64) round to f16 directly and to bf16/f8 through f32. IEEE specials propagate as in C/NumPy
unless an op says otherwise; min/max (and their reductions) follow IEEE 754-2019
`minimum`/`maximum`: NaN propagates and -0.0 < +0.0.

**Integers** compute exactly and wrap two's-complement to their width on store (packed i1..i4
and u1..u4 too: computed unpacked, wrapped back to the width). bitset is arithmetic on u8. bool:
add is OR, mul is AND, matmul is OR of ANDs.

**Reductions and matmul** accumulate in T unless `acc` says otherwise. f8/bf16/f16 add
sequentially (matmul: over the inner dim in order; reductions: row-major over the reduced
elements) and round the running value to T after every step, as the original did; an f32/f64
accumulator may sum in any order (results agree within tolerance); integer sums and products
are exact modulo 2^64 and wrap to the output width; an integer mean divides the exact sum by the
count, truncating toward zero.

### Accumulation (`acc`)

`acc` is accepted by add, mul, sub, abs, matmul, sum_axis, mean_axis, prod_axis and cumsum. It is
written `acc=A`, `acc=[A]` or `acc=[P, A]`:

- The **last** entry A is the accumulator dtype: the op computes in A (inputs converted to A
  exactly, arithmetic in A, integers exact then wrapped to A's width, floats rounded to A).
- A **leading** entry P (two-entry form) is the dtype of the intermediate products of matmul:
  each product a*b is rounded (floats) or wrapped (integers) to P, then summed in A. P is T or
  one of T's accumulator dtypes, of A's kind and no wider than A. For every other op P must
  equal A (`acc=[f32, f32]`, as the original accumulation demo writes it, is the same as
  `acc=f32`).
- (T, A) must be an allowed pair: the original's integer pairs ACC (ACCs for abs: signed only),
  same signedness and strictly wider, packed types widening to i8/u8 and up; and FACC: f8, bf16
  and f16 into f32 or f64, f32 into f32 or f64, f64 into f64. bool and bitset never accumulate.
- The output dtype is A. Float ops may instead declare an output of type T: the accumulator is
  then rounded into T on store (an f16 matmul accumulating in f32, stored as f16). Integer ops
  must declare A.
- The output must be a new variable (no in-place aliasing with `acc`).
"""


def _modes(op: OpSpec) -> str:
    return " ".join(op.modes)


def _sets_text(op: OpSpec) -> str:
    names = " ".join(d.name for d in op.dtypes)
    return f"{op.dtype_text} ({names})" if op.dtype_text.split() != names.split() else names


def _input_line(op: OpSpec) -> str:
    parts = []
    for i in op.inputs:
        text = f"`{i.label}`"
        if i.dtypes is not None:
            text += f" ({i.dtype_text})"
        parts.append(text)
    return ", ".join(parts)


def _op_section(op: OpSpec) -> list[str]:
    lines = [f"### {op.name}", "", f"`{op.signature()}`", "", op.doc, ""]
    if op.notes:
        lines += [op.notes.strip(), ""]
    lines.append(f"- inputs: {_input_line(op)}")
    lines.append(f"- dtypes (T): {_sets_text(op)}")
    lines.append(f"- output dtype: {op.output}" + (" (or the accumulator, see `acc`)" if op.accumulate else ""))
    lines.append(f"- shape: `{op.shape_rule}`: {SHAPE_RULE_DOCS[op.shape_rule]}")
    yes = {True: "yes", False: "no"}
    flags = [f"broadcast {yes[op.broadcast]}", f"in-place {yes[op.inplace]}",
             f"accumulate {op.acc_text if op.accumulate else 'no'}", f"element-wise {yes[op.elementwise]}"]
    lines.append(f"- modes: {_modes(op)}; " + ", ".join(flags))
    if op.attrs:
        lines += ["", "| attribute | kind | default | meaning |", "|---|---|---|---|"]
        for a in op.attrs:
            meaning = a.doc + (f" (one of {', '.join(a.values)})" if a.values else "")
            default = f"alias of `{a.alias_of}`" if a.alias_of else a.default_text()
            lines.append(f"| `{a.name}` | {a.kind} | {default} | {meaning} |")
    lines.append("")
    return lines


def render() -> str:
    ops = all_ops()
    lines = ["# OpenInfer ops", "",
             "<!-- Generated by `python -m openinfer.ops.doc` from openinfer/ops/ops.yaml. Do not edit. -->", "",
             f"{len(ops)} ops: the 47 of the original catalogue and {len(ops) - 47} that real models need "
             "(decisions.md, \"Beyond the original\").", "", GENERAL, "## Dtype sets", "",
             "| set | dtypes |", "|---|---|"]
    for name, members in dtype_sets().items():
        lines.append(f"| {name} | {' '.join(d.name for d in members)} |")
    lines += ["", "## Index", "", "| op | category | inputs | dtypes | modes | output |", "|---|---|---|---|---|---|"]
    for op in ops:
        lines.append(f"| [{op.name}](#{op.name}) | {op.category} | "
                     f"{', '.join(i.label for i in op.inputs)} | {op.dtype_text} | {_modes(op)} | {op.output} |")
    lines.append("")
    for cat in categories():
        lines += [f"## {cat}", ""]
        for op in ops:
            if op.category == cat:
                lines += _op_section(op)
    lines += ["## Accumulation pairs", "",
              "ACC and FACC, as add, mul, sub, matmul, sum/mean/prod_axis and cumsum allow them (abs: the signed and "
              "float rows).", "", "| T | accumulator dtypes A |", "|---|---|"]
    for src, targets in get("add").acc_pairs.items():
        lines.append(f"| {src} | {' '.join(t.name for t in targets)} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--check", action="store_true", help="fail if the file differs from the registry")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not args.path.exists() or args.path.read_text(encoding="utf-8") != text:
            print(f"{args.path} is out of date: run `python -m openinfer.ops.doc`", file=sys.stderr)
            return 1
        return 0
    if not args.path.exists() or args.path.read_text(encoding="utf-8") != text:
        args.path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
