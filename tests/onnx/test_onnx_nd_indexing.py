"""GatherND and ScatterND with run-time indices (graph inputs): imported as gather_nd and
scatter_nd, run on the reference and the generated C, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.errors import ExecutionError  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(node, inputs, output, opset=18):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(*output)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _check(model, feeds, tmp_path, op):
    """The imported graph has `op` once; its reference and x86_64-generic C outputs are onnxruntime's.
    Returns the two executors (for further steps)."""
    imported, executors = imported_executors(model, tmp_path, name="nd")
    assert [line.split("(")[0].split()[-1] for line in imported.text.splitlines() if line.strip().startswith("op ")] \
        == [op]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    out = model.graph.output[0].name
    for ex in executors:
        ex.insert(**feeds)
        ex.run_step()
        np.testing.assert_array_equal(ex.fetch(out), want)
    return executors


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_with_indices_from_a_graph_input(batch_dims, tmp_path):
    rng = np.random.default_rng(3 + batch_dims)
    data = rng.standard_normal((3, 7, 5)).astype(np.float32)
    if batch_dims:
        idx = rng.integers(-7, 7, (3, 4, 1))                  # per batch: 4 rows of its [7, 5]
        out = [3, 4, 5]
    else:
        idx = np.stack([rng.integers(-3, 3, (2, 4)), rng.integers(-7, 7, (2, 4))], axis=-1)    # rows of [3, 7]
        out = [2, 4, 5]
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], batch_dims=batch_dims)
    model = _model(node, [("data", F, data.shape), ("idx", I64, idx.shape)], ("y", F, out), opset=13)
    ref, c = _check(model, {"data": data, "idx": idx.astype(np.int64)}, tmp_path, "gather_nd")
    # an index outside [-n, n) of its dim is the step's error, on the reference and in C
    bad = idx.astype(np.int64).copy()
    bad.flat[-1] = 7
    for ex, error in ((ref, oi.OpenInferError), (c, ExecutionError)):
        ex.insert(data=data, idx=bad)
        with pytest.raises(error, match="out of range"):
            ex.run_step()


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_with_run_time_indices_and_updates(reduction, tmp_path):
    """Rows of a [7, 5] table (k = 1); the reductions with a repeated row, combined in order."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((7, 5)).astype(np.float32)
    idx = np.array([[4], [-1], [0], [2]] if reduction == "none" else [[4], [-3], [0], [4]], np.int64)
    upd = rng.standard_normal((4, 5)).astype(np.float32)
    attrs = {} if reduction == "none" else {"reduction": reduction}
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], **attrs)
    model = _model(node, [("data", F, data.shape), ("idx", I64, idx.shape), ("upd", F, upd.shape)], ("y", F, [7, 5]))
    _check(model, {"data": data, "idx": idx, "upd": upd}, tmp_path, "scatter_nd")


def test_constant_inputs_fold(tmp_path):
    """All inputs constant: folded at import, by the reference kernel (an index out of range is the node's error)."""
    data = helper.make_tensor("data", F, [3, 2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    idx = helper.make_tensor("idx", I64, [2, 1], [2, -3])
    upd = helper.make_tensor("upd", F, [2, 2], [10.0, 20.0, 30.0, 40.0])
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["s"], reduction="add"),
             helper.make_node("GatherND", ["s", "idx"], ["g"]),
             helper.make_node("Add", ["x", "g"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 2])],
                          [helper.make_tensor_value_info("y", F, [2, 2])], [data, idx, upd])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    imported = oi.import_onnx(model, name="folded")
    assert [line.split("(")[0].split()[-1] for line in imported.text.splitlines() if line.strip().startswith("op ")] \
        == ["add"]
    graph, oinf = imported.write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    ex.insert(x=np.zeros((2, 2), np.float32))
    ex.run_step()
    assert ex.fetch("y").tolist() == [[15.0, 26.0], [31.0, 42.0]]     # rows 2 and 0, each plus its update
    model.graph.initializer[1].int64_data[:] = [2, 3]
    with pytest.raises(oi.OnnxImportError, match=r"\(ScatterND\): scatter_nd: index 3 .* out of range"):
        oi.import_onnx(model)


def test_an_index_grid_over_the_whole_data_is_a_reshape(tmp_path):
    """Constant tuples picking every slot once in order (an exporter's `mask[:, None, None, :]`,
    negative indices included) read the data as it is: a reshape; any other order: gather_nd."""
    grid = np.stack(np.meshgrid(np.arange(2), np.arange(3), indexing="ij"), axis=-1).reshape(2, 1, 3, 2)
    grid[1, 0, 2, 1] = -1
    for tuples, op in ((grid, "reshape"), (grid[:, :, ::-1], "gather_nd")):
        node = helper.make_node("GatherND", ["x", "idx"], ["y"])
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", F, [2, 1, 3, 4])],
                              [onnx.numpy_helper.from_array(np.ascontiguousarray(tuples).astype(np.int64), "idx")])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        _check(model, {"x": np.random.default_rng(9).standard_normal((2, 3, 4)).astype(np.float32)},
               tmp_path / op, op)
