"""What the ONNX op handlers (openinfer/onnx/handlers/) work with, and the import state they write into.

- values: `Dim` (a size, written as a sizevar where the model's dim is symbolic) and `Value` (an ONNX
  value: a DSL variable, a constant known at import, or both), and the dtype tables between ONNX, the
  DSL and NumPy;
- the registry: `handler("OpType", note=...)` registers a handler in `SUPPORTED_OPS`, the one table
  of what is imported (`openinfer import --list-ops` prints it);
- `ImportState`: the model being imported and the DSL being written (ONNX values, DSL names,
  declarations, op lines, tensors); the driver in openinfer/onnx/importer.py walks the graph with it;
- `NodeContext`: the node a handler imports (its inputs and attributes, a failure naming the node)
  and the helpers that emit DSL ops;
- helpers several op families share: broadcasting, matmul shapes, operands broadcast to a shape,
  scalar constants.

Of openinfer/onnx/ it imports only problems.py, so the driver, the handlers and the fusions can all
import it without a cycle.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..dims import Poly, SizeVar
from ..errors import OnnxImportError
from ..imported import is_identifier, quoted, sanitize  # noqa: F401  (the importer and handlers import them from here)
from .problems import shape_problem

#: ONNX TensorProto element types -> DSL dtypes (the ones both sides have).
ONNX_DTYPES = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 9: "bool", 10: "f16",
               11: "f64", 12: "u32", 13: "u64"}
NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
                "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
                "u64": np.uint64, "bool": np.bool_}
FLOATS = ("f16", "f32", "f64")
ONNX_INTS = ("i8", "i16", "i32", "i64")
ONNX_UINTS = ("u8", "u16", "u32", "u64")


@dataclass(frozen=True)
class Dim:
    """A size: its value at the sizevars' import values, and where it depends on them, the
    expression over them (`batch`, `batch * seq`; `openinfer.dims.Poly` over sizevars whose
    `bound` is their import value), so that a shape computed from a symbolic dim stays symbolic
    and `--dynamic` can later move it."""

    size: int
    expr: Poly | None = None

    def __post_init__(self):
        assert self.expr is None or self.expr.evaluate({}) == self.size, (self.expr, self.size)

    def text(self) -> str:
        """The dim as the DSL writes it: an integer, a sizevar, or a product of two atoms (the
        grammar's `atom ["*" atom]`); an expression the DSL cannot write is its import value (the
        importer notes the sizevars such a dim fixes: `ImportState.fixed`)."""
        return dsl_dim(self) or str(self.size)

    @property
    def sizevars(self) -> tuple[str, ...]:
        return tuple(sorted(v.name for v in self.expr.sizevars())) if self.expr is not None else ()


def dsl_dim(d: Dim) -> str | None:
    """`d` in the DSL's dim syntax, None when it has no expression or one the DSL cannot write."""
    if d.expr is None:
        return None
    if len(d.expr.terms) != 1:
        return None
    atoms, coeff = d.expr.terms[0]
    factors = [a.name for a in atoms if isinstance(a, SizeVar)]
    if len(factors) != len(atoms) or coeff < 1:
        return None
    if coeff != 1:
        factors.append(str(coeff))
    return "*".join(factors) if len(factors) <= 2 else None


def dim_of(size: int, expr: Poly | None) -> Dim:
    """A Dim, static when `expr` has no sizevar left."""
    return Dim(size, None if expr is None or expr.constant is not None else expr)


def _expr(d: Dim) -> Poly:
    return d.expr if d.expr is not None else Poly.const(d.size)


def dim_product(dims) -> Dim:
    """The product of `dims` (an element count), symbolic where any is."""
    size, expr = 1, Poly.const(1)
    for d in dims:
        size, expr = size * d.size, expr * _expr(d)
    return dim_of(size, expr)


def dim_sum(dims) -> Dim:
    size, expr = 0, Poly.const(0)
    for d in dims:
        size, expr = size + d.size, expr + _expr(d)
    return dim_of(size, expr)


def dim_difference(a: Dim, b: Dim) -> Dim:
    return dim_of(a.size - b.size, _expr(a) + _expr(b).scale(-1))


