"""The DSP extension's int8 convolution (templates/mcu/qconv.c.j2): the registry's qconv2d
(TFLite's CONV_2D and DEPTHWISE_CONV_2D, integer-only) on an Armv7E-M or Armv8-M Mainline core
(Cortex-M4, M7, M33) with SMLAD / SXTB16, bit-exact with the portable kernel
(openinfer/targets/c/kernels/quantized.py): the same int32 sums of (x - x_zero) w, the same
oi_quant.h requantization.

Two kinds of convolution take it: groups == 1 (pointwise and regular, K = KH KW C <= 4095),
whose windows are copied as int16 into the kernel's scratch (two output positions at a time,
interleaved per 4 taps, 4 bytes a tap each) and summed for two output channels at a time with
SMLAD in an inline-assembly loop; and depthwise with depth multiplier 1 (groups == C == O, at
most 128 taps, a window's farthest tap at most 4095 bytes from its first), 4 channels at a
time, the weights packed per call into the scratch as int16 pairs (8 bytes a tap per 4
channels), a window in the padding reading x_zero there from a row of it in the scratch. Any
other request (grouped, a depth multiplier above 1, dynamic shapes, larger K or windows) takes
the portable kernel. The requantization goes through a per-channel table made at each call in
front of the scratch (templates/mcu/qrequant.c.j2).
"""

from __future__ import annotations

from ...synth.program import KernelRequest
from ..c.kernels.common import static_attr
from ..c.kernels.quantized import plain_static
from ..c.kernels.registry import KernelText
from ..env import render

#: Bytes of a channel's entry in the requantization table (templates/mcu/qrequant.c.j2: two
#: int64 rounding constants, two int32)
_RQ_BYTES = 24


def qconv_kernel(req: KernelRequest, name: str, proto: str) -> KernelText | None:
    """The kernel text of a qconv2d request the DSP kernel covers, with its scratch; None for any other."""
    if not plain_static(req):
        return None
    x, w = req.inputs[0], req.inputs[1]
    out = req.output
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    _, oh, ow, _ = out.shape
    groups = static_attr(req, "groups")
    (sh, sw), (dh, dw), (pt, pl, _, _) = (static_attr(req, a) for a in ("stride", "dilation", "padding"))
    if groups == 1:
        kind = "pointwise" if kh == kw == 1 else "regular"
        k = kh * kw * c
        if k > 4095:              # the assembly's loads of the second channel's weights at offset K (12 bits)
            return None
        scratch = 2 * 2 * (k // 4 * 4 + (4 if k % 4 else 0))       # two windows of int16, whole groups of 4
    elif groups == c == o and cg == 1 and kh * kw <= 128 and ((kh - 1) * dh * wd + (kw - 1) * dw) * c <= 4095:
        # (the assembly's loads: a tap's weights at offset 8 t, x at the tap's offset, 12 bits)
        kind, k = "depthwise", kh * kw
        scratch = max(1, c // 4) * (k * 8 + 20)    # per 4 channels: per tap two int16 pairs; 4 sums; 4 x_zero
    else:
        return None
    scratch += o * _RQ_BYTES                                # the requantization table first
    doc = (f"qconv2d: {x} * {w}{' + bias' if len(req.inputs) > 4 else ''}, stride {[sh, sw]}, "
           f"padding {list(static_attr(req, 'padding'))}, dilation {[dh, dw]}, groups {groups} -> {out}")
    text = render("mcu/qconv.c.j2", name=name, proto=proto, doc=doc, kind=kind, n=n, h=h, w=wd, c=c, o=o, kh=kh,
                  kw=kw, cg=cg, oh=oh, ow=ow, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, k=k, taps=kh * kw,
                  positions=n * oh * ow, has_bias=len(req.inputs) > 4,
                  **{a: static_attr(req, a) for a in ("x_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, scratch)
