"""The scalar-FPU convolution of the Cortex-M wing (templates/mcu/conv.c.j2): f32 conv1d / conv2d
on an Armv7E-M or Armv8-M Mainline FPU (Cortex-M4F, M7, M33), NCHW, static extents, column stride
1, any row stride, padding, dilation and groups. Any other request takes the portable kernel
(openinfer/targets/c/kernels/nn.py).

The portable kernel takes about 4 instructions a multiply-add on these cores (a load of x and of w,
the multiply-add, the index arithmetic). Here a tile keeps the sums of OCB (4) output channels x NC
(4) consecutive output columns of one output row in s16-s31 for all of its taps, as the GEMM
(templates/mcu/gemm.c.j2) keeps its 4 x 4 block; a block of fewer channels (a group's last, a
depthwise convolution's one) takes wider tiles (3 x 5, 2 x 8, 1 x 12 for 3 x 3 taps). For each
input channel and kernel row, the tile's inputs are one contiguous run of the input row, its
segment: NC + (KW - 1) DW values from column ow0 - pl, segment index i in register s<i>, loaded by
one VLDMIA. Each output channel's KW weights of that row, w[oc, ci, kh, 0:KW], are consecutive too:
one VLDMIA each (with writeback: the pointer walks the channel's weights through kh and ci with no
arithmetic), into the registers past the segment (taken in turn, so that a load does not overwrite
the registers the last multiply-adds read), then NC KW VFMAs a channel. A 3 x 3 interior tile
takes, per input channel and kernel row, the segment's VLDMIA, the ADD that moves to the next input
row, 4 VLDMIAs of weights and 48 VFMAs: 54 instructions for 48 multiply-adds, the loop's SUBS and
BNE once per input channel (3 rows). A 1 x 1 convolution's iteration takes two input channels,
whose weights are consecutive: two segments, one VLDMIA of 2 weights a channel, 32 VFMAs, 42
instructions for 32 multiply-adds (one channel an iteration would take 24 for 16; with one output
channel, a tile 14 columns wide takes 19 for 14, a pair of input channels 21).

No scratch at all (a microcontroller's RAM is small, its weights stay in flash): no padded copy
of the input and no packed weights. Padding never reaches memory:

- rows: the output rows are runs of one set of existing input rows (the first kernel row kh_lo
  whose input row exists, and the count R of them); a tile function per R unrolls its R kernel
  rows in its input-channel loop, and when R < KH each channel's weight pointer then skips the
  missing rows' weights (an ADD each);
- columns: a segment's registers left or right of the input row are never loaded, and the taps
  that would read them are left out (the products of padding's zeros). A tile with no input at all
  (only padding) stores the bias, in C.

The last tile of a row may hold fewer columns: the same code with fewer sums.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...synth.program import KernelRequest
from ..c.kernels.common import static_attr
from ..geometry import ConvGeometry, blocks_of
from ..x86.renderer import common_dtype
from .thumb import add

#: Output channels of a tile (when the group has that many).
TILE_CHANNELS = 4
#: The first sum's register: the sums are s16-s31, s0-s15 hold the segment and the weights.
FIRST_SUM = 16
#: Sums a tile keeps, OCB x NC.
SUMS = 16
#: Registers the weights take at the least (so a load need not overwrite the last one read).
MIN_WEIGHT_REGISTERS = 2
#: Input channels an iteration of a 1 x 1 convolution's tile takes: their weights are consecutive
#: in w[O, C, 1, 1], so one VLDMIA a channel loads both (4 x 4 sums: the two segments and the 4
#: channels' pairs of weights fill s0-s15).
POINTWISE_CHANNELS = 2


def segment(g: ConvGeometry, nc: int) -> int:
    """Input values a tile of `nc` columns reads from a row: its columns and the taps' reach."""
    return nc + (g.kw - 1) * g.dw


