"""NonMaxSuppression imported (non_max_suppression, then the selected rows at their run-time count)
and run on the reference, the generated C (x86_64-generic and the best host target) and Vulkan on
lavapipe, against onnxruntime: B = 2, C = 3, N prime, overlapping boxes, tied scores, corners in
either order and centre boxes, thresholds that select some boxes but not all; several steps per
program, each selecting a different number of rows. Also: a Gather of the selected boxes after it
(the ops after the node run at the count), constant folding, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.errors import ExecutionError, OnnxImportError  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
B, C = 2, 3


def _model(n: int, *, max_output: int | None = 3, iou: float | None = 0.5, score: float | None = None,
           center: int = 0, gather: bool = False, opset: int = 11, const_inputs: dict | None = None):
    """NonMaxSuppression of boxes [B, n, 4] and scores [B, C, n] (graph inputs, or constants from
    `const_inputs`); `gather`: the selected boxes of batch 0, Gather'ed by the rows' box column, too."""
    const_inputs = const_inputs or {}
    inits = [numpy_helper.from_array(v, k) for k, v in const_inputs.items()]
    names = ["boxes", "scores"]
    for name, value, dtype in (("max_output", max_output, np.int64), ("iou", iou, np.float32),
                               ("score", score, np.float32)):
        names.append(name if value is not None else "")
        if value is not None:
            inits.append(numpy_helper.from_array(np.array(value, dtype), name))
    while names[-1] == "":
        names.pop()
    nodes = [helper.make_node("NonMaxSuppression", names, ["selected"], center_point_box=center)]
    outputs = [helper.make_tensor_value_info("selected", I64, None)]
    if gather:
        inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in
                  (("col_start", [2]), ("col_end", [3]), ("col_axis", [1]), ("zero", [0]))]
        nodes += [helper.make_node("Slice", ["selected", "col_start", "col_end", "col_axis"], ["box_col"]),
                  helper.make_node("Squeeze", ["box_col", "col_axis"], ["box_index"]),
                  helper.make_node("Gather", ["boxes", "zero"], ["boxes0"], axis=0),
                  helper.make_node("Squeeze", ["boxes0", "zero"], ["boxes0_2d"]),
                  helper.make_node("Gather", ["boxes0_2d", "box_index"], ["picked"], axis=0)]
        outputs.append(helper.make_tensor_value_info("picked", F, None))
    inputs = [helper.make_tensor_value_info(k, F, s) for k, s in (("boxes", [B, n, 4]), ("scores", [B, C, n]))
              if k not in const_inputs]
    g = helper.make_graph(nodes, "nms", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _boxes(rng, n: int, center: int, grid: bool) -> np.ndarray:
    if center:
        return np.concatenate([rng.random((B, n, 2)) * 4, rng.integers(1, 5, (B, n, 2)) / 2], -1).astype(np.float32)
    lo = rng.integers(0, 5, (B, n, 2)) if grid else rng.random((B, n, 2)) * 3
    boxes = np.concatenate([lo, lo + (rng.integers(1, 4, (B, n, 2)) if grid else rng.random((B, n, 2)) + 0.25)], -1)
    flip = rng.random((B, n)) < 0.4
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]                 # corners in the other order
    return boxes.astype(np.float32)


def _feeds(seed: int, n: int, center: int, steps: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        ties = step % 2 == 0
        scores = rng.integers(-2, 3, (B, C, n)) / 2 if ties else rng.normal(0.0, 1.0, (B, C, n))
        out.append({"boxes": _boxes(rng, n, center, grid=ties), "scores": scores.astype(np.float32)})
    return out


def _run(model, executors, feeds: list[dict]) -> list[int]:
    """Each feed through every executor, the outputs equal onnxruntime's; the rows selected per step."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    counts = []
    for feed in feeds:
        want = session.run(None, feed)
        counts.append(len(want[0]))
        for ex in executors:
            ex.insert(**feed)
            ex.run_step()
            for name, w in zip(names, want, strict=True):
                got = ex.fetch(name)
                assert got.dtype == w.dtype and got.shape == w.shape, (type(ex).__name__, name, got.shape, w.shape)
                np.testing.assert_array_equal(got, w, err_msg=f"{type(ex).__name__}: {name}")
    return counts


