"""The NEON Winograd convolution F(4 x 4, 3 x 3) (templates/arm/winograd.c.j2): f32 conv2d with 3 x 3
taps, stride 1, no dilation, one group, enough channels; the direct kernel (conv.py) takes the rest.

Why: a direct 3 x 3 convolution multiplies 9 taps per output; Winograd's minimal filtering computes a
4 x 4 block of outputs from a 6 x 6 block of input with 36 multiplies per (input, output) channel pair
instead of 144, so the multiply-adds of the channel sum (a GEMM per transformed position) fall 4x and
the transforms cost a few additions per element on each side (Lavin & Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016). Under QEMU's count (tools/bench/qemu_insns.py) the 3 x 3
convolutions of docs/performance.md take 2.3-2.5x fewer instructions than the direct kernel's and
3.1-3.7x fewer than the portable C's (figures there).

The algorithm, per 4 x 4 tile of the output and channel pair:
    Y = A^T [ (G g G^T) (.) (B^T d B) ] A
with g the 3 x 3 taps, d the tile's 6 x 6 input, (.) the element-wise product over the 36 positions
xi. The matrices come from Toom-Cook interpolation at the points 0, 1, -1, 1/2, -2 and infinity
(`_POINTS`), built here exactly in rationals. The points set the rounding error: under NumPy in f32,
against an f64 direct convolution, 3 x 3 x 32 -> 32 sums of unit inputs (the tests' scale) err by
at most 0.22 of the comparison's tolerance (openinfer/compare.py: 2e-5 + 1e-4 |r|) at these points,
0.58 at the usual 0, +-1, +-2 and 0.73 at 0, +-1, +-1/2. G g G^T is computed once, in double, by
create() (or on every call for weights that are inputs).

Non-finite values: the transforms mix a tile's inputs, so an infinity would turn outputs whose own
window is finite into NaN. The kernel therefore checks its input for infinities and NaN (one fused
multiply-add per 4 elements, x * 0 being NaN exactly for those) and the weights when they are
packed, and computes the whole call by the direct sums when it finds one: the reference's NaN and
infinities, at the direct loop's speed.
"""

from __future__ import annotations

from fractions import Fraction

from ...synth.program import KernelRequest
from ..c.kernels import KernelText
from ..c.kernels.common import static_attr
from ..geometry import ConvGeometry
from ..x86.renderer import round_up
from .conv import _PAR_MACS

#: F(M x M, 3 x 3): an M x M output tile from an (M + 2) x (M + 2) input tile
M, R = 4, 3
N = M + R - 1
#: the interpolation points (and infinity); see the module's docstring for why these
_POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-2))
#: output channels a GEMM block keeps in registers (two vectors of weights per input channel)
OCB = 8
#: tile vectors a GEMM microkernel sums (8 x 3: 24 accumulators, 3 + 2 loads per 24 FMLAs)
NV = 3
#: the most a block of tile rows' transformed input and products (V and M) take: within L2
_BLOCK_BYTES = 256 << 10


def _poly(roots: list[Fraction]) -> list[Fraction]:
    """Coefficients (lowest first) of prod (x - r)."""
    c = [Fraction(1)]
    for q in roots:
        c = [(c[i - 1] if i else 0) - q * (c[i] if i < len(c) else 0) for i in range(len(c) + 1)]
    return c


def _matrices() -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
    """A^T (M x N), G (N x R), B^T (N x N) of the Toom-Cook construction at `_POINTS` and infinity.
    A^T's column of a point p holds its powers; G's row is the Lagrange weight 1 / prod (p - q) times
    p's powers; B^T's row is the product of (x - q) over the other points (the last row: over all)."""
    pts = list(_POINTS)
    at = [[p ** i for p in pts] + [Fraction(int(i == M - 1))] for i in range(M)]
    g = []
    for p in pts:
        den = Fraction(1)
        for q in pts:
            if q != p:
                den *= p - q
        g.append([p ** i / den for i in range(R)])
    g.append([Fraction(int(i == R - 1)) for i in range(R)])
    bt = [(_poly([q for q in pts if q != p]) + [Fraction(0)] * N)[:N] for p in pts]
    bt.append(_poly(pts)[:N])
    return at, g, bt


