"""Deterministic example inputs for `openinfer run` / `sim` / `trace`: the same seed gives the same
values for every engine, so the reference and a compiled program see identical inputs.

Step s draws from `numpy.random.default_rng(seed + s)`, one variable after another in declaration
order: floats uniform in [-1, 1) (rounded to the dtype), integers uniform in [-4, 4] clipped to
the dtype's range, bool uniform.
"""

from __future__ import annotations

import numpy as np

from .ir import nodes as ir
from .ir.bound import BoundGraph
from .numerics import round_float


def random_inputs(bound: BoundGraph, seed: int, step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + step)
    out: dict[str, np.ndarray] = {}
    for var in bound.vars.values():
        if var.kind is not ir.MemoryKind.DYNAMIC:
            continue
        d = var.dtype
        if d.is_float:
            out[var.name] = np.asarray(round_float(rng.uniform(-1.0, 1.0, var.shape), d))
        elif d.name == "bool":
            out[var.name] = rng.integers(0, 2, var.shape).astype(np.bool_)
        else:
            lo, hi = max(d.lo, -4), min(d.hi, 4)
            out[var.name] = rng.integers(lo, hi + 1, var.shape).astype(d.np_dtype)
    return out


def outputs_of(bound: BoundGraph) -> list[str]:
    """The variables `run`/`sim` show and compare: volatile ones (what a step computes)."""
    return [v.name for v in bound.vars.values() if v.kind is ir.MemoryKind.VOLATILE and not v.is_prefix_table]


def preview(a: np.ndarray, n: int = 8) -> str:
    flat = np.asarray(a).reshape(-1)
    body = ", ".join(_fmt(x) for x in flat[:n])
    return f"[{body}{', ...' if flat.size > n else ''}]"


def _fmt(x) -> str:
    if isinstance(x, (np.floating, float)):
        return f"{float(x):.6g}"
    if isinstance(x, (np.bool_, bool)):
        return "true" if x else "false"
    return str(int(x))
