"""Hand-built ONNX models (an MLP and a CNN) imported and run on the reference and the generated C
(x86_64-generic), against onnxruntime on the same ONNX."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnx_models as models  # noqa: E402

import openinfer as oi  # noqa: E402

CASES = {"mlp": (models.mlp, "input.1", "probs", {"batch": 3}, (3, 8)),
         "cnn": (models.cnn, "image", "logits", {"N": 2}, (2, 3, 16, 16))}


def onnxruntime_outputs(model, input_name: str, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {input_name: x})[0]


@pytest.fixture(scope="module", params=sorted(CASES))
def imported(request, tmp_path_factory):
    build, input_name, output, sizevars, shape = CASES[request.param]
    model = build()
    result = oi.import_onnx(model, name=request.param, sizevars=sizevars)
    graph, oinf = result.write(tmp_path_factory.mktemp(request.param))
    xs = [np.random.default_rng(k).uniform(-1, 1, shape).astype(np.float32) for k in range(2)]
    expected = [onnxruntime_outputs(model, input_name, x) for x in xs]
    return request.param, result, graph, oinf, result.renamed.get(input_name, input_name), output, xs, expected


def _check(executor, input_var, output, xs, expected):
    for x, want in zip(xs, expected, strict=True):
        executor.insert(**{input_var: x})
        executor.run_step()
        np.testing.assert_allclose(executor.fetch(output), want, rtol=1e-4, atol=1e-5)


def test_reference_matches_onnxruntime(imported):
    _, _, graph, oinf, input_var, output, xs, expected = imported
    _check(oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor(), input_var, output, xs,
           expected)


def test_generated_c_matches_onnxruntime(imported, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    _, _, graph, oinf, input_var, output, xs, expected = imported
    sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch="x86_64-generic")
    _check(sim.make_executor(), input_var, output, xs, expected)


def test_graph_reads_like_hand_written_dsl(imported):
    name, result, *_ = imported
    text = result.text
    if name == "cnn":
        assert "BatchNormalization, folded" in text            # the fold is said where it happened
        assert [line.split("(")[0].split()[-1] for line in text.splitlines() if line.strip().startswith("op ")] == \
            ["conv2d", "relu", "max_pool2d", "conv2d", "mean_axis", "reshape", "matmul", "add"]
        assert "image: f32[N, 3, 16, 16];" in text                # the symbolic dim stays a sizevar
        assert "logits: f32[N, 10];" in text
        assert result.tensors["fc_weight"].shape == (10, 16)     # the transB weight as stored ([out, in]) ...
        assert "op matmul(f, fc_weight, transpose_b=true) >> logits;" in text    # ... read transposed
    else:
        assert "input_1: f32[batch, 8];" in text and '// ONNX "input.1"' in text
        assert result.tensors["fc1_weight"].shape == (16, 8)
        assert "op matmul(input_1, fc1_weight, transpose_b=true) >> fc1_Gemm_output_0;" in text
        assert result.sizevars == {"batch": 3}