def dim_quotient(a: Dim, b: Dim) -> Dim:
    """a / b where it divides exactly (a Reshape's -1: the elements over the other dims): each
    term of a's expression divided by b's single term; a static quotient where that is not exact."""
    size = a.size // b.size if b.size else 0
    if a.expr is None and b.expr is None:
        return Dim(size)
    num, den = _expr(a), _expr(b)
    if len(den.terms) == 1 and den.terms[0][1] != 0:
        den_atoms, den_coeff = den.terms[0]
        acc: dict = {}
        for atoms, coeff in num.terms:
            rest = list(atoms)
            for atom in den_atoms:
                if atom not in rest:
                    break
                rest.remove(atom)
            else:
                if coeff % den_coeff == 0:
                    acc[tuple(rest)] = acc.get(tuple(rest), 0) + coeff // den_coeff
                    continue
            return Dim(size)
        quotient = Poly.make(acc)
        if quotient.evaluate({}) == size:
            return dim_of(size, quotient)
    return Dim(size)


def element_dims(v: Value) -> tuple[Dim, ...]:
    """The elements of a 1-d integer constant as dims: those computed from shapes keep their
    expressions (`Value.elements`), the others are static."""
    return v.elements if v.elements is not None else dims_of(v.const.reshape(-1))


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
    #: a constant whose contents depend on the sizevars' values (computed from a symbolic shape):
    #: `ImportState.tensor` must not store it as it is (see `materialize`)
    sized: bool = False
    #: for a sized constant that is the first rows of a constant that does not depend on them:
    #: (that constant, the axis along which this one is its first `dims[axis]` rows); the
    #: constant itself may be None: the naturals 0, 1, 2, ... (a Range from 0 by 1)
    prefix: tuple[np.ndarray | None, int] | None = None
    #: a sized constant computed from a decode step's past length, which changes every step:
    #: folded only as shape arithmetic, else computed at run time (openinfer/onnx/decoder.py)
    runtime: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)


def dims_of(shape) -> tuple[Dim, ...]:
    return tuple(Dim(int(s)) for s in shape)


def with_elements(v: Value, elements: tuple[Dim, ...] | None) -> Value:
    """`v` noting the dims its elements are (see Value.elements), where they still are those dims."""
    if elements is not None and v.const is not None and [d.size for d in elements] == v.const.reshape(-1).tolist():
        v.elements = tuple(elements)
        v.sized = v.sized or any(d.expr is not None for d in elements)
    return v


def data_mismatch(tensor, exc: ValueError) -> str:
    return f"its data does not fill its dims {list(tensor.dims)} ({exc})"


def _float_literal(x: float) -> str:
    if math.isnan(x):
        raise ValueError("NaN has no DSL literal")
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def setting_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(int(v)) for v in value) + "]"
    if isinstance(value, float):
        return _float_literal(value)
    return str(value)


def broadcast(node_fail, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    n = max(len(a), len(b))
    a = (Dim(1),) * (n - len(a)) + a
    b = (Dim(1),) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x.size != y.size and 1 not in (x.size, y.size):
            node_fail(f"shapes {[d.size for d in a]} and {[d.size for d in b]} do not broadcast")
        big = [d for d in (x, y) if d.size == max(x.size, y.size)]
        out.append(next((d for d in big if d.expr is not None), big[0]))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# the supported ops: ONNX op type -> (handler, what is supported); filled by the
# @handler decorators of openinfer/onnx/handlers/


@dataclass(frozen=True)
class OpSupport:
    handler: Callable
    note: str


SUPPORTED_OPS: dict[str, OpSupport] = {}

#: Inputs (by position) the importer needs as constants: exported models hold them as initializers.
CONSTANT_INPUTS = {"Reshape": (1,), "Clip": (1, 2), "BatchNormalization": (1, 2, 3, 4), "Dropout": (1, 2),
                   "Unsqueeze": (1,), "Squeeze": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4),
                   "ReduceMean": (1,), "ReduceSum": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
                   "ReduceProd": (1,), "ReduceSumSquare": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
                   "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
                   "Split": (1,), "Trilu": (1,), "DequantizeLinear": (1, 2), "QuantizeLinear": (1, 2),
                   "MatMulInteger": (3,), "CumSum": (1,), "TopK": (1,), "RNN": (1, 2, 3, 4), "GRU": (1, 2, 3, 4),
                   "LSTM": (1, 2, 3, 4, 7),
                   "Pad": (1, 2, 3), "Resize": (1, 2, 3), "Upsample": (1,), "NonMaxSuppression": (2, 3, 4)}


