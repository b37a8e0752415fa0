"""matmul in GLSL: NumPy matmul semantics (batch broadcast, 1-D operands), accumulating in the
reference's order and precision (openinfer/reference/kernels/reduce.py): each output element adds its
products in k order; f8/bf16/f16 running sums round to T after every add; a two-dtype `acc`
rounds (wraps) each product to its first dtype; bool is the OR of ANDs; integers wrap.

Where the reference's sums are f32 sums of exact f32 products (f32 operands without a product
dtype, or f16/bf16 operands with `acc=f32`, whose products are exact in f32), the summation order
is free (the tolerance of an f32 reduction covers it), and three fast kernels are used:

- GEMV (`m <= GEMV_MAX_M` rows of A, e.g. one token's activations times a [K, N] weight): one
  workgroup per block of output columns; the invocations split K (each one reads a vector of
  adjacent columns of one weight row per step, so a subgroup reads whole 128-byte row segments:
  coalesced, vec4 / uvec4 loads where N allows), and their partial sums are added in shared memory.
- GEMM (more rows): register-blocked tiles, BM x BN outputs per workgroup (128x128 with 8x8 per
  invocation, or 64x64 / 32x32 with 4x4, from the device's limits and the shape), A and B tiles
  of depth 8 double-buffered in shared memory as vec4 (A transposed), padded against bank
  conflicts; workgroups in L2-friendly groups of tile rows.
- f16 GEMM with cooperative matrices (descriptor `features.cooperative_matrix`, f16 operands,
  `acc=f32`, K and N multiples of 8): 128x128 tiles of depth 32 per workgroup of 8 subgroups,
  each subgroup a 64x32 block of 16x16x16 f16 x f16 -> f32 matrix multiply-adds
  (GL_NV_cooperative_matrix, the cooperative-matrix GLSL that shaderc 2023 compiles), operands
  staged in shared memory with 16-byte loads.

`transpose_a` / `transpose_b` read an operand as stored, indexing it with its last two dims
swapped (`_a_at` / `_b_at`). The GEMV over B^T ([N, K] stored, a Hugging Face weight) gives each
output column a workgroup whose invocations split K, so a subgroup reads a contiguous piece of one
stored row; the GEMM loads B^T's tile element by element; the cooperative-matrix GEMM takes no
transposed operand (the plain GEMM does).

The fast kernels decode f16 with unpackHalf2x16 (exact: every f16 is an f32) and bf16 by a shift.
Operands are read through extra declarations of their bindings as vec4 / uvec2 / uvec4 arrays
(every binding offset is a multiple of 64 bytes, see openinfer/targets/vulkan/renderer.py). Tile sizes and
the other knobs are in TUNE (tools/bench/vulkan_bench.py --tune sweeps them on a device).

f64 products (and f32 ones on a device too small for the GEMM tiles) keep the tiled kernel
(TILE x TILE outputs per workgroup, A and B tiles in shared memory, k order); everything else
(narrow running sums, product dtypes, integers, bool) keeps the per-element loop, exactly as the
reference orders it.
"""

from __future__ import annotations

import numpy as np

from ....dims import Dim, capacity
from ....dtypes import Kind
from ....errors import SynthesisError
from ....ops.shapes import matmul_operand_shapes
from ....synth.program import KernelRequest
from ...geometry import contiguous_strides
from .registry import Body, dispatch, family
from .rows import pow2ceil, tree
from .types import NARROW, KernelCtx, lit, round_to

#: the GEMV kernel serves matmuls with at most this many rows of A (per batch element)
GEMV_MAX_M = 8
#: tuning knobs (tools/bench/vulkan_bench.py --tune can override them for a sweep)
TUNE = {
    "gemv_segment_bytes": 128,     # bytes of one weight row a workgroup reads per step...
    "gemv_min_groups": 96,         # ...halved (down to 32) until this many workgroups run
    "gemv_threads": 131072,        # grow workgroups until this many invocations run...
    "gemv_max_threads": 512,       # ...up to this many per workgroup
    "gemv_max_threads_quant": 512,   # the same for the dequantizing GEMV
    "gemv_unroll": 4,              # weight rows in flight per invocation (f32 weights)
    "gemv_unroll_16bit": 8,        # the same for f16 / bf16 weights
    "gemv_rows_at_once": 16,       # weight rows an invocation may load at once (see _gemv)
    "gemv_min_groups_quant": 96,   # dequantizing GEMV: loads narrowed (16 -> 8 -> 4 bytes) below this
    "gemm_group": 8,               # tile rows per L2 group
    "gemm_tiles": ((128, 128, 8, 8), (64, 64, 4, 4), (32, 32, 4, 4)),   # (BM, BN, TM, TN)
    "gemm_bk": 8,
    # cooperative-matrix tiles, the first whose BM x BN the shape fills (else the last that fits):
    # (BM, BN, BK, subgroups down, subgroups across, shared-memory stages)
    "coop_tiles": ((128, 128, 32, 2, 4, 2),),
}


def _batch_offset(batch_shape, shape, mat_elems: int, bt: str = "bt") -> str:
    lead = shape[:-2]
    pad = len(batch_shape) - len(lead)
    full = (1,) * pad + tuple(lead)
    bstr = contiguous_strides(tuple(batch_shape))
    own = contiguous_strides(full)
    terms = []
    for d in range(len(batch_shape)):
        if full[d] == 1:
            continue
        terms.append(f"(({bt} / {bstr[d]}u) % {batch_shape[d]}u) * {own[d] * mat_elems}u")
    return " + ".join(terms) or "0u"


