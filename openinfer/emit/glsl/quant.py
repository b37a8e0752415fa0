"""dequant_matmul in GLSL: x @ ((w - zero_point) * scale) with i8/u8/i4/u4 weights read as
stored (8-bit storage, or the bytes of packed nibbles) and dequantized in registers.

One invocation per output element sums x[i, k] * (w[k, j] - zp) in f32 (f64 for f64 x) over k and
multiplies by the column's scale once; adjacent invocations read adjacent columns of a weight
row, so the reads of a subgroup coalesce (packed nibbles: two invocations share a byte).
"""

from __future__ import annotations

from ...synth.program import KernelRequest
from . import Body, family
from .types import KernelCtx, lit


@family("dequant_matmul")
def emit_dequant_matmul(req: KernelRequest, k: KernelCtx) -> Body:
    x, w, scale = req.inputs[:3]
    kk, n = w.shape
    ct = k.ct(x.dtype)
    channel = "col" if scale.numel > 1 else "0u"
    q = k.load(w.dtype, "in1", f"q * {n}u + col", "int")
    if len(req.inputs) > 3:
        q = f"({q} - in3[{channel}])"
    lines = [f"uint row = i / {n}u;", f"uint col = i % {n}u;", f"{ct} s = {lit(ct, 0)};",
             f"for (uint q = 0u; q < {kk}u; ++q)",
             f"    s += {k.load(x.dtype, 'in0', f'row * {kk}u + q', ct)} * {ct}({q});",
             f"return s * {ct}(in2[{channel}]);"]
    doc = (f"dequant_matmul: {x.dtype.name}{list(x.shape)} @ dequantize({w.dtype.name}{list(w.shape)}, "
           f"{'per-channel' if scale.numel > 1 else 'per-tensor'} scale"
           f"{', zero point' if len(req.inputs) > 3 else ''})")
    return Body(value="\n".join(lines), vct=ct, doc=doc)
