"""The conformance oracle of pad and resize, written from ONNX's Pad-18 and Resize-19 definitions
element by element (not from openinfer/ops/resample.py, which the kernels share)."""

from __future__ import annotations

import itertools
import math

from .oracle import Arr, Ctx, build, fsum, store


def _pad(xs: list[Arr], c: Ctx) -> Arr:
    x, pads = xs[0], c.attrs["pads"]
    mode = c.attr("mode", "constant")
    border = store(c.attr("value", 0), c.t)
    shape = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x.shape))

    def inside(j: int, n: int) -> int:
        """reflect: mirror about x's first / last element (which is not repeated); edge: the
        nearest element."""
        while not 0 <= j < n:
            if mode == "edge":
                j = 0 if j < 0 else n - 1
            else:
                j = -j if j < 0 else 2 * (n - 1) - j
        return j

    def at(o):
        src = tuple(j - pads[2 * i] for i, j in enumerate(o))
        if mode != "constant":
            return x[tuple(inside(j, d) for j, d in zip(src, x.shape, strict=True))]
        return x[src] if all(0 <= j < d for j, d in zip(src, x.shape, strict=True)) else border
    return build(shape, at)


def _resize(xs: list[Arr], c: Ctx) -> Arr:
    """Resize-19's formulas per axis (x_original from x_resized), then nearest's rounding or the
    product of the linear weights over every axis that has a fractional position."""
    x, sizes = xs[0], c.attrs["sizes"]
    mode = c.attr("mode", "nearest")
    ctm = c.attr("coordinate_transformation_mode", "half_pixel")
    rounding = c.attr("nearest_mode", "round_prefer_floor")
    scales = c.attr("scales", None)

    def original(axis: int, o: int) -> float:
        n, m = x.shape[axis], sizes[axis]
        s = scales[2 * axis] / scales[2 * axis + 1] if scales else m / n
        length = n * s if scales else m             # length_resized: a fraction where scales give one
        if ctm == "align_corners":
            return o * (n - 1) / (length - 1) if length != 1 else 0.0
        if ctm == "asymmetric":
            return o / s
        if ctm == "pytorch_half_pixel":
            return (o + 0.5) / s - 0.5 if length != 1 else 0.0
        if ctm == "half_pixel_symmetric":
            adjustment = m / length
            return n / 2 * (1 - adjustment) + (o + 0.5) / s - 0.5
        return (o + 0.5) / s - 0.5

    def clip(i: int, n: int) -> int:
        return 0 if i < 0 else n - 1 if i > n - 1 else i

    pos = [[original(a, o) for o in range(m)] for a, m in enumerate(sizes)]
    if mode == "nearest":
        def pick(p: float) -> int:
            f = math.floor(p)
            if rounding == "floor" or p == f:
                return f
            if rounding == "ceil":
                return f + 1
            half = p - f
            return f + 1 if half > 0.5 or (half == 0.5 and rounding == "round_prefer_ceil") else f
        return build(tuple(sizes), lambda o: x[tuple(clip(pick(pos[a][j]), x.shape[a]) for a, j in enumerate(o))])
    fractional = [any(p != math.floor(p) for p in ps) for ps in pos]

    def at(o):
        corners = [[(clip(math.floor(pos[a][j]), x.shape[a]), 1.0)] if not fractional[a] else
                   [(clip(math.floor(pos[a][j]), x.shape[a]), 1 - (pos[a][j] - math.floor(pos[a][j]))),
                    (clip(math.floor(pos[a][j]) + 1, x.shape[a]), pos[a][j] - math.floor(pos[a][j]))]
                   for a, j in enumerate(o)]
        terms = []
        for combo in itertools.product(*corners):
            weight = math.prod(w for _, w in combo)
            terms.append(weight * x[tuple(i for i, _ in combo)])
        return store(fsum(terms), c.t)
    return build(tuple(sizes), at)


RESAMPLE = {"pad": _pad, "resize": _resize}
