"""The decoder's PyTorch peers (tools/bench/vulkan_bench.py `--rows decoder-torch`): the decode
step of examples/decoder.py written as an `nn`-style module over the same `.oinf` weights, timed
three ways, one token per step from an empty cache as the `decoder` row runs ours:

- eager: every op launched from Python (the host's launch overhead);
- graph: the eager step captured once in a CUDA graph and replayed;
- compiled: `torch.compile(mode="max-autotune-no-cudagraphs")` of the step, captured in a CUDA
  graph and replayed.

Every mode's greedy tokens are checked against the ones OpenInfer's step produced for the same
inputs (`expected`); a mode whose tokens differ reports how many steps agree, and no speed.

The step is the graph's, op for op: rms_norm (x / sqrt(mean(x^2) + eps) * g), Q/K/V projections,
RoPE in halves (theta 10000, angles in f64 as the op's reference), the k / v rows written into
the cache at the step's position, attention over every cache row with the rows not written yet
masked (grouped-query: query head h reads kv head h // (H / KVH)), output projection and
residual, SwiGLU MLP and residual, the final norm, the LM head and argmax; the position counts
up inside the step, so a captured graph replays it without the host. TF32 is off (f32 matmuls
as ours). f32 weights only (the issue's peers).

    python tools/bench/torch_decoder.py --size test --steps 16 --device cpu

checks the module against OpenInfer's NumPy reference of the same graph and weights: a greedy
generation (each step's token fed to the next) whose logits must agree within f32 rounding and
whose tokens must be the same.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from benchlib import REPO, load_example

EPS = 1e-5
THETA = 10000.0


class TorchDecoder:
    """The decode step over the weights of `model` (an opened `.oinf`, examples/decoder.py's
    names) on `device`: `step(token)` appends one token and returns the greedy next one (a
    1-element int64 tensor), all on the device."""

    def __init__(self, torch, model, cfg, device: str):
        self.torch, self.cfg = torch, cfg

        def t(name: str):
            return torch.from_numpy(np.array(model.tensor(name), np.float32)).to(device)

        self.emb, self.final_norm, self.lm_head = t("tok_emb"), t("final_norm"), t("lm_head")
        names = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")
        self.layers = [{n: t(f"layers.{i}.{n}") for n in names} for i in range(cfg.layers)]
        dh, kvh, seq = cfg.head_dim, cfg.kv_heads, cfg.max_seq
        self.k_cache = torch.zeros(cfg.layers, seq, kvh, dh, device=device)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.valid = torch.zeros(seq, dtype=torch.bool, device=device)
        self.pos = torch.zeros(1, dtype=torch.int64, device=device)
        self.freq = THETA ** (-2.0 * torch.arange(dh // 2, dtype=torch.float64, device=device) / dh)

    def reset(self) -> None:
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.valid.zero_()
        self.pos.zero_()

    def _norm(self, x, g):
        return x / self.torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * g

    def step(self, token):
        return self.logits(token).argmax(-1)

    def logits(self, token):
        """The step's logits [1, V] (and its cache writes and position count)."""
        torch, cfg = self.torch, self.cfg
        heads, kvh, dh = cfg.heads, cfg.kv_heads, cfg.head_dim
        half = dh // 2
        angle = self.pos.double() * self.freq
        cos, sin = angle.cos().float(), angle.sin().float()

        def rope(x):
            a, b = x[:, :half], x[:, half:]
            return torch.cat((a * cos - b * sin, b * cos + a * sin), -1)

        self.valid.index_fill_(0, self.pos, True)
        x = self.emb.index_select(0, token)                                   # [1, D]
        for i, w in enumerate(self.layers):
            h = self._norm(x, w["attn_norm"])
            q = rope((h @ w["wq"]).view(heads, dh))
            k = rope((h @ w["wk"]).view(kvh, dh))
            v = (h @ w["wv"]).view(kvh, dh)
            self.k_cache[i].index_copy_(0, self.pos, k.unsqueeze(0))
            self.v_cache[i].index_copy_(0, self.pos, v.unsqueeze(0))
            kc = self.k_cache[i].transpose(0, 1).repeat_interleave(heads // kvh, 0)   # [H, T, Dh]
            vc = self.v_cache[i].transpose(0, 1).repeat_interleave(heads // kvh, 0)
            scores = (kc @ q.unsqueeze(-1)).squeeze(-1) * (1.0 / dh ** 0.5)          # [H, T]
            scores = scores.masked_fill(~self.valid, float("-inf"))
            att = (torch.softmax(scores, -1).unsqueeze(1) @ vc).reshape(1, heads * dh)
            x = x + att @ w["wo"]
            h = self._norm(x, w["ffn_norm"])
            x = x + (torch.nn.functional.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
        logits = self._norm(x, self.final_norm) @ self.lm_head
        self.pos.add_(1)
        return logits


def peers(model_path, cfg, token: int, expected: list[int], repeat: int) -> dict:
    """Tokens per second of the three modes on the CUDA device (the best of `repeat` passes of
    len(expected) steps from an empty cache), each mode's tokens checked against `expected`.
    {"torch_decoder": why not} where torch or CUDA is missing."""
    try:
        import torch
    except ImportError:
        return {"torch_decoder": "skipped: torch is not installed"}
    if not torch.cuda.is_available():
        return {"torch_decoder": "skipped: torch has no CUDA device"}
    import openinfer as oi

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dec = TorchDecoder(torch, oi.ModelLoader.open(model_path), cfg, "cuda")
    tok = torch.tensor([token], dtype=torch.int64, device="cuda")
    out = {"torch_device": torch.cuda.get_device_name()}
    steps = len(expected)

    def timed(run_step) -> tuple[float, list[int]]:
        best, tokens = None, []
        for _ in range(repeat):
            dec.reset()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            got = [run_step() for _ in range(steps)]
            torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            tokens = [int(g) for g in got]
            best = seconds if best is None else min(best, seconds)
        return steps / best, tokens

    def captured(fn):
        """fn(tok) captured in a CUDA graph (after warm-up passes on a side stream, which also
        compile a torch.compile'd fn): a step is one replay into a static result tensor."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                dec.reset()
                fn(tok)
        torch.cuda.current_stream().wait_stream(stream)
        dec.reset()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = fn(tok)

        def run_step():
            graph.replay()
            return result.clone()
        return run_step

    modes = {"eager": lambda: lambda: dec.step(tok), "graph": lambda: captured(dec.step),
             "compiled": lambda: captured(torch.compile(dec.step, mode="max-autotune-no-cudagraphs"))}
    for mode, make in modes.items():
        try:        # (a mode that cannot run here, a compiler missing, say, does not hide the others)
            tps, tokens = timed(make())
        except Exception as exc:  # noqa: BLE001
            out[f"torch_{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
            continue
        agree = sum(a == b for a, b in zip(tokens, expected, strict=True))
        out[f"torch_{mode}_tokens_match"] = f"{agree}/{steps}"
        if agree == steps:
            out[f"torch_{mode}_tokens_per_s"] = tps
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=("test", "bench"), default="test")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--token", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="the torch device of the check (cpu or cuda)")
    ap.add_argument("--out", type=Path, default=Path("build/torch_decoder"))
    args = ap.parse_args(argv)
    import torch

    sys.path.insert(0, str(REPO))
    import openinfer as oi

    torch.backends.cuda.matmul.allow_tf32 = False
    decoder = load_example("decoder")
    cfg = decoder.SIZES[args.size]
    graph, model_path = decoder.write(cfg, args.out)
    ref = oi.Reference(oi.ModelLoader.open(model_path), oi.load_graph(graph)).make_executor()
    dec = TorchDecoder(torch, oi.ModelLoader.open(model_path), cfg, args.device)
    token, agree, worst = args.token, 0, 0.0
    for step in range(args.steps):
        ref.insert(token=np.array([token], np.int32))
        ref.run_step()
        logits = dec.logits(torch.tensor([token], dtype=torch.int64, device=args.device)).cpu().numpy()
        want_logits = ref.fetch("logits")
        err = float(np.abs(logits - want_logits).max() / np.abs(want_logits).max())
        worst = max(worst, err)
        want, got = int(ref.fetch("next")[0]), int(logits.argmax())
        agree += want == got
        print(f"step {step}: token {token}: reference next {want}, torch {got}, logits' largest difference "
              f"{err:.1e} of the largest logit")
        token = want
    print(f"{agree}/{args.steps} tokens agree; logits within {worst:.1e}")
    return 0 if agree == args.steps and worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
