"""TFLite's import-time quantization arithmetic: float scales folded into the fixed-point
multipliers and shifts its int8 kernels use (tensorflow/lite/kernels/internal/quantization_util.cc
and the ops' Prepare functions in tensorflow/lite/kernels/), computed here exactly as there so the
integer ops (openinfer/reference/kernels/quantized.py) are bit-exact with TFLite's.

TFLite stores scales as f32; its Prepare code widens them to double at specific points and rounds
with std::round (half away from zero). Each function below names the C function it follows and
keeps its order of operations: a different association of the same product can change the
multiplier's last bit.
"""

from __future__ import annotations

import math

import numpy as np

#: The headroom ADD and SUB give int8 inputs before scaling them to a common scale (add.cc, sub.cc).
ADD_LEFT_SHIFT = 20
#: Softmax's Q-format of the scaled differences: Q5.26 (activations.cc kScaledDiffIntegerBits).
SOFTMAX_DIFF_INTEGER_BITS = 5


def _round_half_away(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: real = multiplier / 2^31 * 2^shift, multiplier in [2^30, 2^31) (0 for 0)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def f32(x) -> float:
    """A TFLite scale (stored as f32) as the double C++ widens it to."""
    return float(np.float32(x))


def conv_multipliers(input_scale: float, filter_scales, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """PopulateConvolutionQuantizationParams (per channel; also FULLY_CONNECTED's
    GetQuantizedConvolutionMultipler): input_scale * filter_scale / output_scale in double."""
    pairs = [quantize_multiplier(f32(input_scale) * f32(s) / f32(output_scale)) for s in filter_scales]
    return np.array([m for m, _ in pairs], np.int32), np.array([s for _, s in pairs], np.int32)


def linear_scales(input_scale: float, filter_scales, output_scale: float) -> np.ndarray:
    """FULLY_CONNECTED's f64 requantization scale per output: input * filter / output in double
    (reference_integer_ops::FullyConnected's effective_output_scale)."""
    return np.array([f32(input_scale) * f32(s) / f32(output_scale) for s in filter_scales], np.float64)


def add_params(scale_a: float, scale_b: float, scale_y: float) -> dict[str, int]:
    """add.cc Prepare for int8 (and sub.cc's PrepareGeneralSubOp, the same arithmetic): both inputs
    to twice the larger input scale, the sum (difference) to the output's."""
    twice_max = 2.0 * f32(max(np.float32(scale_a), np.float32(scale_b)))
    m_a, s_a = quantize_multiplier(f32(scale_a) / twice_max)
    m_b, s_b = quantize_multiplier(f32(scale_b) / twice_max)
    m_y, s_y = quantize_multiplier(twice_max / f32(np.float32(1 << ADD_LEFT_SHIFT) * np.float32(scale_y)))
    return {"a_multiplier": m_a, "a_shift": s_a, "b_multiplier": m_b, "b_shift": s_b,
            "y_multiplier": m_y, "y_shift": s_y, "left_shift": ADD_LEFT_SHIFT}


def mul_params(scale_a: float, scale_b: float, scale_y: float) -> tuple[int, int]:
    """mul.cc Prepare for int8: `input1->params.scale * input2->params.scale / output->params.scale`
    is a product and quotient of floats, so it is computed in f32 and only then widened to
    double (LiteRT's reference MUL agrees with this and not with the f64 ratio)."""
    real = np.float32(np.float32(scale_a) * np.float32(scale_b)) / np.float32(scale_y)
    return quantize_multiplier(f32(real))


def mean_params(input_scale: float, output_scale: float) -> tuple[int, int]:
    """reduce.cc PrepareMeanOrSum for int8: input_scale / output_scale in double (the kernel folds
    1 / count into it, openinfer/reference/kernels/quantized.py mean_multiplier)."""
    return quantize_multiplier(f32(input_scale) / f32(output_scale))


def relu_params(input_scale: float, output_scale: float) -> tuple[int, int]:
    """activations.cc ReluPrepare: `double real_multiplier = input->params.scale /
    output->params.scale`, a quotient of floats, so in f32, then widened."""
    return quantize_multiplier(f32(np.float32(input_scale) / np.float32(output_scale)))


def softmax_params(beta: float, input_scale: float) -> dict[str, int]:
    """activations.cc SoftmaxPrepare (reference kernel): PreprocessSoftmaxScaling and
    CalculateInputRadius for Q5.26 differences."""
    bits = SOFTMAX_DIFF_INTEGER_BITS
    real = min(f32(beta) * f32(input_scale) * float(1 << (31 - bits)), float((1 << 31) - 1))
    multiplier, left_shift = quantize_multiplier(real)
    radius = math.floor(1.0 * ((1 << bits) - 1) * (1 << (31 - bits)) / (1 << left_shift))
    return {"multiplier": multiplier, "left_shift": left_shift, "diff_min": -radius}


def requantize_params(input_scale: float, output_scale: float) -> tuple[int, int]:
    """quantize.cc Prepare for int8 -> int8: input_scale / output_scale in double."""
    return quantize_multiplier(f32(input_scale) / f32(output_scale))


def activation_range(activation: str, scale: float, zero: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for int8: the fused activation's bounds in the output's
    integers (TFLite's `zero_point + round(bound / scale)`, in f32), within [-128, 127]."""
    def q(v: float) -> int:
        return zero + _round_half_away(float(np.float32(v) / np.float32(scale)))
    lo, hi = -128, 127
    if activation == "RELU":
        lo = max(lo, q(0.0))
    elif activation == "RELU6":
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    elif activation == "RELU_N1_TO_1":
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    elif activation != "NONE":
        raise ValueError(activation)
    return lo, hi


def lut_table(function: str, input_scale: float, input_zero: int, output_scale: float, output_zero: int) -> np.ndarray:
    """The int8 table of LiteRT's reference LOGISTIC and TANH (activations.cc Prepare: LUTPopulate
    of `1.0f / (1.0f + std::exp(-v))` or `std::tanh(v)`), in the natural order: entry j is the
    output for input j - 128.

    All in f32 as the C++: dequantized = scale * (q - zero), the function, times the f32
    1 / output_scale, rounded half away from zero (TfLiteRound), plus the zero point, saturated.
    The f32 exp and tanh are taken correctly rounded (computed in double, rounded to f32 once),
    as glibc's expf is in all but rare cases (its errors stay below 0.502 ulp) and tanhf is from
    glibc 2.41 (CORE-MATH; earlier glibc's is off by an ulp for about one f32 in twenty). An ulp
    changes a table entry only where the scaled result lies within an ulp of a rounding tie: no
    random scale met one in the tests, but input scales constructed to put tanh(x) * 128 on a tie
    do give TANH tables that differ by one in that entry from LiteRT's on glibc 2.36."""
    q = np.arange(-128, 128, dtype=np.int64)
    dequantized = np.float32(input_scale) * (q - input_zero).astype(np.float32)
    with np.errstate(over="ignore"):
        if function == "logistic":
            e = np.exp(-dequantized.astype(np.float64)).astype(np.float32)
            transformed = np.float32(1.0) / (np.float32(1.0) + e)
        elif function == "tanh":
            transformed = np.tanh(dequantized.astype(np.float64)).astype(np.float32)
        else:
            raise ValueError(function)
    inverse_scale = np.float32(1.0) / np.float32(output_scale)
    scaled = (transformed * inverse_scale).astype(np.float64)
    rescaled = np.trunc(scaled + np.copysign(0.5, scaled))        # std::round of an f32: exact in f64
    return np.clip(rescaled + output_zero, -128, 127).astype(np.int8)


def downscale_to_int16(multiplier: int) -> int:
    """DownScaleInt32ToInt16Multiplier: a Q0.31 multiplier rounded to Q0.15 (saturating at 2^15 - 1)."""
    if multiplier >= (1 << 31) - 1 - (1 << 15):
        return (1 << 15) - 1
    return (multiplier + (1 << 15)) >> 16


def hard_swish_params(input_scale: float, output_scale: float) -> dict[str, int]:
    """activations.cc HardSwishPrepare for int8: the input on a 2^7 finer ("hires") scale; the
    output multiplier hires / output_scale and the relu-ish multiplier hires / (3 / 2^15), each a
    quotient of f32 values in f32, quantized (QuantizeMultiplier) and downscaled to Q0.15."""
    hires = np.float32(1.0 / 128.0) * np.float32(input_scale)
    out_m, out_s = quantize_multiplier(float(hires / np.float32(output_scale)))
    relu_m, relu_s = quantize_multiplier(float(hires / np.float32(3.0 / 32768.0)))
    return {"output_multiplier": downscale_to_int16(out_m), "output_shift": out_s,
            "reluish_multiplier": downscale_to_int16(relu_m), "reluish_shift": relu_s}
