"""The x86 wing: AVX2 and AVX-512 kernels, the hot f32 ops as intrinsics, everything else from
the portable C wing.

`X86Target` (openinfer/targets/base.py's interface) says which fusions these kernels absorb and
picks the renderer of the descriptor's kernel family. `Avx2Renderer` overrides
`CRenderer.kernel()` only: an op with an emitter here whose request it can handle (f32 operands,
shapes it covers) gets a vector kernel rendered from templates/x86/; any other request falls
back to the portable C family. `Avx512Renderer` differs in its `Vec` (vector width, intrinsic
prefix, mask style) and in the GEMM register block; the templates are shared and take the `Vec`
as `v`.

Covered (f32): matmul (packed GEMM with a register-blocked microkernel, GEMV and matrix-vector
paths, batch dims and 1-D operands as NumPy, transposed operands read as stored; the GEMV paths
also take f16 / bf16 operands with an f32 accumulator), element-wise arithmetic and activations,
alone or as a fused chain (same shape, bias and per-row broadcasts, in place), sum/mean/max/min
over contiguous axes, softmax over the last axis, layer_norm and rms_norm, lrn, and
dequant_matmul of f32 x with i8 / u8 / i4 / u4 weights (few rows of x: the weight-only quantized
GEMV). Large kernels split their work over the kernel context's pool.

Dynamic sizes (openinfer/dims.py): a request's extents may be run-time ones (`int64_t sz_<NAME>`
parameters, carried to the pool's workers). The emitters decide paths, tiling and the pool's split
at the bounds (`capacity`), and every loop bound, stride and offset the templates write from a dim
is its run-time C expression; a decision that cannot be taken that way raises DynamicDimError and
the request takes the portable kernel. Every emitter here takes run-time extents: the GEMM and the
GEMV paths run-time M, N and K, the dequantizing GEMVs run-time rows of x, the element-wise, row
and reduction kernels and lrn any run-time extents, pooling a run-time batch and plane. The one
dynamic request refused for being dynamic is a run-time count of products that share no B
(`matmul_problem`); the others a static build would refuse too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...dims import Dim, DynamicDimError, capacity
from ...errors import SynthesisError
from ...ops.shapes import matmul_operand_shapes
from ...synth.program import KernelRequest
from ..base import EmitterTable
from ..c.kernels import KernelSource, KernelText, prototype
from ..c.kernels.common import ctype, par_rows, static_attr
from ..c.kernels.nn import conv_tiled, emit_conv, lrn_context, pool_context
from ..c.renderer import CRenderer, CTarget, TileVec
from ..elementwise import OPS
from ..env import render
from .elementwise import VectorConst, VectorStep, attr_value, vector_step


@dataclass(frozen=True)
class Vec:
    """What the templates need to know about a vector ISA."""

    isa: str
    bits: int
    t: str        # f32 vector type
    ti: str       # integer vector type
    pre: str      # intrinsic prefix
    si: str       # integer-vector suffix of casts and logic ops

    @property
    def lanes(self) -> int:
        return self.bits // 32

    @property
    def macro(self) -> str:
        return self.isa.upper()

    @property
    def regs(self) -> int:
        """Vector registers (AVX-512 doubles them)."""
        return 32 if self.bits == 512 else 16


AVX2 = Vec("avx2", 256, "__m256", "__m256i", "_mm256", "si256")
AVX512 = Vec("avx512", 512, "__m512", "__m512i", "_mm512", "si512")

#: Elements below which an element-wise / row kernel runs on the calling thread: waking a
#: worker costs tens of microseconds, more than streaming this much through L2.
_PAR_ELEMS = 1 << 18
_PAR_ELEMS_MATH = 1 << 15      # exp/tanh/erf cost ~1 ns per element
#: Multiply-adds below which matmul stays on the calling thread ...
_PAR_MACS = 1 << 21
#: ... unless it streams at least this many bytes of a matrix (GEMV, dequantizing GEMV): reading
#: 256 KiB from memory takes ~12 us, several times what a parallel_for costs while the workers
#: spin between the kernels of a step (a decoder's 768x768 projection is 0.6 M multiply-adds
#: but 2.4 MB of weights: at 2 threads it streams ~1.3x as fast).
_PAR_STREAM_BYTES = 1 << 18
#: Shortest piece of a row of B a GEMV work unit streams: a narrow B (a 768-column projection)
#: cut into column chunks for the pool streamed 1.15x slower than whole rows, even at 1 thread
#: (the hardware prefetchers follow long runs), so such a B is split along K instead. 2 KiB
#: pieces were the threshold until the vecmat read several streams at once; then the decoder's
#: 2304- and 8192-column products, cut into 2.3 and 8 KiB pieces, were its slowest per byte, and
#: K slices took its step from 14.1-14.9 to 12.3-12.9 ms at 1 thread (Zen 3, AVX2).
_MIN_ROW_PIECE = 16384
#: Most f32 sums of the K slices after the first (they live on the caller's stack): 32 KiB.
_SPLIT_K_SUMS = 8192
#: Up to this many rows of A, matmul streams B once (vecmat) instead of packing it for the GEMM.
_SKINNY = 4
#: Rows of B x rows of A one vecmat pass handles (the A values stay in registers).
_VECMAT_KU = 8

_EMITTERS = EmitterTable()
emitter = _EMITTERS.emitter


def pack_prototype(req: KernelRequest, name: str, i: int) -> str:
    """The function create() runs to put input `i` of kernel `name` in the kernel's layout."""
    c = ctype(req.inputs[i].dtype)
    return f"void {name}_pack{i}(const {c} *restrict src, {c} *restrict packed)"


