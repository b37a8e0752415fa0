"""Builds small `.tflite` flatbuffers without TensorFlow: a subgraph as a list of tensors and ops.

The TFLite importer's tests need models with known contents, and TensorFlow is too heavy (and too
unstable across versions) a dependency to make them. The `tflite` package is the schema compiled by
flatc for Python: a table is written by `<Table>Start`, one `<Table>Add<Field>` per field and
`<Table>End`, and vectors, strings and sub-tables are written before the table that refers to them
(a flatbuffer is built back to front). `build_model` does that for one subgraph:

    tensors = [Tensor("x", (1, 7, 9, 3), "int8", scale=(0.02,), zero_point=(-3,)), ...]
    ops = [Op("CONV_2D", ("x", "w", "b"), ("y",), {"padding": "SAME", "stride_w": 1, "stride_h": 1})]
    content = build_model(tensors, ops, inputs=("x",), outputs=("y",))

The layout is the TFLite converter's: schema version 3, buffer 0 empty (the buffer of every tensor
without constant data), one buffer per constant, constant data aligned to 16 bytes (the interpreters
read weights in place), operator codes in order of first use with both the 8-bit
`deprecated_builtin_code` (min(code, 127): readers older than the 32-bit field see
PLACEHOLDER_FOR_GREATER_OP_CODES) and `builtin_code`. The bytes depend on the arguments only.

The quantization helpers follow the converter's conventions for int8: activations asymmetric per
tensor from a float range, weights symmetric (zero point 0) per output channel, bias int32 with
scale input_scale * weight_scale[c] so that the accumulator and the bias share one scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

#: dtype name -> (TensorType, NumPy type of a constant's data)
DTYPES = {
    "float32": (tflite.TensorType.FLOAT32, np.float32),
    "int8": (tflite.TensorType.INT8, np.int8),
    "int16": (tflite.TensorType.INT16, np.int16),
    "int32": (tflite.TensorType.INT32, np.int32),
}

#: BuiltinOperator name -> the BuiltinOptions table its options live in. An op listed here gets
#: its table even with no fields set (as the converter writes them); the others have none.
OPTIONS_TABLE = {
    "ADD": "AddOptions", "AVERAGE_POOL_2D": "Pool2DOptions", "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "DEQUANTIZE": "DequantizeOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "HARD_SWISH": "HardSwishOptions", "MAX_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions", "MUL": "MulOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "QUANTIZE": "QuantizeOptions", "RESHAPE": "ReshapeOptions", "SOFTMAX": "SoftmaxOptions",
    "SQUEEZE": "SqueezeOptions", "STRIDED_SLICE": "StridedSliceOptions", "SUB": "SubOptions",
    "TRANSPOSE": "TransposeOptions",
}

#: option fields whose values are enums, given by member name ("SAME", "RELU6")
FIELD_ENUMS = {
    "padding": tflite.Padding,
    "fused_activation_function": tflite.ActivationFunctionType,
    "weights_format": tflite.FullyConnectedOptionsWeightsFormat,
}

#: the last code the 8-bit deprecated_builtin_code field can hold
PLACEHOLDER_FOR_GREATER_OP_CODES = tflite.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES

#: alignment of constant data: 16 bytes, as the converter writes it, so any element type can be
#: read in place (and vectorised loads of weights stay aligned)
DATA_ALIGNMENT = 16


@dataclass(frozen=True)
class Tensor:
    """One tensor of the subgraph. `scale`/`zero_point` (one entry per tensor, or per channel
    along `quantized_dimension`) make it quantized; `data` makes it a constant."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] | None = None
    quantized_dimension: int = 0
    data: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Op:
    """One operator: a BuiltinOperator name, tensor names in and out (None: an absent optional
    input, written as -1) and its builtin options by schema field name."""

    op: str
    inputs: tuple[str | None, ...]
    outputs: tuple[str, ...]
    options: dict = field(default_factory=dict, compare=False)


