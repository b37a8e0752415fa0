"""matmul in GLSL: NumPy matmul semantics (batch broadcast, 1-D operands), accumulating in the
reference's order and precision (openinfer/ops/kernels/reduce.py): each output element adds its
products in k order; f8/bf16/f16 running sums round to T after every add; a two-dtype `acc`
rounds (wraps) each product to its first dtype; bool is the OR of ANDs; integers wrap.

f32 / f64 products without a product dtype use a tiled kernel when the matrices are large enough
(a TILE x TILE output block per workgroup, A and B tiles staged in shared memory); the sums then
run in k order all the same.
"""

from __future__ import annotations

from ...dtypes import Kind
from ...synth.program import KernelRequest
from ..ckernels.common import contiguous_strides
from . import Body, family
from .reduce import NARROW, round_to
from .types import KernelCtx, lit


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


@family("matmul")
def emit_matmul(req: KernelRequest, k: KernelCtx) -> Body:
    a, b = req.inputs
    out = req.output
    t = a.dtype
    a_shape = (1,) + a.shape if len(a.shape) == 1 else a.shape
    b_shape = b.shape + (1,) if len(b.shape) == 1 else b.shape
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
    if (t.name in ("f32", "f64") and p == w and w == t and not out.dtype.is_packed and m >= 16 and n >= 16
            and kk >= 16):
        return _tiled(req, k, ct, batch_shape, a_shape, b_shape, m, n, kk, doc)
    narrow = w.name in NARROW
    lines = [f"uint bt = i / {m * n}u;", f"uint row = (i / {n}u) % {m}u;", f"uint col = i % {n}u;",
             f"uint ao = {a_off} + row * {kk}u;", f"uint bo = {b_off} + col;",
             f"{ct} s = {lit(ct, 0)};",
             f"for (uint q = 0u; q < {kk}u; ++q) {{",
             f"    {lct} x = {k.load(t, 'in0', 'ao + q', lct)};",
             f"    {lct} y = {k.load(t, 'in1', f'bo + q * {n}u', lct)};"]
    if narrow:
        # the reference's f32 product and sum, each rounded, then the sum rounded to T
        lines += [f"    precise {ct} pr = {product};", f"    precise {ct} s2 = {step};",
                  f"    s = {round_to(k, w, 's2', ct)};"]
    else:
        lines += [f"    {ct} pr = {product};", f"    s = {step};"]
    lines += ["}", "return s;"]
    return Body(value="\n".join(lines), vct=ct, doc=doc)


def _tiled(req, k: KernelCtx, ct, batch_shape, a_shape, b_shape, m, n, kk, doc) -> Body:
    """C[bt] tile (TILE x TILE) per workgroup of TILE*TILE invocations; A/B tiles in shared
    memory; each invocation sums its element's products in k order."""
    elem = 8 if ct == "double" else 4
    tile = 16
    while tile > 4 and (tile * tile > k.caps.max_wg or 2 * tile * tile * elem > k.caps.max_shared):
        tile //= 2
    t = req.inputs[0].dtype
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
    oi_ta[lr][lc] = (row < {m}u && qa < {kk}u) ? {k.load(t, 'in0', f'ao + row * {kk}u + qa')} : {zero};
    oi_tb[lr][lc] = (qb < {kk}u && col < {n}u) ? {k.load(t, 'in1', f'bo + qb * {n}u + col')} : {zero};
    barrier();
    uint lim = min({tile}u, {kk}u - q0);
    for (uint q = 0u; q < lim; ++q) s = s + oi_ta[lr][q] * oi_tb[q][lc];
    barrier();
}}
if (bt < {nbatch}u && row < {m}u && col < {n}u)
    out_[(bt * {m}u + row) * {n}u + col] = {k.store(req.output.dtype, 's', ct)};"""
    groups = nbatch * tm * tn
    gx = min(groups, 65535)
    return Body(main=main, doc=doc + f" (tiled {tile}x{tile}, shared memory)", local_size=tile * tile,
                shared=f"shared {ct} oi_ta[{tile}][{tile}];\nshared {ct} oi_tb[{tile}][{tile}];",
                groups=(gx, -(-groups // gx), 1))
