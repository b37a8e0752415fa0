"""dequant_matmul in GLSL: x @ ((w - zero_point) * scale) with i8/u8/i4/u4 weights read as
stored (8-bit storage, or the bytes of packed nibbles) and dequantized in registers.

GEMV (f32 x with at most 8 static rows, N a multiple of 16 for 8-bit and of 32 for 4-bit weights): each
invocation reads 16 bytes of a weight row at a time (16 or 32 columns; 8 or 4 bytes where a
projection has too few 16-byte column groups to give the GPU's units a workgroup each), unpacked
with bitfieldExtract (packing is LSB-first, so element e of a 32-bit word sits at bit e * bits),
for rows ks, ks + KS, ... (loaded at once where they are few); a workgroup owns CL such column
groups and splits K over KS = threads / CL slices whose partial sums are added by subgroup (or
in shared memory, a tree). Zero points are subtracted per column in registers and the scale
applied once per column at the end.

Otherwise one invocation per output element sums x[i, k] * (w[k, j] - zp) in f32 (f64 for f64 x)
over k and multiplies by the column's scale once.
"""

from __future__ import annotations

from ....dims import Dim, capacity
from ....errors import SynthesisError
from ....synth.program import KernelRequest
from .linalg import (
    TUNE,
    buffer_view,
    has_norm,
    has_rope,
    norm_shared,
    normed,
    reduce_k_slices,
    rope_angle,
    rope_frequencies,
    rope_position,
    rope_rotated,
    row_scales,
    stored,
)
from .registry import Body, dispatch, family
from .types import KernelCtx, lit


@family("dequant_matmul")
def emit_dequant_matmul(req: KernelRequest, k: KernelCtx) -> Body:
    x, w, scale = req.inputs[:3]
    kk, n = w.shape
    gemv = _gemv(req, k)
    if gemv is not None:
        return gemv
    if req.prologue is not None:
        raise SynthesisError(f"dequant_matmul: no kernel for {x} with a prologue (a device with too "
                             "little shared memory for the GEMV)")
    ct = k.ct(x.dtype)
    channel = "col" if scale.numel > 1 else "0u"
    q = k.load(w.dtype, "in1", f"q * {n}u + col", "int")
    if len(req.own_inputs) > 3:
        q = f"({q} - in3[{channel}])"
    lines = [f"uint row = i / {n}u;", f"uint col = i % {n}u;", f"{ct} s = {lit(ct, 0)};",
             f"for (uint q = 0u; q < {kk}u; ++q)",
             f"    s += {k.load(x.dtype, 'in0', f'row * {kk}u + q', ct)} * {ct}({q});",
             f"return s * {ct}(in2[{channel}]);"]
    doc = (f"dequant_matmul: {x.dtype.name}{list(x.shape)} @ dequantize({w.dtype.name}{list(w.shape)}, "
           f"{'per-channel' if scale.numel > 1 else 'per-tensor'} scale"
           f"{', zero point' if len(req.own_inputs) > 3 else ''})")
    return Body(value="\n".join(lines), vct=ct, doc=doc)