def build_model(tensors: Sequence[Tensor], ops: Sequence[Op], inputs: Sequence[str], outputs: Sequence[str], *,
                description: str = "") -> bytes:
    """The `.tflite` bytes of one subgraph named "main" holding `tensors` (in this order: tensor i
    of the file is tensors[i]) and `ops` (in execution order)."""
    index = {t.name: i for i, t in enumerate(tensors)}
    if len(index) != len(tensors):
        raise ValueError("tensor names must be unique")
    codes = list(dict.fromkeys(op.op for op in ops))
    builder = flatbuffers.Builder(1024)

    constants = [t for t in tensors if t.data is not None]
    buffers = [_buffer(builder, None)] + [_buffer(builder, _constant_bytes(t)) for t in constants]
    buffer_of = {t.name: 1 + i for i, t in enumerate(constants)}
    tensor_offsets = [_tensor(builder, t, buffer_of.get(t.name, 0)) for t in tensors]
    op_offsets = [_operator(builder, op, codes.index(op.op), index) for op in ops]

    tensors_vec = _offset_vector(builder, tflite.SubGraphStartTensorsVector, tensor_offsets)
    inputs_vec = _int32_vector(builder, [index[n] for n in inputs])
    outputs_vec = _int32_vector(builder, [index[n] for n in outputs])
    ops_vec = _offset_vector(builder, tflite.SubGraphStartOperatorsVector, op_offsets)
    name = builder.CreateString("main")
    tflite.SubGraphStart(builder)
    tflite.SubGraphAddTensors(builder, tensors_vec)
    tflite.SubGraphAddInputs(builder, inputs_vec)
    tflite.SubGraphAddOutputs(builder, outputs_vec)
    tflite.SubGraphAddOperators(builder, ops_vec)
    tflite.SubGraphAddName(builder, name)
    subgraph = tflite.SubGraphEnd(builder)

    code_offsets = [_operator_code(builder, c) for c in codes]
    codes_vec = _offset_vector(builder, tflite.ModelStartOperatorCodesVector, code_offsets)
    subgraphs_vec = _offset_vector(builder, tflite.ModelStartSubgraphsVector, [subgraph])
    buffers_vec = _offset_vector(builder, tflite.ModelStartBuffersVector, buffers)
    desc = builder.CreateString(description)
    tflite.ModelStart(builder)
    tflite.ModelAddVersion(builder, 3)
    tflite.ModelAddOperatorCodes(builder, codes_vec)
    tflite.ModelAddSubgraphs(builder, subgraphs_vec)
    tflite.ModelAddDescription(builder, desc)
    tflite.ModelAddBuffers(builder, buffers_vec)
    builder.Finish(tflite.ModelEnd(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _constant_bytes(t: Tensor) -> bytes:
    data = np.asarray(t.data)
    if data.shape != tuple(t.shape):
        raise ValueError(f"{t.name}: data shape {data.shape} != tensor shape {t.shape}")
    return np.ascontiguousarray(data, dtype=np.dtype(DTYPES[t.dtype][1]).newbyteorder("<")).tobytes()


def _buffer(builder: flatbuffers.Builder, payload: bytes | None) -> int:
    data = None
    if payload:
        builder.Prep(DATA_ALIGNMENT, len(payload))  # the data (written next, back to front) starts aligned
        data = builder.CreateNumpyVector(np.frombuffer(payload, np.uint8))
    tflite.BufferStart(builder)
    if data is not None:
        tflite.BufferAddData(builder, data)
    return tflite.BufferEnd(builder)


def _tensor(builder: flatbuffers.Builder, t: Tensor, buffer: int) -> int:
    quantization = _quantization(builder, t) if t.scale is not None else None
    shape = _int32_vector(builder, t.shape)
    name = builder.CreateString(t.name)
    tflite.TensorStart(builder)
    tflite.TensorAddShape(builder, shape)
    tflite.TensorAddType(builder, DTYPES[t.dtype][0])
    tflite.TensorAddBuffer(builder, buffer)
    tflite.TensorAddName(builder, name)
    if quantization is not None:
        tflite.TensorAddQuantization(builder, quantization)
    return tflite.TensorEnd(builder)


def _quantization(builder: flatbuffers.Builder, t: Tensor) -> int:
    zero_point = t.zero_point if t.zero_point is not None else (0,) * len(t.scale)
    if len(zero_point) != len(t.scale):
        raise ValueError(f"{t.name}: {len(t.scale)} scales but {len(zero_point)} zero points")
    scale = builder.CreateNumpyVector(np.asarray(t.scale, np.float32))
    zp = builder.CreateNumpyVector(np.asarray(zero_point, np.int64))
    tflite.QuantizationParametersStart(builder)
    tflite.QuantizationParametersAddScale(builder, scale)
    tflite.QuantizationParametersAddZeroPoint(builder, zp)
    tflite.QuantizationParametersAddQuantizedDimension(builder, t.quantized_dimension)
    return tflite.QuantizationParametersEnd(builder)


def _operator(builder: flatbuffers.Builder, op: Op, opcode_index: int, index: dict[str, int]) -> int:
    options = _options(builder, op)
    inputs = _int32_vector(builder, [-1 if n is None else index[n] for n in op.inputs])
    outputs = _int32_vector(builder, [index[n] for n in op.outputs])
    tflite.OperatorStart(builder)
    tflite.OperatorAddOpcodeIndex(builder, opcode_index)
    tflite.OperatorAddInputs(builder, inputs)
    tflite.OperatorAddOutputs(builder, outputs)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(builder, getattr(tflite.BuiltinOptions, OPTIONS_TABLE[op.op]))
        tflite.OperatorAddBuiltinOptions(builder, options)
    return tflite.OperatorEnd(builder)


def _options(builder: flatbuffers.Builder, op: Op) -> int | None:
    """The op's options table, fields set through `tflite.<Table>Add<Field>` (field names from the
    schema, snake_case; enum values by member name; lists become int32 vectors)."""
    table = OPTIONS_TABLE.get(op.op)
    if table is None:
        if op.options:
            raise ValueError(f"{op.op} has no builtin options, got {op.options}")
        return None
    values = {}
    for name, value in op.options.items():  # vectors first: nothing may be written inside a table
        if isinstance(value, str):
            value = getattr(FIELD_ENUMS[name], value)
        elif isinstance(value, list | tuple):
            value = _int32_vector(builder, value)
        values[name] = value
    getattr(tflite, f"{table}Start")(builder)
    for name, value in values.items():
        adder = f"{table}Add{''.join(part.capitalize() for part in name.split('_'))}"
        if not hasattr(tflite, adder):
            raise ValueError(f"{op.op}: {table} has no field {name!r}")
        getattr(tflite, adder)(builder, value)
    return getattr(tflite, f"{table}End")(builder)


def _operator_code(builder: flatbuffers.Builder, name: str) -> int:
    code = getattr(tflite.BuiltinOperator, name)
    tflite.OperatorCodeStart(builder)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(builder, min(code, PLACEHOLDER_FOR_GREATER_OP_CODES))
    tflite.OperatorCodeAddBuiltinCode(builder, code)
    # version 1: every interpreter registers it for every builtin, and the kernels choose their
    # arithmetic from the tensor types (the converter's higher versions only gate old runtimes)
    tflite.OperatorCodeAddVersion(builder, 1)
    return tflite.OperatorCodeEnd(builder)


def _int32_vector(builder: flatbuffers.Builder, values: Sequence[int]) -> int:
    return builder.CreateNumpyVector(np.asarray(values, np.int32).reshape(-1))


def _offset_vector(builder: flatbuffers.Builder, start, offsets: Sequence[int]) -> int:
    start(builder, len(offsets))
    for offset in reversed(offsets):  # back to front: the first element is written last
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


# -- quantization (the TFLite converter's int8 conventions) -------------------------------------

def quantize_params(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero_point) of asymmetric int8 for the float range [lo, hi], as the converter
    computes them (GetAsymmetricQuantizationParams): the range is widened to contain 0, so that
    0.0 (padding, ReLU's floor) has an exact code, and the zero point is rounded into [-128, 127]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        raise ValueError("the float range is empty")
    scale = float(np.float32((hi - lo) / 255.0))
    zero_point = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return scale, zero_point


def quantize(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float values as int8 codes with per-tensor (scale, zero_point): round, shift, saturate."""
    return np.clip(np.round(np.asarray(x, np.float64) / scale) + zero_point, -128, 127).astype(np.int8)


def quantize_weights(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, tuple[float, ...]]:
    """Symmetric int8 weights (zero point 0, codes in [-127, 127]): one scale max|w|/127 per slice
    along `axis` (the output channel), or one for the whole tensor when axis is None (the usual
    FULLY_CONNECTED). Symmetric, so that the kernels need no weight zero-point term."""
    w = np.asarray(w, np.float64)
    if axis is None:
        peak = np.abs(w).max(keepdims=True)
    else:
        peak = np.abs(w).max(axis=tuple(a for a in range(w.ndim) if a != axis % w.ndim), keepdims=True)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)  # an all-zero channel: any scale
    q = np.clip(np.round(w / scales), -127, 127).astype(np.int8)
    return q, tuple(float(s) for s in scales.reshape(-1))


def quantize_bias(b: np.ndarray, input_scale: float,
                  weight_scales: Sequence[float]) -> tuple[np.ndarray, tuple[float, ...]]:
    """int32 bias codes and their scales input_scale * weight_scale[c] (zero point 0): the scale
    of the int32 accumulator of input x weight products, so the bias adds to it directly. The
    product is taken in float32, as the converter does; one weight scale applies to every entry."""
    scales = np.float32(input_scale) * np.asarray(weight_scales, np.float32)
    q = np.round(np.asarray(b, np.float64) / scales.astype(np.float64)).astype(np.int32)
    return q, tuple(float(s) for s in scales)