class Avx2Renderer(CRenderer):
    """x86-64-v3: 256-bit vectors with FMA."""

    vec = AVX2
    #: Conv tiles written with intrinsics: (template, output channels, vectors of columns).
    #: Measured (us; GCC's vectorised portable tile first, then the intrinsics ones): AVX2 on a
    #: Zen 3 VM, the CNN example's convs at 1 thread: GCC's 6 x 1 32 / 73, 4 x 2 26 / 62 (the
    #: second at ~98% of the FMA peak), 6 x 2 27 / 70, 5 x 2 29 / 67, 3 x 3 32 / 70, 8 x 1 32 /
    #: 78; on an Intel Xeon, its whole step: 78.6, 4 x 2 52.3, 6 x 2 49.6.
    conv_tile = ("x86/conv_tile.j2", 4, 2)
    #: sdpa tiles written with intrinsics: (query rows, vectors of keys / of V's
    #: columns). Zen 3 VM, 1 thread, the encoder example's attention (16 heads, 128 queries and
    #: keys, head dim 64, a bool mask), best of 200: GCC's vectorised portable 4 x 4 tile 3.19 ms
    #: (21 GFLOP/s; it kept some of its sums on the stack), intrinsics 4 x 2 2.46, 6 x 2 2.47,
    #: 5 x 2 2.54, 3 x 3 2.56, 4 x 3 2.59, 2 x 4 2.80, 8 x 1 2.98.
    sdpa_tile = (4, 2)

    @property
    def tile_vec(self) -> TileVec:
        pre = self.vec.pre
        return TileVec(self.vec.t, zero=f"{pre}_setzero_ps()", load=f"{pre}_loadu_ps({{p}})",
                       store=f"{pre}_storeu_ps({{p}}, {{v}})", dup=f"{pre}_set1_ps({{x}})",
                       fma=f"{pre}_fmadd_ps({{a}}, {{b}}, {{acc}})", add=f"{pre}_add_ps({{a}}, {{b}})")
    #: GEMM microkernel: MR rows of C by NV vectors, all accumulators in registers. 6x16 keeps
    #: 12 of the 16 ymm registers accumulating (two pipes x FMA latency 4 needs >= 8 chains) with
    #: 2 for B and 1 for the broadcast A value.
    gemm_mr, gemm_nv = 6, 2

    def kernel(self, req: KernelRequest, name: str) -> KernelSource:
        emit = _EMITTERS.get(req.op)
        try:
            body = emit(self, req, name) if emit is not None else None
        except DynamicDimError:
            # a decision of the vector kernel that a dynamic size leaves open (the emitters take
            # theirs at the bounds; one that could not): the portable kernel, whose loops take any
            # extent (an epilogue or packed input given to such a request fails below)
            body = None
        if body is None:
            if req.packed or req.epilogue or req.pool:
                what = "packed inputs" if req.packed else "an epilogue" if req.epilogue else "a pool"
                raise SynthesisError(f"internal: {name} takes {what} but has no {self.vec.isa} kernel")
            return super().kernel(req, name)
        return KernelSource(name, prototype(req, name), body, tuple(pack_prototype(req, name, i) for i in req.packed),
                            scratch=getattr(body, "scratch", 0))

    def render(self, template: str, req: KernelRequest, name: str, sections: tuple[str, ...], **ctx) -> str:
        return render(f"x86/{template}", v=self.vec, sections=sections, name=name, proto=prototype(req, name),
                      **ctx)


class Avx512Renderer(Avx2Renderer):
    """x86-64-v4: 512-bit vectors, 32 registers and mask registers for partial vectors."""

    vec = AVX512
    #: On an Intel Xeon, the CNN example's step: GCC's portable 16 x 1 34.0 us, intrinsics
    #: 16 x 1 26.2, 24 x 1 26.8, 12 x 2 26.9, 8 x 2 28.0.
    conv_tile = ("x86/conv_tile.j2", 16, 1)
    #: the portable 8 x 2 (16 of its 32 registers, tuned on Zen 4)
    sdpa_tile = None
    #: 8x32: 16 of the 32 zmm registers accumulate, 2 hold B, 1 the broadcast A value. On Zen 4
    #: (512-bit FMAs in two halves, broadcasts from memory nearly free) 8x32, 8x48, 6x64 and 4x64
    #: run within 2% of each other at 1024^3 (109-111 GFLOP/s of a 117 peak) and 14x32 ~5% below;
    #: 8 rows also divide the usual row counts (128-token encoder: 14 left a 2-row edge panel, and
    #: its [128, 1024] @ [1024, 256] ran at 101 GFLOP/s against 110 with 8 rows).
    gemm_mr, gemm_nv = 8, 2


