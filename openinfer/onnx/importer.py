"""ONNX -> DSL: reads an ONNX model and writes the graph as DSL text plus its weights.

The importer walks the ONNX graph in its (topological) node order, keeping for every ONNX value
its dtype, its shape (each dim a size, written as a sizevar where the model's dim is symbolic) and,
where it is known at import time, its contents. Constants are folded (Constant, Identity, shape
arithmetic on constants), weights are stored in the layout the ops take (Gemm's transposed B is
transposed here, BatchNormalization after a Conv is folded into the conv's weights and bias), and
each remaining node becomes one or a few DSL ops. The text is then parsed and bound by openinfer
itself before it is handed out, so an import never produces a graph openinfer cannot load.

`SUPPORTED_OPS` is the one table of what is imported: `openinfer import --list-ops` prints it.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..dsl.lexer import KEYWORDS
from ..errors import OnnxImportError, OpenInferError
from ..oinf.values import TensorSpec
from .problems import LIST_OPS_HINT, NodeProblems, given_sizevars, graph_name, shape_problem

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: ONNX TensorProto element types -> DSL dtypes (the ones both sides have).
_ONNX_DTYPES = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 9: "bool", 10: "f16",
                11: "f64", 12: "u32", 13: "u64"}
_NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
                 "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
                 "u64": np.uint64, "bool": np.bool_}
_FLOATS = ("f16", "f32", "f64")


def is_identifier(name: str) -> bool:
    """A name the DSL takes as it is."""
    return bool(_IDENT.fullmatch(name)) and name not in KEYWORDS


def sanitize(name: str) -> str:
    """`name` made a DSL identifier: runs of other characters become `_`, leading and trailing `_`
    go, a leading digit gets `v_` in front and a keyword `_` behind."""
    if is_identifier(name):
        return name
    out = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "v"
    if out[0].isdigit():
        out = "v_" + out
    return out + "_" if out in KEYWORDS else out


@dataclass(frozen=True)
class Dim:
    size: int
    sizevar: str | None = None      # written as this sizevar (a symbolic dim of a graph input)

    def text(self) -> str:
        return self.sizevar or str(self.size)


@dataclass
class Value:
    """One ONNX value: a DSL variable, a constant known at import, or both (a declared constant)."""

    dtype: str
    dims: tuple[Dim, ...]
    var: str | None = None
    const: np.ndarray | None = None
    #: for an integer constant computed from shapes (Shape, and Gather/Concat/Slice/Unsqueeze on it):
    #: each element as the dim it came from, so a Reshape or Expand to it keeps the sizevars
    elements: tuple[Dim, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)


def _dims(shape) -> tuple[Dim, ...]:
    return tuple(Dim(int(s)) for s in shape)


def _with_elements(v: Value, elements: tuple[Dim, ...] | None) -> Value:
    """`v` noting the dims its elements are (see Value.elements), where they still are those dims."""
    if elements is not None and v.const is not None and [d.size for d in elements] == v.const.reshape(-1).tolist():
        v.elements = tuple(elements)
    return v


@dataclass
class ImportedModel:
    """What `import_onnx` returns: the graph as DSL text, and the model it binds against.

    The tensors are read-only arrays (replace an entry to change it): `write` then moves the
    `.oinf` the bind check wrote into place instead of writing the weights a second time, as long
    as the tensors and sizevars are still the ones checked."""

    name: str
    text: str
    tensors: dict[str, np.ndarray | TensorSpec]      # TensorSpec: a quantised weight with its scales
    sizevars: dict[str, int]
    renamed: dict[str, str] = field(default_factory=dict)     # ONNX name -> DSL name, where they differ
    source_name: str = "<ModelProto>"        # the ONNX file's name, for messages
    #: the bind check's .oinf (in its own temporary directory) and what it was written from
    _checked: tuple[tempfile.TemporaryDirectory, Path, dict, dict] | None = \
        field(default=None, repr=False, compare=False)

    def write(self, out_dir: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Writes OUT_DIR/NAME.oig and OUT_DIR/NAME.oinf; returns their paths. A NAME.oig there
        that differs from this graph may hold the user's edits: it is replaced only with `force`
        (the same graph, from importing the same model again, is simply kept)."""
        from ..cliutil import write_text
        from ..errors import OutputFileError
        from ..files import refuse_non_regular
        from ..oinf import write_oinf

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        graph, model = out / f"{self.name}.oig", out / f"{self.name}.oinf"
        for path in (graph, model):
            refuse_non_regular(path)
        if not force and graph.exists() and graph.read_bytes() != self.text.encode():
            raise OutputFileError(f"{graph} exists and is not the graph imported now: it may hold your edits; "
                                  "--force replaces it (or choose another -o DIR or --name)")
        if not self._move_checked_model(model):
            write_oinf(model, tensors=self.tensors, sizevars=self.sizevars)
        write_text(str(graph), self.text)
        return graph, model

    def _move_checked_model(self, target: Path) -> bool:
        """Renames the checked .oinf (written atomically and fsync'ed) onto `target`, if it still
        holds these tensors and the rename stays within one file system."""
        from ..oinf.writer import _fsync_dir

        if self._checked is None:
            return False
        scratch, path, tensors, sizevars = self._checked
        self._checked = None
        try:
            if sizevars != self.sizevars or tensors.keys() != self.tensors.keys() or \
                    any(tensors[k] is not v for k, v in self.tensors.items()):
                return False
            try:
                os.replace(path, target)
            except OSError:          # another file system (EXDEV), or a target write_oinf reports better
                return False
            _fsync_dir(target.parent)
            return True
        finally:
            scratch.cleanup()


def import_onnx(source, *, name: str | None = None, sizevars: Mapping[str, int] | None = None) -> ImportedModel:
    """Imports an ONNX model (a path or an `onnx.ModelProto`).

    `name` names the graph (default: the file's stem, made an identifier); `sizevars` gives values
    to the model's symbolic input dims, by their ONNX name or the sizevar they become. The result
    has been parsed and bound by openinfer; `.write(dir)` writes NAME.oig and NAME.oinf."""
    try:
        import onnx
    except ModuleNotFoundError:
        raise OnnxImportError("the `onnx` package is needed to import ONNX models: pip install 'openinfer[onnx]'") \
            from None
    if isinstance(source, onnx.ModelProto):
        model, source_name, where = source, "<ModelProto>", "<ModelProto>"
        default_name = source.graph.name or "model"
    else:
        path = Path(source)
        try:
            model = onnx.load(str(path))
        except OSError as exc:
            raise OnnxImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except Exception as exc:        # protobuf's DecodeError and onnx's own errors
            raise OnnxImportError(f"{path}: not a readable ONNX model: {exc}") from None
        source_name, default_name, where = path.name, path.stem, str(path)
    if not model.HasField("graph"):     # protobuf reads an empty file as an empty message: no graph
        raise OnnxImportError(f"{where}: not an ONNX model: it holds no graph"
                              + (" (the file is empty)" if where != "<ModelProto>" and not os.path.getsize(where)
                                 else ""))
    result = _Importer(model, graph_name(name, default_name, sanitize), dict(sizevars or {}), source_name).run()
    _validate(result)
    return result


def _data_mismatch(tensor, exc: ValueError) -> str:
    return f"its data does not fill its dims {list(tensor.dims)} ({exc})"


def _read_only(value) -> None:
    """Makes a tensor's arrays read-only: an array, or a TensorSpec (a quantised weight) with its
    data, scales and zero points."""
    spec_quant = getattr(value, "quant", None)
    for array in (value, getattr(value, "data", None), getattr(spec_quant, "scales", None),
                  getattr(spec_quant, "zero_points", None)):
        if isinstance(array, np.ndarray):
            array.setflags(write=False)


def _validate(result: ImportedModel) -> None:
    """Parses and binds the text against its model; a failure here is an importer bug, reported as such.
    The .oinf written for the check is kept for `write` (tensors made read-only, so it stays theirs)."""
    from ..api import bind_inputs
    from ..oinf import ModelLoader, write_oinf

    for value in result.tensors.values():
        _read_only(value)
    scratch = tempfile.TemporaryDirectory(prefix="oi-import-")
    try:
        path = Path(scratch.name) / f"{result.name}.oinf"
        write_oinf(path, tensors=result.tensors, sizevars=result.sizevars)
        model = ModelLoader.open(path)
        try:
            from ..dsl import graph

            bind_inputs(model, graph(result.text, f"{result.name}.oig"))
        except OpenInferError as exc:
            raise OnnxImportError(f"internal error: the graph imported from {_quoted(result.source_name)} does not "
                                  "load in openinfer (please report it with the model; the place below is in the "
                                  f"imported text, which was not written):\n{exc}") from None
        finally:
            model.close()
    except BaseException:
        scratch.cleanup()
        raise
    result._checked = (scratch, path, dict(result.tensors), dict(result.sizevars))


# ---------------------------------------------------------------------------------------------
# the supported ops: ONNX op type -> (handler, what is supported); filled by @_op below


@dataclass(frozen=True)
class _OpSupport:
    handler: Callable
    note: str


SUPPORTED_OPS: dict[str, _OpSupport] = {}

#: Inputs (by position) the importer needs as constants: exported models hold them as initializers.
CONSTANT_INPUTS = {"Reshape": (1,), "Clip": (1, 2), "BatchNormalization": (1, 2, 3, 4), "Dropout": (1, 2),
                   "Unsqueeze": (1,), "Squeeze": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4),
                   "ReduceMean": (1,), "ReduceSum": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
                   "ReduceProd": (1,), "ReduceSumSquare": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
                   "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
                   "Split": (1,), "Trilu": (1,), "DequantizeLinear": (1, 2), "QuantizeLinear": (1, 2),
                   "MatMulInteger": (3,)}


def _op(*op_types: str, note: str):
    """Registers a handler for `op_types`; `note` (what each becomes, and its limits) may name the
    ONNX op as {op} and its DSL op as {dsl}."""
    def register(fn):
        for t in op_types:
            SUPPORTED_OPS[t] = _OpSupport(fn, note.format(op=t, dsl=_DSL_OPS.get(t, "")))
        return fn
    return register


_DSL_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Relu": "relu", "Sigmoid": "sigmoid",
            "Tanh": "tanh", "MaxPool": "max_pool2d", "AveragePool": "avg_pool2d", "Sqrt": "sqrt", "Exp": "exp",
            "Log": "log", "Erf": "erf", "Neg": "neg", "Abs": "abs", "Reciprocal": "recip", "Equal": "eq",
            "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge", "ReduceMean": "mean_axis",
            "ReduceSum": "sum_axis", "ReduceMax": "max_axis", "ReduceMin": "min_axis", "ReduceProd": "prod_axis",
            "Softmax": "softmax", "LogSoftmax": "log_softmax", "And": "and", "Or": "or", "Xor": "xor", "Not": "not",
            "Max": "max", "Min": "min", "ArgMax": "argmax_axis", "ArgMin": "argmin_axis", "Floor": "floor",
            "Ceil": "ceil", "Sign": "sign", "IsNaN": "is_nan", "Sum": "add"}


def list_ops() -> str:
    """The coverage, one op a line (what `openinfer import --list-ops` prints)."""
    width = max(len(k) for k in SUPPORTED_OPS)
    return "\n".join(f"{k:<{width}}  {SUPPORTED_OPS[k].note}" for k in sorted(SUPPORTED_OPS)) + "\n"


# ---------------------------------------------------------------------------------------------


def _quoted(name: str) -> str:
    """An ONNX name as a comment shows it: quoted, with newlines, control and non-ASCII characters
    escaped (a newline in a `//` comment would end it)."""
    return json.dumps(name)


def _float_literal(x: float) -> str:
    if math.isnan(x):
        raise ValueError("NaN has no DSL literal")
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _setting(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(int(v)) for v in value) + "]"
    if isinstance(value, float):
        return _float_literal(value)
    return str(value)


