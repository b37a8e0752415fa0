"""A `.tflite` flatbuffer read into plain records: its tensors (name, dtype, shape, quantization,
constant data) and its operators (builtin name, inputs, outputs, options as a dict), through the
`tflite` package's generated accessors (the schema's flatc output; no TensorFlow needed).

Only what the importer uses is read; anything it cannot represent is an error naming the tensor or
the operator, and a file that is not a TFLite flatbuffer is refused before any accessor runs on it
(the accessors index the buffer without bounds checks)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import TfliteImportError

#: TFLite TensorType -> (OpenInfer dtype, NumPy dtype of its buffer)
TENSOR_TYPES = {"FLOAT32": ("f32", "<f4"), "INT8": ("i8", "i1"), "INT32": ("i32", "<i4"), "UINT8": ("u8", "u1"),
                "INT16": ("i16", "<i2"), "INT64": ("i64", "<i8"), "BOOL": ("bool", "?"), "FLOAT16": ("f16", "<f2")}


@dataclass
class Tensor:
    index: int
    name: str
    dtype: str                       # OpenInfer dtype name
    shape: tuple[int, ...]
    scale: np.ndarray | None = None  # f32 [1] or per channel
    zero: np.ndarray | None = None   # int64, as scale
    quantized_dimension: int = 0
    data: np.ndarray | None = None   # a constant's contents, in `shape`
    is_variable: bool = False

    @property
    def quantized(self) -> bool:
        return self.scale is not None and self.scale.size > 0

    def qparams(self) -> tuple[float, int]:
        """(scale, zero point) of a per-tensor quantized tensor."""
        return float(self.scale[0]), int(self.zero[0]) if self.zero is not None and self.zero.size else 0


@dataclass
class Operator:
    index: int
    op: str                          # BuiltinOperator name ("CONV_2D") or "CUSTOM:<code>"
    inputs: tuple[int, ...]          # tensor indices; -1: an optional input left out
    outputs: tuple[int, ...]
    options: dict = field(default_factory=dict)
    version: int = 1


@dataclass
class TfliteModel:
    version: int
    description: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraphs: int


def _enum_names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def _options(tfl, op) -> dict:
    """The builtin options table of `op` as {field: value}, enums by name (padding "SAME")."""
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return {}
    kind_name = _enum_names(tfl.BuiltinOptions)[kind]
    cls = getattr(tfl, kind_name, None)
    table = op.BuiltinOptions()
    if cls is None or table is None:
        return {}
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    padding, activations = _enum_names(tfl.Padding), _enum_names(tfl.ActivationFunctionType)
    out = {}
    for attr in dir(opts):
        if attr.startswith("_") or attr in ("Init", "GetRootAs") or attr.startswith("GetRootAs") or \
                attr.endswith(("AsNumpy", "Length", "IsNone")) or not attr[0].isupper():
            continue
        try:
            value = getattr(opts, attr)()
        except TypeError:            # vector accessors take an index: read through AsNumpy below
            numpy_accessor = getattr(opts, attr + "AsNumpy", None)
            value = list(np.atleast_1d(numpy_accessor())) if numpy_accessor else None
        if attr == "Padding":
            value = padding.get(value, value)
        elif attr == "FusedActivationFunction":
            value = activations.get(value, value)
        out[attr] = value
    return out


def read_model(data: bytes, where: str) -> TfliteModel:
    """Reads a `.tflite` file's bytes (`where` names it in messages)."""
    try:
        import tflite as tfl
    except ModuleNotFoundError:
        raise TfliteImportError("the `tflite` package is needed to import TFLite models: "
                                "pip install 'openinfer[tflite]'") from None
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise TfliteImportError(f"{where}: not a TFLite model: bytes 4-7 are {data[4:8]!r}, not the "
                                "flatbuffer identifier b'TFL3'")
    root = struct.unpack_from("<I", data, 0)[0]
    if root + 4 > len(data):
        raise TfliteImportError(f"{where}: truncated: the root table offset {root} is past the end "
                                f"({len(data)} bytes)")
    try:
        m = tfl.Model.GetRootAsModel(data, 0)
        return _read(tfl, m, data, where)
    except TfliteImportError:
        raise
    except Exception as exc:         # an offset past the end: struct.error, IndexError
        raise TfliteImportError(f"{where}: a malformed flatbuffer ({type(exc).__name__}: {exc})") from None


