"""Helium (Armv8.1-M MVE, Cortex-M55) int8 kernels for the integer-only qconv2d (TFLite's CONV_2D
and DEPTHWISE_CONV_2D), qlinear (FULLY_CONNECTED) and qadd / qsub / qmul (ADD, SUB, MUL):
templates/mcu/helium_qconv.c.j2, helium_qlinear.c.j2 and helium_qbinary.c.j2, bit-exact with the
portable kernels (openinfer/targets/c/kernels/quantized.py): the same int32 sums, modulo 2^32,
then the same requantization.

groups == 1 (pointwise and regular convolutions) and qlinear are dot products of a window (a row
of x) with rows of w, 16 int8 taps at a time: VMLADAVA.S8 multiplies the 16 lane pairs and adds
the products into a scalar int32 (no int16 intermediate, nothing saturates; the sum wraps as the
reference's int32). The zero point is folded out of the products, sum (x - x_zero) w = sum x w -
x_zero sum w (exact modulo 2^32), so x is used as stored: a convolution makes, per call, each
output channel's bias - x_zero sum w (its weights are summed once for all positions); qlinear,
whose x usually has one row, sums each row of w with VADDVA in the same loop as the products
instead (a pass of its own would read w twice), 2 rows of w at a time then (4 rows' 8 sums do
not fit the 7 even registers VMLADAVA and VADDVA add into). Otherwise 4 rows of w share each
loaded vector of the window (CMSIS-NN's arm_nn_mat_mult_nt_t_s8 blocking): per 16 taps one load
of x, 4 of w and 4 VMLADAVAs for 64 multiply-adds (inline asm: templates/mcu/helium_qdot.c.j2
says why); the K % 16 last taps are one predicated step (VCTP.8: the inactive lanes read no
memory and load 0, which adds nothing). A pointwise convolution without padding reads its
windows in place (C contiguous bytes of x); any other window is copied into the kernel's scratch
with its taps in the padding set to x_zero, so that the folded sum stays exact there (x_zero -
x_zero adds 0, as the reference skips the tap).
A pointwise convolution with stride 1, without padding (its positions' windows contiguous in x)
takes 4 positions x 4 output channels a block instead: per channel a row of w serves the 4
positions' VMLADAVs (windows of at most 16 taps, VWW's first pointwise layers' K = 8, 16: one
vector each, loaded once for the block; longer ones through the same dot-product loop, the row
of w in the shared vector's place), and the 16 sums go through a small array on the stack so
that each position's 4 channels take one vector requantization, with the channels' vectors
loaded once for the 4 positions: the per-block setup and requantization spread over 16 outputs.
A convolution whose windows are copied (KWS's first, 10 x 4 x 1) takes the same blocks when its
4 copies are small (QUAD_COPIES) and it has QUAD_COPIES_O output channels or more, the 4 windows
copied side by side into the scratch.

Depthwise with multiplier 1 (groups == C == O): the channels are the vector lanes, 8 at a time
(VLDRB.S16 loads 8 int8 sign-extended, VMULLB / VMULLT multiply the even / odd lanes into int32
products, exact, added to two int32 vectors of sums). The weights [C, KH, KW, 1] are packed
per call into the scratch as [C / 8][KH KW][8], a group's taps contiguous; a window inside x
starts from bias - x_zero sum w (also made per call) and unrolls its taps at static offsets; a
window reaching into the padding is copied with x_zero in its padding's taps and takes the same
unrolled code (a kernel of more than UNROLL_TAPS taps loops over each window's taps inside x,
from the bias, with x - x_zero). A last group of C % 8 channels loads x under a VCTP.16 predicate.

Requantization: 4 outputs a vector (VSHL, VQRDMULH, a VQADD fix-up and VRSHL, VADD of y_zero,
VMAX / VMIN, a truncating VSTRB), proved equal lane by lane to oi_quant.h's oi_q_requantize
(TFLite's MultiplyByQuantizedMultiplier) for every input in templates/mcu/helium_qfixed.c.j2:
VQRDMULH's floor((x m + 2^30) / 2^31) is exactly the truncating division of
SaturatingRoundingDoublingHighMul for either sign of x m, and VRSHL after subtracting 1 from a
negative value is RoundingDivideByPOT's round half away from zero. qlinear keeps the portable
kernel's scalar round(acc * scale) in double (the M55's FPU). Any other request (grouped, a
depth multiplier above 1, act_min > act_max, dynamic shapes, the planner's fused forms) takes the
portable kernel: the DSP extension's kernels (dsp_qconv.py), which the M55 could also run, cover
only the kinds covered here, so they are no fallback.

qadd, qsub and qmul (TFLite's int8 ADD, SUB, MUL: ResNet's residual additions) take 4 elements a
vector (VLDRB.S32), each step of the portable kernel a lane-wise instruction, the fixed-point
rounding multiplies by the same VQRDMULH construction (templates/mcu/helium_qbinary.c.j2); inputs
of the output's shape or one of them a single element (any other broadcast: the portable kernel).
"""

