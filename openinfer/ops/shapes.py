"""Shape rules: `ops.yaml`'s `shape:` names, each a function computing the output shape.

A rule gets the op (a registry `OpSpec`, seen as a `RuleOp`), its input types, the attribute dict
(defaults already filled; the rule normalises the attributes it owns in place: axes made
non-negative, conv padding expanded, ...) and the declared output (None when unknown). It returns
(output shape, broadcast flag) or raises OpTypeError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..dims import Dim, DynamicDimError, pretty, pretty_shape
from .errors import OpTypeError
from .types import TensorType


class _NamedInput(Protocol):
    @property
    def name(self) -> str: ...


class RuleOp(Protocol):
    """What a rule reads of its op, for its messages: the op's name and its inputs' names.

    The registry's OpSpec has this shape. The rules ask for no more of it so that this module sits
    below the registry, which imports SHAPE_RULES and calls them, with no import back."""

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> Sequence[_NamedInput]: ...


Shape = tuple[int, ...]
Rule = Callable[[RuleOp, Sequence[TensorType], dict[str, Any], TensorType | None], tuple[Shape, bool]]


def _fmt(shape: Sequence[int]) -> str:
    return pretty_shape(shape)


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting (digest §3.7): right-aligned, equal dims or one of them 1."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(-ndim, 0):
        dims = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(dims) > 1:
            a, b = sorted(dims)[:2]
            raise OpTypeError(f"{op}: cannot broadcast shapes {' and '.join(_fmt(s) for s in shapes)}: "
                              f"incompatible broadcast dims {a} and {b}",
                              "dims must be equal or 1 (aligned from the right)")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def norm_axis(op: str, name: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise OpTypeError(f"{op}: {name} {axis} is out of range for a {ndim}-d input "
                          f"(valid: {-ndim}..{ndim - 1})" if ndim else f"{op}: a 0-d input has no axis {axis}")
    return axis % ndim


def _same(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    first = ins[0].shape
    for i, x in enumerate(ins[1:], start=1):
        if x.shape != first:
            raise OpTypeError(f"{op.name}: input shapes differ: {_fmt(first)} and {_fmt(x.shape)} "
                              f"({op.inputs[min(i, len(op.inputs) - 1)].name}); {op.name} does not broadcast",
                              "all inputs must have one shape")
    return first, False


def _broadcast(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    out = broadcast_shapes(op.name, *(x.shape for x in ins))
    return out, any(x.shape != out for x in ins)


def matmul_operand_shapes(a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> tuple[Shape, Shape]:
    """The shapes a matmul multiplies: a and b with their last two dims swapped where transposed
    (the attrs read the operands as stored; shapes only, the data stays in place)."""
    def swapped(s: Shape, t: bool) -> Shape:
        return (*s[:-2], s[-1], s[-2]) if t else tuple(s)
    return swapped(a, transpose_a), swapped(b, transpose_b)


def _matmul(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    a, b = ins[0].shape, ins[1].shape
    if not a or not b:
        raise OpTypeError(f"matmul: operands must have at least 1 dim, got {_fmt(a)} and {_fmt(b)}",
                          "use mul for scalars")
    for name, s in (("a", a), ("b", b)):
        if attrs.get(f"transpose_{name}") and len(s) < 2:
            raise OpTypeError(f"matmul: transpose_{name} needs {name} of rank >= 2, got {_fmt(s)}",
                              f"a 1-D {name} is a vector in either orientation: drop transpose_{name}")
    a, b = matmul_operand_shapes(a, b, attrs.get("transpose_a", False), attrs.get("transpose_b", False))
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise OpTypeError(f"matmul: inner dims differ: {_fmt(a)} @ {_fmt(b)} ({pretty(a2[-1])} vs {pretty(b2[-2])})"
                          + (" after transpose_a / transpose_b" if attrs.get("transpose_a") or attrs.get("transpose_b")
                             else ""))
    batch = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    out = (*batch, *((a2[-2],) if len(a) > 1 else ()), *((b2[-1],) if len(b) > 1 else ()))
    nb = len(batch)
    pad = lambda s: (1,) * (nb - len(s)) + tuple(s)  # noqa: E731
    return out, pad(a2[:-2]) != pad(b2[:-2])


def _dequant_matmul(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x, w = ins[0].shape, ins[1].shape
    if len(x) not in (1, 2) or len(w) != 2:
        raise OpTypeError(f"dequant_matmul: x must be [K] or [M, K] and w [K, N], got {_fmt(x)} and {_fmt(w)}")
    if x[-1] != w[0]:
        raise OpTypeError(f"dequant_matmul: inner dims differ: {_fmt(x)} @ {_fmt(w)} "
                          f"({pretty(x[-1])} vs {pretty(w[0])})")
    for name, t in zip(("scale", "zero_point"), ins[2:], strict=False):
        if t.numel not in (1, w[1]) or len(t.shape) > 1:
            raise OpTypeError(f"dequant_matmul: {name} must be [{w[1]}] (per output channel) or [1] (per tensor), "
                              f"got {_fmt(t.shape)}",
                              "quantize w along its last axis (the `.oinf` quant axis 1 of [K, N])")
    if len(ins) > 3 and ins[3].shape != ins[2].shape:
        raise OpTypeError(f"dequant_matmul: zero_point {_fmt(ins[3].shape)} must have scale's shape "
                          f"{_fmt(ins[2].shape)}")
    return (*x[:-1], w[1]), False


def _axes(op: str, axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    if not axes:
        raise OpTypeError(f"{op}: `axes` must not be empty", "e.g. `axes=[-1]`")
    return tuple(sorted({norm_axis(op, "axis", a, ndim) for a in axes}))


def _reduce(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    axes = _axes(op.name, attrs["axes"], len(shape))
    attrs["axes"] = axes
    if op.name == "mean_axis" and not ins[0].dtype.is_float and any(shape[a] == 0 for a in axes):
        # the count is 0: floats give NaN (0 / 0), an integer has no such value
        raise OpTypeError(f"mean_axis: the {ins[0].dtype.name} mean of no elements (axes {list(axes)} of "
                          f"{_fmt(shape)} are empty) has no value; floats give NaN")
    if op.name == "qmean" and any(shape[a] == 0 for a in axes):
        raise OpTypeError(f"qmean: the mean of no elements (axes {list(axes)} of {_fmt(shape)} are empty) has no value")
    keep = attrs["keepdims"]
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes), False


def _arg_reduce(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    axis = attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(shape))
    if shape[axis] == 0:
        raise OpTypeError(f"{op.name}: axis {axis} is empty")
    return tuple(1 if i == axis else d for i, d in enumerate(shape) if attrs["keepdims"] or i != axis), False


def _static(op: str, shapes) -> None:
    """The ops whose kernels are written for static sizes only (cumsum, topk_indices, gather_elements)."""
    for shape in shapes:
        if any(isinstance(d, Dim) for d in shape):
            raise OpTypeError(f"{op}: dynamic sizes are not supported, got {_fmt(shape)}")


def _scan(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    _static(op.name, [shape])
    attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(shape))
    return shape, False


def _topk(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    _static(op.name, [shape])
    axis = attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(shape))
    if not 1 <= attrs["k"] <= shape[axis]:
        raise OpTypeError(f"{op.name}: k {attrs['k']} for an axis of size {shape[axis]}", f"k is 1..{shape[axis]}")
    return tuple(attrs["k"] if i == axis else d for i, d in enumerate(shape)), False


def _gather_elements(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    data, idx = ins[0].shape, ins[1].shape
    _static(op.name, [data, idx])
    axis = attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(data))
    if len(idx) != len(data) or any(i > d for k, (i, d) in enumerate(zip(idx, data, strict=True)) if k != axis):
        raise OpTypeError(f"{op.name}: indices {_fmt(idx)} for data {_fmt(data)}",
                          "indices have data's rank and, off the axis, sizes no larger than data's")
    return tuple(idx), False


def nms_capacity(batches: int, classes: int, boxes: int, max_output: int) -> int:
    """The most rows non_max_suppression can select: max_output (at most every box) per batch and class."""
    return batches * classes * min(max_output, boxes)


def _nms(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    boxes, scores = ins[0].shape, ins[1].shape
    _static(op.name, [boxes, scores])
    if len(boxes) != 3 or boxes[2] != 4 or len(scores) != 3 or scores[0] != boxes[0] or scores[2] != boxes[1]:
        raise OpTypeError(f"{op.name}: boxes {_fmt(boxes)} and scores {_fmt(scores)}",
                          "boxes are [B, N, 4] and scores [B, C, N]")
    if attrs["max_output"] < 1:
        raise OpTypeError(f"{op.name}: max_output {attrs['max_output']}", "max_output is at least 1")
    if not 0.0 <= attrs["iou_threshold"] <= 1.0:
        raise OpTypeError(f"{op.name}: iou_threshold {attrs['iou_threshold']}", "iou_threshold is 0..1")
    if attrs["center_point_box"] not in (0, 1):
        raise OpTypeError(f"{op.name}: center_point_box {attrs['center_point_box']}", "center_point_box is 0 or 1")
    return (nms_capacity(boxes[0], scores[1], boxes[1], attrs["max_output"]) + 1, 3), False


def _is_finite(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    if output is None or output.shape == ():
        return (), False
    if output.shape != shape:
        raise OpTypeError(f"is_finite: the output must be 0-d (all elements finite) or have the input's shape "
                          f"{_fmt(shape)} (element-wise), not {_fmt(output.shape)}")
    return shape, False


def _axis_same(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(shape))
    return shape, False


def _norm(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    axis = attrs["axis"] = norm_axis(op.name, "axis", attrs["axis"], len(shape))
    want = shape[axis:]
    for spec, x in zip(op.inputs[1:], ins[1:], strict=False):
        if x.shape != want:
            raise OpTypeError(f"{op.name}: `{spec.name}` must have shape {_fmt(want)} (x's dims from axis {axis}), "
                              f"got {_fmt(x.shape)}")
    if not attrs["eps"] >= 0:
        raise OpTypeError(f"{op.name}: eps must be >= 0, got {attrs['eps']}")
    return shape, False


def _gather(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    table, idx = ins[0].shape, ins[1].shape
    axis = attrs["axis"] = norm_axis("gather", "axis", attrs["axis"], len(table))
    return (*table[:axis], *idx, *table[axis + 1:]), False


def _index_tuples(op: str, data: Shape, idx: Shape, first: int) -> int:
    """k, the length of the index tuples in indices' last dim, checked to pick within data's dims
    `first`.. (gather_nd, scatter_nd)."""
    if not idx:
        raise OpTypeError(f"{op}: indices must have at least 1 dim (its last holds the index tuples), got a 0-d one")
    k = idx[-1]
    if isinstance(k, Dim):
        raise OpTypeError(f"{op}: the index tuples' length (indices' last dim) must be static, got {pretty(k)}")
    if not 1 <= k <= len(data) - first:
        raise OpTypeError(f"{op}: index tuples of length {k} (indices {_fmt(idx)}) for data {_fmt(data)}"
                          + (f" after {first} batch dims" if first else ""),
                          f"the tuples' length is 1..{len(data) - first}")
    return int(k)


def _gather_nd(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    data, idx = ins[0].shape, ins[1].shape
    b = attrs["batch_dims"]
    if not 0 <= b < min(len(data), max(len(idx), 1)):
        raise OpTypeError(f"gather_nd: batch_dims {b} for data {_fmt(data)} and indices {_fmt(idx)}",
                          "batch_dims is 0..min(rank(data), rank(indices)) - 1")
    k = _index_tuples("gather_nd", data, idx, b)
    if tuple(idx[:b]) != tuple(data[:b]):
        raise OpTypeError(f"gather_nd: the {b} batch dims differ: indices {_fmt(idx)}, data {_fmt(data)}")
    return (*data[:b], *idx[b:-1], *data[b + k:]), False


def _scatter_nd(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    data, idx, upd = (t.shape for t in ins)
    k = _index_tuples("scatter_nd", data, idx, 0)
    want = (*idx[:-1], *data[k:])
    if tuple(upd) != want:
        raise OpTypeError(f"scatter_nd: updates must have shape {_fmt(want)} (indices.shape[:-1] + data.shape[k:] "
                          f"for indices {_fmt(idx)} and data {_fmt(data)}), got {_fmt(upd)}")
    return tuple(data), False


def transpose_perm(perm, ndim: int) -> list[int]:
    """A kernel request's `perm` as non-negative axes (None: the dims reversed)."""
    return [p % ndim for p in (perm if perm is not None else range(ndim - 1, -1, -1))]


