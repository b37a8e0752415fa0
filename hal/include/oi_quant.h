/*
 * oi_quant.h — the fixed-point arithmetic of TensorFlow Lite's int8 kernels, for the generated
 * integer-only kernels (qconv2d, qadd, qsoftmax, ... in docs/ops.md).
 *
 * Each function is bit-for-bit the function it names in TFLite's reference kernels
 * (tensorflow/lite/kernels/internal/common.h) or gemmlowp's fixedpoint.h, built the default way
 * (double rounding, TFLITE_SINGLE_ROUNDING off), and the NumPy reference
 * (openinfer/reference/kernels/quantized.py) spells out the same steps. Where TFLite's C relies on
 * a signed overflow that never happens for in-range data (`x * (1 << shift)`), these compute in
 * unsigned arithmetic, so the code has no undefined behaviour for any input.
 *
 * Everything is `static inline` and free of libm, so any translation unit may include it.
 */
#ifndef OI_QUANT_H
#define OI_QUANT_H

#include <stdint.h>

/* Bumped when a function's result changes for some input (a kernel compiled against another
 * version would then differ from the reference). */
#define OI_QUANT_VERSION 1

/* int32 a + b and a - b, wrapping (gemmlowp's FixedPoint + and -; TFLite's values stay in range). */
static inline int32_t oi_q_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t oi_q_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
/* int32 x << s (0 <= s <= 31), wrapping: TFLite's `x * (1 << s)`. */
static inline int32_t oi_q_shl(int32_t x, int s) { return (int32_t)((uint32_t)x << s); }

/* SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties away from zero; the only overflow
 * (-2^31 * -2^31) saturates. */
static inline int32_t oi_q_srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));     /* C division truncates toward zero */
}