def handler(*op_types: str, note: str):
    """Registers a handler for `op_types`; `note` (what each becomes, and its limits) may name the
    ONNX op as {op} and its DSL op as {dsl}."""
    def register(fn):
        for t in op_types:
            SUPPORTED_OPS[t] = OpSupport(fn, note.format(op=t, dsl=DSL_OPS.get(t, "")))
        return fn
    return register


DSL_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Relu": "relu", "Sigmoid": "sigmoid",
           "Tanh": "tanh", "MaxPool": "max_pool2d", "AveragePool": "avg_pool2d", "Sqrt": "sqrt", "Exp": "exp",
           "Log": "log", "Erf": "erf", "Neg": "neg", "Abs": "abs", "Reciprocal": "recip", "Equal": "eq",
           "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge", "ReduceMean": "mean_axis",
           "ReduceSum": "sum_axis", "ReduceMax": "max_axis", "ReduceMin": "min_axis", "ReduceProd": "prod_axis",
           "Softmax": "softmax", "LogSoftmax": "log_softmax", "And": "and", "Or": "or", "Xor": "xor", "Not": "not",
           "Max": "max", "Min": "min", "ArgMax": "argmax_axis", "ArgMin": "argmin_axis", "Floor": "floor",
           "Ceil": "ceil", "Sign": "sign", "IsNaN": "is_nan", "Sum": "add", "Sin": "sin", "Cos": "cos", "Tan": "tan",
           "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "LeakyRelu": "leaky_relu",
           "HardSigmoid": "hard_sigmoid", "HardSwish": "hard_swish", "Softsign": "softsign", "Softplus": "softplus",
           "Elu": "elu", "Selu": "selu", "Celu": "celu", "Mish": "mish"}


# ---------------------------------------------------------------------------------------------
# the import's state, and the node a handler imports


@dataclass
class Fusion:
    """A fused pattern found on the graph's structure (openinfer/onnx/fusions.py)."""

    kind: str
    final: int                      # the node whose output the fused op computes
    inner: list[int]                # the nodes it replaces, deferred to `final`
    apply: Callable                 # (import state, fusion) -> True when it emitted the fused op
    parts: dict = field(default_factory=dict)


