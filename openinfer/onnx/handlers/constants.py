"""ONNX ops computed at import: Constant, Shape, Size, ConstantOfShape and Range are folded (all
shapes are static once the sizevars have values; a Range over run-time values becomes `arange`
over the length the model declares), Identity and Dropout dropped (inference).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import OnnxImportError
from ..context import (
    FLOATS,
    ONNX_INTS,
    ONNX_UINTS,
    Dim,
    NodeContext,
    Value,
    data_mismatch,
    dim_product,
    element_dims,
    handler,
    with_elements,
)


@handler("Identity", note="dropped (its output is its input)")
def _identity(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.result(out, x)


@handler("Dropout", note="dropped (inference; training_mode false): the mask output is a constant of ones")
def _dropout(c: NodeContext) -> None:
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


@handler("Constant", note="folded: value, value_float(s), value_int(s)")
def _constant(c: NodeContext) -> None:
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
        c.fail(f"value: {data_mismatch(v, exc)}")
    try:
        c.result(out, c.imp.const_value(np.asarray(array)))
    except OnnxImportError as exc:
        c.fail(str(exc))


@handler("Shape", note="folded: the input's shape (start, end) as an i64 constant")
def _shape(c: NodeContext) -> None:
    c.allow("start", "end")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    start, end = int(c.attrs.get("start", 0)), int(c.attrs.get("end", rank))
    c.result(out, with_elements(c.imp.const_value(np.asarray(x.shape[slice(start, end)], np.int64)),
                                x.dims[slice(start, end)]))


@handler("Size", note="folded: the input's element count as an i64 constant")
def _size(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    count = dim_product(x.dims)
    c.folded(out, np.asarray(count.size, np.int64), (), elements=(count,))


@handler("ConstantOfShape", note="folded: a constant of the (constant) shape input, filled with value")
def _constant_of_shape(c: NodeContext) -> None:
    import onnx.numpy_helper as nh

    c.allow("value")
    (shape_in,) = c.inputs(1, 1)
    (out,) = c.outputs()
    shape = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
    dims = element_dims(shape_in)
    if any(s < 0 for s in shape):
        c.fail(f"shape {shape} has a negative size")
    try:
        value = nh.to_array(c.attrs["value"]).reshape(-1) if "value" in c.attrs else np.zeros(1, np.float32)
    except ValueError as exc:
        c.fail(f"value: {data_mismatch(c.attrs['value'], exc)}")
    if value.size != 1:
        c.fail("value must hold one element")
    try:
        c.folded(out, np.full(shape, value[0], value.dtype), dims)
    except OnnxImportError as exc:
        c.fail(str(exc))


@handler("Range", note="folded when start, limit and delta are constants; otherwise arange(start, step=delta) "
                       "over the output's length declared in the model (start and delta scalar variables or constants)")
def _range(c: NodeContext) -> None:
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
    values = (start + np.arange(count) * delta).astype(start.dtype)
    limit_dim = element_dims(ins[1])[0] if ins[1].elements is not None else None
    if limit_dim is not None and limit_dim.expr is not None and start == 0 and delta == 1:
        c.folded(out, values, (limit_dim,), prefix=(None, 0))     # 0, 1, ..., seq - 1: a prefix of the naturals
        return
    c.result(out, c.imp.const_value(values))


def _range_arange(c: NodeContext, ins: list[Value], out: str) -> None:
    """Range over run-time values: its length, ceil((limit - start) / delta), is not known at
    import, so it is the length the model declares for the output (value_info or a graph output:
    the exporter's shape inference), trusted as ONNX trusts it; limit is not read."""
    start, _, delta = ins
    if start.dtype not in FLOATS + ONNX_INTS + ONNX_UINTS:
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
