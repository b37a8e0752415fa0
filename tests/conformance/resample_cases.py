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


RESAMPLE_BUILDERS: dict[str, Builder] = {"pad": _pad}
