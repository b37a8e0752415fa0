"""Conformance cases of the integer-only int8 ops (TFLite's kernels: qconv2d, qlinear, the pools,
qadd / qsub / qmul, qmean, qsoftmax, qlut, qhard_swish, quantize, dequantize, requantize), kept
apart from cases.py for its size; cases.py looks builders up here."""

from __future__ import annotations

import numpy as np

from openinfer import dtypes as dt
from openinfer.dtypes import DTypeInfo
from openinfer.ops import OpSpec

from .cases import Builder, Variant


def _q_requant(rng, n: int, shifts: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel Q0.31 multipliers in [2^30, 2^31) and shifts in `shifts` (inclusive)."""
    return (rng.integers(1 << 30, (1 << 31) - 1, n).astype(np.int32),
            rng.integers(shifts[0], shifts[1] + 1, n).astype(np.int32))


def _i8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


def _qconv(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Windows that cross the padding, strides, dilation, groups (depthwise with a multiplier), no
    bias, a positive shift, activation bounds; accumulations large enough to use every bit of the
    multiplier, shifts that leave most outputs unsaturated."""
    i32 = dt.I32

    def case(x, w, shifts, bias=True):
        o = w.shape[0]
        mult, shift = _q_requant(rng, o, shifts)
        ins = [(t, x), (t, w), (i32, mult), (i32, shift)]
        return ins + ([(i32, rng.integers(-20000, 20000, o).astype(np.int32))] if bias else [])
    return [Variant("same_bias", case(_i8(rng, (1, 7, 9, 3)), _i8(rng, (5, 3, 3, 3)), (-9, -7)),
                    {"padding": 1, "x_zero": -11, "y_zero": 5}),
            Variant("depthwise_stride_dilation", case(_i8(rng, (2, 6, 5, 4)), _i8(rng, (8, 3, 3, 1)), (-7, -5)),
                    {"groups": 4, "stride": [2, 1], "dilation": 2, "padding": [2, 1, 1, 2], "x_zero": 90,
                     "y_zero": -100, "act_min": -100, "act_max": 60}),
            Variant("groups_1x1_no_bias", case(_i8(rng, (1, 4, 3, 6)), _i8(rng, (4, 1, 1, 3)), (-6, -5), bias=False),
                    {"groups": 2, "stride": 2, "x_zero": -128}),
            Variant("left_shift", case(_i8(rng, (1, 3, 4, 2)), _i8(rng, (3, 1, 2, 2)) // 16, (1, 1)),
                    {"x_zero": 0, "y_zero": -3})]


def _qlinear(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    def case(x, w, bias=True):
        n = w.shape[0]
        scale = rng.uniform(2e-4, 2e-3, n)
        ins = [(t, x), (t, w), (dt.F64, scale)]
        return ins + ([(dt.I32, rng.integers(-30000, 30000, n).astype(np.int32))] if bias else [])
    return [Variant("rows_bias", case(_i8(rng, (3, 13)), _i8(rng, (5, 13))), {"x_zero": -128, "y_zero": 14}),
            Variant("batch_dims_w_zero", case(_i8(rng, (2, 1, 33)), _i8(rng, (7, 33)), bias=False),
                    {"x_zero": 3, "w_zero": -2, "y_zero": -20, "act_min": -20, "act_max": 100})]


def _qpool(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = _i8(rng, (1, 7, 9, 5))
    return [Variant("same_3x3_s2", [(t, x)], {"kernel": 3, "stride": 2, "padding": 1}),
            Variant("2x3_clamped", [(t, x)],
                    {"kernel": [2, 3], "padding": [1, 2, 0, 1], "act_min": -20, "act_max": 90}),
            Variant("global", [(t, _i8(rng, (2, 5, 5, 3)))], {"kernel": 5, "stride": 5})]


def _qadd(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    from openinfer.tflite.quantization import add_params

    def attrs(sa, sb, sy, za, zb, zy, **more):
        return {"a_zero": za, "b_zero": zb, "y_zero": zy, **add_params(sa, sb, sy), **more}
    return [Variant("same_shape", [(t, _i8(rng, (3, 11))), (t, _i8(rng, (3, 11)))],
                    attrs(0.05, 0.11, 0.09, -7, 30, 2), inplace=True),
            Variant("broadcast_relu", [(t, _i8(rng, (1, 5, 7, 9))), (t, _i8(rng, (1, 1, 1, 9)))],
                    attrs(0.31, 0.02, 0.2, 100, -128, -60, act_min=-60)),
            Variant("broadcast_both", [(t, _i8(rng, (2, 1, 9))), (t, _i8(rng, (5, 1)))],
                    attrs(0.004, 0.004, 0.007, 1, -1, 0))]


def _qsub(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """qadd's shapes and scalings, and a difference that saturates both ways (every pair of
    extremes)."""
    from openinfer.tflite.quantization import add_params

    def attrs(sa, sb, sy, za, zb, zy, **more):
        return {"a_zero": za, "b_zero": zb, "y_zero": zy, **add_params(sa, sb, sy), **more}
    extremes = np.array([-128, -127, -1, 0, 1, 126, 127], np.int8)
    return [Variant("same_shape", [(t, _i8(rng, (3, 11))), (t, _i8(rng, (3, 11)))],
                    attrs(0.05, 0.11, 0.09, -7, 30, 2), inplace=True),
            Variant("broadcast_relu6", [(t, _i8(rng, (1, 5, 7, 9))), (t, _i8(rng, (1, 1, 1, 9)))],
                    attrs(0.31, 0.02, 0.2, 100, -128, -60, act_min=-60, act_max=-30)),
            Variant("broadcast_both", [(t, _i8(rng, (2, 1, 9))), (t, _i8(rng, (5, 1)))],
                    attrs(0.004, 0.004, 0.007, 1, -1, 0)),
            Variant("extremes_saturate", [(t, extremes.reshape(7, 1)), (t, extremes)],
                    attrs(0.02, 0.03, 0.01, 0, 5, -3))]


def _qmul(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Right and left shifts (a scale ratio below and above 1), broadcasting both ways, every
    product of int8 extremes (with zero points that make it +-255 * 255), activation bounds."""
    from openinfer.tflite.quantization import mul_params

    def attrs(sa, sb, sy, za, zb, zy, **more):
        m, s = mul_params(sa, sb, sy)
        return {"a_zero": za, "b_zero": zb, "y_zero": zy, "multiplier": m, "shift": s, **more}
    every = np.arange(-128, 128).astype(np.int8)
    return [Variant("same_shape", [(t, _i8(rng, (3, 11))), (t, _i8(rng, (3, 11)))],
                    attrs(0.05, 0.11, 0.09, -7, 30, 2), inplace=True),
            Variant("broadcast_relu", [(t, _i8(rng, (1, 5, 7, 9))), (t, _i8(rng, (1, 1, 1, 9)))],
                    attrs(0.031, 0.02, 0.08, 10, -128, -60, act_min=-60)),
            Variant("left_shift_broadcast_both", [(t, _i8(rng, (2, 1, 9)) // 64), (t, _i8(rng, (5, 1)) // 64)],
                    attrs(0.5, 0.4, 0.008, 1, -1, 0)),
            Variant("every_product", [(t, every.reshape(256, 1)), (t, every[::5])],
                    attrs(0.02, 0.03, 0.5, 127, -128, 3, act_min=-100, act_max=120))]


def _qmean(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """TFLite's H, W mean (keepdims and not), one axis, axes apart, every axis, a count with many
    bits and a scale ratio above 1 (a left shift)."""
    from openinfer.tflite.quantization import mean_params

    def attrs(sx, sy, zx, zy, **more):
        m, s = mean_params(sx, sy)
        return {"x_zero": zx, "y_zero": zy, "multiplier": m, "shift": s, **more}
    return [Variant("hw_keepdims", [(t, _i8(rng, (2, 7, 9, 5)))], attrs(0.02, 0.01, -43, -128, axes=[1, 2],
                                                                        keepdims=True)),
            Variant("hw", [(t, _i8(rng, (1, 5, 3, 11)))], attrs(0.0117, 0.0032, 5, 7, axes=[2, 1])),
            Variant("last_axis", [(t, _i8(rng, (3, 4, 13)))], attrs(0.1, 0.3, 0, -5, axes=[-1])),
            Variant("axes_apart_keepdims", [(t, _i8(rng, (3, 4, 5)))], attrs(0.05, 0.04, 12, 0, axes=[0, 2],
                                                                              keepdims=True)),
            Variant("every_axis", [(t, _i8(rng, (2, 3, 2)))], attrs(0.05, 0.2, -128, 127, axes=[0, 1, 2])),
            Variant("large_count_left_shift", [(t, _i8(rng, (1, 37, 41, 3)) // 8 + np.array([-9, 0, 7], np.int8))],
                    attrs(3.0, 0.5, 1, 0, axes=[1, 2]))]


def _qsoftmax(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    from openinfer.tflite.quantization import softmax_params
    x = _i8(rng, (3, 10))
    ties = np.array([[5, 5, 5, -128, 127, 127, 0]], np.int8)
    return [Variant("scale_0.1", [(t, x)], softmax_params(1.0, 0.1)),
            Variant("scale_1_16_3d", [(t, _i8(rng, (2, 3, 7)))], softmax_params(1.0, 1 / 16)),
            Variant("beta_large_scale", [(t, x)], softmax_params(2.5, 0.4)),
            Variant("ties_and_edges", [(t, ties)], softmax_params(1.0, 0.02))]

def _qlut(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Every int8 value through a random table and through LiteRT's LOGISTIC and TANH tables."""
    from openinfer.tflite.quantization import lut_table
    every = np.arange(-128, 128).astype(np.int8).reshape(16, 16)
    return [Variant("every_value_random_table", [(t, every), (t, _i8(rng, 256))], {}, inplace=True),
            Variant("logistic_table_4d",
                    [(t, _i8(rng, (1, 3, 5, 7))), (t, lut_table("logistic", 0.05, 3, 1 / 256, -128))], {}),
            Variant("tanh_table", [(t, every), (t, lut_table("tanh", 0.02, -9, 1 / 128, 0))], {})]


def _qhard_swish(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Every int8 value under scales that give a relu-ish left shift (large input scale), a right
    shift (small), none, and an output shift of 0 (output scale near input scale / 128)."""
    from openinfer.tflite.quantization import hard_swish_params
    every = np.arange(-128, 128).astype(np.int8).reshape(16, 16)
    return [Variant("left_shift", [(t, every)], {"x_zero": -10, "y_zero": -100, **hard_swish_params(0.05, 0.03)},
                    inplace=True),
            Variant("right_shift", [(t, every)], {"x_zero": 40, "y_zero": 3, **hard_swish_params(0.002, 0.0015)}),
            Variant("large_scale", [(t, every)], {"x_zero": 0, "y_zero": -128, **hard_swish_params(3.0, 0.5)}),
            Variant("output_shift_0", [(t, every)], {"x_zero": -128, "y_zero": 0, **hard_swish_params(0.1, 0.001)})]



def _quantize(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    x = np.concatenate([rng.normal(0, 4, 40), np.array([0.025, -0.025, 0.075, -0.075, 1e9, -1e9, np.inf, -np.inf,
                                                         np.nan, -0.0, 6.35, -6.4])]).astype(np.float32)
    return [Variant("ties_specials", [(t, x)], {"scale": 0.05, "zero": -3}),
            Variant("zero_128", [(t, x[:40].reshape(5, 8))], {"scale": 0.0392156862745098, "zero": -128})]


def _dequantize(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    every = np.arange(-128, 128).astype(np.int8).reshape(16, 16)
    return [Variant("every_value", [(t, every)], {"scale": 0.0123, "zero": 7})]


def _requantize(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    from openinfer.tflite.quantization import relu_params, requantize_params
    every = np.arange(-128, 128).astype(np.int8).reshape(16, 16)
    up = requantize_params(0.05, 0.02)
    down = requantize_params(0.05, 0.3)
    relu = relu_params(0.0313725508749485, 0.0235294122248888)
    return [Variant("wider", [(t, every)], {"x_zero": 3, "y_zero": -5, "multiplier": up[0], "shift": up[1]},
                    inplace=True),
            Variant("narrower", [(t, every)], {"x_zero": -128, "y_zero": 0, "multiplier": down[0], "shift": down[1]}),
            Variant("relu6", [(t, every)], {"x_zero": -20, "y_zero": -100, "multiplier": relu[0], "shift": relu[1],
                                            "act_min": -100, "act_max": 60}, inplace=True)]


QUANT_BUILDERS: dict[str, Builder] = {
    "qconv2d": _qconv, "qlinear": _qlinear, "qavg_pool2d": _qpool, "qmax_pool2d": _qpool, "qadd": _qadd,
    "qsub": _qsub, "qmul": _qmul, "qmean": _qmean, "qsoftmax": _qsoftmax, "qlut": _qlut, "qhard_swish": _qhard_swish,
    "quantize": _quantize, "dequantize": _dequantize, "requantize": _requantize,
}
