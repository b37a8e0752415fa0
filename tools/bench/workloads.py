"""The workloads of tools/bench/suite.py, each defined once for every implementation:

- the OpenInfer graph (DSL text) and its weights (the .oinf tensors);
- the same computation as an ONNX graph built with onnx.helper (onnxruntime and IREE run it);
- where it is short, a NumPy (and a PyTorch) version;
- the inputs of one pass, the outputs that are checked, and the roofline terms: the bytes a step
  must read from memory and the FLOPs it does.

What is compared, row by row:

- gemm: C = A @ B, f32 1024^3; A is an input (set every step), B a constant (an initializer);
  every implementation takes A from and returns C to the host.
- mlp: y = relu(x W1 + b1) W2 + b2, 1024 -> 4096 -> 1024, batch 1 (tools/bench/mlp.py).
- decoder-test / decoder-bench: one greedy decode step of examples/decoder.py. OpenInfer keeps the
  KV cache (max_seq rows per layer) and the position in persistent tables. The ONNX graph takes the
  same state as inputs and returns it as outputs (fed back, not copied, on the next step): past K/V
  per layer [max_seq, kv_dim] with the new row written at `pos` (ScatterND), and `pos` itself
  (returned + 1); attention covers all max_seq rows with the mask `row <= pos`, as OpenInfer's
  validity table does; RoPE cos/sin come from [max_seq, head_dim/2] tables gathered at `pos` (the
  same f64-computed angles, rounded to f32). The NumPy version attends over the rows written so
  far (the same math without the masked rows). A pass is max_seq steps from an empty cache
  (positions 0 .. max_seq-1, the same token sequence everywhere) and every step's logits are
  checked. Bytes per step: every weight except the token-embedding table, of which one row is read
  (the KV cache, under 1% here, is left out).
- decoder-i8 / decoder-i4: decoder-bench with the projections and the LM head stored as int8 /
  int4 with per-channel scales (`examples/decoder.py --weights`), OpenInfer only (no peer runs
  this computation at these bytes: see `decoder`), against its floor; the suite also reports the
  time in the dequant_matmul nodes (a per-node profile) against the bytes of their matrices.
- encoder: examples/encoder.py at its bench size (seq 128, 4 layers, D 256), 112 real tokens and
  16 padded; output the pooled [CLS] embedding. GELU is the erf form (ONNX: Div/Erf/Add/Mul/Mul,
  which onnxruntime fuses), LayerNorm is ONNX LayerNormalization.
- cnn: examples/cnn.py's image classifier (conv-relu-maxpool-conv-relu-avgpool-linear) on one
  3x32x32 image; output the logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from benchlib import OnnxBuilder, load_example

F32 = "float32"


@dataclass
class Workload:
    name: str
    title: str
    graph: str                                   # the OpenInfer graph (DSL)
    tensors: dict[str, np.ndarray]               # its .oinf tensors
    sizevars: dict[str, int]
    feeds: list[dict[str, np.ndarray]]           # the inputs of each step of one pass
    outputs: list[str]                           # checked after each step (same name in every implementation)
    onnx: Callable | None                        # () -> onnx.ModelProto: the same computation (None: no peer runs it)
    state: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)  # ONNX: input -> (output, initial)
    numpy: Callable | None = None                # () -> runner (reset(), step(feeds) -> {output: array})
    torch: Callable | None = None                # the same, with PyTorch
    bytes: int = 0                               # memory a step must read (the roofline's bandwidth term)
    flops: float = 0.0                           # its FLOPs (the roofline's compute term)
    notes: str = ""
    #: (feeds) -> {output: the magnitude of the terms of its sums}, for outputs whose elements
    #: cancel (openinfer.compare's `magnitude`); None: each element against its own value
    terms: Callable | None = None
    #: an op whose nodes stream most of the bytes (the quantized decoder's dequant_matmul): the suite
    #: profiles OpenInfer's step and reports the time in these nodes against `stream_bytes` of them
    stream_op: str | None = None
    stream_bytes: int = 0


class _Stateless:
    """A runner of a pure function of the feeds."""

    def __init__(self, fn):
        self.fn = fn

    def reset(self):
        pass

    def step(self, feeds):
        return self.fn(feeds)


def _nbytes(tensors: dict, skip=()) -> int:
    return sum(v.nbytes for k, v in tensors.items() if k not in skip)


# ------------------------------------------------------------------------------------------ GEMM
def gemm(tensors: dict | None = None, n: int = 1024) -> Workload:
    import gemm as g

    a, b = g.operands(n)
    tensors = tensors if tensors is not None else {"b": b}

    def onnx():
        ob = OnnxBuilder("gemm")
        ob.op("MatMul", "a", ob.const(tensors["b"], "b"), out="c")
        return ob.model([("a", F32, [n, n])], [("c", F32, [n, n])])

    def numpy():
        w = tensors["b"]
        return _Stateless(lambda f: {"c": f["a"] @ w})

    def torch():
        import torch as t

        w = t.from_numpy(np.array(tensors["b"]))
        return _Stateless(lambda f: {"c": (t.from_numpy(f["a"]) @ w).numpy()})

    def terms(f):
        return {"c": np.abs(f["a"].astype(np.float64)) @ np.abs(tensors["b"].astype(np.float64))}

    return Workload("gemm", f"GEMM {n}^3 f32", g.graph_text(n, a_input=True), tensors, {}, [{"a": a}], ["c"],
                    onnx, numpy=numpy, torch=torch, bytes=3 * n * n * 4, flops=2.0 * n ** 3,
                    notes="C = A @ B; A an input, B a constant", terms=terms)


# ------------------------------------------------------------------------------------------- MLP
def mlp(tensors: dict | None = None) -> Workload:
    import mlp as m

    tensors = tensors if tensors is not None else m.weights(np)
    x = np.random.default_rng(1).standard_normal((1, m.D), dtype=np.float32)

    def numpy():
        w = {k: np.array(v) for k, v in tensors.items()}
        return _Stateless(lambda f: {"y": np.maximum(f["x"] @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"]})

    def torch():
        import torch as t

        w = {k: t.from_numpy(np.array(v)) for k, v in tensors.items()}

        def fn(f):
            with t.inference_mode():
                h = t.relu(t.from_numpy(f["x"]) @ w["w1"] + w["b1"])
                return {"y": (h @ w["w2"] + w["b2"]).numpy()}
        return _Stateless(fn)

    def terms(f):
        """The hidden layer's terms carried through w2 (ReLU does not widen an error)."""
        w = {k: np.abs(np.asarray(v, np.float64)) for k, v in tensors.items()}
        return {"y": (np.abs(f["x"].astype(np.float64)) @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]}

    return Workload("mlp", f"MLP {m.D}->{m.H}->{m.O} f32, batch 1", m.GRAPH, tensors, {}, [{"x": x}], ["y"],
                    lambda: m.onnx_model(tensors), numpy=numpy, torch=torch, bytes=_nbytes(tensors),
                    flops=2.0 * (m.D * m.H + m.H * m.O), notes="matmul+bias+relu+matmul+bias", terms=terms)


