"""ONNX If (issue 42): a condition known at import imports only the chosen branch; one known at run
time becomes the DSL's `branch cond then else` over two blocks. Run on the reference and the
generated C (x86_64-generic and the host's best CPU target) and on lavapipe, against onnxruntime,
with inputs that take each branch. Loop and Scan are refused with what to do instead."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from compilers import TOOLCHAINS  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.errors import OnnxImportError  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

F, B = TensorProto.FLOAT, TensorProto.BOOL
ARCHS = tuple(sorted({"x86_64-generic", best_host_target()}))
N, D, O = 3, 7, 5


def _model(nodes, inputs, outputs, initializers=(), opset=17, check=True):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def _branch(nodes, outputs, name, initializers=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
                             list(initializers))


def _weights(rng, **shapes):
    return [nh.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in shapes.items()]


def _gated():
    """y = If(ReduceSum(x) > 0) then x @ W1 + b1 else relu(x) @ W2: the condition known at run time
    (b1 an initializer of the then_branch)."""
    rng = np.random.default_rng(42)
    then = _branch([helper.make_node("MatMul", ["x", "W1"], ["t0"]), helper.make_node("Add", ["t0", "b1"], ["t1"])],
                   [("t1", [N, O])], "then", _weights(rng, b1=(O,)))
    other = _branch([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["e1"])],
                    [("e1", [N, O])], "else")
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], name="gate", then_branch=then, else_branch=other)]
    return _model(nodes, [("x", F, [N, D])], [("y", F, [N, O])],
                  [*_weights(rng, W1=(D, O), W2=(D, O)), nh.from_array(np.float32(0), "zero")])


def _feeds_each_way(rng, shape, name="x"):
    """Random inputs whose sum is positive, then negative: one takes each branch of `_gated`."""
    x = rng.standard_normal(shape).astype(np.float32)
    return [{name: np.abs(x)}, {name: -np.abs(x)}, {name: x - x.mean() + 0.25}]


def _check(model, feeds, tmp_path, archs=ARCHS):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    imported, executors = imported_executors(model, tmp_path, archs)
    for feed in feeds:
        want = session.run(None, feed)
        for ex in executors:
            ex.insert(**feed)
            ex.run_step()
            for out, w in zip(model.graph.output, want, strict=True):
                np.testing.assert_allclose(ex.fetch(imported.renamed.get(out.name, out.name)), w, rtol=1e-5,
                                           atol=1e-5)
    return imported


def test_a_run_time_condition_branches_to_two_blocks(tmp_path):
    model = _gated()
    imported = _check(model, _feeds_each_way(np.random.default_rng(1), (N, D)), tmp_path)
    text = imported.text
    assert "branch positive gate_then gate_else;" in text
    then, other = text.split("block gate_then {")[1].split("block gate_else {")
    assert "op matmul(x, W1) >> t0;" in then and "op add(t0, b1) >> y;" in then and "relu" not in then
    assert "op relu(x) >> r;" in other and "op matmul(r, W2) >> y;" in other and "W1" not in other
    assert text.count("    y: f32[3, 5];") == 1 and "reshape" not in text    # declared once, written by each block


@pytest.mark.parametrize("build", ["gated", "nested"])
def test_run_time_conditions_on_lavapipe(build, tmp_path, monkeypatch):
    from vulkan.conftest import use_lavapipe

    lavapipe = use_lavapipe(monkeypatch, tmp_path / "vk-cache")
    model, feeds = (_gated(), _feeds_each_way(np.random.default_rng(2), (N, D))) if build == "gated" else _nested()
    graph, oinf = oi.import_onnx(model).write(tmp_path / "m")
    sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=lavapipe)
    ex = sim.make_executor()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in feeds:
        ex.insert(**feed)
        ex.run_step()
        for out, want in zip(model.graph.output, session.run(None, feed), strict=True):
            np.testing.assert_allclose(ex.fetch(out.name), want, rtol=1e-5, atol=1e-5)
    assert sim.validation_messages() == 0


def _shape_gated(batch):
    """If(Shape(x)[1] == 7) then sigmoid(x) else tanh(x), x of [batch, 7]: folded at import."""
    then = _branch([helper.make_node("Sigmoid", ["x"], ["t"])], [("t", [batch, D])], "then")
    other = _branch([helper.make_node("Tanh", ["x"], ["e"])], [("e", [batch, D])], "else")
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["cols"]),
             helper.make_node("Equal", ["cols", "seven"], ["is7"]),
             helper.make_node("If", ["is7"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["y", "x"], ["z"])]
    return _model(nodes, [("x", F, [batch, D])], [("z", F, [batch, D])],
                  [nh.from_array(np.int64(1), "one"), nh.from_array(np.int64(7), "seven")])


def test_a_condition_folded_from_shapes_imports_only_the_chosen_branch(tmp_path):
    model = _shape_gated(N)
    imported = _check(model, [{"x": np.random.default_rng(3).standard_normal((N, D)).astype(np.float32)}], tmp_path)
    ops = [line.split()[1].split("(")[0] for line in imported.text.splitlines() if line.lstrip().startswith("op ")]
    assert ops == ["sigmoid", "mul"]
    assert "tanh" not in imported.text and "branch " not in imported.text and imported.text.count("block ") == 1
    assert "    y: f32[3, 7];" in imported.text          # the branch's node writes the If's output


def test_a_condition_folded_from_a_symbolic_dim_fixes_it(tmp_path):
    """The cond reads the batch size: the choice holds for the import's batch only, and binding
    the model at another batch (or a dynamic one) is refused."""
    from openinfer.api import bind_inputs
    from openinfer.errors import BindError

    then = _branch([helper.make_node("Sigmoid", ["x"], ["t"])], [("t", ["batch", D])], "then")
    other = _branch([helper.make_node("Tanh", ["x"], ["e"])], [("e", ["batch", D])], "else")
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Gather", ["shape", "zero"], ["rows"]),
             helper.make_node("Greater", ["rows", "one"], ["many"]),
             helper.make_node("If", ["many"], ["y"], name="by_batch", then_branch=then, else_branch=other)]
    model = _model(nodes, [("x", F, ["batch", D])], [("y", F, ["batch", D])],
                   [nh.from_array(np.int64(0), "zero"), nh.from_array(np.int64(1), "one")])
    for batch, op in ((3, "sigmoid"), (1, "tanh")):
        imported = oi.import_onnx(model, sizevars={"batch": batch})
        fixed = [line for line in imported.text.splitlines() if line.startswith("// Fixed at import")]
        assert f"op {op}(x)" in imported.text and len(fixed) == 1 and "batch (`many`)" in fixed[0]
        graph, oinf = imported.write(tmp_path / str(batch))
        with pytest.raises(BindError, match=f"--dynamic batch=4: the model fixes `batch` at {batch} "):
            bind_inputs(str(oinf), graph, None, {"batch": 4})


def test_a_one_element_condition_of_another_dtype_is_reshaped_and_cast(tmp_path):
    """A [1] float condition (non-zero: then): onnxruntime takes only bool, so against NumPy."""
    then = _branch([helper.make_node("Neg", ["x"], ["t"])], [("t", [N, D])], "then")
    other = _branch([helper.make_node("Abs", ["x"], ["e"])], [("e", [N, D])], "else")
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = _model([node], [("x", F, [N, D]), ("c", F, [1])], [("y", F, [N, D])], check=False)
    x = np.random.default_rng(4).standard_normal((N, D)).astype(np.float32)
    imported, executors = imported_executors(model, tmp_path, ARCHS)
    assert "op reshape(c) >> c_scalar;" in imported.text and "op cast(c_scalar, to=bool) >> c_bool;" in imported.text
    for c, want in ((0.5, -x), (0.0, np.abs(x)), (-2.0, -x)):
        for ex in executors:
            ex.insert(x=x, c=np.array([c], np.float32))
            ex.run_step()
            np.testing.assert_array_equal(ex.fetch("y"), want)


def _nested():
    """A run-time If inside a run-time branch (a block that branches again), a folded If inside
    the other, two outputs, and the same value names in both branches (ONNX scopes them); with
    inputs that take: else; then, its then; then, its else."""
    rng = np.random.default_rng(5)
    inner_then = _branch([helper.make_node("Mul", ["x", "W"], ["v"])], [("v", [N, D])], "it")
    inner_else = _branch([helper.make_node("Sub", ["x", "W"], ["v"])], [("v", [N, D])], "ie")
    folded_then = _branch([helper.make_node("Sigmoid", ["x"], ["v"])], [("v", [N, D])], "ft")
    folded_else = _branch([helper.make_node("Exp", ["x"], ["v"])], [("v", [N, D])], "fe")
    then = _branch([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=1),
                    helper.make_node("Greater", ["m", "half"], ["big"]),
                    helper.make_node("If", ["big"], ["u"], then_branch=inner_then, else_branch=inner_else),
                    helper.make_node("Add", ["u", "W"], ["w"])], [("u", [N, D]), ("w", [N, D])], "then")
    other = _branch([helper.make_node("If", ["yes"], ["u"], then_branch=folded_then, else_branch=folded_else),
                     helper.make_node("Neg", ["u"], ["w"])], [("u", [N, D]), ("w", [N, D])], "else")
    nodes = [helper.make_node("ReduceMin", ["x"], ["lo"], keepdims=0),
             helper.make_node("Less", ["lo", "zero"], ["neg"]),
             helper.make_node("If", ["neg"], ["a", "b"], then_branch=then, else_branch=other)]
    model = _model(nodes, [("x", F, [N, D])], [("a", F, [N, D]), ("b", F, [N, D])],
                   [*_weights(rng, W=(N, D)), nh.from_array(np.float32(0), "zero"),
                    nh.from_array(np.float32(0.5), "half"), nh.from_array(np.bool_(True), "yes")])
    x = rng.uniform(0.1, 1, (N, D)).astype(np.float32)
    return model, [{"x": x}, {"x": x - 0.2}, {"x": x * 0.4 - 0.05}]


def test_nested_ifs_and_names_reused_by_sibling_branches(tmp_path):
    imported = _check(*_nested(), tmp_path)
    assert imported.text.count("branch ") == 2 and "exp" not in imported.text


@pytest.mark.parametrize("toolchain", TOOLCHAINS, ids=lambda t: t.name)
def test_nested_ifs_under_every_toolchain(toolchain, tmp_path, monkeypatch):
    """The blocks that branch again, built by GCC and Clang at -O2 and -O3 (warnings as errors)."""
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    model, feeds = _nested()
    graph, oinf = oi.import_onnx(model).write(tmp_path / "m")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with toolchain.active():
        executors = [oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=arch,
                                  build_options=toolchain.build_options).make_executor() for arch in ARCHS]
    for feed in feeds:
        want = session.run(None, feed)
        for ex in executors:
            ex.insert(**feed)
            ex.run_step()
            for out, w in zip(model.graph.output, want, strict=True):
                np.testing.assert_allclose(ex.fetch(out.name), w, rtol=1e-5, atol=1e-5)


def test_an_outer_constant_filled_at_run_time_is_filled_before_the_branch(tmp_path):
    """ones(Shape(x)) of a symbolic batch is filled at its run-time size: read first inside a
    branch, it is filled before the branch, as the node after the If reads it too."""
    then = _branch([helper.make_node("Add", ["x", "ones"], ["t"])], [("t", ["batch", D])], "then")
    other = _branch([helper.make_node("Sub", ["x", "ones"], ["e"])], [("e", ["batch", D])], "else")
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                              value=nh.from_array(np.array([1.0], np.float32))),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["y", "ones"], ["z"])]
    model = _model(nodes, [("x", F, ["batch", D])], [("z", F, ["batch", D])], [nh.from_array(np.float32(0), "zero")])
    text = oi.import_onnx(model, sizevars={"batch": N}).text
    entry = text.split("block entry {")[1].split("}")[0]
    assert "op fill(ones" in entry and entry.index("op fill(ones") < entry.index("branch ")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    graph, oinf = oi.import_onnx(model, sizevars={"batch": N}).write(tmp_path)
    ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph), dynamic={"batch": 6}).make_executor()
    for batch, feed in zip((N, 5), _feeds_each_way(np.random.default_rng(6), (5, D)), strict=False):
        feed = {"x": feed["x"][:batch]}
        ex.set_sizes(batch=batch)
        ex.insert(**feed)
        ex.run_step()
        np.testing.assert_allclose(ex.fetch("z"), session.run(None, feed)[0], rtol=1e-6)


def test_branches_of_different_shapes_are_refused_naming_the_node():
    then = _branch([helper.make_node("Identity", ["x"], ["t"])], [("t", [N, D])], "then")
    other = _branch([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1)], [("e", [1, 1])], "else")
    model = _model([helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then, else_branch=other)],
                   [("x", F, [N, D]), ("c", B, [])], [("y", F, [N, D])], check=False)
    with pytest.raises(OnnxImportError, match=r'node "pick" \(If\): output "y" is f32\[3, 7\] from then_branch and '
                                              r"f32\[1, 1\] from else_branch: both branches must give the same"):
        oi.import_onnx(model)


def test_a_failing_node_inside_a_branch_is_named_with_its_if():
    then = _branch([helper.make_node("Hardmax", ["x"], ["t"])], [("t", [N, D])], "then")
    other = _branch([helper.make_node("Relu", ["x"], ["e"])], [("e", [N, D])], "else")
    model = _model([helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then, else_branch=other)],
                   [("x", F, [N, D]), ("c", B, [])], [("y", F, [N, D])])
    with pytest.raises(OnnxImportError, match=r'node "pick" \(If\): then_branch: node "pick"/then_branch#0 '
                                              r"\(Hardmax\): op type Hardmax is not supported"):
        oi.import_onnx(model)


def test_loop_is_refused_with_what_to_do():
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc_out"]),
                              helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond", B, []),
                              helper.make_tensor_value_info("acc", F, [D])],
                             [helper.make_tensor_value_info("cond_out", B, []),
                              helper.make_tensor_value_info("acc_out", F, [D])])
    loop = helper.make_node("Loop", ["n", "", "x"], ["total"], name="accumulate", body=body)
    model = _model([loop], [("x", F, [D]), ("n", TensorProto.INT64, [])], [("total", F, [D])])
    with pytest.raises(OnnxImportError, match=r'node "accumulate" \(Loop\): Loop is not imported: .* Export the '
                                              r"model with the loop unrolled \(torch.onnx.export traces"):
        oi.import_onnx(model)


def test_scan_is_refused_with_what_to_do():
    body = helper.make_graph([helper.make_node("Add", ["s", "xt"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y_t"])], "body",
                             [helper.make_tensor_value_info(n, F, [D]) for n in ("s", "xt")],
                             [helper.make_tensor_value_info(n, F, [D]) for n in ("s_out", "y_t")])
    scan = helper.make_node("Scan", ["s0", "x"], ["s_last", "ys"], num_scan_inputs=1, body=body)
    model = _model([scan], [("s0", F, [D]), ("x", F, [N, D])], [("s_last", F, [D]), ("ys", F, [N, D])])
    with pytest.raises(OnnxImportError, match=r"node #0 \(Scan\): Scan is not imported: .* unrolled \(traced, "
                                              r"not scripted\); recurrent layers exported as RNN, GRU or LSTM are "
                                              r"imported"):
        oi.import_onnx(model)
