"""The NEON wing: AArch64 Advanced SIMD kernels, the hot f32 ops as intrinsics, everything else
from the portable C wing.

`NeonTarget` (openinfer/targets/base.py's interface) says which fusions these kernels absorb and
picks the renderer of the descriptor's kernel family (openinfer/targets/isa.py rows with wing
"arm"). `NeonRenderer` overrides `CRenderer.kernel()` only, as the x86 wing's renderer does: an op
with an emitter here whose request it covers gets a kernel rendered from templates/arm/; any other
request falls back to the portable C family. `V82Renderer` (Armv8.2-A with the dot product) differs
in the dequantizing GEMV, which multiplies the weights (8-bit, or 4-bit unpacked to int8) with SDOT.

The emitters reuse the x86 wing's decisions where they are ISA-neutral (the element-wise view and
work units, the matmul problem and the GEMM blocking, the pool thresholds); the templates are
NEON's own. Covered (f32): element-wise ops and fused chains (same shape, bias and per-row
broadcasts, in place, vector exp / tanh / erf), matmul (packed GEMM with an 8 x 12 register-blocked
microkernel using FMLA by lane, the vecmat and matvec GEMVs, which also take f16 / bf16 operands
with an f32 accumulator and no epilogue (widened as loaded: f16 by FCVTL, baseline AArch64, bf16 by
a 16-bit shift; the f32 sums rounded once as stored, by oi_numeric.h's helpers; the GEMM stays f32,
as the x86 wing's); transposed operands read as stored:
the GEMM's packs read A^T / B^T, B^T four rows at a time transposed in registers, a few rows times
B^T are the matvec over B's stored rows, A^T times a column the vecmat of the column, a vecmat's
rows of A^T read with A's row stride) with element-wise epilogues, dequant_matmul of f32 x with i8
/ u8 / i4 / u4 weights (up to 4 rows of x: a decoder's GEMV; 4-bit weights unpacked to int8 in
registers, so both the FMLA and the SDOT paths take them as i8's, and any N: a row of odd N starts
mid-byte and is read a nibble on), sum/mean/max/min over contiguous axes, softmax over the last
axis, layer_norm and rms_norm, and conv1d / conv2d (3 x 3 at stride 1 with 8 channels or more by
Winograd's F(4 x 4, 3 x 3), openinfer/targets/arm/winograd.py; the others direct,
openinfer/targets/arm/conv.py: tiles in registers over a padded copy, column strides 1-4) with
epilogues of the sums, max / avg pooling
(column stride 1 or 2), and lrn (a plane's positions a vector at a time, the power as exp(beta log
d) with a vector log). Integer-only int8 (TFLite's): qconv2d (groups 1 and depthwise with
multiplier 1) and qlinear, SDOT on Armv8.2-A and SMULL / SADALP on Armv8.0-A, and qadd / qsub
(16 elements in lanes), bit-exact with the portable kernels (openinfer/targets/arm/quantized.py).

Dynamic sizes (openinfer/dims.py), as the x86 wing's (x86/renderer.py describes the design): the
emitters decide paths, tiling and the pool's split at the bounds (`capacity`) and the templates
write every extent, stride and offset from a dim as its run-time C expression over `sz_<NAME>`
(carried to the pool's workers); a decision that cannot be taken that way raises DynamicDimError
and the request takes the portable kernel. Run-time extents are taken by the element-wise kernels
and chains, softmax / layer_norm / rms_norm and the reductions (any extent), the GEMM (M, N and K),
the vecmat (M up to _SKINNY, a unit kernel per row count; N, K) and the matvec (rows, K; x @ W^T's
rows of x, up to _SKINNY; transposed operands as the plain ones, A^T's row stride a run-time one),
the dequantizing GEMVs (rows of x up to _DQ_ROWS, an f32-path function per row count; K and N
static), epilogues over run-time rows (their rows' length static), and pooling (a run-time batch
and plane; at column stride 2 a static width), and lrn (any extent: a run-time plane ends in a
partial vector of a run-time count). Convolutions stay static (conv.py): a run-time extent takes
the portable kernel.
"""