class ImportState:
    """The model being imported and the DSL being written: every ONNX value met so far, the DSL
    names chosen, the declarations and op lines, the tensors of the `.oinf`, and what handlers and
    fusions leave for later nodes. The driver (openinfer/onnx/importer.py) fills it node by node;
    a handler reaches it as `NodeContext.imp`."""

    def __init__(self, model, name: str, sizevars: dict[str, int], source_name: str, streaming: bool = False,
                 cache_capacity: int | None = None):
        self.model = model
        #: recurrent layers run one time step per engine step, their state persistent (handlers/recurrent.py)
        self.streaming = streaming
        #: a decode step's cache capacity in tokens (openinfer/onnx/decoder.py), None for other models
        self.cache_capacity = cache_capacity
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
        self.decls: dict[str, list[tuple[str, str]]] = {"dynamic": [], "constant": [], "volatile": [],
                                                         "persistent": []}
        self.lines: list[tuple[str, str]] = []
        #: the blocks after entry (name, lines): the branches of an If whose condition is known at
        #: run time (handlers/control.py)
        self.blocks: list[tuple[str, list[tuple[str, str]]]] = []
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
        #: value name -> a weight dequant_matmul takes as stored (quantized_weights.QuantizedWeight)
        self.quantized: dict = {}
        self.packed: dict[str, str] = {}   # int4/uint4 initializer -> "i4"/"u4" (held as int8/uint8 values)
        #: sizevar -> the first constant that holds values for its import value only (`_sized_constant`)
        self.fixed: dict[str, str] = {}
        #: a decode step's past inputs (ONNX names) that became cache tables (openinfer/onnx/decoder.py)
        self.past_inputs: set[str] = set()
        #: dynamic sizes a cache read sets while a step runs (the rows NonMaxSuppression selects) -> their bounds
        self.run_time_sizes: dict[str, int] = {}

    # -- names and declarations ---------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, n = base, 2
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name

    def dsl_name(self, onnx_name: str) -> str:
        """The DSL name of an ONNX value, chosen once."""
        if onnx_name not in self.onnx_to_dsl:
            self.onnx_to_dsl[onnx_name] = self.fresh(sanitize(onnx_name))
        return self.onnx_to_dsl[onnx_name]

    def declare(self, kind: str, var: str, dtype: str, dims: tuple[Dim, ...], onnx_name: str | None) -> None:
        shape = f"[{', '.join(d.text() for d in dims)}]" if dims else ""
        note = f'ONNX {quoted(onnx_name)}' if onnx_name is not None and onnx_name != var else ""
        self.decls[kind].append((f"{var}: {dtype}{shape};", note))

    def tensor(self, v: Value, onnx_name: str) -> str:
        """The variable holding `v`, declaring a constant known at import on first use."""
        if v.var is None:
            v.var = self.dsl_name(onnx_name)
            note = f'ONNX {quoted(onnx_name)}' if onnx_name != v.var else ""
            if v.sized:
                self._sized_constant(v, note)
            else:
                self._constant(v, note)
        return v.var

    def _sized_constant(self, v: Value, note: str) -> None:
        """Declares a constant computed from symbolic shapes so that the stored tensor holds for
        every value of the sizevars, not only their import values:

        - the first `seq` rows of a constant that does not depend on them (position embeddings
          gathered by a Range): that constant whole, declared with `seq` rows (a model tensor's
          first dim may be dynamic: its first rows are used), leading 1-dims dropped (its users
          broadcast);
        - the same value all along each symbolic dim (token-type embeddings of all-zero ids, an
          always-true mask): stored once along them (1-dims; its users broadcast);
        - otherwise it is stored at the import sizes and the sizevars it depends on are fixed
          (`fixed`): the graph header names them, and `--dynamic` on one of them fails at the
          first op that uses the constant (a static dim meeting a run-time one)."""
        if v.prefix is not None and v.prefix[0] is not None:
            source, axis = v.prefix
            d = v.dims[axis]
            if all(n == 1 for n in source.shape[:axis]) and dsl_dim(d) and \
                    all(x.expr is None for x in v.dims[axis + 1:]):
                rest = ", ".join(x.text() for x in v.dims[axis + 1:])
                self.decls["constant"].append((f"{v.var}: {v.dtype}[{dsl_dim(d)}{', ' if rest else ''}{rest}];",
                                               note or f"the first {d.text()} rows of a constant"))
                self.tensors[v.var] = np.ascontiguousarray(source.reshape(source.shape[axis:]))
                return
        flat = v.const.reshape(-1)
        if v.dims and flat.size and any(d.expr is not None for d in v.dims) and \
                np.array_equal(flat, np.broadcast_to(flat[:1], flat.shape), equal_nan=flat.dtype.kind == "f"):
            value = flat[0].item()       # one value throughout: filled at run time, at the run-time size
            if v.dtype not in FLOATS or math.isfinite(value):
                literal = ("true" if value else "false") if v.dtype == "bool" else (
                    _float_literal(value) if v.dtype in FLOATS else str(int(value)))
                self.declare("volatile", v.var, v.dtype, v.dims, None)
                self.lines.append((f"op fill({v.var}, value={literal}) >> {v.var};",
                                   note or f"{literal} throughout, at the run-time size"))
                return
        array, dims = v.const, list(v.dims)
        for k, d in enumerate(v.dims):
            if d.expr is None or array.shape[k] == 0:
                continue
            first = np.take(array, [0], axis=k)
            if not np.array_equal(array, np.broadcast_to(first, array.shape), equal_nan=array.dtype.kind == "f"):
                break
            array, dims[k] = first, Dim(1)
        else:
            if array is not v.const:
                self._constant(Value(v.dtype, tuple(dims), var=v.var, const=np.ascontiguousarray(array)),
                               note or "the same along its run-time dims")
                return
        # the sizevars it depends on: those of its dims or elements; a value computed from sizes
        # some other way (a scalar from a Shape through arithmetic) may depend on any
        depends = {sv for d in (*v.dims, *(v.elements or ())) for sv in d.sizevars} or set(self.sizevars)
        for sv in sorted(depends):
            self.fixed.setdefault(sv, v.var)
        self._constant(Value(v.dtype, dims_of(v.shape), var=v.var, const=v.const), note)

    def new_constant(self, array: np.ndarray, base: str, note: str) -> str:
        """Declares a constant computed at import (a transposed or folded weight) under a new name."""
        v = self.const_value(np.ascontiguousarray(array))
        v.var = self.fresh(sanitize(base))
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
        elif v.dtype in FLOATS:
            if not math.isfinite(x):    # @init takes finite literals only
                raise OnnxImportError(f"scalar constant `{v.var}` is {x}, which @init cannot hold")
            literal = _float_literal(x)
        else:
            literal = str(int(x))
        self.decls["constant"].append((f"{v.var}: {v.dtype} @init({literal});", note))

    def const_value(self, array: np.ndarray) -> Value:
        array = np.asarray(array)
        dtype = next((k for k, t in NUMPY_DTYPES.items() if array.dtype == t), None)
        if dtype is None:
            raise OnnxImportError(f"constant of dtype {array.dtype} is not supported")
        return Value(dtype, dims_of(array.shape), const=array)

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
        return dim_of(self.sizevars[sv], Poly.atom(SizeVar(sv, self.sizevars[sv])))


