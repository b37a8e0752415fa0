"""Einsum imported onto sum_axis / transpose / reshape / matmul: a table of equations over random
operands of odd sizes, run on the reference and the generated C (x86_64-generic), against
onnxruntime; folded on constants; a diagonal refused."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402

#: equation, operand shapes, the DSL ops the import may use
CASES = [
    ("bhid,bhjd->bhij", [(2, 3, 5, 7), (2, 3, 11, 7)], {"matmul"}),
    ("bhij,bhjd->bhid", [(2, 3, 5, 7), (2, 3, 7, 3)], {"matmul"}),
    ("bij,bjk->bik", [(3, 5, 7), (3, 7, 2)], {"matmul"}),
    ("ij,jk->ik", [(5, 7), (7, 3)], {"matmul"}),
    ("ij,jk", [(5, 7), (7, 3)], {"matmul"}),
    ("ji,jk->ik", [(7, 5), (7, 3)], {"matmul"}),
    ("ij,kj->ik", [(5, 7), (3, 7)], {"matmul"}),
    ("ij,kj->ki", [(5, 7), (3, 7)], {"matmul", "transpose"}),
    ("ij->ji", [(5, 7)], {"transpose"}),
    ("ij", [(5, 7)], {"reshape"}),
    ("ji", [(5, 7)], {"transpose"}),
    ("ij->i", [(5, 7)], {"sum_axis"}),
    ("ijk->ki", [(3, 5, 7)], {"sum_axis", "transpose"}),
    ("ijk->", [(3, 5, 7)], {"sum_axis"}),
    ("i,j->ij", [(5,), (7,)], {"matmul", "reshape"}),
    ("i,i->", [(13,), (13,)], {"matmul", "reshape"}),
    ("i,i", [(13,), (13,)], {"matmul", "reshape"}),
    ("ij,j->i", [(5, 7), (7,)], {"matmul", "reshape"}),
    ("bmk,bkn->bnm", [(3, 5, 7), (3, 7, 2)], {"matmul", "transpose"}),
    ("abc,cd->abd", [(3, 5, 7), (7, 2)], {"matmul", "reshape"}),
    ("abc,bcd->ad", [(3, 5, 7), (5, 7, 2)], {"matmul", "reshape"}),
    ("aij,jk->aik", [(3, 5, 7), (7, 3)], {"matmul", "reshape"}),
    ("ijk,jl->il", [(3, 5, 7), (5, 2)], {"matmul", "sum_axis"}),
    ("...ij,...jk->...ik", [(3, 5, 7), (3, 7, 2)], {"matmul"}),
    ("...ij,...jk->...ik", [(2, 1, 5, 7), (1, 3, 7, 2)], {"matmul"}),       # batch dims broadcast
    ("...ij,...jk", [(2, 3, 5, 7), (2, 1, 7, 2)], {"matmul"}),
    ("...ij,jk->...ik", [(2, 3, 5, 7), (7, 2)], {"matmul", "reshape"}),
    ("bij,bjk->ik", [(3, 5, 7), (1, 7, 2)], {"matmul", "sum_axis", "reshape"}),
    ("...i->...", [(3, 5, 7)], {"sum_axis"}),
    ("i...->...i", [(3, 5, 7)], {"transpose"}),
]


def _model(equation, shapes, dtype=TensorProto.FLOAT):
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    inputs = [helper.make_tensor_value_info(n, dtype, s) for n, s in zip(names, shapes, strict=True)]
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", dtype, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _ops(imported) -> set[str]:
    return {line.split("(")[0].split()[-1] for line in imported.text.splitlines() if line.strip().startswith("op ")}


@pytest.mark.parametrize("equation, shapes, ops", CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1][0]))}" for c in CASES])
def test_equation_against_onnxruntime(equation, shapes, ops, tmp_path):
    rng = np.random.default_rng(len(equation) * 7 + sum(map(len, shapes)))
    model = _model(equation, shapes)
    feeds = {f"x{k}": rng.standard_normal(s).astype(np.float32) for k, s in enumerate(shapes)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(want, np.einsum(equation, *feeds.values()), rtol=1e-5, atol=1e-5)
    imported, executors = imported_executors(model, tmp_path, name="einsum")
    assert _ops(imported) <= ops, imported.text
    for ex in executors:
        ex.insert(**feeds)
        ex.run_step()
        got = ex.fetch("y")
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_integer_operands_wrap_as_matmul_does(tmp_path):
    rng = np.random.default_rng(11)
    model = _model("bij,bkj->bik", [(3, 5, 7), (3, 2, 7)], TensorProto.INT32)
    feeds = {"x0": rng.integers(-9, 9, (3, 5, 7), dtype=np.int32), "x1": rng.integers(-9, 9, (3, 2, 7), dtype=np.int32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    graph, oinf = oi.import_onnx(model, name="einsum").write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    ex.insert(**feeds)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), want)


def test_constant_operands_fold(tmp_path):
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    nodes = [helper.make_node("Einsum", ["a", "a"], ["e"], equation="ij,kj->ik"),
             helper.make_node("Add", ["x", "e"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])],
                          [onnx.numpy_helper.from_array(a, "a")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    imported = oi.import_onnx(model, name="folded")
    assert _ops(imported) == {"add"}
    graph, oinf = imported.write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    ex.insert(x=np.zeros((3, 3), np.float32))
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), a @ a.T)


@pytest.mark.parametrize("equation, shapes, match", [
    ("ii->i", [(5, 5)], "repeats a label"),
    ("bii,bij->bj", [(2, 5, 5), (2, 5, 3)], "repeats a label"),
    ("ij,jk->ik", [(5, 7), (6, 3)], "label 'j' of sizes 7 and 6"),
    ("ijk->ij", [(5, 7)], "for an operand of rank 2"),
    ("ij->ik", [(5, 7)], "names a label no input has"),
])
def test_refusals_name_the_equation(equation, shapes, match):
    with pytest.raises(oi.OnnxImportError, match=match):
        oi.import_onnx(_model(equation, shapes))
