"""One dynamic build against a static build per length (not a test; run it by hand).

    python3 tools/bench/dynamic_bench.py [OUT.json] [--arch x86_64-avx2] [--threads 1 2]
                                         [--lengths 16 64 128] [--repeat 15]

The encoder at its bench size (examples/encoder.py: 4 layers, dim 256, FFN 1024, bound 128).
The dynamic build is generated once with `dynamic={"S": 128}` and set to each length with
`set_sizes`; each static build is generated for its length, from a model whose position table
has exactly that many rows. A step's time is the best of `--repeat`, the two builds alternated
(inputs inserted before every step in both). The figures, the ratio dynamic / static and the
machine go into OUT.json (default: print only). `OI_NUM_THREADS` is set per `--threads` value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import interleaved_best, load_example, machine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, help="write the figures here as JSON")
    ap.add_argument("--arch", default=None, help="device descriptor (default: this machine's widest)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)

    import numpy as np

    import openinfer as oi
    from openinfer.synth.devices import best_host_target

    encoder = load_example("encoder")
    cfg = encoder.SIZES["bench"]
    bound = cfg.seq
    if max(args.lengths) > bound or min(args.lengths) < 1:
        ap.error(f"--lengths must lie in 1..{bound}")
    arch = args.arch or best_host_target()
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
                row = {"threads": threads, "length": n, "static_ms": best["static"] * 1e3,
                       "dynamic_ms": best["dynamic"] * 1e3, "ratio": best["dynamic"] / best["static"]}
                rows.append(row)
                print(f"threads {threads}  S={n:<4} static {row['static_ms']:7.2f} ms  dynamic (S <= {bound}) "
                      f"{row['dynamic_ms']:7.2f} ms  dynamic / static {row['ratio']:.2f}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"machine": machine(), "arch": arch, "bound": bound, "rows": rows},
                                       indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
