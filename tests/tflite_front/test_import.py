"""`openinfer import model.tflite`: the committed single-op and chain models (tests/data/tflite)
import and compute, tensor by tensor, what LiteRT's reference kernels compute; names and types at
the boundary; every unsupported operator listed in one error; malformed files refused by what is
wrong with them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", minversion="2.18",
                    reason="needs the tflite flatbuffer package (pip install 'openinfer[tflite]')")
pytest.importorskip("ai_edge_litert.interpreter", reason="needs ai-edge-litert (LiteRT's interpreter)")

from tflite_builder import Op, Tensor, build_model  # noqa: E402
from tflite_oracle import DATA, feed, litert_inputs, litert_run, mismatches  # noqa: E402

from openinfer.errors import TfliteImportError  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.tflite import import_tflite  # noqa: E402

TESTDATA = DATA / "tflite"
#: the committed models whose every operator the importer supports (int8 forms)
SUPPORTED = sorted(p.stem for p in TESTDATA.glob("*.tflite")
                   if not p.stem.endswith("_f32") and p.stem.split("_")[0] in
                   ("conv2d", "depthwise", "fully", "average", "max", "reshape", "squeeze", "softmax", "add",
                    "transpose", "strided", "concatenation", "pad", "padv2",
                    "sub", "mul", "mean", "relu", "relu6", "quantize", "requantize", "dequantize", "logistic", "tanh",
                    "hard", "tiny"))
#: the float models: LiteRT's float kernels within F32_TOLERANCE
SUPPORTED_F32 = sorted(p.stem for p in TESTDATA.glob("*_f32.tflite"))
#: (rtol, atol) of the float models against LiteRT. Not bit-exact: LiteRT's float kernels sum a
#: convolution's or a fully connected layer's products in another order than the registry's conv2d
#: and matmul (im2col + GEMM blocks vs window order), and its exp/tanh/logistic are its own
#: (polynomial approximations in optimized_ops, libm in reference_ops) where ours are libm's; with
#: O(1) values and at most 72 products a sum those differ by a few ulp, far below 1e-5.
F32_TOLERANCE = (1e-5, 1e-5)
#: models LiteRT refuses (tests/tflite_front/test_testdata.py says why): imported, not compared
LITERT_REFUSES = {"conv2d_1x1_nobias"}


def _import(name: str, tmp_path):
    result = import_tflite(TESTDATA / f"{name}.tflite")
    graph, model = result.write(tmp_path)
    return result, (TESTDATA / f"{name}.tflite").read_bytes(), Reference(model, graph)


@pytest.mark.parametrize("name", SUPPORTED)
def test_every_tensor_is_bit_exact_with_litert(name, tmp_path) -> None:
    result, data, ref = _import(name, tmp_path)
    if name in LITERT_REFUSES:
        pytest.skip(f"{name}: LiteRT refuses the model (a CONV_2D without bias)")
    ex = ref.make_executor()
    for seed in range(3):
        by_index, by_name = litert_inputs(data, seed)
        ex.insert(**feed(result, by_name))
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index))
        assert not bad, f"{name}, input seed {seed}:\n" + "\n".join(bad)


@pytest.mark.parametrize("arch", ["reference", "x86_64-generic"])
@pytest.mark.parametrize("name", SUPPORTED_F32)
def test_float_models_match_litert(name, arch, tmp_path) -> None:
    """Every tensor of the float models within F32_TOLERANCE of LiteRT's reference kernels, through
    the reference and compiled."""
    from openinfer.sim import Simulator
    from openinfer.testing import skip_unless_runs_here

    result, data, ref = _import(name, tmp_path)
    if arch == "reference":
        ex = ref.make_executor()
    else:
        skip_unless_runs_here(arch)
        ex = Simulator(ref.model, ref.graph, arch=arch).make_executor()
    for seed in range(2):
        by_index, by_name = litert_inputs(data, seed)
        ex.insert(**feed(result, by_name))
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index), F32_TOLERANCE)
        assert not bad, f"{name} on {arch}, input seed {seed}:\n" + "\n".join(bad)


@pytest.mark.parametrize("arch", ["x86_64-generic", "cortex-m4"])
def test_chains_compile_bit_exact(arch, tmp_path) -> None:
    """The two chains (every op kind of the MLPerf models, with odd sizes) as generated C."""
    from openinfer.sim import Simulator
    from openinfer.testing import skip_unless_runs_here

    skip_unless_runs_here(arch)
    for name in ("tiny_dscnn", "tiny_resnet"):
        result, data, ref = _import(name, tmp_path / name)
        ex = Simulator(ref.model, ref.graph, arch=arch).make_executor()
        by_index, by_name = litert_inputs(data, 3)
        ex.insert(**feed(result, by_name))
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index))
        assert not bad, f"{name} on {arch}:\n" + "\n".join(bad)


#: (input scale, input zero point, output scale, output zero point) for LOGISTIC (output scale 1/256
#: as TFLite requires), TANH and HARD_SWISH: small and large input scales (HARD_SWISH's relu-ish
#: shift right and left, its output shift 0 at an output scale near input / 128), extreme zero points
_ACTIVATION_SCALES = [(0.05, 3, 0.02, -7), (0.0021, -128, 0.0009, 127), (0.4, 127, 0.35, -128),
                      (1.7, 0, 0.5, 10), (0.1, -30, 0.00079, 0), (0.013, 90, 0.007, -55)]


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "HARD_SWISH"])
def test_activations_on_every_int8_value(op, tmp_path) -> None:
    """All 256 int8 inputs through LOGISTIC, TANH (LiteRT's tables, recomputed at import) and
    HARD_SWISH (int16 fixed point) for several scales and zero points, against LiteRT."""
    every = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    rng = np.random.default_rng(41)
    drawn = [(float(np.float32(s)), int(rng.integers(-128, 128)), float(np.float32(s * 10 ** rng.uniform(-2, 0.5))),
              int(rng.integers(-128, 128))) for s in 10 ** rng.uniform(-3, 0.5, 8)]
    for case, (x_scale, x_zero, y_scale, y_zero) in enumerate(_ACTIVATION_SCALES + drawn):
        if op == "LOGISTIC":
            y_scale = 1 / 256
        model = build_model([Tensor("x", (1, 256), "int8", scale=(x_scale,), zero_point=(x_zero,)),
                             Tensor("y", (1, 256), "int8", scale=(y_scale,), zero_point=(y_zero,))],
                            [Op(op, ("x",), ("y",), {})], ["x"], ["y"])
        graph, weights = import_tflite(model).write(tmp_path / str(case))
        ex = Reference(weights, graph).make_executor()
        ex.insert(x=every)
        ex.run_step()
        want = litert_run(model, {0: every})["y"]
        got = ex.fetch("y")
        assert np.array_equal(got, want), (f"{op} x ({x_scale}, {x_zero}) y ({y_scale}, {y_zero}): inputs "
                                           f"{every[got != want].tolist()} give {got[got != want].tolist()}, "
                                           f"LiteRT {want[got != want].tolist()}")


def test_names_and_types_at_the_boundary() -> None:
    """TFLite names made identifiers, the original in the comment; int8 in, int8 out, nothing added."""
    q = {"scale": (0.05,), "zero_point": (-3,)}
    model = build_model([Tensor("serving_default_input_1:0", (1, 6), "int8", **q),
                         Tensor("StatefulPartitionedCall:0", (2, 3), "int8", **q)],
                        [Op("RESHAPE", ("serving_default_input_1:0",), ("StatefulPartitionedCall:0",),
                            {"new_shape": [2, 3]})],
                        ["serving_default_input_1:0"], ["StatefulPartitionedCall:0"])
    result = import_tflite(model)
    assert "serving_default_input_1_0: i8[1, 6];  // TFLite \"serving_default_input_1:0\"" in result.text
    assert "StatefulPartitionedCall_0: i8[2, 3];" in result.text
    assert "op reshape(serving_default_input_1_0) >> StatefulPartitionedCall_0;" in result.text
    assert "quantize" not in result.text
    assert result.renamed == {"serving_default_input_1:0": "serving_default_input_1_0",
                              "StatefulPartitionedCall:0": "StatefulPartitionedCall_0"}


def test_every_unsupported_operator_is_listed_in_one_error() -> None:
    q = {"scale": (1 / 256,), "zero_point": (-128,)}
    model = build_model([Tensor("x", (1, 5), "int8", **q), Tensor("s", (1, 5), "int8", **q),
                         Tensor("t", (1, 5), "int8", scale=(1 / 128,), zero_point=(0,)),
                         Tensor("r", (1, 5), "int8", **q)],
                        [Op("LOG", ("x",), ("s",), {}), Op("RSQRT", ("s",), ("t",), {}),
                         Op("RESHAPE", ("t",), ("r",), {"new_shape": [1, 5]})],
                        ["x"], ["r"])
    with pytest.raises(TfliteImportError) as err:
        import_tflite(model)
    msg = str(err.value)
    assert msg.startswith("2 operators cannot be imported: operator 0 (LOG -> `s`): not supported; "
                          "operator 1 (RSQRT -> `t`): not supported"), msg
    assert "--list-ops" in msg and "RESHAPE" not in msg


def test_malformed_files_are_refused_by_what_is_wrong(tmp_path) -> None:
    data = (TESTDATA / "tiny_dscnn.tflite").read_bytes()
    with pytest.raises(TfliteImportError, match=r"not a TFLite model: bytes 4-7 are b'PK"):
        import_tflite(b"PK\x03\x04" * 4)
    with pytest.raises(TfliteImportError, match="root table offset .* is past the end"):
        import_tflite(b"\xff\xff\x00\x00TFL3")
    with pytest.raises(TfliteImportError, match="malformed flatbuffer|past the end|out of range"):
        import_tflite(data[:len(data) // 3])
    missing = tmp_path / "absent.tflite"
    with pytest.raises(TfliteImportError, match="absent.tflite: cannot read"):
        import_tflite(missing)


def test_int8_conv_without_quantized_weights_names_the_operator() -> None:
    q = {"scale": (0.1,), "zero_point": (0,)}
    model = build_model([Tensor("x", (1, 3, 3, 1), "int8", **q),
                         Tensor("w", (1, 1, 1, 1), "int8", data=np.ones((1, 1, 1, 1), np.int8)),
                         Tensor("y", (1, 3, 3, 1), "int8", **q)],
                        [Op("CONV_2D", ("x", "w", None), ("y",), {"padding": "VALID", "stride_w": 1, "stride_h": 1})],
                        ["x"], ["y"])
    with pytest.raises(TfliteImportError, match=r"operator 0 \(CONV_2D -> `y`\): the weights `w` are int8 "
                                                 "without quantization parameters"):
        import_tflite(model)


@pytest.mark.parametrize("begin, end, strides, masks", [
    ([0, 8, -1, 4], [1, 0, -12, 0], [1, -3, -2, -1], {"end_mask": 0b1000}),       # backwards, end_mask past 0
    ([0, -2, 1, 0], [1, 100, 11, 5], [1, 1, 4, 2], {"begin_mask": 0b0010, "shrink_axis_mask": 0b0001}),
    ([0, 6, 3], [1, 7, 4], [1, 1, 1], {"shrink_axis_mask": 0b0110}),              # trailing axis taken whole
])
def test_strided_slice_forms_match_litert(begin, end, strides, masks, tmp_path) -> None:
    """Negative strides and indices, masks, shrinking and fewer indices than axes, against LiteRT."""
    from ai_edge_litert.interpreter import Interpreter

    def model(out_shape):
        return build_model([Tensor("x", (1, 9, 11, 5), "float32"), Tensor("b", (len(begin),), "int32", data=begin),
                            Tensor("e", (len(end),), "int32", data=end),
                            Tensor("s", (len(strides),), "int32", data=strides), Tensor("y", out_shape, "float32")],
                           [Op("STRIDED_SLICE", ("x", "b", "e", "s"), ("y",), masks)], ["x"], ["y"])

    x = np.random.default_rng(7).normal(size=(1, 9, 11, 5)).astype(np.float32)
    it = Interpreter(model_content=model((1,)))        # LiteRT resizes the output: it says the shape
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    graph, weights = import_tflite(model(want.shape)).write(tmp_path)
    ex = Reference(weights, graph).make_executor()
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), want)


#: int8 models whose float graphs (the generator's, before quantization) exercise a float form the
#: committed *_f32 models do not: pools (SAME: TFLite divides by the taps inside the input), valid and
#: strided convolutions with RELU6, batched fully connected, softmax's beta, the element-wise ops
FLOAT_TWINS = ("average_pool_2d_3x3_s2_same", "average_pool_2d_3x3_s2_valid_relu6", "max_pool_2d_3x3_s2_same",
               "conv2d_3x3_valid_s2_relu6", "conv2d_3x3_same_dilation2", "depthwise_conv2d_3x3_valid_s2_mult2",
               "depthwise_conv2d_5x3_same_s2_relu6", "fully_connected_4d_k33", "fully_connected_b3_k13_nobias",
               "softmax_beta0p4_4d", "add_relu", "add_broadcast", "sub_broadcast", "mul", "mul_broadcast",
               "relu", "relu6", "mean", "mean_keep_dims", "concatenation_axis1", "padv2", "strided_slice_masks",
               "transpose_0312", "tiny_dscnn", "tiny_resnet")


@pytest.mark.parametrize("name", FLOAT_TWINS)
def test_float_twins_match_litert(name, tmp_path, monkeypatch) -> None:
    """The float graph of an int8 test model (tools/tflite_testdata.py before it quantizes), every
    tensor within F32_TOLERANCE of LiteRT on the reference."""
    import sys

    sys.path.insert(0, str(DATA.parents[1] / "tools"))
    import tflite_testdata

    float_graph = tflite_testdata.FloatGraph.graph
    monkeypatch.setattr(tflite_testdata.FloatGraph, "graph", lambda g, dtype, **_: float_graph(g, "float32"))
    g = tflite_testdata.MODELS[name]()
    data = build_model(g.tensors, g.ops, g.inputs, g.outputs)
    result = import_tflite(data)
    graph, weights = result.write(tmp_path)
    ex = Reference(weights, graph).make_executor()
    by_index, by_name = litert_inputs(data, 0)
    ex.insert(**feed(result, by_name))
    ex.run_step()
    bad = mismatches(result, data, ex, litert_run(data, by_index), F32_TOLERANCE)
    assert not bad, f"{name} (f32):\n" + "\n".join(bad)
