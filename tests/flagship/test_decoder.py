"""The LLaMA-shaped decoder (examples/decoder.py): the reference equals a plain NumPy decoder
written here, step after step (KV cache growth, RoPE positions, GQA, greedy argmax), and every
CPU target equals the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from example_modules import FLAGSHIP_TARGETS, load_example

import openinfer as oi
from openinfer.reference.executor import Reference
from openinfer.testing import assert_matches_reference

REPO = Path(__file__).resolve().parents[2]


decoder = load_example("decoder")
CFG = decoder.SIZES["test"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return decoder.write(CFG, tmp_path_factory.mktemp("decoder"))


class NumpyDecoder:
    """An independent decode step: float64 NumPy, no OpenInfer code."""

    def __init__(self, w: dict, cfg):
        self.w = {k: v.astype(np.float64) for k, v in w.items()}
        self.cfg = cfg
        self.k = np.zeros((cfg.layers, cfg.max_seq, cfg.kv_dim))
        self.v = np.zeros((cfg.layers, cfg.max_seq, cfg.kv_dim))
        self.pos = 0

    @staticmethod
    def rms(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * g

    def rope(self, x, pos):          # x [heads, Dh]; rotate_half pairs (i, i + Dh/2)
        dh = x.shape[-1]
        freq = 10000.0 ** (-np.arange(0, dh // 2) * 2.0 / dh)
        ang = pos * freq
        a, b = x[:, : dh // 2], x[:, dh // 2:]
        return np.concatenate([a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)], axis=-1)

    def step(self, token: int) -> tuple[np.ndarray, int]:
        c, w, p = self.cfg, self.w, self.pos
        x = w["tok_emb"][token][None, :]
        for layer in range(c.layers):
            lw = {n: w[f"layers.{layer}.{n}"] for n, _ in decoder._LAYER_TENSORS}
            h = self.rms(x, lw["attn_norm"])
            q = self.rope((h @ lw["wq"]).reshape(c.heads, c.head_dim), p)
            k = self.rope((h @ lw["wk"]).reshape(c.kv_heads, c.head_dim), p)
            self.k[layer, p] = k.reshape(-1)
            self.v[layer, p] = (h @ lw["wv"]).reshape(-1)
            keys = self.k[layer, : p + 1].reshape(p + 1, c.kv_heads, c.head_dim)
            vals = self.v[layer, : p + 1].reshape(p + 1, c.kv_heads, c.head_dim)
            heads = []
            for hd in range(c.heads):
                kv = hd // (c.heads // c.kv_heads)
                s = keys[:, kv] @ q[hd] / np.sqrt(c.head_dim)
                a = np.exp(s - s.max())
                heads.append((a / a.sum()) @ vals[:, kv])
            x = x + np.concatenate(heads)[None, :] @ lw["wo"]
            h = self.rms(x, lw["ffn_norm"])
            g = h @ lw["w_gate"]
            x = x + ((g / (1 + np.exp(-g))) * (h @ lw["w_up"])) @ lw["w_down"]
        logits = self.rms(x, w["final_norm"]) @ w["lm_head"]
        self.pos += 1
        return logits, int(np.argmax(logits))


def test_reference_equals_a_plain_numpy_decoder(files):
    graph, model_path = files
    model = oi.ModelLoader.open(model_path)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    plain = NumpyDecoder({k: model.tensor(k) for k in model.tensor_names}, CFG)
    tokens = [3, 17, 200, 5, 9, 42]
    for step, token in enumerate(tokens):
        ex.insert(token=np.array([token], np.int32))
        ex.run_step()
        logits, best = plain.step(token)
        np.testing.assert_allclose(ex.fetch("logits"), logits, rtol=2e-4, atol=2e-4)
        assert int(ex.fetch("next")[0]) == best
        assert int(ex.fetch("pos")) == step + 1


def test_the_cache_overflows_after_max_seq_steps(files):
    graph, model_path = files
    ex = Reference(oi.ModelLoader.open(model_path), oi.load_graph(graph)).make_executor()
    for _ in range(CFG.max_seq):
        ex.insert(token=np.array([1], np.int32))
        ex.run_step()
    ex.insert(token=np.array([1], np.int32))
    with pytest.raises(oi.ExecutionError, match="exceeds fixed size"):
        ex.run_step()


@pytest.mark.parametrize("target", FLAGSHIP_TARGETS)
def test_every_cpu_target_matches_the_reference(files, target, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    graph, model_path = files
    assert_matches_reference(oi.ModelLoader.open(model_path), oi.load_graph(graph), arch=target,
                             feeds=[{"token": np.array([t], np.int32)} for t in (3, 17, 200, 5)],
                             names=("logits", "next"))


# ------------------------------------------------------------------ i8 / i4 weights (dequant_matmul)

@pytest.fixture(scope="module", params=["i8", "i4"])
def quant_files(request, tmp_path_factory):
    cfg = decoder.with_weights(CFG, request.param)
    return cfg, decoder.write(cfg, tmp_path_factory.mktemp(f"decoder_{request.param}"))


def dequantized(model) -> dict:
    """Every tensor as float64, quantized ones times their per-channel scales (axis 1)."""
    out = {}
    for key in model.tensor_names:
        q = model.info(key).quant
        out[key] = model.tensor(key).astype(np.float64) * (1.0 if q is None else q.scales.astype(np.float64))
    return out


def test_quantized_decoder_stores_int_weights_and_equals_numpy(quant_files):
    cfg, (graph, model_path) = quant_files
    model = oi.ModelLoader.open(model_path)
    quantized = [k for k in model.tensor_names if model.info(k).quant is not None]
    assert len(quantized) == 7 * cfg.layers + 1
    assert all(model.info(k).dtype.name == cfg.weights and model.info(k).quant.scale_axis == 1 for k in quantized)
    assert model_path.stat().st_size < CFG.weight_bytes() * (0.45 if cfg.weights == "i8" else 0.35)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    plain = NumpyDecoder(dequantized(model), cfg)
    for token in (3, 17, 200, 5):
        ex.insert(token=np.array([token], np.int32))
        ex.run_step()
        logits, best = plain.step(token)
        np.testing.assert_allclose(ex.fetch("logits"), logits, rtol=2e-4, atol=2e-4)
        assert int(ex.fetch("next")[0]) == best


@pytest.mark.parametrize("target", FLAGSHIP_TARGETS)
def test_quantized_decoder_on_every_cpu_target(quant_files, target, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    _, (graph, model_path) = quant_files
    assert_matches_reference(oi.ModelLoader.open(model_path), oi.load_graph(graph), arch=target,
                             feeds=[{"token": np.array([t], np.int32)} for t in (3, 17, 200)],
                             names=("logits", "next"))


def test_quantized_weights_are_never_dequantized_into_memory(quant_files):
    """The program reads the stored i8/i4 bytes and f32 scales; no buffer holds a dequantized matrix."""
    from openinfer.synthesizer import Synthesizer

    cfg, (graph, model_path) = quant_files
    model = oi.ModelLoader.open(model_path)
    plan = Synthesizer.from_arch(REPO / "devices" / "x86_64-avx512.json").synthesize(model, oi.load_graph(graph))
    assert plan.program.weight_bytes == cfg.weight_bytes()
    mats = {k for k in plan.program.weight_keys if k.rsplit(".", 1)[-1] in decoder.MATRICES}
    assert mats and all(plan.program.weights[k].dtype.name == cfg.weights for k in mats)
    smallest_f32_matrix = 4 * cfg.dim * cfg.kv_dim
    big = [(b.name, b.dtype.name, b.shape) for b in plan.program.buffers.values()
           if b.model_key is None and b.dtype.storage_nbytes(b.numel) >= smallest_f32_matrix]
    assert not big, big
