"""Conformance cases of the ops that move elements by per-axis coordinate rules: pad and resize
(kept apart from cases.py for its size; cases.py looks builders up here)."""

from __future__ import annotations

from openinfer.dtypes import DTypeInfo, Kind
from openinfer.ops import OpSpec

from .cases import Builder, Variant, values


def _pad(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """constant: borders on every axis of a 3-d x (odd sizes, one side only, the innermost axis
    padded so rows are not contiguous runs), the default value 0 and T's extremes, a 1-d x and no
    padding. reflect and edge: every rank 1..4, odd and prime sizes, pads from 0 up to size - 1
    (reflect's limit), axes of size 1 (edge only: reflect cannot pad them)."""
    x = values(t, (3, 5, 7), rng)
    if t.is_float:
        vals: list = [-2.5, float("inf")]
    elif t.kind is Kind.BOOL:
        vals = [True, 1]
    else:
        vals = [t.lo, t.hi]
    return [Variant("zero", [(t, x)], {"pads": [1, 0, 0, 2, 3, 1]}),
            Variant("low", [(t, x)], {"pads": [0, 1, 2, 0, 0, 0], "value": vals[0]}),
            Variant("high", [(t, x)], {"pads": [2, 2, 1, 1, 1, 3], "value": vals[1], "mode": "constant"}),
            Variant("vector", [(t, values(t, (11,), rng))], {"pads": [3, 2], "value": vals[0]}),
            Variant("none", [(t, x)], {"pads": [0] * 6}),
            Variant("reflect_1d", [(t, values(t, (7,), rng))], {"pads": [6, 5], "mode": "reflect"}),
            Variant("reflect_2d", [(t, values(t, (5, 3), rng))], {"pads": [4, 0, 2, 1], "mode": "reflect"}),
            Variant("reflect_3d", [(t, x)], {"pads": [2, 1, 0, 4, 6, 5], "mode": "reflect"}),
            Variant("reflect_4d", [(t, values(t, (2, 3, 2, 5), rng))], {"pads": [1, 1, 2, 0, 0, 1, 4, 3],
                                                                           "mode": "reflect"}),
            Variant("edge_1d", [(t, values(t, (13,), rng))], {"pads": [0, 12], "mode": "edge"}),
            Variant("edge_2d", [(t, values(t, (1, 3), rng))], {"pads": [2, 3, 4, 0], "mode": "edge"}),
            Variant("edge_3d", [(t, x)], {"pads": [1, 2, 4, 0, 7, 9], "mode": "edge"}),
            Variant("edge_4d", [(t, values(t, (2, 1, 3, 5), rng))], {"pads": [0, 1, 2, 2, 1, 0, 3, 6],
                                                                        "mode": "edge"})]


def _resize(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """nearest (every dtype, every nearest_mode): up- and downsampling of NCHW's H and W to odd and
    prime sizes, 1-d, 3 resized axes, and `scales` other than out / in. linear (floats, finite
    values: an infinity times a zero weight is NaN): bilinear by every coordinate mode, output
    sizes of 1, 1-d and 3 axes at once (trilinear), and scales other than out / in."""
    def x(shape, edges=True):
        return [(t, values(t, shape, rng, edges=edges))]

    nearest = [
        Variant("nearest_up", x((1, 2, 3, 5)), {"sizes": [1, 2, 7, 11]}),
        Variant("nearest_floor_asymmetric", x((2, 1, 3, 5)), {"sizes": [2, 1, 6, 10], "nearest_mode": "floor",
                                                              "coordinate_transformation_mode": "asymmetric"}),
        Variant("nearest_down_ceil_prefer", x((2, 3, 7, 11)), {"sizes": [2, 3, 3, 5],
                                                               "nearest_mode": "round_prefer_ceil"}),
        Variant("nearest_1d_ceil_corners", x((7,)), {"sizes": [13], "nearest_mode": "ceil",
                                                    "coordinate_transformation_mode": "align_corners"}),
        Variant("nearest_3_axes", x((5, 3, 4)), {"sizes": [2, 7, 9], "mode": "nearest",
                                                 "coordinate_transformation_mode": "pytorch_half_pixel"}),
        Variant("nearest_scales", x((1, 4, 5)), {"sizes": [1, 2, 7], "scales": [1, 1, 3, 5, 3, 2],
                                                 "coordinate_transformation_mode": "half_pixel_symmetric"})]
    if not t.is_float:
        return nearest
    linear = {"mode": "linear"}
    return [Variant("bilinear", x((1, 2, 5, 7), False), {"sizes": [1, 2, 9, 4], **linear}),
            Variant("bilinear_corners", x((1, 1, 4, 6), False),
                    {"sizes": [1, 1, 7, 11], "coordinate_transformation_mode": "align_corners", **linear}),
            Variant("bilinear_pytorch_to_1", x((2, 3, 5, 2), False),
                    {"sizes": [2, 3, 3, 1], "coordinate_transformation_mode": "pytorch_half_pixel", **linear}),
            Variant("linear_1d_asymmetric", x((11,), False),
                    {"sizes": [5], "coordinate_transformation_mode": "asymmetric", **linear}),
            Variant("linear_symmetric_scales", x((1, 1, 4, 5), False),
                    {"sizes": [1, 1, 6, 6], "scales": [1, 1, 1, 1, 3, 2, 5, 4],
                     "coordinate_transformation_mode": "half_pixel_symmetric", **linear}),
            Variant("corners_scales", x((4, 5), False),
                    {"sizes": [2, 7], "scales": [3, 5, 3, 2], "coordinate_transformation_mode": "align_corners",
                     **linear}),
            Variant("trilinear", x((3, 4, 5), False), {"sizes": [5, 2, 7], **linear}),
            Variant("corners_to_1", x((3, 5), False),
                    {"sizes": [1, 8], "coordinate_transformation_mode": "align_corners", **linear}),
            *nearest]


RESAMPLE_BUILDERS: dict[str, Builder] = {"pad": _pad, "resize": _resize}
