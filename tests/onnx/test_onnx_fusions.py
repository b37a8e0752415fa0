"""The importer's fused patterns (attention -> sdpa, RMSNorm -> rms_norm, Erf/Tanh GELU -> gelu) and
the folds whole-model exports need, on small onnx.helper graphs: each is imported, run on the
reference and compared with onnxruntime; a graph that differs from a pattern in one detail keeps
its plain ops and still matches."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=()):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _run(model, feeds, tmp_path):
    """The imported graph's ops, its reference output and onnxruntime's."""
    imported = oi.import_onnx(model, name="g")
    graph, oinf = imported.write(tmp_path)
    executor = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    executor.insert(**feeds)
    executor.run_step()
    out = model.graph.output[0].name
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    ops = [line.split("(")[0].split()[-1] for line in imported.text.splitlines() if line.strip().startswith("op ")]
    return ops, imported.text, executor.fetch(out), want


def _attention(softmax_axis=-1, mask=None, scale_op="Mul", scale=0.35):
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node(scale_op, ["s", "scale"], ["ss"])]
    last, inits = "ss", [_const("scale", scale)]
    if mask is not None:
        nodes.append(helper.make_node("Add", ["ss", "mask"], ["sm"]))
        last = "sm"
        if isinstance(mask, np.ndarray):
            inits.append(_const("mask", mask))
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=softmax_axis),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, F, [1, 2, 4, 8]) for n in "qkv"]
    if isinstance(mask, str):
        inputs.append(helper.make_tensor_value_info("mask", F, [1, 1, 4, 4]))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [1, 2, 4, 8])], inits)


def _qkv(seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for n in "qkv"}


def test_attention_becomes_sdpa_with_its_scale_and_mask(tmp_path):
    feeds = _qkv() | {"mask": np.random.default_rng(1).uniform(-2, 0, (1, 1, 4, 4)).astype(np.float32)}
    ops, text, got, want = _run(_attention(mask="input"), feeds, tmp_path)
    assert ops == ["sdpa"] and "scale=0.3499999940395355" in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_attention_divided_by_the_scale(tmp_path):
    ops, text, got, want = _run(_attention(scale_op="Div", scale=math.sqrt(8)), _qkv(2), tmp_path)
    assert ops == ["sdpa"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_constant_causal_mask_becomes_causal(tmp_path):
    causal = np.where(np.tril(np.ones((4, 4), bool)), 0.0, np.finfo(np.float32).min).reshape(1, 1, 4, 4)
    ops, text, got, want = _run(_attention(mask=causal), _qkv(3), tmp_path)
    assert ops == ["sdpa"] and "causal=true" in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_other_constant_mask_is_passed_as_the_mask(tmp_path):
    mask = np.random.default_rng(4).uniform(-1, 0, (1, 1, 4, 4))
    ops, text, got, want = _run(_attention(mask=mask), _qkv(4), tmp_path)
    assert ops == ["sdpa"] and "causal" not in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_softmax_over_another_axis_keeps_the_plain_ops(tmp_path):
    ops, _, got, want = _run(_attention(softmax_axis=2), _qkv(5), tmp_path)
    assert "sdpa" not in ops and "softmax" in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_computed_bool_mask_through_where_becomes_sdpa_bool_mask(tmp_path):
    """Hugging Face's padding mask: attention_mask (i64) -> bool -> Where(cond, 0, min) added to the scores."""
    nodes = [helper.make_node("Cast", ["am"], ["amb"], to=TensorProto.BOOL),
             helper.make_node("Unsqueeze", ["amb", "axes"], ["amb4"]),
             helper.make_node("Where", ["amb4", "zero", "lowest"], ["mask"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Add", ["ss", "mask"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, F, [1, 2, 4, 8]) for n in "qkv"] + \
        [helper.make_tensor_value_info("am", TensorProto.INT64, [1, 4])]
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [1, 2, 4, 8])],
                   [_const("axes", [1, 2], np.int64), _const("zero", 0.0), _const("lowest", np.finfo(np.float32).min),
                    _const("scale", 0.35)])
    feeds = _qkv(6) | {"am": np.array([[1, 1, 0, 1]], np.int64)}
    ops, text, got, want = _run(model, feeds, tmp_path)
    assert "sdpa" in ops and "softmax" not in ops and "filter" not in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _rms_norm(exponent=2.0, weight=True):
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Reciprocal", ["rms"], ["inv"]),
             helper.make_node("Mul", ["x", "inv"], ["n" if weight else "y"])]
    inits = [_const("two", exponent), _const("axes", [-1], np.int64), _const("eps", 1e-6)]
    if weight:
        nodes.append(helper.make_node("Mul", ["w", "n"], ["y"]))
        inits.append(_const("w", np.random.default_rng(7).uniform(0.5, 1.5, 16)))
    return _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 16])],
                  [helper.make_tensor_value_info("y", F, [2, 3, 16])], inits)


