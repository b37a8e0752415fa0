"""The TFLite operators the importer supports, one handler each, registered in `HANDLERS` (the one
table of what imports: `openinfer import --list-ops` prints it).

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


HANDLERS: dict[str, Handler] = {}


def handler(*ops: str, note: str):
    def register(fn):
        for op in ops:
            HANDLERS[op] = Handler(fn, note)
        return fn
    return register


def list_ops() -> str:
    """The coverage, one operator a line."""
    width = max(len(k) for k in HANDLERS)
    return "\n".join(f"{k:<{width}}  {HANDLERS[k].note}" for k in sorted(HANDLERS)) + "\n"


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


# ----------------------------------------------------------------------------------- handlers

@handler("CONV_2D", "DEPTHWISE_CONV_2D",
         note="int8 (per-channel weights, fused RELU/RELU6/RELU_N1_TO_1) -> qconv2d (depthwise: groups = C)")
def _conv(imp: Importer, op: Operator) -> None:
    x, w, b = _inputs(imp, op, 2, 3)
    y = _output(imp, op)
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


@handler("FULLY_CONNECTED", note="int8 (per-tensor or per-channel weights, fused activations) -> qlinear")
def _fully_connected(imp: Importer, op: Operator) -> None:
    x, w, b = _inputs(imp, op, 2, 3)
    y = _output(imp, op)
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


@handler("AVERAGE_POOL_2D", "MAX_POOL_2D",
         note="int8 (input and output share their quantization) -> qavg_pool2d, qmax_pool2d")
def _pool(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
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


@handler("SOFTMAX", note="int8 (output scale 1/256, zero point -128, as TFLite requires) -> qsoftmax")
def _softmax(imp: Importer, op: Operator) -> None:
    (x,) = _inputs(imp, op, 1, 1)
    y = _output(imp, op)
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