class X86Target(CTarget):
    """The AVX2 and AVX-512 kernel families (openinfer/targets/isa.py rows with wing "x86")."""

    @property
    def renderer_class(self) -> type[Avx2Renderer]:
        return RENDERERS[self.device.isa]

    def takes_epilogue(self, req: KernelRequest) -> bool:
        """Which matmuls and convolutions take an element-wise epilogue (openinfer/synth/fusion.py):
        the f32 matmuls and the dequantizing GEMVs, the chain applied to each piece of the result
        while it is still in L1. The GEMV paths compute a piece in a scratch buffer and store
        chain(piece) (so the chain may read the output's old value, a residual added in place);
        the GEMM applies the chain to its finished tiles in place, so it takes chains that read no
        operand aliasing the output. The f32 tiled convolutions take chains of the sums alone (a
        ReLU), applied to each tile in registers: in a CNN's step on two threads the ReLU's own
        pass cost more than on one (1.0-1.6 us each: it read back a conv output the other thread
        had written)."""
        if req.mode != "normal" or _epilogue(self.renderer_class.vec, req) is None:
            return False
        if req.op in ("conv1d", "conv2d"):
            return len(req.epilogue.inputs) == 1 and conv_tiled(req)
        if req.op == "dequant_matmul":
            return _dequant_problem(req) is not None
        if req.op != "matmul":
            return False
        mm = matmul_problem(self.renderer_class, self.device, req)
        if mm is None or mm.dtype != "f32":
            return False
        return mm.gemv or (mm.gemm and not req.epilogue.aliased)

    def pools_own_result(self, req: KernelRequest) -> bool:
        """Which convolutions pool their own result (openinfer/synth/fusion.py `fold_pools`): the
        tiled 2-D ones (f32 / f64) followed by a max or average pool whose windows tile the
        output (stride = kernel, no padding), so that a work unit's convolution rows make whole
        pooled rows. The unit pools them from its workspace with the pool's own kernel
        (templates/c/ops/conv_tiled.c.j2 `pool`)."""
        pool = req.pool
        if req.op != "conv2d" or req.mode != "normal" or pool is None or not conv_tiled(req):
            return False
        return (tuple(static_attr(pool, "stride")) == tuple(static_attr(pool, "kernel"))
                and not any(static_attr(pool, "padding")))

    def packed_inputs(self, req: KernelRequest) -> dict[int, int]:
        """openinfer/synth/prepack.py: a constant B of the GEMM path arrives in its NR-column
        panels (the pack the GEMM otherwise does on every call: 5-8% of a [128, 1024] @ [1024,
        256] product, more when B comes from L3)."""
        try:
            elems = _packed_b_elems(self.renderer_class, self.device, req)
        except DynamicDimError:
            return {}
        return {} if elems is None else {1: elems}


#: The renderer of each kernel family of this wing
RENDERERS: dict[str, type[Avx2Renderer]] = {"avx2": Avx2Renderer, "avx512": Avx512Renderer}


def common_dtype(req: KernelRequest) -> str | None:
    """The one dtype of every operand and the output, if they share one and any accumulator is
    f32 (which for f32 operands is their own semantics); else None."""
    names = {t.dtype.name for t in (*req.inputs, req.output)}
    if len(names) != 1 or (req.acc and any(a.name != "f32" for a in req.acc)):
        return None
    return names.pop()


# ---------------------------------------------------------------------------------------- element-wise

def rows_view(out_shape: tuple[int, ...], shapes: list[tuple[int, ...]]) -> tuple[int, int, list[str]] | None:
    """The output as [rows, inner] with each input `full`, `row`, `col` or `scalar` in that view,
    splitting at the first dim where that works; None if no split does."""
    nd = len(out_shape)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]

    def preference(k: int) -> int:
        """Splits whose inner extent is static first, so that a dynamic size only counts rows
        (openinfer/dims.py) and an epilogue's rows stay static; but a run-time row before rows
        of one element. (Static shapes: the first split that works, as the key never decreases.)"""
        inner = out_shape[k:]
        if any(isinstance(d, Dim) for d in inner):
            return 1
        return 0 if math.prod(inner) > 1 else 2

    splits = sorted(range(nd + 1), key=preference)
    for split in splits:
        outer, inner = out_shape[:split], out_shape[split:]
        kinds = []
        for s in padded:
            o_full, i_full = s[:split] == outer, s[split:] == inner
            o_one, i_one = all(d == 1 for d in s[:split]), all(d == 1 for d in s[split:])
            if o_full and i_full:
                kinds.append("full")
            elif o_one and i_full:
                kinds.append("row")
            elif o_full and i_one:
                kinds.append("col")
            elif o_one and i_one:
                kinds.append("scalar")
            else:
                break
        else:
            return math.prod(outer), math.prod(inner), kinds
    return None


#: Elements of a row an element-wise work unit takes at most (longer rows are cut into chunks)
ROW_CHUNK = 16384