/* RoundingDivideByPOT: x / 2^e rounded half away from zero, 0 <= e <= 31 (arithmetic shift). */
static inline int32_t oi_q_rdbpot(int32_t x, int e) {
    const int32_t mask = (int32_t)(((uint32_t)1 << e) - 1u);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* x >> e on a negative x is implementation-defined in C; GCC, Clang and every compiler the
     * targets use define it as the arithmetic shift, which TFLite assumes too. */
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier: x * m * 2^shift / 2^31, with its two roundings. */
static inline int32_t oi_q_requantize(int32_t x, int32_t m, int32_t shift) {
    const int left = shift > 0 ? (int)shift : 0, right = shift > 0 ? 0 : (int)-shift;
    return oi_q_rdbpot(oi_q_srdhm(oi_q_shl(x, left), m), right);
}

/* gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent: x * 2^e, saturated. */
static inline int32_t oi_q_sat_shl(int32_t x, int e) {
    const int64_t v = (int64_t)x * ((int64_t)1 << e);
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* exp(a) for a in [-1/4, 0), Q0.31 in and out: gemmlowp's Taylor expansion around -1/8. */
static inline int32_t oi_q_exp_quarter(int32_t a) {
    const int32_t constant_term = 1895147668, one_third = 715827883;     /* exp(-1/8), 1/3 */
    const int32_t x = oi_q_add(a, 1 << 28);
    const int32_t x2 = oi_q_srdhm(x, x), x3 = oi_q_srdhm(x2, x), x4 = oi_q_srdhm(x2, x2);
    const int32_t x4_over_4 = oi_q_rdbpot(x4, 2);
    const int32_t poly = oi_q_rdbpot(oi_q_add(oi_q_srdhm(oi_q_add(x4_over_4, x3), one_third), x2), 1);
    return oi_q_add(constant_term, oi_q_srdhm(constant_term, oi_q_add(x, poly)));
}

/* gemmlowp's exp_on_negative_values for a Q5.26 a <= 0 (softmax's scaled differences): the
 * result in Q0.31. exp of a's remainder modulo 1/4 by the polynomial, then one factor exp(-2^k)
 * for each set bit of a's integer part and top fraction bits. */
static inline int32_t oi_q_exp_on_negative_values_q5(int32_t a) {
    static const int32_t factors[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    const int32_t quarter = 1 << 24;
    const int32_t a_mod_quarter_minus_quarter = oi_q_sub(a & (quarter - 1), quarter);
    int32_t result = oi_q_exp_quarter(oi_q_sat_shl(a_mod_quarter_minus_quarter, 5));
    const int32_t remainder = oi_q_sub(a_mod_quarter_minus_quarter, a);
    for (int k = 0; k < 7; ++k)                      /* exp(-1/4), exp(-1/2), ..., exp(-16) */
        if (remainder & (1 << (24 + k))) result = oi_q_srdhm(result, factors[k]);
    return a == 0 ? INT32_MAX : result;
}

/* gemmlowp's one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a), a in [0, 1) in Q0.31, by three
 * Newton-Raphson steps in Q2.29 from 48/17 - 32/17 d. */
static inline int32_t oi_q_one_over_one_plus_x(int32_t a) {
    const int64_t sum = (int64_t)a + INT32_MAX;                  /* RoundingHalfSum(a, 1) */
    const int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = oi_q_add(1515870810, oi_q_srdhm(half_denominator, -1010580540));
    for (int i = 0; i < 3; ++i) {
        const int32_t one_minus = oi_q_sub(1 << 29, oi_q_srdhm(half_denominator, x));
        x = oi_q_add(x, oi_q_sat_shl(oi_q_srdhm(x, one_minus), 2));
    }
    return oi_q_sat_shl(x, 1);
}

/* TFLite's GetReciprocal for a positive Q12.19 sum: 1 / the sum's mantissa in Q0.31, and how
 * many bits the sum has above 1.0 (*bits_over_unit). */
static inline int32_t oi_q_reciprocal_q12(int32_t x, int *bits_over_unit) {
    int headroom_plus_one = 0;
    while (headroom_plus_one < 32 && !(((uint32_t)x << headroom_plus_one) & 0x80000000u)) ++headroom_plus_one;
    *bits_over_unit = 12 - headroom_plus_one;
    const int32_t shifted_minus_one = (int32_t)(((uint32_t)x << headroom_plus_one) - 0x80000000u);
    return oi_q_one_over_one_plus_x(shifted_minus_one);
}

/* TFLite's round() of a double to int32: half away from zero, saturated to int32. The integer
 * part plus one where the fraction (exact in double) is at least 1/2: v + 0.5 would round
 * 0.49999999999999994 up. */
static inline int32_t oi_q_round_f64(double v) {
    if (!(v > -2147483648.0)) return INT32_MIN;                /* NaN too: TFLite leaves it undefined */
    if (v >= 2147483647.0) return INT32_MAX;
    const int32_t whole = (int32_t)v;                          /* truncates toward zero */
    const double fraction = v - (double)whole;
    return whole + (fraction >= 0.5 ? 1 : fraction <= -0.5 ? -1 : 0);
}

static inline int8_t oi_q_clamp_i8(int32_t v, int32_t lo, int32_t hi) {
    return (int8_t)(v < lo ? lo : v > hi ? hi : v);
}

/* The int16 fixed point of TFLite's int8 HARD_SWISH (reference/hard_swish.h); values are int16
 * held in int32. gemmlowp's int16 SaturatingRoundingDoublingHighMul: round(a * b / 2^15), ties
 * away from zero; the only overflow (-2^15 * -2^15) saturates. */
static inline int32_t oi_q_srdhm16(int32_t a, int32_t b) {
    if (a == INT16_MIN && b == INT16_MIN) return INT16_MAX;
    const int32_t ab = a * b;                                   /* |a * b| <= 2^30: no overflow */
    return (ab + (ab >= 0 ? (1 << 14) : (1 - (1 << 14)))) / (1 << 15);
}

/* hard_swish.h's SaturatingDoublingHighMul: a * b / 2^15 truncated toward zero (the rounding
 * variant's biases cancel against it), -2^15 * -2^15 saturating. */
static inline int32_t oi_q_sdhm16(int32_t a, int32_t b) {
    if (a == INT16_MIN && b == INT16_MIN) return INT16_MAX;
    return (a * b) / (1 << 15);
}

/* hard_swish.h's SaturatingLeftShift: x * 2^s saturated to int16 (0 <= s <= 30). */
static inline int32_t oi_q_sat_shl16(int32_t x, int s) {
    const int64_t v = (int64_t)x * ((int64_t)1 << s);
    return v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : (int32_t)v;
}

/* reference_ops::HardSwish for one int8 value: v = (x - x_zero) * 2^7 on the "hires" input
 * scale; the output path v * output_multiplier; the relu-ish path v rescaled so that 3.0 is 2^15
 * (saturating: one bit of a left shift is kept for after the multiply, so that any saturation
 * is the final one), then moved from [-1, 1] to [0, 1]; their product on the output scale, right
 * shifted by -output_shift (<= 15), plus y_zero, clamped to int8. */
static inline int8_t oi_q_hard_swish(int32_t x, int32_t x_zero, int32_t y_zero, int32_t output_multiplier,
                                     int output_shift, int32_t reluish_multiplier, int reluish_shift) {
    const int32_t hires = (x - x_zero) * (1 << 7);              /* |x - x_zero| <= 255: fits int16 */
    const int32_t preshift_output = oi_q_srdhm16(hires, output_multiplier);
    int32_t reluish = hires;
    if (reluish_shift > 0) reluish = oi_q_sat_shl16(reluish, reluish_shift - 1);
    reluish = oi_q_srdhm16(reluish, reluish_multiplier);
    if (reluish_shift > 0) reluish = oi_q_sat_shl16(reluish, 1);
    if (reluish_shift < 0) reluish = oi_q_rdbpot(reluish, -reluish_shift);
    reluish = (reluish + (1 << 15)) >> 1;                       /* [-1, 1] to [0, 1]: non-negative */
    const int32_t y = oi_q_rdbpot(oi_q_sdhm16(reluish, preshift_output), -output_shift);
    return oi_q_clamp_i8(y + y_zero, -128, 127);
}

#endif /* OI_QUANT_H */
