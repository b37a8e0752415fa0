"""ONNX layout and indexing ops: Flatten, Reshape, Transpose, Unsqueeze, Squeeze, Concat, Expand,
Slice, Split, Gather, GatherElements, GatherND, ScatterND, Trilu and TopK (its indices, then the
values gathered at them). Each is folded on constant data; a
constant computed from shapes keeps the dims its elements are (`Value.elements`), so that a
Reshape or Expand to it keeps the sizevars.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import lookup
from ...ops import TensorType, get
from ...ops.errors import OpRuntimeError
from ...reference.kernels import run_kernel
from ..context import (
    FLOATS,
    NUMPY_DTYPES,
    ONNX_INTS,
    ONNX_UINTS,
    Dim,
    NodeContext,
    Value,
    broadcast,
    dim_product,
    dim_quotient,
    dim_sum,
    dims_of,
    element_dims,
    handler,
    zeros_of,
)


def _reshaped(c: NodeContext, x: Value, shape: tuple[int, ...], dims: tuple[Dim, ...], out: str) -> None:
    if int(np.prod(shape)) != int(np.prod(x.shape)):
        c.fail(f"cannot reshape {list(x.shape)} to {list(shape)}")
    if x.const is not None:
        c.folded(out, x.const.reshape(shape), dims, elements=x.elements, prefix=_reshaped_prefix(x, dims))
        return
    c.emit("reshape", [c.var(x, 0)], {}, x.dtype, dims, out=out)


def _reshaped_prefix(x: Value, dims: tuple[Dim, ...]):
    """x's prefix (Value.prefix) after a reshape that only adds or drops 1-dims (an Unsqueeze of
    position ids), None after any other."""
    if x.prefix is None:
        return None
    source, axis = x.prefix
    def counts(d: Dim) -> bool:          # not a static 1-dim
        return d.size != 1 or d.expr is not None

    kept = [k for k, d in enumerate(dims) if counts(d)]
    if [d for d in dims if counts(d)] != [d for d in x.dims if counts(d)]:
        return None
    rank_before = sum(1 for d in x.dims[:axis] if counts(d))
    new_axis = kept[rank_before]
    if source is None:
        return None, new_axis
    shape = [d.size for d in dims]
    shape[new_axis] = source.shape[axis]
    return source.reshape(shape), new_axis


@handler("Flatten", note="reshape to 2-D at `axis`")
def _flatten(c: NodeContext) -> None:
    c.allow("axis")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    dims = (dim_product(x.dims[:axis]), dim_product(x.dims[axis:]))
    shape = (dims[0].size, dims[1].size)
    _reshaped(c, x, shape, dims, out)


@handler("Reshape", note="reshape; the shape input constant (0 and -1 resolved at import)")
def _reshape(c: NodeContext) -> None:
    c.allow("allowzero", "shape")
    x, shape_in = c.inputs(1, 2)
    (out,) = c.outputs()
    if shape_in is not None:
        target = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
        known_dims = shape_in.elements
    elif "shape" in c.attrs:
        target, known_dims = [int(s) for s in c.attrs["shape"]], None
    else:
        c.fail("no shape given")
    allow_zero = bool(c.attrs.get("allowzero", 0))
    dims: list[Dim | None] = []
    for k, s in enumerate(target):
        if s == 0 and not allow_zero:
            if k >= len(x.dims):
                c.fail(f"shape {target}: 0 at dim {k} copies a dim the input does not have")
            dims.append(x.dims[k])
        elif s == -1:
            dims.append(None)
        elif s < 0:
            c.fail(f"shape {target}: negative size {s}")
        else:
            dims.append(known_dims[k] if known_dims is not None else Dim(s))
    if dims.count(None) > 1:
        c.fail(f"shape {target}: more than one -1")
    known = dim_product(d for d in dims if d is not None)
    if None in dims:
        total = dim_product(x.dims)
        if known.size == 0 or total.size % known.size:
            c.fail(f"shape {target} does not fit {list(x.shape)}")
        dims[dims.index(None)] = dim_quotient(total, known)
    final = tuple(d for d in dims if d is not None)
    _reshaped(c, x, tuple(d.size for d in final), final, out)


@handler("Transpose", note="transpose(perm)")
def _transpose(c: NodeContext) -> None:
    c.allow("perm")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    rank = len(x.dims)
    perm = [int(p) for p in c.attrs.get("perm", range(rank - 1, -1, -1))]
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)):
        c.fail(f"perm {perm} is not a permutation of {rank} dims")
    perm = [p % rank for p in perm]
    if x.const is not None:
        c.folded(out, x.const.transpose(perm), tuple(x.dims[p] for p in perm))
        return
    c.emit("transpose", [c.var(x, 0)], {"perm": perm}, x.dtype, tuple(x.dims[p] for p in perm), out=out)


@handler("Unsqueeze", note="reshape; axes (attribute, or a constant input from opset 13) constant")
def _unsqueeze(c: NodeContext) -> None:
    c.allow("axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    rank = len(x.dims) + len(c.const_input(axes_in, "the axes input").reshape(-1) if axes_in is not None
                             else c.attrs.get("axes", []))
    axes = c.axes(axes_in, rank)
    if not axes:
        c.fail("no axes given")
    rest = iter(x.dims)
    dims = tuple(Dim(1) if k in axes else next(rest) for k in range(rank))
    _reshaped(c, x, tuple(d.size for d in dims), dims, out)


@handler("Squeeze", note="reshape; axes (attribute, or a constant input from opset 13) constant, or all 1-dims")
def _squeeze(c: NodeContext) -> None:
    c.allow("axes")
    x, axes_in = c.inputs(1, 2)
    (out,) = c.outputs()
    axes = c.axes(axes_in, len(x.dims))
    if axes is None:
        axes = [k for k, d in enumerate(x.dims) if d.size == 1]
    if any(x.dims[a].size != 1 for a in axes):
        c.fail(f"axes {axes}: dims of size other than 1 in {list(x.shape)}")
    dims = tuple(d for k, d in enumerate(x.dims) if k not in axes)
    _reshaped(c, x, tuple(d.size for d in dims), dims, out)


@handler("Concat", note="concat(axis); folded when all inputs are constants")
def _concat(c: NodeContext) -> None:
    c.allow("axis")
    ins = c.inputs(1, len(c.ins))
    (out,) = c.outputs()
    if "axis" not in c.attrs:
        c.fail("axis is required")
    rank = len(ins[0].dims)
    axis = int(c.attrs["axis"])
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if any(v.dtype != ins[0].dtype or len(v.dims) != rank for v in ins):
        c.fail("inputs of different dtypes or ranks")
    for v in ins:
        if any(v.shape[k] != ins[0].shape[k] for k in range(rank) if k != axis):
            c.fail(f"shapes {[list(v.shape) for v in ins]} differ off axis {axis}")
    if all(v.const is not None for v in ins):
        elements = None
        if rank == 1 and any(v.elements for v in ins):
            elements = tuple(d for v in ins for d in (v.elements or dims_of(v.const)))
        dims = tuple(dim_sum(v.dims[axis] for v in ins) if k == axis else d for k, d in enumerate(ins[0].dims))
        c.folded(out, np.concatenate([v.const for v in ins], axis=axis), dims, elements=elements)
        return
    parts = [(v, k) for k, v in enumerate(ins) if v.shape[axis] != 0]   # empty parts add nothing
    dims = tuple(dim_sum(v.dims[axis] for v, _ in parts) if k == axis else d for k, d in enumerate(ins[0].dims))
    if len(parts) == 1:
        v, k = parts[0]
        c.emit("reshape", [c.var(v, k)], {}, v.dtype, dims, out=out)
        return
    c.emit("concat", [c.var(v, k) for v, k in parts], {"axis": axis}, ins[0].dtype, dims, out=out)


@handler("Expand", note="NumPy broadcasting to a constant shape: an add of zeros; folded on constants")
def _expand(c: NodeContext) -> None:
    c.allow()
    x, shape_in = c.inputs(2, 2)
    (out,) = c.outputs()
    shape = [int(s) for s in c.const_input(shape_in, "the shape input").reshape(-1)]
    dims = broadcast(c.fail, x.dims, shape_in.elements or dims_of(shape))
    if x.const is not None:
        c.folded(out, np.broadcast_to(x.const, [d.size for d in dims]), dims)
        return
    if x.shape == tuple(d.size for d in dims):
        c.emit("reshape", [c.var(x, 0)], {}, x.dtype, dims, out=out)
        return
    c.emit("add", [c.var(x, 0), zeros_of(c, dims, x.dtype, out)], {}, x.dtype, dims, out=out)


@handler("Slice", note="slice(starts, ends, axes, steps), all constant (attributes before opset 10); folded on "
                       "constants")
def _slice(c: NodeContext) -> None:
    c.allow("starts", "ends", "axes")
    x, starts_in, ends_in, axes_in, steps_in = c.inputs(1, 5)
    (out,) = c.outputs()
    rank = len(x.dims)
    if starts_in is not None:
        starts = [int(v) for v in c.const_input(starts_in, "the starts input").reshape(-1)]
        ends = [int(v) for v in c.const_input(ends_in, "the ends input").reshape(-1)]
    else:
        starts, ends = [int(v) for v in c.attrs.get("starts", [])], [int(v) for v in c.attrs.get("ends", [])]
    axes = c.axes(axes_in, rank) if starts_in is not None else c.axes(None, rank)
    axes = axes if axes is not None else list(range(len(starts)))
    steps = [int(v) for v in c.const_input(steps_in, "the steps input").reshape(-1)] if steps_in is not None \
        else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        c.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        c.fail("a step of 0")
    index = [slice(None)] * rank
    dims = list(x.dims)
    prefix = None
    end_dims = element_dims(ends_in) if starts_in is not None else dims_of(ends)
    for s, e, a, st, e_dim in zip(starts, ends, axes, steps, end_dims, strict=True):
        index[a] = slice(s, e, st)
        dims[a] = Dim(len(range(*index[a].indices(x.shape[a]))))
        if s == 0 and st == 1 and e_dim.expr is not None and 0 <= e <= x.shape[a] and len(axes) == 1 and \
                (x.const is not None or e_dim == x.dims[a]):
            dims[a] = e_dim                      # the first `seq` rows: a prefix of x
            prefix = (x.const, a) if x.const is not None and not x.sized else None
    if x.const is not None:
        elements = x.elements[index[0]] if x.elements and rank == 1 else None
        c.folded(out, x.const[tuple(index)], tuple(dims), elements=elements, prefix=prefix)
        return
    # ONNX writes "to the end" as INT64_MAX / INT64_MIN: clamped to the dim, as Python slicing would
    def clamp(v: int, a: int) -> int:
        return max(min(v, x.shape[a]), -x.shape[a] - 1)

    starts = [clamp(s, a) for s, a in zip(starts, axes, strict=True)]
    ends = [clamp(e, a) for e, a in zip(ends, axes, strict=True)]
    settings = {"starts": starts, "ends": ends, "axes": axes, "steps": steps if any(s != 1 for s in steps) else None}
    c.emit("slice", [c.var(x, 0)], settings, x.dtype, tuple(dims), out=out)


@handler("Gather", note="gather(axis); folded when data and indices are constants")
def _gather(c: NodeContext) -> None:
    c.allow("axis")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    rank = len(data.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    if indices.dtype not in ONNX_INTS + ONNX_UINTS:
        c.fail(f"indices of dtype {indices.dtype}")
    if data.const is not None and indices.const is not None:
        n = data.shape[axis]
        if np.any((indices.const < -n) | (indices.const >= n)):
            c.fail(f"an index out of [-{n}, {n})")
        taken = np.take(data.const, indices.const.astype(np.int64), axis=axis)
        elements = tuple(data.elements[int(i)] for i in indices.const.reshape(-1)) if data.elements else None
        dims = data.dims[:axis] + indices.dims + data.dims[axis + 1:]
        c.folded(out, taken, dims, elements=elements, prefix=_gathered_prefix(data, indices, axis))
        return
    dims = data.dims[:axis] + indices.dims + data.dims[axis + 1:]
    c.emit("gather", [c.var(data, 0), c.var(indices, 1)], {"axis": axis or None}, data.dtype, dims, out=out)


def _gathered_prefix(data: Value, indices: Value, axis: int):
    """A Gather of a constant's rows by the first `seq` of a count (position ids: a Range from 0,
    or a prefix of a constant) is itself the first `seq` rows of a constant: (that constant, the
    axis); None otherwise."""
    if indices.prefix is None or data.sized:
        return None
    source, along = indices.prefix
    n = data.shape[axis]
    if source is None:              # the naturals 0, 1, ... along `along` (other dims 1): the data's own rows
        shape = list(indices.shape)
        if any(size != 1 for k, size in enumerate(shape) if k != along):
            return None
        shape[along] = n
        source = np.arange(n).reshape(shape)
    if np.any((source < -n) | (source >= n)):
        return None
    return np.take(data.const, source.astype(np.int64), axis=axis), axis + along


@handler("Split", note="one slice per output; split sizes constant (attribute, input from opset 13) or num_outputs; "
                       "folded on constants")
def _split(c: NodeContext) -> None:
    c.allow("axis", "split", "num_outputs")
    x, split_in = c.inputs(1, 2)
    outs = list(c.node.output)
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    n = x.shape[axis]
    if split_in is not None:
        sizes = [int(v) for v in c.const_input(split_in, "the split input").reshape(-1)]
    elif "split" in c.attrs:
        sizes = [int(v) for v in c.attrs["split"]]
    else:
        parts = int(c.attrs.get("num_outputs", len(outs)))
        if parts != len(outs) or parts < 1:
            c.fail(f"num_outputs {parts} for {len(outs)} outputs")
        step = -(-n // parts)                        # the last part is the smaller one
        sizes = [min(step, n - k * step) for k in range(parts)]
    if len(sizes) != len(outs) or sum(sizes) != n or any(s < 0 for s in sizes):
        c.fail(f"split {sizes} does not divide dim {axis} of {list(x.shape)} into {len(outs)} outputs")
    start = 0
    for out, size in zip(outs, sizes, strict=True):
        index = [slice(None)] * rank
        index[axis] = slice(start, start + size)
        dims = tuple(Dim(size) if k == axis else d for k, d in enumerate(x.dims))
        if out and x.const is not None:
            c.folded(out, x.const[tuple(index)], dims)
        elif out:
            c.emit("slice", [c.var(x, 0)], {"starts": [start], "ends": [start + size], "axes": [axis]}, x.dtype, dims,
                   out=out)
        start += size


@handler("Trilu", note="filter(x, zeros, mask) by a constant triangle mask; k constant")
def _trilu(c: NodeContext) -> None:
    c.allow("upper")
    x, k_in = c.inputs(1, 2)
    (out,) = c.outputs()
    if len(x.dims) < 2:
        c.fail(f"a {len(x.dims)}-D input: at least 2-D")
    k = int(c.const_input(k_in, "k").reshape(())) if k_in is not None else 0
    rows, cols = x.shape[-2:]
    upper = bool(c.attrs.get("upper", 1))
    keep = np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k)
    if x.const is not None:
        c.folded(out, np.where(keep, x.const, np.zeros((), x.const.dtype)), x.dims)
        return
    np_dtype = NUMPY_DTYPES[x.dtype]
    mask = c.imp.new_constant(np.broadcast_to(keep.astype(np_dtype), x.shape), f"{out}_mask",
                              f"{c.label}'s {'upper' if upper else 'lower'} triangle (k={k}) as {x.dtype}")
    zeros = c.imp.new_constant(np.zeros(x.shape, np_dtype), f"{out}_zeros", f"{c.label}'s zeroed part")
    c.emit("filter", [c.var(x, 0), zeros, mask], {}, x.dtype, x.dims, out=out)


# ---------------------------------------------------------------------------------------------
# index computations of exported transformers (their mask subgraphs), folded on constants


@handler("GatherElements", note="gather_elements(axis); folded on constants")
def _gather_elements(c: NodeContext) -> None:
    c.allow("axis")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    rank = len(data.dims)
    axis = int(c.attrs.get("axis", 0))
    if rank == 0 or len(indices.dims) != rank or not -rank <= axis < rank:
        c.fail(f"axis {axis} and indices of rank {len(indices.dims)} for data of rank {rank}")
    axis %= rank
    if indices.dtype not in ONNX_INTS + ONNX_UINTS or any(
            i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape, strict=True)) if k != axis):
        c.fail(f"indices of {indices.dtype} {list(indices.shape)} for data of shape {list(data.shape)}")
    if data.const is not None and indices.const is not None:
        c.folded(out, folded_by_reference(c, "gather_elements", [data, indices], {"axis": axis}), indices.dims)
        return
    c.emit("gather_elements", [c.var(data, 0), c.var(indices, 1)], {"axis": axis or None}, data.dtype,
           indices.dims, out=out)


@handler("TopK", note="topk_indices(k, axis, largest) for the indices and gather_elements(axis) for the values; "
                      "k constant (attribute, or input from opset 10); folded on constants")
def _topk(c: NodeContext) -> None:
    c.allow("k", "axis", "largest", "sorted")
    x, k_in = c.inputs(1, 2)
    values_out, indices_out = (c.outputs(2) + [""])[:2]
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", -1))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    k = int(c.const_input(k_in, "k").reshape(-1)[0]) if k_in is not None else int(c.attrs.get("k", 0))
    if not 1 <= k <= x.shape[axis]:
        c.fail(f"k {k} for an axis of size {x.shape[axis]} (1..{x.shape[axis]})")
    if x.dtype not in FLOATS + ONNX_INTS + ONNX_UINTS:
        c.fail(f"dtype {x.dtype} (numeric dtypes)")
    settings = {"k": k, "axis": axis, "largest": False if not c.attrs.get("largest", 1) else None}
    dims = tuple(Dim(k) if d == axis else dim for d, dim in enumerate(x.dims))
    if x.const is not None:
        idx = folded_by_reference(c, "topk_indices", [x], {n: v for n, v in settings.items() if v is not None})
        if indices_out:
            c.folded(indices_out, idx, dims)
        if values_out:
            c.folded(values_out, np.take_along_axis(x.const, idx, axis=axis), dims)
        return
    idx = c.emit("topk_indices", [c.var(x, 0)], settings, "i64", dims,
                 **({"out": indices_out} if indices_out else {"temp": f"{values_out}_indices"}))
    if values_out:
        c.emit("gather_elements", [c.var(x, 0), idx.var], {"axis": axis}, x.dtype, dims, out=values_out)


def folded_by_reference(c: NodeContext, op: str, values: list[Value], settings: dict) -> np.ndarray:
    """`op` of constant `values` computed at import, by the reference kernel (its errors, e.g. an
    index out of range, are the node's)."""
    spec = get(op)
    inf = spec.infer([TensorType(lookup(v.dtype), v.shape) for v in values], settings)
    try:
        return run_kernel(spec, [v.const for v in values], inf.attrs, inf)
    except OpRuntimeError as err:
        c.fail(str(err))


def _index_tuples(c: NodeContext, data: Value, indices: Value, b: int) -> int:
    """k, the length of the index tuples in indices' last dim, checked against data's dims after
    the b batch dims (GatherND, ScatterND)."""
    if indices.dtype not in ONNX_INTS + ONNX_UINTS:
        c.fail(f"indices of dtype {indices.dtype}")
    r, q = len(data.dims), len(indices.dims)
    k = indices.shape[-1] if q else 0
    if q < 1 or b < 0 or b >= min(r, q) or not 1 <= k <= r - b or indices.shape[:b] != data.shape[:b]:
        c.fail(f"indices of shape {list(indices.shape)}" + (f" (batch_dims {b})" if b else "")
               + f" for data of shape {list(data.shape)}")
    return k


@handler("GatherND", note="gather_nd(batch_dims); folded when data and indices are constants")
def _gather_nd(c: NodeContext) -> None:
    c.allow("batch_dims")
    data, indices = c.inputs(2, 2)
    (out,) = c.outputs()
    b = int(c.attrs.get("batch_dims", 0))
    k = _index_tuples(c, data, indices, b)
    dims = data.dims[:b] + indices.dims[b:-1] + data.dims[b + k:]
    if indices.const is not None and _every_slot_in_order(indices.const, data.shape[b:b + k], b):
        # every slot once, in order (an exporter's index grid over the whole data: `mask[:, None, None, :]`
        # written as GatherND): the data itself, reshaped (a view, where gather_nd would copy it), whatever
        # the sizes the grid was built for
        _reshaped(c, data, tuple(d.size for d in dims), dims, out)
        return
    settings = {"batch_dims": b or None}
    if data.const is not None and indices.const is not None:
        c.result(out, c.imp.const_value(folded_by_reference(c, "gather_nd", [data, indices], settings)))
        return
    c.emit("gather_nd", [c.var(data, 0), c.var(indices, 1)], settings, data.dtype, dims, out=out)


def _every_slot_in_order(idx: np.ndarray, lead: tuple[int, ...], b: int) -> bool:
    """Whether constant index tuples pick, per batch index, every slot of the dims `lead` once, in
    row-major order (negative indices counted from the end)."""
    slots = int(np.prod(lead, dtype=np.int64))
    if int(np.prod(idx.shape[b:-1], dtype=np.int64)) != slots:
        return False
    n = np.asarray(lead, dtype=np.int64)
    tuples = idx.astype(np.int64).reshape(-1, slots, len(lead))
    tuples = np.where(tuples < 0, tuples + n, tuples)
    flat = tuples @ np.cumprod((1, *lead[:0:-1]), dtype=np.int64)[::-1]
    return bool(np.all((tuples >= 0) & (tuples < n))) and bool(np.all(flat == np.arange(slots)))


@handler("ScatterND", note="scatter_nd(reduction): none, add, mul, max, min; folded when all inputs are constants")
def _scatter_nd(c: NodeContext) -> None:
    c.allow("reduction")
    data, indices, updates = c.inputs(3, 3)
    (out,) = c.outputs()
    k = _index_tuples(c, data, indices, 0)
    if updates.dtype != data.dtype or updates.shape != indices.shape[:-1] + data.shape[k:]:
        c.fail(f"updates {updates.dtype}{list(updates.shape)} for data {data.dtype}{list(data.shape)} and indices "
               f"of shape {list(indices.shape)}")
    reduction = c.attrs.get("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    if reduction not in ("none", "add", "mul", "max", "min"):
        c.fail(f"reduction {reduction!r}")
    if reduction in ("max", "min") and data.dtype == "bool":
        c.fail(f"reduction {reduction!r} of bool data")
    if all(v.const is not None for v in (data, indices, updates)):
        settings = {"reduction": reduction}
        c.result(out, c.imp.const_value(folded_by_reference(c, "scatter_nd", [data, indices, updates], settings)))
        return
    c.emit("scatter_nd", [c.var(data, 0), c.var(indices, 1), c.var(updates, 2)],
           {"reduction": f'"{reduction}"' if reduction != "none" else None}, data.dtype, data.dims, out=out)
