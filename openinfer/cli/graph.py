"""`openinfer graph ...`: convert a graph (.oig, .json or .rs) to graph JSON or Graphviz DOT."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..dsl import load_graph
from ..files import check_output_path
from ..ir.dot import graph_to_dot
from ..ir.json import graph_to_json

GROUP_HELP = """\
Read a graph from DSL text (.oig), graph JSON (.json) or a Rust file containing
`graph! { ... }` (.rs), check that it parses, and write it in another form.

examples:
  openinfer graph json examples/mlp_regression.oig -o mlp.json
  openinfer graph dot examples/kv_cache_decode.oig | dot -Tsvg > kv.svg"""

JSON_HELP = """\
Write the graph as JSON in the original OpenInfer's format (sorted keys, two-space
indent). `openinfer graph json g.json` re-emits a JSON graph byte for byte.

example:
  openinfer graph json examples/mlp_regression.oig -o mlp_regression.json"""

DOT_HELP = """\
Write the graph as Graphviz DOT: a cluster per block, nodes labelled like trace
lines, solid control-flow edges, dotted yield/await edges and dashed data edges.

example:
  openinfer graph dot examples/linear_attention.oig -o la.dot && dot -Tpng la.dot -o la.png"""


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("graph", help="convert a graph to JSON or Graphviz DOT",
                                  description=GROUP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    group.set_defaults(help_parser=group)
    leaves = group.add_subparsers(dest="graph_command", metavar="FORMAT", title="formats")
    for name, helptext, description, handler in (
        ("json", "write graph JSON (the original's format)", JSON_HELP, _json),
        ("dot", "write Graphviz DOT", DOT_HELP, _dot),
    ):
        leaf = leaves.add_parser(name, help=helptext, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        leaf.add_argument("file", metavar="FILE", help="graph source: .oig (DSL), .json (graph JSON) or .rs (graph!)")
        leaf.add_argument("-o", "--output", metavar="OUT", help="output file (default: standard output)")
        leaf.add_argument("--index", type=int, default=0, metavar="N",
                          help="for .rs files: which graph! invocation to read, counting from 0 (default 0)")
        leaf.set_defaults(handler=handler)


def _json(args: argparse.Namespace) -> int:
    return _emit(args, lambda g: graph_to_json(g) + "\n")


def _dot(args: argparse.Namespace) -> int:
    return _emit(args, lambda g: graph_to_dot(g, Path(args.file).stem))


def _emit(args: argparse.Namespace, render) -> int:
    check_output_path(args.output, "--output", inputs=[args.file])
    text = render(load_graph(args.file, index=args.index))
    if args.output is not None:      # (openinfer.cli.main reports a file that cannot be written)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
