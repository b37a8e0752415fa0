"""The conformance oracle of gather_elements, topk_indices, gather_nd and scatter_nd, element by
element from ONNX's definitions (kept apart from oracle.py for its size)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .oracle import Arr, Ctx, build, ieee_max, ieee_min, indices, is_float, store


def _gather_elements(xs: list[Arr], c: Ctx) -> Arr:
    data, idx = xs
    axis = c.attr("axis", 0) % len(data.shape)
    n = data.shape[axis]

    def at(o):
        i = int(idx[o])
        return data[o[:axis] + (i + n if i < 0 else i,) + o[axis + 1:]]
    return build(idx.shape, at)


def _topk(xs: list[Arr], c: Ctx) -> Arr:
    """Each row sorted by (NaN or not, value, index): NaN first for the largest, last for the
    smallest; the first k positions."""
    x = xs[0]
    axis = c.attrs["axis"] % len(x.shape) if "axis" in c.attrs else len(x.shape) - 1
    k, largest = c.attrs["k"], c.attr("largest", True)
    n = x.shape[axis]
    out_shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    out = Arr(out_shape, [None] * math.prod(out_shape))
    for o in indices(x.shape[:axis] + x.shape[axis + 1:]):
        row = [x[(*o[:axis], j, *o[axis:])] for j in range(n)]

        def key(j, row=row):
            v = row[j]
            nan = v != v
            if largest:
                return (0 if nan else 1, 0 if nan else -v, j)
            return (1 if nan else 0, 0 if nan else v, j)
        for r, j in enumerate(sorted(range(n), key=key)[:k]):
            pos = 0
            for i, d in zip((*o[:axis], r, *o[axis:]), out_shape, strict=True):
                pos = pos * d + i
            out.flat[pos] = j
    return out


def _tuple_at(idx: Arr, row: tuple[int, ...], dims: Sequence[int]) -> tuple[int, ...]:
    """Index tuple `row` of idx (its last dim), negative entries counted from the end of `dims`."""
    tup = [int(idx[row + (j,)]) for j in range(idx.shape[-1])]
    return tuple(v + d if v < 0 else v for v, d in zip(tup, dims, strict=True))


def _gather_nd(xs: list[Arr], c: Ctx) -> Arr:
    data, idx = xs
    b = c.attr("batch_dims", 0)
    q, k = len(idx.shape), idx.shape[-1]
    shape = data.shape[:b] + idx.shape[b:-1] + data.shape[b + k:]
    return build(shape, lambda o: data[o[:b] + _tuple_at(idx, o[:q - 1], data.shape[b:b + k]) + o[q - 1:]])


#: scatter_nd's reductions on two stored values: (floats, integers, bool)
_COMBINE = {"add": (lambda a, b: a + b, lambda a, b: a + b, lambda a, b: a or b),
            "mul": (lambda a, b: a * b, lambda a, b: a * b, lambda a, b: a and b),
            "max": (ieee_max, max, None), "min": (ieee_min, min, None)}


def _scatter_nd(xs: list[Arr], c: Ctx) -> Arr:
    """Row by row, in order: each update slice replaces, or is combined into, the slice its tuple picks."""
    data, idx, updates = xs
    k = idx.shape[-1]
    out = Arr(data.shape, list(data.flat))
    reduction = c.attr("reduction", "none")
    for row in indices(idx.shape[:-1]):
        at = _tuple_at(idx, row, data.shape[:k])
        for rest in indices(data.shape[k:]):
            pos = 0
            for i, d in zip(at + rest, data.shape, strict=True):
                pos = pos * d + i
            u = updates[row + rest]
            if reduction == "none":
                out.flat[pos] = u
                continue
            float_fn, int_fn, bool_fn = _COMBINE[reduction]
            a = out.flat[pos]
            out.flat[pos] = (bool_fn(a, u) if c.t == "bool" else
                             store(float_fn(float(a), float(u)) if is_float(c.t) else int_fn(int(a), int(u)), c.t))
    return out


INDEXING = {"gather_elements": _gather_elements, "topk_indices": _topk, "gather_nd": _gather_nd,
            "scatter_nd": _scatter_nd}