AT, G, BT = _matrices()


#: The transforms as straight-line programs, each statement `name = sum of coef * operand` over the
#: inputs (x0.., m0..) and earlier statements: shared partial sums take the input transform from
#: 23 vector operations (B^T row by row) to 16 and the output transform from 14 to 12. The input
#: program computes S B^T for S = diag(`_BT_SCALE`) (rows 1, 2 and 4 doubled, which makes their
#: partial sums shareable); G's rows are divided by the same factors, so U (.) V is unchanged.
#: `_self_check` proves both programs against the matrices.
_BT_SCALE = (1, 2, 2, 1, 2, 1)
_BT_PROGRAM = (
    ("a", ((1, "x1"), (-1, "x3"))),
    ("b", ((1, "x4"), (-1, "x2"))),
    ("o0", ((1, "x0"), (1, "b"), (-1, "x2"), (Fraction(-3, 2), "a"))),
    ("s", ((2, "b"), (3, "x3"))),
    ("d", ((2, "a"), (-3, "x2"))),
    ("o1", ((1, "s"), (-1, "d"))),
    ("o2", ((1, "s"), (1, "d"))),
    ("o3", ((1, "b"), (-2, "a"))),
    ("o4", ((1, "a"), (2, "b"))),
    ("o5", ((1, "x5"), (1, "a"), (-1, "x3"), (Fraction(3, 2), "b"))),
)
_AT_PROGRAM = (
    ("p", ((1, "x1"), (1, "x2"))),
    ("q", ((1, "x1"), (-1, "x2"))),
    ("o0", ((1, "x0"), (1, "p"), (1, "x3"), (1, "x4"))),
    ("o1", ((1, "q"), (Fraction(1, 2), "x3"), (-2, "x4"))),
    ("o2", ((1, "p"), (Fraction(1, 4), "x3"), (4, "x4"))),
    ("o3", ((1, "q"), (1, "x5"), (Fraction(1, 8), "x3"), (-8, "x4"))),
)


def _run(program, n_in: int) -> list[list[Fraction]]:
    """The matrix a program computes: each output's coefficients over the inputs."""
    env = {f"x{i}": [Fraction(int(i == j)) for j in range(n_in)] for i in range(n_in)}
    for name, terms in program:
        env[name] = [sum(Fraction(c) * env[x][j] for c, x in terms) for j in range(n_in)]
    return [env[f"o{i}"] for i in range(sum(name.startswith("o") for name, _ in program))]


def _self_check() -> None:
    """At import, exactly: the 1-D identity y = A^T [(G g) (.) (B^T d)], and each transform program
    against its matrix; a wrong one would be a wrong convolution on every target."""
    d = [Fraction(i * i + 3, i + 2) for i in range(N)]
    taps = [Fraction(5, 7), Fraction(-2, 3), Fraction(11, 13)]
    u = [sum(G[i][j] * taps[j] for j in range(R)) for i in range(N)]
    v = [sum(BT[i][j] * d[j] for j in range(N)) for i in range(N)]
    y = [sum(AT[i][j] * u[j] * v[j] for j in range(N)) for i in range(M)]
    assert y == [sum(d[i + j] * taps[j] for j in range(R)) for i in range(M)], "Winograd matrices"
    scaled_bt = [[s * c for c in row] for s, row in zip(_BT_SCALE, BT, strict=True)]
    assert _run(_BT_PROGRAM, N) == scaled_bt, "input transform"
    assert _run(_AT_PROGRAM, N) == AT, "output transform"


_self_check()
#: G with its rows divided by the input transform's scales (see `_BT_PROGRAM`)
G_SCALED = [[c / s for c in row] for s, row in zip(_BT_SCALE, G, strict=True)]


