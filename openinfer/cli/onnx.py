"""`openinfer import`: an ONNX or TFLite model -> a DSL graph and its `.oinf` model."""

from __future__ import annotations

import argparse

from ..errors import OpenInferError
from ..onnx import import_onnx
from ..onnx import list_ops as onnx_ops
from .args import sizevars

IMPORT_HELP = """\
Import an ONNX or TFLite model (by its file: a .tflite file is a TFLite flatbuffer, anything
else is read as ONNX): write OUT/NAME.oig (the graph as DSL text you can read and edit) and
OUT/NAME.oinf (its weights, in the layouts the ops take). Graph inputs become `dynamic`
variables, initializers `constant`s, everything computed `volatile`; ONNX names that are not DSL
identifiers are renamed (the original names are kept as comments), and each op line ends with
the ONNX node it comes from. Constants are folded, Identity and Dropout dropped, a
BatchNormalization after a Conv folded into the conv's weights. Repeated layers that are the same
ops (a transformer's blocks) become one `loop` over them, their weights prefix tables
(--unroll-layers writes them out instead). The result is parsed and bound by openinfer before
anything is written.

Symbolic input dims (ONNX dim_param) become sizevars; give each a value with --sizevar NAME=VALUE
(by its ONNX name or the sizevar's). An op or attribute the importer does not support is an
error naming the node (every such node, in one run); --list-ops prints what is supported. An
OUT/NAME.oig that differs from the imported graph (your edits?) is replaced only with --force.
Needs `onnx` (pip install 'openinfer[onnx]').

TFLite: float32 and fully quantized int8 models; int8 operators become the integer-only ops
(qconv2d, qlinear, ...: docs/tflite.md), bit-exact with TFLite's reference kernels. Tensors
keep their TFLite names (made identifiers; a converter's `a;b;c` name becomes its first part)
and the graph's inputs and outputs keep their dtypes. Needs `tflite` (pip install
'openinfer[tflite]').

examples:
  openinfer import mlp.onnx -o out/                         # -> out/mlp.oig, out/mlp.oinf
  openinfer import resnet.onnx -o out/ --name net --sizevar batch=1
  openinfer import kws_int8.tflite -o out/                   # -> out/kws_int8.oig, out/kws_int8.oinf
  openinfer import --list-ops                               # ONNX's; --list-ops tflite for TFLite's"""


def register(sub) -> None:
    p = sub.add_parser("import", help="import an ONNX model as a DSL graph and a .oinf model",
                       description=IMPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", nargs="?", help="the model: MODEL.onnx or MODEL.tflite")
    p.add_argument("--out", "-o", metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--name", metavar="NAME", help="graph and file name, made an identifier (default: the model "
                                                  "file's stem); it needs an ASCII letter or digit")
    p.add_argument("--sizevar", "-s", action="append", default=[], metavar="NAME=VALUE",
                   help="the value of a symbolic input dim; repeatable")
    p.add_argument("--cache-capacity", type=int, metavar="N",
                   help="a decode step with past/present key-values (ONNX): the tokens its cache tables hold; "
                        "the step appends one token each run (`openinfer generate` runs it)")
    p.add_argument("--streaming", action="store_true",
                   help="recurrent layers (RNN, GRU, LSTM) run one time step per run, their hidden and cell "
                        "state kept in persistent memory across runs (reset() restarts it); their input's "
                        "sequence dim must be 1 (a symbolic one defaults to 1)")
    p.add_argument("--unroll-layers", action="store_true",
                   help="ONNX: write repeated layers out one after the other (each under a header) instead of "
                        "as one loop over prefix tables of their weights, where they are the same ops")
    p.add_argument("--force", action="store_true",
                   help="replace an OUT/NAME.oig that differs from the imported graph (it may hold your edits; "
                        "without --force that is an error and nothing is written)")
    p.add_argument("--list-ops", nargs="?", const="onnx", choices=("onnx", "tflite"), metavar="FORMAT",
                   help="print the supported ops of FORMAT (onnx, the default, or tflite) and exit")
    p.set_defaults(handler=import_cmd, help_parser=p)


def import_cmd(args) -> int:
    if args.list_ops:
        if args.list_ops == "tflite":
            from ..tflite import list_ops as tflite_ops
            print(tflite_ops(), end="")
        else:
            print(onnx_ops(), end="")
        return 0
    if args.model is None or args.out is None:
        raise OpenInferError("import needs MODEL and --out DIR (or --list-ops)")
    if not args.out:
        raise OpenInferError("--out: the folder's path is empty")
    if args.model.lower().endswith(".tflite"):
        if args.streaming:
            raise OpenInferError("--streaming is for ONNX models (their RNN, GRU and LSTM nodes)")
        from ..tflite import import_tflite
        if args.cache_capacity is not None:
            raise OpenInferError("--cache-capacity: only for ONNX decode steps with past/present key-values")
        if args.unroll_layers:
            raise OpenInferError("--unroll-layers is for ONNX models (a TFLite import writes every layer out)")
        result = import_tflite(args.model, name=args.name, sizevars=sizevars(args))
    else:
        result = import_onnx(args.model, name=args.name, sizevars=sizevars(args),
                             cache_capacity=args.cache_capacity, streaming=args.streaming,
                             unroll_layers=args.unroll_layers)
    graph, model = result.write(args.out, force=args.force)
    print(f"wrote {graph} and {model}")
    return 0
