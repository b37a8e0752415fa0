"""`openinfer check`: bind a graph to a model and print what it resolved to."""

from __future__ import annotations

import argparse

from ..ir.check import summary
from .args import add_graph_args, load

HELP = """\
Parse GRAPH, bind it to MODEL and validate it: sizevars, @ref/@pattern model keys, shapes and
dtypes of every node (through the op registry), memory-kind, control-flow, cache and yield/await
rules. Prints the bound graph — variables with their resolved shapes and data sources, then each
block's nodes with the op mode and output type — or the first error with its location.
Exits 1 on error.

example:
  openinfer check examples/residual_mlp_stack.oig --model residual_mlp_stack.oinf"""


def register(sub) -> None:
    p = sub.add_parser("check", help="parse, bind and validate a graph against a model",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(p, model_required=False)
    p.set_defaults(handler=check)


def check(args) -> int:
    _, graph, bound = load(args)
    print(summary(bound))
    return 0
