"""The integer-only int8 ops (TFLite's int8 kernels) in GLSL: qconv2d, qlinear, qavg_pool2d /
qmax_pool2d, qadd, qsub, qmul, qmean, qsoftmax, qlut, qhard_swish, quantize, dequantize, requantize
(openinfer/reference/kernels/quantized.py), bit-exact with the reference as the portable C
kernels are (openinfer/targets/c/kernels/quantized.py).

The fixed-point steps are hal/include/oi_quant.h's functions ported line by line (`_HELPERS`),
each emitted once into the shaders that call it, after the helpers it calls: int32 values in
GLSL `int`, whose + - * and << wrap modulo 2^32 as the header's unsigned arithmetic does and
whose >> is arithmetic, as TFLite assumes of C; the 32 x 32 -> 64-bit products of the rounding
doubling high multiply in int64_t (shaderInt64). Where the C code divides a signed value (C
truncates toward zero) the GLSL divides or shifts the magnitude and restores the sign, so no
result depends on how a driver rounds a negative quotient.

Every kernel is one invocation per output element (qsoftmax: per row, computing the row's
maximum and sum as the C kernel does); the sums run in the reference's int32 arithmetic, so
their order does not matter. The shapes, zero points, per-tensor multipliers and activation
bounds are literals; the per-channel multipliers, shifts, scales and biases are the op's inputs.
"""

from __future__ import annotations

import numpy as np

from ....errors import SynthesisError
from ....reference.kernels.quantized import mean_multiplier, wrap32
from ....synth.program import KernelRequest
from ...geometry import broadcast_strides, contiguous_strides, numel
from .registry import Body, family
from .types import KernelCtx, double_lit, index_expr, lit

