"""matmul and dequant_matmul in portable C: NumPy matmul semantics (batch broadcast, 1-D operands; transpose_a /
transpose_b read the operand as stored, indexing it with the last two dims swapped), accumulating in
the reference's order and precision (openinfer/reference/kernels/reduce.py): each output element adds
its products in k order; f8/bf16/f16 running sums round to T after every add; a two-dtype `acc`
rounds (wraps) each product to its first dtype; bool is the OR of ANDs; integers wrap."""

from __future__ import annotations

from ....dtypes import Kind
from ....ops.shapes import matmul_operand_shapes
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import contiguous_strides
from .common import NARROW, compute_ctype, literal_ct, load, round_to, store
from .registry import family, prototype


@family("matmul")
def emit_matmul(req: KernelRequest, name: str, renderer) -> str:
    a, b = req.inputs
    out = req.output
    t = a.dtype
    ta, tb = bool(req.attr("transpose_a")), bool(req.attr("transpose_b"))
    a_shape, b_shape = matmul_operand_shapes(a.shape, b.shape, ta, tb)
    a_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    if len(a.shape) >= 2 and len(b.shape) >= 2:
        batch_shape = out.shape[:-2]
    elif len(a.shape) == 1 and len(b.shape) == 1:
        batch_shape = ()
    else:   # one vector operand: its matrix dim was squeezed from the output
        batch_shape = out.shape[:-1]
    nbatch = 1
    for d in batch_shape:
        nbatch *= d

    def batch_offset(shape, mat_elems):
        lead = shape[:-2]
        pad = len(batch_shape) - len(lead)
        full = (1,) * pad + tuple(lead)
        bstr = contiguous_strides(batch_shape)
        own = contiguous_strides(full)
        terms = []
        for d in range(len(batch_shape)):
            if full[d] == 1:
                continue
            terms.append(f"((bt / {bstr[d]}) % {batch_shape[d]}) * {own[d] * mat_elems}")
        return " + ".join(terms) or "0"

    w = req.acc[-1] if req.acc else t      # the running sum's dtype
    p = req.acc[0] if req.acc else w       # the products' dtype
    ct, lct = compute_ctype(w), compute_ctype(p)
    lt = compute_ctype(t)
    # a transposed operand is read as stored: a[k, i] and b[j, k] of each batch item
    load_a = load(t, "in0", f"a_off + k * {m} + i" if ta else f"a_off + i * {k} + k")
    load_b = load(t, "in1", f"b_off + j * {k} + k" if tb else f"b_off + k * {n} + j")
    if lt != lct:
        load_a, load_b = f"({lct}){load_a}", f"({lct}){load_b}"
    if t.kind is Kind.BOOL:
        product, step = "(x & y)", "(s | ({p}))"
    else:
        if p.is_float or lct == "uint64_t":
            product = "x * y"
        else:
            product = "(int64_t)((uint64_t)x * (uint64_t)y)"
        if p != w:
            product = f"({ct}){round_to(p, product, lct)}"
        if w.is_float or ct == "uint64_t":
            step = "s + {p}"
        else:
            step = "(int64_t)((uint64_t)s + (uint64_t){p})"
    doc = (f"matmul: {t.name}{list(a.shape)}{'^T' if ta else ''} @ {t.name}{list(b.shape)}{'^T' if tb else ''} "
           f"-> {out.dtype.name}{list(out.shape)}"
           + (f", products in {p.name}, sums in {w.name}" if req.acc else ""))
    common = dict(proto=prototype(req, name), doc=doc, batch=nbatch, m=m, n=n, k=k, ct=ct, lct=lct,
                  a_batch=batch_offset(a_shape, m * k), b_batch=batch_offset(b_shape, k * n), load_a=load_a,
                  load_b=load_b)
    zero = literal_ct(ct, 0)
    if out.dtype == w:
        # the output holds the running sums (stored as w: narrow floats round after every add)
        return render("c/ops/matmul.c.j2", mode="rows", **common,
                      init_store=store(out.dtype, "out", f"o_off + i * {n} + j", zero, ct),
                      load_s=load(out.dtype, "out", "o"),
                      store_step=store(out.dtype, "out", "o", step.format(p=product), ct))
    s_next = step.format(p=product)
    if w.name in NARROW:
        s_next = round_to(w, s_next, ct)
    return render("c/ops/matmul.c.j2", mode="dot", **common, init=zero, step=s_next,
                  store=store(out.dtype, "out", f"o_off + i * {n} + j", "s", ct))


@family("dequant_matmul")
def emit_dequant_matmul(req: KernelRequest, name: str, renderer) -> str:
    """x[M, K] @ dequantize(w[K, N]): the sums of x * (w - zero_point) run in the output row
    (k-j order: w is read row by row, contiguously), then each column is multiplied by its scale;
    a narrow output (f16, bf16, f8) keeps one f32 sum per element instead (j-k order)."""
    x, w, scale = req.inputs[:3]
    t, wt = x.dtype, w.dtype
    k, n = w.shape
    m = x.shape[0] if len(x.shape) == 2 else 1
    ct = compute_ctype(t)
    per_channel = scale.numel > 1
    zp = (f"(int64_t)in3[{'j' if per_channel else '0'}]" if len(req.inputs) > 3 else None)
    wv = load(wt, "in1", f"k * {n} + j")
    qv = f"({ct})((int64_t){wv} - {zp})" if zp else f"({ct}){wv}"   # u8/u4 load as uint64_t
    sv = f"in2[{'j' if per_channel else '0'}]"
    doc = (f"dequant_matmul: {t.name}{list(x.shape)} @ dequantize({wt.name}{list(w.shape)}, "
           f"{'per-channel' if per_channel else 'per-tensor'} scale{', zero point' if zp else ''}) "
           f"-> {req.output.dtype.name}{list(req.output.shape)}")
    rows = t.name in ("f32", "f64")
    return render("c/ops/dequant_matmul.c.j2", proto=prototype(req, name), doc=doc, m=m, n=n, k=k, ct=ct,
                  rows=rows, load_x=load(t, "in0", f"i * {k} + k"), qv=qv, sv=sv,
                  store=store(req.output.dtype, "out", f"i * {n} + j", f"s * ({ct}){sv}", ct))