def _read(tfl, m, data: bytes, where: str) -> TfliteModel:
    if m.SubgraphsLength() < 1:
        raise TfliteImportError(f"{where}: the model has no subgraph")
    builtin = _enum_names(tfl.BuiltinOperator)
    ttypes = _enum_names(tfl.TensorType)
    g = m.Subgraphs(0)
    tensors = []
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        name = (t.Name() or b"").decode("utf-8", "replace") or f"tensor_{i}"
        tname = ttypes.get(t.Type(), str(t.Type()))
        if tname not in TENSOR_TYPES:
            raise TfliteImportError(f"tensor {i} `{name}`: type {tname} is not supported "
                                    f"(supported: {', '.join(TENSOR_TYPES)})")
        dtype, np_dtype = TENSOR_TYPES[tname]
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        tensor = Tensor(i, name, dtype, shape, is_variable=bool(t.IsVariable()))
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            tensor.scale = q.ScaleAsNumpy().astype(np.float32)
            tensor.zero = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else \
                np.zeros(tensor.scale.shape, np.int64)
            tensor.quantized_dimension = q.QuantizedDimension()
        buf = m.Buffers(t.Buffer()) if t.Buffer() < m.BuffersLength() else None
        if buf is not None:
            raw = _buffer_bytes(buf, data, where, name)
            if raw:
                count = int(np.prod(shape, dtype=np.int64))
                itemsize = np.dtype(np_dtype).itemsize
                if len(raw) != count * itemsize:
                    raise TfliteImportError(f"tensor {i} `{name}`: its buffer holds {len(raw)} bytes, its shape "
                                            f"{list(shape)} of {tname} needs {count * itemsize}")
                tensor.data = np.frombuffer(raw, np_dtype).reshape(shape).astype(np.dtype(np_dtype).newbyteorder("="))
        tensors.append(tensor)
    operators = []
    for k in range(g.OperatorsLength()):
        op = g.Operators(k)
        code = m.OperatorCodes(op.OpcodeIndex())
        value = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = builtin.get(value, f"BUILTIN_{value}")
        if name == "CUSTOM":
            name = f"CUSTOM:{(code.CustomCode() or b'').decode('utf-8', 'replace')}"
        ins = tuple(int(x) for x in op.InputsAsNumpy()) if op.InputsLength() else ()
        outs = tuple(int(x) for x in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        for x in (*ins, *outs):
            if x >= len(tensors) or x < -1:
                raise TfliteImportError(f"operator {k} ({name}): tensor index {x} out of range "
                                        f"(the subgraph has {len(tensors)})")
        operators.append(Operator(k, name, ins, outs, _options(tfl, op), code.Version()))
    description = (m.Description() or b"").decode("utf-8", "replace")
    return TfliteModel(m.Version(), description, tensors, operators,
                       tuple(int(x) for x in g.InputsAsNumpy()) if g.InputsLength() else (),
                       tuple(int(x) for x in g.OutputsAsNumpy()) if g.OutputsLength() else (),
                       m.SubgraphsLength())


def _buffer_bytes(buf, data: bytes, where: str, name: str) -> bytes:
    """A buffer's bytes: inline (`data`), or at `offset`/`size` in the file (models over 2 GB)."""
    if buf.DataLength():
        return buf.DataAsNumpy().tobytes()
    offset, size = buf.Offset(), buf.Size()
    if offset > 1 and size:
        if offset + size > len(data):
            raise TfliteImportError(f"{where}: tensor `{name}`'s buffer at bytes {offset}..{offset + size} is past "
                                    f"the end of the file ({len(data)} bytes)")
        return data[offset:offset + size]
    return b""
