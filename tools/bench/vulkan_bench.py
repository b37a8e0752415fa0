"""Vulkan benchmarks on a real GPU, with the peers measured in the same run:

- GEMV 8192x8192 (f32 weights, and f16 weights with f32 accumulation): weight bytes streamed per
  second, against the device's copy bandwidth (a PyTorch device-to-device copy);
- GEMM 4096^3 f32 against PyTorch/cuBLAS with TF32 off;
- the decoder's bench size (examples/decoder.py): tokens per second.

    python tools/bench/vulkan_bench.py --arch devices/nvidia-h200.json [--out results.json]

Steps are timed through the simulator's executor (one submission per step, waited for), best of
--repeat runs of --steps steps each; inputs are set once (set() stages them without a sync).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import openinfer as oi  # noqa: E402


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


def torch_peers(repeat: int) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {}
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
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    out["cublas_f32_tflops"] = 2 * 4096 ** 3 / timed(lambda: a @ b) / 1e12
    a16, b16 = a.half(), b.half()
    out["cublas_f16_tflops"] = 2 * 4096 ** 3 / timed(lambda: a16 @ b16) / 1e12
    w = torch.randn(8192, 8192, device="cuda")
    x = torch.randn(1, 8192, device="cuda")
    out["torch_gemv_f32_gbs"] = w.numel() * 4 / timed(lambda: x @ w) / 1e9
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="nvidia-h200")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="oi-vk-bench-"))
    rng = np.random.default_rng(0)
    results: dict = {"arch": args.arch}

    k = n = 8192
    oi.write_oinf(tmp / "gemv.oinf", tensors={"W": rng.standard_normal((k, n), dtype=np.float32),
                                               "W16": rng.standard_normal((k, n)).astype(np.float16)})
    gemv = oi.graph("""
        dynamic { x: f32[1, 8192]; x16: f16[1, 8192]; }
        constant { W: f32[8192, 8192]; W16: f16[8192, 8192]; }
        volatile { y: f32[1, 8192]; y16: f32[1, 8192]; }
        block entry { op matmul(x, W) >> y; }
    """)
    gemv16 = oi.graph("""
        dynamic { x16: f16[1, 8192]; }
        constant { W16: f16[8192, 8192]; }
        volatile { y16: f32[1, 8192]; }
        block entry { op matmul(x16, W16, acc=f32) >> y16; }
    """)
    model = oi.ModelLoader.open(tmp / "gemv.oinf")
    x = rng.standard_normal((1, k)).astype(np.float32)
    ex = oi.Simulator(model, gemv, arch=args.arch, outputs={"y"}).make_executor()
    t = step_time(ex, {"x": x, "x16": x.astype(np.float16)}, 20, args.repeat)
    results["gemv_f32_gbs"] = k * n * 4 / t / 1e9
    ex = oi.Simulator(model, gemv16, arch=args.arch).make_executor()
    t = step_time(ex, {"x16": x.astype(np.float16)}, 20, args.repeat)
    results["gemv_f16_gbs"] = k * n * 2 / t / 1e9

    m = 4096
    oi.write_oinf(tmp / "gemm.oinf", tensors={"A": rng.standard_normal((m, m), dtype=np.float32),
                                               "B": rng.standard_normal((m, m), dtype=np.float32)})
    gemm = oi.graph("""
        dynamic { go: bool; }
        constant { A: f32[4096, 4096]; B: f32[4096, 4096]; }
        volatile { C: f32[4096, 4096]; }
        block entry { op matmul(A, B) >> C; }
    """)
    ex = oi.Simulator(oi.ModelLoader.open(tmp / "gemm.oinf"), gemm, arch=args.arch).make_executor()
    t = step_time(ex, {"go": True}, 3, args.repeat)
    results["gemm_f32_tflops"] = 2 * m ** 3 / t / 1e12

    spec = importlib.util.spec_from_file_location("decoder_bench", REPO / "examples" / "decoder.py")
    decoder = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = decoder
    spec.loader.exec_module(decoder)
    cfg = decoder.SIZES["bench"]
    graph, model_path = decoder.write(cfg, tmp / "decoder")
    ex = oi.Simulator(oi.ModelLoader.open(model_path), oi.load_graph(graph), arch=args.arch,
                      outputs={"next"}).make_executor()
    token = {"token": np.array([1], np.int32)}
    ex.insert(**token)
    ex.run_step()
    t0 = time.perf_counter()
    steps = cfg.max_seq - 1
    for _ in range(steps):
        ex.insert(**token)
        ex.run_step()
    results["decoder_bench_tokens_per_s"] = steps / (time.perf_counter() - t0)
    results["decoder_bench_weight_mb"] = cfg.weight_bytes() / 1e6

    results.update(torch_peers(args.repeat))
    if "copy_gbs" in results:
        results["gemv_f32_fraction_of_copy"] = results["gemv_f32_gbs"] / results["copy_gbs"]
        results["gemm_f32_fraction_of_cublas"] = results["gemm_f32_tflops"] / results["cublas_f32_tflops"]
    for key, value in results.items():
        print(f"{key:<32} {value:.3f}" if isinstance(value, float) else f"{key:<32} {value}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
