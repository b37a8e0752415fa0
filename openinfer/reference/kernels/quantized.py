"""The integer-only int8 ops (TFLite's int8 kernels), bit-exact with TensorFlow Lite's reference
kernels (tensorflow/lite/kernels/internal/reference/ and gemmlowp's fixedpoint.h).

Everything is computed on int64 arrays holding int32 values, with the int32 operations of the C
code spelled out: a C division truncates toward zero, a right shift of a negative value is
arithmetic, and a result is wrapped to int32 where the C code would (two's complement; the
kernels never rely on it for in-range data). The helpers at the top are TFLite's fixed-point
primitives; each op below says which reference function it follows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ops.registry import Inference

Arrays = Sequence[np.ndarray]

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32's range (two's complement), still as int64."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _div_pot_trunc(x: np.ndarray, bits: int) -> np.ndarray:
    """x / 2^bits as C divides: truncated toward zero."""
    return np.where(x >= 0, x >> bits, -((-x) >> bits))


def srdhm(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties away from zero
    (the nudge), saturating the one overflow (-2^31 * -2^31)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = _div_pot_trunc(ab + nudge, 31)
    return np.where((a == b) & (a == _I32_MIN), _I32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded half away from zero (0 <= exponent <= 31)."""
    x, e = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def requantize(acc, multiplier, shift) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding, the default build): acc * multiplier
    * 2^shift / 2^31 with the two roundings of its C code. `acc << shift` wraps as int32 (C's
    `x * (1 << left_shift)`)."""
    acc, m, s = (np.asarray(v, np.int64) for v in (acc, multiplier, shift))
    left, right = np.maximum(s, 0), np.maximum(-s, 0)
    return rounding_divide_by_pot(srdhm(wrap32(acc << left), m), right)


def _saturating_shift_left(x: np.ndarray, bits: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent."""
    return np.clip(x << bits, _I32_MIN, _I32_MAX)


def _clamp_i8(y: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(y, lo, hi).astype(np.int8)


# ----------------------------------------------------------------- gemmlowp fixed point (softmax)

def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor around -1/8 (gemmlowp)."""
    constant_term, one_third = 1895147668, 715827883          # exp(-1/8), 1/3 in Q0.31
    x = wrap32(a + (1 << 28))                                   # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrap32(srdhm(wrap32(x4_over_4 + x3), one_third) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + poly)))


#: exp(-2^k) in Q0.31 for the bits of the input's integer part and top fraction (gemmlowp's barrel shifter)
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))


def exp_on_negative_values_q5_26(a: np.ndarray) -> np.ndarray:
    """gemmlowp's exp_on_negative_values for a FixedPoint<int32, 5> (Q5.26) a <= 0; Q0.31 result."""
    frac_bits = 26
    quarter = 1 << (frac_bits - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        _saturating_shift_left(a_mod_quarter_minus_quarter, 5))
    remainder = wrap32(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        result = np.where(remainder & (1 << (frac_bits + exponent)), srdhm(result, multiplier), result)
    return np.where(a == 0, _I32_MAX, result)


def _one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1) in Q0.31: Newton-Raphson in Q2.29 (gemmlowp)."""
    s = a + _I32_MAX                                           # RoundingHalfSum(a, One)
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))     # 48/17 - 32/17 * d
    one_q2 = 1 << 29
    for _ in range(3):
        one_minus = wrap32(one_q2 - srdhm(half_denominator, x))
        x = wrap32(x + _saturating_shift_left(srdhm(x, one_minus), 2))
    return _saturating_shift_left(x, 1)


def _reciprocal_q12(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's GetReciprocal for a positive Q12.19 x: (1 / x's mantissa in Q0.31, num_bits_over_unit)."""
    x = np.asarray(x, np.int64)
    headroom_plus_one = 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64)   # CLZ(x): exact below 2^53
    shifted_minus_one = wrap32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return _one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), 12 - headroom_plus_one


