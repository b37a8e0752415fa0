"""Detection in portable C: non_max_suppression (templates/c/ops/non_max_suppression.c.j2), the
selection of openinfer/reference/kernels/detection.py without workspace: the output rows hold the
boxes selected so far, and the candidates are visited in rank order by a scan per turn (O(N) a
turn: O(N^2) per batch and class at worst)."""

from __future__ import annotations

from ....synth.program import KernelRequest
from ...env import render
from .common import float_literal, load, static_attr
from .registry import family, prototype


def before(i: str, si: str, j: str, sj: str) -> str:
    """C for "candidate i (score si) ranks before candidate j (sj)": the greater score first, equal
    scores the lower box first, NaN after every number (several in box order)."""
    return (f"(isnan({sj}) ? (!isnan({si}) || {i} < {j}) : "
            f"(!isnan({si}) && ({si} > {sj} || ({si} == {sj} && {i} < {j}))))")


@family("non_max_suppression")
def emit_nms(req: KernelRequest, name: str, renderer) -> str:
    boxes, scores = req.inputs
    batches, n, _ = boxes.shape
    classes = scores.shape[1]
    max_output, center = static_attr(req, "max_output"), static_attr(req, "center_point_box")
    score_threshold = static_attr(req, "score_threshold")
    iou_threshold = static_attr(req, "iou_threshold")
    rows = req.output.shape[0] - 1
    doc = (f"non_max_suppression of {n} boxes ({'centre and size' if center else 'corners'}), {batches} batch(es) "
           f"x {classes} class(es): at most {max_output} a class, IoU > {iou_threshold} suppresses"
           + (f", scores > {score_threshold} only" if score_threshold is not None else ""))
    return render("c/ops/non_max_suppression.c.j2", proto=prototype(req, name), doc=doc, batches=batches,
                  classes=classes, n=n, max_output=max_output, center=bool(center), rows=rows,
                  load_score=load(scores.dtype, "in1", "scores_at + i"),
                  score_threshold=None if score_threshold is None else float_literal("float", score_threshold),
                  iou_threshold=float_literal("float", iou_threshold), before=before)
