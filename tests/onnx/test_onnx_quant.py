"""Quantised ONNX through `openinfer import`: DequantizeLinear weights onto `dequant_matmul` with
`.oinf` v2 scales, the layouts it cannot take dequantized at import, and onnxruntime's own
quantize_dynamic (DynamicQuantizeLinear + MatMulInteger) and quantize_static (QDQ) exports of a
small MLP, each run on the reference and the generated C (x86_64-generic and the host's best CPU
target) against onnxruntime on the same ONNX."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

TARGETS = sorted({"x86_64-generic", best_host_target()})


def _model(nodes, inits, x_shape, y_shape, opset=21):
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _onnxruntime(model, x):
    """onnxruntime's outputs with its graph optimizations off: its fusions (DequantizeLinear ->
    MatMul into MatMulNBits, DQ -> MatMul -> Q into QLinearMatMul) quantize activations or
    requantize outputs, which the ONNX operators as defined (and the import) do not."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _engines(result, tmp_path, monkeypatch, targets):
    """The reference and the generated C for each target, each on the written model."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "sim-cache"))
    graph, model = result.write(tmp_path / "out")
    yield "reference", oi.Reference(oi.ModelLoader.open(model), oi.load_graph(graph)).make_executor()
    for arch in targets:
        yield arch, oi.Simulator(oi.ModelLoader.open(model), oi.load_graph(graph), arch=arch).make_executor()


def _check(result, model, xs, tmp_path, monkeypatch, rtol=1e-5, atol=1e-5, targets=TARGETS):
    wants = [_onnxruntime(model, x) for x in xs]
    for engine, ex in _engines(result, tmp_path, monkeypatch, targets):
        for x, want in zip(xs, wants, strict=True):
            ex.insert(x=x)
            ex.run_step()
            np.testing.assert_allclose(ex.fetch("y"), want, rtol=rtol, atol=atol, err_msg=engine)


def _quantised_mlp():
    """x[2, 3, 8] -> MatMul(DQ(i8 per output channel, zero points)) -> Add -> Relu
    -> MatMul(DQ(u8 per tensor, zero point 128)) -> y[2, 3, 5]."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.integers(-128, 128, (8, 16)).astype(np.int8), "w1_q"),
             numpy_helper.from_array(rng.uniform(0.005, 0.02, 16).astype(np.float32), "w1_scale"),
             numpy_helper.from_array(rng.integers(-5, 6, 16).astype(np.int8), "w1_zp"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.integers(0, 256, (16, 5)).astype(np.uint8), "w2_q"),
             numpy_helper.from_array(np.asarray(0.01, np.float32), "w2_scale"),
             numpy_helper.from_array(np.asarray(128, np.uint8), "w2_zp")]
    nodes = [helper.make_node("DequantizeLinear", ["w1_q", "w1_scale", "w1_zp"], ["w1"], axis=1, name="dq1"),
             helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("DequantizeLinear", ["w2_q", "w2_scale", "w2_zp"], ["w2"], name="dq2"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    return _model(nodes, inits, [2, 3, 8], [2, 3, 5])


def test_dequantize_linear_weights_become_dequant_matmul_with_v2_scales(tmp_path, monkeypatch):
    model = _quantised_mlp()
    result = oi.import_onnx(model, name="qmlp")
    ops = [line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")]
    assert ops.count("dequant_matmul") == 2 and "matmul" not in ops
    assert 'w1_q_scale: f32[16] @ref("w1_q#scale");' in result.text
    assert 'w2_q_zero_point: i32[1] @ref("w2_q#zero_point");' in result.text
    _, oinf = result.write(tmp_path / "check")
    with oi.ModelLoader.open(oinf) as m:               # stored quantised, scales as quant parameters
        w1, w2 = m.info("w1_q"), m.info("w2_q")
        assert (w1.dtype.name, w2.dtype.name) == ("i8", "u8")
        np.testing.assert_array_equal(w1.quant.scales, numpy_helper.to_array(model.graph.initializer[1]))
        np.testing.assert_array_equal(w1.quant.zero_points, numpy_helper.to_array(model.graph.initializer[2]))
        assert w2.quant.scale_mode == "per_tensor" and w2.quant.zero_points.tolist() == [128]
        assert "w1" not in m.tensor_names               # no dequantized copy
    xs = [np.random.default_rng(k).uniform(-1, 1, (2, 3, 8)).astype(np.float32) for k in range(2)]
    _check(result, model, xs, tmp_path, monkeypatch)


def test_int4_weights_are_stored_packed():
    rng = np.random.default_rng(8)
    q = rng.integers(-8, 8, (8, 4)).astype(np.int8)
    inits = [helper.make_tensor("w_q", TensorProto.INT4, q.shape, q.reshape(-1).tolist()),
             numpy_helper.from_array(rng.uniform(0.05, 0.1, 4).astype(np.float32), "w_scale")]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_scale"], ["w"], axis=1),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    model = _model(nodes, inits, [3, 8], [3, 4])
    result = oi.import_onnx(model, name="q4")
    assert "w_q: i4[8, 4];" in result.text and "op dequant_matmul(x, w_q, w_q_scale) >> y;" in result.text
    x = rng.uniform(-1, 1, (3, 8)).astype(np.float32)
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), _onnxruntime(model, x), rtol=1e-5, atol=1e-6)


def _written(result):
    import tempfile
    from pathlib import Path

    _, path = result.write(Path(tempfile.mkdtemp(prefix="oi-q-")))
    return oi.ModelLoader.open(path)


@pytest.mark.parametrize("layout", ["blocked", "per_input_channel", "also_added"])
def test_layouts_dequant_matmul_cannot_take_are_dequantized_at_import(layout, tmp_path, monkeypatch):
    rng = np.random.default_rng(9)
    q = rng.integers(-128, 128, (8, 6)).astype(np.int8)
    attrs, scale = {"axis": 1}, rng.uniform(0.01, 0.02, 6)
    if layout == "blocked":
        attrs, scale = {"axis": 0, "block_size": 4}, rng.uniform(0.01, 0.02, (2, 6))
    elif layout == "per_input_channel":
        attrs, scale = {"axis": 0}, rng.uniform(0.01, 0.02, 8)
    inits = [numpy_helper.from_array(q, "w_q"), numpy_helper.from_array(scale.astype(np.float32), "w_scale")]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_scale"], ["w"], **attrs),
             helper.make_node("MatMul", ["x", "w"], ["m"])]
    if layout == "also_added":                           # w also feeds an Add: it is needed as floats
        nodes += [helper.make_node("Slice", ["w", "s0", "s1"], ["w0"]), helper.make_node("Add", ["m", "w0"], ["y"])]
        inits += [numpy_helper.from_array(np.asarray([0], np.int64), "s0"),
                  numpy_helper.from_array(np.asarray([1], np.int64), "s1")]
    else:
        nodes.append(helper.make_node("Identity", ["m"], ["y"]))
    model = _model(nodes, inits, [3, 8], [3, 6])
    result = oi.import_onnx(model, name="qfallback")
    assert "dequant_matmul" not in result.text and "op matmul(x, w) >> m;" in result.text
    assert result.tensors["w"].dtype == np.float32
    # the reference only: these are plain matmuls, which the C tests build elsewhere
    _check(result, model, [rng.uniform(-1, 1, (3, 8)).astype(np.float32)], tmp_path, monkeypatch, targets=())


