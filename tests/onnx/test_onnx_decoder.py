"""Decode steps with a KV cache (issue 42, openinfer/onnx/decoder.py): GPT-2, LLaMA (RoPE at
run-time positions, GQA) and a Qwen2-style decoder exported by tools/export_onnx_models.py as one
token in, past/present key-values per layer, imported with --cache-capacity as persistent cache
tables. Each step's logits equal onnxruntime's (fed the growing past itself) up to the cache's
capacity, and `generate` gives torch's own greedy ids, on the reference and the generated C, from
one build that grows to the capacity; LLaMA also through Vulkan on lavapipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import openinfer as oi  # noqa: E402
from openinfer.errors import OnnxImportError  # noqa: E402
from openinfer.generate import generate, roles_of  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "onnx"
MODELS = ("gpt2_step", "llama_step", "qwen_step")
CAPACITY = 40                        # the 5 prompt ids and 32 new tokens need 36 rows
TARGETS = sorted({"x86_64-generic", best_host_target()})


@pytest.fixture(scope="module", params=MODELS)
def imported(request, tmp_path_factory):
    name = request.param
    model = oi.import_onnx(DATA / f"{name}.onnx", cache_capacity=CAPACITY)
    graph, oinf = model.write(tmp_path_factory.mktemp(name))
    return name, model, graph, oinf


def _executor(graph, oinf, arch):
    loader, g = oi.ModelLoader.open(oinf), oi.load_graph(graph)
    if arch is None:
        ex = oi.Reference(loader, g).make_executor()
        return ex, roles_of(ex.bound, loader.metadata)
    sim = oi.Simulator(loader, g, arch=arch)
    return sim.make_executor(), roles_of(sim.bound, loader.metadata)


def test_the_cache_is_persistent_tables_not_inputs(imported):
    name, model, *_ = imported
    head, _, body = model.text.partition("block entry")
    assert "past_key_values" not in head.split("dynamic {")[1].split("}")[0]
    assert "@table @fixed(t=40)" in head and "// A decode step" in head and "// Fixed at import" not in head
    assert ("// For `openinfer generate` (the .oinf metadata): generate.capacity = 40, generate.input = input_ids, "
            "generate.logits = logits") in head
    # the layers are one loop: key and value written once each in its body (and the token counter),
    # into one table per pair with the layer as its first index
    assert body.count("cache.write") == 2 + 1 and body.count("\n    loop ") == 1
    assert head.count("(l, t): ") == 2 and head.count("@table @fixed(l=2, t=40)") == 2
    assert len(re.findall(r"cache\.write \w+ >> \w+\[l, posv\];", body)) == 2
    assert model.metadata == {"dynamic.kv": CAPACITY, "generate.capacity": CAPACITY, "generate.logits": "logits",
                              "generate.input": "input_ids"}


@pytest.mark.parametrize("arch", [None, best_host_target()])
def test_every_step_matches_onnxruntime_up_to_the_capacity(imported, arch, tmp_path_factory, monkeypatch):
    """Random tokens, teacher-forced: onnxruntime gets the past key/values it returned, openinfer
    keeps its own in the cache tables; the logits agree at every length 1..capacity."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    name, _, graph, oinf = imported
    session = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    ins = session.get_inputs()
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in ins[1:]}
    executor, _ = _executor(graph, oinf, arch)
    rng = np.random.default_rng(7)
    for step in range(CAPACITY):
        token = np.array([[rng.integers(0, 128)]], np.int64)
        expected, *present = session.run(None, {"input_ids": token, **past})
        past = dict(zip(past, present, strict=True))
        executor.insert(input_ids=token)
        executor.run_step()
        np.testing.assert_allclose(executor.fetch("logits"), expected, atol=2e-5, rtol=1e-4, err_msg=f"step {step}")


@pytest.mark.parametrize("arch", [None, *TARGETS])
def test_generate_gives_torchs_greedy_ids(imported, arch, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    name, _, graph, oinf = imported
    data = np.load(DATA / f"{name}.npz")
    executor, roles = _executor(graph, oinf, arch)
    result = generate(executor, roles, data["prompt"].tolist(), len(data["torch_ids"]))
    assert list(result.ids) == data["torch_ids"].tolist()


def test_import_and_generate_from_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "openinfer", "import", str(DATA / "llama_step.onnx"), "-o",
                          str(tmp_path), "--cache-capacity", "12"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = subprocess.run([sys.executable, "-m", "openinfer", "generate", str(tmp_path / "llama_step.oig"), "-m",
                          str(tmp_path / "llama_step.oinf"), "--prompt-ids", "5,17,42,9,77", "--max-new-tokens",
                          "8", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["ids"] == np.load(DATA / "llama_step.npz")["torch_ids"][:8].tolist()
    # generated C built for the logits alone (the planner shares the other buffers' memory: the
    # counter's copy `posv`, read only by the cache writes, once shared a buffer written before
    # them), filled to the last row of the cache
    run = subprocess.run([sys.executable, "-m", "openinfer", "generate", str(tmp_path / "llama_step.oig"), "-m",
                          str(tmp_path / "llama_step.oinf"), "--arch", "devices/x86_64-generic.json", "--prompt-ids",
                          "5,17,42,9,77", "--max-new-tokens", "8", "--json"], capture_output=True, text=True,
                         env={**os.environ, "OI_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["ids"] == np.load(DATA / "llama_step.npz")["torch_ids"][:8].tolist()
    over = subprocess.run([sys.executable, "-m", "openinfer", "generate", str(tmp_path / "llama_step.oig"), "-m",
                           str(tmp_path / "llama_step.oinf"), "--prompt-ids", "5,17,42,9,77", "--max-new-tokens",
                           "9"], capture_output=True, text=True)
    assert over.returncode == 1 and "more than its capacity 12" in over.stderr


def test_a_decode_step_needs_a_capacity_and_only_a_decode_step_takes_one():
    with pytest.raises(OnnxImportError, match="decode step with past/present key-values .* --cache-capacity N"):
        oi.import_onnx(DATA / "gpt2_step.onnx")
    with pytest.raises(OnnxImportError, match="the model has no past/present key-values"):
        oi.import_onnx(DATA / "resnet.onnx", sizevars={"batch": 1}, cache_capacity=8)


def test_generate_on_vulkan_lavapipe(tmp_path, monkeypatch):
    """LLaMA's decode step through generated GLSL + Vulkan on Mesa's lavapipe, validation layer on:
    torch's greedy ids, the cache growing in one build."""
    from vulkan.conftest import use_lavapipe

    lavapipe = use_lavapipe(monkeypatch, tmp_path / "vk-cache")
    graph, oinf = oi.import_onnx(DATA / "llama_step.onnx", cache_capacity=CAPACITY).write(tmp_path / "llama")
    loader = oi.ModelLoader.open(oinf)
    sim = oi.Simulator(loader, oi.load_graph(graph), arch=lavapipe)
    data = np.load(DATA / "llama_step.npz")
    result = generate(sim.make_executor(), roles_of(sim.bound, loader.metadata), data["prompt"].tolist(),
                      len(data["torch_ids"]))
    assert list(result.ids) == data["torch_ids"].tolist()
    assert sim.validation_messages() == 0