def takes_gemv(req: KernelRequest) -> bool:
    """Whether the dequantizing GEMV (`_gemv`) computes req: f32 x of at most 8 rows, whole 16-byte
    groups of weight columns per row."""
    x, w = req.inputs[:2]
    m = x.shape[0] if len(x.shape) == 2 else 1
    return x.dtype.name == "f32" and capacity(m) <= 8 and w.shape[1] % (128 // w.dtype.bits) == 0


def _gemv(req: KernelRequest, k: KernelCtx) -> Body | None:
    x, w, scale = req.inputs[:3]
    kk, n = w.shape
    m = x.shape[0] if len(x.shape) == 2 else 1
    mcap = capacity(m)                                # rows unrolled: a dynamic M's bound, stored below M
    bits = w.dtype.bits
    if not takes_gemv(req):
        return None
    rope = req.epilogue if has_rope(req) else None

    def column_groups(load_bytes: int) -> tuple[int, int]:
        """(column groups, groups a workgroup takes) with loads of load_bytes a row."""
        groups = n // (load_bytes * 8 // bits)
        return groups, 2 if rope is not None or groups >= 256 else 1

    # narrower loads where a projection has few column groups, hence few workgroups (768 columns
    # of i4 in 16-byte groups: 24 on a GPU of 132 compute units; in 4-byte groups 96, and the
    # decoder bench's i4 step took 298 us of device time on an H100, not 348). The workgroups
    # reading one 32-byte sector's other parts run side by side, so the sector is read from
    # memory once and from L2 by the others. A smaller load still tiles N and a rope's half
    # head, both whole 16-byte groups (takes_gemv, takes_rope).
    load_bytes = 16
    while load_bytes > 4 and -(-column_groups(load_bytes)[0] // column_groups(load_bytes)[1]) \
            < TUNE["gemv_min_groups_quant"]:
        load_bytes //= 2
    cols = load_bytes * 8 // bits                     # columns per load
    nvec, cl_n = column_groups(load_bytes)
    if rope is not None:    # two column groups a workgroup: one in the first half of a head, its pair's
        dh = rope.inputs[0].shape[-1]
        half_groups = dh // 2 // cols               # column groups in half a head
    max_wg = 1 << (k.caps.max_wg.bit_length() - 1)
    threads = min(256, max_wg)
    norm_bytes = 4 if has_norm(req) else 0       # a norm prologue's partial sums, per invocation
    while threads > cl_n and (threads // cl_n > kk or threads * (cols * 4 + norm_bytes) > k.caps.max_shared):
        threads //= 2
    if threads * (cols * 4 + norm_bytes) > k.caps.max_shared:
        return None
    # a narrow projection has few column groups, hence few workgroups (768 columns of i4: 24 on a
    # GPU of 132 compute units): larger ones keep more weight loads in flight on each unit
    # (subgroup sums: shared memory holds a partial per 4 invocations, not per invocation)
    groups = -(-nvec // cl_n)
    while (k.caps.subgroup and k.caps.subgroup_size >= 4 and threads * 2 <= min(max_wg, TUNE["gemv_max_threads_quant"])
           and groups * threads < TUNE["gemv_threads"] and threads * 2 // cl_n <= kk
           and threads * 2 * (cols + norm_bytes) <= k.caps.max_shared):
        threads *= 2
    ks_n = threads // cl_n
    chunks = cols // 4                                # vec4 accumulators per row of x
    wtype = {16: "uvec4", 8: "uvec2", 4: "uint"}[load_bytes]
    signed = w.dtype.is_signed
    per_word = 32 // bits
    # subgroup arithmetic where the device has it (subgroups of at least 4 invocations: the shared
    # partials below are sized for that): a subgroup's invocations share one column group and add
    # their K slices with subgroupAdd, so shared memory holds one partial per subgroup, not a tree
    # over every invocation's `chunks` vec4s (32 KB and 8 levels of barriers for 4-bit weights)
    subgroups = k.caps.subgroup and k.caps.subgroup_size >= 4 and threads >= 4 * cl_n
    if subgroups:
        k.need("subgroup", "the dequantizing GEMV's reduction over K")
    elif rope is not None:              # (linalg.takes_rope admits only what the subgroup path takes)
        raise SynthesisError(f"{k.where}internal: a rope epilogue on the dequantizing GEMV without subgroup sums")
    channel = "o" if scale.numel > 1 else "0u"          # the scale of output column o

    def at(c: int, e: int) -> str:                    # the channel index of lane e of chunk c
        return f"col + {4 * c + e}u" if scale.numel > 1 else "0u"

    lanes = (f"uint cl = gl_SubgroupID % {cl_n}u, ks = (gl_SubgroupID / {cl_n}u) * gl_SubgroupSize"
             " + gl_SubgroupInvocationID;" if subgroups else f"uint cl = lid % {cl_n}u, ks = lid / {cl_n}u;")
    def group(g: str, c: str) -> str:            # the column group c of workgroup g
        if rope is None:
            return f"{g} * {cl_n}u + {c}"
        return f"(({g} / {half_groups}u) * {2 * half_groups}u + {c} * {half_groups}u + {g} % {half_groups}u)"

    lines = ["uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;",
             f"if (g >= {nvec // cl_n + (nvec % cl_n > 0)}u) return;",
             "uint lid = gl_LocalInvocationID.x;", lanes,
             f"uint cv = {group('g', 'cl')};                  // this invocation's column group",
             f"uint col = cv * {cols}u;"]
    # every weight row an invocation reads loaded at once where they are few, before the norm's
    # sums, which then come from the x values loaded with them (as linalg._gemv does)
    rows_each = -(-kk // ks_n)
    at_once = rows_each <= TUNE["gemv_rows_at_once"] and rows_each * (load_bytes // 4 + mcap + 1) <= 128
    gamma = has_norm(req) and len(req.prologue.inputs) > 1
    if at_once:
        for j in range(rows_each):
            q = f"ks + {j * ks_n}u" if j else "ks"
            inside = f"{q} < {kk}u" if (j + 1) * ks_n > kk else ""      # (the last row, past K in some slices)
            lines.append(f"{wtype} wq{j} = cv < {nvec}u{' && ' + inside if inside else ''}"
                         f" ? oi_wq[({q}) * {nvec}u + cv] : {wtype}(0u);")
            loads = [(f"xr{j}_{r}", f"in0[{r * kk}u + {q}]") for r in range(mcap)]
            if gamma:
                loads.append((f"gm{j}", f"in{req.operand_indices('prologue')[0]}[{q}]"))
            lines += [f"float {v} = {inside} ? {e} : 0.0;" if inside else f"float {v} = {e};" for v, e in loads]
    if has_norm(req):
        lines += row_scales(req, k, kk, mcap, threads, lambda r, i: f"in0[{r * kk}u + {i}]",
                            rows_each if at_once else 0)
    if rope is not None:
        if cl_n * cols > threads:      # (threads >= 8 x 2 groups of 32 columns: K >= 64 would do)
            raise SynthesisError(f"{k.where}internal: the rope epilogue needs an invocation per stored column")
        # invocation lid stores column t = lid below: its angle, computed now (see rope_angle)
        lines += ["float oi_cs = 0.0, oi_sn = 0.0;", f"if (lid < {cl_n * cols}u) {{",
                  *["    " + x for x in rope_angle(f"({group('g', f'(lid / {cols}u)')} * {cols}u + lid % {cols}u)"
                                                   f" % {dh // 2}u", rope_position(req, k))], "}"]
    lines += [f"vec4 s{r}_{c} = vec4(0.0);" for r in range(mcap) for c in range(chunks)]
    zp = len(req.own_inputs) > 3
    if zp:
        lines += [f"vec4 z{c} = vec4({', '.join(f'float(in3[{at(c, e)}])' for e in range(4))});"
                  for c in range(chunks)]

    def accumulate(wq: str, x, q: str, gm: str | None = None) -> list[str]:
        """Adds row q's products: its load of weights `wq`, x[r, q] the expression x(r), gamma[q]
        the expression gm (None: read here)."""
        body = [f"float x{r} = {normed(req, x(r), r, q, gm)};" for r in range(mcap)]
        for c in range(chunks):
            base = (4 * c) % per_word
            word = f"{wq}.{'xyzw'[(4 * c) // per_word]}" if load_bytes > 4 else wq
            parts = [f"bitfieldExtract({'int' if signed else 'uint'}({word}), {(base + e) * bits}, {bits})"
                     for e in range(4)]
            body.append(f"vec4 w{c} = vec4({', '.join(parts)})" + (f" - z{c};" if zp else ";"))
            body += [f"s{r}_{c} += x{r} * w{c};" for r in range(mcap)]
        return body

    if at_once:
        for j in range(rows_each):
            q = f"ks + {j * ks_n}u" if j else "ks"
            body = accumulate(f"wq{j}", lambda r, j=j: f"xr{j}_{r}", q, f"gm{j}" if gamma else None)
            lines += ["{", *["    " + x for x in body], "}"]
    else:
        lines += [f"if (cv < {nvec}u) {{", f"    for (uint q = ks; q < {kk}u; q += {ks_n}u) {{",
                  f"        {wtype} wq = oi_wq[q * {nvec}u + cv];",
                  *["        " + x for x in accumulate("wq", lambda r: f"in0[{r * kk}u + q]", "q")], "    }", "}"]
    for r in range(mcap):
        if r:
            lines.append("barrier();")
        live = f" && {r}u < {m}u" if isinstance(m, Dim) else ""
        if subgroups:
            lines += [f"s{r}_{c} = subgroupAdd(s{r}_{c});" for c in range(chunks)]
            lines.append("if (subgroupElect()) {")
            lines += [f"    oi_red[gl_SubgroupID * {chunks}u + {c}u] = s{r}_{c};" for c in range(chunks)]
            lines += ["}", "barrier();",
                      # one output column per invocation: the epilogue and the store run side by side
                      f"for (uint t = lid; t < {cl_n * cols}u; t += {threads}u) {{",
                      f"    uint oc = t / {cols}u, e = t % {cols}u, ov = {group('g', 'oc')};",
                      f"    if (ov < {nvec}u{live}) {{",
                      "        float v = 0.0;",
                      f"        for (uint j = oc; j < gl_NumSubgroups; j += {cl_n}u)",
                      f"            v += oi_red[j * {chunks}u + e / 4u][e % 4u];",
                      f"        uint o = ov * {cols}u + e;"]
            if rope is None:
                lines += [f"        out_[{r * n}u + o] = {stored(req, k, f'(v * in2[{channel}])', f'{r * n}u + o')};",
                          "    }", "}"]
                continue
            # the pair's other column (group 1 - oc, the same e), scaled by its own channel's scale
            rot = rope_rotated(f"(v * in2[{channel}])", f"(w * in2[{'po' if scale.numel > 1 else '0u'}])", "oc")
            lines += ["        float w = 0.0;",
                      f"        for (uint j = 1u - oc; j < gl_NumSubgroups; j += {cl_n}u)",
                      f"            w += oi_red[j * {chunks}u + e / 4u][e % 4u];",
                      f"        uint po = {group('g', '(1u - oc)')} * {cols}u + e;",
                      f"        out_[{r * n}u + o] = {stored(req, k, rot, f'{r * n}u + o')};",
                      "    }", "}"]
            continue
        lines += reduce_k_slices(r, chunks, ks_n, cl_n)
        lines.append(f"if (ks == 0u && cv < {nvec}u{live}) {{")
        for c in range(chunks):
            lines.append(f"    vec4 v{c} = oi_red[lid * {chunks}u + {c}u];")
            for e in range(4):
                sc = f"in2[{at(c, e)}]"
                idx = f"{r * n}u + col + {4 * c + e}u"
                lines.append(f"    out_[{idx}] = {stored(req, k, f'(v{c}.' + 'xyzw'[e] + f' * {sc})', idx)};")
        lines.append("}")
    red = threads // 4 * chunks if subgroups else threads * chunks
    shared = "\n".join([buffer_view(1, "oi_wq", wtype), f"shared vec4 oi_red[{red}];"]
                       + ([norm_shared(k, threads)] if has_norm(req) else []))
    doc = (f"dequant_matmul GEMV: {x.dtype.name}{list(x.shape)} @ dequantize({w.dtype.name}{list(w.shape)}), "
           f"{cl_n * cols} columns x {ks_n} slices of K per workgroup, {load_bytes}-byte weight loads"
           + (f", {rows_each} rows an invocation loaded at once" if at_once else "")
           + (", subgroup sums" if subgroups else ""))
    functions = ""
    if rope is not None:
        k.need("fp64", "the rope epilogue's angles (pos * freq, computed in f64 as the reference)")
        functions = rope_frequencies(rope)
        doc += ", each column pair rotated (rope) as stored"
    return Body(main="\n".join(lines), functions=functions, doc=doc, local_size=threads, shared=shared,
                groups=dispatch(-(-nvec // cl_n), 1))