def pointwise(g: ConvGeometry, ocb: int) -> bool:
    """Whether the tiles of `ocb` channels take POINTWISE_CHANNELS input channels an iteration: a
    1 x 1 convolution's, of 2 channels or more (one channel's tile, twice as wide, takes fewer
    instructions a multiply-add alone: 19 for 14, against 21 for 14)."""
    return g.kh == g.kw == 1 and g.cg >= POINTWISE_CHANNELS and ocb >= 2


def tile_width(g: ConvGeometry, ocb: int) -> int:
    """Output columns NC of a tile of `ocb` channels: as many as the 16 sums take (4 x 4, 3 x 5,
    2 x 8, 1 x 16) while the segment (a 1 x 1 tile's two segments) leaves registers for the
    weights (its pairs of weights)."""
    if pointwise(g, ocb):
        return min(SUMS // ocb, (FIRST_SUM - POINTWISE_CHANNELS * ocb) // POINTWISE_CHANNELS)
    return min(SUMS // ocb, FIRST_SUM - MIN_WEIGHT_REGISTERS - (g.kw - 1) * g.dw)


def conv_geometry(req: KernelRequest) -> ConvGeometry | None:
    """The geometry of a convolution this kernel covers: f32, static, not in place, nothing
    folded into it (pool, epilogue), column stride 1, taps reaching 14 input columns at most (a
    tile of one column then leaves registers for weights), fewer than 65,536 input channels a
    group; None for any other."""
    if req.op not in ("conv1d", "conv2d") or req.mode != "normal" or common_dtype(req) != "f32" or req.aliased \
            or req.sizes or req.output.numel == 0 or req.runtime_attrs or req.pool is not None \
            or req.epilogue is not None or req.prologue is not None or req.input_perms or req.packed:
        return None
    g = ConvGeometry.of(req, static_attr(req, "stride"), static_attr(req, "dilation"), static_attr(req, "padding"),
                        static_attr(req, "groups"))
    # (the input channels' count is a MOVW's 16-bit immediate)
    return g if g.sw == 1 and tile_width(g, 1) >= 1 and g.cg < 1 << 16 else None


@dataclass(frozen=True)
class Tile:
    """One kind of tile: OCB channels x NC columns (of a row's WIDTH a tile: channel o's sums are
    s<16 + WIDTH o>...) summing R kernel rows, loading segment indices [lo, hi) (those inside
    the input row); R = 0 or lo >= hi: only padding (the bias)."""

    ocb: int
    width: int
    nc: int
    lo: int
    hi: int
    rows: int

    @property
    def empty(self) -> bool:
        return self.rows == 0 or self.lo >= self.hi


class _Constants:
    """The steps of a tile's asm that no ADD immediate encodes: register operands, by name."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def add(self, reg: str, value: int, name: str) -> list[str]:
        """reg += value bytes: an immediate, else the constant operand `name`."""
        line = add(f"%[{reg}]", value)
        if line is None:
            self.values[name] = value
            line = f"add %[{reg}], %[{reg}], %[{name}]"
        return [line] if line else []


def _regs(first: int, count: int) -> str:
    """A VLDM / VSTM register list of `count` s-registers from s<first>."""
    return f"{{s{first}}}" if count == 1 else f"{{s{first}-s{first + count - 1}}}"


def tile_asm(g: ConvGeometry, t: Tile, bias: bool) -> dict:
    """The asm of a tile that reads input: `zero`, the sums' registers; `loop`, the loop's body,
    `count` iterations of it; `tail`, an input channel left over; `store`, the bias added, the
    sums stored; and the constants that are register operands. An iteration takes one input
    channel's R rows, or a 1 x 1 convolution's POINTWISE_CHANNELS input channels."""
    constants = _Constants()
    if pointwise(g, t.ocb):
        loop, count = _pointwise_channels(g, t, constants), g.cg // POINTWISE_CHANNELS
        tail = _channel(g, t, constants) if g.cg % POINTWISE_CHANNELS else []
    else:
        loop, count, tail = _channel(g, t, constants), g.cg, []
    return dict(zero=_regs(FIRST_SUM, t.ocb * t.width), loop=loop, count=count, tail=tail, store=_store(g, t, bias),
                constants=sorted(constants.values.items()))


def _channel(g: ConvGeometry, t: Tile, constants: _Constants) -> list[str]:
    """One input channel: each of the R rows' segment, then each output channel's KW weights
    (in chunks of the registers left, taken in turn) and their VFMAs."""
    lines = []
    seg = segment(g, t.nc)
    free = FIRST_SUM - seg                                  # the weights' registers, s<seg>..s15
    cursor = seg
    for r in range(t.rows):
        lines.append(f"vldmia %[x], {_regs(t.lo, t.hi - t.lo)}")
        if r < t.rows - 1:
            lines += constants.add("x", 4 * g.dh * g.w, "row")
        else:                                                # to the next input channel's first row
            lines += constants.add("x", 4 * (g.h - (t.rows - 1) * g.dh) * g.w, "channel")
        for o in range(t.ocb):
            for k0 in range(0, g.kw, free):
                count = min(free, g.kw - k0)
                if cursor + count > FIRST_SUM:
                    cursor = seg
                lines.append(f"vldmia %[w{o}]!, {_regs(cursor, count)}")
                for kw in range(k0, k0 + count):
                    for j in range(t.nc):
                        if t.lo <= j + kw * g.dw < t.hi:
                            lines.append(f"vfma.f32 s{FIRST_SUM + t.width * o + j}, s{j + kw * g.dw}, "
                                         f"s{cursor + kw - k0}")
                cursor += count
    for o in range(t.ocb):                                   # past the kernel rows the tile leaves out
        lines += constants.add(f"w{o}", 4 * (g.kh - t.rows) * g.kw, "skip")
    return lines


def _pointwise_channels(g: ConvGeometry, t: Tile, constants: _Constants) -> list[str]:
    """POINTWISE_CHANNELS input channels of a 1 x 1 convolution: channel u's segment in
    s<WIDTH u>..., each output channel's weights of them (consecutive) with one VLDMIA into the
    registers after the segments, then the VFMAs."""
    lines = []
    for u in range(POINTWISE_CHANNELS):
        lines.append(f"vldmia %[x], {_regs(t.width * u + t.lo, t.hi - t.lo)}")
        lines += constants.add("x", 4 * g.h * g.w, "channel")
    weights = t.width * POINTWISE_CHANNELS
    for o in range(t.ocb):
        first = weights + POINTWISE_CHANNELS * o
        lines.append(f"vldmia %[w{o}]!, {_regs(first, POINTWISE_CHANNELS)}")
        lines += [f"vfma.f32 s{FIRST_SUM + t.width * o + j}, s{t.width * u + j}, s{first + u}"
                  for u in range(POINTWISE_CHANNELS) for j in range(t.lo, t.hi)]
    return lines


def _store(g: ConvGeometry, t: Tile, bias: bool) -> list[str]:
    """After the loop, in registers the loop no longer needs (x and w0 take the pointers to y and
    b from their memory operands: templates/mcu/conv.c.j2 says why): the bias (b[oc..oc + OCB), into s0..) added to
    the sums, each channel's NC sums stored with a VSTMIA and the pointer moved on to the next
    channel's row (by the loop's counter, zero now, where no immediate encodes the step)."""
    lines = []
    if bias:
        lines += ["ldr %[w0], %[b]", f"vldmia %[w0], {_regs(0, t.ocb)}"]
        lines += [f"vadd.f32 s{FIRST_SUM + t.width * o + j}, s{FIRST_SUM + t.width * o + j}, s{o}"
                  for o in range(t.ocb) for j in range(t.nc)]
    lines.append("ldr %[x], %[y]")
    step = 4 * g.oh * g.ow
    line = add("%[x]", step)
    if line is None and t.ocb > 1:
        lines.append(f"movw %[n], #{step & 0xFFFF}")
        if step >> 16:
            lines.append(f"movt %[n], #{step >> 16}")
        line = "add %[x], %[x], %[n]"
    for o in range(t.ocb):
        lines.append(f"vstmia %[x], {_regs(FIRST_SUM + t.width * o, t.nc)}")
        if o < t.ocb - 1:
            lines.append(line)
    return lines


def row_runs(g: ConvGeometry) -> list[tuple[int, int, int, int]]:
    """The output rows as runs of one set of existing input rows: (first output row, rows, first
    kernel row kh_lo whose input row exists, count R of them; 0, 0: only padding)."""
    runs: list[tuple[int, int, int, int]] = []
    for oy in range(g.oh):
        kept = [kh for kh in range(g.kh) if 0 <= oy * g.sh - g.pt + kh * g.dh < g.h]
        key = (kept[0], len(kept)) if kept else (0, 0)
        if runs and runs[-1][2:] == key:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, *key)
        else:
            runs.append((oy, 1, *key))
    return runs


def column_runs(g: ConvGeometry, width: int) -> list[tuple[tuple[int, int, int], int, int]]:
    """The tiles of `width` columns across an output row as runs of one kind: ((columns NC,
    segment indices [lo, hi) inside the input row), first column, tiles in the run). Segment
    index i is input column ow0 - pl + i."""
    runs: list[tuple[tuple[int, int, int], int, int]] = []
    for ow0 in range(0, g.ow, width):
        nc = min(width, g.ow - ow0)
        cols = (nc, max(0, g.pl - ow0), min(segment(g, nc), g.w + g.pl - ow0))
        if runs and runs[-1][0] == cols:
            runs[-1] = (cols, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((cols, ow0, 1))
    return runs


def conv_context(req: KernelRequest, g: ConvGeometry) -> dict:
    """The template's context: the geometry; for each channel block size, the row runs and each
    run's tile calls across the row; the distinct tiles (a function each) with their asm."""
    bias = len(req.own_inputs) > 2
    tiles: dict[Tile, int] = {}
    plans = {}
    for _, _, ocb in blocks_of(g.og, TILE_CHANNELS):
        plan, width = [], tile_width(g, ocb)
        for oy0, rows, kh_lo, r in row_runs(g):
            calls = []
            for (nc, lo, hi), ow0, count in column_runs(g, width):
                tile = Tile(ocb, width, nc, lo, hi, r)
                tile = Tile(ocb, width, nc, 0, 0, 0) if tile.empty else tile
                calls.append(dict(tile=tiles.setdefault(tile, len(tiles)), empty=tile.empty, ow0=ow0, count=count,
                                  width=width, x=lo - g.pl))
            plan.append(dict(oy0=oy0, rows=rows, kh_lo=kh_lo, reads=not all(c["empty"] for c in calls), calls=calls))
        plans[ocb] = plan
    functions = [dict(t=t, **({} if t.empty else tile_asm(g, t, bias))) for t in tiles]
    stride, dil, pad = (list(static_attr(req, a)) for a in ("stride", "dilation", "padding"))
    doc = (f"{req.op}: {req.inputs[0]} * {req.inputs[1]}" + (" + bias" if bias else "")
           + f", stride {stride}, padding {pad}, dilation {dil}, groups {static_attr(req, 'groups')} -> {req.output}")
    return dict(doc=doc, n=g.n, c=g.c, h=g.h, w=g.w, o=g.o, cg=g.cg, og=g.og, kh=g.kh, kw=g.kw, oh=g.oh, ow=g.ow,
                sh=g.sh, dh=g.dh, pt=g.pt, groups=g.c // g.cg, bias=bias, blocks=blocks_of(g.og, TILE_CHANNELS),
                plans=plans, functions=functions, reads=not all(t.empty for t in tiles))