def _lit(c: Fraction) -> str:
    """A C float literal, exact (the transforms' coefficients are dyadic)."""
    assert c.denominator & (c.denominator - 1) == 0, c
    return repr(float(c)) + "f"


def _sum(terms) -> str:
    """C vector expression of sum c * x over `terms` (nonzero c), a coefficient 1 first (else -1) so
    the sum starts without a multiply."""
    terms = sorted(((Fraction(c), x) for c, x in terms), key=lambda t: (t[0] != 1, abs(t[0]) != 1))
    c0, x0 = terms[0]
    e = x0 if c0 == 1 else f"vnegq_f32({x0})" if c0 == -1 else f"vmulq_n_f32({x0}, {_lit(c0)})"
    for c, x in terms[1:]:
        e = (f"vaddq_f32({e}, {x})" if c == 1 else f"vsubq_f32({e}, {x})" if c == -1
             else f"vfmaq_n_f32({e}, {x}, {_lit(c)})")
    return e


def transform(program, ins: list[str], outs: list[str], tmp: str) -> list[str]:
    """The C statements of a transform program (`_BT_PROGRAM`, `_AT_PROGRAM`): `const oiv` per
    statement, inputs x<i> named `ins`, outputs o<i> named `outs`, temporaries prefixed `tmp`."""
    names = {f"x{i}": x for i, x in enumerate(ins)} | {f"o{i}": o for i, o in enumerate(outs)}
    lines = []
    for name, terms in program:
        names.setdefault(name, tmp + name)
        decl = "" if "[" in names[name] else "const oiv "      # (an element of an array: assigned)
        lines.append(f"{decl}{names[name]} = {_sum((c, names[x]) for c, x in terms)};")
    return lines


def output_transform(st: int, bias_at: tuple[int, int] | None, out: str) -> tuple[list[str], list[list[str]]]:
    """C statements of Y = A^T M A for one tile vector at `mp` (its positions `st` floats apart):
    (columns) down each column b of M, m<a>_<b>, through `_AT_PROGRAM` to t<i>_<b>, stored in place
    at position (i, b); (rows, a list per output row i) along row i of t into `out`[j] (the ST4's
    registers, or the epilogue's inputs). Through memory, as the input transform: the 16 sums of a
    tile vector kept in registers instead (each column's t added into them at once) took more
    instructions under GCC 12, whose allocator spills around ST4's four consecutive registers. The
    bias is added to M at `bias_at`, a position whose A^T column is all ones (the point 1), which
    adds it to every output of the tile, once."""
    cols = []
    for b in range(N):
        for a in range(N):
            load = f"vld1q_f32(mp + {(a * N + b) * st})"
            cols.append(f"const oiv m{a}_{b} = {f'vaddq_f32({load}, bv)' if (a, b) == bias_at else load};")
        cols += transform(_AT_PROGRAM, [f"m{a}_{b}" for a in range(N)], [f"t{i}_{b}" for i in range(M)], f"r{b}_")
        cols += [f"vst1q_f32(mp + {(i * N + b) * st}, t{i}_{b});" for i in range(M)]
        cols.append("oi_neon_order();      /* the next column's loads stay after this one's stores */")
    rows = [[f"const oiv u{i}_{b} = vld1q_f32(mp + {(i * N + b) * st});" for b in range(N)]
            + transform(_AT_PROGRAM, [f"u{i}_{b}" for b in range(N)], [f"{out}[{j}]" for j in range(M)], f"s{i}_")
            for i in range(M)]
    return cols, rows


def winograd_covers(req: KernelRequest, g: ConvGeometry) -> bool:
    """Whether a convolution the NEON kernels take (conv.py `conv_geometry`) is Winograd's: conv2d
    with 3 x 3 taps at stride 1, no dilation, one group, no pool folded in, at least 8 input and
    output channels (below that the transforms cost more than the multiplies they save) and an
    output of at least a tile each way."""
    return (req.op == "conv2d" and req.pool is None and (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw) == (3, 3, 1, 1, 1, 1)
            and g.cg == g.c and g.c >= 8 and g.og >= 8 and g.oh >= M and g.ow >= M)