from __future__ import annotations

from ...synth.program import KernelRequest
from ..c.kernels.common import static_attr
from ..c.kernels.quantized import broadcast_operand, plain_static
from ..c.kernels.registry import KernelText
from ..env import render
from ..geometry import numel

#: int8 lanes of a Q register (VMLADAVA.S8's taps an instruction)
LANES8 = 16
#: int16 lanes: the depthwise kernel's channels a vector
LANES16 = 8
#: rows of w that share a loaded vector of the window (4 scalar sums)
ROWS = 4
#: taps up to which a depthwise window inside x is unrolled; larger kernels take the loop
UNROLL_TAPS = 32
#: bytes of the 4 window copies up to which a groups-1 convolution with copied windows takes 4
#: positions a block (KWS's first, 10 x 4 x 1: 4 x 48 B); larger windows (ResNet's 3 x 3 x 16 and
#: up) stay one copy at a time, whose scratch would otherwise be the program's largest (its RAM)
QUAD_COPIES = 256
#: output channels from which the copied windows' 4-position blocks pay: measured, VWW's and IC's
#: first convolutions (3 x 3 x 3 windows, 8 and 16 channels) take more instructions in them (the
#: block's 4 copies and per-channel loops over too few outputs), KWS's first (64) fewer
QUAD_COPIES_O = 32


def _pad16(n: int) -> int:
    return (n + 15) // 16 * 16