@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm_pattern_becomes_rms_norm(weight, tmp_path):
    x = np.random.default_rng(8).standard_normal((2, 3, 16)).astype(np.float32)
    ops, text, got, want = _run(_rms_norm(weight=weight), {"x": x}, tmp_path)
    assert ops == ["rms_norm"] and "eps=" in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_rms_norm_pattern_of_another_power_keeps_the_plain_ops(tmp_path):
    x = np.random.default_rng(9).uniform(0.5, 2, (2, 3, 16)).astype(np.float32)
    ops, _, got, want = _run(_rms_norm(exponent=3.0), {"x": x}, tmp_path)
    assert "rms_norm" not in ops and "mean_axis" in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _gelu_erf(half=0.5):
    nodes = [helper.make_node("Mul", ["x", "half"], ["xh"]),
             helper.make_node("Div", ["x", "sqrt2"], ["xs"]),
             helper.make_node("Erf", ["xs"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["xh", "e1"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [3, 8])],
                  [helper.make_tensor_value_info("y", F, [3, 8])],
                  [_const("half", half), _const("sqrt2", math.sqrt(2)), _const("one", 1.0)])


def _gelu_tanh():
    """GPT-2's gelu_new as the exporter writes it: the product grouped as (x * h) * 0.5 here."""
    nodes = [helper.make_node("Pow", ["x", "three"], ["x3"]),
             helper.make_node("Mul", ["x3", "k"], ["kx3"]),
             helper.make_node("Add", ["x", "kx3"], ["inner"]),
             helper.make_node("Mul", ["c", "inner"], ["arg"]),
             helper.make_node("Tanh", ["arg"], ["t"]),
             helper.make_node("Add", ["one", "t"], ["t1"]),
             helper.make_node("Mul", ["x", "t1"], ["xt"]),
             helper.make_node("Mul", ["xt", "half"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [3, 8])],
                  [helper.make_tensor_value_info("y", F, [3, 8])],
                  [_const("three", 3.0), _const("k", 0.044715), _const("c", math.sqrt(2 / math.pi)),
                   _const("one", 1.0), _const("half", 0.5)])


@pytest.mark.parametrize("build, approximate", [(_gelu_erf, None), (_gelu_tanh, "tanh")])
def test_gelu_patterns_become_gelu(build, approximate, tmp_path):
    x = np.random.default_rng(10).standard_normal((3, 8)).astype(np.float32) * 3
    ops, text, got, want = _run(build(), {"x": x}, tmp_path)
    assert ops == ["gelu"] and (f'approximate="{approximate}"' in text) == (approximate is not None)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gelu_pattern_with_another_constant_keeps_the_plain_ops(tmp_path):
    x = np.random.default_rng(11).standard_normal((3, 8)).astype(np.float32)
    ops, _, got, want = _run(_gelu_erf(half=0.6), {"x": x}, tmp_path)
    assert "gelu" not in ops and "erf" in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gather_nd_by_constant_indices_and_folded_position_tables(tmp_path):
    """GatherND of a computed tensor by constant indices (a reshape and a gather); CumSum, Cos,
    Sin and GatherElements of constants folded (the position tables of RoPE exports)."""
    idx = np.array([[[0, 2], [1, 0]], [[1, 1], [0, 3]]], np.int64)
    nodes = [helper.make_node("GatherND", ["x", "idx"], ["g"]),
             helper.make_node("CumSum", ["ones", "axis"], ["pos"]),
             helper.make_node("GatherElements", ["pos", "pick"], ["pos2"], axis=0),
             helper.make_node("Cos", ["pos2"], ["c"]),
             helper.make_node("Sin", ["pos2"], ["s"]),
             helper.make_node("Mul", ["c", "s"], ["cs"]),
             helper.make_node("Add", ["g", "cs"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 4, 5])],
                   [helper.make_tensor_value_info("y", F, [2, 2, 5])],
                   [_const("idx", idx, np.int64), _const("ones", np.ones(5)), _const("axis", 0, np.int64),
                    _const("pick", [4, 0, 2, 1, 3], np.int64)])
    x = np.random.default_rng(12).standard_normal((2, 4, 5)).astype(np.float32)
    ops, _, got, want = _run(model, {"x": x}, tmp_path)
    assert ops == ["reshape", "gather", "add"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
