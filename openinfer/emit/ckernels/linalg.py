"""matmul in portable C: NumPy matmul semantics (batch broadcast, 1-D operands), accumulating in
the reference's order and precision (openinfer/ops/kernels/reduce.py)."""

from __future__ import annotations

from ...dtypes import Kind
from ...synth.program import KernelRequest
from ..env import render
from . import family, prototype
from .common import compute_ctype, contiguous_strides, load, store


@family("matmul")
def emit_matmul(req: KernelRequest, name: str, renderer) -> str:
    a, b = req.inputs
    out = req.output
    a_shape = (1,) + a.shape if len(a.shape) == 1 else a.shape
    b_shape = b.shape + (1,) if len(b.shape) == 1 else b.shape
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

    w = req.acc[-1] if req.acc else a.dtype
    p = req.acc[0] if req.acc else w
    ct = compute_ctype(w)
    xa = load(a.dtype, "in0", f"a_off + i * {k} + k")
    xb = load(b.dtype, "in1", f"b_off + k * {n} + j")
    if a.dtype.kind is Kind.BOOL:
        product = f"({xa}) & ({xb})"
        accumulate = "s | p"
    elif w.is_float:
        product = f"({ct})({xa}) * ({ct})({xb})"
        if p != w or w.name in ("f16", "bf16", "f8"):
            round_w = w if p == w else p
            product = f"oi_{round_w.name}_to_f32(oi_f32_to_{round_w.name}({product}))" if round_w.name in (
                "f16", "bf16", "f8") else product
        accumulate = (f"oi_{w.name}_to_f32(oi_f32_to_{w.name}(s + p))" if w.name in ("f16", "bf16", "f8")
                      else "s + p")
    else:
        product = f"({ct})((uint64_t)({xa}) * (uint64_t)({xb}))"
        if p != w:
            bits = p.bits
            cast = f"int{bits}_t" if p.is_signed else f"uint{bits}_t"
            product = f"({ct})({cast})(uint{bits}_t)(uint64_t)({product})"
        accumulate = f"({ct})((uint64_t)s + (uint64_t)p)"
    value = "s" if w == out.dtype else f"({compute_ctype(out.dtype)})s"
    return render("c/ops/matmul.c.j2", proto=prototype(req, name), batch=nbatch, m=m, n=n, k=k,
                  a_batch=batch_offset(a_shape, m * k), b_batch=batch_offset(b_shape, k * n), acc_ct=ct,
                  product=product, accumulate=accumulate,
                  store=store(out.dtype, "out", f"bt * {m * n} + i * {n} + j", value))
