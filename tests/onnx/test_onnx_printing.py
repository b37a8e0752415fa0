"""The printed `.oig` of an import: repeated layers written out get headers (equal ones are one
loop: test_onnx_layer_loop.py); `write` moves the checked `.oinf` into place only while it still
holds the result's tensors."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402

WIDTH = 4


def _stack(rng, prefixes, extra_sigmoid_in=()):
    """x -> for each prefix: MatMul + Add + Neg + Neg + Relu (+ Sigmoid where asked), node names under
    the prefix (but the first Neg of each layer has none), then `/head/MatMul`."""
    nodes, inits, weights = [], [], {}
    x = "x"
    for i, prefix in enumerate(prefixes):
        w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
        b = rng.standard_normal(WIDTH).astype(np.float32)
        weights[prefix] = (w, b)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"{prefix}/mm"], name=f"{prefix}/fc/MatMul"))
        nodes.append(helper.make_node("Add", [f"{prefix}/mm", f"b{i}"], [f"{prefix}/add"], name=f"{prefix}/fc/Add"))
        x = f"{prefix}/relu"
        # no node name: it belongs to no layer by its name, yet sits inside one
        nodes.append(helper.make_node("Neg", [f"{prefix}/add"], [f"{prefix}/neg"]))
        nodes.append(helper.make_node("Neg", [f"{prefix}/neg"], [f"{prefix}/pos"], name=f"{prefix}/Neg"))
        nodes.append(helper.make_node("Relu", [f"{prefix}/pos"], [x], name=f"{prefix}/act/Relu"))
        if prefix in extra_sigmoid_in:
            nodes.append(helper.make_node("Sigmoid", [x], [f"{prefix}/sig"], name=f"{prefix}/act/Sigmoid"))
            x = f"{prefix}/sig"
    head = rng.standard_normal((WIDTH, 2)).astype(np.float32)
    inits.append(numpy_helper.from_array(head, "head_w"))
    nodes.append(helper.make_node("MatMul", [x, "head_w"], ["y"], name="/head/MatMul"))
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, weights, head


def _numpy(x, prefixes, weights, head, sigmoid_in=()):
    for prefix in prefixes:
        w, b = weights[prefix]
        x = np.maximum(x @ w + b, 0)
        if prefix in sigmoid_in:
            x = 1 / (1 + np.exp(-x))
    return x @ head


def _comments(text: str, section: str) -> list[str]:
    """The section's lines that are blank or header comments, each with the code line after it."""
    body = text.split(f"{section} {{\n", 1)[1].split("\n}", 1)[0].split("\n")
    def var(k: int) -> str:     # what the first code line after line k declares or writes
        line = next(x for x in body[k + 1:] if x.strip() and not x.strip().startswith("//"))
        m = re.search(r">> (\w+);", line) or re.match(r"\s*(\w+):", line)
        return m[1]

    return [(line, var(k))
            for k, line in enumerate(body) if not line.strip() or line.strip().startswith("// layer")]


def test_repeated_layers_get_headers_in_the_block_and_the_volatiles(tmp_path):
    prefixes = ["/model/layers.0", "/model/layers.1", "/model/layers.2"]
    model, weights, head = _stack(np.random.default_rng(0), prefixes, extra_sigmoid_in={"/model/layers.2"})
    result = oi.import_onnx(model)
    assert result.text == oi.import_onnx(model).text                       # deterministic
    assert "loop" not in result.text              # the layers differ: written out (test_onnx_layer_loop.py)
    expected = [
        ("    // layer model.layers.0", "model_layers_0_mm"),
        ("", "model_layers_1_mm"),
        ("    // layer model.layers.1 — same ops as model.layers.0", "model_layers_1_mm"),
        ("", "model_layers_2_mm"),
        ("    // layer model.layers.2 — other ops than model.layers.0", "model_layers_2_mm"),
    ]
    # a blank line before each header but the first, and one after the last layer (before the head)
    assert _comments(result.text, "block entry") == [*expected, ("", "y")]
    assert _comments(result.text, "volatile") == [*expected, ("", "y")]
    # the unnamed Negs stay inside their layers: no header repeats, no blank line splits a layer
    assert result.text.count("// layer model.layers.0\n") == 2
    assert result.text.count("// layer model.layers.1 —") == 2

    x = np.random.default_rng(1).standard_normal((3, WIDTH)).astype(np.float32)
    graph, path = result.write(tmp_path)
    ex = oi.Reference(path, graph).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), _numpy(x, prefixes, weights, head, {"/model/layers.2"}),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("prefixes", "first", "second"), [
    (["/encoder/layer.0", "/encoder/layer.1"], "encoder.layer.0", "encoder.layer.1"),
    (["/layer1/layer1.0", "/layer1/layer1.1"], "layer1.layer1.0", "layer1.layer1.1"),
    (["/transformer/h.9", "/transformer/h.10"], "transformer.h.9", "transformer.h.10"),
])
def test_exporters_naming_styles(prefixes, first, second):
    model, _, _ = _stack(np.random.default_rng(0), prefixes)
    text = oi.import_onnx(model, unroll_layers=True).text      # (equal layers are one loop otherwise)
    assert f"\n    // layer {first}\n" in text
    assert f"\n\n    // layer {second} — same ops as {first}\n" in text


