"""The NEON direct convolution (templates/arm/conv.c.j2): f32 conv1d / conv2d with static extents,
any padding, dilation and groups, column stride 1-4, with an element-wise epilogue over the sums
and a max / avg pool after it whose windows tile its output (`pools_own_result`). `conv_geometry`
says which requests the NEON kernels take; of those, Winograd's (winograd.py) takes the 3 x 3 ones
at stride 1 it covers. Any other request takes the portable kernel
(openinfer/targets/c/kernels/nn.py)."""

from __future__ import annotations

from ...synth.program import KernelRequest
from ..c.kernels import KernelText
from ..c.kernels.common import static_attr
from ..c.kernels.nn import pool_of_rows
from ..geometry import ConvGeometry
from ..x86.renderer import common_dtype, round_up

#: Output channels x vectors of columns of a tile, over weights packed [tap][channel]: 24
#: accumulators, the 2 weight vectors of a tap and its 3 input vectors take 29 of the 32
#: registers; 3 loads (and 1 of the input offset) per 24 FMLAs. Under QEMU's count, the 3 x 3
#: convolutions of tools/bench/qemu_insns.py (32 channels on 14 x 14; 16 -> 32 on 28 x 28):
#: this tile 718,064 / 1,243,932 instructions; 8 x 2 over the same packing 718,065 / 1,285,140;
#: 8 x 2 over unpacked weights (a weight vector holding 4 taps of a channel, FMLA by lane over
#: 4 taps a step) 718,019 / 1,301,226.
_OCB, _NV = 8, 3
#: Multiply-adds below which a convolution stays on the calling thread, and the least a pool
#: claim carries (the portable kernel's, openinfer/targets/c/kernels/nn.py).
_PAR_MACS = 1 << 18
_GRAIN_MACS = 1 << 17


def conv_geometry(req: KernelRequest) -> ConvGeometry | None:
    """The geometry of a convolution this kernel covers: f32, static, not in place, a column
    stride the de-interleaving loads take (1-4); None for any other."""
    if req.op not in ("conv1d", "conv2d") or common_dtype(req) != "f32" or req.aliased or req.sizes \
            or req.output.numel == 0 or req.runtime_attrs or (req.pool is not None and not pools_own_result(req)):
        return None
    g = ConvGeometry.of(req, static_attr(req, "stride"), static_attr(req, "dilation"), static_attr(req, "padding"),
                        static_attr(req, "groups"))
    return g if 1 <= g.sw <= 4 else None


def pools_own_result(req: KernelRequest) -> bool:
    """Whether a conv2d pools its own result (openinfer/synth/fusion.py `fold_pools`): the pool is
    a max / avg pool whose windows tile the output (stride = kernel, no padding), so a work unit's
    convolution rows make whole pooled rows (templates/arm/conv.c.j2 `pool`)."""
    pool = req.pool
    return (req.op == "conv2d" and pool is not None and common_dtype(pool) == "f32"
            and tuple(static_attr(pool, "stride")) == tuple(static_attr(pool, "kernel"))
            and not any(static_attr(pool, "padding")))


