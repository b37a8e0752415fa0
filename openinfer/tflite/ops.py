"""The TFLite operators the importer supports, one handler per form, registered in `HANDLERS` and
`FLOAT_HANDLERS` (the tables of what imports: `openinfer import --list-ops tflite` prints them).

A handler reads its operator's tensors and options and emits DSL op lines through the `Importer`
(openinfer/tflite/importer.py). Quantized operators map onto the registry's integer-only ops with
the multipliers TFLite's Prepare code would compute (openinfer/tflite/quantization.py); the checks
here are the ones TFLite's Prepare makes, so a model TFLite refuses is refused here too, by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..imported import quoted
from . import quantization as Q
from .importer import Importer, OpError
from .model import Operator, Tensor


@dataclass(frozen=True)
class Handler:
    fn: Callable[[Importer, Operator], None]
    note: str


#: The handlers by TFLite operator: the int8 form (or the one form of a dtype-agnostic operator,
#: or one that branches on the dtype itself)
HANDLERS: dict[str, Handler] = {}
#: float32 forms written apart from their operator's int8 form: taken when the output is f32
FLOAT_HANDLERS: dict[str, Handler] = {}


def handler(*ops: str, note: str, float_form: bool = False):
    """Registers `fn` for `ops`: in FLOAT_HANDLERS with `float_form`, else in HANDLERS."""
    table = FLOAT_HANDLERS if float_form else HANDLERS

    def register(fn):
        for op in ops:
            table[op] = Handler(fn, note)
        return fn
    return register


def handler_for(model, op: Operator) -> Handler | None:
    """The handler of `op` in `model`: its float form when it has one and computes an f32 tensor
    (or has no other form), else its (int8) form; None: not supported."""
    out = model.tensors[op.outputs[0]] if op.outputs else None
    if op.op in FLOAT_HANDLERS and (op.op not in HANDLERS or (out is not None and out.dtype == "f32")):
        return FLOAT_HANDLERS[op.op]
    return HANDLERS.get(op.op)


def list_ops() -> str:
    """The coverage, one operator a line (its forms' notes joined)."""
    names = sorted({*HANDLERS, *FLOAT_HANDLERS})
    width = max(len(k) for k in names)
    return "\n".join(f"{k:<{width}}  " + "; ".join(t[k].note for t in (HANDLERS, FLOAT_HANDLERS) if k in t)
                     for k in names) + "\n"


# ------------------------------------------------------------------------------------ helpers

def _inputs(imp: Importer, op: Operator, least: int, most: int) -> list[Tensor | None]:
    if not least <= len(op.inputs) <= most:
        raise OpError(f"expects {least}" + (f" to {most}" if most != least else "") + f" inputs, has {len(op.inputs)}")
    return [imp.m.tensors[i] if i >= 0 else None for i in op.inputs] + [None] * (most - len(op.inputs))


def _output(imp: Importer, op: Operator) -> Tensor:
    if len(op.outputs) != 1:
        raise OpError(f"expects 1 output, has {len(op.outputs)}")
    return imp.m.tensors[op.outputs[0]]


def _int8(*ts: Tensor | None) -> bool:
    """All of `ts` are int8 tensors with per-tensor quantization (a graph's activations)."""
    return all(t is not None and t.dtype == "i8" and t.quantized for t in ts)


def _per_tensor(t: Tensor, what: str) -> tuple[float, int]:
    if not t.quantized:
        raise OpError(f"{what} `{t.name}` is int8 without quantization parameters")
    if t.scale.size != 1:
        raise OpError(f"{what} `{t.name}` has {t.scale.size} scales: only per-tensor quantization is supported there")
    return t.qparams()


def _same_qparams(x: Tensor, y: Tensor) -> None:
    if x.qparams() != y.qparams():
        raise OpError(f"input and output must share scale and zero point (TFLite requires it), got "
                      f"{x.qparams()} and {y.qparams()}")


def _padding(mode: str, size: int, k: int, stride: int, dilation: int, out: int, axis: str) -> tuple[int, int]:
    """TFLite's ComputePaddingHeightWidth: SAME pads (total // 2) before and the rest after."""
    eff = (k - 1) * dilation + 1
    if mode == "SAME":
        expected = (size + stride - 1) // stride
    elif mode == "VALID":
        expected = (size - eff + stride) // stride
    else:
        raise OpError(f"padding {mode!r} is not supported")
    if expected != out:
        raise OpError(f"the output's {axis} is {out}, but {mode} padding of {size} by a window of {eff} at stride "
                      f"{stride} gives {expected}")
    total = max((out - 1) * stride + eff - size, 0) if mode == "SAME" else 0
    return total // 2, total - total // 2


def _window_attrs(op: Operator, x: Tensor, y: Tensor, kh: int, kw: int, dilation=(1, 1)) -> dict:
    o = op.options
    stride = (o["StrideH"], o["StrideW"])
    if min(stride) < 1 or min(dilation) < 1:
        raise OpError(f"stride {list(stride)} and dilation {list(dilation)} must be >= 1")
    top, bottom = _padding(o["Padding"], x.shape[1], kh, stride[0], dilation[0], y.shape[1], "height")
    left, right = _padding(o["Padding"], x.shape[2], kw, stride[1], dilation[1], y.shape[2], "width")
    return {"stride": list(stride), "padding": [top, left, bottom, right]}


def _activation(op: Operator, y: Tensor) -> dict:
    act = op.options.get("FusedActivationFunction", "NONE")
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise OpError(f"fused activation {act} is not supported")
    lo, hi = Q.activation_range(act, *y.qparams())
    return {k: v for k, v in (("act_min", lo), ("act_max", hi)) if (k, v) not in (("act_min", -128), ("act_max", 127))}


def _requant_constants(imp: Importer, y_var: str, mult: np.ndarray, shift: np.ndarray, note: str) -> list[str]:
    return [imp.constant(mult, f"{y_var}_multiplier", "i32", note=f"{note}: fixed-point multipliers"),
            imp.constant(shift, f"{y_var}_shift", "i32", note=f"{note}: their shifts")]


def _weight_scales(w: Tensor, channels: int, axis: int) -> np.ndarray:
    if not w.quantized:
        raise OpError(f"the weights `{w.name}` are int8 without quantization parameters")
    if np.any(w.zero != 0):
        raise OpError(f"the weights `{w.name}` have a non-zero zero point: int8 weights must be symmetric")
    if w.scale.size == 1:
        return np.repeat(w.scale, channels)
    if w.scale.size != channels or w.quantized_dimension != axis:
        raise OpError(f"the weights `{w.name}` have {w.scale.size} scales on axis {w.quantized_dimension}: "
                      f"expected 1 or {channels} on axis {axis}")
    return w.scale


def _bias(imp: Importer, b: Tensor | None, channels: int, y_var: str) -> list[str]:
    """The bias, named after the output it is added to (the converter names it after its fused
    sources, which usually start with that output's own name)."""
    if b is None:
        return []
    if b.dtype != "i32" or b.shape != (channels,) or b.data is None:
        raise OpError(f"the bias `{b.name}` must be a constant i32[{channels}], got {b.dtype}{list(b.shape)}")
    if b.index in imp.vars:
        return [imp.vars[b.index]]
    return [imp.constant(b.data, f"{y_var}_bias", "i32", note=f"TFLite {quoted(b.name)}", index=b.index)]


# ------------------------------------------------------------------------------ float forms

def _f32(*ts: Tensor | None) -> bool:
    return all(t is not None and t.dtype == "f32" and not t.quantized for t in ts)


def _volatile(imp: Importer, base: str, shape, note: str) -> str:
    var = imp.fresh(base)
    imp.decls["volatile"].append((f"{var}: f32[{', '.join(str(d) for d in shape)}];", note))
    return var


def _float_activation(imp: Importer, op: Operator, pre: str, y: Tensor, shape=None) -> str | None:
    """A float operator's fused activation as its own op from `pre` (the operator's result) into
    the output, or None without one (the caller writes the output itself). RELU is relu, RELU6
    and RELU_N1_TO_1 clamp: TFLite's ActivationFunctionWithMinMax on floats."""
    act = op.options.get("FusedActivationFunction", "NONE")
    if act == "NONE":
        return None
    bounds = {"RELU": None, "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
    if act not in bounds:
        raise OpError(f"fused activation {act} is not supported")
    out = imp.output(y.index) if shape is None else _volatile(imp, f"{pre}_act", shape, f"{pre} after {act}")
    if bounds[act] is None:
        imp.emit("relu", [pre], {}, out, f"{op.op} #{op.index}: fused RELU")
    else:
        lo, hi = bounds[act]
        imp.emit("clamp", [pre], {"min": lo, "max": hi}, out, f"{op.op} #{op.index}: fused {act}")
    return out


def _nchw(imp: Importer, op: Operator, x: Tensor) -> str:
    """x (NHWC) as the NCHW tensor the registry's convolutions and pools take."""
    x_var = imp.var(x.index)
    n, h, w, c = x.shape
    t = _volatile(imp, f"{x_var}_nchw", (n, c, h, w), f"{x_var} as NCHW for {op.op} #{op.index}")
    imp.emit("transpose", [x_var], {"perm": [0, 3, 1, 2]}, t, f"{op.op} #{op.index}: NHWC -> NCHW")
    return t


def _nchw_op(imp: Importer, op: Operator, name: str, args: list[str], attrs: dict, y: Tensor) -> None:
    """`name` on NCHW operands into y (NHWC): the result, its fused activation, the transpose back."""
    n, h, w, c = y.shape
    pre = _volatile(imp, f"{imp.m.tensors[y.index].name}_nchw", (n, c, h, w), f"{op.op} #{op.index} in NCHW")
    imp.emit(name, args, attrs, pre, f"{op.op} #{op.index}")
    last = _float_activation(imp, op, pre, y, (n, c, h, w)) or pre
    imp.emit("transpose", [last], {"perm": [0, 2, 3, 1]}, imp.output(y.index), f"{op.op} #{op.index}: NCHW -> NHWC")


def _float_conv(imp: Importer, op: Operator, x: Tensor, w: Tensor, b: Tensor | None, y: Tensor) -> None:
    """Float CONV_2D / DEPTHWISE_CONV_2D as conv2d: weights OHWI -> OIHW ([1, KH, KW, C*M] ->
    [C*M, 1, KH, KW], groups = C) at import, the input and output transposed around it."""
    if not _f32(w) or w.data is None or len(w.shape) != 4 or len(x.shape) != 4:
        raise OpError(f"the weights must be a constant 4-D f32 tensor, got {w.dtype}{list(w.shape)}")
    depthwise = op.op == "DEPTHWISE_CONV_2D"
    channels = w.shape[3] if depthwise else w.shape[0]
    if depthwise:
        if w.shape[0] != 1 or channels % x.shape[3]:
            raise OpError(f"depthwise weights must be [1, KH, KW, C * multiplier], got {list(w.shape)}")
        groups, oihw = x.shape[3], w.data.transpose(3, 0, 1, 2)
    else:
        if x.shape[3] % w.shape[3]:
            raise OpError(f"the input's {x.shape[3]} channels are not a multiple of the weights' {w.shape[3]}")
        groups, oihw = x.shape[3] // w.shape[3], w.data.transpose(0, 3, 1, 2)
    if y.shape[3] != channels:
        raise OpError(f"the output has {y.shape[3]} channels, the weights {channels}")
    o = op.options
    dilation = (o.get("DilationHFactor", 1), o.get("DilationWFactor", 1))
    attrs = _window_attrs(op, x, y, w.shape[1], w.shape[2], dilation)
    if dilation != (1, 1):
        attrs["dilation"] = list(dilation)
    if groups != 1:
        attrs["groups"] = groups
    x_nchw = _nchw(imp, op, x)
    weights = imp.constant(np.ascontiguousarray(oihw), w.name, "f32",
                           note=f"TFLite {quoted(w.name)} {'[1, KH, KW, O]' if depthwise else '[O, KH, KW, I]'} "
                                "as [O, I, KH, KW]")
    args = [x_nchw, weights]
    if b is not None:
        if not _f32(b) or b.data is None or b.shape != (channels,):
            raise OpError(f"the bias must be a constant f32[{channels}]")
        args.append(imp.var(b.index))
    _nchw_op(imp, op, "conv2d", args, attrs, y)


def _emit_float(imp: Importer, op: Operator, name: str, args: list[str], attrs: dict, y: Tensor) -> None:
    """`name` into y, through an intermediate when a fused activation follows."""
    if op.options.get("FusedActivationFunction", "NONE") == "NONE":
        imp.emit(name, args, attrs, imp.output(y.index), f"{op.op} #{op.index}")
        return
    pre = _volatile(imp, f"{imp.m.tensors[y.index].name}_pre", y.shape, f"{op.op} #{op.index} before its activation")
    imp.emit(name, args, attrs, pre, f"{op.op} #{op.index}")
    _float_activation(imp, op, pre, y)


# ----------------------------------------------------------------------------------- handlers

@handler("CONV_2D", "DEPTHWISE_CONV_2D",
         note="int8 (per-channel weights, fused RELU/RELU6/RELU_N1_TO_1) -> qconv2d (depthwise: groups = C); "
              "f32 -> conv2d between NHWC <-> NCHW transposes (+ relu/clamp)")
def _conv(imp: Importer, op: Operator) -> None:
    x, w, b = _inputs(imp, op, 2, 3)
    y = _output(imp, op)
    if _f32(x, y):
        _float_conv(imp, op, x, w, b, y)
        return
    if not (_int8(x, y) and w.dtype == "i8"):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, weights {w.dtype}, output {y.dtype})")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise OpError(f"input and weights must be 4-D, got {list(x.shape)} and {list(w.shape)}")
    depthwise = op.op == "DEPTHWISE_CONV_2D"
    channels = w.shape[3] if depthwise else w.shape[0]
    if y.shape[3] != channels:
        raise OpError(f"the output has {y.shape[3]} channels, the weights {channels}")
    scales = _weight_scales(w, channels, 3 if depthwise else 0)
    if w.data is None:
        raise OpError(f"the weights `{w.name}` must be a constant")
    if depthwise:
        if w.shape[0] != 1 or channels % x.shape[3]:
            raise OpError(f"depthwise weights must be [1, KH, KW, C * multiplier], got {list(w.shape)} for "
                          f"{x.shape[3]} input channels")
        groups = x.shape[3]
        weights = imp.constant(np.ascontiguousarray(w.data.transpose(3, 1, 2, 0)), w.name, "i8",
                               note=f"TFLite {quoted(w.name)} [1, KH, KW, O] as [O, KH, KW, 1]")
    else:
        if x.shape[3] % w.shape[3]:
            raise OpError(f"the input's {x.shape[3]} channels are not a multiple of the weights' {w.shape[3]}")
        groups = x.shape[3] // w.shape[3]
        weights = imp.var(w.index)
    o = op.options
    dilation = (o.get("DilationHFactor", 1), o.get("DilationWFactor", 1))
    attrs = _window_attrs(op, x, y, w.shape[1], w.shape[2], dilation)
    if dilation != (1, 1):
        attrs["dilation"] = list(dilation)
    if groups != 1:
        attrs["groups"] = groups
    (x_scale, x_zero), (y_scale, y_zero) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    attrs.update(x_zero=x_zero, y_zero=y_zero, **_activation(op, y))
    x_var = imp.var(x.index)
    y_var = imp.output(y.index)
    mult, shift = Q.conv_multipliers(x_scale, scales, y_scale)
    args = [x_var, weights, *_requant_constants(imp, y_var, mult, shift, y_var), *_bias(imp, b, channels, y_var)]
    imp.emit("qconv2d", args, attrs, y_var, f"{op.op} #{op.index}")


@handler("FULLY_CONNECTED", note="int8 (per-tensor or per-channel weights, fused activations) -> qlinear; "
                                 "f32 -> matmul by the weights transposed at import (+ add, relu/clamp)")
def _fully_connected(imp: Importer, op: Operator) -> None:
    x, w, b = _inputs(imp, op, 2, 3)
    y = _output(imp, op)
    if _f32(x, y):
        _float_fully_connected(imp, op, x, w, b, y)
        return
    if not (_int8(x, y) and w.dtype == "i8"):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, weights {w.dtype}, output {y.dtype})")
    if len(w.shape) != 2 or w.data is None:
        raise OpError(f"the weights must be a constant [N, K], got {list(w.shape)}")
    n, k = w.shape
    if op.options.get("WeightsFormat", 0) != 0:
        raise OpError("only the default weights format is supported (not the shuffled one)")
    if not w.quantized:
        raise OpError(f"the weights `{w.name}` are int8 without quantization parameters")
    scales = np.repeat(w.scale, n) if w.scale.size == 1 else w.scale
    if scales.size != n:
        raise OpError(f"the weights `{w.name}` have {w.scale.size} scales for {n} outputs")
    rows = int(np.prod(x.shape)) // k if k else 0
    if rows * k != int(np.prod(x.shape)) or int(np.prod(y.shape)) != rows * n:
        raise OpError(f"input {list(x.shape)} and output {list(y.shape)} do not fit weights [{n}, {k}]")
    (x_scale, x_zero), (y_scale, y_zero) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    x_var = imp.var(x.index)
    if x.shape[-1] != k or y.shape[:-1] != x.shape[:-1]:       # keep_num_dims false: x as [rows, K]
        flat = imp.fresh(f"{x_var}_rows")
        imp.decls["volatile"].append((f"{flat}: i8[{', '.join(str(d) for d in (*y.shape[:-1], k))}];",
                                      f"{x_var} as the rows FULLY_CONNECTED reads"))
        imp.emit("reshape", [x_var], {}, flat, f"{op.op} #{op.index}: its input as rows of {k}")
        x_var = flat
    y_var = imp.output(y.index)
    attrs = {"x_zero": x_zero}
    if int(w.zero[0]):
        attrs["w_zero"] = int(w.zero[0])
    attrs.update(y_zero=y_zero, **_activation(op, y))
    scale = imp.constant(Q.linear_scales(x_scale, scales, y_scale), f"{y_var}_scale", "f64",
                         note=f"{y_var}: x scale * w scale / y scale, the f64 requantization")
    args = [x_var, imp.var(w.index), scale, *_bias(imp, b, n, y_var)]
    imp.emit("qlinear", args, attrs, y_var, f"{op.op} #{op.index}")


