"""Detection: non_max_suppression (ONNX NonMaxSuppression, as onnxruntime computes it).

Per batch and class the candidates are ranked once (score descending, equal scores lower box
first, NaN last), then each selected box removes the later candidates it overlaps: the same
selection as onnxruntime's loop, which checks each candidate against the boxes selected before
it, with each IoU computed as there (f32, the same operations in the same order, its early
returns written as negated comparisons so that a NaN takes the same branch).
"""

from __future__ import annotations

import numpy as np

from ...ops.registry import Inference

Arrays = list[np.ndarray]


def _extent(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of two coordinates as onnxruntime's MaxMin: a >= b gives (b, a), else (a, b)."""
    ge = a >= b
    return np.where(ge, b, a), np.where(ge, a, b)


def _edges(box: np.ndarray, center: bool) -> tuple[np.ndarray, ...]:
    """x_min, x_max, y_min, y_max of boxes [..., 4] in f32."""
    if center:
        half_w, half_h = box[..., 2] / np.float32(2), box[..., 3] / np.float32(2)
        return box[..., 0] - half_w, box[..., 0] + half_w, box[..., 1] - half_h, box[..., 1] + half_h
    return (*_extent(box[..., 1], box[..., 3]), *_extent(box[..., 0], box[..., 2]))


def suppresses(kept: np.ndarray, others: np.ndarray, center: bool, iou_threshold: np.float32) -> np.ndarray:
    """Whether the selected box `kept` [4] suppresses each of `others` [M, 4]: their IoU is
    greater than the threshold (an empty intersection, a box of zero area or a zero union: no)."""
    x1a, x1b, y1a, y1b = _edges(kept, center)
    x2a, x2b, y2a, y2b = _edges(others, center)
    # std::max(a, b) is a < b ? b : a, std::min(a, b) is b < a ? b : a
    ix_min, ix_max = np.where(x1a < x2a, x2a, x1a), np.where(x2b < x1b, x2b, x1b)
    iy_min, iy_max = np.where(y1a < y2a, y2a, y1a), np.where(y2b < y1b, y2b, y1b)
    inter = (ix_max - ix_min) * (iy_max - iy_min)
    area1 = (x1b - x1a) * (y1b - y1a)
    area2 = (x2b - x2a) * (y2b - y2a)
    union = area1 + area2 - inter
    iou = inter / union
    return (~(ix_max <= ix_min) & ~(iy_max <= iy_min) & ~(inter <= 0) & ~(area1 <= 0) & ~(area2 <= 0)
            & ~(union <= 0) & (iou > iou_threshold))


def non_max_suppression(xs: Arrays, inf: Inference) -> np.ndarray:
    boxes, scores = (x.astype(np.float32, copy=False) for x in xs)
    a = inf.attrs
    center, per_class = bool(a["center_point_box"]), a["max_output"]
    threshold = np.float32(a["iou_threshold"])
    out = np.full(inf.out_shape, -1, np.int64)
    count = 0
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            nan = np.isnan(s)
            order = np.lexsort((np.arange(s.size), -np.where(nan, 0, s), nan))
            if a["score_threshold"] is not None:
                order = order[s[order] > np.float32(a["score_threshold"])]
            selected = 0
            while order.size and selected < per_class:
                box, order = order[0], order[1:]
                out[count] = (b, c, box)
                count, selected = count + 1, selected + 1
                order = order[~suppresses(boxes[b, box], boxes[b, order], center, threshold)]
    out[-1] = count
    return out


KERNELS = {"non_max_suppression": non_max_suppression}
