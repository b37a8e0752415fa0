"""The DSP extension's int8 fully connected layer (templates/mcu/qlinear.c.j2): the registry's
qlinear (TFLite's FULLY_CONNECTED, integer-only) on an Armv7E-M or Armv8-M Mainline core
(Cortex-M4, M7, M33) with SMLAD / SXTB16, bit-exact with the portable kernel
(openinfer/targets/c/kernels/quantized.py): the same int32 sums of (x - x_zero)(w - w_zero),
and round(acc * scale) in double reproduced exactly in integers (templates/mcu/qrequant.c.j2).
Every static-shape request with K <= 4095 takes it (any N, rows, zero points); dynamic shapes,
a longer K and the planner's fused forms take the portable kernel.
"""

from __future__ import annotations

from ...synth.program import KernelRequest
from ..c.kernels.common import static_attr
from ..c.kernels.quantized import plain_static
from ..c.kernels.registry import KernelText
from ..env import render
from ..geometry import numel


def qlinear_kernel(req: KernelRequest, name: str, proto: str) -> KernelText | None:
    """The kernel text of a qlinear request the DSP kernel covers, with its scratch; None for any other."""
    if not plain_static(req):
        return None
    x, w = req.inputs[0], req.inputs[1]
    n, k = w.shape
    if not 0 < k <= 4095:            # the assembly's loads of w reach row + 1 at offset K (12 bits)
        return None
    rows = numel(req.output.shape) // n
    has_bias = len(req.inputs) > 3
    doc = f"qlinear: {x} * {w}^T{' + bias' if has_bias else ''} -> {req.output}"
    text = render("mcu/qlinear.c.j2", name=name, proto=proto, doc=doc, rows=rows, k=k, n=n, has_bias=has_bias,
                  **{a: static_attr(req, a) for a in ("x_zero", "w_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, 2 * k)      # x - x_zero of a row as int16 (groups of 4 reordered, then the K % 4 last)
