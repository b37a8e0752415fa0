"""Repeated layers imported as one DSL `loop` (openinfer/onnx/layers.py, issue 42): the committed
transformers (whole-sequence and decode steps) read like examples/decoder.py, a loop over the
layers whose weights are prefix tables and whose KV caches are one table indexed by the layer,
and compute exactly what the unrolled import computes (the reference runs the same kernels on the
same data, so the outputs are bit-equal), from an `.oinf` no larger. Small graphs built here
cover the residual stream's forms (written in place, copied at the end of the body, a graph
input carried in the first layer's output), constants equal in every layer, a graph output the
last layer computes, and the cases that stay unrolled; each against NumPy."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.imported import sanitize  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "onnx"
#: committed model -> the family of its layers (each has two)
FAMILIES = {"bert": "model.encoder.layer", "gpt2": "model.transformer.h", "llama": "model.model.layers",
            "gpt2_step": "model.transformer.h", "llama_step": "model.model.layers", "qwen_step": "model.model.layers"}
CAPACITY = 12


def _import(name: str, **options):
    if name.endswith("_step"):
        return oi.import_onnx(DATA / f"{name}.onnx", cache_capacity=CAPACITY, **options)
    data = np.load(DATA / f"{name}.npz")
    sizevars = {k[8:]: int(data[k]) for k in data.files if k.startswith("sizevar/")}
    return oi.import_onnx(DATA / f"{name}.onnx", sizevars=sizevars, **options)


def _outputs(model, out_dir: Path, name: str) -> list[np.ndarray]:
    """What the reference computes: the whole model on the committed inputs, or a decode step's
    logits at each of its first steps (random tokens)."""
    graph, oinf = model.write(out_dir)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    if name.endswith("_step"):
        got = []
        for token in np.random.default_rng(5).integers(0, 128, 6):
            ex.insert(input_ids=np.array([[token]], np.int64))
            ex.run_step()
            got.append(ex.fetch("logits").copy())
        return got
    data = np.load(DATA / f"{name}.npz")
    ex.insert(**{model.renamed.get(k[3:], k[3:]): data[k] for k in data.files if k.startswith("in/")})
    ex.run_step()
    return [ex.fetch("last_hidden_state" if name == "bert" else "logits")]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_committed_models_loop_over_their_layers(name, tmp_path):
    looped, unrolled = _import(name), _import(name, unroll_layers=True)
    family = FAMILIES[name]
    text, head = looped.text, looped.text.split("block entry {")[0]
    body = text.split("block entry {")[1]
    assert len(re.findall(r"^    loop \w+ \(l in 0\.\.2\) \{$", text, re.M)) == 1 and "loop" not in unrolled.text
    # each weight of the first layer in the unrolled graph is a prefix table here, read at [l]
    first = sanitize(f"{family}.0") + "_"
    per_layer = re.findall(rf"^    {first}\w+: ", unrolled.text.split("persistent {")[0], re.M)
    tables = re.findall(rf'^    (\w+)\(l\): \w+\[[^]]*\] @pattern\("{re.escape(family)}\.\{{l\}}\.(\w+)"\);', head,
                        re.M)
    assert per_layer and len(tables) == len(per_layer)
    for table, rest in tables:
        assert f"{table}[l]" in body
        assert all(f"{family}.{k}.{rest}" in looped.tensors for k in range(2))
    # no variable of the second layer is left (its values are the loop's)
    assert sanitize(f"{family}.1") + "_" not in text
    if name.endswith("_step"):             # one cache table per key / value, the layer its first index
        assert len(re.findall(r"^    \w+\(l, t\): f32\[[^]]*\] @table @fixed\(l=2, t=12\);", head, re.M)) == 2
        assert len(re.findall(r"cache\.write \w+ >> \w+\[l, posv\];", body)) == 2
        assert len(re.findall(r"cache\.read \w+\[l, 0\.\.pos\] >> \w+;", body)) == 2
    if name == "llama_step":               # RoPE's cos/sin, unsqueezed by the first layer, before the loop
        assert re.search(r"op reshape\(cos\) >> \w+;.*\n(.*\n)*    loop ", body)
    assert (looped.metadata, looped.sizevars) == (unrolled.metadata, unrolled.sizevars)
    _, loop_oinf = looped.write(tmp_path / "loop")
    _, flat_oinf = unrolled.write(tmp_path / "flat")
    assert loop_oinf.stat().st_size <= flat_oinf.stat().st_size
    for a, b in zip(_outputs(looped, tmp_path / "loop", name), _outputs(unrolled, tmp_path / "flat", name),
                    strict=True):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# small graphs: x -> [layer]* -> head, each layer y = relu(x @ w + b) (or as `body` writes it)

WIDTH = 4


def _graph(rng, layers: int, *, x_from_input=True, same_bias=False, residual_reread=False, extra_outputs=()):
    """`layers` layers under `/model/layers.k/`. `x_from_input`: the first layer reads the graph
    input itself (else a Relu before the layers); `same_bias`: each layer its own initializer of
    one bias; `residual_reread`: the layer's output is x * relu(x @ w + b), the input read where
    the output is written; `extra_outputs`: values (ONNX names) made graph outputs too."""
    nodes, inits, ref = [], [], []
    x = "x"
    if not x_from_input:
        nodes.append(helper.make_node("Relu", ["x"], ["x0"], name="/stem/Relu"))
        x = "x0"
    bias = rng.standard_normal(WIDTH).astype(np.float32)
    for k in range(layers):
        p = f"/model/layers.{k}"
        w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
        b = bias if same_bias else rng.standard_normal(WIDTH).astype(np.float32)
        ref.append((w, b))
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(b, f"b{k}")]
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"{p}/mm"], name=f"{p}/fc/MatMul"),
                  helper.make_node("Add", [f"{p}/mm", f"b{k}"], [f"{p}/add"], name=f"{p}/fc/Add"),
                  helper.make_node("Relu", [f"{p}/add"], [f"{p}/relu"], name=f"{p}/act/Relu")]
        out = f"{p}/relu"
        if residual_reread:
            nodes.append(helper.make_node("Mul", [x, f"{p}/relu"], [f"{p}/out"], name=f"{p}/Mul"))
            out = f"{p}/out"
        x = out
    head = rng.standard_normal((WIDTH, 2)).astype(np.float32)
    inits.append(numpy_helper.from_array(head, "head_w"))
    nodes.append(helper.make_node("MatMul", [x, "head_w"], ["y"], name="/head/MatMul"))
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [3, 2 if o == "y" else WIDTH])
               for o in ("y", *extra_outputs)]
    graph = helper.make_graph(nodes, "layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, WIDTH])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    def numpy(x: np.ndarray) -> dict[str, np.ndarray]:
        values = {}
        h = x if x_from_input else np.maximum(x, 0)
        for k, (w, b) in enumerate(ref):
            r = np.maximum(h @ w + b, 0)
            values[f"/model/layers.{k}/relu"] = r
            h = h * r if residual_reread else r
            values[f"/model/layers.{k}/out"] = h
        values["y"] = h @ head
        return values

    return model, numpy


def _run(imported, tmp_path, names) -> dict[str, np.ndarray]:
    x = np.random.default_rng(1).standard_normal((3, WIDTH)).astype(np.float32)
    graph, oinf = imported.write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    ex.insert(x=x)
    ex.run_step()
    return x, {n: ex.fetch(imported.renamed.get(n, n)).copy() for n in names}


def _check(imported, numpy, tmp_path, names=("y",)):
    x, got = _run(imported, tmp_path, names)
    want = numpy(x)
    for n in names:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-5, atol=1e-5, err_msg=n)


def _body(text: str) -> list[str]:
    """The loop's body, each line up to its comment."""
    inner = text.split(" (l in 0..", 1)[1].split("\n    }\n", 1)[0].splitlines()[1:]
    return [line.split("//")[0].strip() for line in inner]


