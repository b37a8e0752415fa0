"""Runs the ONNX backend node tests through `openinfer import` and writes the per-op table of
docs/onnx.md (between its node-table markers) from the run, as tests/onnx/test_onnx_node_cases.py
runs them: every supported case on the reference, a few passing cases that together use every
DSL op (and `branch`, `loop`) the imported graphs use on the generated C (the host's best CPU target),
and the supported models of the package's pytorch-converted and pytorch-operator folders on the
reference. Prints every case that failed or was refused, with why.

    python tools/onnx_node_table.py [--doc docs/onnx.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from openinfer.onnx import node_tests as nt

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "onnx.md")
    args = ap.parse_args(argv)
    run = nt.run_all()
    for r in (run.results + [r for ran in run.c_results.values() for r in ran.values()]
              + [r for mine in run.folder_results.values() for r in mine]):
        if r.outcome != nt.PASSED:
            print(f"{r.outcome}: {r.name} ({', '.join(r.ops)}): {r.detail}")
    nt.write_table(args.doc, nt.tabulate(run.results, len(run.cases), run.c_results))
    nt.write_table(args.doc, nt.tabulate_folders(run.folder_results, {k: len(v) for k, v in run.folder_cases.items()}),
                   "folder-table")
    print(f"wrote the tables of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
