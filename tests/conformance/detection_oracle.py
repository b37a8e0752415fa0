"""The conformance oracle of non_max_suppression: onnxruntime's loop written out (the candidates
sorted once, each checked against the boxes selected before it for its class, its IoU in f32 with
onnxruntime's early returns), in Python floats rounded to f32 after every operation."""

from __future__ import annotations

from .oracle import Arr, Ctx, r32


def _edges(box: list[float], center: bool) -> tuple[float, float, float, float]:
    """x_min, x_max, y_min, y_max."""
    if center:
        hw, hh = r32(box[2] / 2), r32(box[3] / 2)
        return r32(box[0] - hw), r32(box[0] + hw), r32(box[1] - hh), r32(box[1] + hh)
    x = (box[3], box[1]) if box[1] >= box[3] else (box[1], box[3])
    y = (box[2], box[0]) if box[0] >= box[2] else (box[0], box[2])
    return (*x, *y)


def _suppresses(kept: list[float], cand: list[float], center: bool, threshold: float) -> bool:
    ax0, ax1, ay0, ay1 = _edges(kept, center)
    bx0, bx1, by0, by1 = _edges(cand, center)
    ix0, ix1 = (bx0 if ax0 < bx0 else ax0), (bx1 if bx1 < ax1 else ax1)
    if ix1 <= ix0:
        return False
    iy0, iy1 = (by0 if ay0 < by0 else ay0), (by1 if by1 < ay1 else ay1)
    if iy1 <= iy0:
        return False
    inter = r32(r32(ix1 - ix0) * r32(iy1 - iy0))
    if inter <= 0:
        return False
    area_a = r32(r32(ax1 - ax0) * r32(ay1 - ay0))
    area_b = r32(r32(bx1 - bx0) * r32(by1 - by0))
    union = r32(r32(area_a + area_b) - inter)
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return r32(inter / union) > threshold


def _nms(xs: list[Arr], c: Ctx) -> Arr:
    boxes, scores = xs
    nb, nc, n = scores.shape
    per_class, center = c.attrs["max_output"], bool(c.attr("center_point_box", 0))
    threshold, floor = r32(c.attr("iou_threshold", 0.0)), c.attrs.get("score_threshold")
    rows = []
    for b in range(nb):
        for k in range(nc):
            s = [scores[b, k, i] for i in range(n)]
            candidates = [i for i in range(n) if floor is None or s[i] > r32(floor)]
            candidates.sort(key=lambda i, s=s: (s[i] != s[i], 0.0 if s[i] != s[i] else -s[i], i))
            kept: list[int] = []
            for i in candidates:
                box = [boxes[b, i, j] for j in range(4)]
                if any(_suppresses([boxes[b, m, j] for j in range(4)], box, center, threshold) for m in kept):
                    continue
                if len(kept) == per_class:
                    break
                kept.append(i)
                rows.append((b, k, i))
    capacity = c.out_shape[0] - 1
    flat = [v for r in rows for v in r] + [-1] * 3 * (capacity - len(rows)) + [len(rows)] * 3
    return Arr(c.out_shape, flat)


DETECTION = {"non_max_suppression": _nms}
