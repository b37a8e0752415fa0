"""Layout ops: gather, transpose, reshape, concat, slice, dynamic_slice, pad. They move values without computing, so
every dtype works and results are exact copies."""

from __future__ import annotations

import numpy as np

from ...ops.errors import OpRuntimeError
from ...ops.registry import Inference
from .common import store

Arrays = list[np.ndarray]


def gather(xs: Arrays, inf: Inference) -> np.ndarray:
    table, idx = xs
    axis = inf.attrs["axis"]
    n = table.shape[axis]
    bad = (idx < -n) | (idx >= n) if idx.dtype.kind == "i" else idx >= n
    if np.any(bad):
        first = idx[bad].reshape(-1)[0]
        raise OpRuntimeError(f"gather: index {int(first)} is out of range for axis {axis} of size {n} "
                             f"(valid: {-n}..{n - 1})")
    return np.take(table, idx.astype(np.int64), axis=axis)


def transpose(xs: Arrays, inf: Inference) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(xs[0], inf.attrs["perm"]))


def reshape(xs: Arrays, inf: Inference) -> np.ndarray:
    return np.array(xs[0]).reshape(inf.out_shape)


def concat(xs: Arrays, inf: Inference) -> np.ndarray:
    return np.concatenate(xs, axis=inf.attrs["axis"])


def slice_(xs: Arrays, inf: Inference) -> np.ndarray:
    a = inf.attrs
    index = [slice(None)] * xs[0].ndim
    for axis, s, e, st in zip(a["axes"], a["starts"], a["ends"], a["steps"], strict=True):
        index[axis] = slice(s, e, st)
    return np.array(xs[0][tuple(index)])


def dynamic_slice(xs: Arrays, inf: Inference) -> np.ndarray:
    x, a = xs[0], inf.attrs
    index = [slice(None)] * x.ndim
    for axis, size, start in zip(a["axes"], a["sizes"], xs[1:], strict=True):
        first = min(max(int(np.asarray(start).reshape(-1)[0]), 0), x.shape[axis] - size)   # window inside x
        index[axis] = slice(first, first + size)
    return np.array(x[tuple(index)])


def pad(xs: Arrays, inf: Inference) -> np.ndarray:
    """The output filled with `value` stored as T (as `fill` stores it), x copied into its interior."""
    x, pads = xs[0], inf.attrs["pads"]
    out = np.array(store(np.full(inf.out_shape, inf.attrs["value"]), inf.out_dtype), dtype=x.dtype)
    out[tuple(slice(pads[2 * i], pads[2 * i] + d) for i, d in enumerate(x.shape))] = x
    return out


KERNELS = {"gather": gather, "transpose": transpose, "reshape": reshape, "concat": concat, "slice": slice_,
           "dynamic_slice": dynamic_slice, "pad": pad}
