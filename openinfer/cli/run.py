"""`openinfer run` and `openinfer trace`: execute a graph with the NumPy reference."""

from __future__ import annotations

import argparse
import json

import numpy as np

from ..files import check_output_path, write_text
from ..inputs import input_feed, outputs_of, preview, save_outputs
from ..reference.executor import ReferenceExecutor
from ..trace import to_chrome, to_json
from .args import INPUTS_HELP, add_graph_args, add_io_args, check_io_args, input_files, load

RUN_HELP = """\
Run GRAPH on MODEL with the NumPy reference interpreter for --steps steps and print each step's
volatile outputs. Dynamic inputs are random and reproducible: step s uses numpy's default_rng(SEED + s),
floats uniform in [-1, 1), integers in [-4, 4] (see openinfer/inputs.py).

""" + INPUTS_HELP + """

examples:
  openinfer run examples/mlp_regression.oig --model build/models/mlp_regression.oinf --steps 2
  openinfer run g.oig --model m.oinf --inputs in.npz --save-outputs out.npz"""

TRACE_HELP = """\
Run GRAPH like `openinfer run` with tracing on and write the trace: --json in the original
OpenInfer event format (block_name, node_index, node_uuid, kind, params, output, micros), --chrome
as Chrome/Perfetto trace-event JSON (open it in ui.perfetto.dev or chrome://tracing).
--inputs and --save-outputs work as in `openinfer run` (see `openinfer run --help`).

example:
  openinfer trace examples/kv_cache_decode.oig --model m.oinf --steps 3 --chrome kv.trace.json"""


def register(sub) -> None:
    p = sub.add_parser("run", help="run a graph with the NumPy reference and print its outputs",
                       description=RUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(p)
    add_io_args(p)
    p.add_argument("--show", default="", metavar="A,B", help="variables to print (default: every volatile)")
    p.add_argument("--all", action="store_true", help="print whole tensors instead of the first 8 values")
    p.set_defaults(handler=run)

    t = sub.add_parser("trace", help="run a graph with tracing and write the trace as JSON / Chrome trace",
                       description=TRACE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(t)
    add_io_args(t)
    t.add_argument("--json", metavar="FILE", help="write events in the original's JSON format ('-': stdout)")
    t.add_argument("--chrome", metavar="FILE", help="write a Chrome/Perfetto trace-event file")
    t.add_argument("--full", action="store_true", help="record a summary of every node's output values")
    t.set_defaults(handler=trace)


def run(args) -> int:
    check_io_args(args)
    _, _, bound = load(args)
    steps, inputs = input_feed(bound, seed=args.seed, steps=args.steps, path=args.inputs)
    ex = ReferenceExecutor(bound)
    names = [n for n in args.show.split(",") if n] or outputs_of(bound)
    saved = []
    with np.printoptions(threshold=1 << 30, linewidth=120):
        for step in range(steps):
            ex.insert(**inputs(step))
            ex.run_step()
            values = {name: ex.fetch(name) for name in names}
            for name, value in values.items():
                text = np.array2string(value, separator=", ") if args.all else preview(value)
                print(f"step {step} {name}: {value.dtype}{list(value.shape)} = {text}")
            saved.append(values)
    if args.save_outputs is not None:
        save_outputs(args.save_outputs, saved)
    return 0


def trace(args) -> int:
    check_io_args(args)
    for flag, path in (("--json", args.json), ("--chrome", args.chrome)):
        if path != "-":
            check_output_path(path, flag, inputs=input_files(args))
    _, _, bound = load(args)
    steps, inputs = input_feed(bound, seed=args.seed, steps=args.steps, path=args.inputs)
    ex = ReferenceExecutor(bound, trace="full" if args.full else True)
    saved = []
    for step in range(steps):
        ex.insert(**inputs(step))
        ex.run_step()
        saved.append({name: ex.fetch(name) for name in outputs_of(bound)})
    if args.save_outputs is not None:
        save_outputs(args.save_outputs, saved)
    events = ex.trace()
    if args.json is not None:
        write_text(args.json, to_json(events) + "\n")
    if args.chrome is not None:
        write_text(args.chrome, json.dumps(to_chrome(events, process_name=bound.graph.source_name or "graph"),
                                           indent=1) + "\n")
    if args.json is None and args.chrome is None:
        for e in events:
            print(e.line())
    return 0
