"""Whole models exported from PyTorch (tools/export_onnx_models.py: BERT, GPT-2 and LLaMA-style
transformers from `transformers` configs, a ResNet-style CNN from torchvision, random weights):
each committed ONNX is imported, run on the reference and on generated C (x86_64-generic and the
host's best CPU target), and compared with onnxruntime on the same ONNX and inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import openinfer as oi  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "onnx"
#: model -> (output, the fused ops its imported graph must use, absolute and relative tolerance)
MODELS = {"bert": ("last_hidden_state", {"sdpa", "layer_norm", "gelu"}, 2e-5, 1e-4),
          "gpt2": ("logits", {"sdpa", "layer_norm", "gelu"}, 2e-5, 1e-4),
          "llama": ("logits", {"sdpa", "rms_norm", "silu"}, 2e-5, 1e-4),
          "resnet": ("logits", {"conv2d", "max_pool2d"}, 2e-5, 1e-4)}
#: the portable C, the host's widest target, and the NEON wing (under QEMU on another machine)
TARGETS = sorted({"x86_64-generic", best_host_target(), "aarch64-neon"})


def _ops(text: str) -> set[str]:
    return {line.split("(")[0].split()[-1] for line in text.splitlines() if line.strip().startswith("op ")}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request, tmp_path_factory):
    name = request.param
    data = np.load(DATA / f"{name}.npz")
    inputs = {k[3:]: data[k] for k in data.files if k.startswith("in/")}
    sizevars = {k[8:]: int(data[k]) for k in data.files if k.startswith("sizevar/")}
    output = MODELS[name][0]
    session = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    expected = session.run([output], inputs)[0]
    imported = oi.import_onnx(DATA / f"{name}.onnx", sizevars=sizevars)
    graph, oinf = imported.write(tmp_path_factory.mktemp(name))
    feed = {imported.renamed.get(k, k): v for k, v in inputs.items()}
    return name, imported, graph, oinf, feed, imported.renamed.get(output, output), expected, data[f"torch/{output}"]


def _check(name, executor, feed, output, expected):
    executor.insert(**feed)
    executor.run_step()
    got = executor.fetch(output)
    _, _, atol, rtol = MODELS[name]
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol)


def test_export_matches_pytorch(model):
    """The committed ONNX still computes what PyTorch did when it was exported."""
    *_, expected, framework = model
    np.testing.assert_allclose(expected, framework, atol=1e-5, rtol=1e-4)


def test_imported_graph_uses_the_fused_ops(model):
    """The fused ops are there, and no attention is left as plain ops (torch's SDPA decomposition:
    softmax, and is_nan for its guard)."""
    name, imported, *_ = model
    ops = _ops(imported.text)
    assert MODELS[name][1] <= ops and not {"softmax", "is_nan"} & ops


def test_reference_matches_onnxruntime(model):
    name, _, graph, oinf, feed, output, expected, _ = model
    _check(name, oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor(), feed, output,
           expected)


@pytest.mark.parametrize("arch", TARGETS)
def test_generated_c_matches_onnxruntime(model, arch, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    name, _, graph, oinf, feed, output, expected, _ = model
    sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=arch)
    _check(name, sim.make_executor(), feed, output, expected)


def test_vulkan_on_lavapipe_matches_onnxruntime(tmp_path, monkeypatch):
    """The smallest transformer (BERT: sdpa with the padding mask as a bool mask, layer_norm, gelu)
    through generated GLSL + Vulkan on Mesa's lavapipe, validation layer on."""
    from vulkan.conftest import use_lavapipe

    lavapipe = use_lavapipe(monkeypatch, tmp_path / "vk-cache")
    data = np.load(DATA / "bert.npz")
    inputs = {k[3:]: data[k] for k in data.files if k.startswith("in/")}
    sizevars = {k[8:]: int(data[k]) for k in data.files if k.startswith("sizevar/")}
    output = MODELS["bert"][0]
    session = ort.InferenceSession(str(DATA / "bert.onnx"), providers=["CPUExecutionProvider"])
    expected = session.run([output], inputs)[0]
    imported = oi.import_onnx(DATA / "bert.onnx", sizevars=sizevars)
    graph, oinf = imported.write(tmp_path / "bert")
    sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=lavapipe)
    _check("bert", sim.make_executor(), {imported.renamed.get(k, k): v for k, v in inputs.items()},
           imported.renamed.get(output, output), expected)
    assert sim.validation_messages() == 0
