"""Index and shape arithmetic every target's kernels share: element counts, row-major and
broadcast strides, loop collapsing, convolution geometry, arange's index. Pure integers (or
dynamic `Dim` expressions, openinfer/dims.py), no C or GLSL: each language renders them."""

from __future__ import annotations

from dataclasses import dataclass

from ..synth.program import KernelRequest


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def blocks_of(n: int, size: int) -> list[tuple[int, int, int]]:
    """n items (rows, channels) as register tiles take them: (first item, blocks, items a block),
    the whole blocks of `size`, then one of the n % size left."""
    return ([(0, n // size, size)] if n >= size else []) + ([(n - n % size, 1, n % size)] if n % size else [])


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of an input of `shape` iterated over `out_shape` (0 on broadcast dims)."""
    pad = len(out_shape) - len(shape)
    full = (1,) * pad + tuple(shape)
    base = contiguous_strides(full)
    return tuple(0 if full[i] == 1 and out_shape[i] != 1 else base[i] for i in range(len(out_shape)))


def collapse(sizes, *strides_lists):
    """Merge adjacent loop dims that are contiguous in every stride list (and drop size-1 dims):
    fewer, longer loops over the same elements in the same order. Returns (sizes, strides...)."""
    dims = [(n, tuple(s[i] for s in strides_lists)) for i, n in enumerate(sizes) if n != 1]
    out: list[tuple[int, tuple[int, ...]]] = []
    for n, st in dims:
        if out:
            pn, pst = out[-1]
            if all(p == s * n for p, s in zip(pst, st, strict=True)):
                out[-1] = (pn * n, st)
                continue
        out.append((n, st))
    sizes_out = [n for n, _ in out]
    return (sizes_out, *([st[k] for _, st in out] for k in range(len(strides_lists))))


def arange_index(req: KernelRequest, flat: str, suffix: str = "") -> str:
    """The index along arange's axis of output element `flat` (x and the output share one shape);
    `suffix` follows the integer literals (GLSL's `u`)."""
    shape, axis = req.output.shape, req.attr("axis")
    inner = numel(shape[axis + 1:])          # (a Dim where a dynamic size is among them)
    idx = flat if inner == 1 else f"({flat} / {inner}{suffix})"
    return idx if axis == 0 else f"({idx} % {shape[axis]}{suffix})"


@dataclass(frozen=True)
class ConvGeometry:
    """conv1d / conv2d sizes as one 2-D problem (conv1d is H = KH = 1): batch n, channels c,
    input h x w, outputs o, per-group channels cg / og, kernel kh x kw, output oh x ow, strides,
    dilations and the top / left padding. Shared by the C and GLSL conv emitters."""

    n: int
    c: int
    h: int
    w: int
    o: int
    cg: int
    og: int
    kh: int
    kw: int
    oh: int
    ow: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int

    @classmethod
    def of(cls, req: KernelRequest, stride, dil, pad, groups: int) -> ConvGeometry:
        x, wt, out = req.inputs[0].shape, req.inputs[1].shape, req.own_output.shape   # (before a pool)
        if req.op == "conv1d":
            return cls(x[0], x[1], 1, x[2], wt[0], x[1] // groups, wt[0] // groups, 1, wt[2], 1, out[2],
                       1, stride[0], 1, dil[0], 0, pad[0])
        return cls(*x, wt[0], x[1] // groups, wt[0] // groups, *wt[2:], *out[2:], *stride, *dil, *pad[:2])
