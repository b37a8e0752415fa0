"""NonMaxSuppression: the registry op non_max_suppression, whose output has a row for every box it
could select and the count selected in its last row, and the rows selected as a value of that
many rows: the count read as a scalar bounds a `cache.read` of a flag table, which sets a dynamic
size (docs/dsl.md, "A read may set a dynamic size") that the selected rows, sliced from the op's
output, have as their first dim. Everything after the node runs at the number selected.

Dynamic sizes are at least 1: a step that selects no box fails (OI_ERR_SIZE_OUT_OF_RANGE naming
the read), where onnxruntime returns [0, 3]. A node whose boxes and scores are constants is
folded, zero rows included; max_output_boxes_per_class 0 (or absent) selects nothing ever and is
refused unless folded.
"""

from __future__ import annotations

import numpy as np

from ...dims import Poly, SizeVar
from ...ops.shapes import nms_capacity
from ..context import Dim, NodeContext, Value, handler, quoted, sanitize
from .layout import folded_by_reference


def _scalar(c: NodeContext, v, what: str, default):
    """A scalar input (a 0-d or one-element constant), `default` when absent."""
    if v is None:
        return default
    value = c.const_input(v, what).reshape(-1)
    if value.size != 1:
        c.fail(f"{what} has {value.size} elements; a scalar is expected")
    return value[0].item()


@handler("NonMaxSuppression", note="non_max_suppression(max_output, iou_threshold, score_threshold, "
                                   "center_point_box), then the selected rows at their run-time count (a dynamic "
                                   "size set by a cache read); float32 boxes and scores; max_output_boxes_per_class, "
                                   "iou_threshold and score_threshold constant; a step selecting no box is an error "
                                   "(dynamic sizes are >= 1); folded on constants")
def _nms(c: NodeContext) -> None:
    c.allow("center_point_box")
    boxes, scores, max_in, iou_in, score_in = c.inputs(2, 5)
    (out,) = c.outputs()
    if boxes.dtype != "f32" or scores.dtype != "f32":
        c.fail(f"boxes {boxes.dtype} and scores {scores.dtype}: float32 only (as ONNX)")
    max_output = max(int(_scalar(c, max_in, "max_output_boxes_per_class", 0)), 0)   # negative: 0, as onnxruntime
    iou = float(np.float32(_scalar(c, iou_in, "iou_threshold", 0.0)))
    if not 0.0 <= iou <= 1.0:
        c.fail(f"iou_threshold {iou} is outside 0..1")
    score = _scalar(c, score_in, "score_threshold", None)
    center = int(c.attrs.get("center_point_box", 0))
    if center not in (0, 1):
        c.fail(f"center_point_box {center}: 0 or 1")
    if len(boxes.dims) != 3 or boxes.shape[2] != 4 or len(scores.dims) != 3 or \
            scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        c.fail(f"boxes {list(boxes.shape)} and scores {list(scores.shape)}: boxes are [B, N, 4] and scores "
               "[B, C, N]")
    batches, n, classes = boxes.shape[0], boxes.shape[1], scores.shape[1]
    settings = {"max_output": max_output, "iou_threshold": iou,
                "score_threshold": None if score is None else float(np.float32(score)),
                "center_point_box": center or None}
    if boxes.const is not None and scores.const is not None:
        if max_output == 0 or n == 0:
            c.folded(out, np.zeros((0, 3), np.int64))
            return
        rows = folded_by_reference(c, "non_max_suppression", [boxes, scores], settings)
        c.folded(out, rows[:int(rows[-1, 0])])
        return
    if max_output == 0 or n == 0:
        c.fail("max_output_boxes_per_class is 0 (or absent) or there are no boxes: the output is always empty, "
               "and a variable of the graph has at least one row")
    imp = c.imp
    for d in (*boxes.dims, *scores.dims):        # the capacity is computed at these sizes
        for sv in d.sizevars:
            imp.fixed.setdefault(sv, imp.dsl_name(out))
    capacity = nms_capacity(batches, classes, n, max_output)
    base = sanitize(out)
    rows = c.emit("non_max_suppression", [c.var(boxes, 0), c.var(scores, 1)], settings, "i64",
                  (Dim(capacity + 1), Dim(3)), temp=f"{base}_capacity")
    cell = c.emit("slice", [rows.var], {"starts": [capacity, 0], "ends": [capacity + 1, 1]}, "i64",
                  (Dim(1), Dim(1)), temp=f"{base}_count_cell")
    count = c.emit("reshape", [cell.var], {}, "i64", (), temp=f"{base}_count")
    size, flags, seen = imp.fresh(f"{base}_rows"), imp.fresh(f"{base}_flags"), imp.fresh(f"{base}_flags_read")
    imp.run_time_sizes[size] = capacity
    imp.decls["persistent"].append((f"{flags}(r): bool @table @fixed(r={capacity});",
                                    f"{c.label}: read to set {size}, the rows selected (never written)"))
    imp.declare("volatile", seen, "bool", (Dim(capacity, Poly.atom(SizeVar(size, capacity))),), None)
    imp.lines.append((f"cache.read {flags}[0..{count.var}] >> {seen};", f"{c.label}: sets {size} = the rows selected"))
    selected = Dim(capacity, Poly.atom(SizeVar(size, capacity)))
    var = imp.dsl_name(out)
    imp.declare("volatile", var, "i64", (selected, Dim(3)), out)
    imp.lines.append((f"op slice({rows.var}, starts=[0, 0], ends=[{size}, 3]) >> {var};",
                      f"{c.label} (NonMaxSuppression): the rows selected, {quoted(out)}"))
    c.result(out, Value("i64", (selected, Dim(3)), var=var))