def _broadcast(node_fail, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    n = max(len(a), len(b))
    a = (Dim(1),) * (n - len(a)) + a
    b = (Dim(1),) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x.size != y.size and 1 not in (x.size, y.size):
            node_fail(f"shapes {[d.size for d in a]} and {[d.size for d in b]} do not broadcast")
        big = [d for d in (x, y) if d.size == max(x.size, y.size)]
        out.append(next((d for d in big if d.sizevar), big[0]))
    return tuple(out)


def _pool_pads(fail, attrs, spatial, kernel, strides, dilations) -> list[int]:
    """ONNX pads ([begins..., ends...]) from `pads` or `auto_pad`."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    rank = len(spatial)
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * 2 * rank))
        if len(pads) != 2 * rank:
            fail(f"pads {pads}: expected {2 * rank} values")
        return pads
    if auto == "VALID":
        return [0] * 2 * rank
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begins.append(small if auto == "SAME_UPPER" else large)
            ends.append(large if auto == "SAME_UPPER" else small)
        return begins + ends
    fail(f"auto_pad {auto!r} is not supported (NOTSET, VALID, SAME_UPPER, SAME_LOWER are)")
    raise AssertionError


def _pair_setting(values: list[int], default: int):
    """A 2-D int_or_list setting written as hand-written DSL would: None at the default, an int when
    both are equal."""
    if all(v == values[0] for v in values):
        return None if values[0] == default else values[0]
    return list(values)


def _padding_setting(pads: list[int]):
    top, left, bottom, right = pads
    if top == bottom and left == right:
        return _pair_setting([top, left], 0)
    return [top, left, bottom, right]


class _Importer:
    def __init__(self, model, name: str, sizevars: dict[str, int], source_name: str):
        self.model = model
        self.g = model.graph
        self.name = name
        self.source_name = source_name
        self.user_sizevars = sizevars
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.values: dict[str, Value] = {}
        self.used: set[str] = set()
        self.onnx_to_dsl: dict[str, str] = {}
        self.sizevar_names: dict[str, str] = {}        # ONNX dim_param -> sizevar
        self.sizevars: dict[str, int] = {}
        self.decls: dict[str, list[tuple[str, str]]] = {"dynamic": [], "constant": [], "volatile": []}
        self.lines: list[tuple[str, str]] = []
        #: the ONNX node name each line / volatile declaration came from (None: from no node), for
        #: the layer headers `render` prints
        self.line_nodes: list[str | None] = []
        self.volatile_nodes: list[str | None] = []
        self.tensors: dict[str, np.ndarray] = {}
        self.consumers: dict[str, list] = {}
        self.skip: set[int] = set()
        self.outputs = [o.name for o in self.g.output]
        self.fusions: dict[int, Fusion] = {}           # last node -> the fused pattern ending there
        self.bool_masks: dict[str, Value] = {}          # Where outputs left to sdpa as bool masks
        self.quantized: dict = {}      # value name -> quant.QuantizedWeight: a weight dequant_matmul takes as stored
        self.packed: dict[str, str] = {}   # int4/uint4 initializer -> "i4"/"u4" (held as int8/uint8 values)

    # -- names and declarations ---------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        name, n = base, 2
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name

    def dsl_name(self, onnx_name: str) -> str:
        """The DSL name of an ONNX value, chosen once."""
        if onnx_name not in self.onnx_to_dsl:
            self.onnx_to_dsl[onnx_name] = self._fresh(sanitize(onnx_name))
        return self.onnx_to_dsl[onnx_name]

    def declare(self, kind: str, var: str, dtype: str, dims: tuple[Dim, ...], onnx_name: str | None) -> None:
        shape = f"[{', '.join(d.text() for d in dims)}]" if dims else ""
        note = f'ONNX {_quoted(onnx_name)}' if onnx_name is not None and onnx_name != var else ""
        self.decls[kind].append((f"{var}: {dtype}{shape};", note))

    def tensor(self, v: Value, onnx_name: str) -> str:
        """The variable holding `v`, declaring a constant known at import on first use."""
        if v.var is None:
            v.var = self.dsl_name(onnx_name)
            self._constant(v, f'ONNX {_quoted(onnx_name)}' if onnx_name != v.var else "")
        return v.var

    def new_constant(self, array: np.ndarray, base: str, note: str) -> str:
        """Declares a constant computed at import (a transposed or folded weight) under a new name."""
        v = self.const_value(np.ascontiguousarray(array))
        v.var = self._fresh(sanitize(base))
        self._constant(v, note)
        return v.var

    def _constant(self, v: Value, note: str) -> None:
        """A scalar is written in the graph (`c: f32 @init(2.0);`), a tensor goes into the model."""
        if v.dims:
            self.decls["constant"].append((f"{v.var}: {v.dtype}[{', '.join(d.text() for d in v.dims)}];", note))
            self.tensors[v.var] = np.ascontiguousarray(v.const)
            return
        x = v.const.item()
        if v.dtype == "bool":
            literal = "true" if x else "false"
        elif v.dtype in _FLOATS:
            if not math.isfinite(x):    # @init takes finite literals only
                raise OnnxImportError(f"scalar constant `{v.var}` is {x}, which @init cannot hold")
            literal = _float_literal(x)
        else:
            literal = str(int(x))
        self.decls["constant"].append((f"{v.var}: {v.dtype} @init({literal});", note))

    def const_value(self, array: np.ndarray) -> Value:
        array = np.asarray(array)
        dtype = next((k for k, t in _NUMPY_DTYPES.items() if array.dtype == t), None)
        if dtype is None:
            raise OnnxImportError(f"constant of dtype {array.dtype} is not supported")
        return Value(dtype, _dims(array.shape), const=array)

    # -- running ------------------------------------------------------------------------------
    def run(self) -> ImportedModel:
        import onnx.numpy_helper as nh

        for o in self.outputs:                       # graph inputs and outputs keep valid names
            if is_identifier(o):
                self.onnx_to_dsl[o] = o
                self.used.add(o)
        initializers = {}
        for t in self.g.initializer:
            try:
                packed = packed_initializer(t)
                if packed is not None:
                    initializers[t.name], self.packed[t.name] = self.const_value(packed[0]), packed[1]
                    continue
                initializers[t.name] = self.const_value(nh.to_array(t))
            except OnnxImportError as exc:
                raise OnnxImportError(f"initializer `{t.name}`: {exc}") from None
            except ValueError as exc:               # numpy's reshape of the data to the dims
                raise OnnxImportError(f"initializer `{t.name}`: {_data_mismatch(t, exc)}") from None
        for inp in self.g.input:
            if inp.name in initializers:             # IR < 4: initializers are listed as inputs too
                continue
            self.graph_input(inp)
        self.check_sizevars()
        self.values.update(initializers)
        for i, node in enumerate(self.g.node):
            for x in node.input:
                if x:
                    self.consumers.setdefault(x, []).append(i)
        self.fusions = find_fusions(self)
        for fusion in self.fusions.values():
            self.skip.update(fusion.inner)
        problems = NodeProblems()
        for i, node in enumerate(self.g.node):
            if i in self.skip:
                continue
            fused = [self.g.node[j] for j in self.fusions[i].inner] if i in self.fusions else []
            outputs = [o for n in [node, *fused] for o in n.output]
            if problems.blocked(x for n in [node, *fused] for x in n.input):
                unsupported = _unsupported(node)    # known without its inputs
                if unsupported:
                    label = _quoted(node.name) if node.name else f"#{i}"
                    problems.add(f"node {label} ({node.op_type}): {unsupported}", outputs)
                else:
                    problems.add_downstream(outputs)
                continue
            try:
                self.node(i, node)
            except OnnxImportError as exc:          # the others are tried too: one run lists them all
                problems.add(str(exc), outputs)
        problems.raise_any()
        for o in self.outputs:
            self.graph_output(o)
        return ImportedModel(self.name, self.render(), self.tensors, dict(sorted(self.sizevars.items())),
                             {k: v for k, v in self.onnx_to_dsl.items() if k != v}, self.source_name)

    def graph_input(self, inp) -> None:
        t = inp.type.tensor_type
        if not inp.type.HasField("tensor_type") or t.elem_type not in _ONNX_DTYPES:
            raise OnnxImportError(f"graph input `{inp.name}`: only tensors of "
                                  f"{', '.join(sorted(set(_ONNX_DTYPES.values())))} are supported")
        if not t.HasField("shape"):     # no dims would read as a scalar
            raise OnnxImportError(f"graph input `{inp.name}` has no shape (not even a rank): give it one in the "
                                  "model, with a dim_param for each size --sizevar NAME=VALUE sets")
        dims = []
        for k, d in enumerate(t.shape.dim):
            if d.HasField("dim_value"):
                dims.append(Dim(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(self.symbolic_dim(d.dim_param, inp.name))
            else:
                raise OnnxImportError(f"graph input `{inp.name}`: dim {k} has neither a size nor a name; "
                                      f"give it a dim_param in the model and its value with --sizevar")
        if inp.name not in self.onnx_to_dsl and is_identifier(inp.name):
            self.onnx_to_dsl[inp.name] = inp.name
            self.used.add(inp.name)
        problem = shape_problem([d.size for d in dims], _ONNX_DTYPES[t.elem_type], self.sizevars)
        if problem:
            raise OnnxImportError(f"graph input `{inp.name}`: {problem}")
        var = self.dsl_name(inp.name)
        v = Value(_ONNX_DTYPES[t.elem_type], tuple(dims), var=var)
        self.declare("dynamic", var, v.dtype, v.dims, inp.name)
        self.values[inp.name] = v

    def symbolic_dim(self, param: str, input_name: str) -> Dim:
        if param not in self.sizevar_names:
            sv = sanitize(param)
            while sv in self.sizevar_names.values():
                sv += "_"
            self.sizevar_names[param] = sv
            value = self.user_sizevars.get(param, self.user_sizevars.get(sv))
            if value is None:
                raise OnnxImportError(f"graph input `{input_name}` has the symbolic dim `{param}` and no value "
                                      f"for it: give one with --sizevar {sv}=VALUE")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise OnnxImportError(f"sizevar {sv}={value!r}: expected a non-negative integer")
            self.sizevars[sv] = value
        sv = self.sizevar_names[param]
        return Dim(self.sizevars[sv], sv)

    def check_sizevars(self) -> None:
        known = set(self.sizevar_names) | set(self.sizevar_names.values())
        unknown = sorted(k for k in self.user_sizevars if k not in known)
        if unknown:
            have = ", ".join(sorted(self.sizevar_names.values())) or "none"
            raise OnnxImportError(f"--sizevar {', '.join(unknown)}: the model has no such symbolic dim "
                                  f"(its symbolic dims: {have})")

    def graph_output(self, onnx_name: str) -> None:
        v = self.values.get(onnx_name)
        if v is None:
            raise OnnxImportError(f"graph output `{onnx_name}` is computed by no node")
        out = self.dsl_name(onnx_name)
        if v.var == out:
            return
        if v.var is None:                            # folded to a constant: the output is that constant
            self.tensor(v, onnx_name)
            return
        # an input, another output or an Identity's alias: the output gets its own copy
        self.declare("volatile", out, v.dtype, v.dims, onnx_name)
        self.lines.append((f"op reshape({v.var}) >> {out};", f"graph output {_quoted(onnx_name)} (a copy of {v.var})"))

    def node(self, index: int, node) -> None:
        if index in self.fusions and apply_fusion(self, index):
            self._claim(_module_path(node))
            return
        label = _quoted(node.name) if node.name else f"#{index}"

        def fail(message: str):
            raise OnnxImportError(f"node {label} ({node.op_type}): {message}")

        unsupported = _unsupported(node)
        if unsupported:
            fail(unsupported)
        support = SUPPORTED_OPS[node.op_type]
        import onnx.helper as oh

        attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
        ins = []
        for x in node.input:
            if not x:
                ins.append(None)
            elif x not in self.values:
                fail(f"input `{x}` is computed by no earlier node")
            else:
                ins.append(self.values[x])
        ctx = _NodeContext(self, node, attrs, ins, fail, label)
        self._claim(None)
        support.handler(ctx)
        self._claim(_module_path(node))

    def _claim(self, node_name: str | None) -> None:
        """Marks the lines and volatile declarations emitted since the last claim as `node_name`'s."""
        self.line_nodes += [node_name] * (len(self.lines) - len(self.line_nodes))
        self.volatile_nodes += [node_name] * (len(self.decls["volatile"]) - len(self.volatile_nodes))

    # -- output ---------------------------------------------------------------------------------
    def render(self) -> str:
        producer = " ".join(p for p in (self.model.producer_name, self.model.producer_version) if p)
        head = [f"// {self.name}: imported from {_quoted(self.source_name)} by `openinfer import` "
                f"(ONNX opset {self.opset}{', from ' + _quoted(producer) if producer else ''})."]
        if self.sizevar_names:
            head.append("// Sizevars (symbolic dims of the inputs): " + ", ".join(
                f"{sv} = {self.sizevars[sv]}" + (f' (ONNX {_quoted(p)})' if p != sv else "")
                for p, sv in self.sizevar_names.items()))
        out = head
        self._claim(None)
        layers = _Layers(self.line_nodes, [code for code, _ in self.lines])
        for kind in ("dynamic", "constant", "volatile"):
            if self.decls[kind]:
                out.append(f"{kind} {{")
                if kind == "volatile":
                    out += layers.grouped(self.decls[kind], self.volatile_nodes)
                else:
                    out += [_line(code, note) for code, note in self.decls[kind]]
                out.append("}")
        out.append("block entry {")
        out += layers.grouped(self.lines, self.line_nodes)
        out.append("    return;")
        out.append("}")
        return "\n".join(out) + "\n"


def _unsupported(node) -> str | None:
    """Why the importer has no handler for `node` (its domain or op type), None when it has one."""
    if node.domain not in ("", "ai.onnx"):
        return f"ops of domain `{node.domain}` are not supported"
    if node.op_type not in SUPPORTED_OPS:
        return f"op type {node.op_type} is not supported{LIST_OPS_HINT}"
    return None


def _line(code: str, note: str) -> str:
    code = "    " + code
    return f"{code:<50}  // {note}" if note else code


def _module_path(node) -> str | None:
    """The node's place in the exporting framework's module tree, as a `/`-separated path ending
    with the node's own name. The TorchScript exporter writes it into the name
    (`/encoder/layer.0/attention/MatMul`); the dynamo exporter names nodes `node_MatMul_59` and
    records the module in the `pkg.torch.onnx.name_scopes` metadata
    (`[..., 'model.encoder.layer.0.attention.self.query', 'linear']`), where an index joins the
    module name before it (`layer.0`, and `4.0` for a Sequential's child)."""
    for prop in node.metadata_props:
        if prop.key != "pkg.torch.onnx.name_scopes":
            continue
        try:
            scopes = ast.literal_eval(prop.value)
        except (ValueError, SyntaxError):
            break
        if not (isinstance(scopes, list) and len(scopes) >= 2 and all(isinstance(s, str) for s in scopes)):
            break
        segments: list[str] = []
        for part in scopes[-2].split("."):
            if part.isdigit() and segments:
                segments[-1] += "." + part
            elif part:
                segments.append(part)
        return "/" + "/".join([*segments, scopes[-1]])
    return node.name or None


#: A path segment naming one of several repeated modules, as exporters write them: `layer.0`,
#: `layers.3`, `h.11`, `layer1.0` (PyTorch's ModuleList / Sequential index after a dot).
_REPEATED = re.compile(r"(.+)\.(\d+)")


def _layer_of(node_name: str | None) -> tuple[str, str, int] | None:
    """(layer, family, index) of an ONNX node name: `/encoder/layer.3/attention/MatMul` ->
    ("encoder.layer.3", "encoder.layer", 3): the outermost indexed segment (not the node's own,
    last segment) and the path before it."""
    if not node_name:
        return None
    parts = [p for p in node_name.split("/") if p][:-1]
    for k, part in enumerate(parts):
        m = _REPEATED.fullmatch(part)
        if m:
            family = ".".join([*parts[:k], m[1]])
            return f"{family}.{m[2]}", family, int(m[2])
    return None


class _Layers:
    """Repeated layers made visible in the printed graph: where the nodes of a family with two
    or more members (`encoder.layer.0`, `encoder.layer.1`, ...) begin, a blank line and a header,
    `// layer encoder.layer.1 — same ops as encoder.layer.0` when its op sequence equals the
    family's first member's. Lines from no layer between two lines of one layer stay in it."""

    def __init__(self, line_nodes: list[str | None], line_codes: list[str]):
        found = [_layer_of(n) for n in line_nodes]
        families: dict[str, set[str]] = {}
        for layer in found:
            if layer is not None:
                families.setdefault(layer[1], set()).add(layer[0])
        #: layer -> (family, index), for the families that repeat
        self.layer = {name: (family, index) for layer in found if layer is not None
                      for name, family, index in [layer] if len(families[family]) > 1}
        self.first: dict[str, str] = {}
        for name, (family, _index) in sorted(self.layer.items(), key=lambda kv: kv[1][1]):
            self.first.setdefault(family, name)
        self.ops: dict[str, list[str]] = {}
        for name, code in zip(self.assign(line_nodes), line_codes, strict=True):
            if name is not None:
                self.ops.setdefault(name, []).append(code.split("(", 1)[0])

    def assign(self, owners: list[str | None]) -> list[str | None]:
        """The layer each item is printed in (None: none)."""
        names = []
        for node in owners:
            layer = _layer_of(node)
            names.append(layer[0] if layer is not None and layer[0] in self.layer else None)
        last = {name: k for k, name in enumerate(names) if name is not None}
        current = None
        for k, name in enumerate(names):
            if name is None and current is not None and last[current] > k:
                names[k] = current              # an item from no layer inside one: it stays there
            current = names[k]
        return names

    def header(self, name: str) -> str:
        family, _ = self.layer[name]
        first = self.first[family]
        if name == first:
            return f"    // layer {name}"
        same = "same ops as" if self.ops.get(name) == self.ops.get(first) else "other ops than"
        return f"    // layer {name} — {same} {first}"

    def grouped(self, items: list[tuple[str, str]], owners: list[str | None]) -> list[str]:
        out, current = [], None
        for (code, note), name in zip(items, self.assign(owners), strict=True):
            if name != current:
                if out:
                    out.append("")
                if name is not None:
                    out.append(self.header(name))
                current = name
            out.append(_line(code, note))
        return out


#: a value name the dynamo exporter generates (`val_60`: a folded constant such as a Linear's
#: transposed weight), which says nothing about what the value is
_GENERATED_NAME = re.compile(r"val_\d+")


class _NodeContext:
    """One ONNX node being imported: its inputs and attributes, and helpers to emit DSL ops."""

    def __init__(self, imp: _Importer, node, attrs: dict, ins: list, fail, label: str):
        self.imp = imp
        self.node = node
        self.attrs = attrs
        self.ins = ins
        self.fail = fail
        self.label = label

    @property
    def opset(self) -> int:
        return self.imp.opset

    def allow(self, *names: str) -> None:
        for a in self.attrs:
            if a not in names:
                self.fail(f"attribute `{a}` is not supported" + (
                    f" (supported: {', '.join(names)})" if names else " (it takes none)"))

    def inputs(self, least: int, most: int) -> list:
        if not least <= len(self.ins) <= most or any(v is None for v in self.ins[:least]):
            self.fail(f"expected {least}..{most} inputs, got {len(self.ins)}")
        return self.ins + [None] * (most - len(self.ins))

    def outputs(self, most: int = 1) -> list[str]:
        outs = list(self.node.output)
        if len(outs) > most and any(outs[most:]):
            self.fail(f"output {most} (`{outs[most]}`) is not supported; only the first {most} output(s)")
        return outs[:most]

    def float_input(self, v: Value) -> None:
        if v.dtype not in _FLOATS:
            self.fail(f"dtype {v.dtype} is not supported here (float dtypes only)")

    def const_input(self, v: Value | None, what: str) -> np.ndarray | None:
        if v is None:
            return None
        if v.const is None:
            self.fail(f"{what} must be a constant (an initializer or a folded Constant)")
        return v.const

    def var(self, v: Value, position: int) -> str:
        name = self.node.input[position]
        if v.var is None and name not in self.imp.onnx_to_dsl and _GENERATED_NAME.fullmatch(name):
            path = _module_path(self.node)
            scopes = path.strip("/").split("/") if path and path != self.node.name else []
            if len(scopes) >= 2:                     # dynamo's `val_60`: named after its user's module
                module, op = ".".join(scopes[:-1]), scopes[-1]
                linear_weight = self.node.op_type in ("MatMul", "Gemm") and position == 1 and op.startswith("linear")
                self.imp.onnx_to_dsl[name] = self.imp._fresh(
                    sanitize(f"{module}_{'weight_T' if linear_weight else f'{op}_in{position}'}"))
        return self.imp.tensor(v, name)

    def result(self, onnx_name: str, value: Value) -> Value:
        self.imp.values[onnx_name] = value
        return value

    def emit(self, op: str, args: list[str], settings: dict, dtype: str, dims: tuple[Dim, ...], *,
             out: str | None = None, temp: str | None = None, note: str | None = None) -> Value:
        """Emits `op op(args, settings) >> var` into a new volatile variable: the ONNX value `out`'s
        (registered as it), or a temporary named after `temp`."""
        imp = self.imp
        problem = shape_problem([d.size for d in dims], dtype, imp.sizevars)
        if problem:
            self.fail(problem)
        var = imp.dsl_name(out) if out is not None else imp._fresh(sanitize(temp))
        imp.declare("volatile", var, dtype, dims, out)
        written = ", ".join(args + [f"{k}={_setting(v)}" for k, v in settings.items() if v is not None])
        imp.lines.append((f"op {op}({written}) >> {var};", note or f"{self.label} ({self.node.op_type})"))
        v = Value(dtype, dims, var=var)
        if out is not None:
            imp.values[out] = v
        return v

    def emit_inplace(self, op: str, args: list[str], target: Value) -> None:
        """Emits `op op(args) >> target` for an element-wise op updating `target` in place, as a
        hand-written graph adds a bias: `op add(h, b) >> h;`."""
        self.imp.lines.append((f"op {op}({', '.join(args)}) >> {target.var};", f"{self.label} ({self.node.op_type})"))


# ---------------------------------------------------------------------------------------------
# handlers


_BINARY_FOLDS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None}


