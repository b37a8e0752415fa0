"""ONNX activations: Relu, Tanh, Sigmoid (x * sigmoid(x) as silu), Softmax, LogSoftmax, Gelu,
LeakyRelu, HardSigmoid, HardSwish, Softsign, Softplus, Elu, Selu, Celu and Mish as the registry's
ops; PRelu (a slope tensor), which the registry has no op for, written with the ops it has.
"""

from __future__ import annotations

import numpy as np

from ..context import DSL_OPS, NodeContext, aligned_at, broadcast, dims_of, handler, quoted


@handler("Relu", "Tanh", note="{dsl} (float dtypes)")
@handler("Sigmoid", note="sigmoid (float dtypes); x * sigmoid(x) (a Mul that alone consumes it, by its input) as silu")
def _unary(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    silu = _silu_mul(c, out) if c.node.op_type == "Sigmoid" else None
    if silu is not None:
        index, mul = silu
        c.imp.skip.add(index)
        label = quoted(mul.name) if mul.name else f"#{index}"
        c.emit("silu", [c.var(x, 0)], {}, x.dtype, x.dims, out=mul.output[0],
               note=f"{c.label} (Sigmoid) + {label} (Mul): SiLU")
        return
    c.emit(DSL_OPS[c.node.op_type], [c.var(x, 0)], {}, x.dtype, x.dims, out=out)


def _silu_mul(c: NodeContext, sigmoid_out: str):
    """The Mul that alone consumes this Sigmoid's output and multiplies it by the Sigmoid's input
    (x * sigmoid(x), SiLU): (its index, node); else None."""
    imp = c.imp
    users = imp.consumers.get(sigmoid_out, [])
    if len(users) != 1 or sigmoid_out in imp.outputs:
        return None
    node = imp.g.node[users[0]]
    if node.op_type != "Mul" or node.domain not in ("", "ai.onnx") or sorted(node.input) != sorted(
            [sigmoid_out, c.node.input[0]]) or sigmoid_out == c.node.input[0]:
        return None
    return users[0], node


@handler("Softmax", "LogSoftmax", note="{dsl}(axis); opset < 13 (flattened to 2-D) through reshapes")
def _softmax(c: NodeContext) -> None:
    c.allow("axis")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    rank = len(x.dims)
    if rank == 0:
        c.fail("a scalar input is not supported")
    axis = int(c.attrs.get("axis", -1 if c.opset >= 13 else 1))
    if not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if c.opset >= 13 or axis == rank - 1:
        c.emit(DSL_OPS[c.node.op_type], [c.var(x, 0)], {"axis": axis if axis != rank - 1 else None}, x.dtype,
               x.dims, out=out)
        return
    # opset < 13: softmax over all dims from `axis` on, as a 2-D [outer, inner] softmax
    outer, inner = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
    flat = c.emit("reshape", [c.var(x, 0)], {}, x.dtype, dims_of((outer, inner)), temp=f"{out}_2d")
    soft = c.emit(DSL_OPS[c.node.op_type], [flat.var], {}, x.dtype, flat.dims, temp=f"{out}_2d_softmax")
    c.emit("reshape", [soft.var], {}, x.dtype, x.dims, out=out)


@handler("Gelu", note="gelu(approximate) (float dtypes)")
def _gelu(c: NodeContext) -> None:
    c.allow("approximate")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    approximate = c.attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        c.fail(f"approximate {approximate!r} (none and tanh are supported)")
    c.emit("gelu", [c.var(x, 0)], {"approximate": '"tanh"' if approximate == "tanh" else None}, x.dtype, x.dims,
           out=out)


# ---------------------------------------------------------------------------------------------
# activations with float attributes (ONNX's defaults are the registry's: an attribute the node
# leaves out is left out of the op too)

#: ONNX op -> the attributes its registry op (DSL_OPS) takes
_ATTRS = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "HardSwish": (), "Softsign": (),
          "Softplus": (), "Elu": ("alpha",), "Selu": ("alpha", "gamma"), "Celu": ("alpha",), "Mish": ()}


@handler("LeakyRelu", note="leaky_relu(alpha) (float dtypes)")
@handler("HardSigmoid", note="hard_sigmoid(alpha, beta) (float dtypes)")
@handler("HardSwish", "Softsign", "Softplus", "Mish", note="{dsl} (float dtypes)")
@handler("Elu", note="elu(alpha) (float dtypes)")
@handler("Selu", note="selu(alpha, gamma) (float dtypes)")
@handler("Celu", note="celu(alpha) (float dtypes; alpha 0 refused)")
def _activation(c: NodeContext) -> None:
    op, attrs = DSL_OPS[c.node.op_type], _ATTRS[c.node.op_type]
    c.allow(*attrs)
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    settings = {a: float(c.attrs[a]) if a in c.attrs else None for a in attrs}
    if op == "celu" and settings["alpha"] == 0.0:
        c.fail("alpha 0")
    c.emit(op, [c.var(x, 0)], settings, x.dtype, x.dims, out=out)


# ---------------------------------------------------------------------------------------------
# written with the ops the registry has


@handler("PRelu", note="relu(x) - slope * relu(-x), slope broadcast (float dtypes)")
def _prelu(c: NodeContext) -> None:
    c.allow()
    x, slope = c.inputs(2, 2)
    (out,) = c.outputs()
    c.float_input(x)
    if c.opset < 7 and len(slope.dims) == 1 and slope.shape[0] > 1 and len(x.dims) > 2:
        slope = aligned_at(c, slope, 1, len(x.dims), 1)     # opset 6: a 1-D slope is per channel
    if slope.dtype != x.dtype or broadcast(c.fail, x.dims, slope.dims) != x.dims:
        c.fail(f"slope of {slope.dtype}{list(slope.shape)} does not broadcast to X's {x.dtype}{list(x.shape)}")
    name = c.var(x, 0)
    negative = c.emit("neg", [name], {}, x.dtype, x.dims, temp=f"{out}_neg")
    c.emit_inplace("relu", [negative.var], negative)
    c.emit_inplace("mul", [negative.var, c.var(slope, 1)], negative)
    y = c.emit("relu", [name], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("sub", [y.var, negative.var], y)