from __future__ import annotations

import math

from ...dims import Dim, DynamicDimError, capacity
from ...errors import SynthesisError
from ...synth.program import KernelRequest
from ..base import EmitterTable
from ..c.kernels import KernelSource, KernelText, prototype
from ..c.kernels.common import par_rows
from ..c.kernels.nn import lrn_context, pool_context
from ..c.renderer import CRenderer, CTarget, TileVec
from ..elementwise import OPS
from ..env import render
from ..x86.elementwise import VectorStep, attr_value
from ..x86.renderer import (
    _PAR_ELEMS,
    _PAR_ELEMS_MATH,
    _PAR_MACS,
    _PAR_STREAM_BYTES,
    MatmulProblem,
    Vec,
    chain_consts,
    common_dtype,
    gemm_blocking,
    matmul_problem,
    pack_prototype,
    round_up,
    row_units,
    rows_view,
    used_kinds,
    vector_chain,
)
from . import quantized, winograd
from .conv import conv_geometry, conv_kernel, packed_elems, pools_own_result
from .elementwise import neon_step

#: the templates' vector: four f32 lanes, 32 registers (`Vec.regs` counts x86's)
NEON = Vec("neon", 128, "float32x4_t", "int32x4_t", "", "")
#: Up to this many rows of A, matmul streams B once (vecmat) instead of packing it for the GEMM.
_SKINNY = 4
#: Columns of B one vecmat block keeps in registers for all of K (4 vectors x 4 rows of A = 16 sums).
_VECMAT_NB = 16
#: Rows of A one matvec block dots with x.
_MATVEC_RB = 4

_EMITTERS = EmitterTable()
emitter = _EMITTERS.emitter


class NeonRenderer(CRenderer):
    """Armv8.0-A: 128-bit Advanced SIMD, 32 vector registers, fused multiply-add."""

    vec = NEON
    #: GEMM microkernel: MR rows of C by NV vectors. 8 x 12 keeps 24 of the 32 registers
    #: accumulating, 3 hold B and 2 the 8 values of A one k step multiplies by lane (FMLA by
    #: element): 5 loads per 24 FMLAs, no broadcasts.
    gemm_mr, gemm_nv = 8, 3
    #: whether the dequantizing GEMV multiplies 8-bit weights with SDOT (Armv8.2-A dot product)
    sdot = False
    #: the portable tiled sdpa's tiles in NEON (templates/c/ops/sdpa_vector_tile.j2): 4 query
    #: rows x 4 vectors of keys / of V's columns, 16 of the 32 registers summing, 4 holding the
    #: loaded row and 1 the broadcast value (GCC vectorises the portable 4 x 4 tile too, but
    #: through its scalar tail loops and stack sums: instructions below)
    sdpa_tile = (4, 4)
    tile_vec = TileVec("float32x4_t", zero="vdupq_n_f32(0.0f)", load="vld1q_f32({p})", store="vst1q_f32({p}, {v})",
                       dup="vdupq_n_f32({x})", fma="vfmaq_f32({acc}, {a}, {b})", add="vaddq_f32({a}, {b})",
                       fma_lane="vfmaq_laneq_f32({acc}, {b}, {a}, {lane})")

    def kernel(self, req: KernelRequest, name: str) -> KernelSource:
        emit = _EMITTERS.get(req.op)
        try:
            body = emit(self, req, name) if emit is not None else None
        except DynamicDimError:
            # a decision a dynamic size leaves open (the emitters take theirs at the bounds, as the
            # x86 wing's): the portable kernel, whose loops take any extent
            body = None
        if body is None:
            if req.packed or req.epilogue or req.pool:
                what = "packed inputs" if req.packed else "an epilogue" if req.epilogue else "a pool"
                raise SynthesisError(f"internal: {name} takes {what} but has no NEON kernel")
            return super().kernel(req, name)
        scratch = body.scratch if isinstance(body, KernelText) else 0
        return KernelSource(name, prototype(req, name), body, tuple(pack_prototype(req, name, i) for i in req.packed),
                            scratch=scratch)

    def render(self, template: str, req: KernelRequest, name: str, sections: tuple[str, ...], **ctx) -> str:
        return render(f"arm/{template}", v=self.vec, sdot=self.sdot, sections=sections, name=name,
                      proto=prototype(req, name), **ctx)


