"""Post-training int8 quantization of a float TFLite graph, as TFLite's converter does it.

tools/tflite_testdata.py builds each test model as a float32 graph with random weights; this module
turns it into the fully quantized model the converter would make from it, so that the test models'
quantization parameters are the ones real models have:

1. calibration: the float graph runs in LiteRT (reference kernels, every intermediate tensor kept)
   on random inputs drawn uniformly from each input's float range; each activation's [min, max]
   over those runs is its range, rounded to 3 significant digits so that a last-bit difference
   between two builds of the float kernels cannot change the committed bytes;
2. activations: asymmetric int8 per tensor from the range (quantize_params), except where the int8
   kernels fix the output: SOFTMAX and LOGISTIC (1/256, -128), TANH (1/128, 0), and the ops that
   move values without arithmetic (pools, reshapes, slices, pads, concatenation), whose output
   keeps the input's parameters (TFLite requires it of the pools and concatenation; for the others
   it is what the converter writes);
3. weights of CONV_2D and DEPTHWISE_CONV_2D symmetric per output channel (axis 0 of OHWI, axis 3
   of 1HWC), of FULLY_CONNECTED symmetric per tensor; bias int32 at input_scale * weight_scale;
   PADV2's pad value quantized with its input's parameters.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from tflite_builder import (  # noqa: E402
    Op,
    Tensor,
    build_model,
    quantize,
    quantize_bias,
    quantize_params,
    quantize_weights,
)

#: output (scale, zero_point) the int8 kernels require
FIXED_OUTPUT = {"SOFTMAX": (1 / 256, -128), "LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}
#: ops whose int8 output keeps the parameters of input 0
SAME_AS_INPUT = {"AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE", "SQUEEZE", "TRANSPOSE", "STRIDED_SLICE", "PAD",
                 "PADV2", "CONCATENATION"}
#: op -> the axis of per-channel weight scales (None: one scale)
WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": None}
#: calibration runs per graph, and their seed (fixed: the ranges are part of the committed bytes)
CALIBRATION_RUNS = 16
CALIBRATION_SEED = 20240


@dataclass(frozen=True)
class Graph:
    """One subgraph: tensors (file order), ops (execution order), input and output names, and the
    float range each input's values are drawn from (calibration here, test inputs in the tests)."""

    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_ranges: dict[str, tuple[float, float]]
    source: Graph | None = None  # the float graph an int8 graph was quantized from


