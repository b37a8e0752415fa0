"""The x86 wing's int8 kernels (templates/x86/qconv.c.j2, qlinear.c.j2): the registry's qconv2d
(TFLite's CONV_2D and DEPTHWISE_CONV_2D, integer-only) and qlinear (FULLY_CONNECTED) with AVX2 or
AVX-512BW integer multiply-adds, bit-exact with the portable kernels
(openinfer/targets/c/kernels/quantized.py): the same int32 sums of (x - x_zero) w, wrapping
modulo 2^32 as the reference's int32, then the same scalar requantization per output
(oi_quant.h's oi_q_requantize, qlinear's oi_q_round_f64 of acc * scale in double). The
convolutions requantize 8 outputs at a time where every channel's shift is in [-31, 31] (checked
per call) and act_min <= act_max: templates/x86/qrequant.c.j2, oi_q_requantize's steps one for
one in AVX2 (its comment shows each lane equals the scalar function for every input;
tests/synth/test_avx_qkernels.py checks it against oi_quant.h on adversarial values); any other
output takes oi_q_requantize itself.

The multiply-add is VPMADDWD (int16 x int16, adjacent pairs summed into int32 lanes): x - x_zero
is in [-255, 255] and w in [-128, 127], so a pair sums to at most 2 * 255 * 128 = 65280 in
magnitude and the instruction's one saturating case (both pairs -32768 * -32768) never occurs;
the int32 lanes then add with wrap-around, exact modulo 2^32 in any order. VPMADDUBSW (u8 x s8
into SATURATING int16 pairs) would be faster but can saturate for int8 data, so it is not used.

Kinds of qconv2d taken (any other request, grouped or with a depth multiplier above 1, dynamic
shapes or the planner's fused forms, takes the portable kernel):
- groups == 1 (pointwise and regular): w is widened once per call into the scratch as int16 rows
  of K = KH KW C taps (zero-padded to a whole vector); the window of each output position is
  copied as int16 x - x_zero (0 for a tap in the padding, which adds nothing, as the reference
  skips it), in the same (ky, kx, c) order as a row of w. Then NP positions x 4 output channels
  are summed together, so each vector load of a window serves 4 VPMADDWDs and each load of w NP;
  the 4 channels' lanes are added horizontally once, at the end of the row (VPHADDD, wrapping).
- depthwise with multiplier 1 (groups == C == O): channels across the lanes (8 or 16 int32), a tap
  a VPMOVSXBD load of x; w is widened per call to int32 lanes holding w in their low int16 and 0
  in the high one, so that VPMADDWD against the sign-extended x (whose high int16 is x's sign)
  makes x * w exactly (x_lo w + x_hi 0) with a 5-cycle multiply instead of VPMULLD's 10. A window
  whose taps are all inside x starts at bias - x_zero sum w (folded once per call; exact modulo
  2^32) and runs its taps unrolled; a window reaching into the padding subtracts x_zero from x
  and skips the padding's taps. C % lanes last channels take the portable arithmetic in C.

With AVX512-VNNI (a descriptor listing avx512_vnni; the bundled x86_64-avx512 is the generic
x86-64-v4 and does not) the groups-1 convolution and qlinear multiply with VPDPBUSD instead: 64
u8 x s8 products a vector, summed by 4 into int32 lanes without saturation. x is made unsigned by
x ^ 0x80 = x + 128, so the sums are sum (x + 128) w = sum (x - x_zero) w + (x_zero + 128) sum w,
and (x_zero + 128) sum w is subtracted per output channel (exact modulo 2^32): the convolution
folds sum w per call while it copies w (a tap in the padding holds x_zero ^ 0x80, so it adds
(x_zero + 128) w, which the fold takes back: sum w runs over every tap), qlinear sums each row of w
in the same loop, one more VPDPBUSD against bytes of 1 per load of w (its rows are read once per
row of x). The depthwise kernel keeps VPMADDWD (VPDPBUSD sums 4 adjacent bytes, 4 channels there).

qlinear: a row of x is copied as int16 x - x_zero; 4 rows of w at a time, each vector of x loaded
once for 4 VPMADDWDs against w widened on the fly (VPMOVSXBW; w is read once per row of x, so
widening it in advance would double its traffic); K % (vector width) last k in C. A non-zero w_zero
is folded: sum (x - x_zero)(w - w_zero) = sum (x - x_zero) w - w_zero sum (x - x_zero).

The pool: a layer of at least PAR_MACS multiply-adds (the portable kernels' threshold, through
the same par_rows) splits over the program's threads as the portable kernels do. The
convolutions' units are output rows (batch x output y); what every unit reads is made once, by the
calling thread, before the parallel section (the widened or copied w and the folded biases, in
its scratch), and what a unit writes as it goes (the groups-1 kernel's NP windows) lives at the
start of each thread's own scratch (oi_kctx_scratch: one workspace per thread, each as large as
the largest kernel's), so the caller's windows do not overlap its w. The groups-1 kernel's units
run their positions flat, NP at a time, so the grain is rounded up to rows holding whole blocks
of NP positions: every unit then starts on a block, and only the kernel's last unit ends on
single positions, as the serial kernel does. qlinear's units are (row of x, 4 rows of w) in
row-major order, so a layer of one row (every MLPerf Tiny one) splits w's rows; a unit range
copies each row of x it reaches into its own thread's scratch.
"""

