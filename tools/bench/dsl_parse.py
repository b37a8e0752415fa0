"""Parse speed of the DSL on a generated 32-layer transformer decoder (~2,800 nodes, ~49k tokens;
tests/dsl/dsl_decoder_graph.py): the best of `--repeat` parses, in milliseconds.

    python tools/bench/dsl_parse.py [--layers 32] [--heads 8] [--repeat 5]

The target is parse + bind under 200 ms; parsing alone took 55-70 ms on a current server core
(Python 3.12) and 85-140 ms on a slow two-core machine. tests/dsl/test_dsl_perf.py checks the
parse itself (the node and declaration counts); the time is measured here, not asserted in tests.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "dsl"))

from dsl_decoder_graph import decoder_source  # noqa: E402

from openinfer.dsl import parse  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    source = decoder_source(n_layers=args.layers, n_heads=args.heads)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        graph = parse(source, "decoder.oig")
        best = min(best, time.perf_counter() - start)
    print(f"{args.layers}-layer decoder: {graph.next_index} nodes, {len(source):,} characters, "
          f"parsed in {best * 1000:.1f} ms (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