def _prod(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _load_f32(t, buf: str, idx: str) -> str:
    """Element `idx` of a f32 / f16 / bf16 buffer as a float (hardware f16 decode: exact)."""
    if t.name == "f16":
        return f"unpackHalf2x16(uint({buf}[{idx}])).x"
    if t.name == "bf16":
        return f"uintBitsToFloat(uint({buf}[{idx}]) << 16)"
    return f"{buf}[{idx}]"


def buffer_view(binding: int, name: str, typ: str, readonly: bool = True) -> str:
    """A second declaration of a binding, as an array of `typ` (vector loads / stores)."""
    access = "readonly " if readonly else "writeonly "
    return f"layout(std430, set = 0, binding = {binding}) {access}buffer B{binding}v {{ {typ} {name}[]; }};"


_DECODE = """vec4 oi_f16x4(uvec2 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
vec4 oi_bf16x4(uvec2 u) {
    return vec4(uintBitsToFloat(u.x << 16), uintBitsToFloat(u.x & 0xffff0000u),
                uintBitsToFloat(u.y << 16), uintBitsToFloat(u.y & 0xffff0000u));
}"""


def transposes(req: KernelRequest) -> tuple[bool, bool]:
    return bool(req.attr("transpose_a")), bool(req.attr("transpose_b"))


def _a_at(ta: bool, m: int, kk: int, row: str, q: str) -> str:
    """Offset of A's element (row, q) of the product's [M, K] view in one batch item, as stored."""
    return f"({q}) * {m}u + ({row})" if ta else f"({row}) * {kk}u + ({q})"


def _b_at(tb: bool, n: int, kk: int, q: str, col: str) -> str:
    """Offset of B's element (q, col) of the product's [K, N] view in one batch item, as stored."""
    return f"({col}) * {kk}u + ({q})" if tb else f"({q}) * {n}u + ({col})"


def _operands(req: KernelRequest):
    """(a, b, product type, m, n, k, sum dtype, product dtype) of a matmul request."""
    a, b = req.own_inputs
    sa, sb = matmul_operand_shapes(a.shape, b.shape, *transposes(req))
    w = req.acc[-1] if req.acc else a.dtype
    return (a, b, req.epilogue.inputs[0] if req.epilogue else req.output,
            1 if len(sa) == 1 else sa[-2], 1 if len(sb) == 1 else sb[-1], sa[-1],
            w, req.acc[0] if req.acc else w)


def _fits_tiles(req: KernelRequest) -> bool:
    """f32 / f64 products summed in their own type, at least 16 x 16 x 16: the tiled kernel."""
    a, _, product, m, n, kk, w, p = _operands(req)
    return (a.dtype.name in ("f32", "f64") and p == w == a.dtype and not product.dtype.is_packed
            and min(capacity(m), capacity(n), capacity(kk)) >= 16)


def matmul_path(req: KernelRequest) -> str:
    """emit_matmul's choice: "gemv"; "gemm" (the register-blocked or cooperative-matrix kernel, or
    where the device is too small for those, the tiled or per-element one); "tiled"; or "value"
    (one invocation per output element). f32 sums of exact f32 products may be reordered (see the
    module doc): the GEMV and GEMM paths."""
    a, b, product, m, _, _, w, p = _operands(req)
    if (p == w and w.name == "f32" and a.dtype.name in ("f32", "f16", "bf16") and b.dtype.name in ("f32", "f16", "bf16")
            and not product.dtype.is_packed and product.numel > 0):
        return "gemv" if capacity(m) <= GEMV_MAX_M else "gemm"   # (a dynamic M: by its bound)
    return "tiled" if _fits_tiles(req) else "value"


def rope_frequencies(rope: KernelRequest) -> str:
    """`OI_FREQ[ii]`, the static-theta rope's frequency of pair ii: the reference's, bit for bit
    (its angles are computed in f64: pos * OI_FREQ[ii])."""
    dh = rope.inputs[0].shape[-1]
    half = dh // 2
    freqs = [float(f) for f in float(rope.attr("theta")) ** (-2.0 * np.arange(half) / dh)]
    return f"const double OI_FREQ[{half}] = double[{half}]({', '.join(lit('double', f) for f in freqs)});"


def rope_angle(ii: str, pos: str) -> list[str]:
    """Lines setting the declared floats `oi_cs`, `oi_sn` to the cosine and sine of pair ii's
    angle at position `pos` (an expression of a double), as emit_rope computes them. The GEMVs
    compute them before their loop over K: the f64 sine and cosine (software range reduction)
    then run while the weights stream instead of after the sums."""
    return [f"double oi_ang = {pos} * OI_FREQ[{ii}];",
            "oi_cs = oi_d2f(oi_cos_d(oi_ang));",
            "oi_sn = oi_d2f(oi_sin_d(oi_ang));"]


def rope_rotated(own: str, other: str, side: str) -> str:
    """Element `own` rotated with its pair `other` (a rope in halves: side 0 holds x[ii], side 1
    x[ii + dh/2]) by the angle of `rope_angle`, as emit_rope computes it."""
    return f"({side} == 0u ? {own} * oi_cs - {other} * oi_sn : {own} * oi_cs + {other} * oi_sn)"


def has_rope(req: KernelRequest) -> bool:
    """Whether req's epilogue is a rope (openinfer/synth/fusion.py `fold_rope`)."""
    return req.epilogue is not None and req.epilogue.op == "rope"


def rope_position(req: KernelRequest, k: KernelCtx) -> str:
    """The rope epilogue's position as a double (its operand follows the op's own inputs)."""
    (at,) = req.operand_indices("rope")
    return f"double({k.load(req.inputs[at].dtype, f'in{at}', '0u')})"


def has_norm(req: KernelRequest) -> bool:
    """Whether req's prologue is a row norm (its rows' scales are computed first: `row_scales`)."""
    return req.prologue is not None and req.prologue.op == "rms_norm"


def row_scales(req: KernelRequest, k: KernelCtx, kk: int, rows: int, threads: int, x_at,
               loaded_rows: int = 0) -> list[str]:
    """A GEMV's prologue (`req.prologue`, an rms_norm of x's rows): lines giving each of x's
    `rows` rows its root mean square `oi_rms<r>`, summed by the workgroup's `threads` invocations
    (`lid`) in the shared `oi_nrm` (`norm_shared`). Every workgroup recomputes them: one row of K
    floats, read from L2, costs less than the separate norm kernel's dispatch and barrier. With
    subgroup arithmetic a subgroup adds its invocations' sums at once and shared memory holds one
    per subgroup (one barrier, not log2(threads): every workgroup waits for this before its loop).
    `x_at(r, i)`: the load of x[r, i]. `loaded_rows`: the invocation already holds x[r, q] of its
    K slice's rows j < loaded_rows in `xr<j>_<r>` (a GEMV that loaded them at once) and the lanes
    `cl == 0` cover every k once: the sums come from those registers, not a loop over the row."""
    eps = lit("float", float(req.prologue.attr("eps")))
    sub = _norm_subgroups(k, threads)
    if sub:
        k.need("subgroup", "the GEMV's row norm prologue")
    lines = []
    for r in range(rows):
        lines += [f"float oi_rms{r};", "{"]
        if loaded_rows:
            squares = " + ".join(f"xr{j}_{r} * xr{j}_{r}" for j in range(loaded_rows))
            lines.append(f"    float oi_ss = cl == 0u ? {squares} : 0.0;")
        else:
            lines += ["    float oi_ss = 0.0;", f"    for (uint i = lid; i < {kk}u; i += {threads}u) "
                      f"{{ float v = {x_at(r, 'i')}; oi_ss += v * v; }}"]
        if sub:
            lines += ["    oi_ss = subgroupAdd(oi_ss);", "    if (subgroupElect()) oi_nrm[gl_SubgroupID] = oi_ss;",
                      "    barrier();", "    oi_ss = 0.0;",
                      "    for (uint j = 0u; j < gl_NumSubgroups; ++j) oi_ss += oi_nrm[j];",
                      f"    oi_rms{r} = sqrt(oi_ss / {lit('float', kk)} + {eps});"]
        else:
            lines += ["    oi_nrm[lid] = oi_ss;"]
            lines += ["    " + x for x in tree(threads, "oi_nrm[a] += oi_nrm[b];")]
            lines += [f"    oi_rms{r} = sqrt(oi_nrm[0] / {lit('float', kk)} + {eps});"]
        lines += ["    barrier();", "}"]
    return lines


def _norm_subgroups(k: KernelCtx, threads: int) -> bool:
    """Whether row_scales adds with subgroup arithmetic (subgroups of at least 4 invocations, as
    the descriptor says: `norm_shared` holds a partial per 4 invocations)."""
    return k.caps.subgroup and k.caps.subgroup_size >= 4 and threads >= 4


def norm_shared(k: KernelCtx, threads: int) -> str:
    return f"shared float oi_nrm[{threads // 4 if _norm_subgroups(k, threads) else threads}];"


def normed(req: KernelRequest, x: str, r: int, q: str, gamma: str | None = None) -> str:
    """x[r, q] (the expression `x`) as the prologue gives it: an rms_norm in the norm kernel's
    order (x / rms, then * gamma[q], the request's last input), an element-wise chain through
    `oi_prologue` (the other operands read at the same element)."""
    pro = req.prologue
    if pro is None:
        return x
    if pro.op == "fused":
        return f"oi_prologue({x}, {r * req.own_inputs[0].shape[1]}u + {q})"
    if len(pro.inputs) > 1:
        gamma_at = req.operand_indices("prologue")[0]
        return f"({x} / oi_rms{r}) * {gamma or f'in{gamma_at}[{q}]'}"
    return f"{x} / oi_rms{r}"


def stored(req: KernelRequest, k: KernelCtx, value: str, index: str) -> str:
    """The expression a GEMV stores at output element `index` for its f32 result `value` (a rope
    epilogue is applied before: see `rope_rotated`)."""
    if req.epilogue is None or has_rope(req):
        return k.store(req.output.dtype, value, "float")
    return k.store(req.output.dtype, f"oi_epilogue({value}, {index})", k.ct(req.epilogue.output.dtype))


@family("matmul")
def emit_matmul(req: KernelRequest, k: KernelCtx) -> Body:
    a, b = req.own_inputs
    out = req.output
    t = a.dtype
    ta, tb = transposes(req)
    a_shape, b_shape = matmul_operand_shapes(a.shape, b.shape, ta, tb)
    a_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
    m, kk = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    if len(a.shape) >= 2 and len(b.shape) >= 2:
        batch_shape = out.shape[:-2]
    elif len(a.shape) == 1 and len(b.shape) == 1:
        batch_shape = ()
    else:
        batch_shape = out.shape[:-1]
    w = req.acc[-1] if req.acc else t
    p = req.acc[0] if req.acc else w
    ct, lct = k.ct(w), k.ct(p)
    a_off = _batch_offset(batch_shape, a_shape, m * kk)
    b_off = _batch_offset(batch_shape, b_shape, kk * n)
    doc = (f"matmul: {a} @ {b} -> {out}" + (f", products in {p.name}, sums in {w.name}" if req.acc else ""))
    if t.kind is Kind.BOOL:
        product, step = "(x & y)", "s | pr"
    else:
        product = "x * y"
        if p != w:
            product = round_to(k, p, product, lct)
            if lct != ct:
                product = f"{ct}({product})"
        step = "s + pr"
    path = matmul_path(req)
    shape = (batch_shape, a_shape, b_shape, m, n, kk)
    if path == "gemv":
        return _gemv(req, k, *shape, doc)
    if path == "gemm":
        coop = _coop_config(req, k, m, n, kk)
        if coop is not None:
            return _gemm_coop(req, k, *shape, doc, coop)
        cfg = _gemm_config(k, m, n)
        if cfg is not None:
            return _gemm(req, k, *shape, doc, cfg)
    if path != "value" and _fits_tiles(req):
        return _tiled(req, k, ct, batch_shape, a_shape, b_shape, m, n, kk, doc)
    narrow = w.name in NARROW
    lines = [f"uint bt = i / {m * n}u;", f"uint row = (i / {n}u) % {m}u;", f"uint col = i % {n}u;",
             f"uint ao = {a_off}, bo = {b_off};",
             f"{ct} s = {lit(ct, 0)};",
             f"for (uint q = 0u; q < {kk}u; ++q) {{",
             f"    {lct} x = {k.load(t, 'in0', 'ao + ' + _a_at(ta, m, kk, 'row', 'q'), lct)};",
             f"    {lct} y = {k.load(t, 'in1', 'bo + ' + _b_at(tb, n, kk, 'q', 'col'), lct)};"]
    if narrow:
        # the reference's f32 product and sum, each rounded, then the sum rounded to T
        lines += [f"    precise {ct} pr = {product};", f"    precise {ct} s2 = {step};",
                  f"    s = {round_to(k, w, 's2', ct)};"]
    else:
        lines += [f"    {ct} pr = {product};", f"    s = {step};"]
    lines += ["}", "return s;"]
    return Body(value="\n".join(lines), vct=ct, doc=doc)


# ------------------------------------------------------------------------------------ GEMV

def _gemv(req, k: KernelCtx, batch_shape, a_shape, b_shape, m, n, kk, doc) -> Body:
    """y[bt] (m x n, m small) = x[bt] @ W[bt]: a workgroup per CL*V output columns; invocation
    (ks, cl) reads V adjacent columns of weight rows ks, ks + KS, ... and keeps m x V partial
    sums; the KS partial sums of a column are added in shared memory (a tree).

    Dynamic extents: the loops over K and the columns run to their run-time values; the m rows
    are unrolled for the bound of M, and rows past the run-time M are computed but not stored."""
    a, b = req.own_inputs
    mcap, kcap = capacity(m), capacity(kk)
    ta, tb = a.dtype, b.dtype
    trans_a, trans_b = transposes(req)
    trans_b = trans_b and capacity(n) > 1    # a transposed single column is the same vector in memory
    esize = tb.bits // 8
    if trans_b:
        vw = 1                           # adjacent invocations read adjacent elements of one stored row
    elif tb.name == "f32":
        vw = 4 if n % 4 == 0 else 1
    else:
        vw = 8 if n % 8 == 0 else (4 if n % 4 == 0 else 1)
    nvec = -(-n // vw)
    nb = _prod(batch_shape)

    def lanes(segment: int) -> int:              # invocations across one weight row's segment
        if trans_b:
            return 1
        return min(pow2ceil(max(1, segment // (vw * esize))), 32, pow2ceil(capacity(nvec)))

    # narrower segments where the matrix has too few columns to give every compute unit a
    # workgroup (a decoder's down projection, N = 768 of K = 2304: 24 workgroups at 128 bytes);
    # a 32-byte segment is still one whole memory sector per row (a dynamic N decides at its bound)
    segment = TUNE["gemv_segment_bytes"]
    while segment > 32 and nb * -(-capacity(nvec) // lanes(segment)) < TUNE["gemv_min_groups"]:
        segment //= 2
    cl_n = lanes(segment)
    rope = req.epilogue if has_rope(req) else None
    if rope is not None:
        # a workgroup's columns are pairs: its lanes' first half reads columns of the first half
        # of a head, the other half their partners dh/2 further (see the col mapping below)
        dh = rope.inputs[0].shape[-1]
        while cl_n > 2 and (dh // 2) % (cl_n // 2 * vw):
            cl_n //= 2
        cl_n = max(cl_n, 2)
    ncb = -(-nvec // cl_n)
    total = nb * ncb
    chunks = max(1, vw // 4)
    vt = "vec4" if vw >= 4 else "float"
    red_bytes = 16 if vw >= 4 else 4
    max_wg = 1 << (k.caps.max_wg.bit_length() - 1)
    threads = min(256, max_wg)
    unroll = max(1, TUNE["gemv_unroll"] if tb.name == "f32" else TUNE["gemv_unroll_16bit"])

    def fits(tn: int) -> bool:
        return tn <= max_wg and tn * chunks * red_bytes <= k.caps.max_shared

    while (threads < TUNE["gemv_max_threads"] and fits(threads * 2) and total * threads < TUNE["gemv_threads"]
           and kcap >= (threads * 2 // cl_n) * unroll * 2):
        threads *= 2
    while threads > cl_n and (threads // cl_n > pow2ceil(kcap) or not fits(threads)):
        threads //= 2
    threads = max(threads, cl_n)
    ks_n = threads // cl_n

    a_off = _batch_offset(batch_shape, a_shape, m * kk)
    b_off = _batch_offset(batch_shape, b_shape, kk * n)
    views, functions = [], ""
    if vw > 1:
        vtype = {"f32": "vec4", "f16": "uvec4" if vw == 8 else "uvec2", "bf16": "uvec4" if vw == 8 else "uvec2"}
        views.append(buffer_view(1, "oi_wv", vtype[tb.name]))
        if tb.name != "f32":
            functions = _DECODE

    def wload(j: int, q: str) -> list[str]:
        idx = "bo + " + _b_at(trans_b, n, kk, q, "col")
        if vw == 1:
            return [f"float w{j}_0 = {_load_f32(tb, 'in1', idx)};"]
        if tb.name == "f32":
            return [f"vec4 w{j}_0 = oi_wv[({idx}) >> 2];"]
        if vw == 4:
            return [f"vec4 w{j}_0 = oi_{tb.name}x4(oi_wv[({idx}) >> 2]);"]
        return [f"uvec4 h{j} = oi_wv[({idx}) >> 3];",
                f"vec4 w{j}_0 = oi_{tb.name}x4(h{j}.xy);", f"vec4 w{j}_1 = oi_{tb.name}x4(h{j}.zw);"]

    norm = req.prologue if has_norm(req) else None

    def xload(r: int, q: str) -> str:
        return normed(req, _load_f32(ta, 'in0', 'ao + ' + _a_at(trans_a, m, kk, f'{r}u', q)), r, q)

    def step(js: list[tuple[int, str]]) -> list[str]:
        body = []
        for j, q in js:
            body += wload(j, q)
        for j, q in js:
            for r in range(mcap):
                body.append(f"float x{j}_{r} = {xload(r, q)};")
        for j, _ in js:
            for r in range(mcap):
                for c in range(chunks):
                    body.append(f"s{r}_{c} += x{j}_{r} * w{j}_{c};")
        return ["    " + x for x in body]

    lines = ["uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;",
             f"if (g >= {total}u) return;",
             f"uint bt = g / {ncb}u, lid = gl_LocalInvocationID.x;",
             f"uint cl = lid % {cl_n}u, ks = lid / {cl_n}u;"]
    if rope is None:
        lines.append(f"uint col = ((g % {ncb}u) * {cl_n}u + cl) * {vw}u;")
    else:       # lane cl's partner (the same rope pair's other column) is lane cl ^ half_lanes
        half, half_lanes = dh // 2, cl_n // 2
        per = half_lanes * vw                  # columns of one half a workgroup takes
        lines += [f"uint gi = g % {ncb}u, side = cl / {half_lanes}u;",
                  f"uint col = (gi / {half // per}u) * {dh}u + side * {half}u + (gi % {half // per}u) * {per}u"
                  f" + (cl % {half_lanes}u) * {vw}u;"]
        k.need("fp64", "the rope epilogue's angles (pos * freq, computed in f64 as the reference)")
        functions = f"{functions}\n{rope_frequencies(rope)}" if functions else rope_frequencies(rope)
        if ks_n < 4:       # (takes_rope: K >= 4, so at least 4 slices of K)
            raise SynthesisError(f"{k.where}internal: the rope epilogue needs 4 slices of K, not {ks_n}")
        # slice ks < 4 of a lane stores its element ks: that element's angle, computed now (its
        # latency hides behind the weight loads'; computed after them, the q/k/v stage took longer)
        lines += ["float oi_cs = 0.0, oi_sn = 0.0;", "if (ks < 4u) {",
                  *["    " + x for x in rope_angle(f"col % {half}u + ks", rope_position(req, k))], "}"]
    lines.append(f"uint ao = {a_off}, bo = {b_off};")
    zero = "vec4(0.0)" if vt == "vec4" else "0.0"
    # Where an invocation reads few weight rows (a decoder's 768-row projections: 6 each), it
    # issues every load at once, before the norm prologue's sums, and waits once: a loop waits
    # for each batch of `unroll` loads in turn (the decoder bench's f32 step: 334 -> 313 us of
    # device time on an H100). The norm's sums then come from the x values loaded for the
    # products (lanes cl == 0 cover every k once), and gamma's from the same rows.
    rows_each = -(-kcap // ks_n)
    at_once = (tb.name == "f32" and not isinstance(kk, Dim) and rows_each <= TUNE["gemv_rows_at_once"]
               and rows_each * (vw + mcap + 1) <= 128)
    gamma = norm is not None and len(norm.inputs) > 1
    if at_once:
        for j in range(rows_each):
            q = f"ks + {j * ks_n}u"
            past = (j + 1) * ks_n > kk                  # the last row of some slices is past K
            idx = "bo + " + _b_at(trans_b, n, kk, q, "col")
            wv = f"oi_wv[({idx}) >> 2]" if vw == 4 else _load_f32(tb, 'in1', idx)
            lines.append(f"{vt} w{j}_0 = col < {n}u{f' && {q} < {kk}u' if past else ''} ? {wv} : {zero};")
            loads = [(f"xr{j}_{r}", _load_f32(ta, 'in0', 'ao + ' + _a_at(trans_a, m, kk, f'{r}u', q)))
                     for r in range(mcap)]
            if gamma:
                loads.append((f"gm{j}", f"in{req.operand_indices('prologue')[0]}[{q}]"))
            lines += [f"float {v} = {q} < {kk}u ? {e} : 0.0;" if past else f"float {v} = {e};" for v, e in loads]
    if norm is not None:
        lines += row_scales(req, k, kk, mcap, threads, lambda r, i: _load_f32(ta, 'in0', f'ao + {r * kk}u + {i}'),
                            rows_each if at_once else 0)
    lines += [f"{vt} s{r}_{c} = {zero};" for r in range(mcap) for c in range(chunks)]
    if at_once:
        for j in range(rows_each):
            lines += [f"s{r}_0 += {normed(req, f'xr{j}_{r}', r, f'ks + {j * ks_n}u', f'gm{j}' if gamma else None)}"
                      f" * w{j}_0;" for r in range(mcap)]
    else:
        lines += [f"if (col < {n}u) {{", "    uint q = ks;"]
        if unroll > 1 and kcap > ks_n:
            lines.append(f"    for (; q + {(unroll - 1) * ks_n}u < {kk}u; q += {unroll * ks_n}u) {{")
            lines += ["    " + x for x in step([(j, f"q + {j * ks_n}u") for j in range(unroll)])]
            lines.append("    }")
        lines.append(f"    for (; q < {kk}u; q += {ks_n}u) {{")
        lines += ["    " + x for x in step([(0, "q")])]
        lines += ["    }", "}"]
    for r in range(mcap):
        if r:
            lines.append("barrier();")
        lines += reduce_k_slices(r, chunks, ks_n, cl_n)
        live = f" && {r}u < {m}u" if isinstance(m, Dim) else ""
        if rope is not None:      # (vw 4: a vec4 a lane) slice e < 4 stores element e with its pair's
            rot = rope_rotated("oi_red[cl][ks]", f"oi_red[cl ^ {half_lanes}u][ks]", "side")
            lines += ["barrier();", f"if (ks < 4u && col < {n}u{live}) {{",
                      f"    uint o = (bt * {m}u + {r}u) * {n}u + col + ks;",
                      f"    out_[o] = {stored(req, k, rot, 'o')};", "}"]
            continue
        lines.append(f"if (ks == 0u && col < {n}u{live}) {{")
        lines.append(f"    uint o = (bt * {m}u + {r}u) * {n}u + col;")
        for c in range(chunks):
            lines.append(f"    {vt} v{c} = oi_red[lid * {chunks}u + {c}u];")
            if vt == "float":
                lines.append(f"    out_[o] = {stored(req, k, f'v{c}', 'o')};")
            else:
                for e in range(4):
                    idx = f"o + {c * 4 + e}u"
                    lines.append(f"    out_[{idx}] = {stored(req, k, f'v{c}.' + 'xyzw'[e], idx)};")
        lines.append("}")
    shared = "\n".join(views + [f"shared {vt} oi_red[{threads * chunks}];"]
                       + ([norm_shared(k, threads)] if norm is not None else []))
    how = f"GEMV: {cl_n * vw} columns x {ks_n} slices of K per workgroup, {vw}-wide loads" + \
        (f", {rows_each} rows an invocation loaded at once" if at_once else "") + \
        (f", {norm.op} of each row of x first" if norm is not None else "") + \
        (", each column pair rotated (rope) as stored" if rope is not None else "") + \
        (", x computed by an element-wise prologue" if req.prologue is not None and norm is None else "")
    return Body(main="\n".join(lines), functions=functions, doc=f"{doc} ({how})", local_size=threads,
                shared=shared, groups=dispatch(total, 1))


def reduce_k_slices(r: int, chunks: int, ks_n: int, cl_n: int) -> list[str]:
    """Sum row r's partial sums s{r}_{c} over the ks_n K slices of a split-K GEMV workgroup
    (invocation lid = ks * cl_n + cl) with a tree in `shared oi_red[]`; afterwards slice 0's
    entries oi_red[lid * chunks + c] hold the totals. The caller puts a barrier() between rows."""
    lines = [f"oi_red[lid * {chunks}u + {c}u] = s{r}_{c};" for c in range(chunks)]
    lines.append("barrier();")
    s = ks_n // 2
    while s >= 1:
        lines.append(f"if (ks < {s}u) {{")
        lines += [f"    oi_red[lid * {chunks}u + {c}u] += oi_red[(lid + {s * cl_n}u) * {chunks}u + {c}u];"
                  for c in range(chunks)]
        lines.append("}")
        if s > 1:
            lines.append("barrier();")
        s //= 2
    return lines


def tile_units(units: int, threads: int, stmt) -> list[str]:
    """One statement per unit of a tile (a vector a workgroup moves between memory and shared
    memory) this invocation owns: `stmt(e, u)` for its e-th unit, u the unit's index expression
    (lid + e * threads), guarded where the units do not divide evenly among the invocations."""
    lines = []
    for e in range(-(-units // threads)):
        u = f"(lid + {e * threads}u)"
        st = stmt(e, u)
        lines.append(f"if ({u} < {units}u) {st}" if units % threads else st)
    return lines


# ------------------------------------------------------------------------------------ GEMM (f32 sums)

def _gemm_config(k: KernelCtx, m: int, n: int):
    """The largest register-blocked tile the device and the shape suit, or None."""
    bk = TUNE["gemm_bk"]
    for bm, bn, tm, tn in TUNE["gemm_tiles"]:
        threads = (bm // tm) * (bn // tn)
        shared = 2 * bk * ((bm // 4 + 1) + (bn // 4 + 1)) * 16
        if threads > k.caps.max_wg or shared > k.caps.max_shared:
            continue
        if bm > 32 and (capacity(m) < bm or capacity(n) < bn):     # (dynamic: by the bound)
            continue
        return bm, bn, tm, tn, bk
    return None


def _gemm(req, k: KernelCtx, batch_shape, a_shape, b_shape, m, n, kk, doc, cfg) -> Body:
    """C[bt] in BM x BN tiles, one per workgroup of (BM/TM)(BN/TN) invocations each owning a
    TM x TN block (vec4 groups of rows and columns spread so that shared-memory reads are
    conflict-free); A (transposed) and B tiles of depth BK double-buffered in shared memory."""
    bm, bn, tm, tn, bk = cfg
    a, b = req.inputs
    out = req.output
    ta, tb = a.dtype, b.dtype
    trans_a, trans_b = transposes(req)
    txn, tyn = bn // tn, bm // tm
    threads = txn * tyn
    sa, sb = bm // 4 + 1, bn // 4 + 1          # padded rows (vec4) of the shared tiles
    gm, gn = tm // 4, tn // 4                   # vec4 groups per invocation
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    per_batch = tiles_m * tiles_n
    nb = _prod(batch_shape)
    total = nb * per_batch
    ntiles = -(-kk // bk)
    group = max(1, TUNE["gemm_group"])
    a_off = _batch_offset(batch_shape, a_shape, m * kk)
    b_off = _batch_offset(batch_shape, b_shape, kk * n)
    views, functions = [], ""
    bvec = n % 4 == 0 and not trans_b
    if bvec:
        views.append(buffer_view(1, "oi_bv", "vec4" if tb.name == "f32" else "uvec2"))
        if tb.name != "f32":
            functions = _DECODE
    ovec = n % 4 == 0 and out.dtype.name == "f32"
    if ovec:
        views.append(buffer_view(2, "oi_cv", "vec4", readonly=False))

    units_a, units_b = bm * bk // 4, bk * bn // 4
    la, lb = -(-units_a // threads), -(-units_b // threads)

    def load(k0: str) -> list[str]:
        def a_unit(e: int, u: str) -> str:
            vals = []
            for i in range(4):
                row, q = f"row0 + ({u} / {bk}u) * 4u + {i}u", f"{k0} + {u} % {bk}u"
                x = _load_f32(ta, "in0", "ao + " + _a_at(trans_a, m, kk, row, q))
                vals.append(f"(({row}) < {m}u && ({q}) < {kk}u) ? {x} : 0.0")
            return f"ra{e} = vec4({', '.join(vals)});"

        def b_unit(e: int, u: str) -> str:
            q, c = f"{k0} + {u} / {bn // 4}u", f"col0 + ({u} % {bn // 4}u) * 4u"
            if bvec:
                v = f"(({q}) < {kk}u && ({c}) < {n}u) ? " + (
                    f"oi_bv[(bo + ({q}) * {n}u + ({c})) >> 2]" if tb.name == "f32"
                    else f"oi_{tb.name}x4(oi_bv[(bo + ({q}) * {n}u + ({c})) >> 2])") + " : vec4(0.0)"
            else:
                v = "vec4(" + ", ".join(
                    f"(({q}) < {kk}u && ({c}) + {i}u < {n}u) ? "
                    f"{_load_f32(tb, 'in1', 'bo + ' + _b_at(trans_b, n, kk, q, f'({c}) + {i}u'))} : 0.0"
                    for i in range(4)) + ")"
            return f"rb{e} = {v};"
        return tile_units(units_a, threads, a_unit) + tile_units(units_b, threads, b_unit)

    def store(buf: str) -> list[str]:
        return (tile_units(units_a, threads, lambda e, u:
                           f"oi_as[{buf} * {bk * sa}u + ({u} % {bk}u) * {sa}u + {u} / {bk}u] = ra{e};")
                + tile_units(units_b, threads, lambda e, u:
                             f"oi_bs[{buf} * {bk * sb}u + ({u} / {bn // 4}u) * {sb}u + {u} % {bn // 4}u] = rb{e};"))

    lines = ["uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;",
             f"if (g >= {total}u) return;",
             f"uint bt = g / {per_batch}u, t = g % {per_batch}u;",
             # groups of `group` tile rows, column-major inside a group (tiles sharing B stay in L2)
             f"uint first = (t / {group * tiles_n}u) * {group}u;",
             f"uint gsz = min({tiles_m}u - first, {group}u);",
             f"uint tr = first + (t % {group * tiles_n}u) % gsz, tc = (t % {group * tiles_n}u) / gsz;",
             f"uint row0 = tr * {bm}u, col0 = tc * {bn}u;",
             f"uint lid = gl_LocalInvocationID.x, tx = lid % {txn}u, ty = lid / {txn}u;",
             f"uint ao = {a_off}, bo = {b_off};"]
    lines += [f"vec4 c{i}_{j} = vec4(0.0);" for i in range(tm) for j in range(gn)]
    lines += [f"vec4 ra{e} = vec4(0.0);" for e in range(la)] + [f"vec4 rb{e} = vec4(0.0);" for e in range(lb)]
    lines += load("0u") + store("0u") + ["barrier();"]
    lines.append(f"for (uint kt = 0u; kt < {ntiles}u; ++kt) {{")
    lines.append("    uint cur = kt & 1u;")
    if capacity(ntiles) > 1:     # (a dynamic K: the loop checks at run time)
        lines.append(f"    if (kt + 1u < {ntiles}u) {{")
        lines += ["        " + x for x in load(f"(kt + 1u) * {bk}u")]
        lines.append("    }")
    lines.append(f"    for (uint q = 0u; q < {bk}u; ++q) {{")
    lines.append(f"        uint pa = cur * {bk * sa}u + q * {sa}u + ty, pb = cur * {bk * sb}u + q * {sb}u + tx;")
    lines += [f"        vec4 a{i} = oi_as[pa + {i * (bm // 4 // gm)}u];" for i in range(gm)]
    lines += [f"        vec4 b{j} = oi_bs[pb + {j * (bn // 4 // gn)}u];" for j in range(gn)]
    for i in range(tm):
        for j in range(gn):
            lines.append(f"        c{i}_{j} += a{i // 4}." + "xyzw"[i % 4] + f" * b{j};")
    lines.append("    }")
    if capacity(ntiles) > 1:
        lines.append(f"    if (kt + 1u < {ntiles}u) {{")
        lines += ["        " + x for x in store("(cur ^ 1u)")]
        lines.append("    }")
    lines += ["    barrier();", "}"]
    for i in range(tm):
        row = f"row0 + {(i // 4) * (bm // gm)}u + ty * 4u + {i % 4}u"
        lines.append(f"if ({row} < {m}u) {{")
        lines.append(f"    uint o = (bt * {m}u + {row}) * {n}u;")
        for j in range(gn):
            col = f"col0 + {j * (bn // gn)}u + tx * 4u"
            if ovec:
                lines.append(f"    if ({col} < {n}u) oi_cv[(o + {col}) >> 2] = c{i}_{j};")
            else:
                for e in range(4):
                    lines.append(f"    if ({col} + {e}u < {n}u) out_[o + {col} + {e}u] = "
                                 f"{k.store(out.dtype, f'c{i}_{j}.' + 'xyzw'[e], 'float')};")
        lines.append("}")
    shared = "\n".join(views + [f"shared vec4 oi_as[{2 * bk * sa}];", f"shared vec4 oi_bs[{2 * bk * sb}];"])
    how = f"GEMM: {bm}x{bn} tiles, {tm}x{tn} per invocation, depth {bk}, double-buffered shared memory"
    return Body(main="\n".join(lines), functions=functions, doc=f"{doc} ({how})", local_size=threads,
                shared=shared, groups=dispatch(total, 1))


# ------------------------------------------------------------------------------------ cooperative matrix

def _coop_shared(cfg) -> tuple[int, int, int]:
    """uvec4 elements of the A and B tile buffers and of a separate output staging area."""
    bm, bn, bk, wm, wn, stages = cfg[:6]
    a, b = stages * bm * (bk // 8 + 1), stages * bk * (bn // 8 + 1)
    staging = wm * wn * 64                       # a 16x16 f32 fragment per subgroup
    return max(a, 1), max(b, 1), 0 if staging <= a else staging


def _coop_config(req, k: KernelCtx, m: int, n: int, kk: int):
    """The cooperative-matrix tile for this matmul, or None when the kernel does not apply."""
    a, b = req.inputs
    if any(transposes(req)):
        return None                          # its 16-byte loads run along K of A and N of B
    if any(isinstance(d, Dim) for d in (m, n, kk)):
        return None                          # its tiles and fragments are planned for static extents
    if not (k.caps.coopmat and k.caps.float16 and k.caps.subgroup_size == 32 and a.dtype.name == "f16"
            and b.dtype.name == "f16" and kk % 8 == 0 and n % 8 == 0 and m >= 16 and n >= 16 and kk >= 16):
        return None
    fitting = []
    for cfg in TUNE["coop_tiles"]:
        bm, bn, bk, wm, wn, stages = cfg[:6]
        if wm * wn * 32 > k.caps.max_wg or sum(_coop_shared(cfg)) * 16 > k.caps.max_shared:
            continue
        if stages == 0 and (m % bm or n % bn or kk % 16):
            continue                         # fragments straight from memory: whole tiles only
        if m >= bm and n >= bn:
            return cfg
        fitting.append(cfg)
    return fitting[-1] if fitting else None


def _gemm_coop(req, k: KernelCtx, batch_shape, a_shape, b_shape, m, n, kk, doc, cfg) -> Body:
    """C[bt] in BM x BN tiles per workgroup of WM x WN subgroups; each subgroup owns a
    (BM/WM) x (BN/WN) block of 16x16 f32 accumulator fragments. A and B tiles (depth BK) are
    copied to shared memory as uvec4 (8 halves; rows padded by 16 bytes), in two stages (the next
    tile goes to the other buffer: one barrier per tile) or one (two barriers per tile); either
    way the next tile's global loads are in flight during the current tile's MMAs."""
    k.need("coopmat", "an f16 matrix multiply with cooperative matrices")
    k.need("float16", "cooperative matrices of f16")
    out = req.output
    bm, bn, bk, wm, wn, stages = cfg[:6]
    fw = cfg[6] if len(cfg) > 6 else 16              # fragment width: 16x16x16 (or 16x8x16) MMAs
    threads = wm * wn * 32
    fm, fn = bm // wm // 16, bn // wn // fw          # fragments per subgroup
    sa, sb = bk // 8 + 1, bn // 8 + 1                # padded shared rows, in uvec4
    n_sa, n_sb, n_st = _coop_shared(cfg)
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    per_batch = tiles_m * tiles_n
    nb = _prod(batch_shape)
    total = nb * per_batch
    ntiles = -(-kk // bk)
    group = max(1, TUNE["gemm_group"])
    a_off = _batch_offset(batch_shape, a_shape, m * kk)
    b_off = _batch_offset(batch_shape, b_shape, kk * n)
    units_a, units_b = bm * bk // 8, bk * bn // 8
    la, lb = -(-units_a // threads), -(-units_b // threads)
    fa = "fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>"
    fbt = f"fcoopmatNV<16, gl_ScopeSubgroup, 16, {fw}>"
    fc = f"fcoopmatNV<32, gl_ScopeSubgroup, 16, {fw}>"

    def load(k0: str) -> list[str]:
        def a_unit(e: int, u: str) -> str:
            row, q = f"row0 + {u} / {bk // 8}u", f"{k0} + ({u} % {bk // 8}u) * 8u"
            return (f"ra{e} = (({row}) < {m}u && ({q}) < {kk}u) ? oi_av[(ao + ({row}) * {kk}u + ({q})) >> 3] "
                    ": uvec4(0u);")

        def b_unit(e: int, u: str) -> str:
            q, c = f"{k0} + {u} / {bn // 8}u", f"col0 + ({u} % {bn // 8}u) * 8u"
            return (f"rb{e} = (({q}) < {kk}u && ({c}) < {n}u) ? oi_bv[(bo + ({q}) * {n}u + ({c})) >> 3] "
                    ": uvec4(0u);")
        return tile_units(units_a, threads, a_unit) + tile_units(units_b, threads, b_unit)

    def store(buf: str) -> list[str]:
        return (tile_units(units_a, threads, lambda e, u:
                           f"oi_sa[{buf} * {bm * sa}u + ({u} / {bk // 8}u) * {sa}u + {u} % {bk // 8}u] = ra{e};")
                + tile_units(units_b, threads, lambda e, u:
                             f"oi_sb[{buf} * {bk * sb}u + ({u} / {bn // 8}u) * {sb}u + {u} % {bn // 8}u] = rb{e};"))

    def compute(buf: str) -> list[str]:
        body = [f"for (uint q = 0u; q < {bk // 16}u; ++q) {{"]
        for i in range(fm):
            body.append(f"    coopMatLoadNV(fa{i}, oi_sa, {buf} * {bm * sa}u + (wr + {i * 16}u) * {sa}u + q * 2u, "
                        f"{sa}u, false);")
        for j in range(fn):
            body.append(f"    coopMatLoadNV(fb{j}, oi_sb, {buf} * {bk * sb}u + q * {16 * sb}u + (wc + {j * fw}u) / 8u, "
                        f"{sb}u, false);")
        for i in range(fm):
            for j in range(fn):
                body.append(f"    acc{i}_{j} = coopMatMulAddNV(fa{i}, fb{j}, acc{i}_{j});")
        return body + ["}"]

    def ind(xs: list[str], d: int = 1) -> list[str]:
        return ["    " * d + x for x in xs]

    lines = ["uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;",
             f"if (g >= {total}u) return;",
             f"uint bt = g / {per_batch}u, t = g % {per_batch}u;",
             f"uint first = (t / {group * tiles_n}u) * {group}u;",
             f"uint gsz = min({tiles_m}u - first, {group}u);",
             f"uint tr = first + (t % {group * tiles_n}u) % gsz, tc = (t % {group * tiles_n}u) / gsz;",
             f"uint row0 = tr * {bm}u, col0 = tc * {bn}u;",
             "uint lid = gl_LocalInvocationID.x, sg = lid / 32u, lane = lid % 32u;",
             f"uint wr = (sg / {wn}u) * {bm // wm}u, wc = (sg % {wn}u) * {bn // wn}u;",
             f"uint ao = {a_off}, bo = {b_off};"]
    lines += [f"{fc} acc{i}_{j} = {fc}(0.0);" for i in range(fm) for j in range(fn)]
    lines += [f"{fa} fa{i};" for i in range(fm)] + [f"{fbt} fb{j};" for j in range(fn)]
    if stages:
        lines += [f"uvec4 ra{e} = uvec4(0u);" for e in range(la)] + [f"uvec4 rb{e} = uvec4(0u);" for e in range(lb)]
    if stages == 0:
        # no shared memory: each subgroup loads its fragments from the buffers (L1 / L2 serve the
        # reuse across subgroups); whole tiles only (see _coop_config)
        lines.append(f"for (uint q = 0u; q < {kk // 16}u; ++q) {{")
        for i in range(fm):
            lines.append(f"    coopMatLoadNV(fa{i}, oi_av, (ao + (row0 + wr + {i * 16}u) * {kk}u + q * 16u) >> 3, "
                         f"{kk // 8}u, false);")
        for j in range(fn):
            lines.append(f"    coopMatLoadNV(fb{j}, oi_bv, (bo + q * {16 * n}u + col0 + wc + {j * fw}u) >> 3, "
                         f"{n // 8}u, false);")
        for i in range(fm):
            for j in range(fn):
                lines.append(f"    acc{i}_{j} = coopMatMulAddNV(fa{i}, fb{j}, acc{i}_{j});")
        lines.append("}")
    else:
        lines += load("0u")
    if stages == 0:
        pass
    elif stages == 2:
        lines += store("0u") + ["barrier();"]
        lines.append(f"for (uint kt = 0u; kt < {ntiles}u; ++kt) {{")
        lines.append("    uint cur = kt & 1u;")
        if ntiles > 1:
            lines += ind([f"if (kt + 1u < {ntiles}u) {{"] + ind(load(f"(kt + 1u) * {bk}u")) + ["}"])
        lines += ind(compute("cur"))
        if ntiles > 1:
            lines += ind([f"if (kt + 1u < {ntiles}u) {{"] + ind(store("(cur ^ 1u)")) + ["}"])
        lines += ["    barrier();", "}"]
    else:
        lines.append(f"for (uint kt = 0u; kt < {ntiles}u; ++kt) {{")
        lines += ind(["if (kt > 0u) barrier();"] + store("0u") + ["barrier();"])
        if ntiles > 1:
            lines += ind([f"if (kt + 1u < {ntiles}u) {{"] + ind(load(f"(kt + 1u) * {bk}u")) + ["}"])
        lines += ind(compute("0u"))
        lines += ["}", "barrier();"]
    direct = m % bm == 0 and n % bn == 0 and out.dtype.name == "f32"
    stage = "oi_st" if n_st else "oi_sa"
    for i in range(fm):
        for j in range(fn):
            if direct:
                lines.append(f"coopMatStoreNV(acc{i}_{j}, out_, (bt * {m}u + row0 + wr + {i * 16}u) * {n}u + col0 + "
                             f"wc + {j * fw}u, {n}u, false);")
                continue
            # edge tiles (or another output dtype): through shared memory, element by element
            lines.append(f"coopMatStoreNV(acc{i}_{j}, {stage}, sg * 64u, {fw // 4}u, false);")
            lines.append("barrier();")
            lines.append(f"for (uint e = lane; e < {16 * fw}u; e += 32u) {{")
            lines.append(f"    uint r = row0 + wr + {i * 16}u + e / {fw}u, c = col0 + wc + {j * fw}u + e % {fw}u;")
            lines.append(f"    float v = uintBitsToFloat({stage}[sg * 64u + e / 4u][e % 4u]);")
            lines.append(f"    if (r < {m}u && c < {n}u) out_[(bt * {m}u + r) * {n}u + c] = "
                         f"{k.store(out.dtype, 'v', 'float')};")
            lines.append("}")
            lines.append("barrier();")
    decl = [buffer_view(0, "oi_av", "uvec4"), buffer_view(1, "oi_bv", "uvec4"), f"shared uvec4 oi_sa[{n_sa}];",
            f"shared uvec4 oi_sb[{n_sb}];"]
    if n_st and not direct:
        decl.append(f"shared uvec4 oi_st[{n_st}];")
    how = (f"cooperative-matrix GEMM: {bm}x{bn} tiles of depth {bk}, {stages} shared stage(s), {wm}x{wn} subgroups "
           f"of {fm}x{fn} 16x{fw}x16 f16 -> f32 fragments")
    return Body(main="\n".join(lines), doc=f"{doc} ({how})", local_size=threads, shared="\n".join(decl),
                groups=dispatch(total, 1))


# ------------------------------------------------------------------------------------ f64 tiles

def _tiled(req, k: KernelCtx, ct, batch_shape, a_shape, b_shape, m, n, kk, doc) -> Body:
    """C[bt] tile (TILE x TILE) per workgroup of TILE*TILE invocations; A/B tiles in shared
    memory; each invocation sums its element's products in k order."""
    elem = 8 if ct == "double" else 4
    tile = 16
    while tile > 4 and (tile * tile > k.caps.max_wg or 2 * tile * tile * elem > k.caps.max_shared):
        tile //= 2
    t = req.inputs[0].dtype
    ta, tb = transposes(req)
    tm, tn = -(-m // tile), -(-n // tile)
    nbatch = 1
    for d in batch_shape:
        nbatch *= d
    a_off = _batch_offset(batch_shape, a_shape, m * kk)
    b_off = _batch_offset(batch_shape, b_shape, kk * n)
    zero = lit(ct, 0)
    main = f"""uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
uint bt = g / {tm * tn}u;
uint row0 = ((g / {tn}u) % {tm}u) * {tile}u, col0 = (g % {tn}u) * {tile}u;
uint lr = gl_LocalInvocationID.x / {tile}u, lc = gl_LocalInvocationID.x % {tile}u;
uint row = row0 + lr, col = col0 + lc;
uint ao = {a_off}, bo = {b_off};
{ct} s = {zero};
for (uint q0 = 0u; q0 < {kk}u; q0 += {tile}u) {{
    uint qa = q0 + lc, qb = q0 + lr;
    oi_ta[lr][lc] = (row < {m}u && qa < {kk}u) ? {k.load(t, 'in0', 'ao + ' + _a_at(ta, m, kk, 'row', 'qa'))} : {zero};
    oi_tb[lr][lc] = (qb < {kk}u && col < {n}u) ? {k.load(t, 'in1', 'bo + ' + _b_at(tb, n, kk, 'qb', 'col'))} : {zero};
    barrier();
    uint lim = min({tile}u, {kk}u - q0);
    for (uint q = 0u; q < lim; ++q) s = s + oi_ta[lr][q] * oi_tb[q][lc];
    barrier();
}}
if (bt < {nbatch}u && row < {m}u && col < {n}u)
    out_[(bt * {m}u + row) * {n}u + col] = {k.store(req.output.dtype, 's', ct)};"""
    return Body(main=main, doc=doc + f" (tiled {tile}x{tile}, shared memory)", local_size=tile * tile,
                shared=f"shared {ct} oi_ta[{tile}][{tile}];\nshared {ct} oi_tb[{tile}][{tile}];",
                groups=dispatch(nbatch * tm * tn, 1))
