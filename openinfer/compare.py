"""Comparing a target's values with the reference's: tolerances per dtype and a report row.

Integers and bool must match exactly. Floats match when |a - r| <= atol + rtol * |r| at every
element: each element is held to its own expected value, so one large element cannot widen the
tolerance of the others (an exp row reaching 1e38 must not excuse an error of 1e27 elsewhere).
atol is a fixed floor per dtype, for results near zero that carry the rounding of the terms they
were computed from; NaN must be NaN in both, infinities equal. A caller that knows the terms of a
sum passes their magnitudes (`compare`'s `magnitude`), so rtol covers cancellation element by element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import DTypeInfo

#: (rtol, absolute floor atol) per float dtype
FLOAT_TOLERANCE = {"f64": (1e-9, 1e-12), "f32": (1e-4, 2e-5), "f16": (4e-3, 2e-3), "bf16": (2e-2, 1e-2),
                   "f8": (0.25, 0.13)}


@dataclass(frozen=True)
class Comparison:
    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    tolerance: str
    ok: bool
    detail: str = ""


def compare(name: str, dtype: DTypeInfo, ref: np.ndarray, got: np.ndarray,
            magnitude: np.ndarray | None = None) -> Comparison:
    """`magnitude` (optional, ref's shape): per element, the sum of the magnitudes of the terms the
    expected value adds up (|A| @ |B| for a matmul). Where given, rtol applies to it instead of
    |ref|: a different summation order rounds relative to the terms, also where they cancel."""
    ref = np.asarray(ref)
    got = np.asarray(got)
    if ref.shape != got.shape:
        return Comparison(name, dtype.name, tuple(ref.shape), float("inf"), float("inf"), "shape", False,
                          f"shape {list(got.shape)} != reference {list(ref.shape)}")
    if not dtype.is_float:
        diff = ref.astype(np.float64) - got.astype(np.float64) if ref.size else np.zeros(0)
        bad = int(np.count_nonzero(ref != got))
        worst = float(np.max(np.abs(diff))) if ref.size else 0.0
        return Comparison(name, dtype.name, tuple(ref.shape), worst, 0.0, "exact", bad == 0,
                          "" if bad == 0 else f"{bad} element(s) differ, first at {_first(ref != got)}")
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    rtol, atol = FLOAT_TOLERANCE[dtype.name]
    finite = np.isfinite(r)
    nan_bad = np.isnan(r) != np.isnan(g)
    inf_bad = np.isinf(r) & (r != g)
    both = finite & np.isfinite(g)
    with np.errstate(invalid="ignore"):             # inf - inf where both are infinite
        err = np.where(both, np.abs(r - g), 0.0)
    scale = np.abs(r) if magnitude is None else np.maximum(np.abs(r), np.asarray(magnitude, np.float64))
    tol = atol + rtol * scale
    bad = nan_bad | inf_bad | (np.isfinite(r) & ~np.isfinite(g)) | (err > tol)
    max_abs = float(err.max()) if err.size else 0.0
    rel = err / np.maximum(np.abs(r), atol) if err.size else np.zeros(0)
    max_rel = float(rel.max()) if rel.size else 0.0
    ok = not bool(bad.any())
    rule = f"rtol {rtol:g}{' of the terms' if magnitude is not None else ''}, atol {atol:.2g}"
    return Comparison(name, dtype.name, tuple(ref.shape), max_abs, max_rel, rule, ok,
                      "" if ok else f"{int(bad.sum())} element(s) outside tolerance, first at {_first(bad)}: "
                                    f"got {g[_first(bad)]!r}, reference {r[_first(bad)]!r}")


def _first(mask: np.ndarray):
    idx = np.argwhere(mask)
    return tuple(int(i) for i in idx[0]) if len(idx) else ()


def table(rows: list[Comparison]) -> str:
    """A text table of comparisons, one line per output."""
    head = ("output", "dtype", "shape", "max abs err", "max rel err", "tolerance", "result")
    body = [(c.name, c.dtype, str(list(c.shape)), f"{c.max_abs:.3g}", f"{c.max_rel:.3g}", c.tolerance,
             "pass" if c.ok else "FAIL") for c in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)) for r in body]
    lines += [f"  {c.name}: {c.detail}" for c in rows if c.detail]
    return "\n".join(lines)
