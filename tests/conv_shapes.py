"""The output shape of a convolution, from its input and weight shapes and attributes, written
out here for the kernel tests' programs (the DSL needs each output's shape declared)."""

from __future__ import annotations

import numpy as np


def _per_dim(attrs, nd):
    """(stride, dilation, padding) per spatial dim, padding as begins then ends: a value, a value
    per dim (both sides) or begins then ends, as the DSL takes them."""
    def pairs(v, default):
        v = attrs.get(v, default)
        return [v] * nd if isinstance(v, int) else list(v)
    stride, dil, pad = pairs("stride", 1), pairs("dilation", 1), pairs("padding", 0)
    return stride, dil, pad * 2 if len(pad) == nd else pad


def conv_out(xs, ws, attrs) -> tuple[int, ...]:
    """[N, O, *spatial] of conv1d / conv2d over x[N, C, *spatial] and w[O, C / groups, *kernel]:
    per spatial dim (in + pad_begin + pad_end - dilation (k - 1) - 1) // stride + 1."""
    nd = len(xs) - 2
    stride, dil, pad = _per_dim(attrs, nd)
    return (xs[0], ws[0], *((xs[2 + i] + pad[i] + pad[nd + i] - dil[i] * (ws[2 + i] - 1) - 1) // stride[i] + 1
                            for i in range(nd)))


def conv2d_terms(x, w, bias, attrs) -> np.ndarray:
    """Per output of a conv2d (stride 1, one group), the sum of the magnitudes of the terms it adds
    up: conv2d(|x|, |w|) + |bias| (compare()'s `magnitude`), for kernels whose summation order
    differs from the reference's by more than a reordering (Winograd's transforms)."""
    _, _, pad = _per_dim(attrs, 2)
    ax = np.pad(np.abs(x.astype(np.float64)), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    aw = np.abs(w.astype(np.float64))
    kh, kw = aw.shape[2:]
    oh, ow = ax.shape[2] - kh + 1, ax.shape[3] - kw + 1
    out = np.zeros((ax.shape[0], aw.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", ax[:, :, i:i + oh, j:j + ow], aw[:, :, i, j])
    return out + (0.0 if bias is None else np.abs(bias.astype(np.float64))[None, :, None, None])