def module_path(node) -> str | None:
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


#: a value name the dynamo exporter generates (`val_60`: a folded constant such as a Linear's
#: transposed weight), which says nothing about what the value is
_GENERATED_NAME = re.compile(r"val_\d+")


class NodeContext:
    """One ONNX node being imported: its inputs and attributes, and helpers to emit DSL ops."""

    def __init__(self, imp: ImportState, node, attrs: dict, ins: list, fail, label: str):
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
        if v.dtype not in FLOATS:
            self.fail(f"dtype {v.dtype} is not supported here (float dtypes only)")

    def const_input(self, v: Value | None, what: str) -> np.ndarray | None:
        if v is None:
            return None
        if v.const is None:
            self.fail(f"{what} must be a constant (an initializer or a folded Constant)")
        return v.const

    def axes(self, v: Value | None, rank: int, what: str = "axes") -> list[int] | None:
        """`axes` from the attribute (older opsets) or the constant input, normalised; None when absent."""
        if v is not None:
            raw = [int(a) for a in self.const_input(v, f"the {what} input").reshape(-1)]
        elif "axes" in self.attrs:
            raw = [int(a) for a in self.attrs["axes"]]
        else:
            return None
        if any(not -rank <= a < rank for a in raw):
            self.fail(f"{what} {raw} out of range for rank {rank}")
        axes = [a % rank for a in raw]
        if len(set(axes)) != len(axes):
            self.fail(f"{what} {raw} repeat an axis")
        return axes

    def var(self, v: Value, position: int) -> str:
        name = self.node.input[position]
        if name in self.imp.past_inputs:
            self.fail(f"reads the past key/values `{name}` other than by the Concat that appends to them: "
                      "a decode step with a cache reads them only there")
        if v.var is None and name not in self.imp.onnx_to_dsl and _GENERATED_NAME.fullmatch(name):
            path = module_path(self.node)
            scopes = path.strip("/").split("/") if path and path != self.node.name else []
            if len(scopes) >= 2:                     # dynamo's `val_60`: named after its user's module
                module, op = ".".join(scopes[:-1]), scopes[-1]
                linear_weight = self.node.op_type in ("MatMul", "Gemm") and position == 1 and op.startswith("linear")
                self.imp.onnx_to_dsl[name] = self.imp.fresh(
                    sanitize(f"{module}_{'weight_T' if linear_weight else f'{op}_in{position}'}"))
        return self.imp.tensor(v, name)

    def result(self, onnx_name: str, value: Value) -> Value:
        self.imp.values[onnx_name] = value
        return value

    def folded(self, onnx_name: str, array: np.ndarray, dims: tuple[Dim, ...] | None = None, *,
               elements: tuple[Dim, ...] | None = None, prefix=None) -> Value:
        """Registers a constant computed at import. `dims`, where given, are its dims with their
        expressions (a constant computed from a symbolic shape: a Range to `seq`, zeros of
        [batch, seq]); `elements` and `prefix` as in `Value`."""
        v = self.imp.const_value(np.require(array, requirements="C"))     # (ascontiguousarray makes 0-d 1-d)
        if dims is not None and tuple(d.size for d in dims) == v.shape:
            v.dims = tuple(dims)
        v.prefix = prefix
        return self.result(onnx_name, with_elements(v, elements))

    def emit(self, op: str, args: list[str], settings: dict, dtype: str, dims: tuple[Dim, ...], *,
             out: str | None = None, temp: str | None = None, note: str | None = None) -> Value:
        """Emits `op op(args, settings) >> var` into a new volatile variable: the ONNX value `out`'s
        (registered as it), or a temporary named after `temp`."""
        imp = self.imp
        problem = shape_problem([d.size for d in dims], dtype, imp.sizevars)
        if problem:
            self.fail(problem)
        var = imp.dsl_name(out) if out is not None else imp.fresh(sanitize(temp))
        imp.declare("volatile", var, dtype, dims, out)
        written = ", ".join(args + [f"{k}={setting_text(v)}" for k, v in settings.items() if v is not None])
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
# helpers of several op families


