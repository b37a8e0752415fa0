"""Composite real-model ops in GLSL: softmax, log_softmax, layer_norm, rms_norm, rope, sdpa,
conv1d/conv2d, max_pool2d/avg_pool2d, lrn (openinfer/reference/kernels/nn.py). Each computes in f32 (f64
for f64) from start to end and rounds once on store; exp/log/cos/sin are oi_common.glsl's
fdlibm ports. f32 softmax (last axis), norms and sdpa give a workgroup each row (rows.py); other
dtypes give one invocation a whole row (rope: a pair of elements), and sdpa, conv, pooling and
lrn one output element per invocation.
"""

from __future__ import annotations

from dataclasses import astuple

import numpy as np

from ....dims import capacity
from ....synth.program import KernelRequest
from ...geometry import ConvGeometry, contiguous_strides, numel
from . import rows as rows_
from .linalg import buffer_view, rope_frequencies
from .registry import Body, family
from .types import KernelCtx, lit


def _fns(ct: str) -> dict[str, str]:
    if ct == "double":
        return {"exp": "oi_exp_d", "log": "oi_log_d", "max": "oi_max_d", "inf": "OI_INF_D"}
    return {"exp": "oi_expf", "log": "oi_logf", "max": "oi_maxf", "inf": "OI_INF"}


# ------------------------------------------------------------------------------------ softmax

