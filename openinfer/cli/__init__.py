"""The `openinfer` command line: argument parsing and error printing only.

Each command family is a module of this package (oinf, check, run, synth, devices, cache, graph,
onnx; args.py holds the options they share) and exposes `register(subparsers)`, which adds its
sub-commands and binds each to a handler taking the parsed arguments and returning an exit code.
The stages below (openinfer.oinf, .ir, .reference, .synth, .onnx) know nothing of the command line.

Errors derived from `OpenInferError` are printed as they are (they are written for users) after
`openinfer: error: `, as argparse prints usage errors, and exit with status 1; so do a file that
cannot be read or written and memory that cannot be had, never a traceback. Usage errors exit
with status 2.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import OpenInferError
from . import cache, check, devices, generate, graph, oinf, onnx, run, synth

#: The modules that contribute sub-commands, in the order `--help` lists them.
COMMAND_MODULES = (oinf, check, run, synth, generate, devices, cache, graph, onnx)

DESCRIPTION = """\
OpenInfer: write inference logic in a small graph DSL, keep weights in one .oinf package, and
synthesize plain C (AVX2/AVX-512) or GLSL + Vulkan source for a device described in JSON.

Typical flow:
  openinfer oinf inspect model.oinf           look inside a model package
  openinfer check graph.oig --model m.oinf    parse, bind and validate a graph
  openinfer run graph.oig --model m.oinf      run it with the NumPy reference
  openinfer gen graph.oig --model m.oinf --arch devices/x86_64-avx2.json -o out/
  openinfer sim graph.oig --model m.oinf --arch devices/x86_64-avx2.json
  openinfer import model.onnx -o out/          ONNX -> out/model.oig + out/model.oinf
  openinfer generate dec.oig -m dec.oinf --prompt-ids 1,2,3 --max-new-tokens 8

Run `openinfer COMMAND --help` for the options of each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openinfer", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"openinfer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        # `openinfer` or `openinfer oinf` alone: show the help of that level
        (getattr(args, "help_parser", None) or parser).print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except OpenInferError as exc:
        print(f"openinfer: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("openinfer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:      # a file a command reads or writes: missing, a directory, not writable, ...
        where = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"openinfer: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # (NumPy's says what it could not allocate)
        print(f"openinfer: error: out of memory{f': {exc}' if str(exc) else ''}", file=sys.stderr)
        return 1