def aligned_at(c: NodeContext, v: Value, position: int, rank: int, axis: int) -> Value:
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
                                  f"ONNX {quoted(onnx_name)} at axis {axis} (legacy broadcast)")
        return Value(v.dtype, dims, var=name, const=array)
    return c.emit("reshape", [c.var(v, position)], {}, v.dtype, dims, temp=f"{onnx_name}_at_axis{axis}")


def matmul_dims(c: NodeContext, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    if not a or not b:
        c.fail("scalar operands are not supported")
    av, bv = len(a) == 1, len(b) == 1
    a2 = ((Dim(1),) + a) if av else a
    b2 = (b + (Dim(1),)) if bv else b
    if a2[-1].size != b2[-2].size:
        c.fail(f"inner dims differ: {[d.size for d in a]} @ {[d.size for d in b]}")
    batch = broadcast(c.fail, a2[:-2], b2[:-2])
    return batch + (() if av else (a2[-2],)) + (() if bv else (b2[-1],))


def expanded(c: NodeContext, v: Value, position: int | None, dims: tuple[Dim, ...], base: str) -> str:
    """The variable holding `v` broadcast to `dims`: `v` itself at that shape, a constant broadcast
    at import, else `add(v, zeros)` (add broadcasts; for bool it is OR, so false is its zero)."""
    shape = tuple(d.size for d in dims)
    if v.shape == shape:
        return c.var(v, position) if position is not None else v.var
    if v.const is not None:
        return c.imp.new_constant(np.broadcast_to(v.const, shape), f"{base}_expanded",
                                  f"{c.label} input broadcast to {list(shape)} at import")
    zeros = zeros_of(c, dims, v.dtype, base)
    name = c.var(v, position) if position is not None else v.var
    return c.emit("add", [name, zeros], {}, v.dtype, dims, temp=f"{base}_expanded").var


def zeros_of(c: NodeContext, dims: tuple[Dim, ...], dtype: str, base: str) -> str:
    """Zeros of `dims` for the add that broadcasts an operand: a constant where the dims are
    static, else filled at run time (a constant would hold the import size's elements)."""
    if all(d.expr is None for d in dims):
        shape = [d.size for d in dims]
        return c.imp.new_constant(np.zeros(shape, NUMPY_DTYPES[dtype]), f"{base}_zeros",
                                  f"zeros of {shape}: the add that broadcasts {c.label}'s input")
    var = c.imp.fresh(sanitize(f"{base}_zeros"))
    zero = "false" if dtype == "bool" else ("0.0" if dtype in FLOATS else "0")
    c.imp.declare("volatile", var, dtype, dims, None)
    c.imp.lines.append((f"op fill({var}, value={zero}) >> {var};", f"{c.label}'s zeros, of a run-time size"))
    return var


def scalar_constant(c: NodeContext, value: float, dtype: str, base: str, note: str) -> str:
    return c.imp.new_constant(np.asarray(value, NUMPY_DTYPES[dtype]), base, note)
