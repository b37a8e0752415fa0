"""The NEON wing's integer-only int8 kernels (templates/arm/qconv.c.j2, qlinear.c.j2, qadd.c.j2):
the registry's qconv2d (TFLite's CONV_2D and DEPTHWISE_CONV_2D), qlinear (FULLY_CONNECTED) and
qadd / qsub (ADD, SUB), bit-exact with the portable kernels (openinfer/targets/c/kernels/quantized.py): the same int32
sums modulo 2^32 (integer sums are exact in any order; every instruction used wraps, none
saturates), then the same requantization (below).

The int8 dot product of 16 bytes is the families' one difference (`sdot` of the renderer):
- Armv8.2-A (V82Renderer): SDOT, 4 int8 x int8 products summed into each int32 lane, one
  instruction per 16 multiply-adds;
- Armv8.0-A (NeonRenderer): SMULL / SMULL2 (int8 x int8 products are exact in int16: |p| <=
  2^14) and SADALP (pairwise add of the int16 products into the int32 lanes), 4 instructions.
Both multiply x as stored, not x - x_zero (which needs 9 bits), so the zero point is folded:
sum (x - zx) w = sum x w - zx sum w, exact modulo 2^32, with sum w per output channel computed
once per call (a vector pass over w) and folded with the bias into each channel's start value.

qconv2d, groups == 1 (pointwise and regular): each output position's window is K = KH KW C
contiguous bytes: x itself for a pointwise convolution without padding, else a copy into the
thread's workspace (memset / memcpy per row of taps; a tap in the padding holds x_zero, which the
fold turns into 0, as the reference's skipped tap). A block of 4 output channels x PB positions
(PB = 4 with SDOT: 16 accumulators; 2 on Armv8.0-A, whose dot is 4 instructions) sums K 16 bytes
at a time: 4 + PB loads per 4 PB dot products. The 4-lane sums reduce with 3 ADDPs per position.
K % 16 >= 8 takes one 8-byte dot; K % 8: a regular convolution's windows are zero-padded and
each channel's last weights packed per call, zero-padded to 8, for one more 8-byte dot (VWW's and
IC's first layers have K = 27), a pointwise convolution's (x read in place) scalar multiply-adds.
The units of the pool are the blocks of positions.
qconv2d, depthwise with multiplier 1 (groups == C == O): channels across lanes, 8 at a time:
x - x_zero widened exactly to int16 (SSUBL), times the int16 weights (transposed per call into
[tap][channel]) with SMLAL / SMLAL2 into 4 + 4 int32 lanes; padding taps are skipped as the
reference does (windows inside x have their taps unrolled at static offsets). C % 8 channels
take scalar multiply-adds. Units: the output rows.
qlinear: a block of 4 rows of w against a row of x, 16 k at a time, with sum w in the same loop
(SDOT with ones; SADDLP / SADALP on Armv8.0-A) when x_zero != 0 and sum x once per row when w_zero != 0:
sum (x - zx)(w - zw) = sum x w - zx sum w - zw sum x + K zx zw (modulo 2^32).

Requantization: qconv2d through the Cortex-M wing's per-channel table (templates/mcu/qrequant.c.j2
`requant_table`, bit-exact with oi_quant.h's oi_q_requantize for every input and tested so by
tests/synth/test_mcu_qrequant.py; made once per call). Its formula for a right shift (every
channel of a layer scaled down) is a 64-bit multiply-add and two shifts, which the lanes do with
the same integer steps (templates/arm/qdot.c.j2 `requant_vec`: SMLAL, SHRN #32, SSHL), 4 channels
at a time: the requantization had been ~20 instructions an output, as many as the multiply-adds
of a 64-channel pointwise layer with SDOT. A call with any other shift takes the scalar table for
every output. qlinear: oi_quant.h's oi_q_round_f64 of the double product, as the portable kernel.

qadd / qsub (ResNet's residual additions): 16 elements a step, every rounding of the portable
kernel in lanes by exactly equal instructions (SQRDMULH for oi_q_srdhm, a SQADD fix-up and
SRSHR for oi_q_rdbpot: templates/arm/qadd.c.j2 proves each step), inputs of the output's shape
or one of them a single element (scaled once); a left shift of at most 21 (TFLite's is 20)
bounds every int32 value below 2^30, which lets the output's y_zero and clamp run in int16.

Any other request (grouped, multiplier above 1, other broadcasts, attributes outside those
bounds, dynamic shapes, the planner's fused forms) takes the portable kernel.
"""

from __future__ import annotations

from ...synth.program import KernelRequest
from ..c.kernels.common import par_rows, static_attr
from ..c.kernels.quantized import PAR_MACS, broadcast_operand, plain_static
from ..c.kernels.registry import KernelText, prototype
from ..env import render
from ..geometry import numel

#: Bytes of a channel's entry in the requantization table (templates/mcu/qrequant.c.j2)
_RQ_BYTES = 32
#: Output channels a block of the groups == 1 kernel and of qlinear sums at once
_OB = 4


