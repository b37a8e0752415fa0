"""Conformance cases of non_max_suppression (kept apart from cases.py for its size; cases.py looks
builders up here)."""

from __future__ import annotations

import numpy as np

from openinfer.dtypes import DTypeInfo
from openinfer.ops import OpSpec

from .cases import Builder, Variant


def _corners(rng, b: int, n: int, grid: bool) -> np.ndarray:
    """[b, n, 4] boxes [y1, x1, y2, x2] that overlap: on a small integer grid (exact IoUs, equal
    boxes), or anywhere in [0, 4); each box's corners in either order."""
    lo = rng.integers(0, 5, (b, n, 2)) if grid else rng.random((b, n, 2)) * 3
    size = rng.integers(1, 4, (b, n, 2)) if grid else rng.random((b, n, 2)) + 0.25
    boxes = np.concatenate([lo, lo + size], axis=-1)
    flip = rng.random((b, n)) < 0.4
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def _centers(rng, b: int, n: int) -> np.ndarray:
    """[b, n, 4] boxes [x_center, y_center, width, height], some of zero width."""
    boxes = np.concatenate([rng.random((b, n, 2)) * 4, rng.integers(0, 5, (b, n, 2)) / 2], axis=-1)
    return boxes.astype(np.float32)


def _nms(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """B = 2, C = 3, N prime (7, 31): overlapping boxes, corners in either order and centre boxes,
    tied scores (lower box first), thresholds that select some boxes but not all, max_output
    below and above N, IoU thresholds 0 and 1, a class none of whose scores passes, NaN and
    infinite scores, zero-area boxes."""
    def scores(n: int, ties: bool) -> np.ndarray:
        s = rng.integers(-2, 3, (2, 3, n)) / 2 if ties else rng.normal(0.0, 1.0, (2, 3, n))
        return s.astype(np.float32)

    grid7, free31, centers31 = _corners(rng, 2, 7, True), _corners(rng, 2, 31, False), _centers(rng, 2, 31)
    special = scores(7, False)
    special[0, 0, [1, 4]] = np.nan
    special[0, 1, [0, 5]] = [np.inf, -np.inf]
    special[1, 2, :] = -3.0                               # below the threshold: nothing of this class
    degenerate = grid7.copy()
    degenerate[:, ::3, 2] = degenerate[:, ::3, 0]         # zero height: IoU 0 with every box
    return [Variant("grid_ties", [(t, grid7), (t, scores(7, True))], {"max_output": 3, "iou_threshold": 0.5,
                                                                       "score_threshold": 0.0}),
            Variant("grid_every", [(t, grid7), (t, scores(7, True))], {"max_output": 9, "iou_threshold": 0.25}),
            Variant("free", [(t, free31), (t, scores(31, False))], {"max_output": 5, "iou_threshold": 0.3,
                                                                     "score_threshold": -0.5}),
            Variant("free_iou0", [(t, free31), (t, scores(31, False))], {"max_output": 31}),
            Variant("free_iou1", [(t, free31), (t, scores(31, True))], {"max_output": 4, "iou_threshold": 1.0}),
            Variant("centers", [(t, centers31), (t, scores(31, True))], {"max_output": 6, "iou_threshold": 0.4,
                                                                          "center_point_box": 1}),
            Variant("centers_threshold", [(t, centers31), (t, scores(31, False))],
                    {"max_output": 40, "iou_threshold": 0.6, "score_threshold": 0.25, "center_point_box": 1}),
            Variant("special_scores", [(t, grid7), (t, special)], {"max_output": 7, "iou_threshold": 0.5}),
            Variant("special_threshold", [(t, grid7), (t, special)], {"max_output": 7, "iou_threshold": 0.5,
                                                                       "score_threshold": -1.0}),
            Variant("zero_area", [(t, degenerate), (t, scores(7, True))], {"max_output": 7, "iou_threshold": 0.1})]


DETECTION_BUILDERS: dict[str, Builder] = {"non_max_suppression": _nms}