def _fold_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return (np.trunc(a.astype(np.float64) / b)).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _aligned_at(c: _NodeContext, v: Value, position: int, rank: int, axis: int) -> Value:
    """`v` with its dims at `axis` of a rank-`rank` operand (opset < 7's legacy broadcast, where
    NumPy's right alignment would put them at the end): trailing 1-dims added."""
    extra = rank - axis - len(v.dims)
    if extra < 0:
        c.fail(f"an input of shape {list(v.shape)} does not fit at axis {axis} of a rank-{rank} operand")
    if extra == 0:
        return v
    dims = v.dims + (Dim(1),) * extra
    onnx_name = c.node.input[position]
    if v.const is not None:
        array = v.const.reshape(tuple(d.size for d in dims))
        name = c.imp.new_constant(array, f"{onnx_name}_at_axis{axis}",
                                  f"ONNX {_quoted(onnx_name)} at axis {axis} (legacy broadcast)")
        return Value(v.dtype, dims, var=name, const=array)
    return c.emit("reshape", [c.var(v, position)], {}, v.dtype, dims, temp=f"{onnx_name}_at_axis{axis}")


@_op("Add", "Sub", "Mul", "Div", note="{dsl}, NumPy broadcasting (opset < 7: the legacy broadcast and axis "
                                      "attributes); folded when both inputs are constants")
def _binary(c: _NodeContext) -> None:
    c.allow(*(("broadcast", "axis") if c.opset < 7 else ()))
    a, b = c.inputs(2, 2)
    if c.attrs.get("broadcast", 0) and "axis" in c.attrs:
        b = _aligned_at(c, b, 1, len(a.dims), int(c.attrs["axis"]) % max(len(a.dims), 1))
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    fold = _BINARY_FOLDS[c.node.op_type]
    op = _DSL_OPS[c.node.op_type]
    dims = _broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        value = (fold or _fold_div)(a.const, b.const).astype(a.const.dtype)
        c.result(out, c.imp.const_value(value))
        return
    c.emit(op, [c.var(a, 0), c.var(b, 1)], {}, a.dtype, dims, out=out)


