"""Detection in GLSL: non_max_suppression as the C kernel computes it
(templates/c/ops/non_max_suppression.c.j2): one invocation runs every batch and class in turn, as
the output's rows are numbered across them; the candidates are visited in rank order by a scan per
turn and checked against the boxes already selected for the class (read back from the output).
The IoU arithmetic is `precise`, so the compiler contracts none of it into an fma the reference
does not compute."""

from __future__ import annotations

from ....synth.program import KernelRequest
from .registry import Body, family
from .types import KernelCtx, lit


def _before(i: str, si: str, j: str, sj: str) -> str:
    """Candidate i (score si) ranks before candidate j (sj): the greater score first, equal scores
    the lower box first, NaN after every number (several in box order)."""
    return (f"(oi_isnan({sj}) ? (!oi_isnan({si}) || {i} < {j}) : "
            f"(!oi_isnan({si}) && ({si} > {sj} || ({si} == {sj} && {i} < {j}))))")


def _edges(p: str, k: str, center: bool) -> list[str]:
    """x0, x1, y0, y1 of box `k` of this batch as `p`x0 ...: onnxruntime's corners (min/max) or
    centre +- half the size."""
    at = f"boxes_at + ({k}) * 4u"
    b = [f"in0[{at} + {c}u]" for c in range(4)]
    if center:
        return [f"precise float {p}hw = {b[2]} / 2.0, {p}hh = {b[3]} / 2.0;",
                f"precise float {p}x0 = {b[0]} - {p}hw, {p}x1 = {b[0]} + {p}hw;",
                f"precise float {p}y0 = {b[1]} - {p}hh, {p}y1 = {b[1]} + {p}hh;"]
    return [f"float {p}c0 = {b[0]}, {p}c1 = {b[1]}, {p}c2 = {b[2]}, {p}c3 = {b[3]};",
            f"float {p}x0 = {p}c1 >= {p}c3 ? {p}c3 : {p}c1, {p}x1 = {p}c1 >= {p}c3 ? {p}c1 : {p}c3;",
            f"float {p}y0 = {p}c0 >= {p}c2 ? {p}c2 : {p}c0, {p}y1 = {p}c0 >= {p}c2 ? {p}c0 : {p}c2;"]


@family("non_max_suppression")
def emit_nms(req: KernelRequest, k: KernelCtx) -> Body:
    boxes, scores = req.inputs
    batches, n, _ = boxes.shape
    classes = scores.shape[1]
    max_output, center = k.static("max_output"), bool(k.static("center_point_box"))
    score_threshold, iou_threshold = k.static("score_threshold"), k.static("iou_threshold")
    rows = req.output.shape[0] - 1
    score = k.load(scores.dtype, "in1", "scores_at + uint(i)")
    keep_test = [
        *("        " + s for s in _edges("a", "uint(out_[r * 3u + 2u])", center)),
        *("        " + s for s in _edges("e", "uint(j)", center)),
        "        float ix0 = ax0 < ex0 ? ex0 : ax0, ix1 = ex1 < ax1 ? ex1 : ax1;",
        "        if (ix1 <= ix0) continue;",
        "        float iy0 = ay0 < ey0 ? ey0 : ay0, iy1 = ey1 < ay1 ? ey1 : ay1;",
        "        if (iy1 <= iy0) continue;",
        "        precise float iw = ix1 - ix0, ih = iy1 - iy0;",
        "        precise float inter = iw * ih;",
        "        if (inter <= 0.0) continue;",
        "        precise float aw = ax1 - ax0, ah = ay1 - ay0;",
        "        precise float area_a = aw * ah;",
        "        precise float ew = ex1 - ex0, eh = ey1 - ey0;",
        "        precise float area_e = ew * eh;",
        "        precise float both = area_a + area_e;",
        "        precise float uni = both - inter;",
        "        if (area_a <= 0.0 || area_e <= 0.0 || uni <= 0.0) continue;",
        "        precise float iou = inter / uni;",
        f"        if (iou > {lit('float', iou_threshold)}) {{ keep = false; break; }}"]
    lines = [
        "uint count = 0u;",
        f"for (uint b = 0u; b < {batches}u; ++b) {{",
        f"for (uint c = 0u; c < {classes}u; ++c) {{",
        f"uint boxes_at = b * {n * 4}u, scores_at = (b * {classes}u + c) * {n}u, first = count;",
        "int last = -1;                 // the candidate visited last (-1: none yet)",
        "float s_last = 0.0;",
        f"for (uint turn = 0u; turn < {n}u && count - first < {max_output}u; ++turn) {{",
        "    int j = -1;",
        "    float s_j = 0.0;",
        f"    for (int i = 0; i < {n}; ++i) {{",
        f"        float s_i = {score};",
        *([f"        if (!(s_i > {lit('float', score_threshold)})) continue;"] if score_threshold is not None else []),
        f"        if (last >= 0 && !{_before('last', 's_last', 'i', 's_i')}) continue;",
        f"        if (j < 0 || {_before('i', 's_i', 'j', 's_j')}) {{ j = i; s_j = s_i; }}",
        "    }",
        "    if (j < 0) break;",
        "    last = j;",
        "    s_last = s_j;",
        "    bool keep = true;",
        "    for (uint r = first; r < count; ++r) {",
        *keep_test,
        "    }",
        "    if (keep) {",
        "        out_[count * 3u] = int64_t(b);",
        "        out_[count * 3u + 1u] = int64_t(c);",
        "        out_[count * 3u + 2u] = int64_t(j);",
        "        ++count;",
        "    }",
        "}",
        "}",
        "}",
        f"for (uint r = count; r < {rows}u; ++r) {{",
        "    out_[r * 3u] = int64_t(-1); out_[r * 3u + 1u] = int64_t(-1); out_[r * 3u + 2u] = int64_t(-1);",
        "}",
        f"out_[{rows * 3}u] = int64_t(count); out_[{rows * 3 + 1}u] = int64_t(count); "
        f"out_[{rows * 3 + 2}u] = int64_t(count);"]
    doc = (f"non_max_suppression of {n} boxes ({'centre and size' if center else 'corners'}), {batches} batch(es) "
           f"x {classes} class(es): at most {max_output} a class, IoU > {iou_threshold} suppresses"
           + (f", scores > {score_threshold} only" if score_threshold is not None else "")
           + "; one invocation")
    return Body(main="\n".join(lines), units=1, doc=doc)
