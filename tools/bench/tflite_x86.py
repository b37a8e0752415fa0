"""The MLPerf Tiny int8 models on this x86 machine: the generated library against LiteRT with
XNNPACK, side by side in one process, one thread each.

    python tools/bench/tflite_x86.py [results.json] [--arch x86_64-avx2] [--repeat 7] [--steps 50]
                                     [--clock wall|cpu]

Each model (tests/data/mlperf_tiny) is imported with `openinfer import` and built for each
`--arch` (skipped where this CPU cannot run it); LiteRT runs the same `.tflite` with its default
op resolver (XNNPACK's int8 kernels where it takes the model) and `num_threads=1`; OI_NUM_THREADS=1
for the generated code. The calls alternate (a warm-up, then `--repeat` rounds of `--steps` calls of
each); a figure is the best round's mean. The generated library is called through its raw C entry
points (set the input, step) with no Python executor around them, LiteRT through
`set_tensor` / `invoke`. Before timing, both outputs are compared with LiteRT's reference kernels
(BUILTIN_REF): the generated code's must be identical, XNNPACK's may differ (it is not the
reference). `--clock cpu` times with the calling thread's CPU time (for a busy machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["OI_NUM_THREADS"] = "1"

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from benchlib import cpu_model  # noqa: E402

MODELS = {"kws": "kws_ref_model", "vww": "vww_96_int8", "ic": "pretrainedResnet_quant", "ad": "ad01_int8"}


def main() -> int:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tflite_oracle import DATA, litert_inputs

    from openinfer.reference.executor import Reference
    from openinfer.sim import Simulator
    from openinfer.testing import missing_here
    from openinfer.tflite import import_tflite

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--arch", nargs="+", default=["x86_64-avx512", "x86_64-avx2"])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    archs = [a for a in args.arch if not missing_here(a)]
    tmp = Path(tempfile.mkdtemp(prefix="oi-tflite-bench-"))
    rows = []
    for short, stem in MODELS.items():
        path = DATA / "mlperf_tiny" / f"{stem}.tflite"
        data = path.read_bytes()
        by_index, by_name = litert_inputs(data, 0)
        (index, x), = by_index.items()
        ref_it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        ref_it.allocate_tensors()
        ref_it.set_tensor(index, x)
        ref_it.invoke()
        out_index = ref_it.get_output_details()[0]["index"]
        expected = ref_it.get_tensor(out_index)
        xnn = Interpreter(model_content=data, num_threads=1)
        xnn.allocate_tensors()

        def run_litert(xnn=xnn, index=index, x=x):
            xnn.set_tensor(index, x)
            xnn.invoke()
        run_litert()
        fns = {"litert-xnnpack": run_litert}
        result = import_tflite(path)
        graph, model = result.write(tmp / stem)
        in_var = result.renamed.get(next(iter(by_name)), next(iter(by_name)))
        out_name = ref_it.get_output_details()[0]["name"]
        out_var = result.renamed.get(out_name, out_name)
        exact = {}
        for arch in archs:
            ref = Reference(model, graph)
            ex = Simulator(ref.model, ref.graph, arch=arch).make_executor()
            ex.insert(**{in_var: x})
            ex.run_step()
            exact[arch] = bool(np.array_equal(ex.fetch(out_var), expected))
            set_fn, step_fn, handle = ex.link.fn["set"], ex.link.fn["step"], ex.link.handle
            xid, xbuf = ex.sim.vars[in_var].id, ex.link.ffi.from_buffer(x)

            def run_generated(set_fn=set_fn, step_fn=step_fn, handle=handle, xid=xid, xbuf=xbuf, nbytes=x.nbytes):
                set_fn(handle, xid, xbuf, nbytes)
                step_fn(handle)
            fns[f"generated {arch}"] = run_generated
            fns[f"_keep {arch}"] = ex          # keeps the executor (and its library) alive
        timed = {k: f for k, f in fns.items() if not k.startswith("_keep")}
        best = dict.fromkeys(timed, float("inf"))
        for fn in timed.values():
            fn()
        for _ in range(args.repeat):
            for name, fn in timed.items():
                t = clock()
                for _ in range(args.steps):
                    fn()
                best[name] = min(best[name], (clock() - t) / args.steps)
        xnn_exact = bool(np.array_equal(xnn.get_tensor(out_index), expected))
        for name, seconds in best.items():
            arch = name.removeprefix("generated ")
            rows.append({"model": short, "impl": name, "us": seconds * 1e6,
                         "vs_litert": seconds / best["litert-xnnpack"],
                         "bit_exact_with_reference": exact.get(arch, xnn_exact)})
    print(f"{'model':6} {'implementation':26} {'us/inference':>13} {'/ LiteRT':>9}  bit-exact with BUILTIN_REF")
    for r in rows:
        print(f"{r['model']:6} {r['impl']:26} {r['us']:13.1f} {r['vs_litert']:9.2f}  {r['bit_exact_with_reference']}")
    print(f"machine: {cpu_model()}, one thread, clock {args.clock}")
    if args.out:
        args.out.write_text(json.dumps({"machine": cpu_model(), "clock": args.clock, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
