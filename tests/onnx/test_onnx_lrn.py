"""ONNX LRN through `openinfer import` (openinfer/onnx/handlers/nn.py): attributes as the node gives them,
the ONNX defaults where it gives none, against onnxruntime on the reference (and, for the nodes
giving every attribute, on the generated C of x86_64-generic and the host's best target; the LRN
kernels themselves: tests/synth/test_lrn_kernels.py); the nodes it refuses, each with one line
naming it."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

TARGETS = sorted({"x86_64-generic", best_host_target()})


def _lrn_model(shape: list[int], **attrs):
    node = helper.make_node("LRN", ["x"], ["y"], name="/norm/LRN", **attrs)
    g = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


#: (shape, attributes): AlexNet's, every attribute set (7 channels, a plane of 17 positions: one AVX2
#: vector and a tail), and the defaults (only `size`; windows wider than the channels). 4-D only:
#: onnxruntime's LRN takes no other rank
CASES = [([1, 13, 6, 7], {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
         ([2, 7, 1, 17], {"size": 3, "alpha": 0.5, "beta": 0.9, "bias": 2.0}),
         ([1, 2, 3, 11], {"size": 5})]


@pytest.mark.parametrize("shape, attrs", CASES, ids=["alexnet", "all_attrs", "defaults"])
def test_lrn_matches_onnxruntime(shape, attrs, tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    m = _lrn_model(shape, **attrs)
    x = (np.random.default_rng(5).standard_normal(shape) * 3).astype(np.float32)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    result = oi.import_onnx(m, name="lrn")
    # the node's attributes as it stores them (f32: alpha 1e-4 is 9.999999747378752e-05)
    stored = {a.name: helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
    given = [f"{k}={stored[k]!r}" for k in ("size", "alpha", "beta", "bias") if k in stored]
    assert f"op lrn(x, {', '.join(given)}) >> y;" in result.text, result.text
    graph, weights = result.write(tmp_path)
    model = oi.ModelLoader.open(weights)
    engines = [oi.Reference(model, graph).make_executor()]
    if len(attrs) == 4:
        engines += [Simulator(model, graph, arch=target).make_executor() for target in TARGETS]
    for ex in engines:
        ex.insert(x=x)
        ex.run_step()
        np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, attrs, message", [
    ([1, 3, 4], {}, "size is required"),
    ([1, 3, 4], {"size": 0}, "size 0: expected at least 1"),
    ([5], {"size": 3}, "a 1-D input: expected [N, C, ...]"),
    ([1, 3, 4], {"size": 3, "axis": 1}, "attribute `axis` is not supported"),
])
def test_lrn_refusals_are_one_line_naming_the_node(shape, attrs, message):
    with pytest.raises(oi.OnnxImportError) as err:
        oi.import_onnx(_lrn_model(shape, **attrs))
    text = str(err.value)
    assert text.startswith('node "/norm/LRN" (LRN): ') and message in text and "\n" not in text
