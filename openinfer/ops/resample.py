"""Where pad's borders and resize's outputs read their input, per axis: the one statement of those
ops' coordinate rules, which the reference kernels and every target's kernels follow (the
conformance oracle in tests/conformance/resample_oracle.py restates them independently)."""

from __future__ import annotations

import math


def pad_source(mode: str, j: int, n: int) -> int:
    """The index along an axis of size n that position j of the padded axis, in x's coordinates
    (j < 0 or j >= n on the border), reads in mode reflect or edge. The shape rule keeps
    reflect's pads below n, so one mirror is enough."""
    if mode == "edge":
        return min(max(j, 0), n - 1)
    return -j if j < 0 else 2 * (n - 1) - j if j >= n else j


def resize_coordinate(transform: str, o: int, n_in: int, n_out: int, scale: float, length: float) -> float:
    """Output index o's position in the input by ONNX Resize's coordinate_transformation_mode, in
    f64: `scale` and `length` are the axis's scale and resized length (out / in and out, unless
    ONNX's `scales` gave a scale whose in * scale is not the whole number out)."""
    if transform == "align_corners":
        return 0.0 if length == 1 else o * (n_in - 1) / (length - 1)
    if transform == "asymmetric":
        return o / scale
    if transform == "pytorch_half_pixel" and length == 1:
        return 0.0
    if transform == "half_pixel_symmetric":      # centred: shifted by what flooring out = in * scale cut
        return n_in / 2 * (1 - n_out / length) + (o + 0.5) / scale - 0.5
    return (o + 0.5) / scale - 0.5               # half_pixel, pytorch_half_pixel


def nearest_index(rounding: str, x: float, n_in: int) -> int:
    """The input index nearest to position x by ONNX's nearest_mode, kept inside [0, n_in)."""
    lo = math.floor(x)
    frac = x - lo
    up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
          "floor": False, "ceil": frac > 0}[rounding]
    return min(max(lo + up, 0), n_in - 1)


def linear_taps(x: float, n_in: int) -> tuple[int, int, float]:
    """(i0, i1, w): position x interpolated as (1 - w) * v[i0] + w * v[i1], the neighbours kept
    inside [0, n_in) as ONNX's edge padding keeps them."""
    lo = math.floor(x)
    return min(max(lo, 0), n_in - 1), min(max(lo + 1, 0), n_in - 1), x - lo


def resize_axis(attrs, axis: int, n_in: int, n_out: int) -> list[tuple[int, int, float]]:
    """(i0, i1, w) for every output index of one axis of a resize with completed `attrs`: nearest
    reads i0 alone (w = 0)."""
    scales = attrs.get("scales")
    if scales:
        scale, length = scales[2 * axis] / scales[2 * axis + 1], scales[2 * axis] * n_in / scales[2 * axis + 1]
    else:
        scale, length = n_out / max(n_in, 1), float(n_out)
    transform = attrs["coordinate_transformation_mode"]
    xs = [resize_coordinate(transform, o, n_in, n_out, scale, length) for o in range(n_out)]
    if attrs["mode"] == "nearest":
        return [(i, i, 0.0) for i in (nearest_index(attrs["nearest_mode"], x, n_in) for x in xs)]
    return [linear_taps(x, n_in) for x in xs]
