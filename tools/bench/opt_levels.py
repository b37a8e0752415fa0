"""Generated code under each toolchain of the compiler matrix: step time of the suite's workloads
built with GCC and Clang at -O2 and -O3, per CPU target (the evidence for the optimization level
the generated meson project uses: docs/synthesis.md, "Compilers and optimization levels").

    python tools/bench/opt_levels.py [--rows cnn mlp encoder decoder-test] [--targets ...]
                                     [--rounds 5] [--threads 1] [--out build/bench/opt_levels.json]

The libraries of one (workload, target) are built first, then timed interleaved: each round
times every toolchain's library once (a run: whole passes over the workload's feeds, at least
--min-time seconds, mean per step), so a drift of the machine spreads over all of them; the
median of the rounds is reported, with min-max. Outputs are checked against the first library's
before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).resolve().parent)]

import numpy as np  # noqa: E402
import workloads  # noqa: E402
from benchlib import machine  # noqa: E402
from compilers import TOOLCHAINS  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.targets.devices import load  # noqa: E402

ROWS = workloads.BUILDERS


def _executor(wl, work: Path, target: str, toolchain, threads: int):
    os.environ["OI_NUM_THREADS"] = str(threads)
    with toolchain.active():
        sim = oi.Simulator(oi.ModelLoader.open(work / "model.oinf"), oi.graph(wl.graph), arch=target,
                           outputs=set(wl.outputs), build_options=toolchain.build_options)
    return sim.make_executor()


def _pass(ex, wl) -> tuple[float, dict]:
    ex.reset()
    t = time.perf_counter()
    for feeds in wl.feeds:
        ex.insert(**feeds)
        ex.run_step()
    dt = time.perf_counter() - t
    return dt / len(wl.feeds), {n: ex.fetch(n) for n in wl.outputs}


def _timed(ex, wl, min_time: float) -> float:
    per_step, _ = _pass(ex, wl)
    passes = max(1, int(min_time / max(per_step * len(wl.feeds), 1e-9)))
    return sum(_pass(ex, wl)[0] for _ in range(passes)) / passes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=["cnn", "mlp", "encoder", "decoder-bench"])
    ap.add_argument("--targets", nargs="+", default=None, help="CPU descriptors (default: those this machine runs)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path("build/bench/opt_levels"))
    ap.add_argument("--out", type=Path, default=Path("build/bench/opt_levels.json"))
    args = ap.parse_args(argv)
    targets = args.targets or [t for t in ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")
                               if not load(t).missing_on_host()]
    toolchains = [t for t in TOOLCHAINS if not t.missing()]
    os.environ.setdefault("OI_CACHE_DIR", str(args.work.resolve() / "cache"))
    results = {"machine": machine(), "threads": args.threads, "rounds": args.rounds, "rows": []}
    print(f"{'workload':14} {'target':16} " + " ".join(f"{t.name:>22}" for t in toolchains))
    for row in args.rows:
        wl = ROWS[row]()
        work = args.work / row
        work.mkdir(parents=True, exist_ok=True)
        oi.write_oinf(work / "model.oinf", wl.tensors, sizevars=wl.sizevars)
        for target in targets:
            exs = [_executor(wl, work, target, t, args.threads) for t in toolchains]
            _, want = _pass(exs[0], wl)
            for t, ex in zip(toolchains, exs, strict=True):
                _, got = _pass(ex, wl)
                for n in wl.outputs:
                    np.testing.assert_allclose(got[n], want[n], rtol=1e-3, atol=1e-4, err_msg=f"{row} {t.name}")
            times = {t.name: [] for t in toolchains}
            for _ in range(args.rounds):
                for t, ex in zip(toolchains, exs, strict=True):
                    times[t.name].append(_timed(ex, wl, args.min_time))
            cells = []
            for t in toolchains:
                us = [x * 1e6 for x in times[t.name]]
                cells.append(f"{statistics.median(us):9.1f} ({min(us):.1f}-{max(us):.1f})")
            print(f"{row:14} {target:16} " + " ".join(f"{c:>22}" for c in cells), flush=True)
            results["rows"].append({"row": row, "target": target,
                                    "us_per_step": {k: [x * 1e6 for x in v] for k, v in times.items()}})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
