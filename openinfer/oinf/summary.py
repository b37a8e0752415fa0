"""`openinfer oinf inspect`: what a file holds, as a table for people or deterministic JSON.

JSON conventions follow tests/data/compat/MANIFEST.json: floats that JSON cannot hold are the
strings "nan", "inf" and "-inf"; bitset bytes are hex.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .reader import Model
from .values import Bitset, QuantParams


def summarize(model: Model) -> dict[str, Any]:
    h = model.header
    metadata = {}
    for key, value in model.metadata.items():
        info = model.metadata_info(key)
        item: dict[str, Any] = {"type": info.type.name}
        if info.element_dtype is not None:
            item.update(dtype=info.element_dtype.name, shape=list(info.shape))
        item.update(value=_jsonable(value), value_offset=info.value_offset, value_nbytes=info.value_nbytes)
        metadata[key] = item
    tensors = []
    for info in model.tensor_infos.values():
        tensors.append({
            "name": info.name, "dtype": info.dtype.name, "dtype_code": info.dtype_code, "shape": list(info.shape),
            "numel": info.numel, "has_data": info.has_data, "data_offset": info.data_offset,
            "data_nbytes": info.data_nbytes,
            "quant": None if info.quant is None else {
                **_quant_dict(info.quant), "quant_offset": info.quant_offset, "quant_nbytes": info.quant_nbytes},
        })
    return {
        "path": str(model.path),
        "header": {"version": h.version, "flags": h.flags, "n_sizevars": h.n_sizevars, "n_metadata": h.n_metadata,
                   "n_tensors": h.n_tensors, "reserved": h.reserved, "offset_sizevars": h.offset_sizevars,
                   "offset_metadata": h.offset_metadata, "offset_tensors": h.offset_tensors,
                   "offset_data": h.offset_data, "file_size": h.file_size},
        "sizevars": model.sizevars,
        "metadata": metadata,
        "tensors": tensors,
    }


def summary_json(model: Model) -> str:
    return json.dumps(summarize(model), indent=2, allow_nan=False) + "\n"


def summary_text(model: Model) -> str:
    s = summarize(model)
    h = s["header"]
    out = [f"file:     {s['path']}",
           f"format:   OINF v{h['version']}, {h['file_size']} bytes",
           f"sections: sizevars @{h['offset_sizevars']}, metadata @{h['offset_metadata']}, "
           f"tensors @{h['offset_tensors']}, data @{h['offset_data']}",
           "", f"sizevars ({len(s['sizevars'])})"]
    out += _table(["NAME", "VALUE"], [[k, str(v)] for k, v in s["sizevars"].items()])
    out += ["", f"metadata ({len(s['metadata'])})"]
    out += _table(["KEY", "TYPE", "VALUE"],
                  [[k, m["type"] if "dtype" not in m else f"{m['dtype']}{m['shape']}", _short(m["value"])]
                   for k, m in s["metadata"].items()])
    out += ["", f"tensors ({len(s['tensors'])})"]
    rows = [[t["name"], t["dtype"], str(t["shape"]), str(t["data_offset"]) if t["has_data"] else "-",
             str(t["data_nbytes"]) if t["has_data"] else "(no data)", _quant_text(t["quant"])] for t in s["tensors"]]
    out += _table(["NAME", "DTYPE", "SHAPE", "OFFSET", "NBYTES", "QUANT"], rows)
    return "\n".join(out) + "\n"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["  (none)"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _quant_text(q: dict[str, Any] | None) -> str:
    if q is None:
        return "-"
    scale = "per-tensor" if q["scale_mode"] == "per_tensor" else f"per-channel(axis {q['scale_axis']})"
    zp = "" if q["zp_mode"] == "none" else f", zero point {q['zp_mode'].replace('_', '-')}"
    return f"{q['scheme']} {scale}{zp}"


def _quant_dict(q: QuantParams) -> dict[str, Any]:
    return {"scheme": q.scheme, "scale_mode": q.scale_mode, "zp_mode": q.zp_mode, "scale_axis": q.scale_axis,
            "scales": _jsonable(q.scales), "zp_axis": q.zp_axis, "zero_points": _jsonable(q.zero_points)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Bitset):
        return {"bit_count": value.bit_count, "bytes": value.bytes.hex()}
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