def packed_elems(g: ConvGeometry) -> int:
    """Elements of the packed weights: per block of output channels, [taps][lanes of the block]."""
    ocb = min(_OCB, g.og)
    return -(-g.og // ocb) * (g.c // g.cg) * g.cg * g.kh * g.kw * round_up(ocb, 4)


def conv_kernel(r, req: KernelRequest, name: str, g: ConvGeometry, epi: dict | None,
                sections: tuple[str, ...]) -> KernelText:
    """The kernel of a request `conv_geometry` covers, with the epilogue `epi` (the NEON renderer
    `r`'s description, openinfer/targets/arm/renderer.py `_epilogue`) and prelude `sections`."""
    ow4 = round_up(g.ow, 4)
    # a padded row: every tile's whole-vector loads, the de-interleaving ones' sw floats a lane
    cols = g.sw * ow4 + (g.kw - 1) * g.dw
    hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
    padded = not (g.pt == 0 and g.pl == 0 and cols <= g.w and hp <= g.h)
    rs, rows = (cols, hp) if padded else (g.w, g.h)
    plane = rows * rs
    lo = min(g.pl, rs)                      # padded columns [lo, hi) are input columns from lo - pl
    hi = max(lo, min(g.pl + g.w, rs))
    offsets = [4 * (ci * plane + i * g.dh * rs + j * g.dw)      # in bytes
               for ci in range(g.cg) for i in range(g.kh) for j in range(g.kw)]
    # a row's vectors: tiles of _NV, then one of the rest; the tile holding a partial vector is
    # the edge tile (its stores take a count) whatever its width. (A rest of 1 after a tile of 3
    # as 2 + 2 cost more under QEMU's count: 794,673 against 718,064 instructions for 32
    # channels on 14 x 14, 1,297,244 against 1,243,932 for 16 -> 32 on 28 x 28.)
    full_tiles, rest = divmod(-(-g.ow // 4), _NV)
    if not rest and g.ow % 4:
        full_tiles, rest = full_tiles - 1, _NV
    edges = [(full_tiles * _NV * 4, rest, g.ow % 4 or 4)] if rest else []
    ocb = min(_OCB, g.og)
    prepacked = 1 in req.packed
    pad_bytes = round_up(g.n * g.c * plane * 4, 64) if padded else 0
    nobg = -(-g.og // ocb)
    nob = nobg * (g.c // g.cg)
    # a unit is one output row, or (a pool after it) one pooled row: the pool's `rpu` rows, which
    # it writes to its thread's workspace (after the padded copy and the weights) and pools from
    pool = req.pool
    rpu, (urows, pw) = (static_attr(pool, "kernel")[0], pool.output.shape[2:]) if pool else (1, (g.oh, g.ow))
    units = g.n * nob * urows
    macs_unit = ocb * g.ow * g.cg * g.kh * g.kw * rpu
    rows_at = round_up(pad_bytes + (0 if prepacked else packed_elems(g) * 4), 64)
    bias = len(req.own_inputs) > 2
    stride, dil, pad = (list(static_attr(req, a)) for a in ("stride", "dilation", "padding"))
    doc = (f"{req.op}: {req.inputs[0]} * {req.inputs[1]}" + (" + bias" if bias else "") + f", stride {stride}, "
           f"padding {pad}, dilation {dil}, groups {static_attr(req, 'groups')} -> {req.own_output}"
           + (f", then {' -> '.join(s.op for s in epi['steps'])}" if epi else "")
           + (f", then {pool.op} kernel {list(static_attr(pool, 'kernel'))} -> {req.output}" if pool else ""))
    text = r.render("conv.c.j2", req, name, sections, doc=doc, n=g.n, c=g.c, h=g.h, w=g.w, o=g.o,
                    cg=g.cg, og=g.og, kh=g.kh, kw=g.kw, oh=g.oh, ow=g.ow, sh=g.sh, sw=g.sw, dh=g.dh, dw=g.dw,
                    pt=g.pt, pl=g.pl, bias=bias, epi=epi, padded=padded, rs=rs, hp=hp, plane=plane, lo=lo, hi=hi,
                    offsets=offsets, ocb=ocb, wp=round_up(ocb, 4), prepacked=prepacked, w_at=pad_bytes, nv=_NV,
                    nobg=nobg, nob=nob, units=units, ys=rpu * g.ow if pool else g.oh * g.ow, pool=pool is not None,
                    pool_kernel=pool and pool_of_rows(pool, f"{name}_pool", rpu, g.ow, r), rpu=rpu, urows=urows,
                    pw=pw, rows_at=rows_at,
                    full_tiles=full_tiles, edges=edges, parallel=units * macs_unit >= _PAR_MACS and units > 1,
                    grain=max(1, -(-_GRAIN_MACS // macs_unit)))
    return KernelText(text, rows_at + ocb * rpu * g.ow * 4 if pool else rows_at)
