"""The Helium convolution (templates/mcu/helium_conv.c.j2): f32 conv1d / conv2d, NCHW, static
extents, column stride 1, any row stride, padding, dilation and groups. Any other request takes
the portable kernel (openinfer/targets/c/kernels/nn.py).

No scratch at all (a microcontroller's RAM is small, its weights stay in flash): no padded copy
of the input and no packed weights. A tile is OCB output channels x NV vectors of one output row
(the matmul's shapes: 3 x 2, 2 x 3, 1 x 6 sums in six Q registers); a tap (input channel, kh, kw)
loads its NV input vectors straight from the input row and multiplies them by each channel's
weight, a scalar MVE's VFMA takes from a general-purpose register, read in place from w[O, C,
KH, KW]. Padding never reaches memory:

- rows: each output row sums only the kh whose input row exists (bounds computed per row);
- columns: a vector whose lanes fall left or right of the input row is a predicated load whose
  predicate (a constant, decided here per tile position and kw) keeps the lanes inside; the
  others read nothing and load 0. A tile with no such vector, and a whole last vector, is an
  interior tile: the row's interior tiles share one function, called in a loop.

The last vector of a row may hold fewer than 4 outputs: its store is predicated (VCTP).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...synth.program import KernelRequest
from ..c.kernels.common import static_attr
from ..geometry import ConvGeometry, blocks_of
from ..x86.renderer import common_dtype
from .mve import LANES, TILE_VECTORS

#: Output channels of a tile (when the group has that many).
TILE_CHANNELS = 3
#: A predicate whose 4 lanes are all live (4 bits a 32-bit lane).
ALL_LANES = 0xFFFF
#: Predicates a tile's asm statement takes in registers (an edge tile's one or two); any more are
#: set from an immediate (GCC takes at most 30 operands a statement, and general-purpose
#: registers are few).
HELD_PREDICATES = 2


@dataclass(frozen=True)
class Tile:
    """One kind of tile: OCB channels x NV vectors, each vector's predicate per kw (ALL_LANES:
    an unpredicated load; 0: the tap adds nothing, no load) and the live lanes of its last
    vector's store."""

    ocb: int
    nv: int
    masks: tuple[tuple[int, ...], ...]      # [vector][kw]
    last: int                               # outputs in the last vector (1-4)

    def live(self, kw: int) -> list[int]:
        """The vectors tap kw loads (the others are wholly outside the input row)."""
        return [v for v in range(self.nv) if self.masks[v][kw]]

    @property
    def predicates(self) -> list[int]:
        """The predicates of its partial loads, each once, in the order the taps use them."""
        seen = [self.masks[v][kw] for kw in range(len(self.masks[0])) for v in self.live(kw)]
        return list(dict.fromkeys(m for m in seen if m != ALL_LANES))


def conv_geometry(req: KernelRequest) -> ConvGeometry | None:
    """The geometry of a convolution the Helium kernel covers: f32, static, not in place, no
    pool folded into it, column stride 1; None for any other."""
    if req.op not in ("conv1d", "conv2d") or common_dtype(req) != "f32" or req.aliased or req.sizes \
            or req.output.numel == 0 or req.runtime_attrs or req.pool is not None or req.epilogue is not None:
        return None
    g = ConvGeometry.of(req, static_attr(req, "stride"), static_attr(req, "dilation"), static_attr(req, "padding"),
                        static_attr(req, "groups"))
    # the asm's immediates: a weight's LDR steps KH KW floats (8 bits of bytes), an input vector's
    # VLDRW reaches kw dw - pl + 4 v floats from the tile's column (7 bits of words)
    reach = max(abs(g.pl), abs((g.kw - 1) * g.dw - g.pl + LANES * (TILE_VECTORS[1] - 1)))
    return g if g.sw == 1 and 4 * g.kh * g.kw <= 255 and reach <= 127 else None


def _tile(g: ConvGeometry, ocb: int, ow0: int, nv: int) -> Tile:
    """The tile of `nv` vectors of outputs from column ow0: each lane's input column for tap kw is
    ow0 + lane + kw * dw - pl, live when inside [0, W) and an output column of the row."""
    masks = []
    for v in range(nv):
        row = []
        for kw in range(g.kw):
            bits = 0
            for lane in range(LANES):
                ow, iw = ow0 + LANES * v + lane, ow0 + LANES * v + lane + kw * g.dw - g.pl
                if ow < g.ow and 0 <= iw < g.w:
                    bits |= 0xF << (4 * lane)
            # (lanes past the row's outputs are loaded when they are inside the input: the store drops them)
            full = all(0 <= ow0 + LANES * v + lane + kw * g.dw - g.pl < g.w for lane in range(LANES))
            row.append(ALL_LANES if full else bits)
        masks.append(tuple(row))
    return Tile(ocb, nv, tuple(masks), min(LANES, g.ow - ow0 - LANES * (nv - 1)))


def row_plan(g: ConvGeometry, ocb: int) -> list[tuple[Tile, int, int]]:
    """The tiles across an output row for blocks of `ocb` channels, as runs of one kind: (tile,
    first column, tiles in the run)."""
    nv = TILE_VECTORS[ocb]
    runs: list[tuple[Tile, int, int]] = []
    ow0 = 0
    while ow0 < g.ow:
        vecs = min(nv, -(-(g.ow - ow0) // LANES))
        tile = _tile(g, ocb, ow0, vecs)
        if runs and runs[-1][0] == tile:
            runs[-1] = (tile, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((tile, ow0, 1))
        ow0 += LANES * vecs
    return runs


def conv_context(req: KernelRequest, g: ConvGeometry) -> dict:
    """The template's context: the geometry, the channel blocks, each block size's row plan and
    the distinct tiles (a function each)."""
    blocks = blocks_of(g.og, TILE_CHANNELS)
    plans = {ocb: row_plan(g, ocb) for _, _, ocb in blocks}
    tiles = list(dict.fromkeys(t for plan in plans.values() for t, _, _ in plan))
    bias = len(req.own_inputs) > 2
    stride, dil, pad = (list(static_attr(req, a)) for a in ("stride", "dilation", "padding"))
    doc = (f"{req.op}: {req.inputs[0]} * {req.inputs[1]}" + (" + bias" if bias else "")
           + f", stride {stride}, padding {pad}, dilation {dil}, groups {static_attr(req, 'groups')} -> {req.output}")
    return dict(doc=doc, n=g.n, c=g.c, h=g.h, w=g.w, o=g.o, cg=g.cg, og=g.og, kh=g.kh, kw=g.kw, oh=g.oh, ow=g.ow,
                sh=g.sh, dh=g.dh, dw=g.dw, pt=g.pt, pl=g.pl, groups=g.c // g.cg, bias=bias, blocks=blocks,
                plans=plans, tiles=tiles, tile_index={t: i for i, t in enumerate(tiles)}, all_lanes=ALL_LANES,
                held_predicates=HELD_PREDICATES)