CASES = [  # n, max_output, iou, score, center
    (7, 3, 0.5, 0.0, 0),
    (31, 31, 0.3, None, 0),
    (31, 40, 0.6, 0.25, 1),
    (7, 7, 0.0, None, 1),
]


@pytest.mark.parametrize("n, max_output, iou, score, center", CASES)
def test_nms_matches_onnxruntime_on_reference_and_c(n, max_output, iou, score, center, tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    model = _model(n, max_output=max_output, iou=iou, score=score, center=center)
    _, executors = imported_executors(model, tmp_path, archs=("x86_64-generic", best_host_target()))
    counts = _run(model, executors, _feeds(n + max_output, n, center))
    capacity = B * C * min(max_output, n)
    assert len(set(counts)) > 1 and all(0 < k < capacity for k in counts), counts   # some selected, not all


def test_nms_then_gather_runs_at_the_count(tmp_path, monkeypatch):
    """The selected boxes Gather'ed by the rows' box column: the ops after the node run at the count."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    model = _model(13, max_output=5, iou=0.4, score=-0.5, gather=True, opset=13)
    _, executors = imported_executors(model, tmp_path, archs=("x86_64-generic",))
    _run(model, executors, _feeds(13, 13, 0, steps=4))


def test_nms_on_lavapipe(tmp_path, monkeypatch):
    from vulkan.conftest import use_lavapipe

    lavapipe = use_lavapipe(monkeypatch, tmp_path / "vk-cache")
    model = _model(31, max_output=4, iou=0.3, score=0.0, center=0)
    model_c = _model(7, max_output=3, iou=0.5, center=1, gather=True, opset=13)
    for m, n, center, name in ((model, 31, 0, "corners"), (model_c, 7, 1, "centers")):
        imported = oi.import_onnx(m, name=name)
        graph, oinf = imported.write(tmp_path / name)
        sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=lavapipe)
        _run(m, [sim.make_executor()], _feeds(n, n, center))
        assert sim.validation_messages() == 0


def test_no_box_selected_is_an_error_of_the_step(tmp_path, monkeypatch):
    """Dynamic sizes are at least 1: a step whose scores all fail the threshold fails (onnxruntime
    returns [0, 3]); the next step runs."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    model = _model(7, score=0.5)
    _, executors = imported_executors(model, tmp_path)
    feeds = _feeds(5, 7, 0, steps=1)
    low = dict(feeds[0], scores=np.full((B, C, 7), 0.25, np.float32))
    for ex in executors:
        ex.insert(**low)
        with pytest.raises(ExecutionError, match="outside 1..18"):
            ex.run_step()
    _run(model, executors, feeds)


def test_constant_boxes_and_scores_are_folded(tmp_path):
    feed = _feeds(9, 7, 0, steps=1)[0]
    for score, max_output in ((0.0, 3), (5.0, 3), (0.0, 0)):       # some rows, none (a high threshold), none (0)
        model = _model(7, max_output=max_output, score=score, const_inputs=feed)
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
        imported = oi.import_onnx(model)
        assert "non_max_suppression" not in imported.text
        assert imported.tensors["selected"].shape == want.shape
        np.testing.assert_array_equal(imported.tensors["selected"], want)


@pytest.mark.parametrize("change, message", [
    ({"max_output": None}, "max_output_boxes_per_class is 0 \\(or absent\\)"),
    ({"iou": 1.5}, "iou_threshold 1.5 is outside 0..1"),
    ({"center": 2}, "center_point_box 2"),
])
def test_refusals_name_the_node(change, message):
    with pytest.raises(OnnxImportError, match=f"NonMaxSuppression.*{message}"):
        oi.import_onnx(_model(7, **change))


def test_run_time_thresholds_are_refused():
    model = _model(7)
    model.graph.initializer.pop()                                    # iou: a graph input now
    model.graph.input.append(helper.make_tensor_value_info("iou", F, []))
    with pytest.raises(OnnxImportError, match="NonMaxSuppression.*iou_threshold must be a constant"):
        oi.import_onnx(model)
