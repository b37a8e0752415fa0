"""GEMM benchmark: the generated f32 matmul kernel against NumPy (OpenBLAS), single-threaded.

    python tools/bench/gemm.py results.json [--size 1024] [--repeat 7] [--arch x86_64-avx512 ...]

A and B are model constants, so a step is the matmul alone. GFLOP/s = 2 M N K / time, with the
best time over `--repeat` rounds; the implementations take turns within each round, so load
from other processes hits them alike. `step` times run_step() through the cffi executor, `raw`
the library's step() called directly. OI_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 (set before
NumPy loads). `--clock cpu` times with this thread's CPU time instead of the wall clock (for a
busy machine: single-threaded work only). Prints a table, writes the JSON to the path.
"""

from __future__ import annotations

import os

if __name__ == "__main__":       # 1 thread, before NumPy loads (not when the suite imports this module)
    os.environ["OI_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchlib import cpu_model, interleaved_best  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.compare import compare  # noqa: E402
from openinfer.dtypes import lookup  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402


def operands(n: int):
    """A and B, f32 [n, n], deterministic."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def graph_text(n: int, *, a_input: bool = False) -> str:
    """C = A @ B; B a model constant, A one too or (a_input) a dynamic input."""
    a = f"dynamic {{ a: f32[{n}, {n}]; }}\n" if a_input else ""
    return (f"{a}constant {{ {'' if a_input else f'a: f32[{n}, {n}]; '}b: f32[{n}, {n}]; }}\n"
            f"volatile {{ c: f32[{n}, {n}]; }}\n"
            "block entry { op matmul(a, b) >> c; return; }\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="JSON results file")
    ap.add_argument("--size", type=int, default=1024, help="M = N = K")
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds (best is kept; at least 5)")
    ap.add_argument("--arch", nargs="+", default=["x86_64-avx512", "x86_64-avx2"])
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: this thread's CPU time, which leaves out time other processes take on a busy machine")
    args = ap.parse_args()
    n, repeat = args.size, max(5, args.repeat)
    a, b = operands(n)
    expected = a @ b
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))   # compare's per-element magnitude
    fns, checks, keep = {"numpy (OpenBLAS)": lambda: a @ b}, {}, []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("OI_CACHE_DIR", str(Path(tmp) / "cache"))
        oi.write_oinf(Path(tmp) / "gemm.oinf", {"a": a, "b": b})
        model = oi.ModelLoader.open(Path(tmp) / "gemm.oinf")
        graph = oi.graph(graph_text(n))
        for arch in args.arch:
            ex = Simulator(model, graph, arch=arch).make_executor()
            ex.run_step()
            keep.append(ex)
            checks[f"generated {arch}"] = compare("c", lookup("f32"), expected, ex.fetch("c"), terms)
            fns[f"generated {arch}"] = ex.run_step
            fns[f"generated {arch} raw"] = partial(ex.link.fn["step"], ex.link.handle)   # the C entry point alone
        best = interleaved_best(fns, repeat, time.thread_time if args.clock == "cpu" else time.perf_counter)
    flop = 2.0 * n ** 3
    rows = []
    for name, seconds in best.items():
        if name.endswith(" raw"):
            continue
        row = {"impl": name, "seconds": seconds, "gflops": flop / seconds / 1e9}
        if f"{name} raw" in best:
            row.update(raw_seconds=best[f"{name} raw"], raw_gflops=flop / best[f"{name} raw"] / 1e9)
        if name in checks:
            row.update(max_abs_err=checks[name].max_abs, ok=checks[name].ok)
        row["vs_numpy"] = best["numpy (OpenBLAS)"] / min(seconds, row.get("raw_seconds", seconds))
        rows.append(row)
    print(f"GEMM {n}x{n}x{n} f32, 1 thread, best of {repeat} rounds, {args.clock} clock ({cpu_model()})")
    print(f"{'implementation':<26} {'ms':>8} {'GFLOP/s':>8} {'raw GFLOP/s':>12} {'vs numpy':>9}  check")
    for r in rows:
        raw = f"{r['raw_gflops']:12.1f}" if "raw_gflops" in r else " " * 12
        ok = "" if "ok" not in r else ("pass" if r["ok"] else "FAIL")
        print(f"{r['impl']:<26} {r['seconds'] * 1e3:8.2f} {r['gflops']:8.1f} {raw} {r['vs_numpy']:8.2f}x  {ok}")
    args.out.write_text(json.dumps({"benchmark": "gemm", "m": n, "n": n, "k": n, "threads": 1, "repeat": repeat,
                                    "clock": args.clock, "cpu": cpu_model(), "results": rows}, indent=2) + "\n")
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
