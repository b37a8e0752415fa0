"""Runs the ONNX backend node tests through `openinfer import` and writes the per-op table of
docs/onnx.md (between its node-table markers) from the run, as tests/onnx/test_onnx_node_cases.py
runs them: every supported case on the reference, and a few passing cases that together use every
DSL op the imported graphs use on the generated C (x86_64-generic). Prints every case that failed
or was refused, with why.

    python tools/onnx_node_table.py [--doc docs/onnx.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import openinfer as oi
    from openinfer.onnx import node_tests as nt

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "onnx.md")
    args = ap.parse_args(argv)
    cases = nt.collect_cases()
    supported = nt.supported_cases(cases)
    results = [nt.run_case(c) for c in supported]

    def generated_c(model, graph):
        return oi.Simulator(model, graph, arch="x86_64-generic").make_executor()

    c_results = {c.name: nt.run_case(c, generated_c) for c in nt.c_subset(supported, results)}
    for r in results + list(c_results.values()):
        if r.outcome != nt.PASSED:
            print(f"{r.outcome}: {r.name} ({', '.join(r.ops)}): {r.detail}")
    nt.write_table(args.doc, nt.tabulate(results, len(cases), c_results))
    print(f"wrote the table of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