def softmax_rows(x: np.ndarray, multiplier: int, left_shift: int, diff_min: int) -> np.ndarray:
    """reference_ops::Softmax for int8 in and out (rows on the last axis)."""
    x = x.astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    counts = diff >= diff_min
    scaled = srdhm(wrap32(diff << left_shift), multiplier)           # MultiplyByQuantizedMultiplierGreaterThanOne
    exps = exp_on_negative_values_q5_26(scaled)
    sum_of_exps = wrap32(np.where(counts, rounding_divide_by_pot(exps, 12), 0).sum(axis=-1, keepdims=True))
    shifted_scale, bits_over_unit = _reciprocal_q12(sum_of_exps)
    exponent = bits_over_unit + 31 - 8
    out = rounding_divide_by_pot(srdhm(shifted_scale, exps), exponent) - 128
    return np.where(counts, np.clip(out, -128, 127), -128).astype(np.int8)


# ----------------------------------------------------------------------------------- the ops

def qconv2d(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_integer_ops::ConvPerChannel / DepthwiseConvPerChannel, as one grouped convolution."""
    a = inf.attrs
    x = xs[0].astype(np.int64) - a["x_zero"]
    w = xs[1].astype(np.int64)
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), groups = a["stride"], a["dilation"], a["padding"], a["groups"]
    xp = np.zeros((n, h + pt + pb, wd + pl + pr, c), np.int64)       # padding taps: x = x_zero, so 0
    xp[:, pt:pt + h, pl:pl + wd, :] = x
    _, oh, ow, _ = inf.out_shape
    acc = np.zeros((n, oh, ow, o), np.int64)
    og = o // groups
    for i in range(kh):
        for j in range(kw):
            tap = xp[:, i * dh: i * dh + (oh - 1) * sh + 1: sh, j * dw: j * dw + (ow - 1) * sw + 1: sw, :]
            tap = tap.reshape(n, oh, ow, groups, cg)
            acc += np.einsum("nhwgc,goc->nhwgo", tap, w[:, i, j, :].reshape(groups, og, cg)).reshape(n, oh, ow, o)
    if len(xs) > 4:
        acc += xs[4].astype(np.int64)
    y = a["y_zero"] + requantize(wrap32(acc), xs[2], xs[3])
    return _clamp_i8(y, a["act_min"], a["act_max"])


def round_half_away(p: np.ndarray) -> np.ndarray:
    """C's round() of f64 values, as int64: the integer part, plus one away from zero when the
    fraction (exact in f64) is at least 1/2. (floor(p + 0.5) would round 0.49999999999999994 up.)"""
    whole = np.trunc(p)
    return (whole + np.where(np.abs(p - whole) >= 0.5, np.sign(p), 0.0)).astype(np.int64)


def qlinear(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_integer_ops::FullyConnected, the overload LiteRT's reference FULLY_CONNECTED runs:
    the int32 sum requantized in f64 (round(acc * scale), not the fixed-point multiplier)."""
    a = inf.attrs
    x = xs[0].astype(np.int64) - a["x_zero"]
    w = xs[1].astype(np.int64) - a["w_zero"]
    acc = x @ w.T
    if len(xs) > 3:
        acc = acc + xs[3].astype(np.int64)
    scaled = np.clip(round_half_away(wrap32(acc).astype(np.float64) * xs[2].astype(np.float64)), _I32_MIN, _I32_MAX)
    return _clamp_i8(a["y_zero"] + scaled, a["act_min"], a["act_max"])


def _qpool(is_max: bool):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        """reference_integer_ops::AveragePool / MaxPool: only the taps inside x count."""
        a = inf.attrs
        x = xs[0].astype(np.int64)
        n, h, wd, c = x.shape
        (kh, kw), (sh, sw), (pt, pl, _, _) = a["kernel"], a["stride"], a["padding"]
        _, oh, ow, _ = inf.out_shape
        out = np.empty((n, oh, ow, c), np.int64)
        for i in range(oh):
            h0, h1 = max(i * sh - pt, 0), min(i * sh - pt + kh, h)
            for j in range(ow):
                w0, w1 = max(j * sw - pl, 0), min(j * sw - pl + kw, wd)
                win = x[:, h0:h1, w0:w1, :]
                if is_max:
                    out[:, i, j, :] = win.max(axis=(1, 2))
                else:
                    total, count = win.sum(axis=(1, 2)), (h1 - h0) * (w1 - w0)
                    # C's (acc +- count / 2) / count: rounded half away from zero
                    out[:, i, j, :] = np.where(total > 0, (total + count // 2) // count,
                                               -((-total + count // 2) // count))
        return _clamp_i8(out, a["act_min"], a["act_max"])
    return kernel


def qadd(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_integer_ops::Add (AddElementwise / BroadcastAdd): both inputs to a common scale, summed."""
    a = inf.attrs

    def scaled(v: np.ndarray, p: str) -> np.ndarray:
        shifted = wrap32((v.astype(np.int64) - a[f"{p}_zero"]) << a["left_shift"])
        return rounding_divide_by_pot(srdhm(shifted, a[f"{p}_multiplier"]), -a[f"{p}_shift"])

    total = wrap32(scaled(xs[0], "a") + scaled(xs[1], "b"))
    y = a["y_zero"] + rounding_divide_by_pot(srdhm(total, a["y_multiplier"]), -a["y_shift"])
    return _clamp_i8(np.broadcast_to(y, inf.out_shape), a["act_min"], a["act_max"])


def qsub(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::Sub / BroadcastQuantSubSlow for int8 (SubElementwise): qadd's scaling, the
    difference of the rescaled inputs."""
    a = inf.attrs

    def scaled(v: np.ndarray, p: str) -> np.ndarray:
        shifted = wrap32((v.astype(np.int64) - a[f"{p}_zero"]) << a["left_shift"])
        return rounding_divide_by_pot(srdhm(shifted, a[f"{p}_multiplier"]), -a[f"{p}_shift"])

    difference = wrap32(scaled(xs[0], "a") - scaled(xs[1], "b"))
    y = a["y_zero"] + rounding_divide_by_pot(srdhm(difference, a["y_multiplier"]), -a["y_shift"])
    return _clamp_i8(np.broadcast_to(y, inf.out_shape), a["act_min"], a["act_max"])


def qmul(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_integer_ops::Mul / BroadcastMul6DSlow (MulElementwise): the int32 product of the
    offset inputs requantized with one multiplier."""
    a = inf.attrs
    product = (xs[0].astype(np.int64) - a["a_zero"]) * (xs[1].astype(np.int64) - a["b_zero"])
    y = a["y_zero"] + requantize(product, a["multiplier"], a["shift"])
    return _clamp_i8(np.broadcast_to(y, inf.out_shape), a["act_min"], a["act_max"])


def mean_multiplier(multiplier: int, shift: int, count: int) -> tuple[int, int]:
    """QuantizedMeanOrSum's readaptation of x_scale / y_scale's multiplier to include 1 / count:
    b = min(floor(log2(count)), 32, 31 + shift) bits of headroom, then (multiplier << b) / count
    truncated (C's int64 division of positive values) and the shift lowered by b."""
    bits = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << bits) // count, shift - bits


def qmean(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::QuantizedMeanOrSum (compute_sum false), the path LiteRT's reference MEAN
    runs for int8 whatever the axes and keep_dims: the int32 sum over the axes less x_zero * count,
    requantized with the multiplier that includes 1 / count."""
    a = inf.attrs
    x = xs[0]
    axes = tuple(a["axes"])
    count = int(np.prod([x.shape[i] for i in axes]))
    multiplier, shift = mean_multiplier(a["multiplier"], a["shift"], count)
    total = wrap32(x.astype(np.int64).sum(axis=axes, keepdims=a["keepdims"]) - a["x_zero"] * count)
    y = a["y_zero"] + requantize(total, multiplier, shift)
    return _clamp_i8(y.reshape(inf.out_shape), -128, 127)


def qsoftmax(xs: Arrays, inf: Inference) -> np.ndarray:
    a = inf.attrs
    return softmax_rows(xs[0], a["multiplier"], a["left_shift"], a["diff_min"])


def quantize(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::AffineQuantize: round(x / scale) in f32, half away from zero, + zero, saturated."""
    a = inf.attrs
    q = (xs[0].astype(np.float32) / np.float32(a["scale"])).astype(np.float64)
    r = np.trunc(q + np.copysign(0.5, q))      # std::round, exact: q + 0.5 of an f32 q is exact in f64
    r = np.nan_to_num(r, nan=0.0)
    return np.clip(np.clip(r, -2.0 ** 31, 2.0 ** 31 - 1) + a["zero"], -128, 127).astype(np.int8)


def dequantize(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::Dequantize: float(double(scale) * (x - zero))."""
    a = inf.attrs
    return (np.float64(np.float32(a["scale"])) * (xs[0].astype(np.int64) - a["zero"])).astype(np.float32)


def requantize_op(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::Requantize (int8 to int8), and ReluX (the same, clamped to the activation's bounds)."""
    a = inf.attrs
    y = a["y_zero"] + requantize(xs[0].astype(np.int64) - a["x_zero"], a["multiplier"], a["shift"])
    return _clamp_i8(y, a["act_min"], a["act_max"])


def qlut(xs: Arrays, inf: Inference) -> np.ndarray:
    """LiteRT's int8 LookupTable: y = table[x + 128] (the importer orders the table naturally)."""
    return xs[1][xs[0].astype(np.int64) + 128].astype(np.int8)


# ---------------------------------------------------------------- int16 fixed point (hard swish)

_I16_MIN, _I16_MAX = -(1 << 15), (1 << 15) - 1


def srdhm16(a, b) -> np.ndarray:
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul: round(a * b / 2^15), ties away from zero."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    high = _div_pot_trunc(ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14)), 15)
    return np.where((np.asarray(a) == _I16_MIN) & (np.asarray(b) == _I16_MIN), _I16_MAX, high)


def sdhm16(a, b) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul (hard_swish.h): a * b / 2^15 truncated toward zero."""
    high = _div_pot_trunc(np.asarray(a, np.int64) * np.asarray(b, np.int64), 15)
    return np.where((np.asarray(a) == _I16_MIN) & (np.asarray(b) == _I16_MIN), _I16_MAX, high)


def _saturating_shift_left16(x: np.ndarray, bits: int) -> np.ndarray:
    """hard_swish.h's SaturatingLeftShift: x * 2^bits saturated to int16."""
    return np.clip(x << bits, _I16_MIN, _I16_MAX)


def qhard_swish(xs: Arrays, inf: Inference) -> np.ndarray:
    """reference_ops::HardSwish (int8): the output path and the relu-ish path in int16 fixed point."""
    a = inf.attrs
    hires = (xs[0].astype(np.int64) - a["x_zero"]) * (1 << 7)
    preshift_output_scale = srdhm16(hires, a["output_multiplier"])
    reluish, e = hires, a["reluish_shift"]
    if e > 0:
        reluish = _saturating_shift_left16(reluish, e - 1)
    reluish = srdhm16(reluish, a["reluish_multiplier"])
    if e > 0:
        reluish = _saturating_shift_left16(reluish, 1)
    if e < 0:
        reluish = rounding_divide_by_pot(reluish, -e)
    reluish = (reluish + (1 << 15)) >> 1                    # [-1, 1] to [0, 1]
    y = rounding_divide_by_pot(sdhm16(reluish, preshift_output_scale), -a["output_shift"])
    return _clamp_i8(y + a["y_zero"], -128, 127)


KERNELS = {"qconv2d": qconv2d, "qlinear": qlinear, "qavg_pool2d": _qpool(False), "qmax_pool2d": _qpool(True),
           "qadd": qadd, "qsub": qsub, "qmul": qmul, "qmean": qmean, "qsoftmax": qsoftmax, "qlut": qlut,
           "qhard_swish": qhard_swish, "quantize": quantize, "dequantize": dequantize, "requantize": requantize_op}
