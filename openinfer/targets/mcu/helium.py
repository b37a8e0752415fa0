"""The Cortex-M wing's Helium kernels: Armv8.1-M (Cortex-M55) with the M-profile Vector Extension
(MVE) and its floating point, everything else from the portable C wing.

MVE has eight 128-bit Q registers (four f32 lanes; they overlay the FPU's d0-d15), a
multiply-add of a vector by a scalar held in a general-purpose register (VFMA.F32 Qda, Qn, Rm:
no broadcast needed), loads with post-increment, and lane predication (VCTP.32 makes a predicate
of the first n lanes; a predicated load reads no memory in the inactive lanes, so a row's last
partial vector is loaded and stored in place, with no copy). `HeliumRenderer` overrides
`CRenderer.kernel()` only, as the NEON wing's renderer does: an op with an emitter here whose
request it covers gets a kernel rendered from templates/mcu/; any other request takes the
portable kernel.

Covered (f32): matmul x[M, K] @ W[K, N] of any M, static sizes, the GEMV (M <= 4) and the GEMM
alike (templates/mcu/helium_matmul.c.j2: register-blocked R x V-vector tiles summed over all of K,
its inner loop in inline assembly, the reasons there), and x @ W^T (helium_matmul_bt.c.j2: dot
products of rows of x with W's stored rows); element-wise ops and fused chains whose
every step has an MVE form (helium_elementwise.py says which; same shape, bias and per-row
broadcasts, in place, run-time extents; templates/mcu/helium_elementwise.c.j2); conv1d / conv2d
at column stride 1 with no scratch (helium_conv.py).
Covered (int8, integer-only): qconv2d with groups 1 or depthwise multiplier 1 and qlinear, with
VMLADAVA.S8 dot products and widening multiplies; qadd, qsub and qmul 4 lanes a vector; all
bit-exact with the portable kernels (helium_quant.py).
"""

from __future__ import annotations

from ...dims import Dim
from ...synth.program import KernelRequest
from ..base import EmitterTable
from ..c.kernels import KernelSource, prototype
from ..c.renderer import CRenderer
from ..elementwise import OPS
from ..env import render
from ..geometry import blocks_of
from ..x86.elementwise import VectorStep
from ..x86.renderer import chain_consts, common_dtype, rows_view, used_kinds, vector_chain
from .helium_conv import conv_context, conv_geometry
from .helium_elementwise import mve_step
from .helium_quant import qbinary_kernel, qconv_kernel, qlinear_kernel
from .mve import LANES, TILE_VECTORS

_EMITTERS = EmitterTable()
emitter = _EMITTERS.emitter


class HeliumRenderer(CRenderer):
    """Armv8.1-M with MVE (integer and floating point): eight Q registers, predicated tails."""

    def kernel(self, req: KernelRequest, name: str) -> KernelSource:
        emit = _EMITTERS.get(req.op)
        body = emit(self, req, name) if emit is not None else None
        if body is None:
            return super().kernel(req, name)
        return KernelSource(name, prototype(req, name), body, scratch=getattr(body, "scratch", 0))


# ---------------------------------------------------------------------------------------- matmul

#: Rows of x one tile takes: 3 rows x 2 vectors keep 6 Q registers summing and 2 loading W.
TILE_ROWS = 3
#: k steps per asm statement: two LDRD pairs per row of x, so the loop's branch is shared by 4.
K_STEPS = 4


def _tiles(rows: int, n: int) -> list[tuple[int, int]]:
    """The (rows, vectors) tiles of a block of `rows` rows across N: full tiles, then one of the
    remaining whole vectors."""
    v = TILE_VECTORS[rows]
    whole = n // LANES
    return ([(rows, v)] if whole >= v else []) + ([(rows, whole % v)] if whole % v else [])


#: x @ W^T: rows of W a tile of R rows of x dots (R x J partial-sum vectors, R + 1 loaded ones).
DOT_TILE_COLS = {1: 6, 2: 2}


