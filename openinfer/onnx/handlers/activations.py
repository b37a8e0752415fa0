"""ONNX activations: Relu, Tanh, Sigmoid (x * sigmoid(x) as silu), Softmax, LogSoftmax and Gelu as
the registry's ops; LeakyRelu, PRelu, HardSigmoid, HardSwish, Softsign, Elu, Celu, Selu and
Softplus, which the registry has no op for, written with the ops it has.
"""

from __future__ import annotations

import numpy as np

from ..context import DSL_OPS, NodeContext, aligned_at, broadcast, dims_of, handler, quoted, scalar_constant


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
# activations the registry has no op for, written with the ops it has


@handler("LeakyRelu", note="relu(x) - alpha * relu(-x) (float dtypes)")
@handler("PRelu", note="relu(x) - slope * relu(-x), slope broadcast (float dtypes)")
def _leaky_relu(c: NodeContext) -> None:
    is_prelu = c.node.op_type == "PRelu"
    c.allow(*(() if is_prelu else ("alpha",)))
    x, slope = c.inputs(2, 2) if is_prelu else (c.inputs(1, 1)[0], None)
    (out,) = c.outputs()
    c.float_input(x)
    if is_prelu:
        if c.opset < 7 and len(slope.dims) == 1 and slope.shape[0] > 1 and len(x.dims) > 2:
            slope = aligned_at(c, slope, 1, len(x.dims), 1)     # opset 6: a 1-D slope is per channel
        if slope.dtype != x.dtype or broadcast(c.fail, x.dims, slope.dims) != x.dims:
            c.fail(f"slope of {slope.dtype}{list(slope.shape)} does not broadcast to X's {x.dtype}{list(x.shape)}")
        factor = c.var(slope, 1)
    else:
        factor = scalar_constant(c, float(c.attrs.get("alpha", 0.01)), x.dtype, f"{out}_alpha", "LeakyRelu alpha")
    name = c.var(x, 0)
    negative = c.emit("neg", [name], {}, x.dtype, x.dims, temp=f"{out}_neg")
    c.emit_inplace("relu", [negative.var], negative)
    c.emit_inplace("mul", [negative.var, factor], negative)
    y = c.emit("relu", [name], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("sub", [y.var, negative.var], y)


@handler("HardSigmoid", note="clamp(alpha * x + beta, 0, 1) (float dtypes)")
@handler("HardSwish", note="x * clamp(x / 6 + 0.5, 0, 1) (float dtypes)")
def _hard_sigmoid(c: NodeContext) -> None:
    swish = c.node.op_type == "HardSwish"
    c.allow(*(() if swish else ("alpha", "beta")))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    alpha = 1 / 6 if swish else float(c.attrs.get("alpha", 0.2))
    beta = 0.5 if swish else float(c.attrs.get("beta", 0.5))
    a = scalar_constant(c, alpha, x.dtype, f"{out}_alpha", f"{c.node.op_type} alpha")
    b = scalar_constant(c, beta, x.dtype, f"{out}_beta", f"{c.node.op_type} beta")
    name = c.var(x, 0)
    h = c.emit("mul", [name, a], {}, x.dtype, x.dims, **({"temp": f"{out}_gate"} if swish else {"out": out}))
    c.emit_inplace("add", [h.var, b], h)
    c.imp.lines.append((f"op clamp({h.var}, min=0.0, max=1.0) >> {h.var};", f"{c.label} ({c.node.op_type})"))
    if swish:
        c.emit("mul", [name, h.var], {}, x.dtype, x.dims, out=out)


@handler("Softsign", note="x / (1 + |x|) (float dtypes)")
def _softsign(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    name = c.var(x, 0)
    one = scalar_constant(c, 1.0, x.dtype, f"{out}_one", "1")
    d = c.emit("abs", [name], {}, x.dtype, x.dims, temp=f"{out}_denominator")
    c.emit_inplace("add", [d.var, one], d)
    c.emit("div", [name, d.var], {}, x.dtype, x.dims, out=out)


@handler("Elu", note="relu(x) + alpha * (exp(min(x, 0)) - 1), min(x, 0) as -relu(-x) (float dtypes)")
@handler("Celu", note="relu(x) + alpha * (exp(min(x, 0) / alpha) - 1) (float dtypes)")
@handler("Selu", note="gamma * (relu(x) + alpha * exp(min(x, 0)) - alpha) (float dtypes)")
def _elu(c: NodeContext) -> None:
    op_type = c.node.op_type
    c.allow("alpha", *(("gamma",) if op_type == "Selu" else ()))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    default_alpha = {"Elu": 1.0, "Celu": 1.0, "Selu": 1.67326319217681884765625}[op_type]
    alpha = float(c.attrs.get("alpha", default_alpha))
    if op_type == "Celu" and alpha == 0.0:
        c.fail("alpha 0")
    name = c.var(x, 0)
    a = scalar_constant(c, alpha, x.dtype, f"{out}_alpha", f"{op_type} alpha")
    one = scalar_constant(c, 1.0, x.dtype, f"{out}_one", "1")
    m = c.emit("neg", [name], {}, x.dtype, x.dims, temp=f"{out}_negative_part")
    c.emit_inplace("relu", [m.var], m)
    c.emit_inplace("neg", [m.var], m)                       # min(x, 0)
    if op_type == "Celu":
        c.emit_inplace("div", [m.var, a], m)
    c.emit_inplace("exp", [m.var], m)
    c.emit_inplace("sub", [m.var, one], m)
    c.emit_inplace("mul", [m.var, a], m)
    y = c.emit("relu", [name], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, m.var], y)
    if op_type == "Selu":
        gamma = scalar_constant(c, float(c.attrs.get("gamma", 1.05070102214813232421875)), x.dtype, f"{out}_gamma",
                                "Selu gamma")
        c.emit_inplace("mul", [y.var, gamma], y)


@handler("Softplus", note="log(exp(x) + 1) (float dtypes)")
def _softplus(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    one = scalar_constant(c, 1.0, x.dtype, f"{out}_one", "1")
    y = c.emit("exp", [c.var(x, 0)], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, one], y)
    c.emit_inplace("log", [y.var], y)
