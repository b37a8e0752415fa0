"""`openinfer import`: determinism, names, errors, and the command line."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import onnx_models as models  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.cli import main  # noqa: E402
from openinfer.onnx import SUPPORTED_OPS, sanitize  # noqa: E402


def _single(node, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph([node], "g", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def test_two_imports_are_byte_identical(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(models.cnn(), path)
    first = main(["import", str(path), "-o", str(tmp_path / "a"), "-s", "N=1"])
    second = main(["import", str(path), "-o", str(tmp_path / "b"), "-s", "N=1"])
    assert first == second == 0
    for suffix in ("oig", "oinf"):
        assert (tmp_path / "a" / f"cnn.{suffix}").read_bytes() == (tmp_path / "b" / f"cnn.{suffix}").read_bytes()


@pytest.mark.parametrize(("onnx_name", "dsl_name"), [
    ("x", "x"), ("input.1", "input_1"), ("/fc1/Gemm_output_0", "fc1_Gemm_output_0"), ("0", "v_0"),
    ("type", "type_"), ("self", "self_"), ("::", "v"), ("a-b c", "a_b_c"), ("_hidden", "_hidden"),
])
def test_sanitize(onnx_name, dsl_name):
    assert sanitize(onnx_name) == dsl_name


def test_names_clash_deterministically_and_the_mapping_is_written():
    # "a.b" and "a_b" both sanitize to a_b: the graph output keeps its valid name, the other gets _2
    x = helper.make_tensor_value_info("in", TensorProto.FLOAT, [2])   # `in` is a keyword
    nodes = [helper.make_node("Relu", ["in"], ["a.b"], name="r1"), helper.make_node("Tanh", ["a.b"], ["a_b"], name="t")]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("a_b", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = oi.import_onnx(m, name="clash")
    assert result.renamed == {"in": "in_", "a.b": "a_b_2"}
    assert 'in_: f32[2];' in result.text and '// ONNX "in"' in result.text
    assert 'a_b_2: f32[2];' in result.text and '// ONNX "a.b"' in result.text
    assert "op relu(in_) >> a_b_2;" in result.text and "op tanh(a_b_2) >> a_b;" in result.text
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(in_=np.array([-1.0, 2.0], np.float32))
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("a_b"), np.tanh([0.0, 2.0]), rtol=1e-6)


def _written(result):
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="oi-onnx-test-"))
    _, model = result.write(d)
    return oi.ModelLoader.open(model)


def test_unsupported_op_is_one_error_naming_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = _single(helper.make_node("Unique", ["x"], ["y"], name="/act/Unique"), [x], [y])
    with pytest.raises(oi.OnnxImportError) as err:
        oi.import_onnx(m)
    assert str(err.value) == ('node "/act/Unique" (Unique): op type Unique is not supported '
                              "(`openinfer import --list-ops` lists those that are)")
    assert isinstance(err.value, oi.OpenInferError)


def test_unsupported_attribute_value_names_the_node_and_what_is_missing():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2])
    with pytest.raises(oi.OnnxImportError, match=r"^node #0 \(MaxPool\): dilations \[2, 2\] are not supported"):
        oi.import_onnx(_single(pool, [x], [y]))
    bad_attr = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=0.5)
    with pytest.raises(oi.OnnxImportError, match=r'^node "r" \(Relu\): attribute `alpha` is not supported'):
        oi.import_onnx(_single(bad_attr, [x], [x]))


def test_symbolic_dim_without_a_value_is_an_error(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(models.mlp(), path)
    assert main(["import", str(path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err == ("openinfer: error: graph input `input.1` has the symbolic dim `batch` and no value for it: "
                   "give one with --sizevar batch=VALUE\n")
    assert not (tmp_path / "out").exists()
    assert main(["import", str(path), "-o", str(tmp_path / "out"), "-s", "batch=2", "-s", "seq=3"]) == 1
    assert "--sizevar seq: the model has no such symbolic dim (its symbolic dims: batch)" in capsys.readouterr().err


def test_cli_writes_a_graph_openinfer_checks(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(models.mlp(), path)
    assert main(["import", str(path), "-o", str(tmp_path / "out"), "--name", "classifier", "--sizevar", "batch=4"]) == 0
    graph, model = tmp_path / "out" / "classifier.oig", tmp_path / "out" / "classifier.oinf"
    assert capsys.readouterr().out == f"wrote {graph} and {model}\n"
    assert main(["check", str(graph), "-m", str(model)]) == 0
    assert re.search(r"^  input_1 +dynamic +f32\[4, 8\]$", capsys.readouterr().out, re.M)


def test_cli_list_ops_is_the_importers_table(capsys):
    assert main(["import", "--list-ops"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(SUPPORTED_OPS)
    assert {"Conv", "BatchNormalization", "Gemm", "MaxPool", "Softmax", "Reshape"} <= set(listed)


def test_cli_help_explains(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    out = capsys.readouterr().out
    assert "--sizevar NAME=VALUE" in out and "--list-ops" in out and "dim_param" in out


def test_unreadable_model_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe not a protobuf")
    assert main(["import", str(bad), "-o", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith(f"openinfer: error: {bad}: not a readable ONNX model")


def test_constants_are_folded_and_identity_dropped():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    shape = helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([3, -1], np.int64)))
    one = helper.make_node("Constant", [], ["one"], value_float=1.0)
    two = helper.make_node("Add", ["one", "one"], ["two"])
    nodes = [shape, one, two, helper.make_node("Identity", ["x"], ["x2"]),
             helper.make_node("Mul", ["x2", "two"], ["m"]), helper.make_node("Reshape", ["m", "shape"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = oi.import_onnx(m, name="fold")
    ops = [line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops == ["mul", "reshape"]
    assert result.tensors == {}                         # the folded scalar is written in the graph
    assert "two: f32 @init(2.0);" in result.text
    xv = np.arange(12, dtype=np.float32).reshape(2, 6)
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=xv)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), (xv * 2).reshape(3, 4))


def test_any_onnx_name_gives_a_graph_that_loads():
    # names with a newline (which would end a `//` comment), non-ASCII, a keyword, a leading digit
    names = ["x\ny", "ü/1", "loop", "9lives"]
    x = helper.make_tensor_value_info(names[0], TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info(names[3], TensorProto.FLOAT, [3])
    nodes = [helper.make_node("Relu", [names[0]], [names[1]], name="relu\n// not a comment"),
             helper.make_node("Sigmoid", [names[1]], [names[2]], name="s\u00e9"),
             helper.make_node("Tanh", [names[2]], [names[3]], name="t")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)],
                          ir_version=8)
    result = oi.import_onnx(m, name="odd names")
    assert result.name == "odd_names"
    assert result.renamed == {"x\ny": "x_y", "ü/1": "v_1", "loop": "loop_", "9lives": "v_9lives"}
    assert '// "relu\\n// not a comment" (Relu)' in result.text and '"s\\u00e9" (Sigmoid)' in result.text
    assert all(ord(ch) < 128 for ch in result.text)
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x_y=np.array([-1.0, 0.0, 2.0], np.float32))
    ex.run_step()
    want = np.tanh(1 / (1 + np.exp(-np.maximum([-1.0, 0.0, 2.0], 0))))
    np.testing.assert_allclose(ex.fetch("v_9lives"), want, rtol=1e-6)


def test_batch_norm_not_after_a_lone_conv_is_a_scale_and_shift():
    # the conv's output is also a graph output, so the batch norm cannot be folded into it
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(3)
    arrays = {"w": rng.standard_normal((4, 2, 3, 3)), "scale": rng.uniform(0.5, 2, 4), "bias": rng.standard_normal(4),
              "mean": rng.standard_normal(4), "var": rng.uniform(0.5, 2, 4)}
    inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in arrays.items()]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4, 5, 5]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = oi.import_onnx(m, name="bn")
    ops = [line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops == ["conv2d", "mul", "add"]
    assert result.tensors["y_scale"].shape == (4, 1, 1)
    x = rng.uniform(-1, 1, (1, 2, 5, 5)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("c"), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ex.fetch("y"), want[1], rtol=1e-5, atol=1e-5)


def test_one_d_conv_batch_norm_and_pool_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(4)
    arrays = {"w": rng.standard_normal((6, 2, 3)), "b": rng.standard_normal(6), "scale": rng.uniform(0.5, 2, 6),
              "bias": rng.standard_normal(6), "mean": rng.standard_normal(6), "var": rng.uniform(0.5, 2, 6)}
    inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in arrays.items()]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 1], strides=[2], dilations=[2]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
             helper.make_node("MaxPool", ["n"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 11])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = oi.import_onnx(m, name="conv1d")
    assert "op conv1d(x, w, b, stride=2, padding=[2, 1], dilation=2) >> n;" in result.text   # BN folded
    x = rng.uniform(-1, 1, (2, 2, 11)).astype(np.float32)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("const_b", [True, False])
def test_gemm_transposes_are_matmul_attributes_and_match_onnxruntime(const_b):
    """transA / transB read the operands as stored (matmul's transpose_a / transpose_b): no
    transpose op and no transposed copy of a weight; alpha still folds into a constant B."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(6)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    c = rng.standard_normal(5).astype(np.float32)
    inits = [numpy_helper.from_array(c, "c")] + ([numpy_helper.from_array(b, "b")] if const_b else [])
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])] + \
        ([] if const_b else [helper.make_tensor_value_info("b", TensorProto.FLOAT, [5, 3])])
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5)
    m = _single(node, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])], inits)
    result = oi.import_onnx(m, name="gemm")
    ops = [line.strip() for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops[0].startswith("op matmul(a, b, transpose_a=true, transpose_b=true) >> y;")
    assert not any(o.startswith("op transpose(") for o in ops)
    if const_b:
        np.testing.assert_array_equal(result.tensors["b"], b * np.float32(0.5))    # scaled, layout as stored
    a = rng.standard_normal((3, 4)).astype(np.float32)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(**feeds)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-5, atol=1e-6)