from __future__ import annotations

import math

from ...synth.program import KernelRequest
from ..c.kernels.common import par_rows, static_attr
from ..c.kernels.quantized import PAR_MACS, plain_static
from ..c.kernels.registry import KernelText
from ..geometry import numel
from .renderer import Avx2Renderer, emitter

#: Output positions summed together by the groups-1 convolution, by vector width: with 4
#: channels, NP x 4 accumulators, NP windows' vectors and one of w in registers (16 ymm, 32 zmm)
_POSITIONS = {256: 2, 512: 4}


def _covered(req: KernelRequest) -> bool:
    """Whether a request is a plain static-shape call of the op (no fused or planner form)."""
    return plain_static(req) and not req.pool


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


@emitter("qconv2d")
def _qconv(r: Avx2Renderer, req: KernelRequest, name: str) -> KernelText | None:
    """Integer-only int8 convolutions with groups 1 or depthwise (multiplier 1); None for any other."""
    if not _covered(req):
        return None
    x, w = req.inputs[0], req.inputs[1]
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    _, oh, ow, _ = req.output.shape
    groups = static_attr(req, "groups")
    (sh, sw), (dh, dw), (pt, pl, _, _) = (static_attr(req, a) for a in ("stride", "dilation", "padding"))
    v = r.vec
    l16, l32 = v.bits // 16, v.bits // 32            # int16 lanes, int32 lanes of a vector
    np_ = _POSITIONS[v.bits]
    vnni = _vnni(r)
    if groups == 1:
        kind = "pointwise" if kh == kw == 1 else "regular"
        k = kh * kw * c
        if vnni:
            kp = _round_up(k, 64)
            scratch = kp * (o + np_) + 4 * o          # w rows, NP windows of u8, sum w per channel
        else:
            kp = _round_up(k, l16)
            scratch = 2 * kp * (o + np_)              # w as int16 rows, then NP windows
    elif groups == c == o and cg == 1:
        kind, k, kp = "depthwise", kh * kw, 0
        scratch = 4 * (c // l32 * l32) * (k + 1) + 4      # w as int32 lanes per tap, the folded biases
    else:
        return None
    has_bias = len(req.inputs) > 4
    rows = n * oh                                     # the pool's units: (batch, output y)
    par = par_rows(rows, ow * o * k, PAR_MACS)
    if kind != "depthwise":                           # whole blocks of NP positions a unit but the last
        par["grain"] = _round_up(par["grain"], np_ // math.gcd(ow, np_))
        par["parallel"] = par["parallel"] and rows > par["grain"]
    doc = (f"qconv2d: {x} * {w}{' + bias' if has_bias else ''}, stride {[sh, sw]}, "
           f"padding {list(static_attr(req, 'padding'))}, dilation {[dh, dw]}, groups {groups} -> {req.output}")
    text = r.render("qconv.c.j2", req, name, (), doc=doc, kind=kind, n=n, h=h, w=wd, c=c, o=o, kh=kh, kw=kw, cg=cg,
                    oh=oh, ow=ow, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, k=k, kp=kp, taps=kh * kw, l16=l16,
                    l32=l32, np=np_, positions=n * oh * ow, has_bias=has_bias, vnni=vnni and groups == 1, **par,
                    **{a: static_attr(req, a) for a in ("x_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, scratch)


@emitter("qlinear")
def _qlinear(r: Avx2Renderer, req: KernelRequest, name: str) -> KernelText | None:
    """Integer-only int8 fully connected layers, static shapes; None for any other request."""
    if not _covered(req):
        return None
    n, k = req.inputs[1].shape
    rows = numel(req.output.shape) // n
    vnni = _vnni(r)
    l16 = 64 if vnni else r.vec.bits // 16           # k a step: bytes (VNNI) or int16 lanes
    has_bias = len(req.inputs) > 3
    blocks = -(-n // 4)                              # the pool's units: (row of x, 4 rows of w)
    doc = f"qlinear: {req.inputs[0]} * {req.inputs[1]}^T{' + bias' if has_bias else ''} -> {req.output}"
    text = r.render("qlinear.c.j2", req, name, (), doc=doc, rows=rows, k=k, n=n, kv=k // l16 * l16, l16=l16,
                    has_bias=has_bias, vnni=vnni, **par_rows(rows * blocks, 4 * k, PAR_MACS),
                    **{a: static_attr(req, a) for a in ("x_zero", "w_zero", "y_zero", "act_min", "act_max")})
    # a row of x: as int16 x - x_zero, or as u8 x ^ 0x80 zero-padded to whole vectors (VNNI)
    return KernelText(text, _round_up(k, 64) if vnni else 2 * max(k, 1))


def _vnni(r: Avx2Renderer) -> bool:
    """Whether the kernels may use VPDPBUSD: 512-bit kernels of a descriptor listing avx512_vnni."""
    return r.vec.bits == 512 and "avx512_vnni" in r.device.features