#: oi_quant.h in GLSL: name -> (the helpers it calls, its source). Comments: oi_quant.h.
_HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    "oi_q_srdhm": ((), """\
// SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties away from zero; -2^31 * -2^31 saturates.
// (a * b + nudge) / 2^31 truncated toward zero: the magnitude shifted, the sign put back.
int oi_q_srdhm(int a, int b) {
    if (a == b && a == (-2147483647 - 1)) return 2147483647;
    int64_t ab = oi_sext64(a) * oi_sext64(b);
    int64_t s = ab + (ab >= int64_t(0) ? int64_t(1 << 30) : int64_t(1 - (1 << 30)));   // s has ab's sign
    return s < int64_t(0) ? -int((-s) >> 31) : int(s >> 31);
}"""),
    "oi_q_rdbpot": ((), """\
// RoundingDivideByPOT: x / 2^e rounded half away from zero, 0 <= e <= 31 (>> on int is arithmetic).
int oi_q_rdbpot(int x, int e) {
    int mask = int((1u << uint(e)) - 1u);
    int remainder = x & mask;
    int threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}"""),
    "oi_q_requantize": (("oi_q_srdhm", "oi_q_rdbpot"), """\
// MultiplyByQuantizedMultiplier: x * m * 2^shift / 2^31 with its two roundings (x << left wraps).
int oi_q_requantize(int x, int m, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    return oi_q_rdbpot(oi_q_srdhm(x << left, m), right);
}"""),
    "oi_q_sat_shl": ((), """\
// SaturatingRoundingMultiplyByPOT for a positive exponent: x * 2^e (e <= 31), saturated to int32.
int oi_q_sat_shl(int x, int e) {
    int64_t v = oi_sext64(x) << e;
    return v > int64_t(2147483647) ? 2147483647 : (v < int64_t(-2147483648l) ? (-2147483647 - 1) : int(v));
}"""),
    "oi_q_exp_quarter": (("oi_q_srdhm", "oi_q_rdbpot"), """\
// exp(a) for a in [-1/4, 0), Q0.31 in and out: gemmlowp's Taylor expansion around -1/8.
int oi_q_exp_quarter(int a) {
    const int constant_term = 1895147668, one_third = 715827883;     // exp(-1/8), 1/3
    int x = a + (1 << 28);
    int x2 = oi_q_srdhm(x, x), x3 = oi_q_srdhm(x2, x), x4 = oi_q_srdhm(x2, x2);
    int x4_over_4 = oi_q_rdbpot(x4, 2);
    int poly = oi_q_rdbpot(oi_q_srdhm(x4_over_4 + x3, one_third) + x2, 1);
    return constant_term + oi_q_srdhm(constant_term, x + poly);
}"""),
    "oi_q_exp_on_negative_values_q5": (("oi_q_exp_quarter", "oi_q_sat_shl", "oi_q_srdhm"), """\
// exp_on_negative_values for a Q5.26 a <= 0, Q0.31 result: the polynomial on a's remainder
// modulo 1/4, then a factor exp(-2^k) for each set bit of a's integer part and top fraction.
int oi_q_exp_on_negative_values_q5(int a) {
    const int factors[7] = int[7](1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242);
    const int quarter = 1 << 24;
    int a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter;
    int result = oi_q_exp_quarter(oi_q_sat_shl(a_mod_quarter_minus_quarter, 5));
    int remainder = a_mod_quarter_minus_quarter - a;
    for (int k = 0; k < 7; ++k)                      // exp(-1/4), exp(-1/2), ..., exp(-16)
        if ((remainder & (1 << (24 + k))) != 0) result = oi_q_srdhm(result, factors[k]);
    return a == 0 ? 2147483647 : result;
}"""),
    "oi_q_one_over_one_plus_x": (("oi_q_srdhm", "oi_q_sat_shl"), """\
// 1 / (1 + a) for a in [0, 1) in Q0.31: three Newton-Raphson steps in Q2.29 from 48/17 - 32/17 d.
// RoundingHalfSum(a, 1) = (a + 2^31 - 1 +- 1) / 2 in int64, halved as C truncates.
int oi_q_one_over_one_plus_x(int a) {
    int64_t sum = oi_sext64(a) + int64_t(2147483647);
    int64_t t = sum + (sum >= int64_t(0) ? int64_t(1) : int64_t(-1));
    int half_denominator = t >= int64_t(0) ? int(t >> 1) : -int((-t) >> 1);
    int x = 1515870810 + oi_q_srdhm(half_denominator, -1010580540);
    for (int i = 0; i < 3; ++i) {
        int one_minus = (1 << 29) - oi_q_srdhm(half_denominator, x);
        x = x + oi_q_sat_shl(oi_q_srdhm(x, one_minus), 2);
    }
    return oi_q_sat_shl(x, 1);
}"""),
    "oi_q_reciprocal_q12": (("oi_q_one_over_one_plus_x",), """\
// GetReciprocal for a positive Q12.19 sum: 1 / its mantissa in Q0.31; bits_over_unit = the bits
// above 1.0. headroom_plus_one is x's count of leading zeros (32 - 1 - findMSB, 32 for 0).
int oi_q_reciprocal_q12(int x, out int bits_over_unit) {
    int headroom_plus_one = 31 - findMSB(uint(x));
    bits_over_unit = 12 - headroom_plus_one;
    int shifted_minus_one = int((uint(x) << uint(headroom_plus_one)) - 0x80000000u);
    return oi_q_one_over_one_plus_x(shifted_minus_one);
}"""),
    "oi_q_round_f64": ((), """\
// round() of a double to int32: half away from zero, saturated (NaN gives INT32_MIN, as oi_quant.h):
// the integer part (oi_trunc_d: exact on any driver) plus one where the exact fraction is >= 1/2.
int oi_q_round_f64(double v) {
    if (oi_isnan_d(v) || v <= -2147483648.0LF) return -2147483647 - 1;
    if (v >= 2147483647.0LF) return 2147483647;
    double whole = oi_trunc_d(v);
    precise double fraction = v - whole;
    return int(whole) + (fraction >= 0.5LF ? 1 : (fraction <= -0.5LF ? -1 : 0));
}"""),
    "oi_q_clamp": ((), """\
int oi_q_clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }"""),
    "oi_q_srdhm16": ((), """\
// int16 SaturatingRoundingDoublingHighMul: round(a * b / 2^15), ties away from zero (|a * b| <= 2^30);
// the quotient truncated toward zero on the magnitude.
int oi_q_srdhm16(int a, int b) {
    if (a == -32768 && b == -32768) return 32767;
    int s = a * b + (a * b >= 0 ? (1 << 14) : (1 - (1 << 14)));
    return s < 0 ? -((-s) >> 15) : s >> 15;
}"""),
    "oi_q_sdhm16": ((), """\
// hard_swish.h's SaturatingDoublingHighMul: a * b / 2^15 truncated toward zero.
int oi_q_sdhm16(int a, int b) {
    if (a == -32768 && b == -32768) return 32767;
    int p = a * b;
    return p < 0 ? -((-p) >> 15) : p >> 15;
}"""),
    "oi_q_sat_shl16": ((), """\
// hard_swish.h's SaturatingLeftShift: x * 2^s saturated to int16 (0 <= s <= 30; x != 0 saturates
// from s = 16 on, so the shift stops there).
int oi_q_sat_shl16(int x, int s) {
    int v = x << min(s, 16);
    return v > 32767 ? 32767 : (v < -32768 ? -32768 : v);
}"""),
    "oi_q_hard_swish": (("oi_q_srdhm16", "oi_q_sdhm16", "oi_q_sat_shl16", "oi_q_rdbpot", "oi_q_clamp"), """\
// reference_ops::HardSwish for one int8 value (oi_quant.h's oi_q_hard_swish says the steps).
int oi_q_hard_swish(int x, int x_zero, int y_zero, int output_multiplier, int output_shift,
                    int reluish_multiplier, int reluish_shift) {
    int hires = (x - x_zero) * (1 << 7);
    int preshift_output = oi_q_srdhm16(hires, output_multiplier);
    int reluish = hires;
    if (reluish_shift > 0) reluish = oi_q_sat_shl16(reluish, reluish_shift - 1);
    reluish = oi_q_srdhm16(reluish, reluish_multiplier);
    if (reluish_shift > 0) reluish = oi_q_sat_shl16(reluish, 1);
    if (reluish_shift < 0) reluish = oi_q_rdbpot(reluish, -reluish_shift);
    reluish = (reluish + (1 << 15)) >> 1;
    int y = oi_q_rdbpot(oi_q_sdhm16(reluish, preshift_output), -output_shift);
    return oi_q_clamp(y + y_zero, -128, 127);
}"""),
}