# --------------------------------------------------------------------------------------- decoder
def _rms(ob: OnnxBuilder, x: str, g: str, eps: str, two: str) -> str:
    """x / sqrt(mean(x^2) + eps) * g (the pattern onnxruntime fuses into SimplifiedLayerNormalization)."""
    ms = ob.op("ReduceMean", ob.op("Pow", x, two), axes=[-1], keepdims=1)
    return ob.op("Mul", ob.op("Div", x, ob.op("Sqrt", ob.op("Add", ms, eps))), g)


def _rope(ob: OnnxBuilder, x: str, heads: int, head_dim: int, cos: str, sin: str) -> str:
    """x [1, heads*head_dim] -> rotate_half RoPE per head -> [heads, head_dim]."""
    xs = ob.op("Reshape", x, ob.const(np.array([heads, head_dim], np.int64)))
    a, b = ob.op("Split", xs, axis=1, outputs=2)
    return ob.op("Concat", ob.op("Sub", ob.op("Mul", a, cos), ob.op("Mul", b, sin)),
                 ob.op("Add", ob.op("Mul", b, cos), ob.op("Mul", a, sin)), axis=1)


def _rope_tables(cfg) -> tuple[np.ndarray, np.ndarray]:
    half = cfg.head_dim // 2
    angle = np.arange(cfg.max_seq, dtype=np.float64)[:, None] * 10000.0 ** (-2.0 * np.arange(half) / cfg.head_dim)
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def decoder(size: str, tensors: dict | None = None, weights: str = "f32") -> Workload:
    dec = load_example("decoder")
    cfg = dec.with_weights(dec.SIZES[size], weights)
    tensors = tensors if tensors is not None else dec.tensors(cfg)
    L, T, D, KV = cfg.layers, cfg.max_seq, cfg.dim, cfg.kv_dim
    H, KVH, Dh, V = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.vocab
    tokens = np.random.default_rng(7).integers(0, V, T)
    feeds = [{"token": np.array([t], np.int32)} for t in tokens]
    names = [n for n, _ in dec._LAYER_TENSORS]

    def onnx():
        ob = OnnxBuilder(cfg.name)
        for k, v in tensors.items():
            ob.const(v, k)
        cos_t, sin_t = _rope_tables(cfg)
        eps, two = ob.const(np.float32(1e-5)), ob.const(np.float32(2.0))
        cos, sin = (ob.op("Gather", ob.const(t), "pos", axis=0) for t in (cos_t, sin_t))      # [1, Dh/2]
        pos1 = ob.op("Add", "pos", ob.const(np.array([1], np.int64)), out="pos_out")
        mask = ob.op("Less", ob.const(np.arange(T, dtype=np.int64)), pos1)                     # rows 0..pos
        row = ob.op("Reshape", "pos", ob.const(np.array([1, 1], np.int64)))                    # ScatterND index
        scale, ninf = ob.const(np.float32(1 / np.sqrt(Dh))), ob.const(np.float32(-np.inf))
        kv3, q3 = ob.const(np.array([T, KVH, Dh], np.int64)), ob.const(np.array([KVH, H // KVH, Dh], np.int64))
        flat = ob.const(np.array([1, D], np.int64))
        x = ob.op("Gather", "tok_emb", "token", axis=0)                                        # [1, D]
        for l in range(L):
            w = {n: f"layers.{l}.{n}" for n in names}
            h = _rms(ob, x, w["attn_norm"], eps, two)
            q = _rope(ob, ob.op("MatMul", h, w["wq"]), H, Dh, cos, sin)                         # [H, Dh]
            k = _rope(ob, ob.op("MatMul", h, w["wk"]), KVH, Dh, cos, sin)
            k = ob.op("Reshape", k, ob.const(np.array([1, KV], np.int64)))
            kc = ob.op("ScatterND", f"past_k_{l}", row, k, out=f"present_k_{l}")               # [T, KV]
            vc = ob.op("ScatterND", f"past_v_{l}", row, ob.op("MatMul", h, w["wv"]), out=f"present_v_{l}")
            keys = ob.op("Transpose", ob.op("Reshape", kc, kv3), perm=[1, 2, 0])               # [KVH, Dh, T]
            vals = ob.op("Transpose", ob.op("Reshape", vc, kv3), perm=[1, 0, 2])               # [KVH, T, Dh]
            s = ob.op("Mul", ob.op("MatMul", ob.op("Reshape", q, q3), keys), scale)            # [KVH, G, T]
            p = ob.op("Softmax", ob.op("Where", mask, s, ninf), axis=-1)
            att = ob.op("Reshape", ob.op("MatMul", p, vals), flat)                             # [1, D]
            x = ob.op("Add", x, ob.op("MatMul", att, w["wo"]))
            h = _rms(ob, x, w["ffn_norm"], eps, two)
            g = ob.op("MatMul", h, w["w_gate"])
            gu = ob.op("Mul", ob.op("Mul", g, ob.op("Sigmoid", g)), ob.op("MatMul", h, w["w_up"]))
            x = ob.op("Add", x, ob.op("MatMul", gu, w["w_down"]))
        logits = ob.op("MatMul", _rms(ob, x, "final_norm", eps, two), "lm_head", out="logits")
        ob.op("ArgMax", logits, axis=1, keepdims=0, out="next")
        cache = [(f"{io}_{kv}_{l}", F32, [T, KV]) for l in range(L) for kv in "kv" for io in ("past",)]
        present = [(f"present_{kv}_{l}", F32, [T, KV]) for l in range(L) for kv in "kv"]
        return ob.model([("token", "int32", [1]), ("pos", "int64", [1]), *cache],
                        [("logits", F32, [1, V]), ("next", "int64", [1]), ("pos_out", "int64", [1]), *present])

    state = {"pos": ("pos_out", np.zeros(1, np.int64))}
    for l in range(L):
        for kv in "kv":
            state[f"past_{kv}_{l}"] = (f"present_{kv}_{l}", np.zeros((T, KV), np.float32))

    def numpy():
        return _NumpyDecoder({k: np.array(v) for k, v in tensors.items()}, cfg, names)

    per_layer = 2 * D * D + 2 * D * KV + 3 * D * cfg.ffn
    flops = 2.0 * (L * per_layer + D * V) + L * 4.0 * H * T * Dh
    steps = f"{T} greedy steps from an empty KV cache, logits of each checked"
    if weights != "f32":
        # the projections and the LM head as int8 / int4 with per-channel f32 scales (dequant_matmul);
        # every other tensor f32. No peer: onnxruntime (1.32) fuses an ONNX DequantizeLinear -> MatMul
        # into MatMulNBits, which by default quantizes the activations to int8 (another computation:
        # the test decoder's logits ~2e-3 off, outside the check) and at f32 accuracy runs a slow
        # path (a 1024 x 4096 int8 product in ~15 ms against ~80 us); see docs/performance.md.
        stream = cfg.matrix_bytes()
        return Workload(f"decoder-{weights}", f"decoder {size} step ({stream / 1e6:.0f} MB of {weights} matrices, "
                        f"L={L} D={D} T={T})", dec.graph_text(cfg), tensors, dec.sizevars(cfg), feeds, ["logits"],
                        None, bytes=cfg.weight_bytes() - 4 * (V - 1) * D, flops=flops, notes=steps,
                        stream_op="dequant_matmul", stream_bytes=stream)
    return Workload(f"decoder-{size}", f"decoder {size} step ({cfg.weight_bytes() / 1e6:.0f} MB f32, L={L} D={D} "
                    f"T={T})", dec.graph_text(cfg), tensors, dec.sizevars(cfg), feeds, ["logits"], onnx, state,
                    numpy=numpy, bytes=_nbytes(tensors, skip=("tok_emb",)) + D * 4, flops=flops, notes=steps)


class _NumpyDecoder:
    """The decode step in f32 NumPy: attends over the rows written so far."""

    def __init__(self, w: dict, cfg, names):
        self.w, self.cfg = w, cfg
        self.layers = [{n: w[f"layers.{l}.{n}"] for n in names} for l in range(cfg.layers)]
        self.cos, self.sin = _rope_tables(cfg)
        self.reset()

    def reset(self):
        c = self.cfg
        self.k = np.zeros((c.layers, c.max_seq, c.kv_dim), np.float32)
        self.v = np.zeros_like(self.k)
        self.pos = 0

    @staticmethod
    def _rms(x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(1e-5)) * g

    def _rope(self, x, heads):
        half = self.cfg.head_dim // 2
        x = x.reshape(heads, -1)
        c, s = self.cos[self.pos], self.sin[self.pos]
        a, b = x[:, :half], x[:, half:]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=1)

    def step(self, feeds):
        c, p = self.cfg, self.pos
        x = self.w["tok_emb"][feeds["token"]]                                          # [1, D]
        for l, lw in enumerate(self.layers):
            h = self._rms(x, lw["attn_norm"])
            q = self._rope(h @ lw["wq"], c.heads).reshape(c.kv_heads, c.heads // c.kv_heads, c.head_dim)
            self.k[l, p] = self._rope(h @ lw["wk"], c.kv_heads).reshape(-1)
            self.v[l, p] = (h @ lw["wv"])[0]
            keys = self.k[l, :p + 1].reshape(p + 1, c.kv_heads, c.head_dim)
            vals = self.v[l, :p + 1].reshape(p + 1, c.kv_heads, c.head_dim)
            s = (q @ keys.transpose(1, 2, 0)) * np.float32(1 / np.sqrt(c.head_dim))     # [KVH, G, t]
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            att = (e / e.sum(axis=-1, keepdims=True)) @ vals.transpose(1, 0, 2)          # [KVH, G, Dh]
            x = x + att.reshape(1, -1) @ lw["wo"]
            h = self._rms(x, lw["ffn_norm"])
            g = h @ lw["w_gate"]
            x = x + ((g / (1 + np.exp(-g))) * (h @ lw["w_up"])) @ lw["w_down"]
        self.pos += 1
        return {"logits": self._rms(x, self.w["final_norm"]) @ self.w["lm_head"]}


# --------------------------------------------------------------------------------------- encoder
def encoder(tensors: dict | None = None) -> Workload:
    enc = load_example("encoder")
    cfg = enc.SIZES["bench"]
    tensors = tensors if tensors is not None else enc.tensors(cfg)
    S, D, H, Dh, F = cfg.seq, cfg.dim, cfg.heads, cfg.head_dim, cfg.ffn
    rng = np.random.default_rng(3)
    feeds = [{"tokens": rng.integers(0, cfg.vocab, S).astype(np.int32), "mask": np.arange(S) < S - 16}]

    def onnx():
        ob = OnnxBuilder(cfg.name)
        for k, v in tensors.items():
            ob.const(v, k)
        heads, flat = ob.const(np.array([S, H, Dh], np.int64)), ob.const(np.array([S, D], np.int64))
        scale, ninf = ob.const(np.float32(1 / np.sqrt(Dh))), ob.const(np.float32(-np.inf))
        half, one, root2 = ob.const(np.float32(0.5)), ob.const(np.float32(1.0)), ob.const(np.float32(np.sqrt(2)))

        def ln(x, g, b):
            return ob.op("LayerNormalization", x, g, b, axis=-1, epsilon=1e-12)

        def linear(x, w, b):
            return ob.op("Add", ob.op("MatMul", x, w), b)

        x = ln(ob.op("Add", ob.op("Gather", "tok_emb", "tokens", axis=0), "pos_emb"), "emb_g", "emb_b")
        for l in range(cfg.layers):
            w = {n: f"layer.{l}.{n}" for n, _ in enc.LAYER_TENSORS}
            q, k, v = (ob.op("Reshape", linear(x, w[f"w{n}"], w[f"b{n}"]), heads) for n in "qkv")
            s = ob.op("Mul", ob.op("MatMul", ob.op("Transpose", q, perm=[1, 0, 2]),
                                   ob.op("Transpose", k, perm=[1, 2, 0])), scale)           # [H, S, S]
            p = ob.op("Softmax", ob.op("Where", "mask", s, ninf), axis=-1)
            a = ob.op("MatMul", p, ob.op("Transpose", v, perm=[1, 0, 2]))                    # [H, S, Dh]
            a = ob.op("Reshape", ob.op("Transpose", a, perm=[1, 0, 2]), flat)
            x = ln(ob.op("Add", x, linear(a, w["wo"], w["bo"])), w["ln1_g"], w["ln1_b"])
            f = linear(x, w["w1"], w["b1"])
            f = ob.op("Mul", ob.op("Mul", f, ob.op("Add", ob.op("Erf", ob.op("Div", f, root2)), one)), half)
            x = ln(ob.op("Add", x, linear(f, w["w2"], w["b2"])), w["ln2_g"], w["ln2_b"])
        cls = ob.op("Slice", x, ob.const(np.array([0], np.int64)), ob.const(np.array([1], np.int64)))
        ob.op("Tanh", linear(cls, "pool_w", "pool_b"), out="pooled")
        return ob.model([("tokens", "int32", [S]), ("mask", "bool", [S])], [("pooled", F32, [1, D])])

    flops = cfg.layers * (2.0 * S * (4 * D * D + 2 * D * F) + 4.0 * S * S * D) + 2.0 * D * D
    return Workload("encoder", f"encoder seq {S} (L={cfg.layers} D={D} H={H} F={F})", enc.graph_text(cfg),
                    tensors, enc.sizevars(cfg), feeds, ["pooled"], onnx,
                    bytes=_nbytes(tensors, skip=("tok_emb",)) + S * D * 4, flops=flops,
                    notes=f"{S} tokens ({S - 16} real, 16 padded), pooled [CLS] output")


# ------------------------------------------------------------------------------------------- CNN
def cnn(tensors: dict | None = None) -> Workload:
    ex = load_example("cnn")
    tensors = tensors if tensors is not None else ex.cnn_tensors()
    image = np.random.default_rng(4).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)

    def onnx():
        ob = OnnxBuilder("cnn")
        for k, v in tensors.items():
            ob.const(v, k)
        a = ob.op("Relu", ob.op("Conv", "image", "w1", "b1", pads=[1, 1, 1, 1]))
        a = ob.op("MaxPool", a, kernel_shape=[2, 2], strides=[2, 2])
        a = ob.op("Relu", ob.op("Conv", a, "w2", "b2", pads=[1, 1, 1, 1]))
        a = ob.op("AveragePool", a, kernel_shape=[2, 2], strides=[2, 2])
        a = ob.op("Reshape", a, ob.const(np.array([1, 2048], np.int64)))
        logits = ob.op("Add", ob.op("MatMul", a, "fc_w"), "fc_b", out="logits")
        ob.op("ArgMax", logits, axis=1, keepdims=0, out="label")
        return ob.model([("image", F32, [1, 3, 32, 32])], [("logits", F32, [1, 10]), ("label", "int64", [1])])

    flops = 2.0 * (32 * 32 * 16 * 27 + 16 * 16 * 32 * 144 + 2048 * 10)
    return Workload("cnn", "CNN 3x32x32 (conv16-pool-conv32-pool-fc10)", ex.cnn_graph(), tensors, ex.CNN_SIZES,
                    [{"image": image}], ["logits"], onnx, bytes=_nbytes(tensors), flops=flops,
                    notes="one NCHW image, logits checked")


BUILDERS = {"gemm": gemm, "mlp": mlp, "decoder-test": lambda t=None: decoder("test", t),
            "decoder-bench": lambda t=None: decoder("bench", t), "decoder-i8": lambda t=None: decoder("bench", t, "i8"),
            "decoder-i4": lambda t=None: decoder("bench", t, "i4"), "encoder": encoder, "cnn": cnn}
