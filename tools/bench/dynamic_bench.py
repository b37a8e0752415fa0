"""One dynamic build against a static build per length (not a test; run it by hand).

    python3 tools/bench/dynamic_bench.py [OUT.json] [--workloads encoder decoder] [--arch x86_64-avx2]
                                         [--threads 1 2] [--lengths 16 64 128] [--cached 8 60] [--repeat 15]

encoder: the encoder at its bench size (examples/encoder.py: 4 layers, dim 256, FFN 1024, bound
128). The dynamic build is generated once with `dynamic={"S": 128}` and set to each length with
`set_sizes`; each static build is generated for its length, from a model whose position table
has exactly that many rows. A step's time is the best of `--repeat`, the two builds alternated
(inputs inserted before every step in both).

decoder: examples/decoder.py's bench size (8 layers, dim 768, 271 MB of f32 weights, a 64-row
cache) with `--window` attention over the rows in use: `cache.read Kc[l, 0..pos] >> kc` sets the
dynamic size P (P <= 64, from the model's metadata) to the tokens cached. Its step with n cached
rows (the n-th step after a reset) is timed against a static build of the same graph reading
`Kc[l, 0..P]` with P fixed at n (`sizevars={"P": n}`, the same model) and the masked whole-cache
graph (the decoder without `--window`: attention over all 64 rows), whose costs do not depend on
the step. Each round resets the three builds, runs n - 1 steps of each untimed, then times the
n-th step of each; a step's time is the best over `--repeat` rounds.

The figures, the ratio dynamic / static and the machine go into OUT.json (default: print only).
`OI_NUM_THREADS` is set per `--threads` value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import interleaved_best, load_example, machine  # noqa: E402

from openinfer.targets.devices import best_host_target  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, help="write the figures here as JSON")
    ap.add_argument("--arch", default=None, help="device descriptor (default: this machine's widest)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128])
    ap.add_argument("--cached", type=int, nargs="+", default=[8, 60], help="decoder: cache rows attended to")
    ap.add_argument("--workloads", nargs="+", choices=("encoder", "decoder"), default=["encoder", "decoder"])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    arch = args.arch or best_host_target()
    rows = []
    if "encoder" in args.workloads:
        rows += encoder_rows(args, arch)
    if "decoder" in args.workloads:
        rows += decoder_rows(args, arch)
    if args.out:
        args.out.write_text(json.dumps({"machine": machine(), "arch": arch, "rows": rows}, indent=1) + "\n")
    return 0


def encoder_rows(args, arch: str) -> list[dict]:

    import numpy as np

    import openinfer as oi

    encoder = load_example("encoder")
    cfg = encoder.SIZES["bench"]
    bound = cfg.seq
    if max(args.lengths) > bound or min(args.lengths) < 1:
        raise SystemExit(f"--lengths must lie in 1..{bound}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        graph, model = encoder.write(cfg, out)
        statics = {}
        for n in args.lengths:
            tensors = encoder.tensors(cfg)
            tensors["pos_emb"] = tensors["pos_emb"][:n]
            path = out / f"static{n}.oinf"
            oi.write_oinf(path, tensors=tensors, sizevars={**encoder.sizevars(cfg), "S": n})
            statics[n] = path
        for threads in args.threads:
            os.environ["OI_NUM_THREADS"] = str(threads)     # read when a library's pool starts
            dynamic = oi.Simulator(model, graph, arch=arch, dynamic={"S": bound}).make_executor()
            for n in args.lengths:
                static = oi.Simulator(statics[n], graph, arch=arch).make_executor()
                rng = np.random.default_rng(n)
                feed = {"tokens": rng.integers(0, cfg.vocab, n).astype(np.int32), "mask": np.ones(n, bool)}
                dynamic.set_sizes(S=n)

                def step(ex, feed=feed):
                    ex.insert(**feed)
                    ex.run_step()

                best = interleaved_best({"static": lambda ex=static: step(ex), "dynamic": lambda ex=dynamic: step(ex)},
                                        args.repeat)
                row = {"workload": "encoder", "threads": threads, "length": n, "static_ms": best["static"] * 1e3,
                       "dynamic_ms": best["dynamic"] * 1e3, "ratio": best["dynamic"] / best["static"]}
                rows.append(row)
                print(f"threads {threads}  S={n:<4} static {row['static_ms']:7.2f} ms  dynamic (S <= {bound}) "
                      f"{row['dynamic_ms']:7.2f} ms  dynamic / static {row['ratio']:.2f}", flush=True)
    return rows


def decoder_rows(args, arch: str) -> list[dict]:
    import numpy as np

    import openinfer as oi

    decoder = load_example("decoder")
    cfg = decoder.SIZES["bench"]
    if max(args.cached) > cfg.max_seq or min(args.cached) < 1:
        raise SystemExit(f"--cached must lie in 1..{cfg.max_seq}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        window_graph, window_model = decoder.write(cfg, Path(tmp), window=True)
        masked_graph, masked_model = decoder.write(cfg, Path(tmp))
        fixed_text = window_graph.read_text().replace("0..pos]", "0..P]")     # the first P rows, P static
        for threads in args.threads:
            os.environ["OI_NUM_THREADS"] = str(threads)
            dynamic = oi.Simulator(window_model, window_graph, arch=arch).make_executor()
            masked = oi.Simulator(masked_model, masked_graph, arch=arch).make_executor()
            for n in args.cached:
                static = oi.Simulator(window_model, fixed_text, arch=arch, sizevars={"P": n}).make_executor()
                builds = {"static": static, "dynamic": dynamic, "masked": masked}
                best = dict.fromkeys(builds, float("inf"))
                token = {"token": np.array([1], np.int32)}
                for _ in range(args.repeat):
                    for ex in builds.values():
                        ex.reset()
                        for _ in range(n - 1):
                            ex.insert(**token)
                            ex.run_step()
                    for name, ex in builds.items():
                        ex.insert(**token)
                        t = time.perf_counter()
                        ex.run_step()
                        best[name] = min(best[name], time.perf_counter() - t)
                    assert dynamic.sizes() == {"P": n}
                row = {"workload": "decoder", "threads": threads, "cached": n,
                       **{f"{k}_ms": v * 1e3 for k, v in best.items()}, "ratio": best["dynamic"] / best["static"]}
                rows.append(row)
                print(f"threads {threads}  decoder, {n:>2} cached rows: static (P = {n}) {row['static_ms']:7.2f} ms  "
                      f"dynamic (P <= {cfg.max_seq}, set by the read) {row['dynamic_ms']:7.2f} ms  dynamic / static "
                      f"{row['ratio']:.2f}  (masked whole cache {row['masked_ms']:.2f} ms)", flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