@family("softmax", "log_softmax")
def emit_softmax(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = k.ct(t)
    f = _fns(ct)
    nd = len(x.shape)
    axis = k.static("axis") % nd
    n = x.shape[axis]
    outer, inner = numel(x.shape[:axis]), numel(x.shape[axis + 1:])
    idx = "base + j" if inner == 1 else f"base + j * {inner}u"
    xj = k.load(t, "in0", idx)
    log = req.op == "log_softmax"
    value = "(v - m) - lse" if log else f"{f['exp']}(v - m) / s"
    if t.name == "f32" and inner == 1:
        return _softmax_rows(req, k, n, outer, value, log)
    main = f"""uint base = (u / {inner}u) * {n * inner}u + u % {inner}u;
{ct} m = -{f['inf']};
for (uint j = 0u; j < {n}u; ++j) m = {f['max']}(m, {xj});
{ct} s = {lit(ct, 0)};
for (uint j = 0u; j < {n}u; ++j) s = s + {f['exp']}({xj} - m);
{ct} lse = {f['log'] + '(s)' if log else lit(ct, 0)};
for (uint j = 0u; j < {n}u; ++j) {{
    {ct} v = {xj};
    v = {value};
    out_[{idx}] = {k.store(out, 'v', ct)};
}}"""
    return Body(main=main, units=outer * inner, doc=f"{req.op} of {x} along axis {axis}")


def _softmax_rows(req: KernelRequest, k: KernelCtx, n: int, rows: int, value: str, log: bool) -> Body:
    """f32 along the last axis: a workgroup per row (rows.py); max and sum of exponentials as
    strided partials and trees."""
    wg = rows_.row_wg(k, n)
    each = f"for (uint j = lid; j < {n}u; j += {wg}u)"
    lines = rows_.header(rows) + [f"uint base = row * {n}u;", "float m = -OI_INF;",
                                  f"{each} m = oi_maxf(m, in0[base + j]);", "oi_red[lid] = m;"]
    lines += rows_.tree(wg, "oi_red[a] = oi_maxf(oi_red[a], oi_red[b]);")
    lines += ["m = oi_red[0];", "barrier();", "float s = 0.0;", f"{each} s += oi_expf(in0[base + j] - m);",
              "oi_red[lid] = s;"]
    lines += rows_.tree(wg, "oi_red[a] += oi_red[b];")
    lines += ["s = oi_red[0];", f"float lse = {'oi_logf(s)' if log else '0.0'};",
              f"{each} {{", "    float v = in0[base + j];", f"    v = {value};",
              f"    out_[base + j] = {k.store(req.output.dtype, 'v', 'float')};", "}"]
    return Body(main="\n".join(lines), local_size=wg, shared=f"shared float oi_red[{wg}];",
                groups=rows_.groups(rows), doc=f"{req.op} of {req.inputs[0]} along the last axis "
                f"(a workgroup of {wg} per row)")


# ------------------------------------------------------------------------------------ norms

@family("layer_norm", "rms_norm")
def emit_norm(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    ct = k.ct(t)
    nd = len(x.shape)
    axis = k.static("axis") % nd
    n = numel(x.shape[axis:])
    rms = req.op == "rms_norm"
    eps = k.attr("eps", ct)
    xj = k.load(t, "in0", "base + j")
    cnt = lit(ct, n)
    if t.name == "f32":
        return _norm_rows(req, k, n, numel(x.shape[:axis]), rms, eps)
    lines = [f"uint base = u * {n}u;", f"{ct} s = {lit(ct, 0)};"]
    if rms:
        lines += [f"for (uint j = 0u; j < {n}u; ++j) {{ {ct} v = {xj}; s = s + v * v; }}",
                  f"{ct} r = sqrt(s / {cnt} + {eps});"]
        y = f"{xj} / r"
    else:
        lines += [f"for (uint j = 0u; j < {n}u; ++j) s = s + {xj};",
                  f"{ct} mean = s / {cnt};",
                  f"{ct} q = {lit(ct, 0)};",
                  f"for (uint j = 0u; j < {n}u; ++j) {{ {ct} c = {xj} - mean; q = q + c * c; }}",
                  f"{ct} r = sqrt(q / {cnt} + {eps});"]
        y = f"({xj} - mean) / r"
    if len(req.inputs) > 1:
        y = f"{y} * {k.load(t, 'in1', 'j')}"
    if len(req.inputs) > 2:
        y = f"{y} + {k.load(t, 'in2', 'j')}"
    lines += [f"for (uint j = 0u; j < {n}u; ++j) {{", f"    {ct} y = {y};",
              f"    out_[base + j] = {k.store(out, 'y', ct)};", "}"]
    doc = f"{req.op} of {x} over dims {axis}.. ({n} elements per row)"
    return Body(main="\n".join(lines), units=numel(x.shape[:axis]), doc=doc)


def _norm_rows(req: KernelRequest, k: KernelCtx, n: int, rows: int, rms: bool, eps: str) -> Body:
    """f32: a workgroup per row (rows.py); the sums as strided partials and trees."""
    wg = rows_.row_wg(k, n)
    each = f"for (uint j = lid; j < {n}u; j += {wg}u)"
    cnt = lit("float", n)
    lines = rows_.header(rows) + [f"uint base = row * {n}u;", "float s = 0.0;"]
    if rms:
        lines += [f"{each} {{ float v = in0[base + j]; s += v * v; }}", "oi_red[lid] = s;"]
        lines += rows_.tree(wg, "oi_red[a] += oi_red[b];")
        lines.append(f"float r = sqrt(oi_red[0] / {cnt} + {eps});")
        y = "in0[base + j] / r"
    else:
        lines += [f"{each} s += in0[base + j];", "oi_red[lid] = s;"]
        lines += rows_.tree(wg, "oi_red[a] += oi_red[b];")
        lines += [f"float mean = oi_red[0] / {cnt};", "barrier();", "float q = 0.0;",
                  f"{each} {{ float c = in0[base + j] - mean; q += c * c; }}", "oi_red[lid] = q;"]
        lines += rows_.tree(wg, "oi_red[a] += oi_red[b];")
        lines.append(f"float r = sqrt(oi_red[0] / {cnt} + {eps});")
        y = "(in0[base + j] - mean) / r"
    for i, op in ((1, "*"), (2, "+"))[:len(req.inputs) - 1]:
        y = f"{y} {op} {k.load(req.inputs[i].dtype, f'in{i}', 'j', 'float')}"
    lines += [f"{each} {{", f"    float y = {y};", f"    out_[base + j] = {k.store(req.output.dtype, 'y', 'float')};",
              "}"]
    return Body(main="\n".join(lines), local_size=wg, shared=f"shared float oi_red[{wg}];",
                groups=rows_.groups(rows), doc=f"{req.op} of {req.inputs[0]} ({n} elements per row, "
                f"a workgroup of {wg} per row)")


# ------------------------------------------------------------------------------------ rope

@family("rope")
def emit_rope(req: KernelRequest, k: KernelCtx) -> Body:
    x, pos = req.inputs
    t, out = x.dtype, req.output.dtype
    ct = k.ct(t)
    k.need("fp64", "rope's angles (pos * freq, computed in f64 as the reference)")
    dh = x.shape[-1]
    half = dh // 2
    if pos.shape:
        seq, heads, batch = x.shape[-3], x.shape[-2], numel(x.shape[:-3])
        load_pos = k.load(pos.dtype, "in1", "s")
    else:
        seq, heads, batch = 1, numel(x.shape[:-1]), 1
        load_pos = k.load(pos.dtype, "in1", "0u")
    inter = bool(k.static("interleaved"))
    functions = ""
    if k.runtime_dtype("theta") is not None:
        theta = k.attr("theta", "double")
        freq = f"oi_exp_d(oi_log_d({theta}) * ((-2.0LF * double(ii)) / {float(dh)!r}LF))"
    else:
        functions, freq = rope_frequencies(req), "OI_FREQ[ii]"
    ia, ib = ("2u * ii", "2u * ii + 1u") if inter else ("ii", f"ii + {half}u")
    to_ct = (lambda e: e) if ct == "double" else (lambda e: f"oi_d2f({e})")
    main = f"""uint r = u / {half}u, ii = u % {half}u;
uint s = (r / {heads}u) % {seq}u;
double ang = double({load_pos}) * {freq};
{ct} cs = {to_ct('oi_cos_d(ang)')}, sn = {to_ct('oi_sin_d(ang)')};
uint ia = r * {dh}u + {ia}, ib = r * {dh}u + {ib};
{ct} xa = {k.load(t, 'in0', 'ia')}, xb = {k.load(t, 'in0', 'ib')};
{ct} ya = xa * cs - xb * sn, yb = xb * cs + xa * sn;
out_[ia] = {k.store(out, 'ya', ct)};
out_[ib] = {k.store(out, 'yb', ct)};"""
    doc = f"rope of {x} at positions {pos} ({'interleaved pairs' if inter else 'rotate halves'})"
    return Body(functions=functions, main=main, units=batch * seq * heads * half, doc=doc)


# ------------------------------------------------------------------------------------ sdpa

def _bstrides(shape, batch, mat: int) -> list[int]:
    pad = len(batch) - len(shape)
    full = (1,) * pad + tuple(shape)
    own = contiguous_strides(full)
    return [0 if full[d] == 1 else own[d] * mat for d in range(len(batch))]


@family("sdpa")
def emit_sdpa(req: KernelRequest, k: KernelCtx) -> Body:
    q, kt, v = req.inputs[:3]
    mask = req.inputs[3] if len(req.inputs) > 3 else None
    t = q.dtype
    ct = k.ct(t)
    f = _fns(ct)
    sq, dk = q.shape[-2:]
    sk, dv = v.shape[-2:]
    batch = tuple(req.output.shape[:-2])
    kv_batch = tuple(np.broadcast_shapes(kt.shape[:-2], v.shape[:-2]))
    group = 1
    if kv_batch and batch and batch[-1] != kv_batch[-1] and kv_batch[-1] != 1:
        group = batch[-1] // kv_batch[-1]
    bstr = contiguous_strides(batch)
    bvars = [f"((bt / {bstr[d]}u) % {n}u)" for d, n in enumerate(batch)]

    def off(shape, mat, grouped=False):
        st = _bstrides(shape, batch, mat)
        terms = []
        for d, (b, s) in enumerate(zip(bvars, st, strict=True)):
            if not s:
                continue
            if grouped and group > 1 and d == len(batch) - 1:
                b = f"({b} / {group}u)"
            terms.append(f"{b} * {s}u")
        return " + ".join(terms) or "0u"

    # k / v read through a transpose (`req.input_perms`, fusion.py `fold_transposes`) are stored
    # [Sk, heads, D]: a head starts D elements after the last, a key row heads * D after the last
    perms = dict(req.input_perms)
    krow = dk * kt.shape[-3] if 1 in perms else dk
    vrow = dv * v.shape[-3] if 2 in perms else dv
    score = [f"{ct} s = {lit(ct, 0)};",
             f"for (uint d = 0u; d < {dk}u; ++d) s = s + {k.load(t, 'in0', 'qb + d')} * "
             f"{k.load(t, 'in1', f'kb + j * {krow}u + d')};",
             f"s = s * {k.attr('scale', ct)};"]
    if mask is not None:
        full = (1,) * (len(batch) + 2 - len(mask.shape)) + tuple(mask.shape)
        mst = contiguous_strides(full)
        mterms = [f"{b} * {mst[d]}u" for d, b in enumerate(bvars) if full[d] != 1]
        if full[-2] != 1:
            mterms.append(f"row * {mst[-2]}u")
        if full[-1] != 1:
            mterms.append(f"j * {mst[-1]}u" if mst[-1] != 1 else "j")
        midx = " + ".join(mterms) or "0u"
        if mask.dtype.name == "bool":
            score.append(f"if ({k.load(mask.dtype, 'in3', midx)} == 0) s = -{f['inf']};")
        else:
            score.append(f"s = s + {k.load(mask.dtype, 'in3', midx, ct)};")
    if k.static("causal"):
        score.append(f"if (int(j) > int(row) + ({sk - sq})) s = -{f['inf']};")
    score.append("return s;")
    functions = (f"{ct} oi_score(uint bt, uint row, uint qb, uint kb, uint j) {{\n"
                 + "\n".join("    " + s for s in score) + "\n}")
    doc = (f"sdpa: q {q}, k {kt}, v {v}" + (f", mask {mask}" if mask else "") +
           (", causal" if k.static("causal") else "") + (f", {group} query heads per kv head" if group > 1 else "")
           + f" -> {req.output}")
    def offsets(query_row: str) -> tuple[str, ...]:
        return (f"uint qb = {off(q.shape[:-2], sq * dk)} + {query_row} * {dk}u;",
                f"uint kb = {off(kt.shape[:-2], dk if 1 in perms else sk * dk, True)};",
                f"uint vb = {off(v.shape[:-2], dv if 2 in perms else sk * dv, True)};")

    if all(x.dtype.name == "f32" for x in (q, kt, v)) and all(n % 4 == 0 for n in (dk, dv, krow, vrow)):
        body = _sdpa_vec4(req, k, numel(batch) * sq, sq, sk, dk, dv, krow, vrow, offsets("qr"), score[2:], doc)
        if body is not None:
            return body
    wg = rows_.row_wg(k, max(capacity(sk), capacity(dv)))
    # (a dynamic key count keeps its scores in shared memory sized for the bound)
    if t.name == "f32" and v.dtype.name == "f32" and (capacity(sk) + wg) * 4 <= k.caps.max_shared:
        return _sdpa_rows(req, k, numel(batch) * sq, sq, sk, dv, vrow, wg, offsets("qr"), functions, doc)
    lines = [f"uint e = i % {dv}u, row = (i / {dv}u) % {sq}u, bt = i / {dv * sq}u;", *offsets("row"),
             f"{ct} m = -{f['inf']};",
             f"for (uint j = 0u; j < {sk}u; ++j) m = {f['max']}(m, oi_score(bt, row, qb, kb, j));",
             f"if (m == -{f['inf']}) return {lit(ct, 0)};   // no key to attend to: zeros",
             f"{ct} l = {lit(ct, 0)};",
             f"for (uint j = 0u; j < {sk}u; ++j) l = l + {f['exp']}(oi_score(bt, row, qb, kb, j) - m);",
             f"{ct} acc = {lit(ct, 0)};",
             f"for (uint j = 0u; j < {sk}u; ++j)",
             f"    acc = acc + ({f['exp']}(oi_score(bt, row, qb, kb, j) - m) / l) * "
             f"{k.load(t, 'in2', f'vb + j * {vrow}u + e')};",
             "return acc;"]
    return Body(functions=functions, value="\n".join(lines), vct=ct, doc=doc)


#: lanes that share one key's dot product in the vec4 sdpa (each reads D/4/SDPA_KEY_LANES vec4s)
SDPA_KEY_LANES = 8
#: loads a lane of the vec4 sdpa issues at once, at most: a score's key vec4s, and its V rows
#: (before the softmax)
SDPA_LOADS_AT_ONCE = 8
#: floats as unsigned integers in the same order (NaN above everything, -0.0 below +0.0, as
#: oi_maxf), so that subgroupMax over the keys is oi_maxf over the floats
_ORDERED_KEYS = """uint oi_key(float f) {
    uint b = floatBitsToUint(f);
    return oi_isnan(f) ? 0xffffffffu : ((b & 0x80000000u) != 0u ? ~b : b | 0x80000000u);
}
float oi_unkey(uint k) {
    return k == 0xffffffffu ? OI_NAN : uintBitsToFloat((k & 0x80000000u) != 0u ? k & 0x7fffffffu : ~k);
}"""


def _sdpa_vec4(req: KernelRequest, k: KernelCtx, rows: int, sq: int, sk, dk: int, dv: int, krow: int, vrow: int,
               offsets, finish: list[str], doc: str) -> Body | None:
    """f32 with D a multiple of 4: a workgroup per query row, every phase spread over the whole
    workgroup with vec4 loads. Scores: SL adjacent lanes share a key (lane c reads the key's
    vec4s c, c + SL, ...: a key row is read by SL lanes at once, not by one lane element by
    element), their partial dots added in shared memory; then the maximum and the weights' sum
    (by one subgroup where the device has subgroup arithmetic, else by trees); the weighted sum
    of V: lane (e4, g) adds the vec4 of columns e4 over keys g, g + G, ... and the G partial vec4s
    of a column are added once. Where they are few (SDPA_LOADS_AT_ONCE) a lane issues its key
    vec4s at once, and its V rows before the scores. On an H200 the decode step's attention (12
    query heads over 64 cached keys of 64 dims) took 12-16 us of device time with a lane per key
    reading its row element by element, 12-14 with this kernel (and 6-8 once the cache reads
    before it were no longer transfers: docs/vulkan.md); on an H100 the subgroup softmax and the
    early loads took the decoder bench's f32 step from 314 to 305 us. None where the shape does
    not fit (V wider than 4 x the workgroup, or too little shared memory: the caller's kernel
    serves it)."""
    dk4, dv4 = dk // 4, dv // 4
    # lanes per key: up to SDPA_KEY_LANES, but no more than lets every key be scored in one pass
    # of the workgroup (a pass costs two barriers)
    sl = 1
    while sl * 2 <= min(dk4, SDPA_KEY_LANES) and capacity(sk) * sl * 2 <= rows_.ROW_WG:
        sl *= 2
    cl = 1
    while cl < dv4:
        cl *= 2
    wg = max(rows_.row_wg(k, capacity(sk) * sl), sl)
    while wg < cl and wg * 2 <= k.caps.max_wg:
        wg *= 2
    shared_bytes = (capacity(sk) + 2 * wg) * 4 + wg * 16
    if cl > wg or shared_bytes > k.caps.max_shared:
        return None
    kpp, groups = wg // sl, wg // cl
    store = k.store(req.output.dtype, "{}", "float")
    functions = ("float oi_finish(uint bt, uint row, uint j, float s) {\n"
                 + "\n".join("    " + line for line in finish) + "\n}")
    views = "\n".join(buffer_view(b, name, "vec4") for b, name in ((0, "oi_q4"), (1, "oi_k4"), (2, "oi_v4")))
    # lane (e4, g) of the weighted sum of V; its V rows loaded first, where a static key count
    # gives it few (the decode step: 4 of 64 cached rows): their latency hides behind the scores
    lines = rows_.header(rows) + [f"uint bt = row / {sq}u, qr = row % {sq}u;", *offsets,
                                  f"uint e4 = lid % {cl}u, g = lid / {cl}u;"]
    v_rows = -(-sk // groups) if isinstance(sk, int) else 0
    v_early = 0 < v_rows <= SDPA_LOADS_AT_ONCE
    if v_early:
        lines += [f"vec4 v{t} = e4 < {dv4}u && g + {t * groups}u < {sk}u ? "
                  f"oi_v4[((vb + (g + {t * groups}u) * {vrow}u) >> 2) + e4] : vec4(0.0);" for t in range(v_rows)]
    # a score: lane c of its key adds the key's vec4s c, c + SL, ... (all loaded at once where few)
    if dk4 % sl == 0 and dk4 // sl <= SDPA_LOADS_AT_ONCE:
        dot = [f"    if (j < {sk}u) {{",
               *[f"        d4 += oi_q4[(qb >> 2) + c + {i * sl}u] * oi_k4[((kb + j * {krow}u) >> 2) + c + {i * sl}u];"
                 for i in range(dk4 // sl)], "    }"]
    else:
        dot = [f"    if (j < {sk}u) for (uint i = c; i < {dk4}u; i += {sl}u)",
               f"        d4 += oi_q4[(qb >> 2) + i] * oi_k4[((kb + j * {krow}u) >> 2) + i];"]
    lines += [
        f"uint c = lid % {sl}u, jl = lid / {sl}u;",
        f"for (uint j0 = 0u; j0 < {sk}u; j0 += {kpp}u) {{",
        "    uint j = j0 + jl;",
        "    vec4 d4 = vec4(0.0);",
        *dot,
        "    oi_part[lid] = d4.x + d4.y + d4.z + d4.w;",
        "    barrier();",
        f"    if (c == 0u && j < {sk}u) {{",
        "        float s = 0.0;",
        f"        for (uint t = 0u; t < {sl}u; ++t) s += oi_part[lid + t];",
        "        oi_p[j] = oi_finish(bt, qr, j, s);",
        "    }",
        "    barrier();",
        "}",
    ]
    empty = ["if (m == -OI_INF) {   // no key to attend to: zeros (m is the same in the whole workgroup)",
             f"    for (uint e = lid; e < {dv}u; e += {wg}u) out_[row * {dv}u + e] = {store.format('0.0')};",
             "    return;", "}"]
    if k.caps.subgroup:
        # the first subgroup alone finds the scores' maximum (subgroupMax over the scores'
        # order-preserving integer keys: subgroup FMax leaves NaN and -0.0 to the driver), turns
        # the scores into weights and adds them (subgroupAdd), and publishes both: one barrier
        # where two trees took 13. (Every subgroup finding both itself, each lane recomputing the
        # weights it needs, no barrier: slower, 324 against 314 us a step; exp is a long function.)
        k.need("subgroup", "sdpa's maximum and sum")
        functions += "\n" + _ORDERED_KEYS
        lines += ["if (gl_SubgroupID == 0u) {",
                  "    uint mk = 0x007fffffu;   // (the key of -inf)",
                  f"    for (uint j = gl_SubgroupInvocationID; j < {sk}u; j += gl_SubgroupSize) "
                  "mk = max(mk, oi_key(oi_p[j]));",
                  "    float m = oi_unkey(subgroupMax(mk)), l = 0.0;",
                  "    if (m != -OI_INF)",
                  f"        for (uint j = gl_SubgroupInvocationID; j < {sk}u; j += gl_SubgroupSize) "
                  "{ float p = oi_expf(oi_p[j] - m); oi_p[j] = p; l += p; }",
                  "    l = subgroupAdd(l);",
                  "    if (subgroupElect()) { oi_stat[0] = m; oi_stat[1] = l; }",
                  "}", "barrier();", "float m = oi_stat[0], l = oi_stat[1];", *empty]
    else:
        lines += ["float m = -OI_INF;", f"for (uint j = lid; j < {sk}u; j += {wg}u) m = oi_maxf(m, oi_p[j]);",
                  "oi_red[lid] = m;"]
        # the trees span only the lanes that hold a key (the others' -inf and 0 change nothing)
        span = min(wg, rows_.pow2ceil(capacity(sk)))
        lines += rows_.tree(span, "oi_red[a] = oi_maxf(oi_red[a], oi_red[b]);")
        lines += ["m = oi_red[0];", *empty, "barrier();", "float l = 0.0;",
                  f"for (uint j = lid; j < {sk}u; j += {wg}u) "
                  "{ float p = oi_expf(oi_p[j] - m); oi_p[j] = p; l += p; }", "oi_red[lid] = l;"]
        lines += rows_.tree(span, "oi_red[a] += oi_red[b];")
        lines.append("l = oi_red[0];")
    lines.append("vec4 acc = vec4(0.0);")
    if v_early:
        lines += [f"if (g + {t * groups}u < {sk}u) acc += oi_p[g + {t * groups}u] * v{t};" for t in range(v_rows)]
    else:
        lines += [f"if (e4 < {dv4}u) for (uint j = g; j < {sk}u; j += {groups}u)",
                  f"    acc += oi_p[j] * oi_v4[((vb + j * {vrow}u) >> 2) + e4];"]
    lines += ["oi_acc[lid] = acc;",
              "barrier();",
              f"if (g == 0u && e4 < {dv4}u) {{",
              f"    for (uint h = 1u; h < {groups}u; ++h) acc += oi_acc[lid + h * {cl}u];",
              f"    uint o = row * {dv}u + e4 * 4u;"]
    lines += [f"    out_[o + {e}u] = {store.format(f'acc.{comp} / l')};" for e, comp in enumerate("xyzw")]
    lines.append("}")
    shared = "\n".join([views, f"shared float oi_p[{capacity(sk)}];",
                         "shared float oi_stat[2];" if k.caps.subgroup else f"shared float oi_red[{wg}];",
                         f"shared float oi_part[{wg}];", f"shared vec4 oi_acc[{wg}];"])
    return Body(functions=functions, main="\n".join(lines), local_size=wg, shared=shared,
                groups=rows_.groups(rows),
                doc=f"{doc} (a workgroup of {wg} per query row, {sl} lanes per key, vec4 loads)")


def _sdpa_rows(req: KernelRequest, k: KernelCtx, rows: int, sq: int, sk: int, dv: int, vrow: int, wg: int,
               offsets, functions: str, doc: str) -> Body:
    """f32: a workgroup per query row (rows.py): the row's scores and then its weights in shared
    memory, their maximum and sum by trees, each invocation a strided set of output columns
    (the weighted sum is divided by the weights' sum once at the end: a reordering the f32
    tolerance covers, as in the C targets' tiled kernel)."""
    keys, cols = f"for (uint j = lid; j < {sk}u; j += {wg}u)", f"for (uint e = lid; e < {dv}u; e += {wg}u)"
    store = k.store(req.output.dtype, "{}", "float")
    lines = rows_.header(rows) + [f"uint bt = row / {sq}u, qr = row % {sq}u;",
                                  *offsets,
                                  f"{keys} oi_p[j] = oi_score(bt, qr, qb, kb, j);",
                                  "float m = -OI_INF;", f"{keys} m = oi_maxf(m, oi_p[j]);", "oi_red[lid] = m;"]
    lines += rows_.tree(wg, "oi_red[a] = oi_maxf(oi_red[a], oi_red[b]);")
    lines += ["m = oi_red[0];",
              "if (m == -OI_INF) {   // no key to attend to: zeros (m is the same in the whole workgroup)",
              f"    {cols} out_[row * {dv}u + e] = {store.format('0.0')};", "    return;", "}",
              "barrier();", "float l = 0.0;", f"{keys} {{ float p = oi_expf(oi_p[j] - m); oi_p[j] = p; l += p; }}",
              "oi_red[lid] = l;"]
    lines += rows_.tree(wg, "oi_red[a] += oi_red[b];")
    lines += ["l = oi_red[0];", f"{cols} {{", "    float acc = 0.0;",
              f"    for (uint j = 0u; j < {sk}u; ++j) acc += oi_p[j] * in2[vb + j * {vrow}u + e];",
              f"    out_[row * {dv}u + e] = {store.format('acc / l')};", "}"]
    return Body(functions=functions, main="\n".join(lines), local_size=wg,
                shared=f"shared float oi_p[{capacity(sk)}];\nshared float oi_red[{wg}];", groups=rows_.groups(rows),
                doc=f"{doc} (a workgroup of {wg} per query row)")


# ------------------------------------------------------------------------------------ conv, pool

@family("conv1d", "conv2d")
def emit_conv(req: KernelRequest, k: KernelCtx) -> Body:
    x, wt = req.inputs[:2]
    t = x.dtype
    ct = k.ct(t)
    groups = k.static("groups")
    stride, dil, pad = k.static("stride"), k.static("dilation"), k.static("padding")
    geo = ConvGeometry.of(req, stride, dil, pad, groups)
    n, c, h, w, o, cg, og, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl = astuple(geo)
    bias = f" + {k.load(t, 'in2', 'oc')}" if len(req.inputs) > 2 else ""
    lines = [f"uint ow = i % {ow}u, oh = (i / {ow}u) % {oh}u, oc = (i / {ow * oh}u) % {o}u, nb = i / {ow * oh * o}u;",
             f"uint xg = (nb * {c}u + (oc / {og}u) * {cg}u) * {h * w}u, wo = oc * {cg * kh * kw}u;",
             f"{ct} acc = {lit(ct, 0)};",
             f"for (uint ci = 0u; ci < {cg}u; ++ci)",
             f"for (int a = 0; a < {kh}; ++a) {{",
             f"    int ih = int(oh) * {sh} - {pt} + a * {dh};",
             f"    if (ih < 0 || ih >= {h}) continue;",
             f"    for (int b = 0; b < {kw}; ++b) {{",
             f"        int iw = int(ow) * {sw} - {pl} + b * {dw};",
             f"        if (iw < 0 || iw >= {w}) continue;",
             f"        acc = acc + {k.load(t, 'in0', f'xg + ci * {h * w}u + uint(ih) * {w}u + uint(iw)')} * "
             f"{k.load(t, 'in1', f'wo + ci * {kh * kw}u + uint(a) * {kw}u + uint(b)')};",
             "    }", "}",
             f"return acc{bias};"]
    doc = (f"{req.op}: {x} * {wt}" + (" + bias" if bias else "") + f", stride {list(stride)}, padding {list(pad)}, "
           f"dilation {list(dil)}, groups {groups} -> {req.output}")
    return Body(value="\n".join(lines), vct=ct, doc=doc)


@family("max_pool2d", "avg_pool2d")
def emit_pool(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    t = x.dtype
    ct = k.ct(t)
    f = _fns(ct)
    n, c, h, w = x.shape
    oh, ow = req.output.shape[2:]
    kh, kw = k.static("kernel")
    sh, sw = k.static("stride")
    pad = k.static("padding")
    is_max = req.op == "max_pool2d"
    if is_max:
        init, step, final = f"-{f['inf']}", f"{f['max']}(acc, v)", "acc"
    else:
        init, step = lit(ct, 0), "acc + v"
        final = (f"acc / {lit(ct, kh * kw)}" if k.static("count_include_pad") else f"acc / {ct}(cnt)")
    lines = [f"uint ow = i % {ow}u, oh = (i / {ow}u) % {oh}u, p = i / {ow * oh}u;",
             f"{ct} acc = {init};", "uint cnt = 0u;",
             f"for (int a = 0; a < {kh}; ++a) {{",
             f"    int ih = int(oh) * {sh} - {pad[0]} + a;",
             f"    if (ih < 0 || ih >= {h}) continue;",
             f"    for (int b = 0; b < {kw}; ++b) {{",
             f"        int iw = int(ow) * {sw} - {pad[1]} + b;",
             f"        if (iw < 0 || iw >= {w}) continue;",
             f"        {ct} v = {k.load(t, 'in0', f'p * {h * w}u + uint(ih) * {w}u + uint(iw)')};",
             f"        acc = {step};", "        cnt += 1u;", "    }", "}",
             f"return {final};"]
    doc = f"{req.op}: {x}, kernel [{kh}, {kw}], stride [{sh}, {sw}], padding {list(pad)} -> {req.output}"
    return Body(value="\n".join(lines), vct=ct, doc=doc)


# ------------------------------------------------------------------------------------ lrn

@family("lrn")
def emit_lrn(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i sums the squares at its position over its window's channels, in channel
    order, and divides x by oi_powf / oi_pow_d of the denominator (as the C kernels)."""
    x = req.inputs[0]
    t = x.dtype
    ct = k.ct(t)
    size = k.static("size")
    c, hw = x.shape[1], numel(x.shape[2:])
    if k.runtime_dtype("alpha") is None:
        scale = k.lit(ct, req.attr("alpha") / size)
    else:   # alpha / size computed by the host in f64, rounded once, as a static alpha is
        scale = k.push("alpha_per_size", ct, f"({ct})(rt_alpha / {float(size)!r})")
    lines = [f"uint j = i % {hw}u, p = i / {hw}u, c = p % {c}u;",
             f"uint entry = (p - c) * {hw}u;",
             f"int first = max(int(c) - {(size - 1) // 2}, 0), last = min(int(c) + {size // 2}, {c} - 1);",
             f"{ct} s = {lit(ct, 0)};",
             "for (int k = first; k <= last; ++k) {",
             f"    {ct} v = {k.load(t, 'in0', f'entry + uint(k) * {hw}u + j')};",
             "    s = s + v * v;",
             "}",
             f"return {k.load(t, 'in0', 'i')} / {'oi_pow_d' if ct == 'double' else 'oi_powf'}"
             f"({k.attr('bias', ct)} + {scale} * s, {k.attr('beta', ct)});"]
    return Body(value="\n".join(lines), vct=ct, doc=f"lrn of {x} over windows of {size} channels -> {req.output}")
