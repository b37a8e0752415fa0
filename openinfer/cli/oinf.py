"""`openinfer oinf ...`: verify, inspect, pack and convert `.oinf` files (argument parsing only)."""

from __future__ import annotations

import argparse
import json

from ..files import check_output_path
from ..oinf.format import DEFAULT_VERSION
from ..oinf.reader import ModelLoader
from ..oinf.sources import pack_oinf
from ..oinf.summary import summary_json, summary_text
from ..oinf.values import Bitset, ScalarValue, as_dtype
from ..oinf.verify import verify_file
from ..oinf.writer import convert_oinf

GROUP_HELP = """\
Work with .oinf model packages: one file holding named sizevars (u64), typed metadata and
tensors (all 25 .oinf types, incl. bf16, f8 E5M2 and packed i4/i2/i1/u4/u2/u1/t2/t1).
Format versions 1 and 2 are read; version 2 (quantization parameters per tensor) is written
unless --format-version 1 / --to-version 1 asks for the legacy layout."""

PACK_EPILOG = """\
examples:
  openinfer oinf pack model.oinf --from weights.npz --sizevar B=4 --sizevar D=16
  openinfer oinf pack model.oinf --from model.safetensors --dtype w1=bf16 --meta n_layers=2
  openinfer oinf pack model.oinf --from w.npz --meta eps:f64=1e-5 --meta act=gelu --meta ids=[1,2,3]

--meta values: true/false -> bool, an integer -> the smallest fitting u8..u64 / i8..i64, a
decimal -> f32, a JSON list -> ndarray, anything else -> str (strings, like every name, must
match [A-Za-z0-9._-]+). KEY:TYPE=VALUE forces the type (e.g. n:i32=3, x:bf16=0.1, v:f16=[1,2]).
safetensors __metadata__ strings are kept as str metadata unless --no-source-metadata."""


