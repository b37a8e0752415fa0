"""Argument helpers shared by the command modules (graph/model/sizevar options, output files)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api import bind_inputs
from ..errors import OpenInferError
from ..files import check_output_path
from ..ir.bind import rebind

#: How --inputs and --save-outputs work; run, trace and sim print it in their --help.
INPUTS_HELP = """\
--inputs FILE.npz gives the dynamic inputs instead (numpy.savez(FILE, x=..., ...)): `x` for every
step, or `step0/x`, `step1/x`, ... per step (a step's own value wins); --steps defaults to the
number of steps the file holds. Every input must be present and no other name, with the
variable's shape. Values are checked, never narrowed silently: integers must fit the variable's
type, floats are never taken for an integer or bool variable, floats of another width are rounded
to the variable's type. --save-outputs FILE.npz writes the outputs (`y`, or `step0/y`, ... when
several steps run) in the same form; the file is replaced whole or not at all."""


def add_graph_args(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    p.add_argument("graph", metavar="GRAPH", help="the graph: a .oig file, graph JSON, or a Rust file with graph! { }")
    p.add_argument("--model", "-m", metavar="MODEL.oinf", required=model_required,
                   help="the model package holding sizevars and weights")
    p.add_argument("--sizevar", "-s", action="append", default=[], metavar="NAME=VALUE",
                   help="override (or supply) one of the graph's size variables; repeatable")
    p.add_argument("--dynamic", "-d", action="append", default=[], metavar="NAME=BOUND",
                   help="make a size variable dynamic: generated code takes its value at run time "
                        "(NAME_set_size), from 1 up to BOUND, which the memory is planned for; repeatable "
                        "(a model's `dynamic.NAME` metadata gives a bound without the flag)")


def add_io_args(p: argparse.ArgumentParser) -> None:
    """--steps, --seed, --inputs and --save-outputs (run, trace and sim)."""
    p.add_argument("--steps", type=int, default=None,
                   help="steps to run, at least 1 (default 1, or as many as --inputs holds)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs, an integer >= 0 (default 0)")
    p.add_argument("--inputs", "-i", metavar="FILE.npz", help="read the dynamic inputs from this .npz")
    p.add_argument("--save-outputs", metavar="FILE.npz",
                   help="write the outputs to this .npz (a new or regular file, not one of the inputs)")
    p.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                   help="run with dynamic size variable NAME at VALUE (default: its bound); repeatable")


def input_files(args) -> list[str | None]:
    """The files a graph command reads (None where not given): no output may be one of them."""
    return [args.graph, getattr(args, "model", None), getattr(args, "inputs", None), getattr(args, "arch", None)]


def check_io_args(args) -> None:
    """run/trace/sim: --steps and --seed in range and --save-outputs writable, checked before any
    work (openinfer/files.py says which output paths are refused)."""
    if args.steps is not None and args.steps < 1:      # 0 steps compared nothing and reported a match
        raise OpenInferError(f"--steps {args.steps}: a run takes at least 1 step")
    if args.seed < 0:           # numpy's default_rng takes none
        raise OpenInferError(f"--seed {args.seed}: the seed is an integer >= 0")
    check_output_path(args.save_outputs, "--save-outputs", inputs=input_files(args))


def _pairs(items: list[str], flag: str) -> dict[str, int]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise OpenInferError(f"{flag} {item!r}: expected NAME=VALUE with a non-negative integer value")
        out[name.strip()] = int(value)
    return out


def sizevars(args) -> dict[str, int]:
    return _pairs(args.sizevar, "--sizevar")


def dynamic(args) -> dict[str, int]:
    return _pairs(getattr(args, "dynamic", []), "--dynamic")


def run_sizes(args) -> dict[str, int]:
    return _pairs(getattr(args, "size", []), "--size")


def load(args):
    """(model, graph, bound graph) from the common arguments; with dynamic sizevars, the graph
    bound at the sizes it runs at (--size, else the bounds) for commands that run it."""
    for path in (args.graph, args.model):
        if path is not None and Path(path).suffix.lower() == ".onnx":
            stem = Path(path).stem
            raise OpenInferError(f"{path} is an ONNX model: import it first, `openinfer import {path} -o DIR` writes "
                                 f"DIR/{stem}.oig (the graph) and DIR/{stem}.oinf (the model) to give this command")
    model, graph, bound = bind_inputs(args.model, Path(args.graph), sizevars(args), dynamic(args))
    given = {**{k: "--sizevar" for k in sizevars(args)}, **{k: "--dynamic" for k in dynamic(args)}}
    unknown = sorted(set(given) - bound.used_sizevars)
    if unknown:     # a typo would otherwise leave the size it meant at the model's value, silently
        raise OpenInferError(f"{given[unknown[0]]} {unknown[0]}: the graph has no size variable `{unknown[0]}`"
                             + (f" (nor {', '.join(unknown[1:])})" if unknown[1:] else "")
                             + f"; its size variables: {', '.join(sorted(bound.used_sizevars)) or 'none'}")
    if hasattr(args, "size") and (bound.dynamic or args.size):
        bound = rebind(bound, run_sizes(args))
    return model, graph, bound
