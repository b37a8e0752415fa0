"""Layout ops: gather, gather_elements, gather_nd, scatter_nd, transpose, reshape, concat, slice, dynamic_slice,
pad, resize. They move values without computing, so every dtype works and results are exact copies (scatter_nd's
reductions apply the element-wise op they name; resize's linear mode interpolates floats)."""

from __future__ import annotations

import numpy as np

from ...ops.errors import OpRuntimeError
from ...ops.registry import Inference, TensorType, get
from ...ops.resample import resize_axis
from .common import store
from .elementwise import KERNELS as ELEMENTWISE

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


def gather_elements(xs: Arrays, inf: Inference) -> np.ndarray:
    """NumPy take_along_axis over the block of data that indices' shape covers."""
    data, idx = xs
    axis = inf.attrs["axis"]
    n = data.shape[axis]
    bad = (idx < -n) | (idx >= n) if idx.dtype.kind == "i" else idx >= np.uint64(n)
    if np.any(bad):
        at = [int(i) for i in np.argwhere(bad)[0]]
        raise OpRuntimeError(f"gather_elements: index {int(idx[tuple(at)])} at {at} is out of range for axis {axis} "
                             f"of size {n} (valid: {-n}..{n - 1})")
    rows = idx.astype(np.int64)
    block = data[tuple(slice(None) if k == axis else slice(0, s) for k, s in enumerate(idx.shape))]
    return np.take_along_axis(block, np.where(rows < 0, rows + n, rows), axis=axis)


def _slots(op: str, idx: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """The index tuples in idx's last dim as row-major positions into `dims` (int64, idx's shape
    without its last dim); OpRuntimeError at the first index outside [-n, n) of its dim."""
    n = np.asarray(dims, dtype=np.uint64 if idx.dtype.kind == "u" else np.int64)
    bad = (idx < -n) | (idx >= n) if idx.dtype.kind == "i" else idx >= n
    if np.any(bad):
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        d = at[-1]
        raise OpRuntimeError(f"{op}: index {int(idx[at])} at {list(at)} is out of range for a dim of size {dims[d]} "
                             f"(valid: {-dims[d]}..{dims[d] - 1})")
    rows = idx.astype(np.int64)
    rows = np.where(rows < 0, rows + np.asarray(dims, dtype=np.int64), rows)
    strides = np.cumprod((1, *dims[:0:-1]), dtype=np.int64)[::-1]
    return rows @ strides


def gather_nd(xs: Arrays, inf: Inference) -> np.ndarray:
    """Per batch index, the slices of data after the batch dims that the index tuples pick."""
    data, idx = xs
    b = inf.attrs["batch_dims"]
    k = idx.shape[-1]
    lead = data.shape[b:b + k]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    slots = _slots("gather_nd", idx, lead).reshape(batch, int(np.prod(idx.shape[b:-1], dtype=np.int64)))
    rows = data.reshape(batch, int(np.prod(lead, dtype=np.int64)), *data.shape[b + k:])
    return np.ascontiguousarray(rows[np.arange(batch)[:, None], slots]).reshape(inf.out_shape)


def scatter_nd(xs: Arrays, inf: Inference) -> np.ndarray:
    """A copy of data; update row j then replaces (or is combined into) the slice tuple j picks,
    row by row in order."""
    data, idx, updates = xs
    k = idx.shape[-1]
    lead = data.shape[:k]
    slots = _slots("scatter_nd", idx, lead).reshape(-1)
    inner = int(np.prod(data.shape[k:], dtype=np.int64))
    out = np.array(data).reshape(int(np.prod(lead, dtype=np.int64)), inner)
    rows = updates.reshape(len(slots), inner)
    reduction = inf.attrs["reduction"]
    if reduction == "none":
        last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]    # each slot's last row
        out[slots[last]] = rows[last]
    else:
        row = TensorType(inf.out_dtype, (inner,))
        combine = get(reduction).infer([row, row], {})
        for j, s in enumerate(slots):
            out[s] = ELEMENTWISE[reduction]([out[s], rows[j]], combine)
    return out.reshape(data.shape)


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
    """constant: the output filled with `value` stored as T (as `fill` stores it), x copied into its
    interior; reflect and edge: NumPy's modes of those names, which are ONNX's (unpadded, the
    copy alone: NumPy refuses the empty pad list of a 0-d x)."""
    x, pads, mode = xs[0], inf.attrs["pads"], inf.attrs["mode"]
    if mode != "constant" and any(pads):
        return np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)], mode=mode)
    out = np.array(store(np.full(inf.out_shape, inf.attrs["value"]), inf.out_dtype), dtype=x.dtype)
    out[tuple(slice(pads[2 * i], pads[2 * i] + d) for i, d in enumerate(x.shape))] = x
    return out


def resize(xs: Arrays, inf: Inference) -> np.ndarray:
    """Axis by axis (openinfer/ops/resample.py's taps): nearest takes x's elements, linear weighs
    the two neighbours of each position in f64 and rounds once to T."""
    x, a = xs[0], inf.attrs
    y = x if a["mode"] == "nearest" else x.astype(np.float64)
    for axis, n_out in enumerate(a["sizes"]):
        taps = resize_axis(a, axis, x.shape[axis], n_out)
        lo = np.array([i0 for i0, _, _ in taps], dtype=np.int64)
        w = np.array([w for _, _, w in taps], dtype=np.float64).reshape((-1,) + (1,) * (x.ndim - axis - 1))
        if not w.any():
            y = np.take(y, lo, axis=axis)
            continue
        hi = np.array([i1 for _, i1, _ in taps], dtype=np.int64)
        y = (1 - w) * np.take(y, lo, axis=axis) + w * np.take(y, hi, axis=axis)
    return np.array(y) if a["mode"] == "nearest" else store(y, inf.out_dtype)


KERNELS = {"gather": gather, "gather_elements": gather_elements, "gather_nd": gather_nd,
           "scatter_nd": scatter_nd, "transpose": transpose, "reshape": reshape, "concat": concat,
           "slice": slice_, "dynamic_slice": dynamic_slice, "pad": pad, "resize": resize}
