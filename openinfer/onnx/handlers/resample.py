"""ONNX Pad, Resize and Upsample: `pad` (constant, reflect, edge; negative pads of constant mode a
slice), and `resize` (nearest, linear) to output sizes known at import. Folded on constants."""

from __future__ import annotations

from ..context import FLOATS, Dim, NodeContext, Value, dim_sum, handler
from .layout import _folded


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pad_amounts(c: NodeContext, x: Value, pads_in: Value | None, axes_in: Value | None) -> list[int]:
    """ONNX's pads ([begin of each axis..., end of each axis...], from the attribute before opset 11,
    `paddings` at opset 1, or the constant input; only `axes` given from opset 18) as [before, after]
    of every axis in order, as the registry's `pad` takes them."""
    rank = len(x.dims)
    if pads_in is not None:
        raw = [int(p) for p in c.const_input(pads_in, "the pads input").reshape(-1)]
    else:
        raw = [int(p) for p in c.attrs.get("pads", c.attrs.get("paddings", []))]
    axes = c.axes(axes_in, rank) if axes_in is not None else list(range(rank))
    if len(raw) != 2 * len(axes):
        c.fail(f"pads {raw} must hold a begin and an end for each of the {len(axes)} padded axes")
    pads = [0] * (2 * rank)
    for k, a in enumerate(axes):
        pads[2 * a], pads[2 * a + 1] = raw[k], raw[len(axes) + k]
    return pads


@handler("Pad", note="pad(pads, value, mode): constant, reflect or edge (wrap refused); pads, constant_value and "
                     "axes constant; negative pads (a crop) in constant mode as a slice; folded on constants")
def _pad(c: NodeContext) -> None:
    c.allow("mode", "pads", "paddings", "value")
    x, pads_in, value_in, axes_in = c.inputs(1, 4)
    (out,) = c.outputs()
    mode = _text(c.attrs.get("mode", "constant"))
    if mode not in ("constant", "reflect", "edge"):
        c.fail(f"mode {mode!r} is not supported (constant, reflect and edge are)")
    pads = _pad_amounts(c, x, pads_in, axes_in)
    value = c.const_input(value_in, "the constant_value input") if value_in is not None and value_in.shape != (0,) \
        else None
    if value is not None and value.size != 1:
        c.fail(f"constant_value of shape {list(value.shape)}: one value expected")
    value = value.reshape(-1)[0].item() if value is not None else float(c.attrs.get("value", 0.0))
    if x.dtype not in FLOATS:
        if value != int(value):
            c.fail(f"constant value {value} for {x.dtype} data")
        value = int(value)
    if any(p < 0 for p in pads) and mode != "constant":
        c.fail(f"negative pads {pads} (a crop) in mode {mode} are not supported (constant mode only)")
    grown = [max(p, 0) for p in pads]
    dims = tuple(dim_sum([d, Dim(grown[2 * a] + grown[2 * a + 1])]) if any(grown[2 * a:2 * a + 2]) else d
                 for a, d in enumerate(x.dims))
    crop = {a: (-min(pads[2 * a], 0), dims[a].size + min(pads[2 * a + 1], 0)) for a in range(len(x.dims))
            if min(pads[2 * a:2 * a + 2]) < 0}
    if any(s > e for s, e in crop.values()):
        c.fail(f"pads {pads} crop more than {list(x.shape)} holds")
    settings = {"pads": grown, "value": value, "mode": mode}
    cropped = tuple(Dim(crop[a][1] - crop[a][0]) if a in crop else d for a, d in enumerate(dims))
    if x.const is not None:
        padded = _folded(c, "pad", [x], settings)
        c.folded(out, padded[tuple(slice(*crop[a]) if a in crop else slice(None) for a in range(len(dims)))],
                 cropped)
        return
    if value != value:
        c.fail("a NaN constant value (the DSL has no NaN literal)")
    settings["mode"] = f'"{mode}"'
    if not crop:
        c.emit("pad", [c.var(x, 0)], settings, x.dtype, dims, out=out)
        return
    padded = c.emit("pad", [c.var(x, 0)], settings, x.dtype, dims, temp=f"{out}_padded")
    axes = sorted(crop)
    c.emit("slice", [padded.var], {"starts": [crop[a][0] for a in axes], "ends": [crop[a][1] for a in axes],
                                   "axes": axes}, x.dtype, cropped, out=out)