def _float_mlp(path):
    rng = np.random.default_rng(10)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)
             for name, shape in (("w1", (8, 32)), ("b1", (32,)), ("w2", (32, 4)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    model = _model(nodes, inits, [4, 8], [4, 4], opset=17)
    onnx.save(model, str(path))
    return path


def _outputs_close_to_onnxruntime(result, model, xs, tmp_path, monkeypatch, atol):
    """Quantised activations round x / scale to even; a tie onnxruntime breaks the other way moves
    one output by a weight times the activation scale at most, so `atol` is a few such steps."""
    _check(result, model, xs, tmp_path, monkeypatch, rtol=0, atol=atol)


def test_onnxruntime_quantize_dynamic_mlp_matches_onnxruntime(tmp_path, monkeypatch):
    quantization = pytest.importorskip("onnxruntime.quantization")
    src = _float_mlp(tmp_path / "mlp.onnx")
    dst = tmp_path / "mlp_dynamic.onnx"
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8)
    model = onnx.load(str(dst))
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    result = oi.import_onnx(model, name="mlp_dynamic")
    assert result.text.count("op dequant_matmul(") == 2
    xs = [np.random.default_rng(k).uniform(-1, 1, (4, 8)).astype(np.float32) for k in range(2)]
    _outputs_close_to_onnxruntime(result, model, xs, tmp_path, monkeypatch, atol=1e-5)


def test_onnxruntime_quantize_static_qdq_mlp_matches_onnxruntime(tmp_path, monkeypatch):
    quantization = pytest.importorskip("onnxruntime.quantization")
    src = _float_mlp(tmp_path / "mlp.onnx")
    dst = tmp_path / "mlp_qdq.onnx"
    calibration = [np.random.default_rng(100 + k).uniform(-1, 1, (4, 8)).astype(np.float32) for k in range(4)]

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = iter(calibration)

        def get_next(self):
            x = next(self.left, None)
            return None if x is None else {"x": x}

    quantization.quantize_static(str(src), str(dst), Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=True, weight_type=quantization.QuantType.QInt8)
    model = onnx.load(str(dst))
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    result = oi.import_onnx(model, name="mlp_qdq")
    assert result.text.count("op dequant_matmul(") == 2
    xs = [np.random.default_rng(k).uniform(-1, 1, (4, 8)).astype(np.float32) for k in range(2)]
    _outputs_close_to_onnxruntime(result, model, xs, tmp_path, monkeypatch, atol=1e-4)


@pytest.mark.parametrize("k", [16, 600])
def test_matmul_integer_is_exact(k):
    # 600 * 255 * 255 exceeds f32's 2**24 exact integers: that one sums in f64
    rng = np.random.default_rng(k)
    b = rng.integers(0, 256, (k, 3)).astype(np.uint8)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.asarray(3, np.uint8), "a_zp"),
             numpy_helper.from_array(np.asarray([1, 200, 255], np.uint8), "b_zp")]
    g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, k])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    result = oi.import_onnx(model, name="mmi")
    assert f"op dequant_matmul(y_{'f32' if k == 16 else 'f64'}_rows" not in result.text     # 2-D: no reshape
    assert "dequant_matmul" in result.text and ("f64" in result.text) == (k == 600)
    a = rng.integers(0, 256, (2, k)).astype(np.uint8)
    ex = oi.Reference(_written(result), result.text).make_executor()
    ex.insert(a=a)
    ex.run_step()
    want = (a.astype(np.int64) - 3) @ (b.astype(np.int64) - np.asarray([1, 200, 255]))
    np.testing.assert_array_equal(ex.fetch("y"), want.astype(np.int32))
