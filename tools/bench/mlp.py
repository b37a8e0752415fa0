"""MLP benchmark: 1024 -> 4096 -> 1024, batch 1 (matmul + bias + relu + matmul + bias), f32.

    python tools/bench/mlp.py results.json [--threads 1 2] [--repeat 7] [--steps 100]

Compares the generated library (each AVX device) with NumPy (OpenBLAS) and onnxruntime (the
same graph built with onnx.helper; `pip install onnxruntime onnx` if missing) at each thread
count. Every (implementation, thread count) runs in a child process of its own: the thread
counts (OI_NUM_THREADS, OPENBLAS_NUM_THREADS, onnxruntime's intra-op threads) are fixed before
the libraries load, and the spinning worker threads of OpenBLAS and onnxruntime never compete
with another implementation for the cores. A figure is the best over `--repeat` runs of the
mean time of `--steps` steps. For the generated library, `step` goes through the cffi executor
(insert x, run_step, fetch y) and `raw` calls the library's set() and step() directly.
`--clock cpu` times the 1-thread runs with the calling thread's CPU time instead of the wall
clock (for a busy machine; every 1-thread implementation runs on that thread). Prints a table,
writes the JSON to the path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import OnnxBuilder, best_per_step, cpu_model, ort_session

D, H, O = 1024, 4096, 1024
REPO = Path(__file__).resolve().parents[2]
GRAPH = (f"dynamic {{ x: f32[1, {D}]; }}\n"
         f"constant {{ w1: f32[{D}, {H}]; b1: f32[{H}]; w2: f32[{H}, {O}]; b2: f32[{O}]; }}\n"
         f"volatile {{ h: f32[1, {H}]; y: f32[1, {O}]; }}\n"
         "block entry {\n  op matmul(x, w1) >> h;\n  op add(h, b1) >> h;\n  op relu(h) >> h;\n"
         "  op matmul(h, w2) >> y;\n  op add(y, b2) >> y;\n  return;\n}\n")
NUMPY, ORT = "numpy (OpenBLAS)", "onnxruntime"


def weights(np) -> dict:
    rng = np.random.default_rng(0)
    return {"w1": rng.standard_normal((D, H), dtype=np.float32) / 32, "b1": rng.standard_normal(H, dtype=np.float32),
            "w2": rng.standard_normal((H, O), dtype=np.float32) / 64, "b2": rng.standard_normal(O, dtype=np.float32)}


def onnx_model(w: dict):
    """The same MLP as an ONNX graph (onnx.helper): x an input, the weights initializers."""
    g = OnnxBuilder("mlp")
    for k, v in w.items():
        g.const(v, k)
    h = g.op("Relu", g.op("Add", g.op("MatMul", "x", "w1"), "b1"))
    g.op("Add", g.op("MatMul", h, "w2"), "b2", out="y")
    return g.model([("x", "float32", [1, D])], [("y", "float32", [1, O])])


def worker(impl: str, threads: int, repeat: int, steps: int, clock: str) -> dict:
    """One implementation at one thread count, in this (child) process: its result row."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from openinfer.compare import compare
    from openinfer.dtypes import lookup

    w = weights(np)
    x = np.random.default_rng(1).standard_normal((1, D), dtype=np.float32)
    expected = np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"]
    # compare's per-element magnitude: the terms of each sum, the hidden layer's carried through
    # w2 (ReLU does not widen an error)
    terms = (np.abs(x) @ np.abs(w["w1"]) + np.abs(w["b1"])) @ np.abs(w["w2"]) + np.abs(w["b2"])
    cpu = clock == "cpu" and threads == 1
    timer = time.thread_time if cpu else time.perf_counter
    row = {"impl": impl, "threads": threads, "clock": "cpu" if cpu else "wall"}
    if impl == NUMPY:
        row["seconds"] = best_per_step(lambda: np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"], repeat,
                                       steps, timer)
        return row
    if impl == ORT:
        sess = ort_session(onnx_model(w), threads)
        got = sess.run(None, {"x": x})[0]
        row["seconds"] = best_per_step(lambda: sess.run(None, {"x": x}), repeat, steps, timer)
    else:
        import openinfer as oi
        from openinfer.sim import Simulator

        arch = impl.removeprefix("generated ")
        model = oi.ModelLoader.open(Path(os.environ["OI_BENCH_MODEL"]))
        ex = Simulator(model, oi.graph(GRAPH), arch=arch).make_executor()

        def step_api():
            ex.insert(x=x)
            ex.run_step()
            return ex.fetch("y")

        # the raw C entry points: set() the input, step(); no Python executor around them
        set_fn, step_fn, handle = ex.link.fn["set"], ex.link.fn["step"], ex.link.handle
        xid, xbuf = ex.sim.vars["x"].id, ex.link.ffi.from_buffer(x)

        def step_raw():
            set_fn(handle, xid, xbuf, x.nbytes)
            step_fn(handle)

        got = step_api()
        row["seconds"] = best_per_step(step_api, repeat, steps, timer)
        row["raw_seconds"] = best_per_step(step_raw, repeat, steps, timer)
    check = compare("y", lookup("f32"), expected, got, terms)
    row.update(max_abs_err=check.max_abs, ok=check.ok)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?", help="JSON results file")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=7, help="timed runs (best is kept)")
    ap.add_argument("--steps", type=int, default=100, help="steps per timed run")
    ap.add_argument("--arch", nargs="+", default=["x86_64-avx512", "x86_64-avx2"])
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: the calling thread's CPU time for the 1-thread runs (a busy machine)")
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.repeat, args.steps, args.clock)))
        return 0
    if args.out is None:
        ap.error("the JSON results path is required")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        impls = [NUMPY, ORT]
    except ImportError as exc:
        print(f"onnxruntime skipped: {exc} (pip install onnxruntime onnx)", file=sys.stderr)
        impls = [NUMPY]
    impls += [f"generated {a}" for a in args.arch]
    import numpy as np

    sys.path.insert(0, str(REPO))
    import openinfer as oi
    from openinfer.sim import Simulator

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "mlp.oinf"
        oi.write_oinf(model, weights(np))
        env = dict(os.environ, OI_BENCH_MODEL=str(model))
        env.setdefault("OI_CACHE_DIR", str(Path(tmp) / "cache"))
        os.environ["OI_CACHE_DIR"] = env["OI_CACHE_DIR"]
        for arch in args.arch:        # build once here; the children find the libraries in the cache
            Simulator(oi.ModelLoader.open(model), oi.graph(GRAPH), arch=arch)
        for t in args.threads:
            for impl in impls:
                argv = [sys.executable, __file__, "--worker", impl, str(t), "--repeat", str(args.repeat),
                        "--steps", str(args.steps), "--clock", args.clock]
                child_env = dict(env, OI_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
                out = subprocess.run(argv, env=child_env, check=True, capture_output=True, text=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
    cpu = f"{cpu_model()}, {os.cpu_count()} CPUs"
    print(f"MLP {D}->{H}->{O} f32, batch 1: per-step time, best of {args.repeat} x {args.steps} steps "
          f"({cpu}; clock: {'cpu for 1 thread, ' if args.clock == 'cpu' else ''}wall)")
    print(f"{'implementation':<26} {'threads':>7} {'step us':>8} {'raw us':>8} {'vs ORT':>7} {'raw vs ORT':>10}"
          f" {'vs numpy':>8}  check")
    for r in rows:
        same = {q["impl"]: q["seconds"] for q in rows if q["threads"] == r["threads"]}
        ort, npy = same.get(ORT), same[NUMPY]
        r["vs_onnxruntime"] = ort / r["seconds"] if ort else None
        r["raw_vs_onnxruntime"] = ort / r["raw_seconds"] if ort and "raw_seconds" in r else None
        r["vs_numpy"] = npy / r["seconds"]
        raw = f"{r['raw_seconds'] * 1e6:8.1f}" if "raw_seconds" in r else " " * 8
        vs = f"{r['vs_onnxruntime']:6.2f}x" if r["vs_onnxruntime"] else " " * 7
        raw_vs = f"{r['raw_vs_onnxruntime']:9.2f}x" if r["raw_vs_onnxruntime"] else " " * 10
        ok = "" if "ok" not in r else ("pass" if r["ok"] else "FAIL")
        print(f"{r['impl']:<26} {r['threads']:>7} {r['seconds'] * 1e6:8.1f} {raw} {vs} {raw_vs} "
              f"{r['vs_numpy']:7.2f}x  {ok}")
    args.out.write_text(json.dumps({"benchmark": "mlp", "shape": [D, H, O], "batch": 1, "repeat": args.repeat,
                                    "steps": args.steps, "cpu": cpu, "results": rows}, indent=2) + "\n")
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
