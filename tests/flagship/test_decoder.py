"""The LLaMA-shaped decoder (examples/decoder.py): the reference equals a plain NumPy decoder
written here, step after step (KV cache growth, RoPE positions, GQA, greedy argmax), and every
CPU target equals the reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator

REPO = Path(__file__).resolve().parents[2]


def _decoder_module():
    spec = importlib.util.spec_from_file_location("decoder_example", REPO / "examples" / "decoder.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


decoder = _decoder_module()
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


@pytest.mark.parametrize("target", ["x86_64-generic", "x86_64-avx2", "x86_64-avx512"])
def test_every_cpu_target_matches_the_reference(files, target, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    graph, model_path = files
    model, g = oi.ModelLoader.open(model_path), oi.load_graph(graph)
    ref = Reference(model, g)
    ex_ref, ex_sim = ref.make_executor(), Simulator(model, g, arch=target).make_executor()
    for token in (3, 17, 200, 5):
        for ex in (ex_ref, ex_sim):
            ex.insert(token=np.array([token], np.int32))
            ex.run_step()
        rows = [compare(n, ref.bound.vars[n].dtype, ex_ref.fetch(n), ex_sim.fetch(n)) for n in ("logits", "next")]
        assert all(r.ok for r in rows), table(rows)
