"""Vulkan benchmarks on a real GPU, with the peers measured in the same run:

- gemv: GEMV 8192x8192 f32 weights (y = x @ W, x one row): weight bytes streamed per second,
  against the device's copy bandwidth (a PyTorch device-to-device copy, read + write);
- gemv-f16: the same with f16 weights and activations, acc=f32;
- gemm: GEMM 4096^3 f32 against PyTorch/cuBLAS with TF32 off;
- gemm-f16: GEMM 4096^3 f16 with acc=f32 (the cooperative-matrix kernel where the descriptor
  declares features.cooperative_matrix) against PyTorch/cuBLAS f16;
- decoder: the decoder's bench size (examples/decoder.py) with f32, i8 and i4 weights
  (`--decoder-weights`): tokens per second, the weight bytes read per second, and the kernels,
  transfers, barriers and submissions a token records;
- decoder-torch: the decoder's PyTorch peers where torch and CUDA are present
  (tools/bench/torch_decoder.py: eager, the step in a CUDA graph, torch.compile captured in a
  CUDA graph), over the same weights, f32; each one's tokens checked against ours;
- decoder-profile: where a decoder step's time goes, per op: through the trace hook every node
  is submitted and waited for alone, so each figure is the node's GPU time plus one submission
  (the smallest nodes, copies, show that floor);
- decoder-stages: where a replayed decode step's device time goes, stage by stage (the commands
  between two barriers), from GPU timestamps (OI_VK_PROFILE=1, hal/include/oi_hal_vulkan.h
  oi_vk_stage_profile): each stage's microseconds and its kernels and transfers;
- chain: what one dependent command costs the device: a step of 64 transfers, each reading what
  the one before wrote (cache write / read pairs), and one of 64 such small kernels (softmax
  pairs over 256 elements); microseconds per command of device and of host time;
- peers: the PyTorch figures (copy, cuBLAS f32 / f16, torch GEMV).

    python tools/bench/vulkan_bench.py --arch devices/nvidia-h200.json [--rows gemv gemm ...]
        [--reps 10] [--tune '{"gemv_unroll": 8}' ...] [--out results.json]

Each matmul row runs `--reps` independent matmuls in one step (one submission, so the per-step
submit-and-wait cost of a few tens of microseconds is spread over them) and reports the time of
one; steps are timed through the simulator's executor, best of --repeat runs of --steps steps.
Every matmul of a step reads operands of its own (W0..W9 at --reps 10, A_i and B_i for the
GEMMs), and so do the PyTorch peers: matmuls sharing one W found part of it in the GPU's L2
(50 MB on an H100) and reported more GB/s than the memory delivers. The GEMV rows refuse a
`--reps` whose weights per step are under L2_MARGIN times the descriptor's L2.
Every row checks its result against NumPy (rows of it for the GEMMs) and reports the largest
error relative to the largest magnitude. `--tune` (repeatable) runs the matmul rows once per
JSON dict of overrides of openinfer/targets/vulkan/glsl/linalg.py's TUNE (a sweep; labels `@i`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import load_example  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.targets import devices  # noqa: E402
from openinfer.targets.vulkan.glsl import linalg  # noqa: E402

ROWS = ("check", "gemv", "gemv-f16", "gemm", "gemm-f16", "decoder", "decoder-torch", "decoder-profile",
        "decoder-stages", "chain", "peers")
#: small shapes that select each fast matmul kernel (as tests/vulkan/test_vulkan_matmul.py):
#: (a shape, b shape, operand dtype, acc, output dtype)
CHECK_CASES = [
    ((1, 200), (200, 96), "f32", None, "f32"), ((3, 37), (37, 10), "f32", None, "f32"),
    ((8, 256), (256, 40), "f32", None, "f32"), ((2, 4, 1, 32), (4, 32, 64), "f32", None, "f32"),
    ((5, 64), (64, 40), "f16", "f32", "f32"), ((1, 33), (33, 7), "f16", "[f32, f32]", "f16"),
    ((200, 136), (136, 160), "f32", None, "f32"), ((130, 70), (70, 129), "f32", None, "f32"),
    ((2, 96, 80), (80, 64), "f32", None, "f32"), ((40, 64), (64,), "f32", None, "f32"),
    ((3, 20, 16), (16, 44), "f16", "f32", "f32"), ((130, 72), (72, 136), "f16", "[f32, f32]", "f16"),
    ((256, 256), (256, 256), "f16", "f32", "f32"), ((2, 100, 40), (40, 72), "f16", "[f32, f32]", "f16"),
    ((136, 64), (64, 136), "f16", "f32", "f32"), ((64, 36), (36, 40), "f16", "f32", "f32"),
]
#: the chain row's steps: 64 dependent transfers, and 64 dependent kernels (each between two adds)
CHAIN_GRAPHS = {
    "transfers": """