def test_a_graph_input_is_carried_in_the_first_layers_output(tmp_path):
    model, numpy = _graph(np.random.default_rng(0), 3)
    imported = oi.import_onnx(model)
    text = imported.text
    assert "w(l): f32[4, 4] @pattern(\"model.layers.{l}.w\");" in text and "b(l): f32[4] @pattern" in text
    assert sorted(imported.tensors) == ["head_w", *(f"model.layers.{k}.{t}" for k in range(3) for t in "bw")]
    # x is the graph's input: the loop carries the first layer's output, x copied into it before
    assert "    op reshape(x) >> model_layers_0_relu;" in text
    assert _body(text) == ["op matmul(model_layers_0_relu, w[l]) >> model_layers_0_mm;",
                           "op add(model_layers_0_mm, b[l]) >> model_layers_0_add;",
                           "op relu(model_layers_0_add) >> model_layers_0_relu;"]
    _check(imported, numpy, tmp_path)
    flat = oi.import_onnx(model, unroll_layers=True)
    assert "loop" not in flat.text and "// layer model.layers.2 — same ops as model.layers.0" in flat.text
    _check(flat, numpy, tmp_path / "flat")


def test_a_value_computed_before_the_layers_carries_their_output(tmp_path):
    """The body writes the layer's output into its input, where nothing reads the input after."""
    model, numpy = _graph(np.random.default_rng(2), 2, x_from_input=False)
    imported = oi.import_onnx(model)
    assert _body(imported.text)[-1] == "op relu(model_layers_0_add) >> x0;"
    assert "model_layers_0_relu" not in imported.text
    _check(imported, numpy, tmp_path)


