"""TopK (topk_indices + gather_elements), GatherElements and CumSum on run-time inputs (graph
inputs): run on the reference and the generated C (x86_64-generic), against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.errors import ExecutionError  # noqa: E402

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _model(node, inputs, outputs, initializers=(), opset=18):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _check(model, feeds, tmp_path):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for ex in imported_executors(model, tmp_path)[1]:
        ex.insert(**feeds)
        ex.run_step()
        for out, w in zip(model.graph.output, want, strict=True):
            np.testing.assert_array_equal(ex.fetch(out.name), w)


@pytest.mark.parametrize("axis, largest, k", [(-1, 1, 4), (0, 0, 2), (1, 1, 13), (2, 0, 1)])
def test_topk_values_and_indices(axis, largest, k, tmp_path):
    rng = np.random.default_rng(7 + k)
    x = rng.integers(-5, 5, (3, 13, 5)).astype(np.float32)        # many ties: lower index first
    x[1, 2, 3] = np.inf
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest)
    model = _model(node, [("x", F, x.shape)], [("values", F), ("indices", I64)],
                   [onnx.numpy_helper.from_array(np.array([k], np.int64), "k")])
    _check(model, {"x": x}, tmp_path)


def test_topk_indices_only_of_int32(tmp_path):
    x = np.random.default_rng(3).integers(-2**31, 2**31 - 1, (7, 11)).astype(np.int32)
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], largest=0)
    model = _model(node, [("x", I32, x.shape)], [("indices", I64)],
                   [onnx.numpy_helper.from_array(np.array([5], np.int64), "k")])
    _check(model, {"x": x}, tmp_path)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_with_indices_from_a_graph_input(axis, tmp_path):
    rng = np.random.default_rng(11 + axis)
    data = rng.standard_normal((5, 7, 3)).astype(np.float32)
    shape = [4, 7, 3]
    shape[axis] = 9
    idx = rng.integers(-data.shape[axis], data.shape[axis], shape).astype(np.int64)
    node = helper.make_node("GatherElements", ["data", "idx"], ["y"], axis=axis)
    model = _model(node, [("data", F, data.shape), ("idx", I64, idx.shape)], [("y", F)], opset=13)
    _check(model, {"data": data, "idx": idx}, tmp_path)
    # an index outside [-n, n) is the step's error, on the reference and in C
    bad = idx.copy()
    bad.flat[-1] = data.shape[axis]
    ref, c = imported_executors(model, tmp_path / "bad")[1]
    for ex, error in ((ref, oi.OpenInferError), (c, ExecutionError)):
        ex.insert(data=data, idx=bad)
        with pytest.raises(error, match="out of range"):
            ex.run_step()


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_on_a_graph_input(exclusive, reverse, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(-9, 9, (3, 17, 5)).astype(np.float32)          # small integers: the sums exact
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = _model(node, [("x", F, x.shape)], [("y", F)],
                   [onnx.numpy_helper.from_array(np.array(1, np.int32), "axis")], opset=14)
    _check(model, {"x": x}, tmp_path)