def _transpose(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    perm = attrs["perm"]
    if perm is None:
        perm = tuple(reversed(range(len(shape))))
    norm = tuple(norm_axis("transpose", "perm entry", p, len(shape)) for p in perm) if shape else tuple(perm)
    if sorted(norm) != list(range(len(shape))):
        raise OpTypeError(f"transpose: perm {list(perm)} is not a permutation of the {len(shape)} dims of "
                          f"{_fmt(shape)}", f"e.g. perm={list(reversed(range(len(shape))))}")
    attrs["perm"] = norm
    return tuple(shape[p] for p in norm), False


def _reshape(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    if output is None:
        raise OpTypeError("reshape: the target shape comes from the declared output, and none is given")
    n_in, n_out = ins[0].numel, output.numel
    if n_in != n_out:
        raise OpTypeError(f"reshape: cannot reshape {_fmt(ins[0].shape)} ({n_in} elements) into "
                          f"{_fmt(output.shape)} ({n_out} elements)")
    return output.shape, False


def _concat(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    first = ins[0].shape
    axis = attrs["axis"] = norm_axis("concat", "axis", attrs["axis"], len(first))
    total = 0
    for i, x in enumerate(ins):
        s = x.shape
        if len(s) != len(first) or any(a != b for j, (a, b) in enumerate(zip(s, first, strict=True)) if j != axis):
            raise OpTypeError(f"concat: input {i} has shape {_fmt(s)}, which does not match {_fmt(first)} "
                              f"outside axis {axis}")
        total += s[axis]
    return (*first[:axis], total, *first[axis + 1:]), False


def _slice(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    starts, ends = attrs["starts"], attrs["ends"]
    n = len(starts)
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(n))
    steps = attrs["steps"] if attrs["steps"] is not None else (1,) * n
    if not len(ends) == len(axes) == len(steps) == n:
        raise OpTypeError(f"slice: starts, ends, axes and steps must have one length, got {len(starts)}, "
                          f"{len(ends)}, {len(axes)}, {len(steps)}")
    axes = tuple(norm_axis("slice", "axis", a, len(shape)) for a in axes)
    if len(set(axes)) != n:
        raise OpTypeError(f"slice: axes {list(axes)} repeat an axis")
    if 0 in steps:
        raise OpTypeError("slice: steps must not be 0")
    attrs.update(axes=axes, steps=tuple(steps))
    out = list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        out[a] = slice_extent(s, e, st, shape[a])[1]
    return tuple(out), False


def _pad(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape = ins[0].shape
    pads = tuple(attrs["pads"])
    if len(pads) != 2 * len(shape):
        raise OpTypeError(f"pad: pads must hold [before, after] for each of the {len(shape)} axes "
                          f"({2 * len(shape)} ints), got {len(pads)}")
    if any(p < 0 for p in pads):
        raise OpTypeError(f"pad: pads {list(pads)} must not be negative")
    mode = attrs.get("mode", "constant")
    for i, d in enumerate(shape):
        if mode == "reflect" and max(pads[2 * i:2 * i + 2]) > max(d - 1, 0):
            raise OpTypeError(f"pad: mode reflect mirrors axis {i} of size {d} without repeating its edge, "
                              f"so its pads {list(pads[2 * i:2 * i + 2])} must be at most {max(d - 1, 0)}")
        if mode == "edge" and d == 0 and any(pads[2 * i:2 * i + 2]):
            raise OpTypeError(f"pad: mode edge repeats the nearest element, but axis {i} is empty")
    attrs.update(pads=pads)
    return tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(shape)), False


def slice_extent(start: int, end: int, step: int, dim: int) -> tuple[int, int, int]:
    """(first index, count, step) of Python's `x[start:end:step]` along an axis of length `dim`.

    A dynamic size (a Dim: the axis, or a bound `ends=[S]`) keeps its run-time expression where the
    clamping is the same at every size (`[0:S]` of S rows is S rows, `[0:1]` one row); where it is
    not (`[1:4]` of S rows), DynamicDimError (a located bind error): generated code computes one
    extent for every size."""
    if not any(isinstance(v, Dim) for v in (start, end, dim)):
        first, _, step = slice(start, end, step).indices(dim)
        return first, len(range(*slice(start, end, step).indices(dim))), step
    if step != 1:
        raise DynamicDimError(f"slice: a step of {step} along a dynamic size (steps must be 1 there)")

    def clamp(i):
        i = i + dim if i < 0 else i
        return min(max(i, 0), dim)

    first, last = clamp(start), clamp(end)
    return first, max(last - first, 0), 1


def _dynamic_slice(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    shape, starts, sizes = ins[0].shape, ins[1:], attrs["sizes"]
    n = len(sizes)
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(n))
    if not len(starts) == len(axes) == n:
        raise OpTypeError(f"dynamic_slice: one start input per size and axis, got {len(starts)} starts, "
                          f"{n} sizes and {len(axes)} axes", "usage: dynamic_slice(x, start0, ..., sizes=[...], "
                          "axes=[...])")
    for t in starts:
        if t.numel != 1 or len(t.shape) > 1:
            raise OpTypeError(f"dynamic_slice: a start must be a scalar (0-d or one element), got {_fmt(t.shape)}")
    axes = tuple(norm_axis("dynamic_slice", "axis", a, len(shape)) for a in axes)
    if len(set(axes)) != n:
        raise OpTypeError(f"dynamic_slice: axes {list(axes)} repeat an axis")
    out = list(shape)
    for a, size in zip(axes, sizes, strict=True):
        if not 0 <= size <= shape[a]:
            raise OpTypeError(f"dynamic_slice: size {size} does not fit axis {a} of length {shape[a]}",
                              f"sizes are 0..{shape[a]} there")
        out[a] = size
    attrs["axes"] = axes
    return tuple(out), False


def _rope(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x, pos = ins[0].shape, ins[1].shape
    if len(x) < 2 or x[-1] % 2:
        raise OpTypeError(f"rope: x must be [..., H, Dh] with an even Dh, got {_fmt(x)}")
    if len(pos) > 1 or (len(pos) == 1 and (len(x) < 3 or x[-3] != pos[0])):
        raise OpTypeError(f"rope: pos must be a scalar (x [..., H, Dh]) or a vector [S] with x [..., S, H, Dh]; "
                          f"got pos {_fmt(pos)} for x {_fmt(x)}")
    return x, False


def _sdpa(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    q, k, v = (t.shape for t in ins[:3])
    if min(len(q), len(k), len(v)) < 2:
        raise OpTypeError(f"sdpa: q, k and v need at least 2 dims, got {_fmt(q)}, {_fmt(k)}, {_fmt(v)}")
    if q[-1] != k[-1]:
        raise OpTypeError(f"sdpa: q and k must share the last dim D, got {_fmt(q)} and {_fmt(k)}")
    if k[-2] != v[-2]:
        raise OpTypeError(f"sdpa: k and v must have the same number of keys (dim -2), got {_fmt(k)} and {_fmt(v)}")
    kv_batch = broadcast_shapes("sdpa", k[:-2], v[:-2])
    batch = sdpa_batch(q[:-2], kv_batch)
    out = (*batch, q[-2], v[-1])
    bcast = len({q[:-2], k[:-2], v[:-2]}) > 1
    if len(ins) > 3:
        m = ins[3].shape
        want = (*batch, q[-2], k[-2])
        try:
            fits = len(m) <= len(want) and broadcast_shapes("sdpa", m, want) == want
        except OpTypeError:
            fits = False
        if not fits:
            raise OpTypeError(f"sdpa: mask shape {_fmt(m)} does not broadcast to [..., Sq, Sk] = {_fmt(want)}")
        bcast = bcast or m != want
    if attrs["scale"] is None:
        attrs["scale"] = 1.0 / math.sqrt(q[-1]) if q[-1] else 1.0
    return out, bcast


def sdpa_batch(q_batch: Sequence[int], kv_batch: Sequence[int]) -> Shape:
    """Batch dims of q and k/v: NumPy broadcasting, except that the head dim (the last batch dim)
    may be grouped: H query heads over Hkv kv heads when H % Hkv == 0 (GQA)."""
    if q_batch and kv_batch and kv_batch[-1] not in (1, q_batch[-1]) and q_batch[-1] % kv_batch[-1] == 0:
        return (*broadcast_shapes("sdpa", q_batch[:-1], kv_batch[:-1]), q_batch[-1])
    return broadcast_shapes("sdpa", q_batch, kv_batch)


def _resize(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x = ins[0]
    sizes = tuple(attrs["sizes"])
    if len(sizes) != len(x.shape):
        raise OpTypeError(f"resize: sizes {list(sizes)} must give the output size of each of x's {len(x.shape)} axes")
    if any(s < 1 if n else s != 0 for s, n in zip(sizes, x.shape, strict=True)):
        raise OpTypeError(f"resize: sizes {list(sizes)} must be >= 1 (0 only for an empty axis of x {_fmt(x.shape)})")
    scales = attrs.get("scales")
    if scales is not None:
        scales = tuple(scales)
        if len(scales) != 2 * len(sizes) or any(v <= 0 for v in scales):
            raise OpTypeError(f"resize: scales {list(scales)} must hold a positive [numerator, denominator] "
                              f"for each of the {len(sizes)} axes")
        attrs.update(scales=scales)
    if attrs["mode"] == "linear" and not x.dtype.is_float:
        raise OpTypeError(f"resize: mode linear interpolates float dtypes, not {x.dtype.name} (nearest copies any)")
    attrs.update(sizes=sizes)
    return sizes, False


def _pairs(op: str, name: str, v: int | tuple[int, ...], n: int, *, pads: bool = False) -> tuple[int, ...]:
    """An int or list attribute as n values (pads: 2n values, all begins then all ends)."""
    vals = (v,) if isinstance(v, int) else tuple(v)
    if len(vals) == 1:
        vals = vals * n
    if pads and len(vals) == n:
        vals = vals * 2
    want = 2 * n if pads else n
    if len(vals) != want:
        forms = "an int" + (f", [{', '.join(['h', 'w'][:n])}]" if n > 1 else "") + \
            (f" or {['[left, right]', '[top, left, bottom, right]'][n - 1]}" if pads else "")
        raise OpTypeError(f"{op}: `{name}` must be {forms}, got {list(vals)}")
    return vals


def _window(op: str, size: int, pad: int, k_eff: int, stride: int) -> int:
    out = (size + pad - k_eff) // stride + 1
    if out < 1:
        raise OpTypeError(f"{op}: the window ({k_eff}) is larger than the padded input ({size + pad})")
    return out


def _conv(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    n = 1 if op.name == "conv1d" else 2
    x, w = ins[0].shape, ins[1].shape
    layout = "[N, C, L]" if n == 1 else "[N, C, H, W]"
    if len(x) != n + 2 or len(w) != n + 2:
        raise OpTypeError(f"{op.name}: x must be {layout} and w [O, C/groups, {'K' if n == 1 else 'KH, KW'}], "
                          f"got {_fmt(x)} and {_fmt(w)}")
    stride = _pairs(op.name, "stride", attrs["stride"], n)
    dilation = _pairs(op.name, "dilation", attrs["dilation"], n)
    padding = _pairs(op.name, "padding", attrs["padding"], n, pads=True)
    groups = attrs["groups"]
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or groups < 1:
        raise OpTypeError(f"{op.name}: stride, dilation and groups must be >= 1 and padding >= 0")
    c, o = x[1], w[0]
    if c % groups or o % groups or w[1] != c // groups:
        raise OpTypeError(f"{op.name}: with groups={groups}, C={c} and O={o} must divide by groups and "
                          f"w.shape[1] must be C/groups = {c / groups:g}, got {w[1]}")
    if len(ins) > 2 and ins[2].shape != (o,):
        raise OpTypeError(f"{op.name}: bias must have shape [{o}], got {_fmt(ins[2].shape)}")
    attrs.update(stride=stride, dilation=dilation, padding=padding)
    spatial = tuple(_window(op.name, x[2 + i], padding[i] + padding[n + i], dilation[i] * (w[2 + i] - 1) + 1,
                            stride[i]) for i in range(n))
    return (x[0], o, *spatial), False


def _pool(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x = ins[0].shape
    if len(x) != 4:
        raise OpTypeError(f"{op.name}: x must be [N, C, H, W], got {_fmt(x)}")
    kernel = _pairs(op.name, "kernel", attrs["kernel"], 2)
    stride = _pairs(op.name, "stride", attrs["stride"] if attrs["stride"] is not None else kernel, 2)
    padding = _pairs(op.name, "padding", attrs["padding"], 2, pads=True)
    if min(kernel) < 1 or min(stride) < 1 or min(padding) < 0:
        raise OpTypeError(f"{op.name}: kernel and stride must be >= 1 and padding >= 0")
    if any(p > kernel[i % 2] // 2 for i, p in enumerate(padding)):
        raise OpTypeError(f"{op.name}: padding {list(padding)} must be at most half the kernel {list(kernel)}")
    attrs.update(kernel=kernel, stride=stride, padding=padding)
    spatial = tuple(_window(op.name, x[2 + i], padding[i] + padding[2 + i], kernel[i], stride[i]) for i in range(2))
    return (x[0], x[1], *spatial), False


def _lrn(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x = ins[0].shape
    if len(x) < 2:
        raise OpTypeError(f"lrn: x must be [N, C, ...] (at least 2 dims), got {_fmt(x)}")
    if attrs["size"] < 1:
        raise OpTypeError(f"lrn: size must be >= 1, got {attrs['size']}")
    return x, False


def _qconv(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x, w = ins[0].shape, ins[1].shape
    if len(x) != 4 or len(w) != 4:
        raise OpTypeError(f"{op.name}: x must be [N, H, W, C] and w [O, KH, KW, C/groups], got {_fmt(x)} and {_fmt(w)}")
    stride = _pairs(op.name, "stride", attrs["stride"], 2)
    dilation = _pairs(op.name, "dilation", attrs["dilation"], 2)
    padding = _pairs(op.name, "padding", attrs["padding"], 2, pads=True)
    groups = attrs["groups"]
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or groups < 1:
        raise OpTypeError(f"{op.name}: stride, dilation and groups must be >= 1 and padding >= 0")
    c, o = x[3], w[0]
    if c % groups or o % groups or w[3] != c // groups:
        raise OpTypeError(f"{op.name}: with groups={groups}, C={c} and O={o} must divide by groups and "
                          f"w.shape[3] must be C/groups = {c / groups:g}, got {w[3]}")
    _per_channel(op, ins, o)
    _quant_range(op, attrs)
    attrs.update(stride=stride, dilation=dilation, padding=padding)
    spatial = tuple(_window(op.name, x[1 + i], padding[i] + padding[2 + i], dilation[i] * (w[1 + i] - 1) + 1,
                            stride[i]) for i in range(2))
    return (x[0], *spatial, o), False


def _qlinear(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x, w = ins[0].shape, ins[1].shape
    if len(x) < 1 or len(w) != 2 or x[-1] != w[1]:
        raise OpTypeError(f"{op.name}: x must be [..., K] and w [N, K], got {_fmt(x)} and {_fmt(w)}")
    _per_channel(op, ins, w[0])
    _quant_range(op, attrs)
    return (*x[:-1], w[0]), False


def _per_channel(op: RuleOp, ins, o: int) -> None:
    """The requantization's inputs (multiplier and shift, or scale) and the bias, if given, are [O]:
    one per output channel."""
    names = ("scale", "b") if op.name == "qlinear" else ("multiplier", "shift", "b")
    for name, t in zip(names, ins[2:], strict=False):
        if t.shape != (o,):
            raise OpTypeError(f"{op.name}: {name} must have shape [{o}] (one per output channel), got {_fmt(t.shape)}")


def _quant_range(op: RuleOp, attrs) -> None:
    lo, hi = attrs["act_min"], attrs["act_max"]
    if not -128 <= lo <= hi <= 127:
        raise OpTypeError(f"{op.name}: act_min and act_max must satisfy -128 <= act_min <= act_max <= 127, "
                          f"got {lo} and {hi}")


def _qpool(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    x = ins[0].shape
    if len(x) != 4:
        raise OpTypeError(f"{op.name}: x must be [N, H, W, C], got {_fmt(x)}")
    kernel = _pairs(op.name, "kernel", attrs["kernel"], 2)
    stride = _pairs(op.name, "stride", attrs["stride"], 2)
    padding = _pairs(op.name, "padding", attrs["padding"], 2, pads=True)
    if min(kernel) < 1 or min(stride) < 1 or min(padding) < 0:
        raise OpTypeError(f"{op.name}: kernel and stride must be >= 1 and padding >= 0")
    if any(p >= kernel[i % 2] for i, p in enumerate(padding)):
        raise OpTypeError(f"{op.name}: padding {list(padding)} must be smaller than the kernel {list(kernel)} "
                          "(a window of padding alone has no taps)")
    _quant_range(op, attrs)
    attrs.update(kernel=kernel, stride=stride, padding=padding)
    spatial = tuple(_window(op.name, x[1 + i], padding[i] + padding[2 + i], kernel[i], stride[i]) for i in range(2))
    return (x[0], *spatial, x[3]), False


def _qlut(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    if ins[1].shape != (256,):
        raise OpTypeError(f"{op.name}: table must have shape [256] (one entry per int8 value), "
                          f"got {_fmt(ins[1].shape)}")
    return ins[0].shape, False


def _qhard_swish(op: RuleOp, ins, attrs, output) -> tuple[Shape, bool]:
    bounds = {"output_multiplier": (0, 32767), "reluish_multiplier": (0, 32767), "output_shift": (-15, 0),
              "reluish_shift": (-15, 30)}
    for name, (lo, hi) in bounds.items():
        if not lo <= attrs[name] <= hi:
            raise OpTypeError(f"{op.name}: {name} must be in [{lo}, {hi}], got {attrs[name]}")
    return ins[0].shape, False


SHAPE_RULES: dict[str, Rule] = {
    "same": _same, "broadcast": _broadcast, "matmul": _matmul, "reduce": _reduce, "arg_reduce": _arg_reduce,
    "is_finite": _is_finite, "axis_same": _axis_same, "norm": _norm, "gather": _gather, "gather_nd": _gather_nd,
    "gather_elements": _gather_elements, "scan": _scan, "topk": _topk, "nms": _nms,
    "scatter_nd": _scatter_nd, "transpose": _transpose,
    "reshape": _reshape, "concat": _concat, "slice": _slice, "rope": _rope, "sdpa": _sdpa, "conv": _conv,
    "pool": _pool, "dequant_matmul": _dequant_matmul, "dynamic_slice": _dynamic_slice,
    "pad": _pad, "resize": _resize, "lrn": _lrn, "qconv": _qconv, "qlinear": _qlinear, "qpool": _qpool,
    "qlut": _qlut, "qhard_swish": _qhard_swish,
}

#: One line per rule, for docs/ops.md.
SHAPE_RULE_DOCS = {
    "same": "all inputs one shape; the output has it",
    "broadcast": "NumPy broadcasting of the inputs",
    "matmul": "NumPy matmul: [..., M, K] @ [..., K, N] -> [..., M, N], batch dims broadcast, 1-D operands as vectors; "
              "transpose_a takes a as [..., K, M], transpose_b b as [..., N, K]",
    "reduce": "x's shape without `axes` (size 1 with keepdims)",
    "arg_reduce": "x's shape without `axis` (size 1 with keepdims)",
    "is_finite": "0-d (all finite) or x's shape (element-wise), as declared",
    "axis_same": "x's shape",
    "norm": "x's shape; gamma/beta x.shape[axis:]",
    "gather": "table.shape[:axis] + indices.shape + table.shape[axis+1:]",
    "gather_elements": "indices' shape (data's rank; off the axis no larger than data's)",
    "scan": "x's shape (static sizes)",
    "topk": "x's shape with `k` at `axis` (static sizes)",
    "nms": "[B * C * min(max_output, N) + 1, 3] (static sizes)",
    "gather_nd": "data.shape[:batch_dims] + indices.shape[batch_dims:-1] + data.shape[batch_dims+k:], "
                 "k = indices.shape[-1]",
    "scatter_nd": "data's shape; updates indices.shape[:-1] + data.shape[k:], k = indices.shape[-1]",
    "transpose": "x.shape permuted",
    "reshape": "the declared output's shape (same element count)",
    "concat": "the inputs' common shape with the `axis` dims summed",
    "slice": "x's shape with each sliced axis' length",
    "dynamic_slice": "x's shape with `sizes` on `axes`",
    "pad": "x's shape, each axis i grown by pads[2i] + pads[2i+1]",
    "resize": "sizes",
    "rope": "x's shape",
    "dequant_matmul": "x[K] @ w[K, N] -> [N], x[M, K] @ w[K, N] -> [M, N]; scale/zero_point [N] or [1]",
    "sdpa": "q's batch dims (broadcast with k/v's, GQA) + [Sq, Dv]",
    "conv": "[N, O, *spatial], spatial = (size + pads - dilation*(K-1) - 1) // stride + 1",
    "pool": "[N, C, *spatial], spatial = (size + pads - kernel) // stride + 1",
    "lrn": "x's shape, [N, C, ...]",
    "qconv": "[N, *spatial, O] (NHWC), spatial as conv's; multiplier/shift/b [O]",
    "qlinear": "x[..., K] @ w[N, K]^T -> [..., N]; scale/b [N]",
    "qpool": "[N, *spatial, C] (NHWC), spatial as pool's",
    "qlut": "x's shape; table [256]",
    "qhard_swish": "x's shape",
}