#: the helpers that compute in int64_t or double
_NEEDS = {"oi_q_srdhm": "int64", "oi_q_sat_shl": "int64", "oi_q_one_over_one_plus_x": "int64", "oi_q_round_f64": "fp64"}


def _helpers(k: KernelCtx, *names: str) -> str:
    """The GLSL of `names` and every helper they call, each once, callees first; records the
    device features they use."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for callee in _HELPERS[name][0]:
            visit(callee)
        order.append(name)
        if name in _NEEDS:
            why = ("the fixed-point multiply's 64-bit product (TFLite's int64 arithmetic)" if _NEEDS[name] == "int64"
                   else "requantizing in double (TFLite's reference FULLY_CONNECTED)")
            k.need(_NEEDS[name], why)

    for n in names:
        visit(n)
    return "\n".join(_HELPERS[n][1] for n in order)


def _static(req: KernelRequest) -> None:
    for t in (*req.inputs, req.output):
        if not all(isinstance(d, int) for d in t.shape):
            raise SynthesisError(f"{req.op}: the integer-only ops need static shapes, got {t}")


def _int(k: KernelCtx, name: str) -> str:
    """A static integer attribute as a GLSL int literal."""
    return lit("int", k.static(name))


def _doc(req: KernelRequest) -> str:
    return f"{req.op}({', '.join(str(t) for t in req.inputs)}) -> {req.output}"


def _clamped(k: KernelCtx, y: str, lo: str = "act_min", hi: str = "act_max") -> str:
    return f"return oi_q_clamp({y}, {_int(k, lo)}, {_int(k, hi)});"


@family("qconv2d")
def emit_qconv(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element (n, oy, ox, o) of NHWC y: the int32 sum over the window's taps inside x
    (padding taps add (x_zero - x_zero) * w = 0, so TFLite skips them) of the group's channels,
    contiguous in x and in w [O, KH, KW, C/groups], then requantized with channel o's multiplier
    and shift."""
    _static(req)
    _, h, w, c = req.inputs[0].shape
    o, kh, kw, cg = req.inputs[1].shape
    _, oh, ow, _ = req.output.shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = (k.static(a) for a in ("stride", "dilation", "padding"))
    og = o // k.static("groups")
    x, wt = k.load(req.inputs[0].dtype, "in0", "xb + ci"), k.load(req.inputs[1].dtype, "in1", "wb + ci")
    lines = [f"uint o = i % {o}u, ox = (i / {o}u) % {ow}u, oy = (i / {o * ow}u) % {oh}u, nb = i / {o * ow * oh}u;",
             f"uint c0 = (o / {og}u) * {cg}u;                  // the group's first input channel",
             f"int acc = {'in4[o]' if len(req.inputs) > 4 else '0'};",
             f"for (int ky = 0; ky < {kh}; ++ky) {{",
             f"    int iy = int(oy) * {sh} - {pt} + ky * {dh};",
             f"    if (iy < 0 || iy >= {h}) continue;",
             f"    for (int kx = 0; kx < {kw}; ++kx) {{",
             f"        int ix = int(ox) * {sw} - {pl} + kx * {dw};",
             f"        if (ix < 0 || ix >= {w}) continue;",
             f"        uint xb = ((nb * {h}u + uint(iy)) * {w}u + uint(ix)) * {c}u + c0;",
             f"        uint wb = ((o * {kh}u + uint(ky)) * {kw}u + uint(kx)) * {cg}u;",
             f"        for (uint ci = 0u; ci < {cg}u; ++ci) acc += ({x} - {_int(k, 'x_zero')}) * {wt};",
             "    }", "}",
             _clamped(k, f"{_int(k, 'y_zero')} + oi_q_requantize(acc, in2[o], in3[o])")]
    return Body(functions=_helpers(k, "oi_q_requantize", "oi_q_clamp"), value="\n".join(lines), vct="int",
                doc=_doc(req))


