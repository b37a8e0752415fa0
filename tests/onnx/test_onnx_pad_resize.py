"""ONNX Pad, Resize and Upsample through `openinfer import` (openinfer/onnx/handlers/resample.py)
against onnxruntime: a small torch-like model (Conv -> nearest x2 -> reflect Pad -> Conv -> linear
align_corners resize) on the reference and the generated C of x86_64-generic and the host's best
target; single nodes over the opsets' spellings (attributes, inputs, axes, negative pads, integer
data) on the reference; the nodes it refuses, each with one line naming it. (The ONNX backend
node tests of these ops: tests/onnx/test_onnx_node_cases.py.)"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

TARGETS = sorted({"x86_64-generic", best_host_target()})
F32 = TensorProto.FLOAT


def _model(nodes, inits, x_shape, y_shape, opset: int, x_type=F32):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", x_type, x_shape)],
                          [helper.make_tensor_value_info("y", x_type, y_shape)],
                          initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _onnxruntime(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _run(m, x, tmp_path, targets=()):
    result, executors = imported_executors(m, tmp_path, targets)
    outs = []
    for ex in executors:
        ex.insert(x=x)
        ex.run_step()
        outs.append(ex.fetch("y"))
    return result.text, outs


def test_torch_like_upsampling_block_matches_onnxruntime(tmp_path, monkeypatch):
    """[1, 3, 11, 13] -> Conv 3x3 pad 1 -> Resize x2 nearest (torch's: asymmetric, floor) -> Pad
    reflect 1 -> Conv 3x3 -> Resize to [31, 37] linear align_corners (torch's bilinear,
    align_corners=True)."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(11)
    inits = {"w1": rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.5,
             "b1": rng.standard_normal(4).astype(np.float32),
             "w2": rng.standard_normal((5, 4, 3, 3)).astype(np.float32) * 0.3,
             "b2": rng.standard_normal(5).astype(np.float32),
             "scales": np.array([1, 1, 2, 2], dtype=np.float32), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1]),
             "sizes": np.array([1, 5, 31, 37])}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="/conv1/Conv"),
             helper.make_node("Resize", ["c1", "", "scales"], ["up"], mode="nearest", nearest_mode="floor",
                              coordinate_transformation_mode="asymmetric", name="/up/Resize"),
             helper.make_node("Pad", ["up", "pads"], ["padded"], mode="reflect", name="/pad/Pad"),
             helper.make_node("Conv", ["padded", "w2", "b2"], ["c2"], name="/conv2/Conv"),
             helper.make_node("Resize", ["c2", "", "", "sizes"], ["y"], mode="linear",
                              coordinate_transformation_mode="align_corners", name="/interp/Resize")]
    m = _model(nodes, inits, [1, 3, 11, 13], [1, 5, 31, 37], 19)
    x = rng.standard_normal((1, 3, 11, 13)).astype(np.float32)
    want = _onnxruntime(m, x)
    text, outs = _run(m, x, tmp_path, TARGETS)
    assert "op resize(" in text and 'mode="reflect"' in text, text
    for got in outs:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _pad_node(opset, mode, pads, value=None, axes=None, x_type=F32):
    inits, ins, attrs = {}, ["x"], {"mode": mode}
    if opset < 11:
        attrs["pads"] = pads
        if value is not None:
            attrs["value"] = value
    else:
        inits["pads"] = np.array(pads, dtype=np.int64)
        ins.append("pads")
        if value is not None:
            inits["value"] = np.array(value, dtype=np.float32 if x_type == F32 else np.int32)
        ins.append("value" if value is not None else "")
        if axes is not None:
            inits["axes"] = np.array(axes, dtype=np.int64)
            ins.append("axes")
    return helper.make_node("Pad", ins, ["y"], name="/p/Pad", **attrs), inits


#: (opset, mode, pads, constant value, axes, x's shape, integer data)
PADS = [(2, "constant", [0, 1, 2, 1, 0, 3], -1.5, None, [2, 3, 5], False),
        (13, "edge", [1, 0, 3, 2, 2, 0], None, None, [2, 3, 5], False),
        (13, "reflect", [0, 2, 4, 0, 2, 0], None, None, [2, 3, 5], False),
        (13, "constant", [-1, 2, 0, 1, 0, -3], 7.0, None, [3, 4, 5], False),
        (18, "reflect", [2, 1, 1, 3], None, [3, -2], [1, 3, 4, 5], False),
        (18, "constant", [1, 2], 9, [1], [2, 3], True)]


@pytest.mark.parametrize("opset, mode, pads, value, axes, shape, ints", PADS,
                         ids=["opset2_attrs", "edge", "reflect", "negative_crop", "axes_reflect", "int_axes"])
def test_pad_matches_onnxruntime(opset, mode, pads, value, axes, shape, ints, tmp_path):
    x_type = TensorProto.INT32 if ints else F32
    node, inits = _pad_node(opset, mode, pads, value, axes, x_type)
    x = np.random.default_rng(3).integers(-50, 50, shape).astype(np.int32) if ints else \
        np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    m = _model([node], inits, shape, None, opset, x_type)
    want = _onnxruntime(m, x)
    _, (got,) = _run(m, x, tmp_path)
    np.testing.assert_array_equal(got, want)


