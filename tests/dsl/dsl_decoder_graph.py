"""A generated transformer-decoder graph, unrolled per layer and per head: a parse-speed workload.

32 layers x 8 heads gives about 2,800 nodes and 300 declarations, the size of a small LLM
decoder written out without loops. The graph is syntactically complete (every construct a real
decoder step uses: norms, projections, rope, a KV cache table, attention, SwiGLU MLP).
"""

from __future__ import annotations


def decoder_source(n_layers: int = 32, n_heads: int = 8) -> str:
    out = [
        "dynamic {\n    x: f32[T, D];\n    pos: i32;\n}",
        "constant {",
    ]
    for layer in range(n_layers):
        for name, dims in (("attn_norm", "D"), ("wq", "D, D"), ("wk", "D, D"), ("wv", "D, D"), ("wo", "D, D"),
                           ("ffn_norm", "D"), ("w_gate", "D, F"), ("w_up", "D, F"), ("w_down", "F, D")):
            out.append(f'    {name}_{layer}: f32[{dims}] @ref("blk.{layer}.{name}.weight");')
    out.append("    out_norm: f32[D];\n}")
    out.append("volatile {\n    h: f32[T, D];\n    q: f32[T, D];\n    k: f32[T, D];\n    v: f32[T, D];\n"
               "    qh: f32[T, Dh];\n    kh: f32[T, Dh];\n    vh: f32[T, Dh];\n    keys: f32[C, T, Dh];\n"
               "    vals: f32[C, T, Dh];\n    att_h: f32[T, Dh];\n    att: f32[T, D];\n    o: f32[T, D];\n"
               "    g: f32[T, F];\n    u: f32[T, F];\n    f: f32[T, D];\n    y: f32[T, D];\n}")
    out.append(f"persistent {{\n    Kc(l, hd, t): f32[T, Dh] @table @fixed(l={n_layers}, hd={n_heads}, t=2048);\n"
               f"    Vc(l, hd, t): f32[T, Dh] @table @fixed(l={n_layers}, hd={n_heads}, t=2048);\n}}")
    out.append("block entry {")
    for L in range(n_layers):
        out += [
            f"    op rms_norm(x, attn_norm_{L}, eps=1e-5) >> h;",
            f"    op matmul(h, wq_{L}) >> q;",
            f"    op matmul(h, wk_{L}) >> k;",
            f"    op matmul(h, wv_{L}) >> v;",
            "    op rope(q, pos, theta=10000.0) >> q;",
            "    op rope(k, pos, theta=10000.0) >> k;",
        ]
        for hd in range(n_heads):
            out += [
                f"    op slice(q, axis=1, start={hd * 64}, len=64) >> qh;",
                f"    op slice(k, axis=1, start={hd * 64}, len=64) >> kh;",
                f"    op slice(v, axis=1, start={hd * 64}, len=64) >> vh;",
                f"    cache.write kh >> Kc[{L}, {hd}, pos];",
                f"    cache.write vh >> Vc[{L}, {hd}, pos];",
                f"    cache.read Kc[{L}, {hd}, ..] >> keys;",
                f"    cache.read Vc[{L}, {hd}, ..] >> vals;",
                "    op sdpa(qh, keys, vals, scale=0.125, causal=true) >> att_h;",
                f"    op write_slice(att, att_h, axis=1, start={hd * 64}) >> att;",
            ]
        out += [
            f"    op matmul(att, wo_{L}) >> o;",
            "    op add(x, o) >> x;",
            f"    op rms_norm(x, ffn_norm_{L}, eps=1e-5) >> h;",
            f"    op matmul(h, w_gate_{L}) >> g;",
            f"    op matmul(h, w_up_{L}) >> u;",
            "    op silu(g) >> g;",
            "    op mul(g, u) >> g;",
            f"    op matmul(g, w_down_{L}) >> f;",
            "    op add(x, f) >> x;",
        ]
    out += ["    op rms_norm(x, out_norm, eps=1e-5) >> y;", "    return;", "}"]
    return "\n".join(out) + "\n"