def register(subparsers) -> None:
    group = subparsers.add_parser("oinf", help="verify, inspect, pack and convert .oinf model files",
                                  description=GROUP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    group.set_defaults(help_parser=group)
    sub = group.add_subparsers(metavar="SUBCOMMAND", title="subcommands")

    p = sub.add_parser("verify", help="check a file and print its contents (original verifier format)",
                       description="Check every structural rule of a .oinf file, decode every value, and print "
                                   "sizevars, metadata and per-tensor previews, statistics and histograms. "
                                   "Exit status 0 if the file is valid, 1 with the error otherwise.")
    p.add_argument("file", help="the .oinf file")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing; only the exit status tells")
    p.set_defaults(handler=_verify)

    p = sub.add_parser("inspect", help="show header, sizevars, metadata and the tensor table",
                       description="Show what a .oinf file holds: header fields, sizevars, metadata values and "
                                   "each tensor's dtype, shape, data offset and size, and quantization.")
    p.add_argument("file", help="the .oinf file")
    p.add_argument("--json", action="store_true", help="machine-readable, deterministic JSON instead of a table")
    p.set_defaults(handler=_inspect)

    p = sub.add_parser("pack", help="build a .oinf file from .npz or .safetensors tensors",
                       description="Write the tensors of an .npz or .safetensors file as a .oinf model, adding "
                                   "sizevars and metadata.", epilog=PACK_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.oinf", help="the file to write (atomically)")
    p.add_argument("--from", dest="source", required=True, metavar="FILE",
                   help="source tensors: FILE.npz or FILE.safetensors (BF16 and F8_E5M2 are kept bit-exact)")
    p.add_argument("--sizevar", action="append", default=[], type=_sizevar_arg, metavar="NAME=VALUE",
                   help="add a sizevar (a non-negative integer); repeatable")
    p.add_argument("--meta", action="append", default=[], type=_meta_arg, metavar="KEY[:TYPE]=VALUE",
                   help="add a metadata value; repeatable (see below)")
    p.add_argument("--dtype", action="append", default=[], type=_dtype_arg, metavar="NAME=DTYPE",
                   help="store tensor NAME as DTYPE (e.g. bf16, f8, f16, i4; integers are range-checked); repeatable")
    p.add_argument("--format-version", type=int, choices=(1, 2), default=DEFAULT_VERSION,
                   help="file format version to write (default: %(default)s)")
    p.add_argument("--no-source-metadata", action="store_true", help="drop the safetensors __metadata__ strings")
    p.set_defaults(handler=_pack)

    p = sub.add_parser("convert", help="rewrite a file as format version 1 or 2",
                       description="Rewrite a .oinf file in another format version. Payloads are copied as "
                                   "stored, so v1 -> v2 -> v1 gives back the same bytes. A v2 file with "
                                   "quantization parameters cannot become v1.")
    p.add_argument("input", metavar="IN", help="the .oinf file to read")
    p.add_argument("output", metavar="OUT", help="the file to write (may be IN; written atomically)")
    p.add_argument("--to-version", type=int, choices=(1, 2), required=True, help="format version to write")
    p.set_defaults(handler=_convert)


def _verify(args) -> int:
    report = verify_file(args.file)
    if not args.quiet:
        print(report, end="")
    return 0


def _inspect(args) -> int:
    with ModelLoader.open(args.file) as model:
        print(summary_json(model) if args.json else summary_text(model), end="")
    return 0


def _pack(args) -> int:
    check_output_path(args.out, "OUT.oinf", inputs=[args.source])
    pack_oinf(args.out, args.source, sizevars=dict(args.sizevar), metadata=dict(args.meta),
              dtypes=dict(args.dtype), version=args.format_version, source_metadata=not args.no_source_metadata)
    with ModelLoader.open(args.out) as model:
        print(f"wrote {args.out}: OINF v{model.version}, {len(model.tensor_names)} tensors, "
              f"{model.file_size} bytes")
    return 0


def _convert(args) -> int:
    check_output_path(args.output, "OUT")      # (OUT may be IN: the file is replaced whole)
    convert_oinf(args.input, args.output, version=args.to_version)
    print(f"wrote {args.output}: OINF v{args.to_version}")
    return 0


def _split(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return name, value


def _sizevar_arg(text: str) -> tuple[str, int]:
    name, value = _split(text, "NAME=VALUE")
    try:
        return name, int(value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizevar {name!r}: {value!r} is not an integer") from None


def _dtype_arg(text: str) -> tuple[str, str]:
    name, value = _split(text, "NAME=DTYPE")
    try:
        return name, as_dtype(value).name
    except Exception as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _meta_arg(text: str) -> tuple[str, object]:
    key, value = _split(text, "KEY[:TYPE]=VALUE")
    key, _, type_name = key.partition(":")
    if not type_name:
        return key, _guess(value)
    try:
        dtype = as_dtype(type_name)
    except Exception as exc:
        raise argparse.ArgumentTypeError(f"metadata {key!r}: {exc}") from None
    if dtype.name == "str":
        return key, ScalarValue(value, "str")
    parsed = _guess(value)
    if dtype.name == "bitset":
        if not isinstance(parsed, list):
            raise argparse.ArgumentTypeError(f"metadata {key!r}: a bitset is a list of 0/1, e.g. [1,0,1]")
        return key, Bitset.from_bools(parsed)
    if isinstance(parsed, str):
        raise argparse.ArgumentTypeError(f"metadata {key!r}: {value!r} is not a {dtype.name} value")
    return key, ScalarValue(parsed, dtype.name)


def _guess(value: str) -> object:
    """The Python value a --meta string most plausibly means (see the pack epilog)."""
    if value in ("true", "false"):
        return value == "true"
    for parse in (int, float):
        try:
            return parse(value)
        except ValueError:
            pass
    if value.startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise argparse.ArgumentTypeError(f"{value!r} starts like a JSON list but is not one") from None
    return value
