"""A LLaMA-shaped decoder: one decode step per `step()`, the KV cache in persistent tables.

    python examples/decoder.py --size test --out build/decoder        # writes .oig + .oinf

Per step: token embedding (gather) -> for each layer (a `loop` over @pattern prefix tables):
RMSNorm, Q/K/V projections, RoPE at the current position, append K/V to the cache tables,
attention of the new token over the cache (sdpa with a validity mask: positions written so far),
output projection, residual, RMSNorm, SwiGLU MLP, residual -> final RMSNorm, LM head, argmax.
Grouped-query attention (kv_heads <= heads). `pos` is a persistent counter: every step appends.

Sizes: `test` (tiny, CI), `bench` (>= 256 MB of f32 weights). `unrolled=True` writes every layer
out (per-layer constants, no loop) and splits attention per head: a graph of a few thousand
nodes, the parse + bind benchmark of tools/bench/toolchain.py.

Weights: `f32`, or `i8` / `i4` (`--weights`, `with_weights(cfg, "i8")`): every projection and the
LM head stored quantized, symmetric per output channel (`.oinf` v2 quant, axis 1 of [K, N],
scale = max|column| / 127 or / 7), multiplied with `dequant_matmul`, which reads the scales
through the quant keys `layers.{l}.wq#scale` and never materialises f32 weights. The
embedding and the norms stay f32.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class DecoderConfig:
    name: str
    layers: int
    dim: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_seq: int
    seed: int = 0
    weights: str = "f32"          # f32 | i8 | i4: how the projections and the LM head are stored

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def matrix_bytes(self) -> int:
        """Bytes of the projections and the LM head (quantized: packed data plus f32 scales)."""
        d, kv, f = self.dim, self.kv_dim, self.ffn
        mats = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]
        bits = {"f32": 32, "i8": 8, "i4": 4}[self.weights]

        def mat(k: int, n: int) -> int:
            return k * n * bits // 8 + (4 * n if bits < 32 else 0)
        return self.layers * sum(mat(k, n) for k, n in mats) + mat(d, self.vocab)

    def weight_bytes(self) -> int:
        """Bytes of every tensor a step reads: the matrices, the norms and the embedding table."""
        d = self.dim
        return self.matrix_bytes() + self.layers * 4 * 2 * d + 4 * (self.vocab * d + d)


def with_weights(cfg: DecoderConfig, weights: str) -> DecoderConfig:
    """`cfg` with its matrices stored as `weights` (f32, i8 or i4); the name says which."""
    if weights not in QUANT_BITS and weights != "f32":
        raise ValueError(f"weights must be f32, i8 or i4, got {weights!r}")
    base = cfg.name.removesuffix(f"_{cfg.weights}")
    return replace(cfg, weights=weights, name=base if weights == "f32" else f"{base}_{weights}")


#: largest magnitude of each quantized weight dtype (symmetric: -max..max)
QUANT_BITS = {"i8": 127, "i4": 7}


SIZES = {
    "test": DecoderConfig("decoder_test", layers=2, dim=64, heads=4, kv_heads=2, ffn=160, vocab=256, max_seq=16),
    "bench": DecoderConfig("decoder_bench", layers=8, dim=768, heads=12, kv_heads=4, ffn=2304, vocab=8192, max_seq=64),
    # 32 layers written out per layer and per head: the toolchain benchmark (weights stay tiny)
    "toolchain": DecoderConfig("decoder_toolchain", layers=32, dim=128, heads=8, kv_heads=8, ffn=256, vocab=256,
                               max_seq=16),
}

#: the matrices `--weights i8|i4` quantizes (the LM head too)
MATRICES = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down", "lm_head")
_LAYER_TENSORS = (("attn_norm", "D"), ("wq", "D, D"), ("wk", "D, KV"), ("wv", "D, KV"), ("wo", "D, D"),
                  ("ffn_norm", "D"), ("w_gate", "D, F"), ("w_up", "D, F"), ("w_down", "F, D"))


def sizevars(cfg: DecoderConfig) -> dict[str, int]:
    return {"D": cfg.dim, "KV": cfg.kv_dim, "H": cfg.heads, "KVH": cfg.kv_heads, "Dh": cfg.head_dim, "F": cfg.ffn,
            "V": cfg.vocab, "T": cfg.max_seq, "L": cfg.layers}


def graph_text(cfg: DecoderConfig, *, unrolled: bool = False, window: bool = False) -> str:
    """The decode-step graph in the DSL. `window`: attention reads only the rows in use, `cache.read
    Kc[l, 0..pos] >> kc` with pos already counting this step's token and `kc: f32[P, 1, KV]`, P a
    dynamic size that the read sets (the rows it copied), instead of all T rows behind a validity
    mask: a step's attention then costs what the sequence holds, not the table's capacity."""
    if window and unrolled:
        raise ValueError("window attention is written for the looped graph")
    quant = cfg.weights != "f32"
    rows = "P" if window else "T"

    def wtype(name: str, dims: str) -> str:
        return f"{cfg.weights if quant and name in MATRICES else 'f32'}[{dims}]"

    def scale_dims(dims: str) -> str:
        return dims.split(",")[-1].strip()

    out = [f"// {cfg.name}: LLaMA-shaped decode step (generated by examples/decoder.py)",
           "dynamic {\n    token: i32[1];            // the current token id\n}", "constant {",
           f"    tok_emb: f32[V, D];\n    final_norm: f32[D];\n    lm_head: {wtype('lm_head', 'D, V')};\n"
           "    yes: bool @init(true);"]
    if quant:
        out.append('    lm_head_s: f32[V] @ref("lm_head#scale");')
    if unrolled:
        for layer in range(cfg.layers):
            for name, dims in _LAYER_TENSORS:
                out.append(f'    {name}_{layer}: {wtype(name, dims)} @ref("layers.{layer}.{name}");')
                if quant and name in MATRICES:
                    out.append(f'    {name}_s_{layer}: f32[{scale_dims(dims)}] @ref("layers.{layer}.{name}#scale");')
    else:
        for name, dims in _LAYER_TENSORS:
            out.append(f'    {name}(l): {wtype(name, dims)} @pattern("layers.{{l}}.{name}");')
            if quant and name in MATRICES:
                out.append(f'    {name}_s(l): f32[{scale_dims(dims)}] @pattern("layers.{{l}}.{name}#scale");')
    out.append("}")
    note = ("key cache: the rows in use (P, set by the read)" if window
            else "whole key cache (rows not written yet are masked)")
    mask = "" if window else "    mask: bool[T];            // positions written so far\n"
    out.append("""volatile {
    x: f32[1, D];             // the residual stream
    h: f32[1, D];
    q: f32[1, D];
    k: f32[1, KV];
    v: f32[1, KV];
    q3: f32[1, H, Dh];
    k3: f32[1, KVH, Dh];
    qt: f32[H, 1, Dh];
    kc: f32[{rows}, 1, KV];        // the layer's {note}
    vc: f32[{rows}, 1, KV];
    kc3: f32[{rows}, KVH, Dh];
    vc3: f32[{rows}, KVH, Dh];
    kt: f32[KVH, {rows}, Dh];
    vt: f32[KVH, {rows}, Dh];
{mask}    att: f32[H, 1, Dh];
    att2: f32[1, H, Dh];
    attf: f32[1, D];
    o: f32[1, D];
    g: f32[1, F];
    u: f32[1, F];
    posv: i32;
    logits: f32[1, V];
    next: i64[1];             // the greedy next token
}""".replace("{rows}", rows).replace("{note}", note).replace("{mask}", mask))
    if unrolled:
        out.append("volatile {\n    qh: f32[1, 1, Dh];\n    kh: f32[1, T, Dh];\n    vh: f32[1, T, Dh];\n"
                   + "".join(f"    a{h}: f32[1, 1, Dh];\n" for h in range(cfg.heads)) + "}")
    out.append(f"""persistent {{
    pos: i32 @init(0);        // tokens decoded so far
    Kc(l, t): f32[1, KV] @table @fixed(l={cfg.layers}, t={cfg.max_seq});
    Vc(l, t): f32[1, KV] @table @fixed(l={cfg.layers}, t={cfg.max_seq});
    valid(t): bool @table @fixed(t={cfg.max_seq});
}}""")
    out.append("block entry {")
    out.append("    op gather(tok_emb, token) >> x;\n    cache.read pos >> posv;"
               + ("\n    cache.increment pos;      // counts this token: attention reads rows 0..pos" if window
                  else "\n    cache.write yes >> valid[pos];\n    cache.read valid[] >> mask;"))
    row = "posv" if window else "pos"
    layer_ids = range(cfg.layers) if unrolled else [None]
    for layer in layer_ids:
        ix = "l" if layer is None else str(layer)

        def w(name: str, layer=layer) -> str:
            return f"{name}[l]" if layer is None else f"{name}_{layer}"

        def mm(x: str, name: str, layer=layer) -> str:
            if not quant:
                return f"op matmul({x}, {w(name)})"
            scale = f"{name}_s[l]" if layer is None else f"{name}_s_{layer}"
            return f"op dequant_matmul({x}, {w(name)}, {scale})"

        pad = "        " if layer is None else "    "
        body = [
            f"op rms_norm(x, {w('attn_norm')}, eps=1e-5) >> h;",
            f"{mm('h', 'wq')} >> q;",
            f"{mm('h', 'wk')} >> k;",
            f"{mm('h', 'wv')} >> v;",
            "op reshape(q) >> q3;",
            "op reshape(k) >> k3;",
            "op rope(q3, posv) >> q3;",
            "op rope(k3, posv) >> k3;",
            "op reshape(k3) >> k;",
            f"cache.write k >> Kc[{ix}, {row}];",
            f"cache.write v >> Vc[{ix}, {row}];",
            f"cache.read Kc[{ix}, {'0..pos' if window else '..'}] >> kc;",
            f"cache.read Vc[{ix}, {'0..pos' if window else '..'}] >> vc;",
            "op reshape(kc) >> kc3;",
            "op reshape(vc) >> vc3;",
            "op transpose(q3, perm=[1, 0, 2]) >> qt;",
            "op transpose(kc3, perm=[1, 0, 2]) >> kt;",
            "op transpose(vc3, perm=[1, 0, 2]) >> vt;",
        ]
        body += ([f"op sdpa(qt, kt, vt{'' if window else ', mask'}) >> att;"] if layer is None
                 else _per_head_attention(cfg))
        body += [
            "op transpose(att, perm=[1, 0, 2]) >> att2;",
            "op reshape(att2) >> attf;",
            f"{mm('attf', 'wo')} >> o;",
            "op add(x, o) >> x;",
            f"op rms_norm(x, {w('ffn_norm')}, eps=1e-5) >> h;",
            f"{mm('h', 'w_gate')} >> g;",
            "op silu(g) >> g;",
            f"{mm('h', 'w_up')} >> u;",
            "op mul(g, u) >> g;",
            f"{mm('g', 'w_down')} >> o;",
            "op add(x, o) >> x;",
        ]
        if layer is None:
            out.append("    loop layers (l in 0..L) {")
            out += [pad + b for b in body]
            out.append("    }")
        else:
            out += [pad + b for b in body]
    head = "op dequant_matmul(h, lm_head, lm_head_s)" if quant else "op matmul(h, lm_head)"
    out.append(f"    op rms_norm(x, final_norm, eps=1e-5) >> h;\n    {head} >> logits;\n"
               "    op argmax_axis(logits, axis=1) >> next;\n" + ("" if window else "    cache.increment pos;\n") + "}")
    return "\n".join(out) + "\n"


def _per_head_attention(cfg: DecoderConfig) -> list[str]:
    """Attention written out per head (the unrolled graph): slice each query head and its kv
    head (grouped-query), attend, then join the heads."""
    group = cfg.heads // cfg.kv_heads
    lines = []
    for hd in range(cfg.heads):
        kv = hd // group
        lines += [f"op slice(qt, starts=[{hd}], ends=[{hd + 1}]) >> qh;",
                  f"op slice(kt, starts=[{kv}], ends=[{kv + 1}]) >> kh;",
                  f"op slice(vt, starts=[{kv}], ends=[{kv + 1}]) >> vh;",
                  f"op sdpa(qh, kh, vh, mask) >> a{hd};"]
    lines.append(f"op concat({', '.join(f'a{hd}' for hd in range(cfg.heads))}, axis=0) >> att;")
    return lines


def tensors(cfg: DecoderConfig) -> dict[str, np.ndarray]:
    """Random weights (normal, scaled by 1/sqrt(fan-in); norms near 1), deterministic per seed."""
    rng = np.random.default_rng(cfg.seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(rows)))

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    out = {"tok_emb": rng.standard_normal((cfg.vocab, cfg.dim), dtype=np.float32),
           "final_norm": norm(cfg.dim), "lm_head": mat(cfg.dim, cfg.vocab)}
    shapes = {"D": cfg.dim, "KV": cfg.kv_dim, "F": cfg.ffn}
    for layer in range(cfg.layers):
        for name, dims in _LAYER_TENSORS:
            d = [shapes[x.strip()] for x in dims.split(",")]
            out[f"layers.{layer}.{name}"] = norm(d[0]) if len(d) == 1 else mat(*d)
    if cfg.weights != "f32":
        for key in [k for k in out if k.rsplit(".", 1)[-1] in MATRICES]:
            out[key] = quantize(out[key], cfg.weights)
    return out


def quantize(w: np.ndarray, dtype: str):
    """Symmetric per-output-channel quantization of w[K, N] (scale = max|w[:, n]| / qmax) as a
    TensorSpec carrying `.oinf` v2 quant parameters."""
    from openinfer import QuantParams, TensorSpec

    qmax = QUANT_BITS[dtype]
    scale = np.maximum(np.abs(w).max(axis=0), np.float32(1e-30)) / np.float32(qmax)
    q = np.clip(np.rint(w / scale), -qmax, qmax).astype(np.int8)
    return TensorSpec(q, dtype=dtype, quant=QuantParams.per_channel(1, scale.astype(np.float32)))


def write(cfg: DecoderConfig, out_dir: Path, *, unrolled: bool = False, window: bool = False) -> tuple[Path, Path]:
    """Write <name>.oig and <name>.oinf into out_dir; returns their paths. `window`: the graph of
    `graph_text(window=True)`, its model naming P dynamic up to the cache's size (`dynamic.P`)."""
    from openinfer import write_oinf

    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{cfg.name}_window" if window else cfg.name
    graph = out_dir / f"{name}.oig"
    graph.write_text(graph_text(cfg, unrolled=unrolled, window=window))
    model = out_dir / f"{name}.oinf"
    # the roles `openinfer generate` runs the step with (openinfer/generate.py)
    roles = {"generate.input": "token", "generate.logits": "logits", "generate.capacity": cfg.max_seq}
    if window:
        write_oinf(model, tensors=tensors(cfg), sizevars={**sizevars(cfg), "P": cfg.max_seq},
                   metadata={"dynamic.P": cfg.max_seq, **roles})
    else:
        write_oinf(model, tensors=tensors(cfg), sizevars=sizevars(cfg), metadata=roles)
    return graph, model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="test")
    ap.add_argument("--out", type=Path, default=Path("build/decoder"))
    ap.add_argument("--unrolled", action="store_true", help="write layers and heads out (no loop)")
    ap.add_argument("--window", action="store_true",
                    help="attention over the cache rows in use: the read `Kc[l, 0..pos]` sets the dynamic size P")
    ap.add_argument("--layers", type=int, help="override the number of layers")
    ap.add_argument("--weights", choices=("f32", *QUANT_BITS), default="f32",
                    help="store the projections and the LM head as f32, or quantized per channel")
    args = ap.parse_args(argv)
    cfg = with_weights(SIZES[args.size], args.weights)
    if args.layers:
        cfg = replace(cfg, layers=args.layers)
    graph, model = write(cfg, args.out, unrolled=args.unrolled, window=args.window)
    print(f"wrote {graph} and {model} ({cfg.weight_bytes() / 1e6:.1f} MB of {cfg.weights} weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
