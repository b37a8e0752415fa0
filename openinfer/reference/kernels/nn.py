"""Composite real-model ops: softmax, norms, rope, attention, convolution, pooling, LRN.

Each computes in f32 (f64 for f64) from start to end and rounds once on store.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ops.registry import Inference
from ...ops.shapes import sdpa_batch
from .common import as_float, store, t_in

Arrays = list[np.ndarray]


def _stable_exp(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    m = np.max(x, axis=axis, keepdims=True)
    return x - m, np.exp(x - m)


def softmax(xs: Arrays, inf: Inference) -> np.ndarray:
    t, axis = t_in(inf), inf.attrs["axis"]
    _, e = _stable_exp(as_float(xs[0], t), axis)
    return store(e / np.sum(e, axis=axis, keepdims=True), t)


def log_softmax(xs: Arrays, inf: Inference) -> np.ndarray:
    t, axis = t_in(inf), inf.attrs["axis"]
    shifted, e = _stable_exp(as_float(xs[0], t), axis)
    return store(shifted - np.log(np.sum(e, axis=axis, keepdims=True)), t)


def _norm_axes(inf: Inference) -> tuple[int, ...]:
    return tuple(range(inf.attrs["axis"], len(inf.out_shape)))


def layer_norm(xs: Arrays, inf: Inference) -> np.ndarray:
    t, axes = t_in(inf), _norm_axes(inf)
    x = as_float(xs[0], t)
    ct = x.dtype.type
    centered = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    y = centered / np.sqrt(var + ct(inf.attrs["eps"]))
    if len(xs) > 1:
        y = y * as_float(xs[1], t)
    if len(xs) > 2:
        y = y + as_float(xs[2], t)
    return store(y, t)


def rms_norm(xs: Arrays, inf: Inference) -> np.ndarray:
    t, axes = t_in(inf), _norm_axes(inf)
    x = as_float(xs[0], t)
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + x.dtype.type(inf.attrs["eps"]))
    if len(xs) > 1:
        y = y * as_float(xs[1], t)
    return store(y, t)


def rope(xs: Arrays, inf: Inference) -> np.ndarray:
    t = t_in(inf)
    x = as_float(xs[0], t)
    pos = np.asarray(xs[1]).astype(np.float64)
    half = x.shape[-1] // 2
    freq = float(inf.attrs["theta"]) ** (-2.0 * np.arange(half) / x.shape[-1])
    # pos [S] rotates x[..., S, H, Dh]: angles [S, 1, half] broadcast over the heads.
    angle = pos[:, None, None] * freq if pos.ndim else pos * freq
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    out = np.empty_like(x)
    if inf.attrs["interleaved"]:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., :half], x[..., half:]
        out[..., :half], out[..., half:] = a * cos - b * sin, b * cos + a * sin
    return store(out, t)


def sdpa(xs: Arrays, inf: Inference) -> np.ndarray:
    t, attrs = t_in(inf), inf.attrs
    q, k, v = (as_float(x, t) for x in xs[:3])
    q_batch, kv_batch = q.shape[:-2], np.broadcast_shapes(k.shape[:-2], v.shape[:-2])
    batch = sdpa_batch(q_batch, kv_batch)
    if kv_batch and batch[-1] != kv_batch[-1] and kv_batch[-1] != 1:
        # GQA: repeat each kv head for its group of query heads.
        group = batch[-1] // kv_batch[-1]
        k, v = (np.repeat(np.broadcast_to(y, (*kv_batch, *y.shape[-2:])), group, axis=-3) for y in (k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * q.dtype.type(attrs["scale"])
    if len(xs) > 3:
        mask = np.asarray(xs[3])
        scores = np.where(mask, scores, -np.inf) if mask.dtype == np.bool_ else scores + as_float(mask, t)
    if attrs["causal"]:
        keep = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        scores = np.where(keep, scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    empty = m == -np.inf
    e = np.exp(scores - np.where(empty, 0, m))
    out = np.matmul(e / np.where(empty, 1, np.sum(e, axis=-1, keepdims=True)), v)
    out = np.where(empty, 0, out)  # no key to attend to: zeros
    return store(np.broadcast_to(out, inf.out_shape), t)


def _conv(xs: Arrays, inf: Inference) -> np.ndarray:
    t, a = t_in(inf), inf.attrs
    x, w = as_float(xs[0], t), as_float(xs[1], t)
    n = x.ndim - 2
    stride, dilation, pad, groups = a["stride"], a["dilation"], a["padding"], a["groups"]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad[i], pad[n + i]) for i in range(n)])
    out_sp = inf.out_shape[2:]
    out = np.zeros(inf.out_shape, x.dtype)
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for taps in itertools.product(*(range(s) for s in w.shape[2:])):
            window = tuple(slice(taps[i] * dilation[i], taps[i] * dilation[i] + (out_sp[i] - 1) * stride[i] + 1,
                                 stride[i]) for i in range(n))
            patch = xg[(slice(None), slice(None), *window)]           # [N, Cg, *out]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wg[(slice(None), slice(None), *taps)])
    if len(xs) > 2:
        out += as_float(xs[2], t).reshape((1, -1) + (1,) * n)
    return store(out, t)


def _pool(is_max: bool):
    def kernel(xs: Arrays, inf: Inference) -> np.ndarray:
        t, a = t_in(inf), inf.attrs
        x = as_float(xs[0], t)
        kernel_, stride, pad = a["kernel"], a["stride"], a["padding"]
        widths = [(0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])]
        xp = np.pad(x, widths, constant_values=-np.inf if is_max else 0)
        real = np.pad(np.ones(x.shape[2:], x.dtype), widths[2:])  # 1 where a cell is not padding
        oh, ow = inf.out_shape[2:]
        acc = np.full(inf.out_shape, -np.inf if is_max else 0, x.dtype)
        count = np.zeros((oh, ow), x.dtype)
        for i, j in itertools.product(range(kernel_[0]), range(kernel_[1])):
            rows = slice(i, i + (oh - 1) * stride[0] + 1, stride[0])
            cols = slice(j, j + (ow - 1) * stride[1] + 1, stride[1])
            acc = np.maximum(acc, xp[:, :, rows, cols]) if is_max else acc + xp[:, :, rows, cols]
            count += real[rows, cols]
        if not is_max:
            acc = acc / (x.dtype.type(kernel_[0] * kernel_[1]) if a["count_include_pad"] else count)
        return store(acc, t)
    return kernel


def lrn(xs: Arrays, inf: Inference) -> np.ndarray:
    t, a = t_in(inf), inf.attrs
    x = as_float(xs[0], t)
    ct = x.dtype.type
    size, channels = a["size"], x.shape[1]
    # channel c sums channels c - lo .. c + hi: the squares padded by zero channels, one slice a tap
    lo, hi = (size - 1) // 2, size // 2
    sq = np.pad(x * x, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    total = np.zeros_like(x)
    for k in range(size):
        total += sq[:, k:k + channels]
    return store(x / (ct(a["bias"]) + ct(a["alpha"] / size) * total) ** ct(a["beta"]), t)


KERNELS = {
    "softmax": softmax, "log_softmax": log_softmax, "layer_norm": layer_norm, "rms_norm": rms_norm, "rope": rope,
    "sdpa": sdpa, "conv1d": _conv, "conv2d": _conv, "max_pool2d": _pool(True), "avg_pool2d": _pool(False),
    "lrn": lrn,
}