class V82Renderer(NeonRenderer):
    """Armv8.2-A with the dot product (SDOT / UDOT) and f16 arithmetic."""

    sdot = True


class NeonTarget(CTarget):
    """The NEON kernel families (openinfer/targets/isa.py rows with wing "arm")."""

    @property
    def renderer_class(self) -> type[NeonRenderer]:
        return RENDERERS[self.device.isa]

    def takes_epilogue(self, req: KernelRequest) -> bool:
        """Which kernels apply an element-wise chain to their result as they store it
        (openinfer/synth/fusion.py): the f32 matmuls this wing renders, its dequantizing GEMVs
        and its convolutions (chains of the sums alone, applied to a tile in registers).
        The GEMVs store chain(piece) from a scratch piece (the chain may read the output's old
        value); the GEMM applies the chain to its finished rows in place, so it takes chains that
        read no operand aliasing the output."""
        if req.mode != "normal" or _epilogue(req) is None:
            return False
        if req.op == "dequant_matmul":
            return _dequant_problem(req) is not None
        if req.op in ("conv1d", "conv2d"):
            return len(req.epilogue.inputs) == 1 and conv_geometry(req) is not None
        if req.op != "matmul":
            return False
        mm = _matmul(self.renderer_class, self.device, req)
        return mm is not None and (mm.gemv or not req.epilogue.aliased)


    def pools_own_result(self, req: KernelRequest) -> bool:
        """Which convolutions pool their own result (openinfer/targets/arm/conv.py
        `pools_own_result`): the 2-D ones this wing renders, followed by a pool whose windows tile
        their output."""
        return req.mode == "normal" and conv_geometry(req) is not None and pools_own_result(req)

    def packed_inputs(self, req: KernelRequest) -> dict[int, int]:
        """openinfer/synth/prepack.py: a constant weight of a convolution arrives in its blocks
        of output channels (openinfer/targets/arm/conv.py), packed once by create() instead of
        on every call."""
        g = conv_geometry(req) if req.mode == "normal" else None
        if g is None:
            return {}
        return {1: winograd.packed_elems(g) if winograd.winograd_covers(req, g) else packed_elems(g)}


#: The renderer of each kernel family of this wing
RENDERERS: dict[str, type[NeonRenderer]] = {"neon": NeonRenderer, "v82": V82Renderer}


# ---------------------------------------------------------------------------------------- element-wise

def _chain(req: KernelRequest) -> list[VectorStep] | None:
    """The NEON steps of an element-wise request (x86/renderer.py `vector_chain`)."""
    return vector_chain(req, neon_step)