def row_units(rows: int, inner: int, lanes: int, par_elems: int) -> dict:
    """Work units of a [rows, inner] kernel: row chunks of at most ROW_CHUNK elements; how many
    units one pool claim takes so each is worth waking a thread for; whether to use the pool.
    (Dynamic sizes: the chunks and the pool decided at their bounds, the counts of rows and chunks
    at run time.)"""
    cap = capacity(inner)
    chunk = cap if cap <= ROW_CHUNK else ROW_CHUNK // lanes * lanes
    nchunk = 1 if cap <= ROW_CHUNK else -(-inner // chunk)
    units = rows * nchunk
    grain = max(1, -(-par_elems // (8 * chunk)))
    return {"chunk": chunk, "nchunk": nchunk, "units": units, "grain": grain,
            "parallel": capacity(rows) * cap >= par_elems and capacity(units) > grain}


def vector_chain(req: KernelRequest, step_of) -> list[VectorStep] | None:
    """The vector steps of an element-wise request, one op or a fused chain whose arguments are
    x<i> (input i) or s<j> (step j's value), each made by the wing's `step_of(step request, j,
    args)` (x86/elementwise.py's `vector_step`, NEON's, MVE's); None if a step has no vector form
    or is not f32 (or accumulates). Every SIMD wing's element-wise kernels and epilogues take it."""
    if req.op == "fused":
        chain = [(step, [f"x{i}" if src == "in" else f"s{i}" for src, i in args])
                 for step, args in zip(req.chain, req.chain_args, strict=True)]
    else:
        chain = [(req, [f"x{i}" for i in range(len(req.inputs))])]
    steps = []
    for j, (step_req, args) in enumerate(chain):
        step = step_of(step_req, j, args) if common_dtype(step_req) == "f32" and not step_req.acc else None
        if step is None:
            return None
        steps.append(step)
    return steps


def _chain(vec: Vec, req: KernelRequest) -> list[VectorStep] | None:
    """`vector_chain` in `vec`'s intrinsics."""
    return vector_chain(req, lambda step_req, j, args: vector_step(vec.pre, step_req, j, args))


def chain_consts(steps: list[VectorStep]) -> list[VectorConst]:
    return [c for s in steps for c in s.consts]


def used_kinds(steps: list[VectorStep], kinds: list[str]) -> list[str]:
    """kinds with the inputs no step reads marked `unused`."""
    used = {int(a[1:]) for s in steps for a in s.args if a[0] == "x"}
    return [kind if i in used else "unused" for i, kind in enumerate(kinds)]


@emitter(*OPS, "fused")
def _elementwise(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    """An element-wise op or fused chain whose every step has a vector form; any other takes the
    portable kernel."""
    out = req.output
    if common_dtype(req) != "f32" or out.numel == 0:
        return None
    view = rows_view(out.shape, [t.shape for t in req.inputs])
    steps = _chain(r.vec, req)
    if view is None or steps is None:
        return None
    rows, inner, kinds = view
    math_ops = any(s.math for s in steps)
    return r.render("elementwise.c.j2", req, name, ("core", "math") if math_ops else ("core",),
                    inputs=used_kinds(steps, kinds), inner=inner, steps=steps, consts=chain_consts(steps),
                    sizes=req.sizes if isinstance(inner, Dim) else (),     # what the workers read: a run-time row
                    **row_units(rows, inner, r.vec.lanes, _PAR_ELEMS_MATH if math_ops else _PAR_ELEMS))


def _epilogue(vec: Vec, req: KernelRequest) -> dict | None:
    """The template description of a matmul's epilogue (templates/x86/epilogue.c.j2), None if
    the request has none; the `takes_epilogue` predicate only accepts chains that have one."""
    epi = req.epilogue
    if epi is None or common_dtype(epi) != "f32" or epi.runtime_attrs:
        return None
    view = rows_view(epi.output.shape, [t.shape for t in epi.inputs])
    steps = _chain(vec, epi)
    if view is None or steps is None:
        return None
    _, inner, kinds = view
    if isinstance(inner, Dim):
        return None         # the epilogue's row pieces are static (a dynamic one stays a kernel of its own)
    # the epilogue's input 0 is the product; its inputs after it are the kernel's "epilogue" operands
    params = [f"in{i}" for i in req.operand_indices("epilogue")]
    return {"inner": inner, "inputs": used_kinds(steps, kinds), "params": params, "steps": steps,
            "consts": chain_consts(steps), "math": any(s.math for s in steps),
            "init": f", .epi = {{{', '.join([*params, 'out'])}}}"}      # the kernel args' designated initializer


def _sections(epi: dict | None, *sections: str) -> tuple[str, ...]:
    """The prelude sections of a matmul kernel: `sections`, and the math functions its epilogue uses."""
    return sections + ("math",) if epi and epi["math"] else sections


# ---------------------------------------------------------------------------------------- matmul

def round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def _batch_offset(batch: tuple[int, ...], own: tuple[int, ...], mat_elems: int) -> str:
    """C expression: element offset of batch item `bt` (row-major over `batch`) in an operand
    whose batch dims are `own` (broadcast dims of size 1 stay at offset 0)."""
    full = (1,) * (len(batch) - len(own)) + tuple(own)
    terms, inner, stride = [], 1, mat_elems
    for d in reversed(range(len(batch))):
        if full[d] != 1:
            terms.append(f"(bt / {inner} % {batch[d]}) * {stride}")
        inner *= batch[d]
        stride *= full[d]
    return " + ".join(reversed(terms)) or "0"


#: K slice of the GEMM. Measured on Zen 4 (1024^3, both ISAs): KC = 128 with a B block filling
#: half of L2 beats the usual "A panel fills half of L1" KC (288 / 682) by 3-5%: the A panel is
#: repacked once per N block, so a wide block (NC = 1024 here) matters more than long K slices.
GEMM_KC = 128


def gemm_blocking(nr: int, device, m: int, n: int, k: int) -> tuple[int, int]:
    """(KC, NC) for NR-column panels: the packed B block (KC x NC) takes at most half of L2; both
    clamped to the problem (to a dynamic N or K's bound). The N blocks are of one width (N =
    1536 under a 1024 limit is two blocks of 768, not 1024 + 512, which on two threads gave
    one thread twice the other's columns)."""
    l2 = device.cache_bytes("l2", 1 << 20)
    limit = max(nr, l2 // 2 // (4 * GEMM_KC) // nr * nr)
    n_cap = capacity(n)
    blocks = -(-n_cap // limit)
    return min(GEMM_KC, capacity(k)), round_up(-(-n_cap // blocks), nr)


@dataclass(frozen=True)
class MatmulProblem:
    """A matmul request as the kernels see it: [m, k] @ [k, n] per batch item, A rows of items
    that share one B stacked into m. `ta` / `tb`: A is stored [k, m] / B is stored [n, k]
    (transpose_a / transpose_b), only where that differs in memory from the plain layout (a
    transposed single row of A or column of B is the same contiguous vector)."""

    m: int
    n: int
    k: int
    nbatch: int
    offsets: dict        # C expressions of the batch items' element offsets in A and B
    dtype: str
    ta: bool = False
    tb: bool = False

    @property
    def gemv(self) -> bool:
        """The GEMV paths (one column of B, or at most _SKINNY rows of A), which stream the matrix;
        with both operands transposed neither is contiguous along K and the GEMM packs them.
        Dynamic rows of A are decided at their bound (the vecmat then has a kernel for each row
        count up to it, the GEMM edges at run time)."""
        return (self.n == 1 or capacity(self.m) <= _SKINNY) and not (self.ta and self.tb)

    @property
    def gemm(self) -> bool:
        """The packed GEMM path (f32 with more than a few rows of A and columns of B)."""
        return not self.gemv and self.n != 1 and self.dtype == "f32"


def matmul_problem(r: type[Avx2Renderer] | Avx2Renderer, device, req: KernelRequest,
                   widens_f16: bool = False) -> MatmulProblem | None:
    """The request as the matmul kernels see it, None where none covers it: other dtypes, an
    empty product, a dynamic count of products that share no B (M, N and K may be dynamic).
    widens_f16: the caller's kernels convert f16 to f32 whatever the device's features (AArch64's
    baseline FCVTL); here F16C or AVX-512 does."""
    dtype = common_dtype(req)
    if dtype not in ("f32", "f16", "bf16"):
        return None
    f16 = widens_f16 or "f16c" in device.features or r.vec.bits == 512
    if dtype != "f32" and not (req.acc and (dtype == "bf16" or f16)):
        return None       # f16 / bf16 without an f32 accumulator rounds after every add: portable C
    a, b = req.own_inputs
    ta, tb = bool(req.attr("transpose_a")), bool(req.attr("transpose_b"))
    sa, sb = matmul_operand_shapes(a.shape, b.shape, ta, tb)
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    m, k, n = a2[-2], a2[-1], b2[-1]
    if 0 in (m, n, k) or req.output.numel == 0:
        return None
    batch = tuple(req.output.shape[:len(req.output.shape) - (len(a.shape) > 1) - (len(b.shape) > 1)])
    a_bat, b_bat = a2[:-2], b2[:-2]
    nbatch = math.prod(batch)
    pad_a = (1,) * (len(batch) - len(a_bat)) + tuple(a_bat)
    ta, tb = ta and (isinstance(m, Dim) or m > 1), tb and (isinstance(n, Dim) or n > 1)
    if (isinstance(nbatch, Dim) or nbatch > 1) and all(d == 1 for d in b_bat) and pad_a == batch and not ta:
        m, nbatch, batch, a_bat = m * nbatch, 1, (), ()     # one B for all items: stack the A rows
    if isinstance(nbatch, Dim):
        return None         # the work units are laid out for a static count of products
    offsets = {"a_batch": _batch_offset(batch, a_bat, m * k), "b_batch": _batch_offset(batch, b_bat, k * n)}
    return MatmulProblem(m, n, k, nbatch, offsets, dtype, ta, tb)


def _packed_b_elems(r: type[Avx2Renderer] | Avx2Renderer, device, req: KernelRequest) -> int | None:
    """Elements of B in the GEMM's packed layout when the request takes the GEMM path with one B
    for every batch item (a weight matrix), else None."""
    mm = matmul_problem(r, device, req) if req.op == "matmul" else None
    if mm is None or not mm.gemm or mm.nbatch != 1 or len(req.inputs[1].shape) != 2:
        return None
    if isinstance(mm.k, Dim) or isinstance(mm.n, Dim):
        return None         # (a constant's run-time first rows: packed by create(), which runs at no size)
    return mm.k * round_up(mm.n, r.gemm_nv * r.vec.lanes)


@emitter("matmul")
def _matmul(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    mm = matmul_problem(r, r.device, req)
    if mm is None:
        return None
    m, n, k, nbatch = mm.m, mm.n, mm.k, mm.nbatch
    parallel = capacity(nbatch * m * n * k) >= _PAR_MACS       # (dynamic sizes: decided at their bounds)
    if mm.gemv:
        matrix = req.inputs[0 if n == 1 else 1]                # read once, from memory
        streamed = nbatch * capacity(m if n == 1 else n) * capacity(k) * matrix.dtype.itemsize
        parallel = parallel or streamed >= _PAR_STREAM_BYTES
        return _gemv(r, req, name, mm, parallel)
    if not mm.gemm:
        return None
    mr, nv, lanes = r.gemm_mr, r.gemm_nv, r.vec.lanes
    nr = nv * lanes
    kc, nc = gemm_blocking(nr, r.device, m, n, k)
    cols = ([(nv, 0)] if capacity(n) >= nr else [])
    edge = None
    if isinstance(n, Dim):      # run-time columns: the last panel's vectors and partial one at run time
        edge = "run-time"
        cols += [(e, edge) for e in range(1, nv + 1)]
    elif n % nr:
        rest = n % nr
        edge = (-(-rest // lanes), rest % lanes)
        cols.append(edge)
    if isinstance(m, Dim):     # run-time rows: a microkernel for every edge height
        rows = [mr, *range(1, mr)]
    else:
        rows = ([mr] if m >= mr else []) + ([m % mr] if m % mr else [])
    epi = _epilogue(r.vec, req)
    packed_b = 1 in req.packed
    # a B that is not pre-packed is packed per K slice into the thread's workspace (oi_kctx_scratch)
    scratch = 0 if packed_b else capacity(kc) * capacity(nc) * 4
    text = r.render("gemm.c.j2", req, name, _sections(epi, "core"), m=m, n=n, k=k, mr=mr, nv=nv, nr=nr, kc=kc,
                    nc=nc, epi=epi,
                    nblocks=-(-n // nc), batch=nbatch, microkernels=[(i, c, t) for i in rows for c, t in cols],
                    row_kernels=rows, full_nv=capacity(n) >= nr, edge=edge, parallel=parallel, packed_b=packed_b,
                    ta=mm.ta, tb=mm.tb, sizes=req.sizes, **mm.offsets)
    return KernelText(text, scratch)


@emitter("conv1d", "conv2d")
def _conv(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    """A convolution with an epilogue (`takes_epilogue`) or a pool after it (`pools_own_result`): the
    portable tiled kernel applying the chain to its tiles before they are stored, and pooling its
    rows with this target's pooling kernel. Without either, None: the portable kernel
    (openinfer/targets/c/kernels/nn.py), which takes this target's intrinsics tile itself (and a
    request whose epilogue this cannot render fails in `kernel`, never drops its chain)."""
    epi = _epilogue(r.vec, req)
    if not conv_tiled(req) or (epi is None and req.epilogue is not None) or (epi is None and req.pool is None):
        return None
    return emit_conv(req, name, r, {**epi, "sections": _sections(epi, "core")} if epi else None)


def _k_slices(k: int, want: int, step: int, sums: int, threads: int) -> tuple[int, int]:
    """(slices, rows per slice) of a K split into about `want` slices of a multiple of `step` rows,
    fewer where the extra slices' `sums` f32 values each would pass _SPLIT_K_SUMS; then a multiple
    of the device's threads, so that each streams as many (3 slices over 2 threads left one
    thread streaming alone for a third of the MLP's [1, 1024] @ [1024, 4096])."""
    kr = round_up(-(-k // want), step)
    ksplit = min(-(-k // kr), 1 + _SPLIT_K_SUMS // sums)
    if ksplit > threads:
        ksplit -= ksplit % threads
    kr = round_up(-(-k // ksplit), step)
    return -(-k // kr), kr


def _resident_chains(vec: Vec, m: int, n: int, ku: int) -> int:
    """Accumulators per vector of C when a vecmat's whole C row block (m x n) fits in half the
    vector registers with at least two accumulators each, else 0. Such a narrow C (a classifier's
    2048 x 10 head) then stays in registers for all of K: with C in memory every pass of ku rows
    reloaded it, waiting on the previous pass's (masked) store, and the head took 4 us for 20 K
    multiply-adds. Rows of a pass alternate over the accumulators, so up to 8 FMAs are in flight."""
    vectors = m * -(-n // vec.lanes)
    chains = 2
    while chains * 2 <= ku and vectors * chains * 2 <= vec.regs // 2 and vectors * chains < 8:
        chains *= 2
    return chains if vectors * chains <= vec.regs // 2 else 0


def _gemv(r: Avx2Renderer, req: KernelRequest, name: str, mm: MatmulProblem, parallel: bool) -> str:
    """vecmat (few rows of A) or matvec (one column of B); work split into at least two units per
    device thread when the product is large enough to parallelise: row blocks of A (matvec),
    column chunks of B, or, where those chunks would cut B's rows into pieces shorter than
    _MIN_ROW_PIECE, slices of K whose sums are added after the pool has run them (f32, one batch).
    Transposed operands pick the form that reads the matrix along K: A^T times a column is the
    column (as a row) times A's stored [k, m] (vecmat, operands swapped); a few rows times B^T
    are dot products with B's stored rows (matvec, one pass per row of A over each block of B's
    rows, which stays in L1); A^T's rows in a vecmat are read with A's row stride.
    Dynamic sizes (openinfer/dims.py) are decided at their bounds: the path, the blocks, the
    column chunks and the pool's split; a vecmat over run-time rows has a kernel per row count;
    K is sliced only where K and N are static (a slice past a run-time K would have no rows)."""
    m, n, k, nbatch, offsets, dtype = mm.m, mm.n, mm.k, mm.nbatch, mm.offsets, mm.dtype
    lanes = r.vec.lanes
    epi = _epilogue(r.vec, req)
    want = -(-2 * r.device.threads // nbatch) if parallel else 1
    ksplit, kr = 1, k
    ta = mm.ta
    # swap: the kernel's first operand (`a` in the templates) is the matmul's b
    swap = (n == 1 and ta) or mm.tb
    if swap:
        offsets = {"a_batch": offsets["b_batch"], "b_batch": offsets["a_batch"]}
    if n == 1 and ta:
        # out[i] = sum_k a[k, i] b[k]: the vecmat of b (one row) and a as stored ([k, m])
        m, n, ta = 1, m, False
    if n == 1 or mm.tb:
        # the matrix (a, or b as stored [n, k]) has `mrows` rows along K, dotted with `vecs` vectors
        mrows, vecs = (m, 1) if n == 1 else (n, m)
        rows = round_up(-(-capacity(mrows) // want), 4)   # (run-time rows: blocks as at their bound)
        nunits = -(-mrows // rows)
        extra = {"kind": "matvec", "rows": rows, "mrows": mrows, "vecs": vecs}
    else:
        # one kernel for m rows of A, or for each row count up to a dynamic m's bound
        mb = capacity(m)
        ku = {mk: max(2, _VECMAT_KU // mk) for mk in (range(1, mb + 1) if isinstance(m, Dim) else (m,))}
        cw = max(lanes, 4096 // mb // lanes * lanes)       # C chunk of at most 16 KiB stays in L1
        split_cw = min(cw, round_up(-(-capacity(n) // want), lanes))
        # (K slices: for a static K and N, whose slices all have rows; slices of ku(1) rows: every
        # kernel's ku divides it)
        if want > 1 and split_cw * 4 < _MIN_ROW_PIECE and dtype == "f32" and nbatch == 1 \
                and not isinstance(k, Dim) and not isinstance(n, Dim):
            ksplit, kr = _k_slices(k, want, max(ku.values()), mb * n, r.device.threads)
        if ksplit == 1:
            cw, kr = split_cw, k
        cw = min(cw, round_up(capacity(n), lanes))
        nunits = -(-n // cw)
        # C's row stride: the output's, or a scratch chunk's (a half output's f32 sums; an epilogue's product)
        ldc = n if dtype == "f32" and (epi is None or ksplit > 1) else cw
        kernels = [(mk, kmk, _resident_chains(r.vec, mk, n, kmk) if nunits == 1 else 0) for mk, kmk in ku.items()]
        extra = {"kind": "vecmat", "cw": cw, "ldc": ldc, "kernels": kernels, "skinny": _SKINNY, "ta": ta,
                 "stream_prefetch": r.device.preferences.get("stream_prefetch", True)}
    units = nbatch * nunits * ksplit
    sections = _sections(epi, "core") if dtype == "f32" else ("core", dtype)
    return r.render("gemv.c.j2", req, name, sections, m=m, n=n, k=k, swap=swap,
                    nunits=nunits, units=units, parallel=parallel and capacity(units) > 1, dtype=dtype, ksplit=ksplit,
                    kr=kr, epi=epi, sizes=req.sizes, **extra, **offsets)


# ---------------------------------------------------------------------------------------- reductions, rows

@emitter("sum_axis", "mean_axis", "max_axis", "min_axis")
def _reduce(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
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
def _rowwise(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    shape = req.inputs[0].shape
    axis = req.attr("axis")
    n = math.prod(shape[axis:])
    if common_dtype(req) != "f32" or req.inputs[0].numel == 0 or (req.op == "softmax" and axis != len(shape) - 1):
        return None
    rows = math.prod(shape[:axis])
    eps = attr_value(req, "eps") if req.op != "softmax" else None
    return r.render("rowwise.c.j2", req, name, ("core", "math") if req.op == "softmax" else ("core",), op=req.op,
                    n=n, rows=rows, eps=eps, has_gamma=len(req.inputs) > 1, has_beta=len(req.inputs) > 2,
                    sizes=req.sizes if isinstance(n, Dim) else (),      # what the workers read: a run-time row length
                    **par_rows(rows, n, _PAR_ELEMS_MATH if req.op == "softmax" else _PAR_ELEMS))


# ---------------------------------------------------------------------------------------- dequant_matmul

#: Rows of x one pass over w serves (the widened weights are shared by the group's FMAs).
_DQ_MR = 4


def _dq_kernel(r: Avx2Renderer, rows: int, bits: int) -> tuple[int, int, int]:
    """(rows, ku, vs) of the dequant kernel for `rows` rows of x: w rows per pass, and vectors per
    register sub-chunk of a 64-byte line of w. The sub-chunk's sums (rows x vs) and the vectors of
    one load take at most half the registers, the broadcast x values the rest. Every row count
    gets >= 3 sums per sub-chunk, independent FMA chains enough without the f32 vecmat's second
    sums for odd rows of w."""
    g = 2 if bits == 4 else 1                       # vectors one load of 4-bit w fills (even, odd columns)
    lv = (128 if bits == 4 else 64) // r.vec.lanes  # vectors per line
    ku = 8 if rows <= 2 else 4
    vs = max([v for v in range(g, lv + 1, g) if lv % v == 0 and rows * v + g + 2 <= r.vec.regs // 2] or [g])
    return rows, ku, vs


def _dequant_problem(req: KernelRequest) -> tuple[int, int, int] | None:
    """(M, K, N) of a request the dequant kernel covers: f32 x with i8 / u8 / i4 / u4 weights
    (4-bit: N even) into f32, M static or dynamic (the rows of x), K and N static; None for any
    other."""
    x, w = req.own_inputs[:2]
    k, n = w.shape
    m = x.shape[0] if len(x.shape) == 2 else 1
    covered = (x.dtype.name == "f32" and req.output.dtype.name == "f32" and not req.acc
               and w.dtype.name in ("i8", "u8", "i4", "u4") and 0 not in (m, n, k)
               and not isinstance(k, Dim) and not isinstance(n, Dim)
               and not (w.dtype.name in ("i4", "u4") and n % 2))
    return (m, k, n) if covered else None


@emitter("max_pool2d", "avg_pool2d")
def _pool(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    """f32 pooling with column stride 1 or 2 (every common CNN pool) whose rows have at least a
    vector of outputs with the window inside (at a dynamic width's bound); the others, and the
    borders, are the portable loop's."""
    ctx = pool_context(req, name)
    if common_dtype(req) != "f32" or ctx["sw"] not in (1, 2) or ctx["inside_cols"] < r.vec.lanes:
        return None
    return render("x86/pool.c.j2", v=r.vec, sections=("core",), interior_from="ov", **ctx)


@emitter("lrn")
def _lrn(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    """f32 with its attributes constants and beta not 0 (the power is exp(beta * log(d)): 0 * log(0)
    would be NaN); the others are the portable kernel's. Any extent may be a run-time one: a
    run-time plane ends in a partial vector of a run-time count."""
    ctx = lrn_context(req, name)
    if common_dtype(req) != "f32" or req.runtime_attrs or req.attr("beta") == 0:
        return None
    hw = ctx["hw"]
    return render("x86/lrn.c.j2", v=r.vec, sections=("core", "math", "log"),
                  tail=None if isinstance(hw, Dim) else hw % r.vec.lanes, **ctx)


@emitter("dequant_matmul")
def _dequant_matmul(r: Avx2Renderer, req: KernelRequest, name: str) -> str | None:
    """The requests `_dequant_problem` covers; anything else is the portable kernel."""
    problem = _dequant_problem(req)
    if problem is None:
        return None
    m, k, n = problem
    x, w, scale = req.own_inputs[:3]
    zp = req.own_inputs[3] if len(req.own_inputs) > 3 else None
    wt = w.dtype.name
    bits = 4 if wt in ("i4", "u4") else 8
    epi = _epilogue(r.vec, req)
    line = 128 if bits == 4 else 64
    mb = capacity(m)
    if isinstance(m, Dim):      # run-time rows: whole groups, and a kernel for every height of the last one
        rows = [_DQ_MR] * (mb >= _DQ_MR) + list(range(1, min(mb, _DQ_MR - 1) + 1))
    else:
        rows = [_DQ_MR] * (m >= _DQ_MR) + [m % _DQ_MR] * bool(m % _DQ_MR)
    groups = -(-m // _DQ_MR)
    # (dynamic rows: decided at their bound; the pool takes the run-time units)
    parallel = mb * n * k >= _PAR_MACS or k * n * bits // 8 >= _PAR_STREAM_BYTES
    want = -(-2 * r.device.threads // capacity(groups)) if parallel else 1
    cw = max(line, 4096 // min(mb, _DQ_MR) // line * line)  # the f32 sums of a chunk: <= 16 KiB
    split_cw = min(cw, round_up(-(-n // want), line))
    ksplit, kr = 1, k
    if want > 1 and split_cw * bits // 8 < _MIN_ROW_PIECE:    # narrow w: slices of K, as the f32 vecmat
        ksplit, kr = _k_slices(k, want, 8, mb * n, r.device.threads)   # (8: a multiple of every kernel's ku)
    if ksplit == 1:
        cw, kr = split_cw, k
    cw = min(cw, round_up(n, line))
    nunits = -(-n // cw)
    units = groups * nunits * ksplit
    doc = (f"dequant_matmul: f32{list(x.shape)} @ dequantize({wt}{list(w.shape)}, "
           f"{'per-channel' if scale.numel > 1 else 'per-tensor'} scale{', zero point' if zp else ''}) "
           f"-> f32{list(req.output.shape)}")
    return r.render("dequant.c.j2", req, name, _sections(epi, "core"), doc=doc,
                    m=m, n=n, k=k, wt=wt, bits=bits, epi=epi, ldc=cw if epi and ksplit == 1 else n,
                    signed=wt[0] == "i", zp=zp is not None, zp_channel=zp is not None and zp.numel > 1,
                    scale_channel=scale.numel > 1, mr=_DQ_MR, kernels=[_dq_kernel(r, i, bits) for i in rows], cw=cw,
                    groups=groups, nunits=nunits, units=units, ksplit=ksplit, kr=kr,
                    parallel=parallel and capacity(units) > 1, sizes=req.sizes)
