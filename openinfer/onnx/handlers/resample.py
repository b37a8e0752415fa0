"""ONNX Pad, Resize and Upsample: `pad` (constant, reflect, edge; negative pads of constant mode a
slice), and `resize` (nearest, linear) to output sizes known at import. Folded on constants."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..context import FLOATS, Dim, NodeContext, Value, dim_sum, handler
from .layout import folded_by_reference


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
        padded = folded_by_reference(c, "pad", [x], settings)
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


@handler("Resize", "Upsample",
         note="resize(sizes, scales, mode, coordinate_transformation_mode, nearest_mode): modes nearest and linear "
              "(linear on float data), every coordinate mode but tf_crop_and_resize; sizes or scales constant "
              "(scales kept exact); cubic, antialias and keep_aspect_ratio_policy other than stretch refused; "
              "folded on constants")
def _resize(c: NodeContext) -> None:
    c.allow("mode", "scales", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
            "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy")
    upsample = c.node.op_type == "Upsample"
    if upsample or c.opset < 11:
        x, scales_in = c.inputs(1, 2)
        sizes_in = None
    else:
        x, _roi, scales_in, sizes_in = c.inputs(1, 4)
    (out,) = c.outputs()
    rank = len(x.dims)
    mode = _text(c.attrs.get("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        c.fail(f"mode {mode!r} is not supported (nearest and linear are)")
    if mode == "linear" and x.dtype not in FLOATS:
        c.fail(f"mode linear on {x.dtype} data (linear interpolates float data)")
    if int(c.attrs.get("antialias", 0)):
        c.fail("antialias=1 is not supported")
    policy = _text(c.attrs.get("keep_aspect_ratio_policy", "stretch"))
    if policy != "stretch":
        c.fail(f"keep_aspect_ratio_policy {policy!r} is not supported (stretch is)")
    legacy = upsample or c.opset < 11
    if legacy:      # no such attributes yet; onnxruntime's reading: positions o / scale, rounded per axis
        transform, rounding = "asymmetric", "floor"
    else:
        transform = _text(c.attrs.get("coordinate_transformation_mode", "half_pixel"))
        rounding = _text(c.attrs.get("nearest_mode", "round_prefer_floor"))
    if transform not in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric", "align_corners"):
        c.fail(f"coordinate_transformation_mode {transform!r} is not supported")
    axes = c.axes(None, rank) or list(range(rank))
    sizes = list(x.shape)
    scales: list[int] | None = None
    given_sizes = c.const_input(sizes_in, "the sizes input") if sizes_in is not None else None
    if given_sizes is not None and given_sizes.size:
        if len(given_sizes) != len(axes):
            c.fail(f"sizes {given_sizes.tolist()} for {len(axes)} axes")
        for a, s in zip(axes, given_sizes.tolist(), strict=True):
            sizes[a] = int(s)
    else:
        raw = c.const_input(scales_in, "the scales input") if scales_in is not None else c.attrs.get("scales")
        raw = [] if raw is None else np.asarray(raw, dtype=np.float32).reshape(-1).tolist()
        if len(raw) != len(axes):
            c.fail(f"scales {raw} for {len(axes)} axes (sizes or scales must be given)")
        if any(not s > 0 for s in raw):
            c.fail(f"scales {raw} must be positive")
        ratios = [Fraction(1)] * rank
        for a, s in zip(axes, raw, strict=True):
            ratios[a] = Fraction(s)                    # the float32 scale, exactly
            sizes[a] = int(math.floor(np.float32(x.shape[a]) * np.float32(s)))   # in f32, as onnxruntime
        if any(r != Fraction(m, n) for r, m, n in zip(ratios, sizes, x.shape, strict=True) if n):
            scales = [v for r in ratios for v in (r.numerator, r.denominator)]
    if legacy and any(m < n for m, n in zip(sizes, x.shape, strict=True)):
        # onnxruntime rounds the positions of a shrunk axis up and of a grown axis down
        if any(m > n for m, n in zip(sizes, x.shape, strict=True)):
            c.fail(f"scales that both up and down sample ({list(x.shape)} -> {sizes}) are not supported "
                   "before opset 11 (their axes round positions differently)")
        rounding = "ceil"
    if any(s < 1 for s, n in zip(sizes, x.shape, strict=True) if n):
        c.fail(f"output sizes {sizes}: every axis needs at least one element")
    settings = {"sizes": sizes, "scales": scales, "mode": mode, "coordinate_transformation_mode": transform,
                "nearest_mode": rounding}
    dims = tuple(d if m == d.size and (scales is None or scales[2 * a] == scales[2 * a + 1]) else Dim(m)
                 for a, (d, m) in enumerate(zip(x.dims, sizes, strict=True)))
    if x.const is not None:
        c.folded(out, folded_by_reference(c, "resize", [x], settings), dims)
        return
    quoted = {k: f'"{v}"' if isinstance(v, str) else v for k, v in settings.items()}
    c.emit("resize", [c.var(x, 0)], quoted, x.dtype, dims, out=out)