@emitter(*OPS, "fused")
def _elementwise(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """An element-wise op or fused chain whose every step has a NEON form."""
    out = req.output
    if common_dtype(req) != "f32" or out.numel == 0:
        return None
    view = rows_view(out.shape, [t.shape for t in req.inputs])
    steps = _chain(req)
    if view is None or steps is None:
        return None
    rows, inner, kinds = view
    math_ops = any(s.math for s in steps)
    return r.render("elementwise.c.j2", req, name, ("core", "math") if math_ops else ("core",),
                    inputs=used_kinds(steps, kinds), inner=inner, steps=steps, consts=chain_consts(steps),
                    sizes=req.sizes if isinstance(inner, Dim) else (),     # what the workers read: a run-time row
                    **row_units(rows, inner, r.vec.lanes, _PAR_ELEMS_MATH if math_ops else _PAR_ELEMS))


def _epilogue(req: KernelRequest) -> dict | None:
    """The template description of a kernel's epilogue (templates/arm/epilogue.c.j2), None if it
    has none or one this wing cannot render (x86/renderer.py `_epilogue` describes the fields).
    Its rows' length is static: a chain over run-time rows of a static length (a run-time row
    count of the product's) is one, a chain over rows of a run-time length stays a kernel of its
    own."""
    epi = req.epilogue
    if epi is None or common_dtype(epi) != "f32" or epi.runtime_attrs:
        return None
    view = rows_view(epi.output.shape, [t.shape for t in epi.inputs])
    steps = _chain(epi)
    if view is None or steps is None or isinstance(view[1], Dim):
        return None
    _, inner, kinds = view
    params = [f"in{i}" for i in req.operand_indices("epilogue")]
    return {"inner": inner, "inputs": used_kinds(steps, kinds), "params": params, "steps": steps,
            "consts": chain_consts(steps), "math": any(s.math for s in steps),
            "init": f", .epi = {{{', '.join([*params, 'out'])}}}"}


def _sections(epi: dict | None, *sections: str) -> tuple[str, ...]:
    return sections + ("math",) if epi and epi["math"] else sections


# ---------------------------------------------------------------------------------------- matmul

def _matmul(r: type[NeonRenderer] | NeonRenderer, device, req: KernelRequest) -> MatmulProblem | None:
    """The request as the NEON matmul kernels see it: f32, or f16 / bf16 with an f32 accumulator
    on the GEMV paths (as the x86 wing's: the GEMM stays f32), operands maybe transposed (`ta` /
    `tb`, read as stored); None for any other. M, N and K may be run-time extents
    (`matmul_problem`). f16 widens with FCVTL, baseline AArch64 (no feature to ask for)."""
    mm = matmul_problem(r, device, req, widens_f16=True)
    if mm is None or (mm.dtype != "f32" and not (mm.gemv and req.epilogue is None)):
        return None     # (a half product's epilogue would be a half chain, which `_epilogue` refuses)
    return mm


@emitter("matmul")
def _matmul_kernel(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """The GEMVs (matvec: one column of B; vecmat: at most _SKINNY rows of A) and the packed GEMM,
    which reads transposed operands as stored in its packs. Dynamic sizes (openinfer/dims.py) are
    decided at their bounds, as the x86 wing's: the path, the blocks, the column chunks and the
    pool's split; a vecmat over run-time rows has a kernel per row count, the GEMM a microkernel
    per edge height and per vector count of a run-time last panel."""
    mm = _matmul(r, r.device, req)
    if mm is None:
        return None
    m, n, k, nbatch = mm.m, mm.n, mm.k, mm.nbatch
    epi = _epilogue(req)
    parallel = capacity(nbatch * m * n * k) >= _PAR_MACS
    sections = _sections(epi, "core") if mm.dtype == "f32" else ("core", mm.dtype)
    if mm.gemv:
        return _gemv(r, req, name, mm, epi, sections, parallel)
    mr, nv, lanes = r.gemm_mr, r.gemm_nv, r.vec.lanes
    nr = nv * lanes
    kc, nc = gemm_blocking(nr, r.device, m, n, k)
    cols = [(nv, 0)] if capacity(n) >= nr else []
    edge = None
    if isinstance(n, Dim):      # run-time columns: the last panel's vectors and partial one at run time
        edge = "run-time"
        cols += [(e, edge) for e in range(1, nv + 1)]
    elif n % nr:
        edge = (-(-(n % nr) // lanes), n % lanes)
        cols.append(edge)
    if isinstance(m, Dim):      # run-time rows: a microkernel for every edge height
        rows = [mr, *range(1, mr)]
    else:
        rows = ([mr] if m >= mr else []) + ([m % mr] if m % mr else [])
    text = r.render("gemm.c.j2", req, name, sections, mr=mr, nv=nv, nr=nr, kc=kc, nc=nc, nblocks=-(-n // nc),
                    batch=nbatch, microkernels=[(i, c, t) for i in rows for c, t in cols], row_kernels=rows,
                    full_nv=capacity(n) >= nr, edge=edge, parallel=parallel, ta=mm.ta, tb=mm.tb, m=m, n=n, k=k,
                    epi=epi, sizes=req.sizes, **mm.offsets)
    return KernelText(text, capacity(kc * nc) * 4)


def _gemv(r: NeonRenderer, req: KernelRequest, name: str, mm: MatmulProblem, epi: dict | None,
          sections: tuple[str, ...], parallel: bool) -> str:
    """matvec (one column of B: blocks of rows of A dotted with it) or vecmat (at most _SKINNY rows
    of A: column chunks of B, each block of its columns summed in registers over all of K).
    Transposed operands pick the form that reads the matrix along K, as the x86 wing's `_gemv`:
    A^T times a column is the vecmat of the column (as one row) and A as stored [k, m]; a few rows
    times B^T are dot products with B's stored rows (the matvec, each block of B's rows dotted
    with every row of A while it is in L1); a vecmat over rows of A^T reads them with A's row
    stride. Run-time rows of a vecmat: a unit kernel for each row count up to their bound.
    f16 / bf16 operands (`dtype`) widen to f32 as they are loaded and their sums round once as
    they are stored (oi_numeric.h's rounding, the reference's f32 matmul then store)."""
    m, n, k, nbatch, offsets, ta = mm.m, mm.n, mm.k, mm.nbatch, mm.offsets, mm.ta
    esize = 4 if mm.dtype == "f32" else 2       # bytes of an element streamed from memory
    # swap: the kernel's first operand (`a` in the template) is the matmul's b
    swap = (n == 1 and ta) or mm.tb
    if swap:
        offsets = {"a_batch": offsets["b_batch"], "b_batch": offsets["a_batch"]}
    if n == 1 and ta:
        # out[i] = sum_k a[k, i] b[k]: the vecmat of b (one row) and a as stored ([k, m])
        m, n, ta = 1, m, False
    common = {"m": m, "n": n, "k": k, "epi": epi, "sizes": req.sizes, "swap": swap, "dtype": mm.dtype, **offsets}
    if n == 1 or mm.tb:
        # the matrix (a, or b as stored [n, k]) has `mrows` rows along K, dotted with `vecs` vectors
        mrows, vecs = (m, 1) if n == 1 else (n, m)
        parallel = parallel or nbatch * capacity(mrows * k) * esize >= _PAR_STREAM_BYTES
        want = 2 * r.device.threads if parallel else 1
        rb = round_up(-(-capacity(mrows) // want), _MATVEC_RB)
        nunits = -(-mrows // rb)
        return r.render("gemv.c.j2", req, name, sections, kind="matvec", rb=rb, mrows=mrows, vecs=vecs,
                        nunits=nunits, units=nbatch * nunits, parallel=parallel and capacity(nbatch * nunits) > 1,
                        **common)
    parallel = parallel or nbatch * capacity(k * n) * esize >= _PAR_STREAM_BYTES
    want = 2 * r.device.threads if parallel else 1
    cw = round_up(-(-capacity(n) // want), _VECMAT_NB)
    nunits = -(-n // cw)
    counts = range(1, capacity(m) + 1) if isinstance(m, Dim) else (m,)
    return r.render("gemv.c.j2", req, name, sections, kind="vecmat", cw=cw, nb=_VECMAT_NB, nunits=nunits,
                    counts=counts, ta=ta, units=nbatch * nunits, parallel=parallel and capacity(nbatch * nunits) > 1,
                    **common)


# ---------------------------------------------------------------------------------------- conv

@emitter("conv1d", "conv2d")
def _conv(r: NeonRenderer, req: KernelRequest, name: str) -> KernelText | None:
    """f32 convolutions, with their epilogue: 3 x 3 at stride 1 by Winograd's algorithm
    (openinfer/targets/arm/winograd.py), the others by the direct kernel (conv.py)."""
    g = conv_geometry(req)
    epi = _epilogue(req)
    if g is None or (req.epilogue is not None and epi is None):
        return None
    if winograd.winograd_covers(req, g):
        return winograd.winograd_kernel(r, req, name, g, epi, _sections(epi, "core"))
    return conv_kernel(r, req, name, g, epi, _sections(epi, "core"))


@emitter("max_pool2d", "avg_pool2d")
def _pool(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 pooling at column stride 1 or 2 whose rows have at least a vector of outputs with the
    window inside (templates/arm/pool.c.j2; at a dynamic width's bound); the borders are the
    portable loop's. A run-time batch or plane: the inside rows and columns come at run time
    (openinfer/targets/c/kernels/nn.py `pool_context`), except at column stride 2, whose last
    vector is decided here: a run-time width there takes the portable kernel (a strided output
    of a run-time width has no DSL spelling yet)."""
    ctx = pool_context(req, name)
    if common_dtype(req) != "f32" or ctx["sw"] not in (1, 2) or (ctx["sw"] == 2 and isinstance(ctx["w"], Dim)):
        return None
    # stride 2: LD2 reads the float after a window's last; the vectors stop where it is in the row
    vec_hi = ctx["iw_hi"] if ctx["sw"] == 1 else min(ctx["iw_hi"], (ctx["w"] - 1 - ctx["kw"] + ctx["pl"]) // 2 + 1)
    if (ctx["inside_cols"] if ctx["sw"] == 1 else vec_hi - ctx["iw_lo"]) < r.vec.lanes:
        return None
    return render("arm/pool.c.j2", v=r.vec, sections=("core",), interior_from="ov", vec_hi=vec_hi, **ctx)


@emitter("lrn")
def _lrn(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 with its attributes constants and beta not 0 (the power is exp(beta * log(d)): 0 *
    log(0) would be NaN), as the x86 wing's (templates/arm/lrn.c.j2); the others are the portable
    kernel's. Any extent may be a run-time one: a run-time plane ends in a partial vector of a
    run-time count."""
    if common_dtype(req) != "f32" or req.runtime_attrs or req.attr("beta") == 0:
        return None
    ctx = lrn_context(req, name)
    hw = ctx["hw"]
    return render("arm/lrn.c.j2", v=r.vec, sections=("core", "math", "log"),
                  tail=None if isinstance(hw, Dim) else hw % r.vec.lanes, **ctx)


# ---------------------------------------------------------------------------------------- reductions, rows

@emitter("sum_axis", "mean_axis", "max_axis", "min_axis")
def _reduce(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 over a contiguous run of axes (templates/arm/reduce.c.j2)."""
    shape = req.inputs[0].shape
    axes = tuple(req.attr("axes"))
    if common_dtype(req) != "f32" or req.inputs[0].numel == 0 or list(axes) != list(range(axes[0], axes[-1] + 1)):
        return None
    outer = math.prod(shape[:axes[0]])
    red = math.prod(shape[axes[0]:axes[-1] + 1])
    inner = math.prod(shape[axes[-1] + 1:])
    # the workers read the sizes where a row's extents are run-time ones
    sizes = req.sizes if isinstance(red, Dim) or isinstance(inner, Dim) else ()
    return r.render("reduce.c.j2", req, name, ("core",), op=req.op.removesuffix("_axis"), outer=outer, red=red,
                    inner=inner, sizes=sizes, **par_rows(outer, red * inner, _PAR_ELEMS))


@emitter("softmax", "layer_norm", "rms_norm")
def _rowwise(r: NeonRenderer, req: KernelRequest, name: str) -> str | None:
    """softmax over the last axis, layer_norm and rms_norm, f32 (templates/arm/rowwise.c.j2)."""
    shape = req.inputs[0].shape
    axis = req.attr("axis")
    if common_dtype(req) != "f32" or req.inputs[0].numel == 0 or (req.op == "softmax" and axis != len(shape) - 1):
        return None
    n, rows = math.prod(shape[axis:]), math.prod(shape[:axis])
    eps = attr_value(req, "eps") if req.op != "softmax" else None
    return r.render("rowwise.c.j2", req, name, ("core", "math") if req.op == "softmax" else ("core",), op=req.op,
                    n=n, rows=rows, eps=eps, has_gamma=len(req.inputs) > 1, has_beta=len(req.inputs) > 2,
                    sizes=req.sizes if isinstance(n, Dim) else (),      # what the workers read: a run-time row length
                    **par_rows(rows, n, _PAR_ELEMS_MATH if req.op == "softmax" else _PAR_ELEMS))


# ---------------------------------------------------------------------------------------- dequant_matmul

#: Rows of x up to which dequant_matmul takes the GEMV (a decoder's few tokens); more take the portable kernel.
_DQ_ROWS = 4
#: Most K of the SDOT path: the three int8 digits of a row of x live on the stack (3 * K bytes).
_DQ_SDOT_K = 16384


def _dequant_problem(req: KernelRequest) -> tuple[int, int, int] | None:
    """(M, K, N) of a request the dequantizing GEMV covers: f32 x of at most _DQ_ROWS rows (M
    static, or run-time up to that bound) with i8 / u8 / i4 / u4 weights into f32, K and N
    static; None for any other."""
    x, w = req.own_inputs[:2]
    k, n = w.shape
    m = x.shape[0] if len(x.shape) == 2 else 1
    covered = (x.dtype.name == "f32" and req.output.dtype.name == "f32" and not req.acc
               and w.dtype.name in ("i8", "u8", "i4", "u4") and 0 not in (m, n, k) and capacity(m) <= _DQ_ROWS
               and not isinstance(k, Dim) and not isinstance(n, Dim))
    return (m, k, n) if covered else None


@emitter("dequant_matmul")
def _dequant_matmul(r: NeonRenderer, req: KernelRequest, name: str) -> KernelText | None:
    """The requests `_dequant_problem` covers: column chunks of w over the pool, each computing
    every row of x (chunks of whole 16-column blocks: a 4-bit block starts on a byte when N is
    even); on Armv8.2-A (`sdot`) with x as 24-bit integers in three int8 digits multiplied by SDOT
    (templates/arm/dequant.c.j2)."""
    problem = _dequant_problem(req)
    if problem is None:
        return None
    m, k, n = problem
    x, w, scale = req.own_inputs[:3]
    zp = req.own_inputs[3] if len(req.own_inputs) > 3 else None
    epi = _epilogue(req)
    # (run-time rows: decided at their bound; the f32 path has a function per row count)
    parallel = capacity(m) * n * k >= _PAR_MACS or k * n * w.dtype.bits // 8 >= _PAR_STREAM_BYTES
    want = 2 * r.device.threads if parallel else 1
    cw = round_up(-(-n // want), 16)
    nunits = -(-n // cw)
    doc = (f"dequant_matmul: f32{list(x.shape)} @ dequantize({w.dtype.name}{list(w.shape)}, "
           f"{'per-channel' if scale.numel > 1 else 'per-tensor'} scale{', zero point' if zp else ''}) "
           f"-> f32{list(req.output.shape)}")
    dot = r.sdot and k <= _DQ_SDOT_K
    text = r.render("dequant.c.j2", req, name, _sections(epi, "core"), doc=doc, m=m, n=n, k=k, epi=epi,
                    wt=w.dtype.name, zp=zp is not None, zp_channel=zp is not None and zp.numel > 1,
                    scale_channel=scale.numel > 1, cw=cw, nunits=nunits, parallel=parallel and nunits > 1,
                    dot=dot, sizes=req.sizes, counts=range(1, capacity(m) + 1) if isinstance(m, Dim) else (m,))
    # the SDOT path splits x into digits once a call, in the caller's workspace: per row its unit,
    # sum and three digits a column of K rounded up to 16 (templates/arm/dequant.c.j2 `_digits`)
    return KernelText(text, capacity(m) * round_up(16 + 3 * round_up(k, 16), 16) if dot else 0)


# ---------------------------------------------------------------------------------------- integer-only int8

emitter("qconv2d")(quantized.qconv_kernel)
emitter("qlinear")(quantized.qlinear_kernel)
emitter("qadd", "qsub")(quantized.qadd_kernel)
