"""Quantised ONNX: DequantizeLinear, QuantizeLinear, DynamicQuantizeLinear and MatMulInteger.

A DequantizeLinear of a constant 2-D int8/uint8 (or int4/uint4) weight, per tensor or per output
channel (axis 1), whose every consumer is a MatMul taking it as B, becomes a `.oinf` v2 quantised
tensor with its scales (and zero points) as quant parameters, and each such MatMul a
`dequant_matmul` reading them through the quant keys `W#scale` / `W#zero_point`: the weights are
never stored dequantized. Every other DequantizeLinear of a constant (blocked, per input channel,
feeding something else) is dequantized at import (the MatMul then takes the float weight), and one
of a computed tensor is `cast`, `sub`, `mul`. QuantizeLinear and DynamicQuantizeLinear are written
with the registry's element-wise ops and reductions (rounding half to even by a `nearest` cast,
saturating by the cast to the 8-bit type), as onnxruntime computes them, so the QDQ and the
dynamic (MatMulInteger) exports of `onnxruntime.quantization` import whole. MatMulInteger with a
constant B is a `dequant_matmul` of B (scale 1, its zero point) on A minus its zero point, summed
in f32 where every partial sum is an exact integer there (else in f64), cast to i32.

The weights kept quantised, and the MatMuls that read them, are openinfer/onnx/quantized_weights.py.
"""

from __future__ import annotations

import numpy as np

from ..context import FLOATS, NUMPY_DTYPES, ONNX_DTYPES, Dim, NodeContext, Value, handler, matmul_dims, scalar_constant
from ..quantized_weights import QuantizedWeight, dequant_matmul

_QUANT_DTYPES = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767), "u16": (0, 65535)}