def _float_fully_connected(imp: Importer, op: Operator, x: Tensor, w: Tensor, b: Tensor | None, y: Tensor) -> None:
    if not _f32(w) or w.data is None or len(w.shape) != 2:
        raise OpError(f"the weights must be a constant f32 [N, K], got {w.dtype}{list(w.shape)}")
    n, k = w.shape
    rows = int(np.prod(x.shape)) // k if k else 0
    if rows * k != int(np.prod(x.shape)) or int(np.prod(y.shape)) != rows * n or y.shape[-1] != n:
        raise OpError(f"input {list(x.shape)} and output {list(y.shape)} do not fit weights [{n}, {k}]")
    x_var = imp.var(x.index)
    if x.shape != (*y.shape[:-1], k):                 # keep_num_dims false: x as [rows, K]
        flat = _volatile(imp, f"{x_var}_rows", (*y.shape[:-1], k), f"{x_var} as the rows FULLY_CONNECTED reads")
        imp.emit("reshape", [x_var], {}, flat, f"{op.op} #{op.index}: its input as rows of {k}")
        x_var = flat
    w_t = imp.constant(np.ascontiguousarray(w.data.T), w.name, "f32", note=f"TFLite {quoted(w.name)} [N, K] as [K, N]")
    if b is None:
        _emit_float(imp, op, "matmul", [x_var, w_t], {}, y)
        return
    if not _f32(b) or b.data is None or b.shape != (n,):
        raise OpError(f"the bias must be a constant f32[{n}]")
    product = _volatile(imp, f"{imp.m.tensors[y.index].name}_matmul", y.shape, f"{op.op} #{op.index} before its bias")
    imp.emit("matmul", [x_var, w_t], {}, product, f"{op.op} #{op.index}")
    _emit_float(imp, op, "add", [product, imp.var(b.index)], {}, y)