@emitter("matmul")
def _matmul(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 x[M, K] @ W[K, N] or x @ W^T (W stored [N, K]), static sizes, no batch, x not
    transposed (any M: a GEMV's few rows and a GEMM's many take the same tiles); None for any
    other request (the portable kernel)."""
    if len(req.inputs) != 2 or req.mode != "normal" or req.aliased or req.epilogue is not None:
        return None
    (x, w), out = req.inputs, req.output
    if any(t.dtype.name != "f32" for t in (x, w, out)) or len(x.shape) != 2 or len(w.shape) != 2:
        return None
    if req.attr("transpose_a") or any(isinstance(d, Dim) for d in x.shape + w.shape):
        return None
    (m, k), n = x.shape, w.shape[0 if req.attr("transpose_b") else 1]
    if 0 in (m, k, n):
        return None
    if req.attr("transpose_b"):
        blocks = blocks_of(m, 2)
        tiles = sorted({(rows, cols) for _, _, rows in blocks
                        for cols in (DOT_TILE_COLS[rows], n % DOT_TILE_COLS[rows]) if cols and cols <= n})
        return render("mcu/helium_matmul_bt.c.j2", name=name, proto=prototype(req, name), m=m, k=k, n=n,
                      blocks=blocks, tiles=tiles, tile_cols=DOT_TILE_COLS)
    blocks = blocks_of(m, TILE_ROWS)
    tiles = sorted({t for _, _, rows in blocks for t in _tiles(rows, n)})
    return render("mcu/helium_matmul.c.j2", name=name, proto=prototype(req, name), m=m, k=k, n=n,
                  blocks=blocks, tiles=tiles, tile_vectors=TILE_VECTORS, lanes=LANES, k_steps=K_STEPS,
                  tail=n % LANES, tail_rows=sorted({rows for _, _, rows in blocks}) if n % LANES else [])


# ---------------------------------------------------------------------------------------- element-wise

def _chain(req: KernelRequest) -> list[VectorStep] | None:
    """The MVE steps of an element-wise request (x86/renderer.py `vector_chain`)."""
    return vector_chain(req, mve_step)


@emitter(*OPS, "fused")
def _elementwise(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """An element-wise op or fused chain whose every step has an MVE form, over the output as
    [rows, inner] (openinfer/targets/x86/renderer.py `rows_view`: each input the output's shape,
    a row repeated, a value per row or one value)."""
    out = req.output
    if common_dtype(req) != "f32" or out.numel == 0:
        return None
    view = rows_view(out.shape, [t.shape for t in req.inputs])
    steps = _chain(req)
    if view is None or steps is None:
        return None
    rows, inner, kinds = view
    return render("mcu/helium_elementwise.c.j2", name=name, proto=prototype(req, name),
                  sections=("core", "math") if any(s.math for s in steps) else ("core",),
                  inputs=used_kinds(steps, kinds), rows=rows, inner=inner, steps=steps, consts=chain_consts(steps))


# ---------------------------------------------------------------------------------------- conv

@emitter("conv1d", "conv2d")
def _conv(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 convolutions at column stride 1 (openinfer/targets/mcu/helium_conv.py)."""
    g = conv_geometry(req)
    if g is None:
        return None
    return render("mcu/helium_conv.c.j2", name=name, proto=prototype(req, name), **conv_context(req, g))


# ---------------------------------------------------------------------------------------- int8

@emitter("qconv2d")
def _qconv(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """Integer-only int8 convolutions, groups 1 or depthwise multiplier 1 (helium_quant.py,
    templates/mcu/helium_qconv.c.j2); None for any other request."""
    return qconv_kernel(req, name, prototype(req, name))


@emitter("qlinear")
def _qlinear(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """Integer-only int8 fully connected layers (helium_quant.py, templates/mcu/helium_qlinear.c.j2);
    None for dynamic shapes."""
    return qlinear_kernel(req, name, prototype(req, name))


@emitter("qadd", "qsub", "qmul")
def _qbinary(r: HeliumRenderer, req: KernelRequest, name: str) -> str | None:
    """Integer-only int8 ADD, SUB and MUL, 4 elements a vector (helium_quant.py,
    templates/mcu/helium_qbinary.c.j2); None for broadcasts other than a single element."""
    return qbinary_kernel(req, name, prototype(req, name))