def test_a_layer_that_does_not_repeat_gets_no_header():
    model, _, _ = _stack(np.random.default_rng(0), ["/blocks.0", "/stem"])
    text = oi.import_onnx(model).text
    assert "// layer" not in text and "\n\n" not in text


def test_write_moves_the_checked_model_and_rewrites_replaced_tensors(tmp_path):
    model, weights, head = _stack(np.random.default_rng(0), ["/a.0", "/a.1"])
    result = oi.import_onnx(model)
    with pytest.raises(ValueError, match="read-only"):
        result.tensors["head_w"][0, 0] = 5.0       # the checked .oinf must stay the tensors' image
    _, path = result.write(tmp_path / "one")
    m = oi.ModelLoader.open(path)
    np.testing.assert_array_equal(m.tensor("head_w"), head)
    m.close()

    result = oi.import_onnx(model)
    result.tensors["head_w"] = head * 2                # a replaced entry: write writes the tensors anew
    _, path = result.write(tmp_path / "two")
    m = oi.ModelLoader.open(path)
    np.testing.assert_array_equal(m.tensor("head_w"), head * 2)
    m.close()
    _, again = result.write(tmp_path / "three")     # a second write: the checked file is used up
    assert again.read_bytes() == path.read_bytes()


def test_layers_come_from_the_dynamo_exporters_name_scopes():
    """torch's dynamo exporter names nodes `node_MatMul_59` and records the module path in the
    `pkg.torch.onnx.name_scopes` metadata; that path decides the layers (a Sequential's `4.0` too)."""
    rng = np.random.default_rng(3)
    model, weights, head = _stack(rng, ["/a", "/b", "/c"])
    scopes = {"/a": ["", "4", "4.0", "4.0.fc"], "/b": ["", "4", "4.1", "4.1.fc"], "/c": ["", "head"]}
    for k, node in enumerate(model.graph.node):
        node.name = f"node_{node.op_type}_{k}"                  # no path in the name, as dynamo writes it
        prefix = next((p for p in scopes if node.output[0].startswith(p + "/")), None)
        if prefix is not None:
            prop = node.metadata_props.add()
            prop.key, prop.value = "pkg.torch.onnx.name_scopes", repr([*scopes[prefix], node.op_type.lower()])
    imported = oi.import_onnx(model, unroll_layers=True)
    headers = [line.strip() for line in imported.text.split("block entry {\n", 1)[1].splitlines()
               if line.strip().startswith("// layer")]
    assert headers == ["// layer 4.0", "// layer 4.1 — same ops as 4.0"]


def test_dynamo_generated_constant_names_come_from_their_users_module(tmp_path):
    """dynamo names a Linear's folded, transposed weight `val_60`: the constant is named after the
    module of the node that uses it (`..._weight_T` for a linear's MatMul operand, else the op and
    the input position), deterministically and collision-free, with the ONNX name in a comment."""
    rng = np.random.default_rng(4)
    w0, w1, w2 = (rng.standard_normal(shape).astype(np.float32) for shape in ((4, 4), (4, 4), (4,)))
    nodes = [helper.make_node("MatMul", ["x", "val_7"], ["h0"], name="node_MatMul_1"),
             helper.make_node("MatMul", ["h0", "val_9"], ["h1"], name="node_MatMul_2"),
             helper.make_node("Add", ["h1", "val_11"], ["y"], name="node_add_3")]
    scopes = [["", "model", "model.enc.layer.0.query", "linear"], ["", "model", "model.enc.layer.0.query", "linear_1"],
              ["", "model", "model.enc", "add_3"]]
    for node, scope in zip(nodes, scopes, strict=True):
        prop = node.metadata_props.add()
        prop.key, prop.value = "pkg.torch.onnx.name_scopes", repr(scope)
    weights = [numpy_helper.from_array(a, n) for a, n in ((w0, "val_7"), (w1, "val_9"), (w2, "val_11"))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    imported = oi.import_onnx(model)
    constants = imported.text.split("constant {\n", 1)[1].split("\n}", 1)[0].splitlines()
    assert [" ".join(line.split()) for line in constants] == [
        'model_enc_layer_0_query_weight_T: f32[4, 4]; // ONNX "val_7"',
        'model_enc_layer_0_query_weight_T_2: f32[4, 4]; // ONNX "val_9"',
        'model_enc_add_3_in1: f32[4]; // ONNX "val_11"']
    assert imported.text == oi.import_onnx(model).text
    graph, path = imported.write(tmp_path)
    executor = oi.Reference(path, graph).make_executor()
    x = rng.standard_normal((2, 4)).astype(np.float32)
    executor.insert(x=x)
    executor.run_step()
    np.testing.assert_allclose(executor.fetch("y"), x @ w0 @ w1 + w2, rtol=1e-5, atol=1e-6)
