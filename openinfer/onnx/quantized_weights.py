"""Quantised weights kept quantised: a constant 2-D int8/uint8 (or int4/uint4) weight of a
DequantizeLinear that only MatMuls take as B (per tensor, or per output channel) is a `.oinf` v2
quantised tensor with its scales (and zero points) as quant parameters, and each such MatMul a
`dequant_matmul` reading them through the quant keys `W#scale` / `W#zero_point`: the weights are
never stored dequantized. MatMulInteger's constant B is one too (scale 1).

Used by the handlers of DequantizeLinear and MatMulInteger (handlers/quant.py, which decide what
is such a weight) and of MatMul (handlers/nn.py), and by the importer for int4/uint4 initializers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..oinf import QuantParams, TensorSpec
from .context import Dim, NodeContext, Value, quoted, sanitize

#: ONNX element types of the packed 4-bit integers -> the `.oinf` dtype their weights are stored in.
PACKED_INT4 = {22: "i4", 21: "u4"}


@dataclass
class QuantizedWeight:
    """A constant 2-D weight [K, N] of a DequantizeLinear that only MatMuls (as B) consume."""

    onnx_name: str                 # the DequantizeLinear's input (the quantised initializer)
    q: np.ndarray                  # the stored integers, int8 or uint8 (int4/uint4 values for i4/u4)
    dtype: str                     # i8, u8, i4 or u4
    scale: np.ndarray              # f32, [N] or [1]
    zero_point: np.ndarray | None  # i32 like scale; None where every zero point is 0 (symmetric)
    float_dtype: str               # the DequantizeLinear's output dtype
    vars: tuple[str, str, str | None] | None = None    # its declared weight, scale and zero point


def quantized_matmul(c: NodeContext, a: Value, b: Value, out: str) -> bool:
    """Emits a MatMul whose B is a quantised weight (see `_matmul_weight`, handlers/quant.py) as `dequant_matmul`;
    False where B is not one or A is a constant (then the MatMul takes the dequantized constant)."""
    weight = c.imp.quantized.get(c.node.input[1])
    if weight is None or a.const is not None or a.dtype != weight.float_dtype or not a.dims:
        return False
    dequant_matmul(c, c.var(a, 0), a, weight, out=out)
    return True


def dequant_matmul(c: NodeContext, name: str, a: Value, weight: QuantizedWeight, *, out: str | None = None,
                   temp: str | None = None) -> Value:
    """`dequant_matmul` of the variable `name` (of `a`'s dtype and dims) by the quantised weight,
    A of more than two dims flattened to [M, K] around it."""
    if a.dims[-1].size != weight.q.shape[0]:
        c.fail(f"inner dims differ: {list(a.shape)} @ {list(weight.q.shape)}")
    w, scale, zero_point = _declare_weight(c, weight)
    n = Dim(int(weight.q.shape[1]))
    args = [w, scale] + ([zero_point] if zero_point else [])
    base = out or temp
    if len(a.dims) <= 2:
        return c.emit("dequant_matmul", [name] + args, {}, a.dtype, a.dims[:-1] + (n,), out=out, temp=temp)
    rows = Dim(int(np.prod(a.shape[:-1])))
    flat = c.emit("reshape", [name], {}, a.dtype, (rows, a.dims[-1]), temp=f"{base}_rows")
    y = c.emit("dequant_matmul", [flat.var] + args, {}, a.dtype, (rows, n), temp=f"{base}_flat")
    return c.emit("reshape", [y.var], {}, a.dtype, a.dims[:-1] + (n,), out=out, temp=temp)


def _declare_weight(c: NodeContext, weight: QuantizedWeight) -> tuple[str, str, str | None]:
    """Declares the quantised weight (once) with its quant parameters, and its scale and zero
    point through the quant keys."""
    if weight.vars is not None:
        return weight.vars
    imp = c.imp
    var = imp.fresh(sanitize(weight.onnx_name))       # its own name: the initializer may be used elsewhere too
    k, n = weight.q.shape
    per_channel = weight.scale.size != 1 or (weight.zero_point is not None and weight.zero_point.size != 1)
    scale = np.broadcast_to(weight.scale, (n,)) if per_channel else weight.scale
    zero_point = weight.zero_point
    if zero_point is not None and per_channel:
        zero_point = np.broadcast_to(zero_point, (n,))
    quant = (QuantParams.per_channel(1, np.ascontiguousarray(scale), None if zero_point is None
                                     else np.ascontiguousarray(zero_point))
             if per_channel else QuantParams.per_tensor(float(scale[0]), None if zero_point is None
                                                        else int(zero_point[0])))
    imp.tensors[var] = TensorSpec(np.ascontiguousarray(weight.q), dtype=weight.dtype, quant=quant)
    note = f"ONNX {quoted(weight.onnx_name)}, quantised (scales in the .oinf)"
    imp.decls["constant"].append((f"{var}: {weight.dtype}[{k}, {n}];", note))
    count = n if per_channel else 1
    scale_var = imp.fresh(f"{var}_scale")
    imp.decls["constant"].append((f'{scale_var}: f32[{count}] @ref("{var}#scale");', f"{var}'s scales"))
    zp_var = None
    if zero_point is not None:
        zp_var = imp.fresh(f"{var}_zero_point")
        imp.decls["constant"].append((f'{zp_var}: i32[{count}] @ref("{var}#zero_point");',
                                      f"{var}'s zero points"))
    weight.vars = (var, scale_var, zp_var)
    return weight.vars


def packed_initializer(tensor) -> tuple[np.ndarray, str] | None:
    """An int4/uint4 initializer as int8/uint8 values and its packed dtype; None for other types."""
    import onnx.numpy_helper as nh

    packed = PACKED_INT4.get(tensor.data_type)
    if packed is None:
        return None
    return np.asarray(nh.to_array(tensor)).astype(np.int8 if packed == "i4" else np.uint8), packed