def _round_up(v: int, m: int) -> int:
    return -(-v // m) * m


def qconv_kernel(r, req: KernelRequest, name: str) -> KernelText | None:
    """The qconv2d kernel of a request it covers (groups == 1, or depthwise with multiplier 1),
    with its workspace; None for any other."""
    if not plain_static(req):
        return None
    x, w, out = req.inputs[0], req.inputs[1], req.output
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    _, oh, ow, _ = out.shape
    groups = static_attr(req, "groups")
    (sh, sw), (dh, dw), pad = (static_attr(req, a) for a in ("stride", "dilation", "padding"))
    pt, pl = pad[0], pad[1]
    # the scalar requantization table, then the lanes' (an int64 and two int32 a channel)
    rq_bytes = _round_up(o, _OB) * (_RQ_BYTES + 16)
    if groups == 1:
        kind = "pointwise" if kh == kw == 1 and not any(pad) else "regular"
        k = kh * kw * c
        pb = 4 if r.sdot else 2
        positions = n * oh * ow
        units = -(-positions // pb)
        # after the tables, the start values and (a regular convolution's K % 8) the weights' tails
        win_at = rq_bytes + _round_up(o, _OB) * (4 + (8 if kind == "regular" and k % 8 else 0))
        wstride = _round_up(k, 16)
        scratch = win_at + (pb * wstride if kind == "regular" else 0)
        par = par_rows(units, pb * o * k, PAR_MACS)
    elif groups == c == o and cg == 1:
        kind, k, pb, units, win_at, wstride = "depthwise", kh * kw, 1, n * oh, 0, 0
        scratch = rq_bytes + kh * kw * c * 2                # the table, then the int16 weights [tap][channel]
        par = par_rows(units, ow * c * k, PAR_MACS)
    else:
        return None
    doc = (f"qconv2d: {x} * {w}{' + bias' if len(req.inputs) > 4 else ''}, stride {[sh, sw]}, "
           f"padding {list(pad)}, dilation {[dh, dw]}, groups {groups} -> {out}")
    text = render("arm/qconv.c.j2", name=name, proto=prototype(req, name), doc=doc, kind=kind, sdot=r.sdot,
                  n=n, h=h, w=wd, c=c, o=o, o4=_round_up(o, _OB), kh=kh, kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, dh=dh,
                  dw=dw, pt=pt, pl=pl, k=k, pb=pb, positions=n * oh * ow, units=units, win_at=win_at,
                  wstride=wstride, has_bias=len(req.inputs) > 4, **par,
                  **{a: static_attr(req, a) for a in ("x_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, scratch)


def qlinear_kernel(r, req: KernelRequest, name: str) -> KernelText | None:
    """The qlinear kernel of a request it covers (static shapes, the plain form); None for any other."""
    if not plain_static(req):
        return None
    x, w = req.inputs[0], req.inputs[1]
    n, k = w.shape
    rows = numel(req.output.shape) // n
    units = rows * -(-n // _OB)
    doc = f"qlinear: {x} * {w}^T{' + bias' if len(req.inputs) > 3 else ''} -> {req.output}"
    text = render("arm/qlinear.c.j2", name=name, proto=prototype(req, name), doc=doc, sdot=r.sdot, rows=rows,
                  k=k, n=n, nb=-(-n // _OB), units=units, has_bias=len(req.inputs) > 3,
                  **par_rows(units, _OB * k, PAR_MACS),
                  **{a: static_attr(req, a) for a in ("x_zero", "w_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, 0)


def qadd_kernel(r, req: KernelRequest, name: str) -> str | None:
    """The qadd or qsub kernel text of a request it covers (templates/arm/qadd.c.j2): inputs of the
    output's shape, or one of them a single element; None for any other broadcast and for
    attributes outside the template's proof (below)."""
    scalar = broadcast_operand(req) if plain_static(req, ("normal", "inplace")) else None
    if scalar is None:
        return None
    a = {n: static_attr(req, n) for n in ("a_zero", "b_zero", "y_zero", "act_min", "act_max", "left_shift")}
    shifts = {p: static_attr(req, f"{p}_shift") for p in "aby"}
    # the template's exact steps need: shifts in oi_quant.h's range, zero points and bounds in int8
    # (SSUBL, the int16 output steps), a left shift of at most 21 (no int32 wrapping anywhere)
    if not -128 <= a["act_min"] <= a["act_max"] <= 127 or not all(-31 <= s <= 0 for s in shifts.values()) \
            or not 0 <= a["left_shift"] <= 21 or not all(-128 <= a[f"{p}_zero"] <= 127 for p in "aby"):
        return None
    doc = f"{req.op}: {req.inputs[0]}, {req.inputs[1]} -> {req.output}"
    return render("arm/qadd.c.j2", name=name, proto=prototype(req, name), doc=doc, op=req.op,
                  count=numel(req.output.shape), scalar=scalar, zeros={"a": a["a_zero"], "b": a["b_zero"]},
                  mults={p: static_attr(req, f"{p}_multiplier") for p in "ab"},
                  es={"a": -shifts["a"], "b": -shifts["b"]}, mult=static_attr(req, "y_multiplier"), e=-shifts["y"],
                  left_shift=a["left_shift"], y_zero=a["y_zero"], act_min=a["act_min"], act_max=a["act_max"])
