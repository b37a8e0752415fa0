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
    """GatherND of a computed tensor by constant indices (one gather_nd); CumSum, Cos, Sin and
    GatherElements of constants folded (the position tables of RoPE exports)."""
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
    assert ops == ["gather_nd", "add"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _torch_sdpa(mask=None, guard=("IsNaN", "zero"), q_scale=0.5, k_scale=0.7, perm=(0, 2, 1), flat=(-1, 4, 8)):
    """torch's decomposition of F.scaled_dot_product_attention as the dynamo exporter writes it
    (onnxscript's aten_scaled_dot_product_attention): Q * sqrt(s); K^T as Reshape(Transpose(
    Reshape(K, [-1, Sk, D]), [0, 2, 1]), [..., D, Sk]) * sqrt(s); MatMul; + mask; Softmax;
    Where(IsNaN(P), 0, P) (the bool-mask path); MatMul by V. q, k, v are [1, 2, 4, 8].
    mask: None, "bool" (a bool graph input through Where(cond, 0, -inf)), "causal" (the is_causal
    path: Where(Equal(Trilu(Expand(1, [Sq, Sk])), 0), lowest, 0), all constant) or "float" (an input)."""
    nodes = [helper.make_node("Reshape", ["k", "flat"], ["k3"]),
             helper.make_node("Transpose", ["k3"], ["k3t"], perm=list(perm)),
             helper.make_node("Reshape", ["k3t", "kt_shape"], ["kt"]),
             helper.make_node("Mul", ["q", "q_scale"], ["qs"]),
             helper.make_node("Mul", ["kt", "k_scale"], ["kts"]),
             helper.make_node("MatMul", ["qs", "kts"], ["s"])]
    inits = [_const("flat", flat, np.int64), _const("kt_shape", [1, 2, 8, 4], np.int64),
             _const("q_scale", q_scale), _const("k_scale", k_scale), _const("zero", 0.0)]
    inputs = [helper.make_tensor_value_info(n, F, [1, 2, 4, 8]) for n in "qkv"]
    last = "s"
    if mask is not None:
        if mask == "bool":
            inputs.append(helper.make_tensor_value_info("keep", TensorProto.BOOL, [1, 1, 4, 4]))
            nodes.append(helper.make_node("Where", ["keep", "zero", "minus_inf"], ["mask"]))
            inits.append(_const("minus_inf", -np.inf))
        elif mask == "causal":
            nodes += [helper.make_node("Expand", ["one", "size"], ["ones"]),
                      helper.make_node("Trilu", ["ones"], ["tril"], upper=0),
                      helper.make_node("Equal", ["tril", "zero"], ["above"]),
                      helper.make_node("Where", ["above", "lowest", "zero"], ["mask"])]
            inits += [_const("one", 1.0), _const("size", [4, 4], np.int64),
                      _const("lowest", np.finfo(np.float32).min)]
        else:
            inputs.append(helper.make_tensor_value_info("mask", F, [1, 1, 4, 4]))
        nodes.append(helper.make_node("Add", ["s", "mask"], ["sm"]))
        last = "sm"
    nodes.append(helper.make_node("Softmax", [last], ["p"], axis=-1))
    if guard is not None:
        where_in = ["nan", guard[1], "p"] if guard[1] == "zero" else ["nan", "p", "zero"]
        nodes += [helper.make_node(guard[0], ["p"], ["nan"]), helper.make_node("Where", where_in, ["pz"])]
        if guard[1] == "one":
            inits.append(_const("one_guard", 1.0))
            nodes[-1].input[1] = "one_guard"
    nodes.append(helper.make_node("MatMul", ["pz" if guard is not None else "p", "v"], ["y"]))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [1, 2, 4, 8])], inits)


def test_torch_sdpa_decomposition_with_a_bool_mask_becomes_sdpa(tmp_path):
    """The bool-mask path, a query row with every key masked included: ONNX's IsNaN guard gives it
    zeros, as sdpa does for a row with no key left."""
    keep = np.random.default_rng(13).random((1, 1, 4, 4)) < 0.6
    keep[0, 0, 0, 0] = True
    keep[0, 0, 2, :] = False                        # a fully masked query row
    ops, text, got, want = _run(_torch_sdpa(mask="bool"), _qkv(14) | {"keep": keep}, tmp_path)
    assert ops == ["sdpa"] and "scale=0.3499999940395355" in text and "IsNaN" in text
    assert np.all(want[0, :, 2] == 0) and np.all(np.isfinite(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask", [None, "float"])
def test_torch_sdpa_decomposition_without_guard_becomes_sdpa(mask, tmp_path):
    feeds = _qkv(15) | ({"mask": np.random.default_rng(16).uniform(-2, 0, (1, 1, 4, 4)).astype(np.float32)}
                        if mask else {})
    ops, text, got, want = _run(_torch_sdpa(mask=mask, guard=None, q_scale=0.59460356, k_scale=0.59460356),
                                feeds, tmp_path)
    assert ops == ["sdpa"] and f"scale={float(np.float32(0.59460356)) ** 2!r}" in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_torch_sdpa_decomposition_of_is_causal_becomes_causal(tmp_path):
    ops, text, got, want = _run(_torch_sdpa(mask="causal", guard=None), _qkv(17), tmp_path)
    assert ops == ["sdpa"] and "causal=true" in text
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", ["perm", "flat", "guard_swapped", "guard_one", "vector_scale"])
def test_torch_sdpa_near_misses_keep_their_plain_ops(change, tmp_path):
    """Each differs from the decomposition in one detail: K^T's transpose perm (the identity: K's
    elements reread as [..., D, Sk]) or its first reshape ([-1, D, Sk]: not a swap either), the guard as Where(IsNaN(P),
    P, 0) or with 1 for 0 (with a bool mask: the Where of the mask then gets its plain ops too), a
    [D]-vector for Q's scale (which stays a mul before the sdpa). Every row keeps a key, so the plain
    ops and onnxruntime agree."""
    model = {"perm": lambda: _torch_sdpa(perm=(0, 1, 2), flat=(-1, 8, 4)),
             "flat": lambda: _torch_sdpa(flat=(-1, 8, 4)),
             "guard_swapped": lambda: _torch_sdpa(guard=("IsNaN", "swapped")),
             "guard_one": lambda: _torch_sdpa(mask="bool", guard=("IsNaN", "one")),
             "vector_scale": lambda: _torch_sdpa(q_scale=np.linspace(0.2, 0.9, 8))}[change]()
    feeds = _qkv(18)
    if change == "guard_one":
        keep = np.random.default_rng(19).random((1, 1, 4, 4)) < 0.6
        keep[..., 0] = True
        feeds["keep"] = keep
    ops, text, got, want = _run(model, feeds, tmp_path)
    if change == "vector_scale":
        assert ops == ["mul", "sdpa"]
    else:
        assert "sdpa" not in ops and "softmax" in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