def test_shape_subgraph_folds_and_rms_norm_pattern_matches_onnxruntime():
    # as an exported transformer computes a head split's shape: Shape -> Gather -> Unsqueeze -> Concat
    ort = pytest.importorskip("onnxruntime")
    ints = {"i0": np.asarray(0, np.int64), "i1": np.asarray(1, np.int64), "ax0": np.asarray([0], np.int64),
            "heads": np.asarray([2, 4], np.int64), "two": np.asarray(2.0, np.float32),
            "eps": np.asarray(1e-6, np.float32), "rmean_axes": np.asarray([-1], np.int64)}
    inits = [numpy_helper.from_array(a, k) for k, a in ints.items()]
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq", "rmean_axes"], ["ms"]),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["x", "rms"], ["normed"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"]),
             helper.make_node("Gather", ["s", "i1"], ["t"]),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Unsqueeze", ["t", "ax0"], ["t1"]),
             helper.make_node("Concat", ["b1", "t1", "heads"], ["shape"], axis=0),
             helper.make_node("Reshape", ["normed", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    result = oi.import_onnx(m, name="heads", sizevars={"batch": 2, "seq": 3})
    ops = [line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops == ["rms_norm", "reshape", "transpose"]        # the RMSNorm chain fused (test_onnx_fusions.py)
    assert "r: f32[batch, seq, 2, 4];" in result.text     # the folded shape keeps the sizevars
    assert not any(t.dtype == np.int64 for t in result.tensors.values())
    x = np.random.default_rng(5).uniform(-1, 1, (2, 3, 8)).astype(np.float32)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", [["x", "s"], ["s", "x"]])
def test_mul_by_sigmoid_is_silu_and_matches_onnxruntime(order):
    ort = pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="/act/Sigmoid"),
             helper.make_node("Mul", order, ["y"], name="/act/Mul")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    result = oi.import_onnx(m, name="silu")
    ops = [line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops == ["silu"]
    x = np.random.default_rng(6).uniform(-6, 6, (2, 5)).astype(np.float32)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-6, atol=1e-7)


def test_bool_casts_broadcast_comparisons_where_and_range_match_onnxruntime():
    # Less broadcasts without an add of zeros; Cast to and from bool; Where with a computed
    # condition over f32 operands (cond cast to f32); Range over run-time start/limit/delta as
    # arange, its length the one the model declares
    ort = pytest.importorskip("onnxruntime")
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    ins = [helper.make_tensor_value_info("x", f32, [2, 3]), helper.make_tensor_value_info("y", f32, [3]),
           helper.make_tensor_value_info("start", i64, []), helper.make_tensor_value_info("limit", i64, []),
           helper.make_tensor_value_info("delta", i64, []), helper.make_tensor_value_info("z", f32, ["n"])]
    outs = [helper.make_tensor_value_info("ltf", f32, [2, 3]), helper.make_tensor_value_info("xb", TensorProto.BOOL,
                                                                                               [2, 3]),
            helper.make_tensor_value_info("w", f32, [2, 3]), helper.make_tensor_value_info("r", i64, [4]),
            helper.make_tensor_value_info("rz", f32, ["n"])]
    half = numpy_helper.from_array(np.array(-0.5, np.float32), "half")
    nodes = [helper.make_node("Less", ["x", "y"], ["lt"], name="less"),
             helper.make_node("Cast", ["lt"], ["ltf"], to=f32, name="to_float"),
             helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BOOL, name="to_bool"),
             helper.make_node("Where", ["lt", "x", "y"], ["w"], name="where"),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Cast", ["start"], ["startf"], to=f32),
             helper.make_node("Cast", ["limit"], ["limitf"], to=f32),
             helper.make_node("Range", ["startf", "limitf", "half"], ["rf"], name="range_f"),
             helper.make_node("Add", ["rf", "z"], ["rz"])]
    g = helper.make_graph(nodes, "g", ins, outs, [half], value_info=[helper.make_tensor_value_info("rf", f32, ["n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = oi.import_onnx(m, name="conveniences", sizevars={"n": 16})
    assert "op lt(x, y) >> lt;" in result.text and "lt_b" not in result.text   # no add of zeros
    assert "op cast(lt, to=f32) >> w_cond;" in result.text
    assert "op arange(r, start=start, step=delta) >> r;" in result.text
    assert "op arange(rf, start=startf, step=-0.5) >> rf;" in result.text and "rf: f32[n];" in result.text
    x = np.array([[0.0, -1.5, np.nan], [2.0, -0.0, 3.0]], np.float32)
    feeds = {"x": x, "y": np.array([1.0, -2.0, 0.5], np.float32), "start": np.array(3, np.int64),
             "limit": np.array(-5, np.int64), "delta": np.array(-2, np.int64), "z": np.arange(16, dtype=np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    ex = oi.Reference(_written(result), result.text, sizevars=result.sizevars).make_executor()
    ex.insert(**feeds)
    ex.run_step()
    for name, expected in zip(("ltf", "xb", "w", "r", "rz"), want, strict=True):
        np.testing.assert_array_equal(ex.fetch(name), expected, err_msg=name)


def test_range_of_run_time_values_needs_a_declared_length():
    i64 = TensorProto.INT64
    ins = [helper.make_tensor_value_info(n, i64, []) for n in ("a", "b", "d")]
    m = _single(helper.make_node("Range", ["a", "b", "d"], ["r"], name="rng"), ins,
                [helper.make_tensor_value_info("r", i64, None)])
    with pytest.raises(oi.OpenInferError, match=r"node \"rng\" \(Range\).*output length is known only at run time"):
        oi.import_onnx(m, name="range")
    m = _single(helper.make_node("Range", ["a", "b", "d"], ["r"], name="rng"), ins,
                [helper.make_tensor_value_info("r", i64, ["m"])])
    with pytest.raises(oi.OpenInferError, match=r"node \"rng\" \(Range\): .*symbolic dim `m`, which no graph input "
                                                "has"):
        oi.import_onnx(m, name="range")