def packed_elems(g: ConvGeometry) -> int:
    """Elements of the packed weights: G g G^T as [xi][block of OCB output channels][c][OCB], the
    weights as given (the non-finite path's), and a flag: 1 when a weight is not finite."""
    return N * N * -(-g.o // OCB) * g.c * OCB + g.o * g.c * R * R + 1


def winograd_kernel(r, req: KernelRequest, name: str, g: ConvGeometry, epi: dict | None,
                    sections: tuple[str, ...]) -> KernelText:
    """The kernel of a convolution `winograd_covers`, with the epilogue `epi` (renderer.py `_epilogue`)."""
    th, tw = -(-g.oh // M), -(-g.ow // M)
    tg = -(-tw // 4)                        # groups of 4 tiles (a vector) per row of tiles
    hp, rs = M * th + 2, M * 4 * tg + 4     # the padded image: every tile group's loads inside it
    plane = hp * rs
    nob = -(-g.o // OCB)
    o8 = nob * OCB
    # the image goes by blocks of tile rows whose V ([c][xi][T]) and M ([o8][xi][T]) fit _BLOCK_BYTES
    rows = max(1, min(th, _BLOCK_BYTES // (N * N * (g.c + o8) * tw * 4)))
    nblk = -(-th // rows)
    rows = -(-th // nblk)
    # a channel's position holds the block's tiles in a row (T = rows x tw), `st` floats: the GEMM's
    # last vector and the last group's lanes past its row stay inside
    st = round_up(rows * tw, 4) + 4
    pad_bytes = round_up((g.n * g.c * plane + 4) * 4, 64)     # (+ the last row's zeros past its end)
    prepacked = 1 in req.packed
    vm_at = round_up(pad_bytes + (0 if prepacked else packed_elems(g) * 4), 64)
    bias = len(req.own_inputs) > 2
    doc = (f"conv2d: {req.inputs[0]} * {req.inputs[1]}" + (" + bias" if bias else "")
           + f", padding {list(static_attr(req, 'padding'))} -> {req.own_output}, by Winograd F(4 x 4, 3 x 3)"
           + (f", then {' -> '.join(s.op for s in epi['steps'])}" if epi else ""))
    # the input program runs along each row of 6 loaded vectors, then down each column
    d_, e_ = [f"d{i}" for i in range(N)], [f"e{i}" for i in range(N)]
    text = r.render("winograd.c.j2", req, name, sections, doc=doc, n=g.n, c=g.c, h=g.h, w=g.w, o=g.o, oh=g.oh,
                    ow=g.ow, pt=g.pt, pl=g.pl, th=th, tw=tw, tg=tg, hp=hp, rs=rs, plane=plane, st=st, nob=nob,
                    ocb=OCB, nv=NV, rows=rows, nblk=nblk, bias=bias, epi=epi, prepacked=prepacked, w_at=pad_bytes,
                    vm_at=vm_at, parallel=g.n * g.o * g.c * g.oh * g.ow * R * R >= _PAR_MACS,
                    g_rows=[[_lit_d(c) for c in row] for row in G_SCALED],
                    input_row=transform(_BT_PROGRAM, d_, e_, "p_"),
                    output=output_transform(st, (1, 1) if bias else None, "ye" if epi else "q.val"), nn=N, mm=M)
    return KernelText(text, vm_at + N * N * (g.c + o8) * st * 4)


def _lit_d(c: Fraction) -> str:
    """A C double expression of a rational (G's entries: 1/6, 1/24, ...), divided in double."""
    return f"({c.numerator}.0 / {c.denominator}.0)" if c.denominator != 1 else f"{c.numerator}.0"
