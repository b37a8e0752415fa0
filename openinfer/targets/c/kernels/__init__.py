"""Portable C kernels: one emitter per op family, selected through the op registry's name.

Calling convention of every generated kernel (the host schedule relies on it):

    oi_status NAME(const oi_kctx *ctx, const IN0 *in0, ..., OUT *out, <runtime attributes>, <sizes>)

Inputs and output are storage pointers (`ctype()`: f16/bf16 as uint16_t bits, f8 and packed
types as bytes). Runtime attributes (values of scalar variables) follow as `double` (float
variables) or `int64_t`, then the run-time value of each dynamic sizevar its extents depend on
(`int64_t sz_S`: a dim of such a kernel renders as a C expression over it, openinfer/dims.py).
Static attributes, static shapes and dtypes are baked into the code. A kernel
returns OI_OK, or a status for data-dependent failures (a gather index out of range).

An emitter is `fn(req, name, renderer) -> str` returning the function definition; families live
in the modules of this package and register with `@family("op", ...)`:

    elementwise  every element-wise op (an expression table), cast, fill, and `fused` chains
    reduce       sum/mean/prod/max/min_axis, argmax/argmin_axis, is_finite's 0-d form
    linalg       matmul, dequant_matmul
    layout       gather, transpose, reshape, concat, slice
    nn           softmax, log_softmax, layer_norm, rms_norm, rope, sdpa, conv1d/2d, max/avg_pool2d, lrn
    detection    non_max_suppression
    quantized    the integer-only int8 ops (TFLite's): qconv2d, qlinear, qavg/qmax_pool2d, qadd,
                 qsub, qmul, qmean, qsoftmax, qlut, qhard_swish, quantize, dequantize, requantize (their fixed point:
                 oi_quant.h)

The C lives in templates/c/ops/*.c.j2; oi_numeric.h has the scalar helpers (rounding, IEEE
minimum/maximum, wrapping division, float -> integer conversion, 128-bit sums).
"""

from . import detection, elementwise, layout, linalg, nn, quantized, reduce  # noqa: F401  (each registers its emitters)
from .registry import KernelSource, KernelText, emit_kernel, family, prototype

__all__ = ["KernelSource", "KernelText", "emit_kernel", "family", "prototype"]
