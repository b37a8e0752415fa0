"""Composite real-model ops in portable C: softmax, log_softmax, layer_norm, rms_norm, rope, sdpa,
conv1d/conv2d, max_pool2d/avg_pool2d, lrn (openinfer/reference/kernels/nn.py). Each computes in `float`
(`double` for f64) from start to end and rounds once on store.

When every float operand is f32 (or every one f64) the heavy ones take kernels written for the
compiler's auto-vectoriser, their sums reordered (equal within the ops' tolerances; the reference's
NumPy sums are pairwise anyway) and large ones split over the context's pool:

- conv1d/conv2d: conv_tiled.c.j2, a direct convolution over a zero-padded copy of the input with
  [output channels x output columns] accumulator tiles in registers;
- sdpa with 4+ query rows (and up to SDPA_STACK_KEYS keys): sdpa_tiled.c.j2, QK^T and PV as
  register-tiled small GEMMs with a vectorisable exp in between;
- softmax / log_softmax over the last axis, layer_norm / rms_norm: softmax_rows.c.j2 and
  norm_rows.c.j2, lane-wise partial sums.

f16 / bf16 / f8 keep the sequential kernels (conv.c.j2, sdpa.c.j2, softmax.c.j2, norm.c.j2) and
their summation order, as do decoding sdpa (fewer query rows) and softmax over an inner axis.
Pooling (pool.c.j2) keeps every type's order and vectorises the outputs whose window has no
padding. lrn (lrn.c.j2) sums each window in channel order for every type."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from ....dims import Dim, capacity
from ....errors import SynthesisError
from ....ops.types import TensorType
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import ConvGeometry, contiguous_strides, numel
from .common import compute_ctype, ctype, fn, literal_ct, load, offset, par_rows, scalar_attr, static_attr, store
from .registry import KernelText, emit_kernel, family, prototype

#: sdpa keeps a query row's scores on the stack up to this many keys, then switches to an
#: online softmax (running max, rescaled sums) that needs no per-row buffer.
SDPA_STACK_KEYS = 4096


#: sdpa takes the register-tiled kernel (K transposed into scratch once per chunk of query rows)
#: from this many query rows; fewer (decoding) keep the row-at-a-time kernel.
_SDPA_TILED_ROWS = 4
#: sdpa work units wanted at least (batch entries x chunks of query rows)
_SDPA_UNITS = 4
#: Vector registers' worth of accumulators the register-tiled conv keeps, by vector width. 16 of
#: AVX-512's 32 zmm registers (tuned on Zen 4), and of the 16 xmm of portable C's 4-lane SSE2
#: (CNN example on Zen 3, convs 1 / 2: 16 -> 62 / 138 us, 6 -> 133 / 348). AVX2's 16 ymm
#: registers take 6: with more, GCC's vectorised tile spills (Zen 3, AVX2, 1 thread, under load:
#: 16 -> 41 / 140 us, 12 -> 45 / 119, 8 -> 40 / 91, 6 -> 32 / 84, 4 -> 78 / 166; step 213 -> 144).
_ACC_VECTORS = {256: 6}
_ACC_VECTORS_DEFAULT = 16
#: Output channels per conv tile at most (the tile's inner loop is unrolled over them).
_MAX_OCB = 16
#: Multiply-adds below which a kernel stays on the calling thread, and the least a pool claim
#: should carry. 2^18 multiply-adds take ~5 us on one Zen 4 core and ~15 us on a Zen 3 VM with
#: AVX2, several times what a parallel_for costs while the pool's workers spin between the
#: kernels of a step (measured: the CNN example's 16 -> 32 channel 3x3 conv, 1.2 M multiply-adds,
#: at 2 threads on Zen 4 25 -> 21 us, its step 42 -> 36 us, from 2^21; its 3 -> 16 channel conv,
#: 0.44 M, split from 2^18: the step on the Zen 3 VM at 2 threads 120 -> 106 us, best of 200).
_PAR_MACS = 1 << 18
#: Elements below which a row kernel runs on the calling thread (exp costs ~1 ns an element).
_PAR_ELEMS = 1 << 18
_PAR_ELEMS_MATH = 1 << 15
_GRAIN_MACS = 1 << 17
#: Weights up to which a parallel convolution's units run in row bands (conv_tiled.c.j2 `band`):
#: every band reads all the weights, so they should stay in the L1 data cache (32 KiB and up);
#: larger weights keep the channel-block order, which reuses one block's over all rows.
_BAND_WEIGHT_BYTES = 32 << 10


def _vector_bits(renderer) -> int:
    """The SIMD width the kernels are compiled for (the kernel family's; 128: SSE2 / NEON)."""
    return renderer.family.vector_bits


def _wide_float(req: KernelRequest) -> bool:
    """Every float operand and the output f32, or every one f64 (the paths whose sums may be
    reordered; f16 / bf16 / f8 keep the sequential kernels)."""
    names = {t.dtype.name for t in (*req.inputs, req.output) if t.dtype.is_float}
    return len(names) == 1 and names <= {"f32", "f64"} and not req.acc


def _minmax(ct: str, is_max: bool = True) -> str:
    if ct == "float":
        return "oi_maxf" if is_max else "oi_minf"
    return "oi_max_f64" if is_max else "oi_min_f64"


def _conv(expr: str, from_ct: str, to_ct: str) -> str:
    return expr if from_ct == to_ct else f"({to_ct}){expr}"


# ------------------------------------------------------------------------------------ softmax

@family("softmax", "log_softmax")
def emit_softmax(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    nd = len(x.shape)
    axis = static_attr(req, "axis") % nd
    n = x.shape[axis]
    outer, inner = numel(x.shape[:axis]), numel(x.shape[axis + 1:])
    idx = "base + j" if inner == 1 else f"base + j * {inner}"
    load_j = load(t, "in0", idx)
    log = req.op == "log_softmax"
    doc = f"{req.op} of {x} along axis {axis}"
    if inner == 1 and n > 0 and outer > 0 and _wide_float(req):
        lanes = _vector_bits(renderer) // (64 if ct == "double" else 32)

        def exp(arg: str) -> str:
            return f"{name}_exp({arg}, lo)" if ct == "float" else f"exp({arg})"
        return render("c/ops/softmax_rows.c.j2", proto=prototype(req, name), doc=doc, name=name, ct=ct, n=n,
                      rows=outer, lanes=lanes, block=256, exp=exp, log=log, log_fn=fn("log", ct),
                      aliased=req.aliased, neg_inf=literal_ct(ct, float("-inf")),
                      pos_inf=literal_ct(ct, float("inf")), nan_value=literal_ct(ct, float("nan")),
                      sizes=req.sizes, **par_rows(outer, n, _PAR_ELEMS_MATH))
    return render("c/ops/softmax.c.j2", proto=prototype(req, name), doc=doc, ct=ct, outer=outer, inner=inner, n=n,
                  neg_inf=literal_ct(ct, float("-inf")), max=_minmax(ct), load_j=load_j, exp=fn("exp", ct),
                  log=log, logf=fn("log", ct),
                  store_log=store(out, "out", idx, f"({load_j} - m) - lse", ct),
                  store_soft=store(out, "out", idx, f"{fn('exp', ct)}({load_j} - m) / s", ct))


# ------------------------------------------------------------------------------------ norms

@family("layer_norm", "rms_norm")
def emit_norm(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    nd = len(x.shape)
    axis = static_attr(req, "axis") % nd
    n = numel(x.shape[axis:])
    rms = req.op == "rms_norm"
    gamma = load(t, "in1", "j") if len(req.inputs) > 1 else None
    beta = load(t, "in2", "j") if len(req.inputs) > 2 else None
    doc = f"{req.op} of {x} over dims {axis}.. ({n} elements per row)" + \
        (", times gamma" if gamma else "") + (", plus beta" if beta else "")
    outer = numel(x.shape[:axis])
    if n > 0 and outer > 0 and _wide_float(req):
        return render("c/ops/norm_rows.c.j2", proto=prototype(req, name), doc=doc, name=name, ct=ct, n=n,
                      rows=outer, rms=rms, lanes=_vector_bits(renderer) // (64 if ct == "double" else 32),
                      count=literal_ct(ct, n), sqrt=fn("sqrt", ct), eps=scalar_attr(req, "eps", ct),
                      gamma=gamma is not None, beta=beta is not None, aliased=req.aliased,
                      sizes=req.sizes, **par_rows(outer, n, _PAR_ELEMS))
    return render("c/ops/norm.c.j2", proto=prototype(req, name), doc=doc, ct=ct, outer=numel(x.shape[:axis]), n=n,
                  rms=rms, load_x=load(t, "in0", "base + j"), count=literal_ct(ct, n), sqrt=fn("sqrt", ct),
                  eps=scalar_attr(req, "eps", ct), gamma=gamma, beta=beta,
                  store=store(out, "out", "base + j", "y", ct))


# ------------------------------------------------------------------------------------ rope

@family("rope")
def emit_rope(req: KernelRequest, name: str, renderer) -> str:
    x, pos = req.inputs
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    dh = x.shape[-1]
    half = dh // 2
    if pos.shape:
        seq, heads, batch = x.shape[-3], x.shape[-2], numel(x.shape[:-3])
        load_pos = load(pos.dtype, "in1", "s")
    else:   # one position for every row
        seq, heads, batch = 1, numel(x.shape[:-1]), 1
        load_pos = load(pos.dtype, "in1", "0")
    inter = bool(static_attr(req, "interleaved"))
    freqs, freq_expr = None, None
    if any(k == "theta" for k, _ in req.runtime_attrs):
        freq_expr = f"pow({scalar_attr(req, 'theta', 'double')}, (-2.0 * (double)i) / {float(dh)!r})"
    else:   # the reference's frequencies, bit for bit
        freqs = [repr(float(f)) for f in float(req.attr("theta")) ** (-2.0 * np.arange(half) / dh)]
    ia, ib = ("2 * i", "2 * i + 1") if inter else ("i", f"i + {half}")
    la, lb = load(t, "in0", "ia"), load(t, "in0", "ib")
    doc = f"rope of {x} at positions {pos} ({'interleaved pairs' if inter else 'rotate halves'})"
    # a single-precision FPU computes the angles in float (Device.single_precision): double would
    # be software routines there
    at = "float" if renderer is not None and renderer.device.single_precision and ct == "float" else "double"
    if at == "float" and freq_expr:
        freq_expr = f"powf({scalar_attr(req, 'theta', 'float')}, (-2.0f * (float)i) / {float(dh)!r}f)"
    return render("c/ops/rope.c.j2", proto=prototype(req, name), doc=doc, ct=ct, at=at, half=half, dh=dh, seq=seq,
                  heads=heads, batch=batch, load_pos=load_pos, freqs=freqs, freq_expr=freq_expr, ia=ia, ib=ib,
                  load_a=la, load_b=lb,
                  store_a=store(out, "out", "ia", "xa * cs[i] - xb * sn[i]", ct),
                  store_b=store(out, "out", "ib", "xb * cs[i] + xa * sn[i]", ct))


# ------------------------------------------------------------------------------------ sdpa

def _bstrides(shape: tuple[int, ...], batch: tuple[int, ...], mat: int) -> list[int]:
    """Per batch dim: the element stride of an operand whose leading dims are `shape` (0 where it
    broadcasts); `mat` elements per matrix."""
    pad = len(batch) - len(shape)
    full = (1,) * pad + tuple(shape)
    own = contiguous_strides(full)
    return [0 if full[d] == 1 else own[d] * mat for d in range(len(batch))]


@family("sdpa")
def emit_sdpa(req: KernelRequest, name: str, renderer) -> str:
    q, k, v = req.inputs[:3]
    mask = req.inputs[3] if len(req.inputs) > 3 else None
    t, out = q.dtype, req.output.dtype
    ct = compute_ctype(t)
    sq, dk = q.shape[-2:]
    sk, dv = v.shape[-2:]
    batch = tuple(req.output.shape[:-2])
    kv_batch = tuple(np.broadcast_shapes(k.shape[:-2], v.shape[:-2]))
    group = 1
    if kv_batch and batch and batch[-1] != kv_batch[-1] and kv_batch[-1] != 1:
        group = batch[-1] // kv_batch[-1]
    bvars = [f"b{d}" for d in range(len(batch))]

    def off(shape, mat, grouped=False):
        st = _bstrides(shape, batch, mat)
        terms = [f"{b} * {s}" for b, s in zip(bvars, st, strict=True) if s]
        if grouped and group > 1 and st and st[-1]:
            terms[-1] = f"({bvars[-1]} / {group}) * {st[-1]}"
        return " + ".join(terms) or "0"

    m_off, load_m, mask_kind = "0", None, None
    if mask is not None:
        full = (1,) * (len(batch) + 2 - len(mask.shape)) + tuple(mask.shape)
        mst = contiguous_strides(full)
        m_off = " + ".join(f"{b} * {mst[d]}" for d, b in enumerate(bvars) if full[d] != 1) or "0"
        mask_kind = "bool" if mask.dtype.name == "bool" else "add"

        def mask_load(i: str, j: str) -> str:
            mi = f"{i} * {mst[-2]}" if full[-2] != 1 else None
            mj = f"{j} * {mst[-1]}" if full[-1] != 1 else None
            m = load(mask.dtype, "in3", " + ".join(x for x in ("mb", mi, mj) if x))
            return _conv(m, compute_ctype(mask.dtype), ct) if mask_kind == "add" else m
        load_m = mask_load("i", "j")
    scale = scalar_attr(req, "scale", ct)
    causal = bool(static_attr(req, "causal"))
    mode = "scores" if capacity(sk) <= SDPA_STACK_KEYS else "online"   # (a dynamic sk: the scores of its bound fit)
    doc = (f"sdpa: q {q}, k {k}, v {v}" + (f", mask {mask}" if mask else "") + (", causal" if causal else "")
           + (f", {group} query heads per kv head" if group > 1 else "") + f" -> {req.output}")
    # a dynamic query or key count: the tiles are laid out at its bound, the last rows and keys
    # are a tail whose count is known at run time (dims of dk / dv / batch stay static)
    dynamic_dims = any(isinstance(d, Dim) for d in (dk, dv, *batch))
    if mode == "scores" and not dynamic_dims and capacity(sq) >= _SDPA_TILED_ROWS and _wide_float(req) \
            and not req.aliased and dk and dv:

        lanes = _vector_bits(renderer) // (64 if ct == "double" else 32)
        # rows x vectors of the register tiles (16 accumulators): 8 x 2 with 32 vector registers,
        # 4 x 4 with 16 (measured best of 4..16 rows on Zen 4 with GCC 12); a target's own tile
        # (`vector_tile`, f32: the renderer's `sdpa_tile`) has its own shape
        vector_tile = renderer.sdpa_tile if ct == "float" else None
        if vector_tile is not None:
            ib, jv = vector_tile
        else:
            ib, jv = (8, 2) if _vector_bits(renderer) == 512 else (4, 4)
        # query rows per work unit (each transposes its K once): all of them, unless that leaves
        # fewer than _SDPA_UNITS units for the pool
        nb = numel(batch)
        sq_cap = capacity(sq)
        nchunk = max(1, min(-(-sq_cap // ib), -(-_SDPA_UNITS // max(nb, 1))))
        rows = -(-sq_cap // nchunk)
        qc = -(-rows // ib) * ib
        nchunk = -(-sq // qc)           # (dynamic sq: the chunks of qc rows there are at run time)
        units = nb * nchunk
        # each thread's K^T and a block's scores, for the key count's bound (oi_kctx_scratch)
        scratch = (dk + ib) * capacity(sk) * (8 if ct == "double" else 4)
        text = render("c/ops/sdpa_tiled.c.j2", proto=prototype(req, name), doc=doc, name=name, ct=ct,
                      batch=[[b, n] for b, n in zip(bvars, batch, strict=True)], sq=sq, sk=sk, dk=dk, dv=dv,
                      q_off=off(q.shape[:-2], sq * dk), k_off=off(k.shape[:-2], sk * dk, True),
                      v_off=off(v.shape[:-2], sk * dv, True), o_off=offset(bvars, _bstrides(batch, batch, sq * dv)),
                      mask=mask_kind, mask_ctype=ctype(mask.dtype) if mask is not None else None, m_off=m_off,
                      load_m=mask_load("qi", "kj") if mask is not None else None, scale=scale, causal=causal,
                      causal_shift=f"({sk - sq})",
                      neg_inf=literal_ct(ct, float("-inf")), pos_inf=literal_ct(ct, float("inf")),
                      nan_value=literal_ct(ct, float("nan")), lanes=lanes, ib=ib,
                      jt=jv * lanes if isinstance(sk, Dim) else min(sk, jv * lanes),
                      dynamic_sq=isinstance(sq, Dim), dynamic_sk=isinstance(sk, Dim), sizes=req.sizes,
                      et=min(dv, jv * lanes), qc=qc, nchunk=nchunk, units=units,
                      parallel=capacity(units) > 1 and nb * sq_cap * capacity(sk) * (dk + dv) >= _PAR_MACS,
                      exp=f"{name}_exp" if ct == "float" else "exp", mac=f"{name.upper()}_MAC", fma=fn("fma", ct),
                      fast_macro="FP_FAST_FMAF" if ct == "float" else "FP_FAST_FMA",
                      vector_tile=vector_tile and "c/ops/sdpa_vector_tile.j2", tile_lanes=lanes,
                      tile_vec=vector_tile and renderer.tile_vec)
        return KernelText(text, scratch)
    oidx = f"ob + i * {dv} + e"
    return render("c/ops/sdpa.c.j2", proto=prototype(req, name), doc=doc, ct=ct, mode=mode,
                  batch=[[b, n] for b, n in zip(bvars, batch, strict=True)], sq=sq, sk=sk, dk=dk, dv=dv,
                  q_off=off(q.shape[:-2], sq * dk), k_off=off(k.shape[:-2], sk * dk, True),
                  v_off=off(v.shape[:-2], sk * dv, True), o_off=offset(bvars, _bstrides(batch, batch, sq * dv)),
                  has_mask=mask is not None, m_off=m_off, mask=mask_kind, load_m=load_m,
                  load_q=load(t, "in0", f"qb + i * {dk} + {{}}"), load_k=load(t, "in1", f"kb + j * {dk} + {{}}"),
                  lanes=t.name in ("f32", "f64") and dk >= 8,
                  load_v=load(t, "in2", f"vb + j * {dv} + e"), scale=scale, causal=causal,
                  causal_shift=f"({sk - sq})", neg_inf=literal_ct(ct, float("-inf")), max=_minmax(ct),
                  exp=fn("exp", ct), store_zero=store(out, "out", oidx, "0", ct),
                  store_acc=store(out, "out", oidx, "acc[e]", ct),
                  store_online=store(out, "out", oidx, "acc[e] / l", ct))


# ------------------------------------------------------------------------------------ conv, pool

def conv_tiled(req: KernelRequest) -> bool:
    """Whether a conv1d / conv2d request takes the register-tiled kernel (conv_tiled.c.j2). Its
    register blocking and padded copy are planned for a static plane: a dynamic length or height
    takes the direct loops (a dynamic batch keeps the tiled kernel)."""
    g = ConvGeometry.of(req, static_attr(req, "stride"), static_attr(req, "dilation"), static_attr(req, "padding"),
                        static_attr(req, "groups"))
    static_plane = not any(isinstance(d, Dim) for d in (g.h, g.w, g.oh, g.ow))
    return _wide_float(req) and not req.aliased and numel(req.output.shape) > 0 and static_plane


@family("conv1d", "conv2d")
def emit_conv(req: KernelRequest, name: str, renderer, epilogue: dict | None = None) -> str:
    """`epilogue` (the AVX targets, openinfer/targets/x86/renderer.py `_conv`): an element-wise chain over the
    sums alone, applied to each tile in registers before it is stored (tiled kernel only)."""
    x, wt = req.own_inputs[:2]
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    groups = static_attr(req, "groups")
    stride, dil, pad = static_attr(req, "stride"), static_attr(req, "dilation"), static_attr(req, "padding")
    g = ConvGeometry.of(req, stride, dil, pad, groups)
    h, w, o, kh, kw, oh, ow = g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow
    bias = len(req.own_inputs) > 2
    doc = (f"{req.op}: {x} * {wt}" + (" + bias" if bias else "") + f", stride {list(stride)}, "
           f"padding {list(pad)}, dilation {list(dil)}, groups {groups} -> {req.own_output}")
    if req.pool is not None:
        doc += f", then {req.pool.op} kernel {list(static_attr(req.pool, 'kernel'))} -> {req.output}"
    if conv_tiled(req):
        return _conv_tiled(req, name, renderer, doc, ct, bias, epilogue, **asdict(g))
    if req.pool is not None:
        raise SynthesisError(f"internal: {name} pools its result but takes the direct loops")
    return render("c/ops/conv.c.j2", proto=prototype(req, name), doc=doc, ct=ct, **asdict(g),
                  load_x=load(t, "in0", f"xg + ci * {h * w} + ih * {w} + iw"),
                  load_w=load(t, "in1", f"wo + ci * {kh * kw} + kh * {kw} + kw"),
                  bias=bias, load_b=load(t, "in2", "oc") if bias else "",
                  store=store(out, "out", f"((nb * {o} + oc) * {oh} + oh) * {ow} + ow", "acc", ct))


def _conv_tiled(req: KernelRequest, name: str, renderer, doc: str, ct: str, bias: bool, epilogue: dict | None, *,
                n, c, h, w, o, cg, og, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl) -> str:
    """conv_tiled.c.j2: register-tiled direct convolution over a zero-padded, phase-split copy of
    the input (f32 / f64)."""
    lanes = _vector_bits(renderer) // (64 if ct == "double" else 32)
    vector_tile = renderer.conv_tile if ct == "float" else None
    if vector_tile is not None and ow >= lanes:
        # the target's own tile (`vector_tile`): OCB x NV vectors, narrower rows in fewer vectors
        template, ocb_max, nv = vector_tile
        owt, ocb = min(nv, ow // lanes) * lanes, min(og, ocb_max)
    else:
        template = None
        # accumulator elements kept in registers
        budget = _ACC_VECTORS.get(_vector_bits(renderer), _ACC_VECTORS_DEFAULT) * lanes
        owt = min(ow, max(lanes, budget // 4 // lanes * lanes))
        ocb = max(1, min(og, _MAX_OCB, budget // (-(-owt // lanes) * lanes)))
    inside = (ow - 1) + (kw - 1) * dw < w and (oh - 1) * sh + (kh - 1) * dh < h
    padded = not (pt == 0 and pl == 0 and sw == 1 and inside)
    if padded:
        hp, lp = (oh - 1) * sh + (kh - 1) * dh + 1, ow + (kw - 1) * dw // sw
        phases = []
        for ph in range(sw):      # padded column q * sw + ph is input column q * sw + ph - pl
            lo = min(lp, max(0, -(-(pl - ph) // sw)))
            hi = max(lo, min(lp, -(-(w + pl - ph) // sw)))
            phases.append({"lo": lo, "hi": hi, "shift": ph - pl})
    else:
        hp, lp, phases = h, w, []
    rs = sw * lp
    nobg = -(-og // ocb)
    nob = nobg * (c // cg)
    # a unit is one output row, or (a pool after it) one pooled row: the pool's `rpu` rows
    pool = req.pool
    rpu, (urows, pw) = (static_attr(pool, "kernel")[0], pool.output.shape[2:]) if pool else (1, (oh, ow))
    units = n * nob * urows
    macs_unit = ocb * ow * cg * kh * kw * rpu
    parallel = capacity(units) * macs_unit >= _PAR_MACS and capacity(units) > 1   # (dynamic: at the bound)
    grain = max(1, -(-_GRAIN_MACS // macs_unit))
    band = parallel and o * cg * kh * kw * (8 if ct == "double" else 4) <= _BAND_WEIGHT_BYTES
    claim_pads = band and padded       # each claim pads the input rows of its band (else one copy)
    fma = fn("fma", ct)
    size = 8 if ct == "double" else 4
    # the padded copy lives in the calling thread's workspace (oi_kctx_scratch), for the batch's
    # bound; a pooled unit's convolution rows after it, in every thread's
    scratch = capacity(n) * c * hp * rs * size if padded else 0
    rows_at = -(-scratch // 64) * 64
    pool_kernel = ""
    if pool:
        scratch = rows_at + ocb * rpu * ow * size
        pool_kernel = pool_of_rows(pool, f"{name}_pool", rpu, ow, renderer)
    text = render("c/ops/conv_tiled.c.j2", proto=prototype(req, name), doc=doc, name=name, ct=ct, n=n, c=c, h=h,
                  w=w, o=o, cg=cg, og=og, kh=kh, kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt,
                  bias=bias, padded=padded, hp=hp, lp=lp, rs=rs, plane=hp * rs, phases=phases,
                  owt=owt, ocb=ocb, nobg=nobg, nob=nob, units=units, parallel=parallel, grain=grain, band=band,
                  claim_pads=claim_pads, ys=(rpu if pool else oh) * ow, pool=pool is not None,
                  pool_kernel=pool_kernel, rpu=rpu, urows=urows, pw=pw, rows_at=rows_at,
                  mac=f"{name.upper()}_MAC", fma=fma, fast_macro="FP_FAST_FMAF" if ct == "float" else "FP_FAST_FMA",
                  vector_tile=template, tile_lanes=lanes, tile_vec=template and renderer.tile_vec,
                  epi=epilogue, **({"v": renderer.vec, "sections": epilogue["sections"]} if epilogue else {}))
    return KernelText(text, scratch)


def pool_of_rows(pool: KernelRequest, name: str, rows: int, width: int, renderer) -> str:
    """A static function `name` that pools one channel's `rows` x `width` convolution rows into
    one pooled row: the target's own pooling kernel (the same values as the separate pool's) for
    that block, which the convolution calls for each channel of a unit."""

    block = replace(pool, inputs=(TensorType(pool.inputs[0].dtype, (1, 1, rows, width)),),
                    output=TensorType(pool.output.dtype, (1, 1, 1, pool.output.shape[3])))
    src = (renderer.kernel(block, name) if renderer is not None else emit_kernel(block, name, None)).definition
    # called from this file only: static, so the compiler may inline it into the unit loop
    return src.replace(f"oi_status {name}(", f"static oi_status {name}(", 1)


def _inside(n_out: int, stride: int, k: int, pad: int, size: int) -> tuple[int, int]:
    """[lo, hi): the outputs whose window of k cells (from o * stride - pad) lies inside [0, size)."""
    inside = [o for o in range(n_out) if o * stride - pad >= 0 and o * stride - pad + k <= size]
    return (inside[0], inside[-1] + 1) if inside else (0, 0)


def _inside_at_run_time(axis: str, n_out, stride: int, k: int, pad: int, size) -> tuple[str, str, str]:
    """_inside for a dynamic size: the names of the kernel's locals holding [lo, hi) and their
    declaration. The first output whose window starts inside is static; the last whose window
    ends inside is a run-time expression (at most n_out); both are clamped so that the borders
    [0, lo) and [hi, n_out) stay within the outputs when the window fits nowhere (a small size)."""
    lo, hi = -(-pad // stride), (size - k + pad) // stride + 1
    return (f"{axis}_lo", f"{axis}_hi", f"const int64_t {axis}_lo = {lo} < {n_out} ? {lo} : {n_out}, "
            f"{axis}_hi = {hi} < {axis}_lo ? {axis}_lo : {hi};")


@family("max_pool2d", "avg_pool2d")
def emit_pool(req: KernelRequest, name: str, renderer) -> str:
    return render("c/ops/pool.c.j2", **pool_context(req, name))


def pool_context(req: KernelRequest, name: str) -> dict:
    """What pool.c.j2 renders from (and the vector variants that extend it, templates/x86/pool.c.j2)."""
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    n, c, h, w = x.shape
    oh, ow = req.output.shape[2:]
    kh, kw = static_attr(req, "kernel")
    sh, sw = static_attr(req, "stride")
    pad = static_attr(req, "padding")
    is_max = req.op == "max_pool2d"
    if is_max:
        init, step, final = literal_ct(ct, float("-inf")), f"{name}_max(acc, v)", "acc"
    else:
        init, step = literal_ct(ct, 0), "acc + v"
        final = (f"acc / {literal_ct(ct, kh * kw)}" if static_attr(req, "count_include_pad")
                 else f"acc / ({ct})cnt")
    doc = f"{req.op}: {x}, kernel [{kh}, {kw}], stride [{sh}, {sw}], padding {list(pad)} -> {req.output}"
    # the outputs whose window lies inside: rows [ih_lo, ih_hi), columns [iw_lo, iw_hi) (at the
    # bounds: a dynamic size's inside grows with it, so there is none at run time if none there)
    ih_lo, ih_hi = _inside(capacity(oh), sh, kh, pad[0], capacity(h))
    iw_lo, iw_hi = _inside(capacity(ow), sw, kw, pad[1], capacity(w))
    inside_cols = iw_hi - iw_lo
    has_inside = ih_lo < ih_hi and iw_lo < iw_hi
    left_border, right_border = iw_lo > 0, iw_hi < capacity(ow)
    decls = []      # a dynamic axis: its inside at run time
    if isinstance(h, Dim):
        ih_lo, ih_hi, decl = _inside_at_run_time("ih", oh, sh, kh, pad[0], h)
        decls.append(decl)
    if isinstance(w, Dim):
        iw_lo, iw_hi, decl = _inside_at_run_time("iw", ow, sw, kw, pad[1], w)
        decls.append(decl)
        right_border = True
    return dict(proto=prototype(req, name), doc=doc, ct=ct, planes=n * c, h=h, w=w, oh=oh,
                ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pt=pad[0], pl=pad[1], init=init, step=step,
                use_cnt="cnt" in final, is_max=is_max, name=name, ut="uint32_t" if ct == "float" else "uint64_t",
                ih_lo=ih_lo, ih_hi=ih_hi, iw_lo=iw_lo, iw_hi=iw_hi, inside_decls=decls if has_inside else [],
                has_inside=has_inside, left_border=left_border, right_border=right_border, inside_cols=inside_cols,
                load_x=load(t, "in0", f"p * {h * w} + ih * {w} + iw"),
                load_inner=load(t, "in0", f"row + kh * {w} + ow * {sw} + kw"),
                store=store(out, "out", f"(p * {oh} + oh) * {ow} + ow", final, ct))


# ------------------------------------------------------------------------------------ lrn

@family("lrn")
def emit_lrn(req: KernelRequest, name: str, renderer) -> str:
    return render("c/ops/lrn.c.j2", **lrn_context(req, name))


def lrn_context(req: KernelRequest, name: str) -> dict:
    """What lrn.c.j2 renders from (and the vector variant that extends it, templates/x86/lrn.c.j2)."""

    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = compute_ctype(t)
    size = static_attr(req, "size")
    n, c, hw = x.shape[0], x.shape[1], numel(x.shape[2:])
    # alpha / size: computed in f64 and rounded to the compute type once (a run-time alpha too)
    scale = (f"({ct})(rt_alpha / {float(size)!r})" if any(a == "alpha" for a, _ in req.runtime_attrs)
             else literal_ct(ct, req.attr("alpha") / size))
    doc = f"lrn of {x} over windows of {size} channels -> {req.output}"
    return dict(proto=prototype(req, name), doc=doc, name=name, ct=ct, st=ctype(t), c=c, hw=hw, planes=n * c,
                lo=(size - 1) // 2, hi=size // 2, scale=scale, bias=scalar_attr(req, "bias", ct),
                beta=scalar_attr(req, "beta", ct), sizes=req.sizes,
                load_window=load(t, "g->x", f"entry + k * {hw} + j"),
                store=store(out, "g->y", "plane + j",
                            f"{load(t, 'g->x', 'plane + j')} / {fn('pow', ct)}(g->bias + g->scale * s, g->beta)", ct),
                **par_rows(n * c, hw, _PAR_ELEMS_MATH))