def qconv_kernel(req: KernelRequest, name: str, proto: str) -> KernelText | None:
    """The Helium kernel text of a qconv2d request with groups 1 or depthwise multiplier 1, with
    its scratch; None for any other."""
    if not plain_static(req):
        return None
    x, w, out = req.inputs[0], req.inputs[1], req.output
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    _, oh, ow, _ = out.shape
    groups = static_attr(req, "groups")
    (sh, sw), (dh, dw), pad = (static_attr(req, a) for a in ("stride", "dilation", "padding"))
    pt, pl = pad[0], pad[1]
    if groups == 1:
        kind, k = ("pointwise" if kh == kw == 1 else "regular"), kh * kw * c
        in_place = kh == kw == 1 and not any(pad)        # a window is C contiguous bytes of x
        # 4 positions a block: windows in place (contiguous in x), or copies of small windows
        quad = sh == sw == 1 if in_place else ROWS * _pad16(k) <= QUAD_COPIES and o >= QUAD_COPIES_O
        opad = -(-o // ROWS) * ROWS                       # (quad reads the folded sums 4 channels a vector)
        folded_len = opad if quad else o
        scratch = 3 * 4 * opad + 4 * folded_len + (0 if in_place else (ROWS if quad else 1) * _pad16(k))
    elif groups == c == o and cg == 1:
        kind, k, in_place, quad, folded_len = "depthwise", kh * kw, False, False, 0
        groups8 = -(-c // LANES16)
        scratch = (3 + 2) * 4 * LANES16 * groups8 + kh * kw * LANES16 * groups8 \
            + (kh * kw * c if kh * kw <= UNROLL_TAPS else 0)         # the padded window's copy
    else:
        return None
    if static_attr(req, "act_min") > static_attr(req, "act_max"):      # the vector clamp's VMAX, VMIN order
        return None
    has_bias = len(req.inputs) > 4
    doc = (f"qconv2d: {x} * {w}{' + bias' if has_bias else ''}, stride {[sh, sw]}, padding {list(pad)}, "
           f"dilation {[dh, dw]}, groups {groups} -> {out}")
    text = render("mcu/helium_qconv.c.j2", name=name, proto=proto, doc=doc, kind=kind, n=n, h=h, w=wd, c=c, o=o,
                  kh=kh, kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, k=k, taps=kh * kw,
                  in_place=in_place, has_bias=has_bias, lanes8=LANES8, lanes16=LANES16, rows=ROWS,
                  unroll=kh * kw <= UNROLL_TAPS, positions=n * oh * ow,
                  quad=quad, folded_len=folded_len, xstride=c if in_place else _pad16(k),
                  **{a: static_attr(req, a) for a in ("x_zero", "y_zero", "act_min", "act_max")})
    return KernelText(text, scratch)


def qlinear_kernel(req: KernelRequest, name: str, proto: str) -> str | None:
    """The Helium kernel text of a static-shape qlinear request; None for any other."""
    if not plain_static(req):
        return None
    x, w = req.inputs[0], req.inputs[1]
    nout, k = w.shape
    rows = numel(req.output.shape) // nout
    has_bias = len(req.inputs) > 3
    doc = f"qlinear: {x} * {w}^T{' + bias' if has_bias else ''} -> {req.output}"
    # with x_zero each row of the block also keeps its sum of w: VMLADAVA and VADDVA add only into
    # even registers (templates/mcu/helium_qdot.c.j2), 7 of them, so 2 rows (4 sums), not 4 (8)
    rows_w = ROWS if static_attr(req, "x_zero") == 0 else ROWS // 2
    return render("mcu/helium_qlinear.c.j2", name=name, proto=proto, doc=doc, rows=rows, k=k, n=nout,
                  has_bias=has_bias, lanes8=LANES8, rows_w=rows_w,
                  **{a: static_attr(req, a) for a in ("x_zero", "w_zero", "y_zero", "act_min", "act_max")})


def qbinary_kernel(req: KernelRequest, name: str, proto: str) -> str | None:
    """The Helium kernel text of a qadd, qsub or qmul request (templates/mcu/helium_qbinary.c.j2):
    inputs of the output's shape, or one of them a single element; None for any other broadcast
    and for shifts outside oi_quant.h's range."""
    scalar = broadcast_operand(req) if plain_static(req, ("normal", "inplace")) else None
    if scalar is None:
        return None
    a = {n: static_attr(req, n) for n in ("a_zero", "b_zero", "y_zero", "act_min", "act_max")}
    if a["act_min"] > a["act_max"]:                     # the vector clamp's VMAX, VMIN order
        return None
    if req.op == "qmul":
        shift = static_attr(req, "shift")
        if not -31 <= shift <= 31:
            return None
        fixed = {"mult": static_attr(req, "multiplier"), "left": max(shift, 0), "e": max(-shift, 0)}
    else:
        shifts = [static_attr(req, f"{p}_shift") for p in "aby"]
        left_shift = static_attr(req, "left_shift")
        if not all(-31 <= s <= 0 for s in shifts) or not 0 <= left_shift <= 31:
            return None
        fixed = {"mults": {p: static_attr(req, f"{p}_multiplier") for p in "ab"},
                 "es": {"a": -shifts[0], "b": -shifts[1]}, "mult": static_attr(req, "y_multiplier"),
                 "e": -shifts[2], "left_shift": left_shift}
    doc = f"{req.op}: {req.inputs[0]}, {req.inputs[1]} -> {req.output}"
    return render("mcu/helium_qbinary.c.j2", name=name, proto=proto, doc=doc, op=req.op,
                  count=numel(req.output.shape), scalar=scalar,
                  zeros={"a": a["a_zero"], "b": a["b_zero"]}, y_zero=a["y_zero"], act_min=a["act_min"],
                  act_max=a["act_max"], **fixed)
