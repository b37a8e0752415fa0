"""The BERT-shaped encoder, the small CNN and the streaming conv/recurrent graph: the reference
equals plain NumPy implementations written here, and every CPU target equals the reference."""

from __future__ import annotations

import numpy as np
import pytest
from example_modules import FLAGSHIP_TARGETS, load_example

import openinfer as oi
from openinfer.reference.executor import Reference
from openinfer.testing import assert_matches_reference

encoder, cnn = load_example("encoder"), load_example("cnn")
ENC = encoder.SIZES["test"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("flagship")
    files = cnn.write(out)
    files["encoder"] = encoder.write(ENC, out)
    return files


def ln(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * g + b


def numpy_encoder(w, tokens, mask):
    from math import erf

    c = ENC
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = ln(w["tok_emb"][tokens] + w["pos_emb"], w["emb_g"], w["emb_b"], 1e-12)
    for layer in range(c.layers):
        p = {n: w[f"layer.{layer}.{n}"] for n, _ in encoder.LAYER_TENSORS}
        heads = []
        for h in range(c.heads):
            sl = slice(h * c.head_dim, (h + 1) * c.head_dim)
            q, k, v = ((x @ p[f"w{n}"] + p[f"b{n}"])[:, sl] for n in "qkv")
            s = q @ k.T / np.sqrt(c.head_dim)
            s = np.where(mask[None, :], s, -np.inf)
            a = np.exp(s - s.max(-1, keepdims=True))
            heads.append((a / a.sum(-1, keepdims=True)) @ v)
        x = ln(x + np.concatenate(heads, axis=1) @ p["wo"] + p["bo"], p["ln1_g"], p["ln1_b"], 1e-12)
        f = x @ p["w1"] + p["b1"]
        f = 0.5 * f * (1 + np.vectorize(erf)(f / np.sqrt(2)))
        x = ln(x + f @ p["w2"] + p["b2"], p["ln2_g"], p["ln2_b"], 1e-12)
    return np.tanh(x[:1] @ w["pool_w"] + w["pool_b"])


def test_encoder_reference_equals_numpy(built):
    graph, model_path = built["encoder"]
    model = oi.ModelLoader.open(model_path)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, ENC.vocab, ENC.seq).astype(np.int32)
    mask = np.array([True] * 6 + [False] * 2)
    ex.insert(tokens=tokens, mask=mask)
    ex.run_step()
    want = numpy_encoder({k: model.tensor(k) for k in model.tensor_names}, tokens, mask)
    np.testing.assert_allclose(ex.fetch("pooled"), want, rtol=1e-4, atol=1e-5)


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + kh, j:j + kw], w)
    return out + b[None, :, None, None]


def pool(x, k, fn):
    n, c, h, w = x.shape
    return fn(x.reshape(n, c, h // k, k, w // k, k), axis=(3, 5))


def test_cnn_reference_equals_numpy(built):
    graph, model_path = built["cnn"]
    model = oi.ModelLoader.open(model_path)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    image = np.random.default_rng(4).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    ex.insert(image=image)
    ex.run_step()
    w = {k: model.tensor(k).astype(np.float64) for k in model.tensor_names}
    a = pool(np.maximum(conv2d(image.astype(np.float64), w["w1"], w["b1"], 1), 0), 2, np.max)
    a = pool(np.maximum(conv2d(a, w["w2"], w["b2"], 1), 0), 2, np.mean)
    logits = a.reshape(1, -1) @ w["fc_w"] + w["fc_b"]
    np.testing.assert_allclose(ex.fetch("logits"), logits, rtol=1e-4, atol=1e-5)
    assert int(ex.fetch("label")[0]) == int(np.argmax(logits))


def test_streaming_conv_equals_the_conv_of_the_whole_stream(built):
    graph, model_path = built["stream"]
    model = oi.ModelLoader.open(model_path)
    ex = Reference(model, oi.load_graph(graph)).make_executor()
    w = {k: model.tensor(k).astype(np.float64) for k in model.tensor_names}
    frames = np.random.default_rng(5).uniform(-1, 1, (6, 8)).astype(np.float32)
    stream = np.concatenate([np.zeros((3, 8)), frames.astype(np.float64)])       # causal: K-1 zeros first
    h = np.zeros(16)
    for t in range(6):
        ex.insert(frame=frames[t].reshape(1, 8, 1))
        ex.run_step()
        window = stream[t:t + 4]                                                  # [K, C]
        y = np.einsum("kc,ock->o", window, w["conv_w"]) + w["conv_b"]
        h = np.tanh(y @ w["wx"] + h @ w["wh"] + w["rb"])
        np.testing.assert_allclose(ex.fetch("y").reshape(-1), y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ex.fetch("state").reshape(-1), h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", FLAGSHIP_TARGETS)
@pytest.mark.parametrize("name", ["encoder", "cnn", "stream"])
def test_targets_match_the_reference(built, name, target, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    graph, model_path = built[name]
    rng = np.random.default_rng(6)
    outputs = {"encoder": ["pooled"], "cnn": ["logits", "label"], "stream": ["y", "h"]}[name]
    feeds = []
    for _ in range(3):
        if name == "encoder":
            feeds.append({"tokens": rng.integers(0, ENC.vocab, ENC.seq).astype(np.int32),
                          "mask": np.arange(ENC.seq) < rng.integers(1, ENC.seq + 1)})
        elif name == "cnn":
            feeds.append({"image": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)})
        else:
            feeds.append({"frame": rng.uniform(-1, 1, (1, 8, 1)).astype(np.float32)})
    assert_matches_reference(oi.ModelLoader.open(model_path), oi.load_graph(graph), arch=target, feeds=feeds,
                             names=outputs)
