"""Toolchain and interpreter benchmarks (not tests: figures to record, with the machine).

    python tools/bench/toolchain.py [--out results.json] [--repeat 5]

Rows:
- parse + bind of a generated 32-layer decoder written out per layer and per head (~2,000 nodes);
- `openinfer gen` (bind + lower + plan + render, no compiler) of a 32-layer decoder, looped and
  unrolled, and unrolled with only the next token observable (buffer sharing and reshape views);
- reference interpreter: steps/s and per-node overhead on mlp_regression and on a 32-layer decode
  step (tiny dims, so the time is the interpreter's, not NumPy's);
- compiled program: per-step cost through cffi (insert + run_step + fetch) on mlp_regression,
  and the bare step call.
Best of --repeat runs each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import load_example, machine  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.ir.bind import bind  # noqa: E402
from openinfer.ir.nodes import walk  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    decoder = load_example("decoder")
    models = load_example("models")
    rows: list[tuple[str, float, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="oi-bench-"))

    # parse + bind, 32 layers written out
    cfg = decoder.SIZES["toolchain"]
    graph_path, model_path = decoder.write(cfg, tmp / "unrolled", unrolled=True)
    text = graph_path.read_text()
    model = oi.ModelLoader.open(model_path)
    graph = oi.graph(text)
    n_nodes = sum(len(walk(b.nodes)) for b in graph.blocks.values())
    t_parse = best(lambda: oi.graph(text), args.repeat)
    t_bind = best(lambda: bind(graph, model), args.repeat)
    rows += [(f"parse 32-layer decoder ({n_nodes} nodes)", t_parse * 1e3, "ms"),
             ("bind the same graph", t_bind * 1e3, "ms"),
             ("parse + bind", (t_parse + t_bind) * 1e3, "ms")]

    # gen (no compiler), looped and unrolled 32-layer decoders
    synth = oi.Synthesizer.from_arch("x86_64-avx2")
    looped_graph, looped_model = decoder.write(replace(cfg, name="decoder_looped"), tmp / "looped")
    # (only the next token observable: the memory plan shares buffers and reshapes become views)
    for label, g, m, outputs in (("looped", looped_graph, looped_model, None),
                                 ("unrolled", graph_path, model_path, None),
                                 ("unrolled, outputs=next", graph_path, model_path, {"next"})):
        gm, gg = oi.ModelLoader.open(m), oi.load_graph(g)
        t = best(lambda gm=gm, gg=gg, outputs=outputs: synth.synthesize(gm, gg, outputs=outputs), args.repeat)
        rows.append((f"gen 32-layer decoder, {label} (bind+lower+plan+render)", t * 1e3, "ms"))

    # interpreter
    models.write_model("mlp_regression", tmp / "mlp.oinf")
    mlp_model = oi.ModelLoader.open(tmp / "mlp.oinf")
    mlp_graph = oi.load_graph(REPO / "examples" / "mlp_regression.oig")
    ex = oi.Reference(mlp_model, mlp_graph).make_executor()
    x = np.zeros((4, 16), np.float32)

    def mlp_step(engine=ex):
        engine.insert(x=x)
        engine.run_step()

    t = best(lambda: [mlp_step() for _ in range(200)], args.repeat) / 200
    rows += [("reference: mlp_regression step", t * 1e6, "us"),
             ("reference: mlp_regression per node", t / 6 * 1e6, "us")]
    # interpreter overhead alone: a loop of 1-element adds (the NumPy work is negligible)
    tiny = oi.graph("volatile { a: f32[1] @init(1.0); }\nblock entry { loop l (i in 0..1000) { op add(a, a) >> a; } }")
    tiny_ex = oi.Reference(None, tiny).make_executor()
    t = best(tiny_ex.run_step, args.repeat) / 1000
    rows.append(("reference: per-node overhead (1000 one-element adds)", t * 1e6, "us"))
    dec_ex = oi.Reference(oi.ModelLoader.open(looped_model), oi.load_graph(looped_graph)).make_executor()
    steps = 0

    def dec_step():
        nonlocal steps
        if steps == cfg.max_seq:
            dec_ex.reset()
            steps = 0
        dec_ex.insert(token=np.array([1], np.int32))
        dec_ex.run_step()
        steps += 1

    per_step = best(lambda: [dec_step() for _ in range(5)], args.repeat) / 5
    dec_ex.reset()
    dec_ex.insert(token=np.array([1], np.int32))
    nodes_per_step = len(list(dec_ex.iterate()))
    rows += [("reference: 32-layer decode step (D=128)", per_step * 1e3, "ms"),
             (f"reference: per node ({nodes_per_step} nodes/step, NumPy work included)",
              per_step / nodes_per_step * 1e6, "us")]

    # compiled program through cffi
    os.environ.setdefault("OI_CACHE_DIR", str(tmp / "sim"))
    sim_ex = oi.Simulator(mlp_model, mlp_graph, arch="x86_64-avx2").make_executor()

    def sim_step():
        sim_ex.insert(x=x)
        sim_ex.run_step()
        sim_ex.fetch("y")

    t = best(lambda: [sim_step() for _ in range(1000)], args.repeat) / 1000
    rows.append(("compiled mlp_regression: insert + run_step + fetch (cffi)", t * 1e6, "us"))
    step_fn, handle = sim_ex.link.fn["step"], sim_ex.link.handle
    set_fn = sim_ex.link.fn["set"]
    buf = sim_ex.link.ffi.from_buffer(x)
    t = best(lambda: [(set_fn(handle, 0, buf, x.nbytes), step_fn(handle)) for _ in range(5000)], args.repeat) / 5000
    rows.append(("compiled mlp_regression: raw set + step call", t * 1e6, "us"))

    width = max(len(r[0]) for r in rows)
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, load {info['load']:.2f}")
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:10.2f} {unit}")
    if args.out:
        args.out.write_text(json.dumps({"machine": info, "rows": [{"name": n, "value": v, "unit": u}
                                                                   for n, v, u in rows]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
