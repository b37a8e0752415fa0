"""`openinfer oinf verify`: check a file and print its contents in the original verifier's format.

The checks are `ModelLoader.open` (every structural rule, digest §1.10, plus blob overlap) and
decoding every metadata value and tensor. The text follows the original `oinf_verify.py` line by
line (sizevars as `NAME := VALUE`, metadata as `key: type = value`, tensors with a preview, a stats
line and a histogram), with three deliberate differences, documented in docs/oinf.md:

- bool tensors of any rank get their histogram (the original crashed on ndim >= 2);
- f8 NaN prints as nan (the original decoded it as inf), and the histogram counts NaN and
  infinities in their own `(nan, k)` / `(inf, k)` / `(-inf, k)` entries, the finite values in
  bins (the original crashed on NaN and mis-binned infinities);
- the quant line is printed for every quantized tensor, scalars and empty ones included.
"""

from __future__ import annotations

import os

import numpy as np

from ..dtypes import Kind
from .reader import Model, ModelLoader, TensorInfo
from .values import Bitset, QuantParams


def verify_file(path: str | os.PathLike) -> str:
    """The verifier's report for the file at `path`; OinfError if the file is invalid."""
    with ModelLoader.open(path) as model:
        return verify_report(model)


def verify_report(model: Model) -> str:
    lines: list[str] = []
    sizevars = model.sizevars
    lines += [f"{name} := {value}" for name, value in sizevars.items()]
    if sizevars:
        lines.append("")
    infos = model.metadata_infos
    for key, value in model.metadata.items():
        info = infos[key]
        if info.type.kind is Kind.NDARRAY:
            lines.append(f"{key}: {info.element_dtype.name}[{_dims(info.shape)}] = {format_values(value)}")
        elif isinstance(value, Bitset):
            lines.append(f"{key}: bitset[{value.bit_count}] = {' '.join(f'{b:02x}' for b in value.bytes[:4])}")
        else:
            lines.append(f"{key}: {info.type.name} = {format_scalar(value)}")
    if infos:
        lines.append("")
    for info in model.tensor_infos.values():
        lines += _tensor_lines(model, info)
        lines.append("")
    return "\n".join(lines) + "\n" if lines else ""


def _tensor_lines(model: Model, info: TensorInfo) -> list[str]:
    head = f"{info.name}: {info.dtype.name}"
    quant = [quant_line(info.quant)] if info.quant is not None else []
    if not info.has_data:
        return [f"{head}[{_dims(info.shape)}] -- uninitialized", *quant]
    values = model.tensor(info.name)
    if values.size == 0:
        return [f"{head}[{_dims(info.shape)}] -- uninitialized", *quant]
    if values.size == 1:
        return [f"{head} = {format_scalar(values.item())}", *quant]
    s = stats(values)
    return [f"{head}[{_dims(info.shape)}] = {format_values(values)}",
            f"- [nbytes: {values.nbytes}, min: {s['min']:.6g}, max: {s['max']:.6g}, mean: {s['mean']:.6g}, "
            f"median: {s['median']:.6g}, std: {s['std']:.6g}]",
            f"- hist: {histogram(values)}", *quant]


def _dims(shape) -> str:
    return ", ".join(str(d) for d in shape)


def format_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _format_1d(flat: np.ndarray) -> str:
    picked = [flat[:5], flat[-5:]] if flat.size > 10 else [flat]
    items = [[format_scalar(v.item()) for v in part] for part in picked]
    return "{ " + ", ".join(items[0] + (["...", *items[1]] if len(items) > 1 else [])) + " }"


def format_values(values: np.ndarray) -> str:
    """First and last five values; an N-d array shows its first min(rows, ndim, 5) rows (as the original)."""
    if values.ndim <= 1:
        return _format_1d(values.reshape(-1))
    rows = min(values.shape[0], values.ndim, 5)
    lines = ["{ ", *(f"{_format_1d(values[i].reshape(-1))} ," for i in range(rows))]
    if values.shape[0] > rows:
        lines.append("...")
    return "\n".join([*lines, "}"])


def stats(values: np.ndarray) -> dict[str, float]:
    """min, max, mean, median and std over all values as float64 (NaN propagates, as NumPy's)."""
    with np.errstate(all="ignore"):  # signalling NaNs in the file must not warn
        x = values.reshape(-1).astype(np.float64)
        return {"min": float(np.min(x)), "max": float(np.max(x)), "mean": float(np.mean(x)),
                "median": float(np.median(x)), "std": float(np.std(x))}


def histogram(values: np.ndarray) -> str:
    """Integer bins when an integer tensor spans at most 20 values, else 10 bins; empty bins omitted."""
    flat = values.reshape(-1)
    if flat.size == 0:
        return "{(empty)}"
    if flat.dtype == np.bool_:
        ones = int(np.count_nonzero(flat))
        return f"{{([0, 0], {flat.size - ones}), ([1, 1], {ones})}}"
    entries = []
    if flat.dtype.kind in "iu":
        lo, hi = int(flat.min()), int(flat.max())
        if hi - lo <= 20:
            counts = np.bincount((flat - flat.dtype.type(lo)).astype(np.intp), minlength=hi - lo + 1)
            return "{" + ", ".join(f"([{lo + i}, {lo + i}], {c})" for i, c in enumerate(counts) if c) + "}"
    with np.errstate(invalid="ignore"):
        x = flat.astype(np.float64)
    finite = np.isfinite(x)
    xf = x[finite]
    if xf.size:
        lo, hi = float(xf.min()), float(xf.max())
        if lo == hi:
            entries.append(f"([{lo:.6g}, {hi:.6g}], {xf.size})")
        else:
            counts, edges = _bins(xf, lo, hi)
            entries += [f"([{edges[i]:.6g}, {edges[i + 1]:.6g}], {c})" for i, c in enumerate(counts) if c]
    for label, mask in (("nan", np.isnan(x)), ("-inf", x == -np.inf), ("inf", x == np.inf)):
        if n := int(np.count_nonzero(mask)):
            entries.append(f"({label}, {n})")
    return "{" + ", ".join(entries) + "}"


def _bins(x: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """`np.histogram(x, 10, (lo, hi))`, also when hi - lo overflows float64 (where NumPy fails)."""
    if np.isfinite(hi - lo):
        return np.histogram(x, bins=10, range=(lo, hi))
    t = np.linspace(0.0, 1.0, 11)
    edges = lo * (1 - t) + hi * t
    index = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, 9)
    return np.bincount(index, minlength=10), edges


def quant_line(q: QuantParams) -> str:
    scale = (f"per_tensor({float(q.scales[0]):.6g})" if q.scale_mode == "per_tensor"
             else f"per_channel(axis={q.scale_axis}, count={len(q.scales)})")
    zp = {"none": "none", "per_tensor": f"per_tensor({int(q.zero_points[0]) if len(q.zero_points) else 0})",
          "per_channel": f"per_channel(axis={q.zp_axis}, count={len(q.zero_points)})"}[q.zp_mode]
    return f"- quant: scheme={q.scheme}, scale={scale}, zero_point={zp}"
