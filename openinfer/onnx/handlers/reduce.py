"""ONNX reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin and ReduceProd as the registry's
axis reductions, the composed ones (ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum,
ReduceLogSumExp) as sum_axis between element-wise ops, ArgMax and ArgMin, CumSum as cumsum. Each is
folded when its input is a constant.
"""

from __future__ import annotations

import numpy as np

from ..context import DSL_OPS, FLOATS, ONNX_INTS, Dim, NodeContext, handler

_REDUCE_FOLDS = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
                 "ReduceProd": np.prod,
                 "ReduceSumSquare": lambda a, **k: np.sum(a * a, **k),
                 "ReduceL1": lambda a, **k: np.sum(np.abs(a), **k),
                 "ReduceL2": lambda a, **k: np.sqrt(np.sum(a * a, **k)),
                 "ReduceLogSum": lambda a, **k: np.log(np.sum(a, **k)),
                 "ReduceLogSumExp": lambda a, **k: np.log(np.sum(np.exp(a), **k))}

#: the reductions ONNX composes: (op before sum_axis: "square" is mul(x, x), op after it, float only)
_COMPOSED_REDUCTIONS = {"ReduceSumSquare": ("square", None, False), "ReduceL1": ("abs", None, False),
                        "ReduceL2": ("square", "sqrt", True), "ReduceLogSum": (None, "log", True),
                        "ReduceLogSumExp": ("exp", "log", True)}


@handler("ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
         note="sum_axis(axes, keepdims) after mul(x, x), abs or exp, and before sqrt or log, as ONNX defines them "
              "(L2, LogSum, LogSumExp: float dtypes; L1: float and signed); axes as ReduceSum; folded on constants")
@handler("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
         note="{dsl}(axes, keepdims); axes constant (attribute, or input from opset 13/18), none: all "
              "(noop_with_empty_axes: dropped); numeric dtypes (mean_axis: float); folded on constants")
def _reduce(c: NodeContext) -> None:
    c.allow("axes", "keepdims", "noop_with_empty_axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    op_type = c.node.op_type
    rank = len(x.dims)
    axes = c.axes(axes_in, rank) if rank else None
    keepdims = bool(c.attrs.get("keepdims", 1))
    if not axes:
        if c.attrs.get("noop_with_empty_axes", 0):
            c.result(out, x)
            return
        axes = list(range(rank))
    composed = _COMPOSED_REDUCTIONS.get(op_type)
    if composed is not None and ((composed[2] and x.dtype not in FLOATS) or
                                 (composed[0] == "abs" and x.dtype not in FLOATS + ONNX_INTS)):
        c.fail(f"dtype {x.dtype} (float{'' if composed[2] else ' and signed'} dtypes)")
    if x.dtype == "bool" or (op_type == "ReduceMean" and x.dtype not in FLOATS):
        c.fail(f"dtype {x.dtype}: {DSL_OPS.get(op_type, 'sum_axis')} takes "
               f"{'float' if op_type == 'ReduceMean' else 'numeric'} dtypes")
    if any(x.shape[a] == 0 for a in axes) and op_type in ("ReduceMax", "ReduceMin", "ReduceMean"):
        c.fail(f"reducing an empty dim of {list(x.shape)} (the registry's {DSL_OPS[op_type]} has no empty result)")
    axes = sorted(axes)
    if any(x.shape[k] == 0 for k in range(rank) if k not in axes) and x.const is None:
        c.fail(f"a kept dim of size 0 in {list(x.shape)} is not imported")
    if x.const is not None:
        folded = _REDUCE_FOLDS[op_type](x.const, axis=tuple(axes), keepdims=keepdims)
        c.result(out, c.imp.const_value(np.asarray(folded).astype(x.const.dtype)))
        return
    if not axes and composed is None:        # a scalar: nothing to reduce
        c.emit("reshape", [c.var(x, 0)], {}, x.dtype, x.dims, out=out)
        return
    dims = tuple(Dim(1) if k in axes else d for k, d in enumerate(x.dims) if keepdims or k not in axes)
    if composed is None:
        c.emit(DSL_OPS[op_type], [c.var(x, 0)], {"axes": axes, "keepdims": keepdims or None}, x.dtype, dims,
               out=out)
        return
    before, after, _ = composed
    name = c.var(x, 0)
    if before is not None:
        name = c.emit("mul" if before == "square" else before, [name, name] if before == "square" else [name], {},
                      x.dtype, x.dims, temp=f"{out}_{before}").var
    if axes:
        reduced = c.emit("sum_axis", [name], {"axes": axes, "keepdims": keepdims or None}, x.dtype, dims,
                         **({"temp": f"{out}_sum"} if after else {"out": out}))
    else:
        reduced = c.emit("reshape", [name], {}, x.dtype, dims, **({"temp": f"{out}_sum"} if after else {"out": out}))
    if after is not None:
        c.emit(after, [reduced.var], {}, x.dtype, dims, out=out)


@handler("ArgMax", "ArgMin", note="{dsl}(axis, keepdims, select_first) (numeric dtypes)")
def _arg_reduce(c: NodeContext) -> None:
    c.allow("axis", "keepdims", "select_last_index")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if x.dtype == "bool":
        c.fail("dtype bool (numeric dtypes)")
    if x.shape[axis] == 0:
        c.fail(f"an empty axis {axis} of {list(x.shape)}")
    keepdims = bool(c.attrs.get("keepdims", 1))
    dims = tuple(Dim(1) if k == axis else d for k, d in enumerate(x.dims) if keepdims or k != axis)
    settings = {"axis": axis, "keepdims": keepdims or None,
                "select_first": False if c.attrs.get("select_last_index", 0) else None}
    c.emit(DSL_OPS[c.node.op_type], [c.var(x, 0)], settings, "i64", dims, out=out)


# ---------------------------------------------------------------------------------------------
# running sums (the position computations of exported transformers' mask subgraphs: folded there)


@handler("CumSum", note="cumsum(axis, exclusive, reverse) (f16: acc=f32); axis constant; folded on constants")
def _cumsum(c: NodeContext) -> None:
    c.allow("exclusive", "reverse")
    x, axis_in = c.inputs(2, 2)
    (out,) = c.outputs()
    rank = len(x.dims)
    axis = int(c.const_input(axis_in, "axis").reshape(-1)[0])
    if not -rank <= axis < max(rank, 1):
        c.fail(f"axis {axis} out of range for rank {rank}")
    exclusive, reverse = bool(c.attrs.get("exclusive", 0)), bool(c.attrs.get("reverse", 0))
    if x.const is not None:
        values = x.const
        a = np.flip(values, axis) if reverse else values
        s = np.cumsum(a, axis=axis, dtype=values.dtype)
        if exclusive:
            s = s - a
        c.result(out, c.imp.const_value((np.flip(s, axis) if reverse else s).astype(values.dtype)))
        return
    if x.dtype == "bool" or rank == 0:
        c.fail(f"a {x.dtype} input of rank {rank} (cumsum scans numeric tensors of rank >= 1)")
    settings = {"axis": axis % rank, "exclusive": exclusive or None, "reverse": reverse or None,
                "acc": "f32" if x.dtype == "f16" else None}
    c.emit("cumsum", [c.var(x, 0)], settings, x.dtype, x.dims, out=out)