def test_an_input_read_after_the_output_is_computed_is_copied_at_the_end(tmp_path):
    model, numpy = _graph(np.random.default_rng(3), 3, x_from_input=False, residual_reread=True)
    imported = oi.import_onnx(model)
    assert _body(imported.text)[-2:] == ["op mul(x0, model_layers_0_relu) >> model_layers_0_out;",
                                         "op reshape(model_layers_0_out) >> x0;"]
    _check(imported, numpy, tmp_path)
    # the same layers on the graph input: the loop may not write it, and cannot carry the output
    # in the first layer's (the body reads the input after writing it): written out
    model, numpy = _graph(np.random.default_rng(3), 3, residual_reread=True)
    imported = oi.import_onnx(model)
    assert "loop" not in imported.text and "// layer model.layers.1 — same ops as" in imported.text
    _check(imported, numpy, tmp_path / "input")


def test_a_constant_the_same_in_every_layer_stays_one_constant(tmp_path):
    model, numpy = _graph(np.random.default_rng(4), 3, same_bias=True)
    imported = oi.import_onnx(model)
    assert "    b0: f32[4];" in imported.text and "b(l)" not in imported.text and "b1" not in imported.text
    assert sorted(imported.tensors) == ["b0", "head_w", *(f"model.layers.{k}.w" for k in range(3))]
    assert "op add(model_layers_0_mm, b0) >> model_layers_0_add;" in _body(imported.text)
    _check(imported, numpy, tmp_path)


def test_the_last_layers_value_as_a_graph_output_is_copied_out_after_the_loop(tmp_path):
    model, numpy = _graph(np.random.default_rng(5), 3, x_from_input=False,
                          extra_outputs=("/model/layers.2/relu",))
    imported = oi.import_onnx(model)
    out = imported.renamed["/model/layers.2/relu"]
    assert f"    op reshape(x0) >> {out};" in imported.text.split("\n    }\n", 1)[1]
    _check(imported, numpy, tmp_path, ("y", "/model/layers.2/relu"))


def test_a_value_of_an_earlier_layer_read_after_the_layers_keeps_them_unrolled(tmp_path):
    """The loop holds one layer's values at a time: a graph output from the first layer (its
    values overwritten by the next iteration) keeps the layers written out, and right."""
    model, numpy = _graph(np.random.default_rng(6), 3, x_from_input=False,
                          extra_outputs=("/model/layers.0/relu",))
    imported = oi.import_onnx(model)
    assert "loop" not in imported.text and imported.text.count("same ops as model.layers.0") == 4
    _check(imported, numpy, tmp_path, ("y", "/model/layers.0/relu"))