def _params(c: NodeContext, shape: tuple[int, ...], values: np.ndarray, axis: int, block: int,
            what: str) -> np.ndarray:
    """A scale or zero point as an array that broadcasts against the quantised tensor's `shape`:
    per tensor, per `axis`, or in blocks of `block` along it (repeated at import)."""
    values = np.asarray(values)
    if values.size == 1 and block == 0:
        return values.reshape(())
    rank = len(shape)
    if not -rank <= axis < rank:
        c.fail(f"axis {axis} is out of range for a rank-{rank} input")
    axis %= rank
    if block == 0:
        if values.shape != (shape[axis],):
            c.fail(f"{what} of shape {list(values.shape)}: expected [1] or [{shape[axis]}] (axis {axis})")
        return values.reshape([shape[axis] if k == axis else 1 for k in range(rank)])
    want = [-(-shape[k] // block) if k == axis else shape[k] for k in range(rank)]
    if list(values.shape) != want:
        c.fail(f"{what} of shape {list(values.shape)}: expected {want} (block_size {block} along axis {axis})")
    return np.repeat(values, block, axis=axis)[tuple(slice(0, n) for n in shape)]


def _dequant_attrs(c: NodeContext, scale: Value) -> tuple[int, int]:
    out_dtype = int(c.attrs.get("output_dtype", 0))
    if out_dtype and ONNX_DTYPES.get(out_dtype) != scale.dtype:
        c.fail(f"output_dtype {out_dtype} other than the scale's dtype ({scale.dtype}) is not supported")
    return int(c.attrs.get("axis", 1)), int(c.attrs.get("block_size", 0))


@handler("DequantizeLinear", note="a constant 2-D i8/u8/i4/u4 weight (per tensor, or per output channel: axis 1) "
                                  "that only MatMuls take as B: stored quantised (.oinf v2 scales), each MatMul a "
                                  "dequant_matmul; other constants dequantized at import; computed inputs as cast, "
                                  "sub, mul")
def _dequantize_linear(c: NodeContext) -> None:
    c.allow("axis", "block_size", "output_dtype")
    x, scale, zp = c.inputs(2, 3)
    (out,) = c.outputs()
    s = c.const_input(scale, "x_scale")
    z = c.const_input(zp, "x_zero_point")
    if scale.dtype not in FLOATS:
        c.fail(f"a scale of dtype {scale.dtype} (float dtypes only)")
    if x.dtype not in _QUANT_DTYPES and x.dtype != "i32":
        c.fail(f"an input of dtype {x.dtype} is not supported (int8, uint8, int16, uint16, int32, int4, uint4 are)")
    if zp is not None and zp.dtype != x.dtype:
        c.fail(f"a zero point of dtype {zp.dtype} for an input of dtype {x.dtype} (ONNX requires one)")
    axis, block = _dequant_attrs(c, scale)
    full_scale = _params(c, x.shape, s, axis, block, "x_scale")
    full_zp = None if z is None else _params(c, x.shape, z, axis, block, "x_zero_point")
    if x.const is not None:
        centred = x.const.astype(np.float32) - (0 if full_zp is None else full_zp.astype(np.float32))
        value = c.imp.const_value((centred * full_scale).astype(NUMPY_DTYPES[scale.dtype]))
        c.result(out, value)
        weight = _matmul_weight(c, x, s, z, axis, block, scale.dtype)
        if weight is not None:
            c.imp.quantized[out] = weight
        return
    dtype = scale.dtype
    y = c.emit("cast", [c.var(x, 0)], {"to": dtype}, dtype, x.dims, out=out)
    if full_zp is not None and np.any(full_zp != 0):
        zn = c.imp.new_constant(full_zp.astype(NUMPY_DTYPES[dtype]), f"{out}_zero_point",
                                f"{c.label} zero point as {dtype}")
        c.emit_inplace("sub", [y.var, zn], y)
    sn = c.imp.new_constant(full_scale.astype(NUMPY_DTYPES[dtype]), f"{out}_scale", f"{c.label} scale")
    c.emit_inplace("mul", [y.var, sn], y)


def _matmul_weight(c: NodeContext, x: Value, s: np.ndarray, z: np.ndarray | None, axis: int, block: int,
                   float_dtype: str) -> QuantizedWeight | None:
    """The weight `dequant_matmul` can take as it is stored, where this DequantizeLinear's layout
    fits it and MatMuls alone consume it as B; else None (it is dequantized at import)."""
    imp = c.imp
    out = c.node.output[0]
    dtype = imp.packed.get(c.node.input[0], x.dtype)
    users = imp.consumers.get(out, [])
    if (dtype not in ("i8", "u8", "i4", "u4") or len(x.shape) != 2 or block != 0 or not users
            or out in imp.outputs):
        return None
    if any(imp.g.node[u].op_type != "MatMul" or list(imp.g.node[u].input).index(out) != 1
           or imp.g.node[u].input[0] == out for u in users):
        return None
    n = x.shape[1]
    if s.size != 1 and (axis % 2 != 1 or s.shape != (n,)):
        return None                 # per input channel: dequant_matmul scales the output channels
    zero_point = None if z is None or not np.any(z != 0) else np.asarray(z, np.int32).reshape(-1)
    return QuantizedWeight(c.node.input[0], x.const, dtype, np.asarray(s, np.float32).reshape(-1), zero_point,
                           float_dtype)


def _quantize(c: NodeContext, x: Value, scale: str, zero_point: str | None, to: str, out: str) -> Value:
    """saturate(round_half_even(x / scale) + zero_point) as `to`, from float x: the zero point a
    float variable or constant holding an integer (or None for 0)."""
    ratio = c.emit("div", [c.var(x, 0), scale], {}, x.dtype, x.dims,
                   temp=f"{out}_ratio")
    rounded = c.emit("cast", [ratio.var], {"to": "i32", "rounding_mode": '"nearest"'}, "i32", x.dims,
                     temp=f"{out}_rounded")
    shifted = c.emit("cast", [rounded.var], {"to": x.dtype}, x.dtype, x.dims, temp=f"{out}_shifted")
    if zero_point is not None:
        c.emit_inplace("add", [shifted.var, zero_point], shifted)
    return c.emit("cast", [shifted.var], {"to": to, "rounding_mode": '"nearest"'}, to, x.dims, out=out)


@handler("QuantizeLinear", note="div by the scale, a nearest (half to even) cast to i32, add the zero point, "
                                "a saturating cast to i8/u8/i16/u16 (per tensor, per axis or blocked)")
def _quantize_linear(c: NodeContext) -> None:
    c.allow("axis", "block_size", "output_dtype", "saturate", "precision")
    x, scale, zp = c.inputs(2, 3)
    (out,) = c.outputs()
    s = c.const_input(scale, "y_scale")
    z = c.const_input(zp, "y_zero_point")
    c.float_input(x)
    to = zp.dtype if zp is not None else ONNX_DTYPES.get(int(c.attrs.get("output_dtype", 0)) or 2)
    if zp is not None and c.node.input[2] in c.imp.packed:
        to = c.imp.packed[c.node.input[2]]      # the registry's cast produces no packed type
    if to not in _QUANT_DTYPES:
        c.fail(f"a quantised dtype of {to or 'ONNX element type ' + str(c.attrs.get('output_dtype'))} is not "
               f"supported (int8, uint8, int16, uint16 are)")
    if int(c.attrs.get("saturate", 1)) != 1:
        c.fail("saturate=0 is not supported (it applies to float8 outputs, which are not)")
    if int(c.attrs.get("precision", 0)):
        c.fail("precision is not supported (the division runs in the input's dtype)")
    axis, block = int(c.attrs.get("axis", 1)), int(c.attrs.get("block_size", 0))
    full_scale = _params(c, x.shape, s, axis, block, "y_scale").astype(NUMPY_DTYPES[x.dtype])
    full_zp = None if z is None else _params(c, x.shape, z, axis, block, "y_zero_point")
    if x.const is not None:
        lo, hi = _QUANT_DTYPES[to]
        with np.errstate(all="ignore"):
            q = np.rint(x.const / full_scale) + (0 if full_zp is None else full_zp.astype(np.float64))
        c.result(out, c.imp.const_value(np.clip(q, lo, hi).astype(NUMPY_DTYPES[to])))
        return
    sn = c.imp.new_constant(full_scale, f"{out}_scale", f"{c.label} scale")
    zn = None
    if full_zp is not None and np.any(full_zp != 0):
        zn = c.imp.new_constant(full_zp.astype(NUMPY_DTYPES[x.dtype]), f"{out}_zero_point",
                                f"{c.label} zero point as {x.dtype}")
    _quantize(c, x, sn, zn, to, out)


@handler("DynamicQuantizeLinear", note="as ONNX defines it: max_axis/min_axis over all axes for the u8 scale and "
                                       "zero point, then as QuantizeLinear (f32)")
def _dynamic_quantize_linear(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    y_out, scale_out, zp_out = (c.outputs(3) + ["", ""])[:3]
    if x.dtype != "f32":
        c.fail(f"an input of dtype {x.dtype} (ONNX: float only)")
    if x.const is not None or not x.dims:
        c.fail("a constant or scalar input is not supported")
    axes = list(range(len(x.dims)))
    name = c.var(x, 0)
    top = c.emit("max_axis", [name], {"axes": axes}, "f32", (), temp=f"{y_out}_max")
    hi = c.emit("clamp", [top.var], {"min": 0.0}, "f32", (), temp=f"{y_out}_max0")
    bottom = c.emit("min_axis", [name], {"axes": axes}, "f32", (), temp=f"{y_out}_min")
    lo = c.emit("clamp", [bottom.var], {"max": 0.0}, "f32", (), temp=f"{y_out}_min0")
    # the scale: (max - min) / 255, with a range of 1 where max == min (x all zero): sign() is 0
    # exactly there, so the range gains 1 - sign(range), which is 0 anywhere else. The DSL's
    # scalar constants are [1], so from here on the scalars are [1], reshaped to [] as outputs.
    one_dim = (Dim(1),)
    span = c.emit("sub", [hi.var, lo.var], {}, "f32", (), temp=f"{y_out}_range")
    sign = c.emit("sign", [span.var], {}, "i8", (), temp=f"{y_out}_range_sign")
    nonzero = c.emit("cast", [sign.var], {"to": "f32"}, "f32", (), temp=f"{y_out}_range_nonzero")
    one = scalar_constant(c, 1.0, "f32", f"{y_out}_one", "1")
    missing = c.emit("sub", [one, nonzero.var], {}, "f32", one_dim, temp=f"{y_out}_range_missing")
    whole = c.emit("add", [span.var, missing.var], {}, "f32", one_dim, temp=f"{y_out}_range_nonempty")
    levels = scalar_constant(c, 255.0, "f32", f"{y_out}_levels", "the u8 range, 255")
    scale = c.emit("div", [whole.var, levels], {}, "f32", one_dim, temp=f"{y_out}_scale")
    if scale_out:
        c.emit("reshape", [scale.var], {}, "f32", (), out=scale_out)
    # the zero point: saturate(round_half_even(0 - min / scale))
    zf = c.emit("div", [lo.var, scale.var], {}, "f32", one_dim, temp=f"{y_out}_zero_point_f")
    c.emit_inplace("neg", [zf.var], zf)
    zp = c.emit("cast", [zf.var], {"to": "u8", "rounding_mode": '"nearest"'}, "u8", one_dim,
                temp=f"{y_out}_zero_point")
    if zp_out:
        c.emit("reshape", [zp.var], {}, "u8", (), out=zp_out)
    zero_point = c.emit("cast", [zp.var], {"to": "f32"}, "f32", one_dim, temp=f"{y_out}_zero_point_f32")
    if y_out:
        _quantize(c, x, scale.var, zero_point.var, "u8", y_out)


def _exact_in_f32(k: int, a_dtype: str, b: np.ndarray, b_zp: np.ndarray | None) -> bool:
    """Whether every partial sum of a MatMulInteger is an exact f32 integer (below 2**24)."""
    lo, hi = _QUANT_DTYPES[a_dtype]
    centred = b.astype(np.int64) - (0 if b_zp is None else b_zp.astype(np.int64))
    return k * (hi - lo) * int(np.abs(centred).max(initial=0)) < 2 ** 24


@handler("MatMulInteger", note="a constant 2-D B: dequant_matmul (scale 1, B's zero point) on A minus its (constant "
                               "or computed scalar) zero "
                               "point, in f32 where exact (else f64), cast to i32; a computed B: matmul in f64")
def _matmul_integer(c: NodeContext) -> None:
    c.allow()
    a, b, a_zp, b_zp = c.inputs(2, 4)
    (out,) = c.outputs()
    for v, what in ((a, "A"), (b, "B")):
        if v.dtype not in ("i8", "u8"):
            c.fail(f"{what} of dtype {v.dtype} (int8 and uint8 only)")
    az = None if a_zp is None or a_zp.const is None else a_zp.const
    bz = c.const_input(b_zp, "b_zero_point")
    dims = matmul_dims(c, a.dims, b.dims)
    k = a.shape[-1]
    if a_zp is not None and (a_zp.dtype != a.dtype or int(np.prod(a_zp.shape)) != 1):
        c.fail(f"an a_zero_point of dtype {a_zp.dtype} and shape {list(a_zp.shape)}: a scalar of A's dtype is "
               f"supported")
    exact = b.const is not None and len(b.dims) == 2 and _exact_in_f32(k, a.dtype, b.const, bz)
    acc = "f32" if exact else "f64"
    af = c.emit("cast", [c.var(a, 0)], {"to": acc}, acc, a.dims, temp=f"{out}_a")
    if az is not None and np.any(az != 0):
        zn = scalar_constant(c, float(az.reshape(())), acc, f"{out}_a_zero_point", f"{c.label} a_zero_point")
        c.emit_inplace("sub", [af.var, zn], af)
    elif a_zp is not None and az is None:       # computed (DynamicQuantizeLinear's): a scalar, broadcast
        zv = c.emit("cast", [c.var(a_zp, 2)], {"to": acc}, acc, a_zp.dims, temp=f"{out}_a_zero_point")
        af = c.emit("sub", [af.var, zv.var], {}, acc, a.dims, temp=f"{out}_a_centred")
    if b.const is not None and len(b.dims) == 2:
        n = b.shape[1]
        if bz is not None and bz.size not in (1, n):
            c.fail(f"a b_zero_point of shape {list(bz.shape)}: expected [1] or [{n}]")
        zero_point = None if bz is None or not np.any(bz != 0) else np.asarray(bz, np.int32).reshape(-1)
        weight = QuantizedWeight(c.node.input[1], b.const, b.dtype, np.ones(1, np.float32), zero_point, acc)
        shared = c.imp.quantized.get(c.node.input[1])       # B of an earlier MatMulInteger, declared
        if shared is not None and (shared.float_dtype, str(shared.zero_point)) == (acc, str(zero_point)):
            weight = shared
        c.imp.quantized[c.node.input[1]] = weight
        y = dequant_matmul(c, af.var, af, weight, temp=f"{out}_{acc}")
    else:
        bf = c.emit("cast", [c.var(b, 1)], {"to": acc}, acc, b.dims, temp=f"{out}_b")
        if bz is not None and np.any(bz != 0):
            if bz.size != 1 and bz.shape != (b.shape[-1],):
                c.fail(f"a b_zero_point of shape {list(bz.shape)}: expected a scalar or [{b.shape[-1]}]")
            zn = c.imp.new_constant(bz.astype(np.float64 if acc == "f64" else np.float32), f"{out}_b_zero_point",
                                    f"{c.label} b_zero_point")
            c.emit_inplace("sub", [bf.var, zn], bf)
        y = c.emit("matmul", [af.var, bf.var], {}, acc, dims, temp=f"{out}_{acc}")
    c.emit("cast", [y.var], {"to": "i32", "rounding_mode": '"nearest"'}, "i32", dims, out=out)