@_op("Relu", "Tanh", note="{dsl} (float dtypes)")
@_op("Sigmoid", note="sigmoid (float dtypes); x * sigmoid(x) (a Mul that alone consumes it, by its input) as silu")
def _unary(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    silu = _silu_mul(c, out) if c.node.op_type == "Sigmoid" else None
    if silu is not None:
        index, mul = silu
        c.imp.skip.add(index)
        label = _quoted(mul.name) if mul.name else f"#{index}"
        c.emit("silu", [c.var(x, 0)], {}, x.dtype, x.dims, out=mul.output[0],
               note=f"{c.label} (Sigmoid) + {label} (Mul): SiLU")
        return
    c.emit(_DSL_OPS[c.node.op_type], [c.var(x, 0)], {}, x.dtype, x.dims, out=out)


def _silu_mul(c: _NodeContext, sigmoid_out: str):
    """The Mul that alone consumes this Sigmoid's output and multiplies it by the Sigmoid's input
    (x * sigmoid(x), SiLU): (its index, node); else None."""
    imp = c.imp
    users = imp.consumers.get(sigmoid_out, [])
    if len(users) != 1 or sigmoid_out in imp.outputs:
        return None
    node = imp.g.node[users[0]]
    if node.op_type != "Mul" or node.domain not in ("", "ai.onnx") or sorted(node.input) != sorted(
            [sigmoid_out, c.node.input[0]]) or sigmoid_out == c.node.input[0]:
        return None
    return users[0], node


@_op("Identity", note="dropped (its output is its input)")
def _identity(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.result(out, x)


@_op("Dropout", note="dropped (inference; training_mode false): the mask output is a constant of ones")
def _dropout(c: _NodeContext) -> None:
    c.allow("ratio", "seed", "is_test")
    x, _ratio, training = c.inputs(1, 3)
    out, mask = (c.outputs(2) + [""])[:2]
    if training is not None and bool(np.any(c.const_input(training, "training_mode"))):
        c.fail("training_mode=true is not supported (inference only)")
    if c.attrs.get("is_test", 1) == 0 and c.opset < 7:
        c.fail("is_test=0 (training) is not supported (inference only)")
    c.result(out, x)
    if mask:
        c.result(mask, c.imp.const_value(np.ones(x.shape, np.bool_)))


@_op("Constant", note="folded: value, value_float(s), value_int(s)")
def _constant(c: _NodeContext) -> None:
    import onnx.numpy_helper as nh

    c.allow("value", "value_float", "value_floats", "value_int", "value_ints")
    (out,) = c.outputs()
    if len(c.attrs) != 1:
        c.fail("expected exactly one value attribute")
    key, v = next(iter(c.attrs.items()))
    try:
        array = {"value": lambda: nh.to_array(v), "value_float": lambda: np.float32(v),
                 "value_floats": lambda: np.asarray(v, np.float32), "value_int": lambda: np.int64(v),
                 "value_ints": lambda: np.asarray(v, np.int64)}[key]()
    except ValueError as exc:
        c.fail(f"value: {_data_mismatch(v, exc)}")
    try:
        c.result(out, c.imp.const_value(np.asarray(array)))
    except OnnxImportError as exc:
        c.fail(str(exc))


def _matmul_dims(c: _NodeContext, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    if not a or not b:
        c.fail("scalar operands are not supported")
    av, bv = len(a) == 1, len(b) == 1
    a2 = ((Dim(1),) + a) if av else a
    b2 = (b + (Dim(1),)) if bv else b
    if a2[-1].size != b2[-2].size:
        c.fail(f"inner dims differ: {[d.size for d in a]} @ {[d.size for d in b]}")
    batch = _broadcast(c.fail, a2[:-2], b2[:-2])
    return batch + (() if av else (a2[-2],)) + (() if bv else (b2[-1],))


@_op("MatMul", note="matmul (NumPy semantics: batch dims broadcast, 1-D operands as vectors)")
def _matmul(c: _NodeContext) -> None:
    c.allow()
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype}")
    dims = _matmul_dims(c, a.dims, b.dims)
    if quantized_matmul(c, a, b, out):
        return
    # f16 sums in f32, rounded once on store (as ONNX runtimes do), not rounded after every add
    c.emit("matmul", [c.var(a, 0), c.var(b, 1)], {"acc": "f32"} if a.dtype == "f16" else {}, a.dtype, dims,
           out=out)


@_op("Gemm", note="matmul + add; transA/transB as matmul's transpose_a/transpose_b on the operands as stored, "
                   "alpha/beta folded into constant operands")
def _gemm(c: _NodeContext) -> None:
    c.allow("alpha", "beta", "transA", "transB", "broadcast")
    a, b, bias = c.inputs(2, 3)
    (out,) = c.outputs()
    alpha, beta = float(c.attrs.get("alpha", 1.0)), float(c.attrs.get("beta", 1.0))
    if len(a.dims) != 2 or len(b.dims) != 2:
        c.fail("A and B must be 2-D")
    base = c.node.output[0]
    trans = {"transpose_a": bool(c.attrs.get("transA", 0)), "transpose_b": bool(c.attrs.get("transB", 0))}

    def operand(v: Value, position: int, transpose: bool, scale: float) -> tuple[str, tuple[Dim, ...]]:
        """The operand as stored (transA/transB become matmul's transpose_a/transpose_b: a PyTorch
        Linear's [out, in] weight is used as it is) and its dims as multiplied; a constant is
        scaled by alpha here."""
        onnx_name = c.node.input[position]
        if v.const is not None and scale != 1.0:
            array = (v.const * np.asarray(scale, v.const.dtype)).astype(v.const.dtype)
            name = c.imp.new_constant(array, onnx_name, f'ONNX {_quoted(onnx_name)}, times alpha={scale!r}')
        else:
            name = c.var(v, position)
        return name, (v.dims[1], v.dims[0]) if transpose else v.dims

    alpha_into = 1 if b.const is not None else (0 if a.const is not None else None)
    an, ad = operand(a, 0, trans["transpose_a"], alpha if alpha_into == 0 else 1.0)
    bn, bd = operand(b, 1, trans["transpose_b"], alpha if alpha_into == 1 else 1.0)
    if ad[1].size != bd[0].size:
        c.fail(f"inner dims differ: A {[d.size for d in ad]}, B {[d.size for d in bd]} (after transA/transB)")
    dims = (ad[0], bd[1])
    y = c.emit("matmul", [an, bn], {k: True for k, on in trans.items() if on}, a.dtype, dims, out=base)
    if alpha != 1.0 and alpha_into is None:
        scale = c.imp.new_constant(np.asarray(alpha, _NUMPY_DTYPES[a.dtype]), f"{base}_alpha", "Gemm alpha")
        c.emit_inplace("mul", [y.var, scale], y)
    if bias is not None and beta != 0.0:
        if [d.size for d in _broadcast(c.fail, bias.dims, dims)] != [d.size for d in dims]:
            c.fail(f"C of shape {list(bias.shape)} does not broadcast to the result's {[d.size for d in dims]}")
        if bias.const is not None and beta != 1.0:
            cn = c.imp.new_constant((bias.const * np.asarray(beta, bias.const.dtype)).astype(bias.const.dtype),
                                    c.node.input[2], f'ONNX {_quoted(c.node.input[2])}, times beta={beta!r}')
        elif bias.const is None and beta != 1.0:
            scale = c.imp.new_constant(np.asarray(beta, _NUMPY_DTYPES[a.dtype]), f"{base}_beta", "Gemm beta")
            cn = c.emit("mul", [c.var(bias, 2), scale], {}, a.dtype, bias.dims, temp=f"{base}_bias").var
        else:
            cn = c.var(bias, 2)
        c.emit_inplace("add", [y.var, cn], y)


@_op("Softmax", "LogSoftmax", note="{dsl}(axis); opset < 13 (flattened to 2-D) through reshapes")
def _softmax(c: _NodeContext) -> None:
    c.allow("axis")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    rank = len(x.dims)
    if rank == 0:
        c.fail("a scalar input is not supported")
    axis = int(c.attrs.get("axis", -1 if c.opset >= 13 else 1))
    if not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if c.opset >= 13 or axis == rank - 1:
        c.emit(_DSL_OPS[c.node.op_type], [c.var(x, 0)], {"axis": axis if axis != rank - 1 else None}, x.dtype,
               x.dims, out=out)
        return
    # opset < 13: softmax over all dims from `axis` on, as a 2-D [outer, inner] softmax
    outer, inner = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
    flat = c.emit("reshape", [c.var(x, 0)], {}, x.dtype, _dims((outer, inner)), temp=f"{out}_2d")
    soft = c.emit(_DSL_OPS[c.node.op_type], [flat.var], {}, x.dtype, flat.dims, temp=f"{out}_2d_softmax")
    c.emit("reshape", [soft.var], {}, x.dtype, x.dims, out=out)


def _reshaped(c: _NodeContext, x: Value, shape: tuple[int, ...], dims: tuple[Dim, ...], out: str) -> None:
    if int(np.prod(shape)) != int(np.prod(x.shape)):
        c.fail(f"cannot reshape {list(x.shape)} to {list(shape)}")
    if x.const is not None:
        c.result(out, _with_elements(c.imp.const_value(x.const.reshape(shape)), x.elements))
        return
    c.emit("reshape", [c.var(x, 0)], {}, x.dtype, dims, out=out)


@_op("Flatten", note="reshape to 2-D at `axis`")
def _flatten(c: _NodeContext) -> None:
    c.allow("axis")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    shape = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
    dims = ((x.dims[0] if axis == 1 else Dim(shape[0])), Dim(shape[1]))
    _reshaped(c, x, shape, dims, out)


@_op("Reshape", note="reshape; the shape input constant (0 and -1 resolved at import)")
def _reshape(c: _NodeContext) -> None:
    c.allow("allowzero", "shape")
    x, shape_in = c.inputs(1, 2)
    (out,) = c.outputs()
    if shape_in is not None:
        target = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
        known_dims = shape_in.elements
    elif "shape" in c.attrs:
        target, known_dims = [int(s) for s in c.attrs["shape"]], None
    else:
        c.fail("no shape given")
    allow_zero = bool(c.attrs.get("allowzero", 0))
    dims: list[Dim | None] = []
    for k, s in enumerate(target):
        if s == 0 and not allow_zero:
            if k >= len(x.dims):
                c.fail(f"shape {target}: 0 at dim {k} copies a dim the input does not have")
            dims.append(x.dims[k])
        elif s == -1:
            dims.append(None)
        elif s < 0:
            c.fail(f"shape {target}: negative size {s}")
        else:
            dims.append(known_dims[k] if known_dims is not None else Dim(s))
    if dims.count(None) > 1:
        c.fail(f"shape {target}: more than one -1")
    known = int(np.prod([d.size for d in dims if d is not None]))
    if None in dims:
        total = int(np.prod(x.shape))
        if known == 0 or total % known:
            c.fail(f"shape {target} does not fit {list(x.shape)}")
        dims[dims.index(None)] = Dim(total // known)
    final = tuple(d for d in dims if d is not None)
    _reshaped(c, x, tuple(d.size for d in final), final, out)


@_op("Transpose", note="transpose(perm)")
def _transpose(c: _NodeContext) -> None:
    c.allow("perm")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    perm = [int(p) for p in c.attrs.get("perm", range(rank - 1, -1, -1))]
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)):
        c.fail(f"perm {perm} is not a permutation of {rank} dims")
    perm = [p % rank for p in perm]
    if x.const is not None:
        c.result(out, c.imp.const_value(np.ascontiguousarray(x.const.transpose(perm))))
        return
    c.emit("transpose", [c.var(x, 0)], {"perm": perm}, x.dtype, tuple(x.dims[p] for p in perm), out=out)


@_op("Clip", note="clamp; min/max constant (inputs, or attributes before opset 11)")
def _clip(c: _NodeContext) -> None:
    c.allow("min", "max")
    x, lo_in, hi_in = c.inputs(1, 3)
    (out,) = c.outputs()
    bounds = {}
    for key, v in (("min", lo_in), ("max", hi_in)):
        if key in c.attrs:
            bounds[key] = c.attrs[key]
        value = c.const_input(v, f"the {key} input")
        if value is not None:
            if value.size != 1:
                c.fail(f"the {key} input must be a scalar")
            bounds[key] = value.reshape(()).item()
    settings = {}
    for key, b in bounds.items():
        if x.dtype in _FLOATS:
            if math.isnan(float(b)):
                c.fail(f"{key} is NaN")
            settings[key] = float(b)
        else:
            settings[key] = int(b)
    c.emit("clamp", [c.var(x, 0)], settings, x.dtype, x.dims, out=out)


def _spatial_attrs(c: _NodeContext, x: Value, kernel: list[int], *, dilated: bool):
    spatial = list(x.shape[2:])
    strides = [int(s) for s in c.attrs.get("strides", [1] * len(spatial))]
    dilations = [int(d) for d in c.attrs.get("dilations", [1] * len(spatial))]
    if len(strides) != len(spatial) or len(dilations) != len(spatial):
        c.fail("strides/dilations must have one value per spatial dim")
    if not dilated and any(d != 1 for d in dilations):
        c.fail(f"dilations {dilations} are not supported (1 only)")
    pads = _pool_pads(c.fail, c.attrs, spatial, kernel, strides, dilations)
    for i, n in enumerate(spatial):     # (the sizevars may make an input this small)
        window, padded = dilations[i] * (kernel[i] - 1) + 1, n + pads[i] + pads[i + len(spatial)]
        if window > padded:
            c.fail(f"the window ({window}) is larger than the padded input ({padded}) in spatial dim {i}"
                   f"{given_sizevars(c.imp.sizevars)}")
    return spatial, strides, dilations, pads


def _need_1d_or_2d(c: _NodeContext, x: Value) -> None:
    if len(x.dims) not in (3, 4):
        c.fail(f"a {len(x.dims)}-D input: only 1-D (NCL) and 2-D (NCHW) are supported")
    c.float_input(x)


@_op("Conv", note="conv1d (NCL) / conv2d (NCHW): pads/auto_pad, strides, dilations, group; a following "
                  "BatchNormalization is folded into its weights")
def _conv(c: _NodeContext) -> None:
    c.allow("kernel_shape", "pads", "strides", "dilations", "group", "auto_pad")
    x, w, b = c.inputs(2, 3)
    (out,) = c.outputs()
    _need_1d_or_2d(c, x)
    rank = len(x.dims)
    if len(w.dims) != rank:
        c.fail(f"weights of rank {len(w.dims)}: expected {rank}")
    kernel = [int(k) for k in c.attrs.get("kernel_shape", w.shape[2:])]
    if kernel != list(w.shape[2:]):
        c.fail(f"kernel_shape {kernel} differs from the weights' {list(w.shape[2:])}")
    group = int(c.attrs.get("group", 1))
    spatial, strides, dilations, pads = _spatial_attrs(c, x, kernel, dilated=True)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        c.fail(f"channels: input {x.shape[1]}, weights {list(w.shape)}, group {group} do not fit")
    k = len(spatial)
    size = [(n + pads[i] + pads[i + k] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
            for i, n in enumerate(spatial)]
    dims = (x.dims[0], Dim(w.shape[0]), *(Dim(n) for n in size))
    if k == 2:
        op = "conv2d"
        settings = {"stride": _pair_setting(strides, 1), "padding": _padding_setting(pads),
                    "dilation": _pair_setting(dilations, 1)}
    else:
        op = "conv1d"
        settings = {"stride": strides[0] if strides[0] != 1 else None,
                    "padding": _pair_setting(pads, 0), "dilation": dilations[0] if dilations[0] != 1 else None}
    settings["groups"] = group if group != 1 else None
    weight, bias = w.const, (b.const if b is not None else None)
    bn = _foldable_batch_norm(c, out)
    if bn is not None and weight is not None and (b is None or bias is not None):
        bn_index, bn_node, scale, shift = bn
        # y = (conv(x, w) + b - mean) * s + B  ==  conv(x, w * s) + ((b - mean) * s + B)
        weight = (weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (rank - 1))).astype(weight.dtype)
        base = bias.astype(np.float64) if bias is not None else np.zeros(weight.shape[0])
        bias = (base * scale + shift).astype(weight.dtype)
        c.imp.skip.add(bn_index)
        bn_label = _quoted(bn_node.name) if bn_node.name else f"#{bn_index}"
        folded = f"with {bn_label} folded in"
        wn = c.imp.new_constant(weight, c.node.input[1], f'ONNX {_quoted(c.node.input[1])}, {folded}')
        bias_name = c.node.input[2] if b is not None else f"{bn_node.output[0]}_bias"
        bn_ = c.imp.new_constant(bias, bias_name, (f'ONNX {_quoted(bias_name)}, ' if b is not None else "") + folded)
        c.emit(op, [c.var(x, 0), wn, bn_], settings, x.dtype, dims, out=bn_node.output[0],
               note=f"{c.label} (Conv) + {bn_label} (BatchNormalization, folded)")
        return
    args = [c.var(x, 0), c.var(w, 1)] + ([c.var(b, 2)] if b is not None else [])
    c.emit(op, args, settings, x.dtype, dims, out=out)


def _batch_norm_affine(c: _NodeContext, node, ins: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference BatchNormalization whose parameters are constants, else None."""
    if len(ins) != 5 or any(v is None or v.const is None for v in ins[1:]):
        return None
    import onnx.helper as oh

    attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
    eps = float(attrs.get("epsilon", 1e-5))
    gamma, beta, mean, var = (v.const.astype(np.float64).reshape(-1) for v in ins[1:])
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale


def _foldable_batch_norm(c: _NodeContext, conv_out: str):
    """The BatchNormalization that alone consumes this Conv's output, with constant parameters:
    (its index, node, scale, shift); else None."""
    imp = c.imp
    users = imp.consumers.get(conv_out, [])
    if len(users) != 1 or conv_out in imp.outputs:
        return None
    index = users[0]
    node = imp.g.node[index]
    if node.op_type != "BatchNormalization" or node.input[0] != conv_out or any(node.output[1:]):
        return None
    if any(a.name == "training_mode" and a.i for a in node.attribute):
        return None
    ins = [imp.values.get(x) if x else None for x in node.input]
    affine = _batch_norm_affine(c, node, ins)
    return None if affine is None else (index, node, *affine)


@_op("BatchNormalization", note="inference only: folded into a preceding Conv, else mul + add")
def _batch_norm(c: _NodeContext) -> None:
    c.allow("epsilon", "momentum", "spatial", "is_test", "training_mode")
    x = c.inputs(5, 5)[0]
    (out,) = c.outputs()
    if c.attrs.get("training_mode", 0):
        c.fail("training_mode=1 is not supported (inference only)")
    if c.attrs.get("spatial", 1) != 1:
        c.fail("spatial=0 is not supported")
    c.float_input(x)
    affine = _batch_norm_affine(c, c.node, c.ins)
    if affine is None:
        c.fail("scale, B, mean and var must be constants")
    if len(x.dims) < 2:
        c.fail("the input needs a channel dim (rank >= 2)")
    shape = (x.shape[1],) + (1,) * (len(x.dims) - 2)
    np_dtype = _NUMPY_DTYPES[x.dtype]
    scale, shift = (a.reshape(shape).astype(np_dtype) for a in affine)
    sn = c.imp.new_constant(scale, f"{out}_scale", "scale / sqrt(var + epsilon)")
    tn = c.imp.new_constant(shift, f"{out}_shift", "B - mean * scale / sqrt(var + epsilon)")
    y = c.emit("mul", [c.var(x, 0), sn], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, tn], y)


_POOL_NOTE = ("{dsl} (NCHW; 1-D NCL through reshapes): kernel_shape, strides, pads up to half the kernel "
              "(ceil_mode's extra end padding included), auto_pad%s; no dilations")


@_op("AveragePool", note=_POOL_NOTE % ", count_include_pad")
@_op("MaxPool", note=_POOL_NOTE % "; no Indices output")
def _pool(c: _NodeContext) -> None:
    is_max = c.node.op_type == "MaxPool"
    c.allow("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations",
            *(("storage_order",) if is_max else ("count_include_pad",)))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    _need_1d_or_2d(c, x)
    one_d = len(x.dims) == 3
    if "kernel_shape" not in c.attrs:
        c.fail("kernel_shape is required")
    kernel = [int(k) for k in c.attrs["kernel_shape"]]
    if len(kernel) != len(x.dims) - 2:
        c.fail(f"kernel_shape {kernel}: expected {len(x.dims) - 2} values")
    spatial, strides, _, pads = _spatial_attrs(c, x, kernel, dilated=False)
    if one_d:       # pooled as [N, C, 1, L] by the 2-D pools
        spatial, kernel, strides, pads = [1, *spatial], [1, *kernel], [1, *strides], [0, pads[0], 0, pads[1]]
    include_pad = not is_max and bool(c.attrs.get("count_include_pad", 0))
    onnx_pads, size = list(pads), []
    for i, n in enumerate(spatial):
        span = n + pads[i] + pads[i + 2] - kernel[i]
        floor, ceil = span // strides[i] + 1, -(-span // strides[i]) + 1
        # ceil mode keeps a last window that starts inside the input (or its begin padding)
        if c.attrs.get("ceil_mode", 0) and ceil != floor and (ceil - 1) * strides[i] < n + pads[i]:
            if include_pad:
                c.fail(f"ceil_mode=1 with count_include_pad=1 where it changes the output size ({floor} -> "
                       f"{ceil}) is not supported")
            # the floor-mode pool over more end padding: padding is never the max, and is not
            # counted by an average without count_include_pad
            pads[i + 2] += (ceil - 1) * strides[i] + kernel[i] - (n + pads[i] + pads[i + 2])
            floor = ceil
        size.append(floor)
    for i in range(2):
        if max(pads[i], pads[i + 2]) * 2 > kernel[i]:
            c.fail(f"pads {onnx_pads}" + (f" (with ceil_mode: {pads})" if pads != onnx_pads else "") +
                   f" larger than half the kernel {kernel} are not supported")
    settings = {"kernel": _pair_setting(kernel, -1),
                "stride": None if strides == kernel else _pair_setting(strides, -1),
                "padding": _padding_setting(pads)}
    if include_pad:
        settings["count_include_pad"] = True
    op = _DSL_OPS[c.node.op_type]
    if not one_d:
        c.emit(op, [c.var(x, 0)], settings, x.dtype, (x.dims[0], x.dims[1], Dim(size[0]), Dim(size[1])), out=out)
        return
    lifted = c.emit("reshape", [c.var(x, 0)], {}, x.dtype, (x.dims[0], x.dims[1], Dim(1), x.dims[2]),
                    temp=f"{out}_2d")
    pooled = c.emit(op, [lifted.var], settings, x.dtype, (x.dims[0], x.dims[1], Dim(1), Dim(size[1])),
                    temp=f"{out}_2d_pooled")
    c.emit("reshape", [pooled.var], {}, x.dtype, (x.dims[0], x.dims[1], Dim(size[1])), out=out)


@_op("GlobalAveragePool", note="mean_axis over the spatial dims, keepdims")
def _global_average_pool(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    if len(x.dims) < 3:
        c.fail(f"a {len(x.dims)}-D input: expected N, C and spatial dims")
    axes = list(range(2, len(x.dims)))
    dims = x.dims[:2] + (Dim(1),) * len(axes)
    c.emit("mean_axis", [c.var(x, 0)], {"axes": axes, "keepdims": True}, x.dtype, dims, out=out)


# ---------------------------------------------------------------------------------------------
# element-wise math, comparisons, Where, Cast, Pow

_ONNX_INTS = ("i8", "i16", "i32", "i64")
_ONNX_UINTS = ("u8", "u16", "u32", "u64")

#: NumPy folds of the unary ops, for constant inputs (shape arithmetic); Erf has none and is emitted.
_UNARY_FOLDS = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Neg": np.negative, "Abs": np.abs,
                "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil, "Sign": np.sign}


def _expanded(c: _NodeContext, v: Value, position: int | None, dims: tuple[Dim, ...], base: str) -> str:
    """The variable holding `v` broadcast to `dims`: `v` itself at that shape, a constant broadcast
    at import, else `add(v, zeros)` (add broadcasts; for bool it is OR, so false is its zero)."""
    shape = tuple(d.size for d in dims)
    if v.shape == shape:
        return c.var(v, position) if position is not None else v.var
    if v.const is not None:
        return c.imp.new_constant(np.broadcast_to(v.const, shape), f"{base}_expanded",
                                  f"{c.label} input broadcast to {list(shape)} at import")
    zeros = c.imp.new_constant(np.zeros(shape, _NUMPY_DTYPES[v.dtype]), f"{base}_zeros",
                               f"zeros of {list(shape)}: the add that broadcasts {c.label}'s input")
    name = c.var(v, position) if position is not None else v.var
    return c.emit("add", [name, zeros], {}, v.dtype, dims, temp=f"{base}_expanded").var


@_op("Sqrt", "Exp", "Log", "Floor", "Ceil", note="{dsl} (float dtypes); folded on constants")
@_op("IsNaN", note="is_nan (float dtypes)")
@_op("Erf", note="erf (float dtypes)")
@_op("Reciprocal", note="recip(div_by_zero_mask=inf) (float dtypes: 1/±0 gives +inf, ONNX ±inf); folded on constants")
@_op("Neg", note="neg (float and signed dtypes); folded on constants")
@_op("Sign", note="sign (float and signed dtypes), cast from its i8 back to the input's dtype; folded on constants")
@_op("Abs", note="abs (float and signed dtypes; of unsigned dropped); folded on constants")
def _math(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    op_type = c.node.op_type
    fold = _UNARY_FOLDS.get(op_type)
    if x.const is not None and fold is not None:
        with np.errstate(all="ignore"):
            c.result(out, c.imp.const_value(np.asarray(fold(x.const)).astype(x.const.dtype)))
        return
    if op_type == "Abs" and x.dtype in _ONNX_UINTS:
        c.result(out, x)
        return
    if op_type in ("Neg", "Abs", "Sign"):
        if x.dtype not in _FLOATS + _ONNX_INTS:
            c.fail(f"dtype {x.dtype} is not supported (float and signed dtypes)")
    else:
        c.float_input(x)
    if op_type == "Sign" and x.dtype != "i8":      # the registry's sign gives i8, cast back to x's dtype
        sign = c.emit("sign", [c.var(x, 0)], {}, "i8", x.dims, temp=f"{out}_i8")
        c.emit("cast", [sign.var], {"to": x.dtype}, x.dtype, x.dims, out=out)
        return
    settings = {"div_by_zero_mask": math.inf} if op_type == "Reciprocal" else {}
    c.emit(_DSL_OPS[op_type], [c.var(x, 0)], settings, "bool" if op_type == "IsNaN" else x.dtype, x.dims, out=out)


_COMPARE_FOLDS = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
                  "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
                  "GreaterOrEqual": np.greater_equal}


@_op("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
     note="{dsl} to bool, NumPy broadcasting (the registry's comparisons broadcast); folded on constants")
@_op("And", "Or", "Xor", note="{dsl} of bool, NumPy broadcasting (the registry's bool ops broadcast); folded on "
                                "constants")
def _compare(c: _NodeContext) -> None:
    c.allow()
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    op_type = c.node.op_type
    if a.dtype == "bool" and op_type not in ("Equal", "And", "Or", "Xor"):
        c.fail("bool inputs are supported by Equal only")
    dims = _broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        c.result(out, c.imp.const_value(_COMPARE_FOLDS[op_type](a.const, b.const)))
        return
    c.emit(_DSL_OPS[op_type], [c.var(a, 0), c.var(b, 1)], {}, "bool", dims, out=out)


@_op("Where", note="filter(x, y, cond), operands broadcast; a computed cond cast from bool to x's dtype")
def _where(c: _NodeContext) -> None:
    c.allow()
    cond, a, b = c.inputs(3, 3)
    (out,) = c.outputs()
    if a.dtype != b.dtype or cond.dtype != "bool":
        c.fail(f"inputs of dtypes {cond.dtype}, {a.dtype}, {b.dtype}: expected bool, T, T")
    dims = _broadcast(c.fail, _broadcast(c.fail, cond.dims, a.dims), b.dims)
    if all(v.const is not None for v in (cond, a, b)):
        c.result(out, c.imp.const_value(np.where(cond.const, a.const, b.const).astype(a.const.dtype)))
        return
    if cond.const is not None:      # filter's condition has the operands' type
        cn = c.imp.new_constant(np.broadcast_to(cond.const.astype(_NUMPY_DTYPES[a.dtype]), tuple(d.size for d in dims)),
                                f"{out}_cond", f"{c.label}'s condition as {a.dtype}")
    elif a.dtype == "bool":
        cn = _expanded(c, cond, 0, dims, f"{out}_cond")
    elif bool_mask_where(c, cond, a, b, out):
        return
    else:                           # filter's condition has the operands' type: 0 / 1
        cast = c.emit("cast", [c.var(cond, 0)], {"to": a.dtype}, a.dtype, cond.dims, temp=f"{out}_cond")
        cn = _expanded(c, cast, None, dims, f"{out}_cond")
    an = _expanded(c, a, 1, dims, f"{out}_x")
    bn = _expanded(c, b, 2, dims, f"{out}_y")
    c.emit("filter", [an, bn, cn], {}, a.dtype, dims, out=out)


def _cast_allowed(src: str, dst: str) -> bool:
    """The registry's cast: any numeric type to a float, a float to an integer, an integer to a
    strictly wider one of the same signedness; numeric to bool (x != 0) and bool to numeric (0/1)."""
    if "bool" in (src, dst):
        return src != dst
    if dst in _FLOATS:
        return True
    if src in _FLOATS:
        return True
    same = (_ONNX_INTS if src in _ONNX_INTS else _ONNX_UINTS)
    return dst in same and same.index(dst) > same.index(src)


@_op("Cast", note="cast(to) where the registry's cast allows it (numeric to float, float to integer, integer "
                  "to a wider one of its signedness, to and from bool); same dtype dropped; folded on constants")
def _cast(c: _NodeContext) -> None:
    c.allow("to", "saturate")
    (x,) = c.inputs(1, 1)
    to = _ONNX_DTYPES.get(int(c.attrs.get("to", 0)))
    if to is None:
        c.fail(f"cast to ONNX element type {c.attrs.get('to')} is not supported "
               f"({', '.join(sorted(set(_ONNX_DTYPES.values())))} are)")
    _cast_to(c, x, to)


@_op("CastLike", note="as Cast, to the second input's dtype")
def _cast_like(c: _NodeContext) -> None:
    c.allow("saturate")
    x, like = c.inputs(2, 2)
    _cast_to(c, x, like.dtype)


def _cast_to(c: _NodeContext, x: Value, to: str) -> None:
    (out,) = c.outputs()
    if x.const is not None:
        with np.errstate(all="ignore"):
            c.result(out, _with_elements(c.imp.const_value(x.const.astype(_NUMPY_DTYPES[to])),
                                         x.elements if to in _ONNX_INTS else None))
        return
    if to == x.dtype:
        c.result(out, x)
        return
    if not _cast_allowed(x.dtype, to):
        c.fail(f"cast from {x.dtype} to {to} is not one the registry's cast does (numeric to float, float to "
               f"integer, integer to a wider integer of the same signedness, to and from bool)")
    c.emit("cast", [c.var(x, 0)], {"to": to}, to, x.dims, out=out)


@_op("Pow", note="pow (NumPy broadcasting; an exponent of another dtype cast to the base's; an integer base "
                 "through f64 and back); a constant scalar exponent 1 dropped, 2 and 3 as mul, 0.5 sqrt, -0.5 "
                 "rsqrt, -1 recip; folded on constants")
def _pow(c: _NodeContext) -> None:
    c.allow()
    x, y = c.inputs(2, 2)
    (out,) = c.outputs()
    if x.const is not None and y.const is not None:
        with np.errstate(all="ignore"):
            c.result(out, c.imp.const_value(np.power(x.const, y.const).astype(x.const.dtype)))
        return
    if x.dtype not in _FLOATS + _ONNX_INTS + _ONNX_UINTS or y.dtype not in _FLOATS + _ONNX_INTS + _ONNX_UINTS:
        c.fail(f"a base of dtype {x.dtype} and an exponent of dtype {y.dtype} (numeric dtypes only)")
    dims = _broadcast(c.fail, x.dims, y.dims)
    name = c.var(x, 0)
    e = float(y.const.reshape(()).item()) if y.const is not None and y.const.size == 1 and dims == x.dims else None
    if x.dtype in _FLOATS and e in (1.0, 2.0, 3.0, 0.5, -0.5, -1.0):
        if e == 1.0:
            c.result(out, x)
        elif e in (2.0, 3.0):
            y2 = c.emit("mul", [name, name], {}, x.dtype, x.dims, out=out)
            if e == 3.0:
                c.emit_inplace("mul", [y2.var, name], y2)
        else:
            op = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "recip"}[e]
            c.emit(op, [name], {"div_by_zero_mask": math.inf} if op == "recip" else {}, x.dtype, x.dims, out=out)
        return
    # the registry's pow takes floats of one dtype: an integer base computes in f64 (exact up to 2**53)
    # and rounds back; an exponent of another dtype is cast to the base's
    work = x.dtype if x.dtype in _FLOATS else "f64"
    if work != x.dtype:
        name = c.emit("cast", [name], {"to": work}, work, x.dims, temp=f"{out}_base").var
    if y.const is not None and (y.dtype != work or y.var is None):
        exponent = c.imp.new_constant(y.const.astype(_NUMPY_DTYPES[work]), f"{c.node.input[1]}_{work}",
                                      f"ONNX {_quoted(c.node.input[1])} as {work}")
    elif y.dtype != work:
        exponent = c.emit("cast", [c.var(y, 1)], {"to": work}, work, y.dims, temp=f"{out}_exponent").var
    else:
        exponent = c.var(y, 1)
    if work == x.dtype:
        c.emit("pow", [name, exponent], {}, work, dims, out=out)
        return
    p = c.emit("pow", [name, exponent], {}, work, dims, temp=f"{out}_{work}")
    c.emit("cast", [p.var], {"to": x.dtype, "rounding_mode": '"nearest"'}, x.dtype, dims, out=out)


# ---------------------------------------------------------------------------------------------
# layout: Unsqueeze, Squeeze, Concat, Expand, Slice, Gather


def _axes(c: _NodeContext, v: Value | None, rank: int, what: str = "axes") -> list[int] | None:
    """`axes` from the attribute (older opsets) or the constant input, normalised; None when absent."""
    if v is not None:
        raw = [int(a) for a in c.const_input(v, f"the {what} input").reshape(-1)]
    elif "axes" in c.attrs:
        raw = [int(a) for a in c.attrs["axes"]]
    else:
        return None
    if any(not -rank <= a < rank for a in raw):
        c.fail(f"{what} {raw} out of range for rank {rank}")
    axes = [a % rank for a in raw]
    if len(set(axes)) != len(axes):
        c.fail(f"{what} {raw} repeat an axis")
    return axes


@_op("Unsqueeze", note="reshape; axes (attribute, or a constant input from opset 13) constant")
def _unsqueeze(c: _NodeContext) -> None:
    c.allow("axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    rank = len(x.dims) + len(c.const_input(axes_in, "the axes input").reshape(-1) if axes_in is not None
                             else c.attrs.get("axes", []))
    axes = _axes(c, axes_in, rank)
    if not axes:
        c.fail("no axes given")
    rest = iter(x.dims)
    dims = tuple(Dim(1) if k in axes else next(rest) for k in range(rank))
    _reshaped(c, x, tuple(d.size for d in dims), dims, out)


@_op("Squeeze", note="reshape; axes (attribute, or a constant input from opset 13) constant, or all 1-dims")
def _squeeze(c: _NodeContext) -> None:
    c.allow("axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    axes = _axes(c, axes_in, len(x.dims))
    if axes is None:
        axes = [k for k, d in enumerate(x.dims) if d.size == 1]
    if any(x.dims[a].size != 1 for a in axes):
        c.fail(f"axes {axes}: dims of size other than 1 in {list(x.shape)}")
    dims = tuple(d for k, d in enumerate(x.dims) if k not in axes)
    _reshaped(c, x, tuple(d.size for d in dims), dims, out)


@_op("Concat", note="concat(axis); folded when all inputs are constants")
def _concat(c: _NodeContext) -> None:
    c.allow("axis")
    ins = c.inputs(1, len(c.ins))
    (out,) = c.outputs()
    if "axis" not in c.attrs:
        c.fail("axis is required")
    rank = len(ins[0].dims)
    axis = int(c.attrs["axis"])
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if any(v.dtype != ins[0].dtype or len(v.dims) != rank for v in ins):
        c.fail("inputs of different dtypes or ranks")
    for v in ins:
        if any(v.shape[k] != ins[0].shape[k] for k in range(rank) if k != axis):
            c.fail(f"shapes {[list(v.shape) for v in ins]} differ off axis {axis}")
    if all(v.const is not None for v in ins):
        elements = None
        if rank == 1 and any(v.elements for v in ins):
            elements = tuple(d for v in ins for d in (v.elements or _dims(v.const)))
        c.result(out, _with_elements(c.imp.const_value(np.concatenate([v.const for v in ins], axis=axis)), elements))
        return
    parts = [(v, k) for k, v in enumerate(ins) if v.shape[axis] != 0]   # empty parts add nothing
    total = sum(v.shape[axis] for v, _ in parts)
    dims = tuple(Dim(total) if k == axis else d for k, d in enumerate(ins[0].dims))
    if len(parts) == 1:
        v, k = parts[0]
        c.emit("reshape", [c.var(v, k)], {}, v.dtype, dims, out=out)
        return
    c.emit("concat", [c.var(v, k) for v, k in parts], {"axis": axis}, ins[0].dtype, dims, out=out)


@_op("Expand", note="NumPy broadcasting to a constant shape: an add of zeros; folded on constants")
def _expand(c: _NodeContext) -> None:
    c.allow()
    x, shape_in = c.inputs(2, 2)
    (out,) = c.outputs()
    shape = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
    dims = _broadcast(c.fail, x.dims, shape_in.elements or _dims(shape))
    if x.const is not None:
        c.result(out, c.imp.const_value(np.ascontiguousarray(np.broadcast_to(x.const, [d.size for d in dims]))))
        return
    if x.shape == tuple(d.size for d in dims):
        c.emit("reshape", [c.var(x, 0)], {}, x.dtype, dims, out=out)
        return
    zeros = c.imp.new_constant(np.zeros([d.size for d in dims], _NUMPY_DTYPES[x.dtype]), f"{out}_zeros",
                               f"zeros of {[d.size for d in dims]}: the add that broadcasts {c.label}'s input")
    c.emit("add", [c.var(x, 0), zeros], {}, x.dtype, dims, out=out)


@_op("Slice", note="slice(starts, ends, axes, steps), all constant (attributes before opset 10); folded on "
                   "constants")
def _slice(c: _NodeContext) -> None:
    c.allow("starts", "ends", "axes")
    x, starts_in, ends_in, axes_in, steps_in = c.inputs(1, 5)
    (out,) = c.outputs()
    rank = len(x.dims)
    if starts_in is not None:
        starts = [int(v) for v in c.const_input(starts_in, "the starts input").reshape(-1)]
        ends = [int(v) for v in c.const_input(ends_in, "the ends input").reshape(-1)]
    else:
        starts, ends = [int(v) for v in c.attrs.get("starts", [])], [int(v) for v in c.attrs.get("ends", [])]
    axes = _axes(c, axes_in, rank) if starts_in is not None else _axes(c, None, rank)
    axes = axes if axes is not None else list(range(len(starts)))
    steps = [int(v) for v in c.const_input(steps_in, "the steps input").reshape(-1)] if steps_in is not None \
        else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        c.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        c.fail("a step of 0")
    index = [slice(None)] * rank
    dims = list(x.dims)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        index[a] = slice(s, e, st)
        dims[a] = Dim(len(range(*index[a].indices(x.shape[a]))))
    if x.const is not None:
        elements = x.elements[index[0]] if x.elements and rank == 1 else None
        c.result(out, _with_elements(c.imp.const_value(np.ascontiguousarray(x.const[tuple(index)])), elements))
        return
    # ONNX writes "to the end" as INT64_MAX / INT64_MIN: clamped to the dim, as Python slicing would
    def clamp(v: int, a: int) -> int:
        return max(min(v, x.shape[a]), -x.shape[a] - 1)

    starts = [clamp(s, a) for s, a in zip(starts, axes, strict=True)]
    ends = [clamp(e, a) for e, a in zip(ends, axes, strict=True)]
    settings = {"starts": starts, "ends": ends, "axes": axes, "steps": steps if any(s != 1 for s in steps) else None}
    c.emit("slice", [c.var(x, 0)], settings, x.dtype, tuple(dims), out=out)


@_op("Gather", note="gather(axis); folded when data and indices are constants")
def _gather(c: _NodeContext) -> None:
    c.allow("axis")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    rank = len(data.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if indices.dtype not in _ONNX_INTS + _ONNX_UINTS:
        c.fail(f"indices of dtype {indices.dtype}")
    if data.const is not None and indices.const is not None:
        n = data.shape[axis]
        if np.any((indices.const < -n) | (indices.const >= n)):
            c.fail(f"an index out of [-{n}, {n})")
        taken = np.take(data.const, indices.const.astype(np.int64), axis=axis)
        elements = tuple(data.elements[int(i)] for i in indices.const.reshape(-1)) if data.elements else None
        c.result(out, _with_elements(c.imp.const_value(taken), elements))
        return
    dims = data.dims[:axis] + indices.dims + data.dims[axis + 1:]
    c.emit("gather", [c.var(data, 0), c.var(indices, 1)], {"axis": axis or None}, data.dtype, dims, out=out)


# ---------------------------------------------------------------------------------------------
# reductions, normalisation, activations

_REDUCE_FOLDS = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
                 "ReduceProd": np.prod,
                 "ReduceSumSquare": lambda a, **k: np.sum(a * a, **k),
                 "ReduceL1": lambda a, **k: np.sum(np.abs(a), **k),
                 "ReduceL2": lambda a, **k: np.sqrt(np.sum(a * a, **k)),
                 "ReduceLogSum": lambda a, **k: np.log(np.sum(a, **k)),
                 "ReduceLogSumExp": lambda a, **k: np.log(np.sum(np.exp(a), **k))}

#: the reductions ONNX composes: (op before sum_axis: "square" is mul(x, x), op after it, float only)
_COMPOSED_REDUCTIONS = {"ReduceSumSquare": ("square", None, False), "ReduceL1": ("abs", None, False),
                        "ReduceL2": ("square", "sqrt", True), "ReduceLogSum": (None, "log", True),
                        "ReduceLogSumExp": ("exp", "log", True)}


@_op("ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
     note="sum_axis(axes, keepdims) after mul(x, x), abs or exp, and before sqrt or log, as ONNX defines them "
          "(L2, LogSum, LogSumExp: float dtypes; L1: float and signed); axes as ReduceSum; folded on constants")
@_op("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
     note="{dsl}(axes, keepdims); axes constant (attribute, or input from opset 13/18), none: all "
          "(noop_with_empty_axes: dropped); numeric dtypes (mean_axis: float); folded on constants")
def _reduce(c: _NodeContext) -> None:
    c.allow("axes", "keepdims", "noop_with_empty_axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    op_type = c.node.op_type
    rank = len(x.dims)
    axes = _axes(c, axes_in, rank) if rank else None
    keepdims = bool(c.attrs.get("keepdims", 1))
    if not axes:
        if c.attrs.get("noop_with_empty_axes", 0):
            c.result(out, x)
            return
        axes = list(range(rank))
    composed = _COMPOSED_REDUCTIONS.get(op_type)
    if composed is not None and ((composed[2] and x.dtype not in _FLOATS) or
                                 (composed[0] == "abs" and x.dtype not in _FLOATS + _ONNX_INTS)):
        c.fail(f"dtype {x.dtype} (float{'' if composed[2] else ' and signed'} dtypes)")
    if x.dtype == "bool" or (op_type == "ReduceMean" and x.dtype not in _FLOATS):
        c.fail(f"dtype {x.dtype}: {_DSL_OPS.get(op_type, 'sum_axis')} takes "
               f"{'float' if op_type == 'ReduceMean' else 'numeric'} dtypes")
    if any(x.shape[a] == 0 for a in axes) and op_type in ("ReduceMax", "ReduceMin", "ReduceMean"):
        c.fail(f"reducing an empty dim of {list(x.shape)} (the registry's {_DSL_OPS[op_type]} has no empty result)")
    axes = sorted(axes)
    if any(x.shape[k] == 0 for k in range(rank) if k not in axes) and x.const is None:
        c.fail(f"a kept dim of size 0 in {list(x.shape)} is not imported")
    if x.const is not None:
        folded = _REDUCE_FOLDS[op_type](x.const, axis=tuple(axes), keepdims=keepdims)
        c.result(out, c.imp.const_value(np.asarray(folded).astype(x.const.dtype)))
        return
    if not axes and composed is None:        # a scalar: nothing to reduce
        c.emit("reshape", [c.var(x, 0)], {}, x.dtype, x.dims, out=out)
        return
    dims = tuple(Dim(1) if k in axes else d for k, d in enumerate(x.dims) if keepdims or k not in axes)
    if composed is None:
        c.emit(_DSL_OPS[op_type], [c.var(x, 0)], {"axes": axes, "keepdims": keepdims or None}, x.dtype, dims,
               out=out)
        return
    before, after, _ = composed
    name = c.var(x, 0)
    if before is not None:
        name = c.emit("mul" if before == "square" else before, [name, name] if before == "square" else [name], {},
                      x.dtype, x.dims, temp=f"{out}_{before}").var
    if axes:
        reduced = c.emit("sum_axis", [name], {"axes": axes, "keepdims": keepdims or None}, x.dtype, dims,
                         **({"temp": f"{out}_sum"} if after else {"out": out}))
    else:
        reduced = c.emit("reshape", [name], {}, x.dtype, dims, **({"temp": f"{out}_sum"} if after else {"out": out}))
    if after is not None:
        c.emit(after, [reduced.var], {}, x.dtype, dims, out=out)


def _norm_axis(c: _NodeContext, x: Value) -> tuple[int, int, tuple[Dim, ...]]:
    """LayerNormalization / RMSNormalization: X's rank, the first normalised axis and the
    normalised dims (statistics in f32: stash_type 1)."""
    c.float_input(x)
    if int(c.attrs.get("stash_type", 1)) != 1:
        c.fail(f"stash_type {c.attrs['stash_type']}: only 1 (f32 statistics) is supported")
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", -1))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    return rank, axis, x.dims[axis:]


def _norm_parameter(c: _NodeContext, x: Value, v: Value, k: int, what: str, normalised: tuple[Dim, ...],
                    out: str) -> str:
    """A norm's scale or bias input, of the normalised dims' shape (a constant that broadcasts to
    it is expanded at import)."""
    if v.dtype != x.dtype:
        c.fail(f"{what} of dtype {v.dtype}, X of {x.dtype}")
    if v.shape != tuple(d.size for d in normalised):
        if v.const is None or _broadcast(c.fail, v.dims, normalised) != normalised:
            c.fail(f"{what} of shape {list(v.shape)}: expected {[d.size for d in normalised]} "
                   f"(or a constant that broadcasts to it)")
    return _expanded(c, v, k, normalised, f"{out}_{what.lower()}")


@_op("LayerNormalization", note="layer_norm(axis, eps); Scale and B of the normalised dims' shape (broadcast "
                                "at import when constant); the Mean / InvStdDev outputs (f32) by mean_axis, sub, "
                                "mul, add, rsqrt")
def _layer_norm(c: _NodeContext) -> None:
    c.allow("axis", "epsilon", "stash_type")
    x, scale, bias = c.inputs(2, 3)
    out, mean_out, inv_std_out = (c.outputs(3) + ["", ""])[:3]
    rank, axis, normalised = _norm_axis(c, x)
    args = [c.var(x, 0)] + [_norm_parameter(c, x, v, k, what, normalised, out)
                            for v, k, what in ((scale, 1, "Scale"), (bias, 2, "B")) if v is not None]
    eps = float(c.attrs.get("epsilon", 1e-5))
    if out:
        c.emit("layer_norm", args, {"axis": axis if axis != rank - 1 else None, "eps": eps if eps != 1e-5 else None},
               x.dtype, x.dims, out=out)
    if mean_out or inv_std_out:
        _layer_norm_statistics(c, x, axis, eps, mean_out, inv_std_out)


def _layer_norm_statistics(c: _NodeContext, x: Value, axis: int, eps: float, mean_out: str, inv_std_out: str) -> None:
    """LayerNormalization's Mean and InvStdDev outputs (f32, the normalised dims kept as 1), computed
    by ops: the mean, and rsqrt of the mean square deviation plus epsilon."""
    if x.dtype != "f32":
        c.fail(f"the Mean / InvStdDev outputs of a {x.dtype} input (f32 only: they are f32)")
    axes = list(range(axis, len(x.dims)))
    stat_dims = x.dims[:axis] + (Dim(1),) * len(axes)
    base = mean_out or inv_std_out
    mean = c.emit("mean_axis", [c.var(x, 0)], {"axes": axes, "keepdims": True}, x.dtype, stat_dims,
                  **({"out": mean_out} if mean_out else {"temp": f"{base}_mean"}))
    if not inv_std_out:
        return
    deviation = c.emit("sub", [c.var(x, 0), mean.var], {}, x.dtype, x.dims, temp=f"{inv_std_out}_deviation")
    c.emit_inplace("mul", [deviation.var, deviation.var], deviation)
    var = c.emit("mean_axis", [deviation.var], {"axes": axes, "keepdims": True}, x.dtype, stat_dims,
                 temp=f"{inv_std_out}_var")
    eps_name = c.imp.new_constant(np.asarray(eps, np.float32), f"{inv_std_out}_epsilon", "LayerNormalization epsilon")
    c.emit_inplace("add", [var.var, eps_name], var)
    c.emit("rsqrt", [var.var], {}, x.dtype, stat_dims, out=inv_std_out)


@_op("Gelu", note="gelu(approximate) (float dtypes)")
def _gelu(c: _NodeContext) -> None:
    c.allow("approximate")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    approximate = c.attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        c.fail(f"approximate {approximate!r} (none and tanh are supported)")
    c.emit("gelu", [c.var(x, 0)], {"approximate": '"tanh"' if approximate == "tanh" else None}, x.dtype, x.dims,
           out=out)


# ---------------------------------------------------------------------------------------------
# shape computations, folded at import (all shapes are static once the sizevars have values)


@_op("Shape", note="folded: the input's shape (start, end) as an i64 constant")
def _shape(c: _NodeContext) -> None:
    c.allow("start", "end")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    start, end = int(c.attrs.get("start", 0)), int(c.attrs.get("end", rank))
    c.result(out, _with_elements(c.imp.const_value(np.asarray(x.shape[slice(start, end)], np.int64)),
                                 x.dims[slice(start, end)]))


@_op("Size", note="folded: the input's element count as an i64 constant")
def _size(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.result(out, c.imp.const_value(np.asarray(int(np.prod(x.shape)), np.int64)))


@_op("ConstantOfShape", note="folded: a constant of the (constant) shape input, filled with value")
def _constant_of_shape(c: _NodeContext) -> None:
    import onnx.numpy_helper as nh

    c.allow("value")
    (shape_in,) = c.inputs(1, 1)
    (out,) = c.outputs()
    shape = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
    if any(s < 0 for s in shape):
        c.fail(f"shape {shape} has a negative size")
    try:
        value = nh.to_array(c.attrs["value"]).reshape(-1) if "value" in c.attrs else np.zeros(1, np.float32)
    except ValueError as exc:
        c.fail(f"value: {_data_mismatch(c.attrs['value'], exc)}")
    if value.size != 1:
        c.fail("value must hold one element")
    try:
        c.result(out, c.imp.const_value(np.full(shape, value[0], value.dtype)))
    except OnnxImportError as exc:
        c.fail(str(exc))


@_op("Range", note="folded when start, limit and delta are constants; otherwise arange(start, step=delta) "
                   "over the output's length declared in the model (start and delta scalar variables or constants)")
def _range(c: _NodeContext) -> None:
    c.allow()
    ins = c.inputs(3, 3)
    (out,) = c.outputs()
    if any(v.const is None for v in ins):
        _range_arange(c, ins, out)
        return
    start, limit, delta = (c.const_input(v, f"the {w} input").reshape(()) for v, w in
                           zip(ins, ("start", "limit", "delta"), strict=True))
    if delta == 0:
        c.fail("delta is 0")
    count = max(int(math.ceil((limit - start) / delta)), 0)
    c.result(out, c.imp.const_value((start + np.arange(count) * delta).astype(start.dtype)))


def _range_arange(c: _NodeContext, ins: list[Value], out: str) -> None:
    """Range over run-time values: its length, ceil((limit - start) / delta), is not known at
    import, so it is the length the model declares for the output (value_info or a graph output:
    the exporter's shape inference), trusted as ONNX trusts it; limit is not read."""
    start, _, delta = ins
    if start.dtype not in _FLOATS + _ONNX_INTS + _ONNX_UINTS:
        c.fail(f"dtype {start.dtype} is not supported (numeric dtypes only)")
    for v, what in ((start, "start"), (delta, "delta")):
        if v.shape not in ((), (1,)):
            c.fail(f"the {what} input has shape {list(v.shape)}, not a scalar")
    declared = [i for i in (*c.imp.g.value_info, *c.imp.g.output) if i.name == out]
    dims = declared[0].type.tensor_type.shape.dim if declared else []
    if len(dims) != 1 or not (dims[0].HasField("dim_value") or dims[0].HasField("dim_param")):
        c.fail("start, limit or delta is computed, so the output length is known only at run time; the "
               "model must declare the output's 1-d length (a size or a symbolic dim) for it to become arange")
    d = dims[0]
    if d.HasField("dim_param") and d.dim_param not in c.imp.sizevar_names:
        c.fail(f"the output's length is the symbolic dim `{d.dim_param}`, which no graph input has (a Range "
               f"over run-time values needs a length that is a size or a graph input's symbolic dim)")
    dim = Dim(d.dim_value) if d.HasField("dim_value") else c.imp.symbolic_dim(d.dim_param, out)
    settings = {}
    for v, position, name in ((start, 0, "start"), (delta, 2, "step")):
        if v.const is not None:
            settings[name] = v.const.reshape(()).item()
        else:
            scalar = c.var(v, position)
            if v.shape == (1,):
                scalar = c.emit("reshape", [scalar], {}, v.dtype, (), temp=f"{out}_{name}").var
            settings[name] = scalar           # a variable name: read at run time
    var = c.imp.dsl_name(out)
    c.emit("arange", [var], settings, start.dtype, (dim,), out=out)


@_op("Split", note="one slice per output; split sizes constant (attribute, input from opset 13) or num_outputs; "
                   "folded on constants")
def _split(c: _NodeContext) -> None:
    c.allow("axis", "split", "num_outputs")
    x, split_in = c.inputs(1, 2)
    outs = list(c.node.output)
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    n = x.shape[axis]
    if split_in is not None:
        sizes = [int(v) for v in c.const_input(split_in, "the split input").reshape(-1)]
    elif "split" in c.attrs:
        sizes = [int(v) for v in c.attrs["split"]]
    else:
        parts = int(c.attrs.get("num_outputs", len(outs)))
        if parts != len(outs) or parts < 1:
            c.fail(f"num_outputs {parts} for {len(outs)} outputs")
        step = -(-n // parts)                        # the last part is the smaller one
        sizes = [min(step, n - k * step) for k in range(parts)]
    if len(sizes) != len(outs) or sum(sizes) != n or any(s < 0 for s in sizes):
        c.fail(f"split {sizes} does not divide dim {axis} of {list(x.shape)} into {len(outs)} outputs")
    start = 0
    for out, size in zip(outs, sizes, strict=True):
        index = [slice(None)] * rank
        index[axis] = slice(start, start + size)
        dims = tuple(Dim(size) if k == axis else d for k, d in enumerate(x.dims))
        if out and x.const is not None:
            c.result(out, c.imp.const_value(np.ascontiguousarray(x.const[tuple(index)])))
        elif out:
            c.emit("slice", [c.var(x, 0)], {"starts": [start], "ends": [start + size], "axes": [axis]}, x.dtype, dims,
                   out=out)
        start += size


@_op("Trilu", note="filter(x, zeros, mask) by a constant triangle mask; k constant")
def _trilu(c: _NodeContext) -> None:
    c.allow("upper")
    x, k_in = c.inputs(1, 2)
    (out,) = c.outputs()
    if len(x.dims) < 2:
        c.fail(f"a {len(x.dims)}-D input: at least 2-D")
    k = int(c.const_input(k_in, "k").reshape(())) if k_in is not None else 0
    rows, cols = x.shape[-2:]
    upper = bool(c.attrs.get("upper", 1))
    keep = np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k)
    if x.const is not None:
        c.result(out, c.imp.const_value(np.where(keep, x.const, np.zeros((), x.const.dtype))))
        return
    np_dtype = _NUMPY_DTYPES[x.dtype]
    mask = c.imp.new_constant(np.broadcast_to(keep.astype(np_dtype), x.shape), f"{out}_mask",
                              f"{c.label}'s {'upper' if upper else 'lower'} triangle (k={k}) as {x.dtype}")
    zeros = c.imp.new_constant(np.zeros(x.shape, np_dtype), f"{out}_zeros", f"{c.label}'s zeroed part")
    c.emit("filter", [c.var(x, 0), zeros, mask], {}, x.dtype, x.dims, out=out)


@_op("Not", note="not (bool)")
def _not(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    if x.dtype != "bool":
        c.fail(f"dtype {x.dtype} (ONNX Not takes bool)")
    if x.const is not None:
        c.result(out, c.imp.const_value(np.logical_not(x.const)))
        return
    c.emit("not", [c.var(x, 0)], {}, "bool", x.dims, out=out)


@_op("Max", "Min", "Sum", note="{dsl} of each next input, NumPy broadcasting through an add of zeros (numeric dtypes)")
def _min_max(c: _NodeContext) -> None:
    c.allow()
    ins = c.inputs(1, len(c.ins))
    (out,) = c.outputs()
    if any(v.dtype != ins[0].dtype for v in ins) or ins[0].dtype == "bool":
        c.fail(f"inputs of dtypes {[v.dtype for v in ins]}: one numeric dtype")
    dims = ins[0].dims
    for v in ins[1:]:
        dims = _broadcast(c.fail, dims, v.dims)
    if all(v.const is not None for v in ins):        # index arithmetic of exported masks
        fold = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}[c.node.op_type]
        c.result(out, c.imp.const_value(functools.reduce(fold, [v.const for v in ins]).astype(ins[0].const.dtype)))
        return
    names = [_expanded(c, v, k, dims, f"{out}_{k}") for k, v in enumerate(ins)]
    if len(names) == 1:
        c.emit("reshape", names, {}, ins[0].dtype, dims, out=out)
        return
    y = c.emit(_DSL_OPS[c.node.op_type], names[:2], {}, ins[0].dtype, dims, out=out)
    for name in names[2:]:
        c.emit_inplace(_DSL_OPS[c.node.op_type], [y.var, name], y)


@_op("ArgMax", "ArgMin", note="{dsl}(axis, keepdims, select_first) (numeric dtypes)")
def _arg_reduce(c: _NodeContext) -> None:
    c.allow("axis", "keepdims", "select_last_index")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if x.dtype == "bool":
        c.fail("dtype bool (numeric dtypes)")
    if x.shape[axis] == 0:
        c.fail(f"an empty axis {axis} of {list(x.shape)}")
    keepdims = bool(c.attrs.get("keepdims", 1))
    dims = tuple(Dim(1) if k == axis else d for k, d in enumerate(x.dims) if keepdims or k != axis)
    settings = {"axis": axis, "keepdims": keepdims or None,
                "select_first": False if c.attrs.get("select_last_index", 0) else None}
    c.emit(_DSL_OPS[c.node.op_type], [c.var(x, 0)], settings, "i64", dims, out=out)


@_op("RMSNormalization", note="rms_norm(axis, eps); scale of the normalised dims' shape (broadcast at import "
                              "when constant); stash_type 1")
def _rms_norm(c: _NodeContext) -> None:
    c.allow("axis", "epsilon", "stash_type")
    x, scale = c.inputs(2, 2)
    (out,) = c.outputs()
    rank, axis, normalised = _norm_axis(c, x)
    gamma = _norm_parameter(c, x, scale, 1, "scale", normalised, out)
    eps = float(c.attrs.get("epsilon", 1e-5))
    c.emit("rms_norm", [c.var(x, 0), gamma], {"axis": axis if axis != rank - 1 else None, "eps": eps},
           x.dtype, x.dims, out=out)


@_op("Attention", note="sdpa(scale, causal): 4-D [B, H, S, D] or 3-D [B, S, H*D] (q_num_heads/kv_num_heads) "
                       "through reshape and transpose; attn_mask bool or float; past_key/past_value joined by concat "
                       "(present_key/present_value outputs); no softcap, no qk output, no nonpad_kv_seqlen")
def _attention(c: _NodeContext) -> None:
    c.allow("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
            "softmax_precision")
    q, k, v, mask, past_k, past_v, nonpad = c.inputs(3, 7)
    outs = (list(c.node.output) + ["", "", "", ""])[:4]
    out, present_k_out, present_v_out, qk_out = outs
    if qk_out:
        c.fail("the qk_matmul_output output is not supported")
    if float(c.attrs.get("softcap", 0.0)) != 0.0:
        c.fail("softcap is not supported (sdpa has none)")
    if nonpad is not None:
        c.fail("nonpad_kv_seqlen is not supported")
    if (past_k is None) != (past_v is None):
        c.fail("past_key and past_value must come together")
    for t in (q, k, v, past_k, past_v):
        if t is not None:
            c.float_input(t)
            if t.dtype != q.dtype:
                c.fail("Q, K, V and the past of different dtypes")
    rank = len(q.dims)
    if rank not in (3, 4) or len(k.dims) != rank or len(v.dims) != rank:
        c.fail(f"Q, K, V of ranks {len(q.dims)}, {len(k.dims)}, {len(v.dims)}: 3-D or 4-D each")

    def heads(t: Value, position: int, count_attr: str) -> Value:
        """t as [B, H, S, D]: a 3-D [B, S, H*D] input reshaped and transposed."""
        name = c.var(t, position)
        if rank == 4:
            return Value(t.dtype, t.dims, var=name)
        if count_attr not in c.attrs:
            c.fail(f"3-D inputs need {count_attr}")
        n = int(c.attrs[count_attr])
        if n <= 0 or t.shape[2] % n:
            c.fail(f"{count_attr}={n} does not divide {t.shape[2]}")
        split = (t.dims[0], t.dims[1], Dim(n), Dim(t.shape[2] // n))
        r = c.emit("reshape", [name], {}, t.dtype, split, temp=f"{out or 'attention'}_{c.node.input[position]}_heads")
        dims = (split[0], split[2], split[1], split[3])
        return c.emit("transpose", [r.var], {"perm": [0, 2, 1, 3]}, t.dtype, dims, temp=f"{r.var}_t")

    qh = heads(q, 0, "q_num_heads")
    kh = heads(k, 1, "kv_num_heads")
    vh = heads(v, 2, "kv_num_heads")
    past_len = 0
    if past_k is not None:
        if len(past_k.dims) != 4 or len(past_v.dims) != 4:
            c.fail("past_key / past_value must be 4-D")
        past_len = past_k.shape[2]
        for cur, past, position, present in ((kh, past_k, 4, present_k_out), (vh, past_v, 5, present_v_out)):
            dims = (cur.dims[0], cur.dims[1], Dim(past.shape[2] + cur.shape[2]), cur.dims[3])
            joined = c.emit("concat", [c.var(past, position), cur.var], {"axis": 2}, cur.dtype, dims,
                            **({"out": present} if present else {"temp": f"{out}_{'kv'[position - 4]}_all"}))
            if position == 4:
                kh = joined
            else:
                vh = joined
    elif present_k_out or present_v_out:
        for cur, present in ((kh, present_k_out), (vh, present_v_out)):
            if present:
                c.emit("reshape", [cur.var], {}, cur.dtype, cur.dims, out=present)
    if qh.shape[1] % kh.shape[1]:
        c.fail(f"{qh.shape[1]} query heads over {kh.shape[1]} key/value heads")
    sq, sk = qh.shape[2], kh.shape[2]
    causal = bool(c.attrs.get("is_causal", 0))
    args = [qh.var, kh.var, vh.var]
    if mask is not None:
        if mask.dtype not in ("bool", q.dtype):
            c.fail(f"attn_mask of dtype {mask.dtype}")
        if mask.shape[-1:] != (sk,):
            c.fail(f"attn_mask of shape {list(mask.shape)}: its last dim must be the {sk} keys")
        _broadcast(c.fail, mask.dims, qh.dims[:2] + (Dim(sq), Dim(sk)))
    if causal and sk - sq != past_len:
        # ONNX lets query i see keys j <= i + past; sdpa's causal aligns at the keys' end instead,
        # so the causal part becomes a constant mask (combined with attn_mask where there is one)
        causal = False
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + past_len
        if mask is None or mask.dtype == "bool":
            extra = c.imp.const_value(allowed)
        else:
            extra = c.imp.const_value(np.where(allowed, 0, -np.inf).astype(_NUMPY_DTYPES[mask.dtype]))
        if mask is None:
            mask_name = c.imp.new_constant(extra.const, f"{out}_causal", f"{c.label}'s causal mask (ONNX alignment)")
        else:
            both = _broadcast(c.fail, mask.dims, extra.dims)
            m = _expanded(c, mask, 3, both, f"{out}_mask")
            e = c.imp.new_constant(np.broadcast_to(extra.const, tuple(d.size for d in both)), f"{out}_causal",
                                   f"{c.label}'s causal mask (ONNX alignment)")
            mask_name = c.emit("and" if mask.dtype == "bool" else "add", [m, e], {}, mask.dtype, both,
                               temp=f"{out}_mask_causal").var
        args.append(mask_name)
    elif mask is not None:
        args.append(c.var(mask, 3))
    dims = qh.dims[:3] + (vh.dims[3],)
    settings = {"scale": float(c.attrs["scale"]) if "scale" in c.attrs else None, "causal": causal or None}
    if rank == 4:
        c.emit("sdpa", args, settings, q.dtype, dims, out=out)
        return
    y = c.emit("sdpa", args, settings, q.dtype, dims, temp=f"{out}_heads")
    t = c.emit("transpose", [y.var], {"perm": [0, 2, 1, 3]}, q.dtype, (dims[0], dims[2], dims[1], dims[3]),
               temp=f"{out}_t")
    c.emit("reshape", [t.var], {}, q.dtype, (dims[0], dims[2], Dim(dims[1].size * dims[3].size)), out=out)


# ---------------------------------------------------------------------------------------------
# activations the registry has no op for, written with the ops it has


def _scalar(c: _NodeContext, value: float, dtype: str, base: str, note: str) -> str:
    return c.imp.new_constant(np.asarray(value, _NUMPY_DTYPES[dtype]), base, note)


@_op("LeakyRelu", note="relu(x) - alpha * relu(-x) (float dtypes)")
@_op("PRelu", note="relu(x) - slope * relu(-x), slope broadcast (float dtypes)")
def _leaky_relu(c: _NodeContext) -> None:
    is_prelu = c.node.op_type == "PRelu"
    c.allow(*(() if is_prelu else ("alpha",)))
    x, slope = c.inputs(2, 2) if is_prelu else (c.inputs(1, 1)[0], None)
    (out,) = c.outputs()
    c.float_input(x)
    if is_prelu:
        if c.opset < 7 and len(slope.dims) == 1 and slope.shape[0] > 1 and len(x.dims) > 2:
            slope = _aligned_at(c, slope, 1, len(x.dims), 1)     # opset 6: a 1-D slope is per channel
        if slope.dtype != x.dtype or _broadcast(c.fail, x.dims, slope.dims) != x.dims:
            c.fail(f"slope of {slope.dtype}{list(slope.shape)} does not broadcast to X's {x.dtype}{list(x.shape)}")
        factor = c.var(slope, 1)
    else:
        factor = _scalar(c, float(c.attrs.get("alpha", 0.01)), x.dtype, f"{out}_alpha", "LeakyRelu alpha")
    name = c.var(x, 0)
    negative = c.emit("neg", [name], {}, x.dtype, x.dims, temp=f"{out}_neg")
    c.emit_inplace("relu", [negative.var], negative)
    c.emit_inplace("mul", [negative.var, factor], negative)
    y = c.emit("relu", [name], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("sub", [y.var, negative.var], y)


@_op("HardSigmoid", note="clamp(alpha * x + beta, 0, 1) (float dtypes)")
@_op("HardSwish", note="x * clamp(x / 6 + 0.5, 0, 1) (float dtypes)")
def _hard_sigmoid(c: _NodeContext) -> None:
    swish = c.node.op_type == "HardSwish"
    c.allow(*(() if swish else ("alpha", "beta")))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    alpha = 1 / 6 if swish else float(c.attrs.get("alpha", 0.2))
    beta = 0.5 if swish else float(c.attrs.get("beta", 0.5))
    a = _scalar(c, alpha, x.dtype, f"{out}_alpha", f"{c.node.op_type} alpha")
    b = _scalar(c, beta, x.dtype, f"{out}_beta", f"{c.node.op_type} beta")
    name = c.var(x, 0)
    h = c.emit("mul", [name, a], {}, x.dtype, x.dims, **({"temp": f"{out}_gate"} if swish else {"out": out}))
    c.emit_inplace("add", [h.var, b], h)
    c.imp.lines.append((f"op clamp({h.var}, min=0.0, max=1.0) >> {h.var};", f"{c.label} ({c.node.op_type})"))
    if swish:
        c.emit("mul", [name, h.var], {}, x.dtype, x.dims, out=out)


@_op("Softsign", note="x / (1 + |x|) (float dtypes)")
def _softsign(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    name = c.var(x, 0)
    one = _scalar(c, 1.0, x.dtype, f"{out}_one", "1")
    d = c.emit("abs", [name], {}, x.dtype, x.dims, temp=f"{out}_denominator")
    c.emit_inplace("add", [d.var, one], d)
    c.emit("div", [name, d.var], {}, x.dtype, x.dims, out=out)


@_op("Elu", note="relu(x) + alpha * (exp(min(x, 0)) - 1), min(x, 0) as -relu(-x) (float dtypes)")
@_op("Celu", note="relu(x) + alpha * (exp(min(x, 0) / alpha) - 1) (float dtypes)")
@_op("Selu", note="gamma * (relu(x) + alpha * exp(min(x, 0)) - alpha) (float dtypes)")
def _elu(c: _NodeContext) -> None:
    op_type = c.node.op_type
    c.allow("alpha", *(("gamma",) if op_type == "Selu" else ()))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    default_alpha = {"Elu": 1.0, "Celu": 1.0, "Selu": 1.67326319217681884765625}[op_type]
    alpha = float(c.attrs.get("alpha", default_alpha))
    if op_type == "Celu" and alpha == 0.0:
        c.fail("alpha 0")
    name = c.var(x, 0)
    a = _scalar(c, alpha, x.dtype, f"{out}_alpha", f"{op_type} alpha")
    one = _scalar(c, 1.0, x.dtype, f"{out}_one", "1")
    m = c.emit("neg", [name], {}, x.dtype, x.dims, temp=f"{out}_negative_part")
    c.emit_inplace("relu", [m.var], m)
    c.emit_inplace("neg", [m.var], m)                       # min(x, 0)
    if op_type == "Celu":
        c.emit_inplace("div", [m.var, a], m)
    c.emit_inplace("exp", [m.var], m)
    c.emit_inplace("sub", [m.var, one], m)
    c.emit_inplace("mul", [m.var, a], m)
    y = c.emit("relu", [name], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, m.var], y)
    if op_type == "Selu":
        gamma = _scalar(c, float(c.attrs.get("gamma", 1.05070102214813232421875)), x.dtype, f"{out}_gamma",
                        "Selu gamma")
        c.emit_inplace("mul", [y.var, gamma], y)


@_op("Softplus", note="log(exp(x) + 1) (float dtypes)")
def _softplus(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    one = _scalar(c, 1.0, x.dtype, f"{out}_one", "1")
    y = c.emit("exp", [c.var(x, 0)], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, one], y)
    c.emit_inplace("log", [y.var], y)


# ---------------------------------------------------------------------------------------------
# index and position computations of exported transformers (their mask and RoPE subgraphs),
# folded on constants


@_op("Cos", "Sin", note="folded on constants (RoPE tables); the registry has no cos/sin op")
def _trig(c: _NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    values = c.const_input(x, "the input (cos/sin are folded only)")
    fold = np.cos if c.node.op_type == "Cos" else np.sin
    c.result(out, c.imp.const_value(fold(values.astype(np.float64)).astype(values.dtype)))


@_op("CumSum", note="folded on constants (exclusive, reverse); axis constant")
def _cumsum(c: _NodeContext) -> None:
    c.allow("exclusive", "reverse")
    x, axis_in = c.inputs(2, 2)
    (out,) = c.outputs()
    values = c.const_input(x, "the input (CumSum is folded only)")
    axis = int(c.const_input(axis_in, "axis").reshape(-1)[0])
    if not -values.ndim <= axis < max(values.ndim, 1):
        c.fail(f"axis {axis} out of range for rank {values.ndim}")
    a = np.flip(values, axis) if c.attrs.get("reverse", 0) else values
    s = np.cumsum(a, axis=axis, dtype=values.dtype)
    if c.attrs.get("exclusive", 0):
        s = s - a
    c.result(out, c.imp.const_value((np.flip(s, axis) if c.attrs.get("reverse", 0) else s).astype(values.dtype)))


@_op("GatherElements", note="folded on constants (NumPy take_along_axis)")
def _gather_elements(c: _NodeContext) -> None:
    c.allow("axis")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    values = c.const_input(data, "the data (GatherElements is folded only)")
    idx = c.const_input(indices, "the indices (GatherElements is folded only)").astype(np.int64)
    rank = values.ndim
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or idx.ndim != rank or not -rank <= axis < rank:
        c.fail(f"axis {axis} and indices of rank {idx.ndim} for data of rank {rank}")
    n = values.shape[axis]
    if np.any((idx < -n) | (idx >= n)):
        c.fail(f"an index out of [-{n}, {n})")
    c.result(out, c.imp.const_value(np.take_along_axis(values, np.where(idx < 0, idx + n, idx), axis=axis)))


@_op("GatherND", note="folded on constants; with constant indices a reshape of the data and one gather "
                      "of the flattened rows")
def _gather_nd(c: _NodeContext) -> None:
    c.allow("batch_dims")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    idx = c.const_input(indices, "the indices").astype(np.int64)
    b = int(c.attrs.get("batch_dims", 0))
    r, q = len(data.dims), idx.ndim
    k = idx.shape[-1] if q else 0
    if q < 1 or b < 0 or b >= min(r, q) or not 1 <= k <= r - b or idx.shape[:b] != data.shape[:b]:
        c.fail(f"indices of shape {list(idx.shape)} (batch_dims {b}) for data of shape {list(data.shape)}")
    lead = data.shape[b:b + k]
    if np.any((idx < -np.asarray(lead)) | (idx >= np.asarray(lead))):
        c.fail(f"an index out of the data's dims {list(lead)}")
    idx = np.where(idx < 0, idx + np.asarray(lead), idx)
    # each index tuple as one row of the data viewed as [prod(batch dims + indexed dims), rest...]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    rows = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), lead) if k else np.zeros(idx.shape[:-1], np.int64)
    rows = rows.reshape(batch, -1) + (np.arange(batch) * int(np.prod(lead, dtype=np.int64)))[:, None]
    rows = rows.reshape(idx.shape[:-1])
    rest = data.dims[b + k:]
    dims = data.dims[:b] + indices.dims[b:-1] + rest
    if data.const is not None:
        flat = data.const.reshape((-1,) + data.const.shape[b + k:])
        c.result(out, c.imp.const_value(np.take(flat, rows, axis=0)))
        return
    flat_dims = (Dim(batch * int(np.prod(lead, dtype=np.int64))),) + rest
    flat = c.emit("reshape", [c.var(data, 0)], {}, data.dtype, flat_dims, temp=f"{out}_rows")
    rows_name = c.imp.new_constant(rows, f"{out}_indices", f"{c.label}'s index tuples as rows of {flat.var}")
    c.emit("gather", [flat.var, rows_name], {}, data.dtype, dims, out=out)


# ops registered in modules of their own (by importing them): Mod, LRN; the quantised ops, and the
# MatMul lowering onto dequant_matmul; the fused patterns of exported models
from . import arithmetic, lrn  # noqa: E402,F401
from .fusions import Fusion, apply_fusion, bool_mask_where, find_fusions  # noqa: E402
from .quant import packed_initializer, quantized_matmul  # noqa: E402