def draw_inputs(g: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Float inputs drawn uniformly from their ranges."""
    shapes = {t.name: t.shape for t in g.tensors}
    return {name: rng.uniform(*g.input_ranges[name], shapes[name]) for name in g.inputs}


def run_float(g: Graph, runs: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every activation of the float graph `g` (by name) for each set of inputs in `runs`, computed
    by LiteRT's reference kernels. Checks that LiteRT computes the shapes the graph declares."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    tensors, ops = _with_conv_bias(g)
    interpreter = Interpreter(model_content=build_model(tensors, ops, g.inputs, g.outputs),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    results = []
    for inputs in runs:
        for detail, name in zip(interpreter.get_input_details(), g.inputs, strict=True):
            interpreter.set_tensor(detail["index"], np.asarray(inputs[name], np.float32))
        interpreter.invoke()
        values = {}
        for index, t in enumerate(g.tensors):
            if t.data is None:
                value = values[t.name] = interpreter.get_tensor(index)
                if value.shape != t.shape:
                    raise ValueError(f"{t.name}: LiteRT computes shape {value.shape}, the graph says {t.shape}")
        results.append(values)
    return results


def calibrate(g: Graph) -> dict[str, tuple[float, float]]:
    """[min, max] of every activation of the float graph `g` over CALIBRATION_RUNS random inputs,
    rounded to 3 significant digits."""
    rng = np.random.default_rng(CALIBRATION_SEED)
    runs = run_float(g, [draw_inputs(g, rng) for _ in range(CALIBRATION_RUNS)])
    return {name: (float(f"{min(float(r[name].min()) for r in runs):.3g}"),
                   float(f"{max(float(r[name].max()) for r in runs):.3g}")) for name in runs[0]}


def _with_conv_bias(g: Graph) -> tuple[tuple[Tensor, ...], tuple[Op, ...]]:
    """g's tensors and ops, a CONV_2D without a bias given a zero one: LiteRT's CONV_2D refuses to
    run without (conv.cc: TF_LITE_ENSURE(context, has_bias)); a zero bias computes the same sums.
    The extra tensors come after g's, so the indices of g's tensors do not change."""
    shapes = {t.name: t.shape for t in g.tensors}
    tensors, ops = list(g.tensors), []
    for op in g.ops:
        if op.op == "CONV_2D" and (len(op.inputs) < 3 or op.inputs[2] is None):
            zero = Tensor(f"{op.outputs[0]}_zero_bias", shapes[op.inputs[1]][:1], "float32",
                          data=np.zeros(shapes[op.inputs[1]][:1], np.float32))
            tensors.append(zero)
            op = replace(op, inputs=(*op.inputs[:2], zero.name))
        ops.append(op)
    return tuple(tensors), tuple(ops)


def quantize_graph(g: Graph, overrides: dict[str, tuple[float, int]] | None = None) -> Graph:
    """The int8 graph of the float graph `g` (int8 inputs and outputs); `overrides`: tensor name ->
    (scale, zero_point) used instead of the calibrated parameters."""
    ranges = calibrate(g)
    tensors = {t.name: t for t in g.tensors}
    params = {name: quantize_params(*g.input_ranges[name]) for name in g.inputs}
    params.update(overrides or {})
    constants: dict[str, Tensor] = {}  # float constant -> its quantized replacement
    for op in g.ops:
        for out in op.outputs:
            if out in params:
                continue
            if op.op in FIXED_OUTPUT:
                params[out] = FIXED_OUTPUT[op.op]
            elif op.op in SAME_AS_INPUT:
                params[out] = params[op.inputs[0]]
            else:
                params[out] = quantize_params(*ranges[out])
        if op.op in WEIGHT_AXIS:
            constants.update(_quantized_weights(op, tensors, params[op.inputs[0]][0]))
        elif op.op == "PADV2":
            value = tensors[op.inputs[2]]
            scale, zero_point = params[op.inputs[0]]
            constants[value.name] = replace(value, dtype="int8", scale=(scale,), zero_point=(zero_point,),
                                            data=quantize(value.data, scale, zero_point))
    quantized = []
    for t in g.tensors:
        if t.name in constants:
            quantized.append(constants[t.name])
        elif t.name in params:
            scale, zero_point = params[t.name]
            quantized.append(replace(t, dtype="int8", scale=(scale,), zero_point=(zero_point,)))
        elif t.dtype == "float32":
            raise ValueError(f"{t.name}: a float constant the quantizer has no rule for")
        else:
            quantized.append(t)
    return replace(g, tensors=tuple(quantized), source=g)


def _quantized_weights(op: Op, tensors: dict[str, Tensor], input_scale: float) -> dict[str, Tensor]:
    """The int8 weights (and int32 bias, when present) of a CONV_2D, DEPTHWISE_CONV_2D or
    FULLY_CONNECTED whose input has scale `input_scale`."""
    axis = WEIGHT_AXIS[op.op]
    weights = tensors[op.inputs[1]]
    q, scales = quantize_weights(weights.data, axis)
    out = {weights.name: replace(weights, dtype="int8", scale=scales, zero_point=(0,) * len(scales),
                                 quantized_dimension=axis or 0, data=q)}
    if len(op.inputs) > 2 and op.inputs[2] is not None:
        bias = tensors[op.inputs[2]]
        q, bias_scales = quantize_bias(bias.data, input_scale, scales)
        out[bias.name] = replace(bias, dtype="int32", scale=bias_scales, zero_point=(0,) * len(bias_scales),
                                 data=q)
    return out
