"""Argument helpers shared by the command modules (graph/model/sizevar options, output files)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .errors import OpenInferError


def add_graph_args(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    p.add_argument("graph", metavar="GRAPH", help="the graph: a .oig file, graph JSON, or a Rust file with graph! { }")
    p.add_argument("--model", "-m", metavar="MODEL.oinf", required=model_required,
                   help="the model package holding sizevars and weights")
    p.add_argument("--sizevar", "-s", action="append", default=[], metavar="NAME=VALUE",
                   help="override (or supply) a size variable; repeatable")


def sizevars(args) -> dict[str, int]:
    out = {}
    for item in args.sizevar:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit():
            raise OpenInferError(f"--sizevar {item!r}: expected NAME=VALUE with a non-negative integer value")
        out[name.strip()] = int(value)
    return out


def load(args):
    """(model, graph, bound graph) from the common arguments."""
    from .api import bind_inputs

    return bind_inputs(args.model, Path(args.graph), sizevars(args))


def write_text(path: str, text: str) -> None:
    if path == "-":
        print(text, end="" if text.endswith("\n") else "\n")
        return
    _atomic_write(Path(path), text)


def _atomic_write(path: Path, text: str) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