def _resize_model(op, opset, shape, mode, *, scales=None, sizes=None, x_type=F32, **attrs):
    inits = {}
    if op == "Upsample" and opset < 9:
        ins, attrs["scales"] = ["x"], scales
    elif op == "Upsample" or opset < 11:
        inits["scales"] = np.array(scales, dtype=np.float32)
        ins = ["x", "scales"]
    elif sizes is not None:       # Resize-11 takes roi and scales, empty, beside sizes
        inits.update(roi=np.array([], np.float32), scales=np.array([], np.float32),
                     sizes=np.array(sizes, dtype=np.int64))
        ins = ["x", "roi", "scales", "sizes"]
    else:
        inits["scales"] = np.array(scales, dtype=np.float32)
        ins = ["x", "", "scales"]
    node = helper.make_node(op, ins, ["y"], mode=mode, name=f"/r/{op}", **attrs)
    return _model([node], inits, shape, None, opset, x_type)


#: (op, opset, x's shape, mode, scales, sizes, attributes)
RESIZES = [("Upsample", 7, [1, 2, 3, 4], "nearest", [1.0, 1.0, 2.0, 3.0], None, {}),
           ("Upsample", 9, [1, 2, 3, 4], "linear", [1, 1, 2, 2.5], None, {}),
           ("Resize", 10, [1, 2, 5, 7], "nearest", [1, 1, 2.6, 1.5], None, {}),
           ("Resize", 10, [1, 2, 5, 7], "nearest", [1, 1, 0.6, 0.45], None, {}),
           ("Resize", 11, [1, 2, 5, 7], "linear", None, [1, 2, 9, 4], {}),
           ("Resize", 13, [2, 3, 7], "linear", [1, 1, 0.7], None,
            {"coordinate_transformation_mode": "pytorch_half_pixel"}),
           ("Resize", 13, [1, 1, 4, 6], "nearest", None, [1, 1, 7, 11],
            {"coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"}),
           ("Resize", 19, [3, 4, 5], "linear", [1.5, 0.5, 2.2], None, {}),
           ("Resize", 19, [1, 2, 5, 7], "nearest", [1, 1, 1.7, 0.6], None,
            {"coordinate_transformation_mode": "half_pixel_symmetric", "nearest_mode": "ceil"})]


@pytest.mark.parametrize("op, opset, shape, mode, scales, sizes, attrs", RESIZES,
                         ids=["upsample7", "upsample9_linear", "resize10_up", "resize10_down", "resize11_sizes",
                              "pytorch_half_pixel", "nearest_corners_ceil_prefer", "trilinear", "symmetric_ceil"])
def test_resize_matches_onnxruntime(op, opset, shape, mode, scales, sizes, attrs, tmp_path):
    m = _resize_model(op, opset, shape, mode, scales=scales, sizes=sizes, **attrs)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    want = _onnxruntime(m, x)
    _, (got,) = _run(m, x, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_nearest_resize_of_integers_copies_them(tmp_path):
    m = _resize_model("Resize", 19, [1, 1, 3, 4], "nearest", sizes=[1, 1, 5, 7], x_type=TensorProto.INT8)
    x = np.random.default_rng(1).integers(-128, 128, (1, 1, 3, 4)).astype(np.int8)
    _, (got,) = _run(m, x, tmp_path)
    np.testing.assert_array_equal(got, _onnxruntime(m, x))


@pytest.mark.parametrize("model, message", [
    (lambda: _model([_pad_node(13, "wrap", [1, 1])[0]], _pad_node(13, "wrap", [1, 1])[1], [4], None, 13),
     "mode 'wrap' is not supported"),
    (lambda: _model([_pad_node(13, "reflect", [-1, 1])[0]], _pad_node(13, "reflect", [-1, 1])[1], [4], None, 13),
     "negative pads"),
    (lambda: _resize_model("Resize", 19, [1, 1, 4, 4], "cubic", scales=[1, 1, 2, 2]), "mode 'cubic'"),
    (lambda: _resize_model("Resize", 19, [1, 1, 4, 4], "linear", scales=[1, 1, 0.5, 0.5], antialias=1),
     "antialias=1"),
    (lambda: _resize_model("Resize", 19, [1, 1, 4, 4], "linear", sizes=[1, 1, 2, 2],
                           coordinate_transformation_mode="tf_crop_and_resize"), "'tf_crop_and_resize'"),
    (lambda: _resize_model("Resize", 19, [1, 1, 4, 4], "nearest", sizes=[1, 1, 2, 3],
                           keep_aspect_ratio_policy="not_larger"), "keep_aspect_ratio_policy 'not_larger'"),
    (lambda: _resize_model("Resize", 19, [1, 4], "linear", sizes=[1, 8], x_type=TensorProto.INT8),
     "mode linear on i8 data"),
    (lambda: _resize_model("Resize", 10, [1, 1, 4, 4], "nearest", scales=[1, 1, 2, 0.5]),
     "both up and down"),
], ids=["wrap", "negative_reflect", "cubic", "antialias", "tf_crop_and_resize", "aspect_policy", "linear_int",
        "resize10_up_and_down"])
def test_refusals_are_one_line_naming_the_node(model, message):
    with pytest.raises(oi.OnnxImportError) as err:
        oi.import_onnx(model())
    text = str(err.value)
    assert text.startswith('node "/') and message in text and "\n" not in text, text