@handler("AVERAGE_POOL_2D", "MAX_POOL_2D",
         note="int8 (input and output share their quantization) -> qavg_pool2d, qmax_pool2d; f32 -> "
              "avg_pool2d (over the taps inside the input), max_pool2d between NHWC <-> NCHW transposes")
def _pool(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if _f32(x, y):      # TFLite's float AveragePool divides by the taps inside the input: no count_include_pad
        kh, kw = op.options["FilterHeight"], op.options["FilterWidth"]
        attrs = {"kernel": [kh, kw], **_window_attrs(op, x, y, kh, kw)}
        _nchw_op(imp, op, "avg_pool2d" if op.op == "AVERAGE_POOL_2D" else "max_pool2d", [_nchw(imp, op, x)], attrs, y)
        return
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    _same_qparams(x, y)
    kh, kw = op.options["FilterHeight"], op.options["FilterWidth"]
    attrs = {"kernel": [kh, kw], **_window_attrs(op, x, y, kh, kw), **_activation(op, y)}
    x_var, y_var = imp.var(x.index), imp.output(y.index)
    imp.emit("qavg_pool2d" if op.op == "AVERAGE_POOL_2D" else "qmax_pool2d", [x_var], attrs, y_var,
             f"{op.op} #{op.index}")


@handler("RESHAPE", "SQUEEZE", note="any dtype -> reshape (the output tensor's shape)")
def _reshape(imp: Importer, op: Operator) -> None:
    x = _inputs(imp, op, 1, 2)[0]
    y = _output(imp, op)
    if x.dtype != y.dtype or int(np.prod(x.shape)) != int(np.prod(y.shape)):
        raise OpError(f"input {x.dtype}{list(x.shape)} and output {y.dtype}{list(y.shape)} differ in type or size")
    if x.quantized and y.quantized and x.qparams() != y.qparams():
        raise OpError("input and output must share scale and zero point")
    x_var = imp.var(x.index)
    imp.emit("reshape", [x_var], {}, imp.output(y.index), f"{op.op} #{op.index}")


@handler("SOFTMAX", note="int8 (output scale 1/256, zero point -128, as TFLite requires) -> qsoftmax; "
                         "f32 -> softmax (of beta * x)")
def _softmax(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if _f32(x, y):
        x_var, beta = imp.var(x.index), float(op.options.get("Beta", 1.0))
        if beta != 1.0:
            scaled = _volatile(imp, f"{x_var}_beta", x.shape, f"{x_var} * beta")
            imp.emit("mul", [x_var, imp.constant(np.array([beta], np.float32), f"{x_var}_beta_value", "f32",
                                                  note="SOFTMAX's beta")], {}, scaled, f"{op.op} #{op.index}: beta")
            x_var = scaled
        imp.emit("softmax", [x_var], {"axis": -1}, imp.output(y.index), f"{op.op} #{op.index}")
        return
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    if y.qparams() != (1.0 / 256, -128):
        raise OpError(f"the output must have scale 1/256 and zero point -128, got {y.qparams()}")
    x_scale, _ = _per_tensor(x, "the input")
    attrs = Q.softmax_params(op.options.get("Beta", 1.0), x_scale)
    x_var = imp.var(x.index)
    imp.emit("qsoftmax", [x_var], attrs, imp.output(y.index), f"{op.op} #{op.index}")


def _binary_int8(imp: Importer, op: Operator) -> tuple[Tensor, Tensor, Tensor, tuple, tuple, tuple]:
    a, b = _inputs(imp, op, 2, 2)
    y = _output(imp, op)
    if not _int8(a, b, y):
        raise OpError(f"only the int8 form is supported (inputs {a.dtype}, {b.dtype}, output {y.dtype})")
    qa, qb, qy = (_per_tensor(t, what) for t, what in ((a, "input 0"), (b, "input 1"), (y, "the output")))
    return a, b, y, qa, qb, qy


@handler("ADD", "SUB", note="int8 (broadcasting, fused activations) -> qadd, qsub")
def _add(imp: Importer, op: Operator) -> None:
    a, b, y, (sa, za), (sb, zb), (sy, zy) = _binary_int8(imp, op)
    scaling = Q.add_params(sa, sb, sy)
    attrs = {"a_zero": za, "a_multiplier": scaling["a_multiplier"], "a_shift": scaling["a_shift"],
             "b_zero": zb, "b_multiplier": scaling["b_multiplier"], "b_shift": scaling["b_shift"],
             "y_zero": zy, "y_multiplier": scaling["y_multiplier"], "y_shift": scaling["y_shift"],
             "left_shift": scaling["left_shift"], **_activation(op, y)}
    args = [imp.var(a.index), imp.var(b.index)]
    imp.emit("qadd" if op.op == "ADD" else "qsub", args, attrs, imp.output(y.index), f"{op.op} #{op.index}")


@handler("MUL", note="int8 (broadcasting, fused activations) -> qmul")
def _mul(imp: Importer, op: Operator) -> None:
    a, b, y, (sa, za), (sb, zb), (sy, zy) = _binary_int8(imp, op)
    multiplier, shift = Q.mul_params(sa, sb, sy)
    attrs = {"a_zero": za, "b_zero": zb, "y_zero": zy, "multiplier": multiplier, "shift": shift,
             **_activation(op, y)}
    args = [imp.var(a.index), imp.var(b.index)]
    imp.emit("qmul", args, attrs, imp.output(y.index), f"{op.op} #{op.index}")


@handler("MEAN", note="int8 over constant axes (keep_dims true or false) -> qmean")
def _mean(imp: Importer, op: Operator) -> None:
    x, axis = _inputs(imp, op, 2, 2)
    y = _output(imp, op)
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    if axis.dtype != "i32" or axis.data is None:
        raise OpError(f"the axes `{axis.name}` must be a constant i32 tensor, got {axis.dtype}"
                      f"{'' if axis.data is not None else ' computed at run time'}")
    rank = len(x.shape)
    axes = sorted({int(a) + rank if int(a) < 0 else int(a) for a in axis.data.reshape(-1)})
    if not axes or not all(0 <= a < rank for a in axes):
        raise OpError(f"axes {axis.data.reshape(-1).tolist()} do not name axes of the {rank}-D input "
                      f"(an empty list, a no-op reduction, is not supported)")
    if any(x.shape[a] == 0 for a in axes):
        raise OpError(f"the mean over axes {axes} of {list(x.shape)} has no elements")
    keep = bool(op.options.get("KeepDims", False))
    expected = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    if tuple(y.shape) != expected:
        raise OpError(f"the output's shape {list(y.shape)} is not the mean's {list(expected)}")
    (sx, zx), (sy, zy) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    multiplier, shift = Q.mean_params(sx, sy)
    attrs = {"axes": axes, "keepdims": keep, "x_zero": zx, "y_zero": zy, "multiplier": multiplier, "shift": shift}
    imp.emit("qmean", [imp.var(x.index)], attrs, imp.output(y.index), f"{op.op} #{op.index}")


@handler("RELU", "RELU6", note="int8 (input and output parameters may differ) -> requantize, clamped to the activation")
def _relu(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    (sx, zx), (sy, zy) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    multiplier, shift = Q.relu_params(sx, sy)
    lo, hi = Q.activation_range(op.op, sy, zy)
    attrs = {"x_zero": zx, "y_zero": zy, "multiplier": multiplier, "shift": shift,
             **{k: v for k, v, default in (("act_min", lo, -128), ("act_max", hi, 127)) if v != default}}
    imp.emit("requantize", [imp.var(x.index)], attrs, imp.output(y.index), f"{op.op} #{op.index}")


@handler("LOGISTIC", "TANH",
         note="int8 (LOGISTIC: output scale 1/256) -> qlut, LiteRT's 256-entry table computed at import")
def _table_activation(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    (x_scale, x_zero), (y_scale, y_zero) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    if op.op == "LOGISTIC" and y_scale != 1.0 / 256:
        raise OpError(f"the output must have scale 1/256 (TFLite requires it), got {y_scale!r}")
    function = "logistic" if op.op == "LOGISTIC" else "tanh"
    x_var, y_var = imp.var(x.index), imp.output(y.index)
    table = imp.constant(Q.lut_table(function, x_scale, x_zero, y_scale, y_zero), f"{y_var}_table", "i8",
                         note=f"{y_var}: {function} of each int8 input, entry x + 128 (LiteRT's table)")
    imp.emit("qlut", [x_var, table], {}, y_var, f"{op.op} #{op.index}")


@handler("HARD_SWISH", note="int8 -> qhard_swish")
def _hard_swish(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if not _int8(x, y):
        raise OpError(f"only the int8 form is supported (input {x.dtype}, output {y.dtype})")
    (x_scale, x_zero), (y_scale, y_zero) = _per_tensor(x, "the input"), _per_tensor(y, "the output")
    params = Q.hard_swish_params(x_scale, y_scale)
    if params["output_shift"] > 0:
        raise OpError(f"the output scale {y_scale!r} is below the input's / 128 ({x_scale!r} / 128): TFLite "
                      "requires output_multiplier_exponent <= 0")
    if params["output_shift"] < -15 or params["reluish_shift"] < -15:
        raise OpError(f"the scales (input {x_scale!r}, output {y_scale!r}) need a right shift of over 15 bits, "
                      "where TFLite's int16 RoundingDivideByPOT no longer rounds (its mask overflows int16)")
    x_var = imp.var(x.index)
    imp.emit("qhard_swish", [x_var], {"x_zero": x_zero, "y_zero": y_zero, **params}, imp.output(y.index),
             f"{op.op} #{op.index}")


@handler("QUANTIZE", note="f32 -> int8 (quantize), int8 -> int8 of other parameters (requantize)")
def _quantize(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if y.dtype != "i8":
        raise OpError(f"only int8 outputs are supported, got {y.dtype}")
    y_scale, y_zero = _per_tensor(y, "the output")
    x_var = imp.var(x.index)
    if x.dtype == "f32":
        imp.emit("quantize", [x_var], {"scale": Q.f32(y_scale), "zero": y_zero}, imp.output(y.index),
                 f"{op.op} #{op.index}")
    elif x.dtype == "i8":
        x_scale, x_zero = _per_tensor(x, "the input")
        mult, shift = Q.requantize_params(x_scale, y_scale)
        imp.emit("requantize", [x_var], {"x_zero": x_zero, "y_zero": y_zero, "multiplier": mult, "shift": shift},
                 imp.output(y.index), f"{op.op} #{op.index}")
    else:
        raise OpError(f"only f32 and int8 inputs are supported, got {x.dtype}")


@handler("DEQUANTIZE", note="int8 -> f32 (dequantize)")
def _dequantize(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if x.dtype != "i8" or y.dtype != "f32":
        raise OpError(f"only int8 -> f32 is supported, got {x.dtype} -> {y.dtype}")
    scale, zero = _per_tensor(x, "the input")
    x_var = imp.var(x.index)
    imp.emit("dequantize", [x_var], {"scale": Q.f32(scale), "zero": zero}, imp.output(y.index), f"{op.op} #{op.index}")


# ------------------------------------------------------------------------------ layout ops

def _const_ints(t: Tensor | None, what: str) -> list[int]:
    if t is None or t.data is None or t.dtype not in ("i32", "i64"):
        raise OpError(f"{what} must be a constant int32 tensor" + (f" (`{t.name}` is computed or {t.dtype})"
                                                                    if t is not None else ""))
    return [int(v) for v in t.data.reshape(-1)]


def _same_type(x: Tensor, y: Tensor) -> None:
    """A data-movement op: the output is the input's values, so dtype and quantization agree."""
    if x.dtype != y.dtype:
        raise OpError(f"input {x.dtype} and output {y.dtype} differ in type")
    if x.quantized or y.quantized:
        _same_qparams(x, y)


@handler("TRANSPOSE", note="any dtype, constant perm -> transpose")
def _transpose(imp: Importer, op: Operator) -> None:
    x, perm_t = _inputs(imp, op, 2, 2)
    y = _output(imp, op)
    _same_type(x, y)
    perm = _const_ints(perm_t, "the permutation")
    if sorted(perm) != list(range(len(x.shape))):
        raise OpError(f"perm {perm} is not a permutation of the input's {len(x.shape)} dims")
    if tuple(x.shape[p] for p in perm) != y.shape:
        raise OpError(f"perm {perm} of {list(x.shape)} is not the output's shape {list(y.shape)}")
    imp.emit("transpose", [imp.var(x.index)], {"perm": perm}, imp.output(y.index), f"{op.op} #{op.index}")


def _strided_range(dim: int, begin: int, end: int, stride: int, axis: int, masks: dict) -> tuple[int, int, int]:
    """One axis of STRIDED_SLICE as a Python slice: TFLite's StridedSliceStartForAxis and
    StridedSliceEndForAxis (strided_slice_logic.h) resolve the masks and negative indices to a
    start in [0, dim] ([-1, dim - 1] walking backwards) and an end likewise; -1 as a backward
    end means "past index 0", which a Python slice spells -(dim + 1)."""
    bit = 1 << axis
    start = begin + dim if begin < 0 else begin
    start = min(max(start, 0), dim) if stride > 0 else min(max(start, -1), dim - 1)
    if masks["BeginMask"] & bit:
        start = 0 if stride > 0 else dim - 1
    if masks["ShrinkAxisMask"] & bit:
        if not 0 <= start < dim:
            raise OpError(f"axis {axis} is shrunk at index {begin}, outside its {dim} elements")
        return start, start + 1, 1
    stop = end + dim if end < 0 else end
    stop = min(max(stop, 0), dim) if stride > 0 else min(max(stop, -1), dim - 1)
    if masks["EndMask"] & bit:
        stop = dim if stride > 0 else -1
    if stride < 0 and start == -1:
        raise OpError(f"axis {axis} walks backwards from before its first element: the slice is empty")
    return start, (-(dim + 1) if stop == -1 and stride < 0 else stop), stride


@handler("STRIDED_SLICE",
         note="any dtype, constant begin/end/strides, begin/end/shrink masks -> slice (+ reshape when shrinking)")
def _strided_slice(imp: Importer, op: Operator) -> None:
    x, begin_t, end_t, strides_t = _inputs(imp, op, 4, 4)
    y = _output(imp, op)
    _same_type(x, y)
    masks = {k: int(op.options.get(k, 0) or 0) for k in ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask",
                                                         "ShrinkAxisMask")}
    if masks["EllipsisMask"] or masks["NewAxisMask"]:
        raise OpError(f"ellipsis_mask {masks['EllipsisMask']} / new_axis_mask {masks['NewAxisMask']}: only "
                      "models without an ellipsis or new axes import (begin/end/shrink masks do)")
    if op.options.get("Offset"):
        raise OpError("the `offset` form (end relative to begin) is not supported")
    begin, end = _const_ints(begin_t, "begin"), _const_ints(end_t, "end")
    strides = _const_ints(strides_t, "strides")
    rank = len(x.shape)
    if not len(begin) == len(end) == len(strides) <= rank:
        raise OpError(f"begin {begin}, end {end} and strides {strides} must have one length, at most the "
                      f"input's rank {rank}")
    if 0 in strides:
        raise OpError(f"strides {strides} must not hold 0")
    n = len(begin)          # TFLite takes the trailing axes whole (StridedSlicePadIndices)
    ranges = [_strided_range(x.shape[a], begin[a], end[a], strides[a], a, masks) for a in range(n)]
    sliced = [len(range(x.shape[a])[slice(*r)]) for a, r in enumerate(ranges)] + list(x.shape[n:])
    kept = tuple(d for a, d in enumerate(sliced) if not masks["ShrinkAxisMask"] & (1 << a))
    if kept != y.shape or 0 in sliced:
        raise OpError(f"the slice of {list(x.shape)} is {kept} (before shrinking {sliced}), the output "
                      f"{list(y.shape)}: empty or mismatched")
    x_var = imp.var(x.index)
    attrs = {"starts": [r[0] for r in ranges], "ends": [r[1] for r in ranges], "axes": list(range(n)),
             "steps": [r[2] for r in ranges]}
    if tuple(sliced) == kept:
        imp.emit("slice", [x_var], attrs, imp.output(y.index), f"{op.op} #{op.index}")
        return
    full = imp.fresh(f"{x_var}_sliced")
    imp.decls["volatile"].append((f"{full}: {y.dtype}[{', '.join(str(d) for d in sliced)}];",
                                  f"STRIDED_SLICE #{op.index} before its shrunk axes are dropped"))
    imp.emit("slice", [x_var], attrs, full, f"{op.op} #{op.index}")
    imp.emit("reshape", [full], {}, imp.output(y.index), f"{op.op} #{op.index}: shrink_axis_mask "
             f"{masks['ShrinkAxisMask']:#b} drops its axes")


@handler("CONCATENATION", note="float, or int8 whose inputs share the output's quantization; no fused "
                               "activation -> concat")
def _concatenation(imp: Importer, op: Operator) -> None:
    if not op.inputs:
        raise OpError("has no inputs")
    xs = _inputs(imp, op, 1, len(op.inputs))
    y = _output(imp, op)
    act = op.options.get("FusedActivationFunction", "NONE")
    if act != "NONE":
        raise OpError(f"fused activation {act} is not supported (NONE only)")
    for x in xs:
        if x is None:
            raise OpError("an input is missing (-1)")
        _same_type(x, y)
    axis = int(op.options.get("Axis", 0))
    rank = len(y.shape)
    if not -rank <= axis < rank:
        raise OpError(f"axis {axis} is outside the output's rank {rank}")
    imp.emit("concat", [imp.var(x.index) for x in xs], {"axis": axis % rank}, imp.output(y.index),
             f"{op.op} #{op.index}")


@handler("PAD", "PADV2", note="any dtype, constant paddings -> pad (PAD: 0.0, int8: the output's zero point; "
                              "PADV2: the constant value input)")
def _pad(imp: Importer, op: Operator) -> None:
    """TFLite's pad.cc: PAD's border is 0.0 (an int8 tensor's zero point: the output's, which
    TFLite requires equal to the input's), PADV2's the scalar `constant_values` input, stored as is
    (int8: already quantized with the shared parameters)."""
    x, paddings, value_t = (*_inputs(imp, op, 2, 2), None) if op.op == "PAD" else _inputs(imp, op, 2, 3)
    y = _output(imp, op)
    _same_type(x, y)
    pads = _const_ints(paddings, "the paddings")
    if len(pads) != 2 * len(x.shape) or any(p < 0 for p in pads):
        raise OpError(f"paddings {pads} must be [before, after] >= 0 for each of the {len(x.shape)} axes")
    shape = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x.shape))
    if shape != y.shape:
        raise OpError(f"{list(x.shape)} padded by {pads} is {list(shape)}, the output {list(y.shape)}")
    if value_t is not None:
        if value_t.data is None or value_t.data.size != 1 or value_t.dtype != x.dtype:
            raise OpError(f"the constant value must be a constant scalar {x.dtype}")
        if value_t.quantized and value_t.qparams() != y.qparams():
            raise OpError("the constant value must share the output's scale and zero point")
        raw = value_t.data.reshape(-1)[0]
        value = float(raw) if x.dtype.startswith("f") else int(raw)
    else:
        value = int(y.zero[0]) if y.quantized else (0.0 if x.dtype.startswith("f") else 0)
    imp.emit("pad", [imp.var(x.index)], {"pads": pads, "value": value}, imp.output(y.index), f"{op.op} #{op.index}")


@handler("ADD", "SUB", "MUL", note="f32 (broadcasting, fused activations) -> add, sub, mul (+ relu/clamp)",
         float_form=True)
def _float_binary(imp: Importer, op: Operator) -> None:
    a, b = _inputs(imp, op, 2, 2)
    y = _output(imp, op)
    if not _f32(a, b, y):
        raise OpError(f"only the f32 form is supported (inputs {a.dtype}, {b.dtype}, output {y.dtype})")
    _emit_float(imp, op, op.op.lower(), [imp.var(a.index), imp.var(b.index)], {}, y)


_UNARY = {"LOGISTIC": ("sigmoid", {}), "TANH": ("tanh", {}), "RELU": ("relu", {}),
          "RELU6": ("clamp", {"min": 0.0, "max": 6.0})}


@handler(*_UNARY, note="f32 -> sigmoid, tanh, relu, clamp [0, 6]", float_form=True)
def _unary(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
    if not _f32(x, y):
        raise OpError(f"only the f32 form is supported (input {x.dtype}, output {y.dtype})")
    name, attrs = _UNARY[op.op]
    imp.emit(name, [imp.var(x.index)], attrs, imp.output(y.index), f"{op.op} #{op.index}")


@handler("MEAN", note="f32, constant axes -> mean_axis", float_form=True)
def _mean(imp: Importer, op: Operator) -> None:
    x, axes_t = _inputs(imp, op, 2, 2)
    y = _output(imp, op)
    if not _f32(x, y):
        raise OpError(f"only the f32 form is supported (input {x.dtype}, output {y.dtype})")
    rank = len(x.shape)
    axes = sorted({a % rank for a in _const_ints(axes_t, "the axes")})
    keep = bool(op.options.get("KeepDims", False))
    shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keep or a not in axes)
    if shape != y.shape:
        raise OpError(f"the mean of {list(x.shape)} over {axes} is {list(shape)}, the output {list(y.shape)}")
    imp.emit("mean_axis", [imp.var(x.index)], {"axes": axes, "keepdims": keep}, imp.output(y.index),
             f"{op.op} #{op.index}")