dynamic { a0: f32[1, 256]; }
volatile { a: f32[1, 256]; o: f32[1, 256]; }
persistent { T(t): f32[1, 256] @table @fixed(t=32); }
block entry {
    op add(a0, a0) >> a;
    loop steps (i in 0..32) {
        cache.write a >> T[i];
        cache.read T[i] >> a;
    }
    op add(a, a0) >> o;
}""",
    "kernels": """
dynamic { a0: f32[1, 256]; }
volatile { a: f32[1, 256]; b: f32[1, 256]; o: f32[1, 256]; }
block entry {
    op add(a0, a0) >> a;
    loop steps (i in 0..32) {
        op softmax(a, axis=1) >> b;
        op softmax(b, axis=1) >> a;
    }
    op add(a, a0) >> o;
}"""}
#: examples/decoder.py's size the decoder rows run (the tests shrink it)
DECODER_SIZE = "bench"
#: the decoder rows' input: one token per step
DECODER_TOKEN = {"token": np.array([1], np.int32)}
PREFIX = {"check": "check", "gemv": "gemv_f32", "gemv-f16": "gemv_f16", "gemm": "gemm_f32", "gemm-f16": "gemm_f16"}
#: the weights a GEMV row's step streams are at least this many times the device's L2, so neither a
#: GEMV nor the next step finds weights in the L2 that an earlier GEMV brought there
L2_MARGIN = 8
GEMV_K = GEMV_N = 8192
GEMM_M = 4096
NP_DTYPES = {"f32": np.float32, "f16": np.float16}


def gemm_reps(reps: int) -> int:
    """GEMMs per step (they take ~100x a GEMV's time): a fifth of --reps."""
    return max(1, reps // 5)


def gemv_graph(reps: int, dt: str) -> tuple[str, int]:
    """The GEMV rows' graph, `reps` GEMVs `y_i = x @ W_i` of 8192² `dt` weights, each over a W of its own,
    and the weight bytes one step streams."""
    k, n = GEMV_K, GEMV_N
    acc = ", acc=f32" if dt != "f32" else ""
    consts = " ".join(f"W{i}: {dt}[{k}, {n}];" for i in range(reps))
    outs = " ".join(f"y{i}: f32[1, {n}];" for i in range(reps))
    ops = " ".join(f"op matmul(x, W{i}{acc}) >> y{i};" for i in range(reps))
    text = f"dynamic {{ x: {dt}[1, {k}]; }} constant {{ {consts} }} volatile {{ {outs} }} block entry {{ {ops} }}"
    return text, reps * k * n * np.dtype(NP_DTYPES[dt]).itemsize


def gemm_graph(reps: int, dt: str) -> str:
    """The GEMM rows' graph: `reps` GEMMs `C_i = A_i @ B_i` (4096³), each over operands of its own."""
    m = GEMM_M
    acc = ", acc=f32" if dt != "f32" else ""
    consts = " ".join(f"A{i}: {dt}[{m}, {m}]; B{i}: {dt}[{m}, {m}];" for i in range(reps))
    outs = " ".join(f"C{i}: f32[{m}, {m}];" for i in range(reps))
    ops = " ".join(f"op matmul(A{i}, B{i}{acc}) >> C{i};" for i in range(reps))
    return f"dynamic {{ go: bool; }} constant {{ {consts} }} volatile {{ {outs} }} block entry {{ {ops} }}"


def step_time(ex, inputs: dict, steps: int, repeat: int) -> float:
    ex.insert(**inputs)
    ex.run_step()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(steps):
            ex.insert(**inputs)
            ex.run_step()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def torch_peers(repeat: int, reps: int) -> dict:
    """Device copy, cuBLAS GEMMs and torch GEMVs; like the Vulkan rows, a timed call runs `reps`
    GEMVs (`gemm_reps(reps)` GEMMs) over operands of their own and a figure is one matmul's."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {"torch_device": torch.cuda.get_device_name()}
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")       # 1 GiB
    dst = torch.empty_like(src)
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(fn) -> float:
        fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeat):
            ev0.record()
            fn()
            ev1.record()
            torch.cuda.synchronize()
            best = min(best, ev0.elapsed_time(ev1) / 1e3)
        return best

    t = timed(lambda: dst.copy_(src))
    out["copy_gbs"] = 2 * src.numel() * 4 / t / 1e9          # read + write
    src = dst = None                       # free the 2 GiB before the matmuls
    m, n = GEMM_M, gemm_reps(reps)
    ab = [(torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")) for _ in range(n)]
    out["cublas_f32_tflops"] = n * 2 * m ** 3 / timed(lambda: [a @ b for a, b in ab]) / 1e12
    ab = [(a.half(), b.half()) for a, b in ab]
    out["cublas_f16_tflops"] = n * 2 * m ** 3 / timed(lambda: [a @ b for a, b in ab]) / 1e12
    ab = None
    ws = [torch.randn(GEMV_K, GEMV_N, device="cuda") for _ in range(reps)]
    x = torch.randn(1, GEMV_K, device="cuda")
    out["torch_gemv_f32_gbs"] = reps * GEMV_K * GEMV_N * 4 / timed(lambda: [x @ w for w in ws]) / 1e9
    ws, x = [w.half() for w in ws], x.half()
    out["torch_gemv_f16_gbs"] = reps * GEMV_K * GEMV_N * 2 / timed(lambda: [x @ w for w in ws]) / 1e9
    ws = None
    torch.cuda.empty_cache()               # the Vulkan rows allocate next
    return out


def _rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


def _kernel_doc(sim) -> str:
    for name, src in sorted(sim.plan.files.items()):
        if name.endswith("matmul.comp"):
            return src.decode().splitlines()[1].split("(", 1)[-1].rstrip(")")
    return ""


class Bench:
    def __init__(self, args, tmp: Path):
        self.args, self.tmp = args, tmp
        self.rng = np.random.default_rng(0)
        self.l2_bytes = devices.load(args.arch).doc.get("memory", {}).get("l2_bytes")
        self._models: dict[str, tuple] = {}        # (model, tensors) per row and dtype, kept for --tune

    def _sim(self, model, text: str, outputs: set):
        return oi.Simulator(model, oi.graph(text), arch=self.args.arch, outputs=outputs)

    def _model(self, name: str, make_tensors):
        """(model, tensors): the tensors `make_tensors()` returns, made and written once per name."""
        if name not in self._models:
            tensors = make_tensors()
            oi.write_oinf(self.tmp / f"{name}.oinf", tensors=tensors)
            self._models[name] = oi.ModelLoader.open(self.tmp / f"{name}.oinf"), tensors
        return self._models[name]

    def _random(self, shape, dtype: str) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32).astype(NP_DTYPES[dtype])

    def gemv(self, f16: bool) -> dict:
        reps, k, n, dt = self.args.reps, GEMV_K, GEMV_N, "f16" if f16 else "f32"
        text, step_bytes = gemv_graph(reps, dt)
        if self.l2_bytes and step_bytes < L2_MARGIN * self.l2_bytes:
            raise ValueError(f"--reps {reps}: a step's {reps} GEMVs stream {step_bytes / 1e6:.0f} MB of {dt} "
                             f"weights, under {L2_MARGIN}x the device's L2 ({self.l2_bytes / 1e6:.0f} MB): "
                             "part of them would come from the L2; raise --reps")
        model, ws = self._model(f"gemv_{dt}_{reps}", lambda: {f"W{i}": self._random((k, n), dt) for i in range(reps)})
        sim = self._sim(model, text, {f"y{i}" for i in range(reps)})
        ex = sim.make_executor()
        x = self._random((1, k), dt)
        t = step_time(ex, {"x": x}, self.args.steps, self.args.repeat) / reps
        err = max(_rel_err(ex.fetch(f"y{i}"), x.astype(np.float32) @ ws[f"W{i}"].astype(np.float32))
                  for i in range(reps))
        return {"gbs": step_bytes / reps / t / 1e9, "us": t * 1e6, "rel_err": err,
                "step_weight_mb": step_bytes / 1e6, "kernel": _kernel_doc(sim)}

    def gemm(self, f16: bool) -> dict:
        reps, m, dt = gemm_reps(self.args.reps), GEMM_M, "f16" if f16 else "f32"
        model, ab = self._model(f"gemm_{dt}_{reps}", lambda: {f"{side}{i}": self._random((m, m), dt)
                                                              for i in range(reps) for side in "AB"})
        sim = self._sim(model, gemm_graph(reps, dt), {f"C{i}" for i in range(reps)})
        ex = sim.make_executor()
        t = step_time(ex, {"go": True}, 3, self.args.repeat) / reps
        rows = np.r_[0:8, m - 8:m]
        err = max(_rel_err(ex.fetch(f"C{i}")[rows],
                           ab[f"A{i}"][rows].astype(np.float32) @ ab[f"B{i}"].astype(np.float32)) for i in range(reps))
        return {"tflops": 2 * m ** 3 / t / 1e12, "ms": t * 1e3, "rel_err": err, "kernel": _kernel_doc(sim)}

    def check(self) -> dict:
        """The fast kernels at small shapes against NumPy: how many cases match, the worst error."""
        decl, vol, ops, inputs, refs = [], [], [], {}, []
        for i, (sa, sb, d, acc, od) in enumerate(CHECK_CASES):
            a = self.rng.standard_normal(sa).astype(np.float32)
            b = self.rng.standard_normal(sb).astype(np.float32)
            if d == "f16":
                a, b = a.astype(np.float16), b.astype(np.float16)
            inputs[f"a{i}"], inputs[f"b{i}"] = a, b
            r = np.matmul(a.astype(np.float64), b.astype(np.float64))
            refs.append(r.astype(np.float16).astype(np.float64) if od == "f16" else r)
            decl.append(f"a{i}: {d}{list(sa)}; b{i}: {d}{list(sb)};")
            vol.append(f"c{i}: {od}{list(r.shape)};")
            ops.append(f"op matmul(a{i}, b{i}{', acc=' + acc if acc else ''}) >> c{i};")
        text = (f"dynamic {{ {' '.join(decl)} }} volatile {{ {' '.join(vol)} }} "
                f"block entry {{ {' '.join(ops)} return; }}")
        oi.write_oinf(self.tmp / "empty.oinf", tensors={})
        sim = oi.Simulator(oi.ModelLoader.open(self.tmp / "empty.oinf"), oi.graph(text), arch=self.args.arch)
        ex = sim.make_executor()
        ex.insert(**inputs)
        ex.run_step()
        bad, worst = [], 0.0
        for i, (case, r) in enumerate(zip(CHECK_CASES, refs, strict=True)):
            got = ex.fetch(f"c{i}").astype(np.float64)
            big = np.max(np.abs(r))
            rtol, atol = (1e-4, 2e-5 * big) if case[4] == "f32" else (2e-3, 1e-3 * big)
            worst = max(worst, _rel_err(got, r))
            if not np.all(np.abs(got - r) <= atol + rtol * np.abs(r)):
                bad.append(f"{case}: {_rel_err(got, r):.2e}")
        kernels = sorted({src.decode().splitlines()[1].split("(", 1)[-1].split(":")[0]
                          for name, src in sim.plan.files.items() if name.endswith("matmul.comp")})
        return {"cases": len(CHECK_CASES), "failed": len(bad), "worst_rel_err": worst, "kernels": ", ".join(kernels),
                "failures": "; ".join(bad)}

    def _decoder(self, weights: str):
        """The decoder's bench size with `weights` storage: (executor, config), one step run."""
        decoder = load_example("decoder")
        cfg = decoder.with_weights(decoder.SIZES[DECODER_SIZE], weights)
        graph, model_path = decoder.write(cfg, self.tmp / f"decoder_{weights}")
        ex = oi.Simulator(oi.ModelLoader.open(model_path), oi.load_graph(graph), arch=self.args.arch,
                          outputs={"next"}).make_executor()
        ex.insert(**DECODER_TOKEN)
        ex.run_step()
        return ex, cfg

    def decoder(self, weights: str) -> dict:
        """Tokens per second over the cache's length (the best of --repeat passes from an empty
        cache); the weight bytes read per second (over the device's copy bandwidth, the `peers`
        row's: the fraction of the memory floor); what a token records: kernels, transfers,
        barriers, submissions and replays (the HAL's counters, hal/include/oi_hal_vulkan.h: after
        the first pass, a step at a position seen before replays the command buffer recorded
        then); and how a token's time splits between the host recording its commands and
        waiting for the device. `recording_tokens_per_s`: the first pass, where every step is
        at a cache position not seen before and so is recorded afresh (what one generation from
        an empty cache costs, with no earlier pass to replay)."""
        ex, cfg = self._decoder(weights)
        steps = cfg.max_seq - 1
        best, first = None, None
        for _ in range(self.args.repeat):        # passes over the cache from empty; the fastest kept
            ex.reset()
            ex.insert(**DECODER_TOKEN)
            ex.run_step()
            before = ex.sim.vk_counters()
            t0 = time.perf_counter()
            for _ in range(steps):
                ex.insert(**DECODER_TOKEN)
                ex.run_step()
            seconds = time.perf_counter() - t0
            first = seconds if first is None else first
            if best is None or seconds < best[0]:
                best = (seconds, before, ex.sim.vk_counters())
        seconds, before, after = best
        out = {"tokens_per_s": steps / seconds, "recording_tokens_per_s": steps / first,
               "weight_mb": cfg.weight_bytes() / 1e6, "weight_gb_per_s": cfg.weight_bytes() * steps / seconds / 1e9}
        out.update({f"{kind}_per_token": (after[kind] - before[kind]) / steps
                    for kind in after if kind != "wait_ns"})
        wait_us = (after["wait_ns"] - before["wait_ns"]) / steps / 1e3
        out.update({"device_wait_us_per_token": wait_us, "host_us_per_token": seconds / steps * 1e6 - wait_us})
        return out

    def decoder_torch(self) -> dict:
        """The decoder's PyTorch peers (tools/bench/torch_decoder.py) over the f32 weights: a pass
        of every cache position from empty, their tokens checked against the ones ours gives."""
        ex, cfg = self._decoder("f32")
        ex.reset()
        expected = []
        for _ in range(cfg.max_seq):
            ex.insert(**DECODER_TOKEN)
            ex.run_step()
            expected.append(int(ex.fetch("next")[0]))
        import torch_decoder  # (beside this file; torch itself is imported only there)

        return torch_decoder.peers(self.tmp / "decoder_f32" / f"{cfg.name}.oinf", cfg,
                                   int(DECODER_TOKEN["token"][0]), expected, self.args.repeat)

    def chain(self, steps: int = 200) -> dict:
        """Device and host microseconds per dependent command (see the module docstring)."""
        oi.write_oinf(self.tmp / "empty.oinf", tensors={})
        out = {}
        for name, graph in CHAIN_GRAPHS.items():
            sim = oi.Simulator(oi.ModelLoader.open(self.tmp / "empty.oinf"), oi.graph(graph), arch=self.args.arch,
                               outputs={"o"})
            ex = sim.make_executor()
            x = np.ones((1, 256), np.float32)
            ex.insert(a0=x)
            ex.run_step()
            best = None
            for _ in range(self.args.repeat):
                c0, t0 = sim.vk_counters(), time.perf_counter()
                for _ in range(steps):
                    ex.insert(a0=x)
                    ex.run_step()
                seconds, c1 = (time.perf_counter() - t0) / steps, sim.vk_counters()
                if best is None or seconds < best[0]:
                    best = (seconds, {k: (c1[k] - c0[k]) / steps for k in c1})
            seconds, per_step = best
            commands = per_step["dispatches"] + per_step["transfers"]
            out[f"{name}_device_us_per_command"] = per_step["wait_ns"] / 1e3 / commands
            out[f"{name}_host_us_per_command"] = (seconds * 1e6 - per_step["wait_ns"] / 1e3) / commands
            out[f"{name}_barriers_per_step"] = per_step["barriers"]
        return out

    def decoder_stages(self, weights: str, position: int = 40) -> dict:
        """The step at cache `position`, replayed (a first pass recorded it), stage by stage from
        GPU timestamps: the total, the stage count, and per stage its microseconds, kernels and
        transfers."""
        os.environ["OI_VK_PROFILE"] = "1"            # read when the executor is created
        try:
            ex, _ = self._decoder(weights)
        finally:
            del os.environ["OI_VK_PROFILE"]
        for _ in range(2):
            ex.reset()
            for _ in range(position + 1):
                before = ex.sim.vk_counters()
                ex.insert(**DECODER_TOKEN)
                ex.run_step()
        after = ex.sim.vk_counters()
        stages = ex.sim.vk_stage_profile()
        out: dict = {"total_us": sum(us for us, _, _ in stages), "stages": len(stages),
                     # the step's commands as the HAL counted them, for comparison with the stages'
                     "dispatches": after["dispatches"] - before["dispatches"],
                     "transfers": after["transfers"] - before["transfers"]}
        for i, (us, kernels, transfers) in enumerate(stages):
            out[f"stage{i:03d}"] = f"{us:8.2f} us  {kernels} kernels  {transfers} transfers"
        return out

    def decoder_profile(self, weights: str, steps: int = 5) -> dict:
        """Per op of the decoder: microseconds per step and the fastest single node."""
        ex, _ = self._decoder(weights)
        ex.observe(lambda _index: None)            # a hook: every node is submitted alone and timed
        total: dict[str, float] = {}
        fastest: dict[str, float] = {}
        for _ in range(steps):
            ex.insert(**DECODER_TOKEN)
            for e in ex.iterate():
                key = e.op_name or e.kind
                total[key] = total.get(key, 0.0) + e.duration_ns / 1e3 / steps
                fastest[key] = min(fastest.get(key, float("inf")), e.duration_ns / 1e3)
        out = {}
        for key in sorted(total, key=lambda k: -total[k]):
            out[f"{key}_us_per_step"] = total[key]
            out[f"{key}_fastest_node_us"] = fastest[key]
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="nvidia-h200")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10, help="matmuls per step (GEMMs: a fifth of it)")
    ap.add_argument("--decoder-weights", nargs="+", choices=("f32", "i8", "i4"), default=["f32", "i8", "i4"],
                    help="the decoder rows' weight storage (examples/decoder.py --weights)")
    ap.add_argument("--tune", action="append", default=[], help="JSON overrides of linalg.TUNE (repeatable)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="oi-vk-bench-"))
    bench = Bench(args, tmp)
    results: dict = {"arch": str(args.arch)}
    base = dict(linalg.TUNE)
    variants = [json.loads(t) for t in args.tune] or [{}]

    def report(key, value):
        results[key] = value
        print(f"{key:<36} {value:.3f}" if isinstance(value, float) else f"{key:<36} {value}", flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n")

    if "peers" in args.rows:            # first: the torch figures survive a later failure
        for key, value in torch_peers(args.repeat, args.reps).items():
            report(key, value)
    for vi, tune in enumerate(variants):
        linalg.TUNE.clear()
        linalg.TUNE.update(base)
        linalg.TUNE.update({k: tuple(map(tuple, v)) if k == "gemm_tiles" else (tuple(v) if isinstance(v, list) else v)
                            for k, v in tune.items()})
        tag = f"@{vi}" if len(variants) > 1 else ""
        if tag:
            report(f"tune{tag}", json.dumps(tune))
        for row, fn in (("check", bench.check), ("gemv", lambda: bench.gemv(False)),
                        ("gemv-f16", lambda: bench.gemv(True)), ("gemm", lambda: bench.gemm(False)),
                        ("gemm-f16", lambda: bench.gemm(True))):
            if row not in args.rows:
                continue
            try:
                res = fn()
            except Exception as exc:  # noqa: BLE001  (one failing row should not hide the others)
                report(f"{row}{tag}_error", f"{type(exc).__name__}: {str(exc)[:2000]}")
                continue
            for key, value in res.items():
                report(f"{PREFIX[row]}{tag}_{key}", value)
    linalg.TUNE.clear()
    linalg.TUNE.update(base)
    if "decoder" in args.rows:
        for weights in args.decoder_weights:
            for key, value in bench.decoder(weights).items():
                report(f"decoder_bench_{weights}_{key}", value)
    if "decoder-torch" in args.rows:
        for key, value in bench.decoder_torch().items():
            report(f"decoder_bench_{key}", value)
    if "chain" in args.rows:
        for key, value in bench.chain().items():
            report(f"chain_{key}", value)
    if "decoder-stages" in args.rows:
        for weights in args.decoder_weights:
            for key, value in bench.decoder_stages(weights).items():
                report(f"decoder_stages_{weights}_{key}", value)
    if "decoder-profile" in args.rows:
        for weights in args.decoder_weights:
            for key, value in bench.decoder_profile(weights).items():
                report(f"decoder_profile_{weights}_{key}", value)
    for key, num, den in (("gemv_f32_fraction_of_copy", "gemv_f32_gbs", "copy_gbs"),
                          ("gemv_f16_fraction_of_copy", "gemv_f16_gbs", "copy_gbs"),
                          ("gemm_f32_fraction_of_cublas", "gemm_f32_tflops", "cublas_f32_tflops"),
                          ("gemm_f16_fraction_of_cublas", "gemm_f16_tflops", "cublas_f16_tflops")):
        if num in results and den in results:
            report(key, results[num] / results[den])
    return 0


if __name__ == "__main__":
    sys.exit(main())
