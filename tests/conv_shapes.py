"""The output shape of a convolution, from its input and weight shapes and attributes, written
out here for the kernel tests' programs (the DSL needs each output's shape declared)."""

from __future__ import annotations


def conv_out(xs, ws, attrs) -> tuple[int, ...]:
    """[N, O, *spatial] of conv1d / conv2d over x[N, C, *spatial] and w[O, C / groups, *kernel]:
    per spatial dim (in + pad_begin + pad_end - dilation (k - 1) - 1) // stride + 1; `padding` is
    one value, a value per dim (both sides) or begins then ends."""
    nd = len(xs) - 2

    def pairs(v, default):
        v = attrs.get(v, default)
        return [v] * nd if isinstance(v, int) else list(v)
    stride, dil, pad = pairs("stride", 1), pairs("dilation", 1), pairs("padding", 0)
    pad = pad * 2 if len(pad) == nd else pad
    return (xs[0], ws[0], *((xs[2 + i] + pad[i] + pad[nd + i] - dil[i] * (ws[2 + i] - 1) - 1) // stride[i] + 1
                            for i in range(nd)))