def test_the_command_line_writes_the_loop_or_with_unroll_layers_every_layer(tmp_path):
    from openinfer.cli import main

    assert main(["import", str(DATA / "gpt2_step.onnx"), "-o", str(tmp_path / "loop"), "--cache-capacity", "8"]) == 0
    assert main(["import", str(DATA / "gpt2_step.onnx"), "-o", str(tmp_path / "flat"), "--cache-capacity", "8",
                 "--unroll-layers"]) == 0
    looped, flat = ((tmp_path / d / "gpt2_step.oig").read_text() for d in ("loop", "flat"))
    assert "\n    loop model_transformer_h (l in 0..2) {\n" in looped and "cache_past_key_values_1_key" not in looped
    assert "loop" not in flat and "    // layer model.transformer.h.1 — " in flat
    assert "(t): f32[1, 4, 8] @table @fixed(t=8);" in flat and "(l, t): f32[1, 4, 8] @table @fixed(l=2, t=8);" in looped


def test_quantized_weights_keep_the_layers_unrolled(tmp_path):
    """A quantized weight's scales are tensors of their own (`W#scale`), which a prefix table of
    the weight does not carry: such layers are written out, and compute the same."""
    rng = np.random.default_rng(7)
    nodes, inits, ref = [], [], []
    x = "x"
    for k in range(2):
        p = f"/model/layers.{k}"
        q = rng.integers(-127, 128, (WIDTH, WIDTH)).astype(np.int8)
        scale = rng.uniform(0.005, 0.02, WIDTH).astype(np.float32)
        ref.append(q.astype(np.float32) * scale)
        inits += [numpy_helper.from_array(q, f"w{k}_q"), numpy_helper.from_array(scale, f"w{k}_scale")]
        nodes += [helper.make_node("DequantizeLinear", [f"w{k}_q", f"w{k}_scale"], [f"{p}/w"], axis=1,
                                   name=f"{p}/DequantizeLinear"),
                  helper.make_node("MatMul", [x, f"{p}/w"], [f"{p}/mm"], name=f"{p}/fc/MatMul"),
                  helper.make_node("Relu", [f"{p}/mm"], [f"{p}/relu"], name=f"{p}/act/Relu")]
        x = f"{p}/relu"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="/out/Identity"))
    graph = helper.make_graph(nodes, "qlayers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    imported = oi.import_onnx(model)
    assert "loop" not in imported.text and imported.text.count("op dequant_matmul(") == 2
    assert "// layer model.layers.1 — same ops as model.layers.0" in imported.text

    def numpy(x):
        for w in ref:
            x = np.maximum(x @ w, 0)
        return {"y": x}

    _check(imported, numpy, tmp_path)


def test_a_branch_block_reading_the_last_layer_keeps_the_layers_unrolled(tmp_path):
    """An If after the layers (a run-time condition: two blocks after entry) reads the last
    layer's output: the blocks are not rewritten, so the layers stay written out, and right."""
    model, numpy = _graph(np.random.default_rng(8), 2, x_from_input=False)
    g = model.graph
    last = "/model/layers.1/relu"
    head = next(n for n in g.node if n.name == "/head/MatMul")
    g.node.remove(head)
    branch = {name: helper.make_graph([helper.make_node(op, [last], [f"{name}_out"])], name, [],
                                      [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [3, WIDTH])])
              for name, op in (("then", "Relu"), ("other", "Neg"))}
    g.node.extend([helper.make_node("If", ["c"], ["picked"], name="/gate/If", then_branch=branch["then"],
                                    else_branch=branch["other"]),
                   helper.make_node("MatMul", ["picked", "head_w"], ["y"], name="/head/MatMul")])
    g.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    imported = oi.import_onnx(model)
    assert "branch c" in imported.text and "loop" not in imported.text
    x = np.random.default_rng(1).standard_normal((3, WIDTH)).astype(np.float32)
    graph, oinf = imported.write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
    head_w = next(numpy_helper.to_array(t) for t in g.initializer if t.name == "head_w")
    for cond in (True, False):
        ex.insert(x=x, c=np.array(cond))
        ex.run_step()
        h = numpy(x)[last]
        np.testing.assert_allclose(ex.fetch("y"), (h if cond else -h) @ head_w, rtol=1e-5, atol=1e-5)
