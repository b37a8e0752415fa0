"""The conformance oracle of pad and resize, written from ONNX's Pad-18 and Resize-19 definitions
element by element (not from openinfer/ops/resample.py, which the kernels share)."""

from __future__ import annotations

from .oracle import Arr, Ctx, build, store


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


RESAMPLE = {"pad": _pad}