@family("qlinear")
def emit_qlinear(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element (row, n): the int32 sum over K of (x - x_zero) * (w[n] - w_zero) plus the
    bias, requantized as TFLite's reference FULLY_CONNECTED does: round(acc * scale[n]) with the
    product in double (exact rounding of one multiply on any Vulkan device, `precise` so that it
    is not fused with the rounding's subtraction) and C's round."""
    _static(req)
    n, kk = req.inputs[1].shape
    x, wt = k.load(req.inputs[0].dtype, "in0", "xb + q"), k.load(req.inputs[1].dtype, "in1", "wb + q")
    lines = [f"uint n = i % {n}u, xb = (i / {n}u) * {kk}u, wb = n * {kk}u;",
             f"int acc = {'in3[n]' if len(req.inputs) > 3 else '0'};",
             f"for (uint q = 0u; q < {kk}u; ++q) acc += ({x} - {_int(k, 'x_zero')}) * ({wt} - {_int(k, 'w_zero')});",
             "precise double p = double(acc) * in2[n];",
             _clamped(k, f"{_int(k, 'y_zero')} + oi_q_round_f64(p)")]
    return Body(functions=_helpers(k, "oi_q_round_f64", "oi_q_clamp"), value="\n".join(lines), vct="int",
                doc=_doc(req))


@family("qavg_pool2d", "qmax_pool2d")
def emit_qpool(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element (n, oy, ox, ch) of NHWC y over the window's taps inside x; the average
    divides the int32 sum by their count rounding half away from zero (TFLite's
    `(acc +- count / 2) / count`, here on the magnitude), an empty window giving 0 as the
    reference's."""
    _static(req)
    _, h, w, c = req.inputs[0].shape
    _, oh, ow, _ = req.output.shape
    (kh, kw), (sh, sw), (pt, pl, _, _) = (k.static(a) for a in ("kernel", "stride", "padding"))
    is_max = req.op == "qmax_pool2d"
    v = k.load(req.inputs[0].dtype, "in0", f"((nb * {h}u + uint(iy)) * {w}u + uint(ix)) * {c}u + ch")
    lines = [f"uint ch = i % {c}u, ox = (i / {c}u) % {ow}u, oy = (i / {c * ow}u) % {oh}u, nb = i / {c * ow * oh}u;",
             f"int y0 = int(oy) * {sh} - {pt}, x0 = int(ox) * {sw} - {pl};",
             f"int ky0 = max(-y0, 0), ky1 = min({kh}, {h} - y0), kx0 = max(-x0, 0), kx1 = min({kw}, {w} - x0);",
             f"int acc = {-128 if is_max else 0};",
             "for (int iy = y0 + ky0; iy < y0 + ky1; ++iy)",
             "    for (int ix = x0 + kx0; ix < x0 + kx1; ++ix)",
             f"        acc = {f'max(acc, {v})' if is_max else f'acc + {v}'};"]
    if not is_max:
        lines += ["int count = max(ky1 - ky0, 0) * max(kx1 - kx0, 0);",
                  "int half_ = count / 2, d = max(count, 1);",
                  "acc = acc > 0 ? (acc + half_) / d : -((half_ - acc) / d);"]
    lines.append(_clamped(k, "acc"))
    return Body(functions=_helpers(k, "oi_q_clamp"), value="\n".join(lines), vct="int", doc=_doc(req))


def _operand(req: KernelRequest, k: KernelCtx, j: int) -> str:
    """Input j's element that output element i reads (NumPy broadcasting), as an int."""
    t, out = req.inputs[j], req.output.shape
    return k.load(t.dtype, f"in{j}", index_expr("i", out, broadcast_strides(t.shape, out)))


@family("qadd", "qsub")
def emit_qadd(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: a and b (NumPy broadcasting) each moved to the common scale after
    `left_shift` bits of headroom, their sum (qsub: difference) requantized to y's scale."""
    _static(req)

    def scaled(j: int, p: str) -> str:
        shift = -k.static(f"{p}_shift")
        return (f"int {p} = oi_q_rdbpot(oi_q_srdhm(({_operand(req, k, j)} - {_int(k, f'{p}_zero')}) << "
                f"{_int(k, 'left_shift')}, {_int(k, f'{p}_multiplier')}), {lit('int', shift)});")
    combined = ("difference", "a - b") if req.op == "qsub" else ("sum", "a + b")
    lines = [scaled(0, "a"), scaled(1, "b"),
             f"int {combined[0]} = oi_q_rdbpot(oi_q_srdhm({combined[1]}, {_int(k, 'y_multiplier')}), "
             f"{lit('int', -k.static('y_shift'))});",
             _clamped(k, f"{_int(k, 'y_zero')} + {combined[0]}")]
    return Body(functions=_helpers(k, "oi_q_srdhm", "oi_q_rdbpot", "oi_q_clamp"), value="\n".join(lines),
                vct="int", doc=_doc(req))


@family("qmul")
def emit_qmul(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: the product of the offset inputs (NumPy broadcasting; at most 256 * 256
    in magnitude, exact in int), requantized with one multiplier."""
    _static(req)
    lines = [f"int product = ({_operand(req, k, 0)} - {_int(k, 'a_zero')}) * ({_operand(req, k, 1)} - "
             f"{_int(k, 'b_zero')});",
             _clamped(k, f"{_int(k, 'y_zero')} + oi_q_requantize(product, {_int(k, 'multiplier')}, "
                         f"{_int(k, 'shift')})")]
    return Body(functions=_helpers(k, "oi_q_requantize", "oi_q_clamp"), value="\n".join(lines), vct="int",
                doc=_doc(req))


@family("qmean")
def emit_qmean(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: the int sum (wrapping, as TFLite's int32 accumulator) of the reduced
    elements, less x_zero * count, requantized with the multiplier and shift that include 1 /
    count (readapted here as QuantizedMeanOrSum does at run time). i's kept coordinates give the
    base offset into x, r's reduced coordinates the offset from there."""
    _static(req)
    shape = req.inputs[0].shape
    axes = k.static("axes")
    strides = contiguous_strides(shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    count = numel([shape[a] for a in axes])
    multiplier, shift = mean_multiplier(k.static("multiplier"), k.static("shift"), count)
    base = index_expr("i", [shape[a] for a in kept], [strides[a] for a in kept]) if kept else "0u"
    reduced = index_expr("r", [shape[a] for a in axes], [strides[a] for a in axes])
    x = k.load(req.inputs[0].dtype, "in0", f"base + {reduced}")
    lines = [f"uint base = {base};",
             "int sum = 0;",
             f"for (uint r = 0u; r < {count}u; ++r) sum += {x};",
             f"int shifted_sum = sum - {lit('int', int(wrap32(k.static('x_zero') * count)))};",
             f"return oi_q_clamp(oi_q_requantize(shifted_sum, {lit('int', multiplier)}, {lit('int', shift)}) + "
             f"{_int(k, 'y_zero')}, -128, 127);"]
    return Body(functions=_helpers(k, "oi_q_requantize", "oi_q_clamp"), value="\n".join(lines), vct="int",
                doc=_doc(req))


@family("qsoftmax")
def emit_qsoftmax(req: KernelRequest, k: KernelCtx) -> Body:
    """One invocation per row of the last axis (TFLite's reference_ops::Softmax): the
    differences to the row's maximum scaled to Q5.26 by multiplier << left_shift, exp in Q0.31,
    the sum of those that count (diff >= diff_min) in Q12.19, its reciprocal, and each output exp
    * reciprocal rounded to 8 bits, offset by -128. The exps are computed twice (as TFLite
    does), so no row buffer is needed."""
    _static(req)
    shape = req.inputs[0].shape
    depth = shape[-1] if shape else 1
    t = req.inputs[0].dtype
    xc = k.load(t, "in0", "base + c")
    diff_min, mult, left = _int(k, "diff_min"), _int(k, "multiplier"), _int(k, "left_shift")
    exp = f"oi_q_exp_on_negative_values_q5(oi_q_srdhm(diff << {left}, {mult}))"
    lines = [f"uint base = u * {depth}u;",
             "int m = -128;",
             f"for (uint c = 0u; c < {depth}u; ++c) m = max(m, {xc});",
             "int sum = 0;",
             f"for (uint c = 0u; c < {depth}u; ++c) {{",
             f"    int diff = {xc} - m;",
             f"    if (diff >= {diff_min}) sum += oi_q_rdbpot({exp}, 12);",
             "}",
             "int bits_over_unit;",
             "int scale = oi_q_reciprocal_q12(sum, bits_over_unit);",
             "int exponent = bits_over_unit + 31 - 8;",
             f"for (uint c = 0u; c < {depth}u; ++c) {{",
             f"    int diff = {xc} - m;",
             "    int y = -128;",
             f"    if (diff >= {diff_min})",
             f"        y = oi_q_clamp(oi_q_rdbpot(oi_q_srdhm(scale, {exp}), exponent) - 128, -128, 127);",
             f"    out_[base + c] = {k.store(req.output.dtype, 'y', 'int')};",
             "}"]
    functions = _helpers(k, "oi_q_exp_on_negative_values_q5", "oi_q_reciprocal_q12", "oi_q_rdbpot", "oi_q_clamp")
    return Body(functions=functions, main="\n".join(lines), units=numel(shape) // depth,
                doc=f"{_doc(req)}, a row of {depth} per invocation")


@family("qlut")
def emit_qlut(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: the table's entry x + 128 (the importer's LiteRT table)."""
    _static(req)
    x = k.load(req.inputs[0].dtype, "in0", "i")
    return Body(value=f"return {k.load(req.inputs[1].dtype, 'in1', f'uint({x} + 128)')};", vct="int", doc=_doc(req))


@family("qhard_swish")
def emit_qhard_swish(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: TFLite's int16 fixed-point hard swish (oi_q_hard_swish)."""
    _static(req)
    x = k.load(req.inputs[0].dtype, "in0", "i")
    args = ", ".join(_int(k, a) for a in ("x_zero", "y_zero", "output_multiplier", "output_shift",
                                          "reluish_multiplier", "reluish_shift"))
    return Body(functions=_helpers(k, "oi_q_hard_swish"), value=f"return oi_q_hard_swish({x}, {args});", vct="int",
                doc=_doc(req))


@family("quantize", "dequantize", "requantize")
def emit_qconvert(req: KernelRequest, k: KernelCtx) -> Body:
    """quantize: x / scale rounded to f32 (the quotient in double, then oi_d2f: the double
    quotient's error, even a few ulps of a device's inexact division, cannot cross an f32
    rounding boundary, since no quotient of two f32 values lies within 2^-49 of a midpoint), then
    rounded half away from zero as roundf (GLSL's round may round ties to even, so the integer
    part plus the exact fraction's carry); NaN gives the zero point, values past +-1024 saturate.
    dequantize: scale * (x - zero) in double, exact, rounded to f32 once. requantize: int8 to
    int8 through the fixed-point multiplier, clamped to [act_min, act_max] (TFLite's int8 RELU,
    RELU6)."""
    _static(req)
    t = req.inputs[0].dtype
    x = k.load(t, "in0", "i")
    if req.op == "requantize":
        lines = [_clamped(k, f"{_int(k, 'y_zero')} + oi_q_requantize({x} - {_int(k, 'x_zero')}, "
                             f"{_int(k, 'multiplier')}, {_int(k, 'shift')})")]
        return Body(functions=_helpers(k, "oi_q_requantize", "oi_q_clamp"), value="\n".join(lines), vct="int",
                    doc=_doc(req))
    k.need("fp64", f"{req.op}'s exact {'quotient' if req.op == 'quantize' else 'product'} (in double)")
    scale = double_lit(float(np.float32(k.static("scale"))))   # an f32 value, exact in double
    zero = _int(k, "zero")
    if req.op == "dequantize":
        lines = [f"precise double p = {scale} * double({x} - {zero});", "return oi_d2f(p);"]
        return Body(value="\n".join(lines), vct="float", doc=_doc(req))
    lines = [f"float q = oi_d2f(double({x}) / {scale});",
             "q = oi_isnan(q) ? 0.0 : (q < -1024.0 ? -1024.0 : (q > 1024.0 ? 1024.0 : q));",
             "int whole = int(q);                              // truncates toward zero",
             "precise float fraction = q - float(whole);       // exact: |q| <= 1024",
             "int r = whole + (fraction >= 0.5 ? 1 : (fraction <= -0.5 ? -1 : 0));",
             _clamped_literal(f"r + {zero}")]
    return Body(functions=_helpers(k, "oi_q_clamp"), value="\n".join(lines), vct="int", doc=_doc(req))


def _clamped_literal(y: str) -> str:
    return f"return oi_q_clamp({y}, -128, 127);"
