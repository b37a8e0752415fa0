"""Writes the TFLite test models, tests/data/tflite/NAME.tflite, without TensorFlow.

    python tools/tflite_testdata.py            # (re)write every model (and drop files no model writes)
    python tools/tflite_testdata.py --check    # rebuild in memory; exit 1 if a committed file differs
    python tools/tflite_testdata.py --list     # the models: name, size, operators

Each model is built from a fixed seed as a float32 graph with random weights (tests/tflite_builder.py
writes the flatbuffer), then quantized the way TFLite's post-training converter quantizes a model
(tflite_quantize.py): activation ranges measured by running the float graph in LiteRT on random
inputs drawn from each input's float range, int8 activations from those ranges, symmetric
per-channel weights, int32 bias. The quantization parameters are therefore realistic: the outputs
use the int8 range instead of sitting at -128/127 or in a handful of codes. The "_f32" models are
the float graphs themselves (the same seed: the same weights as their int8 model).

Shapes use primes and odd sizes (7x9, 11x13, channels 1, 3, 5, 8, 9, 16, 17) so that a kernel
which only handles even or vector-multiple sizes fails on them. The tests
(tests/tflite_front/test_testdata.py) check that the committed files are these bytes and run every model
in LiteRT's reference kernels and TFLM's interpreter.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tflite_builder (tflite_quantize sits beside this file)

from tflite_builder import Op, Tensor, build_model, quantize_params  # noqa: E402
from tflite_quantize import Graph, quantize_graph  # noqa: E402

DATA = REPO / "tests" / "data" / "tflite"


class FloatGraph:
    """A float32 subgraph under construction. Weights are uniform in [-a, a] with variance
    1/fan_in (a = sqrt(3 / fan_in)), so that activations keep their magnitude layer to layer."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.input_ranges: dict[str, tuple[float, float]] = {}

    def input(self, name: str, shape: tuple[int, ...], lo: float, hi: float) -> str:
        """A graph input, its values drawn uniformly from [lo, hi] (calibration and tests)."""
        self.tensors.append(Tensor(name, tuple(shape), "float32"))
        self.input_ranges[name] = (lo, hi)
        return name

    def const(self, name: str, data, dtype: str = "int32") -> str:
        data = np.asarray(data, dtype)
        self.tensors.append(Tensor(name, data.shape, dtype, data=data))
        return name

    def weights(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        a = np.sqrt(3.0 / fan_in)
        return self.const(name, self.rng.uniform(-a, a, shape), "float32")

    def bias(self, name: str, n: int, act: str) -> str:
        """Bias in [-0.5, 0.5]; before a fused ReLU in [0, 0.5], which keeps most outputs above
        the ReLU's floor (an output that is mostly zeros tests nothing)."""
        lo = -0.5 if act == "NONE" else 0.0
        return self.const(name, self.rng.uniform(lo, 0.5, n), "float32")

    def op(self, op: str, inputs: tuple[str | None, ...], shape: tuple[int, ...], **options) -> str:
        """Appends `op` with a new float32 output of `shape`; returns the output's name."""
        name = f"{op.lower()}_{len(self.ops)}"
        self.tensors.append(Tensor(name, tuple(shape), "float32"))
        self.ops.append(Op(op, tuple(inputs), (name,), options))
        return name

    def graph(self, dtype: str, **overrides) -> Graph:
        """The float graph ("float32") or its int8 quantization; the last op's output is the
        output. `overrides`: tensor name -> (scale, zero_point) to use instead of the measured."""
        float_graph = Graph(tuple(self.tensors), tuple(self.ops), tuple(self.input_ranges),
                            self.ops[-1].outputs, dict(self.input_ranges))
        return float_graph if dtype == "float32" else quantize_graph(float_graph, overrides)


def _out_size(size: int, kernel: int, stride: int, dilation: int, padding: str) -> int:
    """TFLite's output size: SAME pads to ceil(size / stride), VALID keeps whole windows only."""
    if padding == "SAME":
        return -(-size // stride)
    return -(-(size - (kernel - 1) * dilation) // stride)


# -- models: one function per operator, parameterised in the MODELS table -----------------------

def conv2d(seed, shape, cout, kernel, *, padding, stride=1, dilation=1, act="NONE", bias=True, dtype="int8"):
    g = FloatGraph(seed)
    x = g.input("input", shape, -1.0, 1.0)
    (kh, kw), cin = kernel, shape[3]
    w = g.weights("filter", (cout, kh, kw, cin), kh * kw * cin)
    b = g.bias("bias", cout, act) if bias else None
    out = (1, _out_size(shape[1], kh, stride, dilation, padding), _out_size(shape[2], kw, stride, dilation, padding),
           cout)
    g.op("CONV_2D", (x, w, b), out, padding=padding, stride_w=stride, stride_h=stride, dilation_w_factor=dilation,
         dilation_h_factor=dilation, fused_activation_function=act)
    return g.graph(dtype)


def depthwise_conv2d(seed, shape, multiplier, kernel, *, padding, stride=1, act="NONE", bias=True, dtype="int8"):
    g = FloatGraph(seed)
    x = g.input("input", shape, -1.0, 1.0)
    (kh, kw), cout = kernel, shape[3] * multiplier
    w = g.weights("filter", (1, kh, kw, cout), kh * kw)
    # no bias: two inputs, not bias index -1, which LiteRT refuses and TFLM crashes on (segfault)
    inputs = (x, w, g.bias("bias", cout, act)) if bias else (x, w)
    out = (1, _out_size(shape[1], kh, stride, 1, padding), _out_size(shape[2], kw, stride, 1, padding), cout)
    g.op("DEPTHWISE_CONV_2D", inputs, out, padding=padding, stride_w=stride, stride_h=stride,
         depth_multiplier=multiplier, fused_activation_function=act)
    return g.graph(dtype)


def fully_connected(seed, shape, n, *, act="NONE", bias=True, dtype="int8"):
    """`shape` is [batch, K], or [1, 1, 1, K] which keep_num_dims=false flattens to [1, K]."""
    g = FloatGraph(seed)
    x = g.input("input", shape, -1.0, 1.0)
    k = shape[-1]
    w = g.weights("weights", (n, k), k)
    b = g.bias("bias", n, act) if bias else None
    g.op("FULLY_CONNECTED", (x, w, b), (int(np.prod(shape)) // k, n), fused_activation_function=act,
         keep_num_dims=False)
    return g.graph(dtype)


def pool2d(seed, op, shape, filter_size, stride, *, padding, act="NONE", lo=-1.0, hi=1.0):
    g = FloatGraph(seed)
    x = g.input("input", shape, lo, hi)
    out = (1, _out_size(shape[1], filter_size, stride, 1, padding),
           _out_size(shape[2], filter_size, stride, 1, padding), shape[3])
    g.op(op, (x,), out, padding=padding, stride_w=stride, stride_h=stride, filter_width=filter_size,
         filter_height=filter_size, fused_activation_function=act)
    return g.graph("int8")


def reshape(seed):
    g = FloatGraph(seed)
    x = g.input("input", (1, 7, 9, 3), -1.0, 1.0)
    g.op("RESHAPE", (x, g.const("shape", [1, 21, 9])), (1, 21, 9), new_shape=[1, 21, 9])
    return g.graph("int8")


def squeeze(seed):
    g = FloatGraph(seed)
    x = g.input("input", (1, 1, 1, 17), -1.0, 1.0)
    g.op("SQUEEZE", (x,), (1, 17), squeeze_dims=[1, 2])
    return g.graph("int8")


def transpose(seed):
    g = FloatGraph(seed)
    x = g.input("input", (1, 7, 9, 5), -1.0, 1.0)
    g.op("TRANSPOSE", (x, g.const("perm", [0, 3, 1, 2])), (1, 5, 7, 9))
    return g.graph("int8")


def strided_slice(seed, shape, begin, end, strides, out, **masks):
    g = FloatGraph(seed)
    x = g.input("input", shape, -1.0, 1.0)
    g.op("STRIDED_SLICE", (x, g.const("begin", begin), g.const("end", end), g.const("strides", strides)), out,
         **masks)
    return g.graph("int8")


def concatenation(seed, shapes, axis, lo, hi):
    """The inputs share one range, so they and the output share their parameters: LiteRT's int8
    CONCATENATION requires that (concatenation.cc: t->params.scale != output->params.scale)."""
    g = FloatGraph(seed)
    xs = tuple(g.input(f"input{i}", s, lo, hi) for i, s in enumerate(shapes))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    g.op("CONCATENATION", xs, tuple(out), axis=axis)
    return g.graph("int8")


def pad(seed, op, value=None):
    """PAD fills with the zero point (the code of 0.0); PADV2 with a constant (quantized with the
    input's parameters)."""
    g = FloatGraph(seed)
    x = g.input("input", (1, 7, 9, 3), -1.0, 1.0)
    paddings = g.const("paddings", [[0, 0], [1, 2], [2, 1], [0, 0]])
    inputs = (x, paddings) if value is None else (x, paddings, g.const("constant_values", value, "float32"))
    g.op(op, inputs, (1, 10, 12, 3))
    return g.graph("int8")


def unary(seed, op, shape, lo, hi, *, dtype="int8", same_params=False, **options):
    """An elementwise op or SOFTMAX. int8 SOFTMAX and LOGISTIC output (1/256, -128), TANH
    (1/128, 0): the kernels require those; the others' output range is measured, or with
    `same_params` the output keeps the input's parameters."""
    g = FloatGraph(seed)
    name = g.op(op, (g.input("input", shape, lo, hi),), shape, **options)
    return g.graph(dtype, **({name: quantize_params(lo, hi)} if same_params else {}))


def binary(seed, op, shape0, shape1, range0, range1, act="NONE"):
    """Two inputs with different ranges, so input, input and output scales all differ."""
    g = FloatGraph(seed)
    x0, x1 = g.input("input0", shape0, *range0), g.input("input1", shape1, *range1)
    g.op(op, (x0, x1), tuple(np.broadcast_shapes(shape0, shape1)), fused_activation_function=act)
    return g.graph("int8")


def mean(seed, keep_dims):
    g = FloatGraph(seed)
    x = g.input("input", (1, 7, 9, 5), -1.0, 2.0)
    g.op("MEAN", (x, g.const("axis", [1, 2])), (1, 1, 1, 5) if keep_dims else (1, 5), keep_dims=keep_dims)
    return g.graph("int8")


def quantize_op(op, in_dtype, out_dtype, out_range=(-2.0, 3.0)):
    """QUANTIZE float32 -> int8 or int8 -> int8 (requantize), DEQUANTIZE int8 -> float32: one op on
    values in [-2, 3]; an int8 input has that range's parameters, an int8 output `out_range`'s."""
    shape, in_range = (1, 7, 9, 5), (-2.0, 3.0)

    def tensor(name, dtype, value_range):
        if dtype == "float32":
            return Tensor(name, shape, dtype)
        scale, zero_point = quantize_params(*value_range)
        return Tensor(name, shape, dtype, scale=(scale,), zero_point=(zero_point,))

    tensors = (tensor("input", in_dtype, in_range), tensor("output", out_dtype, out_range))
    return Graph(tensors, (Op(op, ("input",), ("output",)),), ("input",), ("output",), {"input": in_range})


def tiny_dscnn(seed):
    """A keyword-spotting-style chain: conv 3x3 s2 -> depthwise 3x3 -> pointwise conv (all ReLU)
    -> global average pool -> reshape -> fully connected -> softmax."""
    g = FloatGraph(seed)
    x = g.input("input", (1, 13, 11, 3), -1.0, 1.0)
    w, b = g.weights("conv1_filter", (8, 3, 3, 3), 27), g.bias("conv1_bias", 8, "RELU")
    x = g.op("CONV_2D", (x, w, b), (1, 7, 6, 8), padding="SAME", stride_w=2, stride_h=2,
             fused_activation_function="RELU")
    w, b = g.weights("dw_filter", (1, 3, 3, 8), 9), g.bias("dw_bias", 8, "RELU")
    x = g.op("DEPTHWISE_CONV_2D", (x, w, b), (1, 7, 6, 8), padding="SAME", stride_w=1, stride_h=1,
             depth_multiplier=1, fused_activation_function="RELU")
    w, b = g.weights("pw_filter", (16, 1, 1, 8), 8), g.bias("pw_bias", 16, "RELU")
    x = g.op("CONV_2D", (x, w, b), (1, 7, 6, 16), padding="VALID", stride_w=1, stride_h=1,
             fused_activation_function="RELU")
    x = g.op("AVERAGE_POOL_2D", (x,), (1, 1, 1, 16), padding="VALID", stride_w=1, stride_h=1, filter_width=6,
             filter_height=7)
    x = g.op("RESHAPE", (x, g.const("shape", [1, 16])), (1, 16), new_shape=[1, 16])
    w, b = g.weights("fc_weights", (5, 16), 16), g.bias("fc_bias", 5, "NONE")
    x = g.op("FULLY_CONNECTED", (x, w, b), (1, 5))
    g.op("SOFTMAX", (x,), (1, 5), beta=1.0)
    return g.graph("int8")


def tiny_resnet(seed):
    """One residual block: conv 3x3 ReLU -> conv 3x3 -> add the block input (ReLU fused) ->
    global average pool -> reshape -> fully connected -> softmax."""
    g = FloatGraph(seed)
    x0 = g.input("input", (1, 9, 11, 8), -1.0, 1.0)
    w, b = g.weights("conv1_filter", (8, 3, 3, 8), 72), g.bias("conv1_bias", 8, "RELU")
    x = g.op("CONV_2D", (x0, w, b), (1, 9, 11, 8), padding="SAME", stride_w=1, stride_h=1,
             fused_activation_function="RELU")
    w, b = g.weights("conv2_filter", (8, 3, 3, 8), 72), g.bias("conv2_bias", 8, "NONE")
    x = g.op("CONV_2D", (x, w, b), (1, 9, 11, 8), padding="SAME", stride_w=1, stride_h=1)
    x = g.op("ADD", (x, x0), (1, 9, 11, 8), fused_activation_function="RELU")
    x = g.op("AVERAGE_POOL_2D", (x,), (1, 1, 1, 8), padding="VALID", stride_w=1, stride_h=1, filter_width=11,
             filter_height=9)
    x = g.op("RESHAPE", (x, g.const("shape", [1, 8])), (1, 8), new_shape=[1, 8])
    w, b = g.weights("fc_weights", (7, 8), 8), g.bias("fc_bias", 7, "NONE")
    x = g.op("FULLY_CONNECTED", (x, w, b), (1, 7))
    g.op("SOFTMAX", (x,), (1, 7), beta=1.0)
    return g.graph("int8")


_B = (1, 5, 7, 9)  # the binary ops' full shape; (1, 1, 1, 9) broadcasts over it

#: name -> the function that builds it. A "_f32" model is its int8 namesake's float graph.
MODELS: dict[str, Callable[[], Graph]] = {
    "conv2d_3x3_same_relu": partial(conv2d, 11, (1, 7, 9, 3), 8, (3, 3), padding="SAME", act="RELU"),
    "conv2d_3x3_same_relu_f32": partial(conv2d, 11, (1, 7, 9, 3), 8, (3, 3), padding="SAME", act="RELU",
                                        dtype="float32"),
    "conv2d_3x3_valid_s2_relu6": partial(conv2d, 12, (1, 11, 13, 5), 9, (3, 3), padding="VALID", stride=2,
                                         act="RELU6"),
    "conv2d_5x3_same_s2": partial(conv2d, 13, (1, 11, 13, 5), 16, (5, 3), padding="SAME", stride=2),
    "conv2d_1x1_nobias": partial(conv2d, 14, (1, 7, 9, 16), 17, (1, 1), padding="VALID", bias=False),
    "conv2d_3x3_valid_dilation2": partial(conv2d, 15, (1, 11, 13, 1), 5, (3, 3), padding="VALID", dilation=2),
    "conv2d_3x3_same_dilation2": partial(conv2d, 16, (1, 7, 9, 9), 3, (3, 3), padding="SAME", dilation=2),
    "depthwise_conv2d_3x3_same_relu": partial(depthwise_conv2d, 21, (1, 11, 13, 8), 1, (3, 3), padding="SAME",
                                              act="RELU"),
    "depthwise_conv2d_3x3_same_relu_f32": partial(depthwise_conv2d, 21, (1, 11, 13, 8), 1, (3, 3), padding="SAME",
                                                  act="RELU", dtype="float32"),
    "depthwise_conv2d_3x3_valid_s2_mult2": partial(depthwise_conv2d, 22, (1, 11, 13, 5), 2, (3, 3),
                                                   padding="VALID", stride=2),
    "depthwise_conv2d_5x3_same_s2_relu6": partial(depthwise_conv2d, 23, (1, 7, 9, 17), 1, (5, 3), padding="SAME",
                                                  stride=2, act="RELU6"),
    "depthwise_conv2d_3x3_same_c1_mult2_nobias": partial(depthwise_conv2d, 24, (1, 9, 7, 1), 2, (3, 3),
                                                         padding="SAME", bias=False),
    "fully_connected_k13_relu": partial(fully_connected, 31, (1, 13), 9, act="RELU"),
    "fully_connected_k13_relu_f32": partial(fully_connected, 31, (1, 13), 9, act="RELU", dtype="float32"),
    "fully_connected_b3_k33": partial(fully_connected, 32, (3, 33), 17),
    "fully_connected_b3_k13_nobias": partial(fully_connected, 33, (3, 13), 8, bias=False),
    "fully_connected_4d_k33": partial(fully_connected, 34, (1, 1, 1, 33), 5),
    "average_pool_2d_3x3_s2_same": partial(pool2d, 41, "AVERAGE_POOL_2D", (1, 11, 13, 5), 3, 2, padding="SAME"),
    "average_pool_2d_3x3_s2_valid_relu6": partial(pool2d, 42, "AVERAGE_POOL_2D", (1, 11, 13, 5), 3, 2,
                                                  padding="VALID", act="RELU6", lo=-1.0, hi=7.0),
    "average_pool_2d_global_5x5": partial(pool2d, 43, "AVERAGE_POOL_2D", (1, 5, 5, 9), 5, 1, padding="VALID"),
    "max_pool_2d_3x3_s2_same": partial(pool2d, 44, "MAX_POOL_2D", (1, 7, 9, 3), 3, 2, padding="SAME"),
    "max_pool_2d_3x3_s2_valid": partial(pool2d, 45, "MAX_POOL_2D", (1, 11, 13, 9), 3, 2, padding="VALID"),
    "max_pool_2d_global_5x5": partial(pool2d, 46, "MAX_POOL_2D", (1, 5, 5, 17), 5, 1, padding="VALID"),
    "reshape": partial(reshape, 51),
    "squeeze": partial(squeeze, 52),
    "transpose_0312": partial(transpose, 53),
    "strided_slice": partial(strided_slice, 54, (1, 11, 13, 5), [0, 1, 2, 0], [1, 10, 13, 5], [1, 2, 3, 1],
                             (1, 5, 4, 5)),
    # begin_mask (axis 2 from 0), end_mask (axes 2, 3 to the end), shrink_axis_mask (axis 0 dropped)
    "strided_slice_masks": partial(strided_slice, 55, (1, 7, 9, 5), [0, 1, 7, 1], [1, 6, 0, 0], [1, 1, 2, 1],
                                   (5, 5, 4), begin_mask=0b0100, end_mask=0b1100, shrink_axis_mask=0b0001),
    "concatenation_axis_last": partial(concatenation, 56, [(1, 7, 9, 3), (1, 7, 9, 5)], -1, -1.0, 1.0),
    "concatenation_axis1": partial(concatenation, 57, [(1, 3, 9, 5), (1, 4, 9, 5), (1, 2, 9, 5)], 1,
                                   -1.0, 2.0),
    "pad": partial(pad, 58, "PAD"),
    "padv2": partial(pad, 59, "PADV2", 0.5),
    "softmax": partial(unary, 61, "SOFTMAX", (1, 11), -2.5, 2.5, beta=1.0),
    "softmax_f32": partial(unary, 61, "SOFTMAX", (1, 11), -2.5, 2.5, beta=1.0, dtype="float32"),
    "softmax_beta0p4_4d": partial(unary, 62, "SOFTMAX", (1, 3, 1, 17), -6.0, 6.0, beta=0.4),
    "logistic": partial(unary, 63, "LOGISTIC", (1, 7, 9, 3), -5.0, 5.0),
    "logistic_f32": partial(unary, 63, "LOGISTIC", (1, 7, 9, 3), -5.0, 5.0, dtype="float32"),
    "tanh": partial(unary, 64, "TANH", (1, 7, 9, 3), -2.5, 2.5),
    "tanh_f32": partial(unary, 64, "TANH", (1, 7, 9, 3), -2.5, 2.5, dtype="float32"),
    "hard_swish": partial(unary, 65, "HARD_SWISH", (1, 7, 9, 5), -4.0, 4.0),
    "relu": partial(unary, 66, "RELU", (1, 7, 9, 5), -1.0, 3.0),
    "relu6": partial(unary, 67, "RELU6", (1, 7, 9, 5), -1.0, 7.0),
    "relu6_same_params": partial(unary, 68, "RELU6", (1, 7, 9, 5), -1.0, 7.0, same_params=True),
    "add": partial(binary, 71, "ADD", _B, _B, (-1.0, 1.0), (-3.0, 2.0)),
    "add_broadcast": partial(binary, 72, "ADD", _B, (1, 1, 1, 9), (-1.0, 1.0), (-0.5, 2.5)),
    "add_relu": partial(binary, 73, "ADD", _B, _B, (-0.5, 2.0), (-1.0, 1.5), act="RELU"),
    "sub": partial(binary, 74, "SUB", _B, _B, (-1.0, 2.0), (-1.5, 1.0)),
    "sub_broadcast": partial(binary, 75, "SUB", _B, (1, 1, 1, 9), (-2.0, 2.0), (-0.5, 0.5)),
    "mul": partial(binary, 76, "MUL", _B, _B, (-1.0, 2.0), (-1.5, 1.0)),
    "mul_broadcast": partial(binary, 77, "MUL", _B, (1, 1, 1, 9), (-2.0, 2.0), (0.25, 1.5)),
    "mean_keep_dims": partial(mean, 81, True),
    "mean": partial(mean, 82, False),
    "quantize": partial(quantize_op, "QUANTIZE", "float32", "int8"),
    # another scale and zero point, the top of the range clipped (2.5 to 3.0 saturate at 127)
    "requantize": partial(quantize_op, "QUANTIZE", "int8", "int8", (-3.5, 2.5)),
    "dequantize": partial(quantize_op, "DEQUANTIZE", "int8", "float32"),
    "tiny_dscnn": partial(tiny_dscnn, 91),
    "tiny_resnet": partial(tiny_resnet, 92),
}


@cache
def graph(name: str) -> Graph:
    return MODELS[name]()


def build(name: str) -> bytes:
    g = graph(name)
    return build_model(g.tensors, g.ops, g.inputs, g.outputs,
                       description=f"OpenInfer test model {name} (generated by tools/tflite_testdata.py)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail if a committed file differs from its rebuild")
    mode.add_argument("--list", action="store_true", help="print the models")
    args = parser.parse_args(argv)
    stale = sorted(p for p in DATA.glob("*.tflite") if p.stem not in MODELS)
    if args.list:
        for name in MODELS:
            g = graph(name)
            print(f"{name:44s} {len(build(name)):6d} B  {' '.join(op.op for op in g.ops)}")
        return 0
    if args.check:
        differ = [n for n in MODELS if not (DATA / f"{n}.tflite").is_file()
                  or (DATA / f"{n}.tflite").read_bytes() != build(n)]
        for name in differ:
            print(f"differs or missing: {name}.tflite")
        for path in stale:
            print(f"no model writes: {path.name}")
        return 1 if differ or stale else 0
    DATA.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.unlink()
    for name in MODELS:
        (DATA / f"{name}.tflite").write_bytes(build(name))
    print(f"wrote {len(MODELS)} models to {DATA.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
