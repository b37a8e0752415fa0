"""Reductions in GLSL: sum/mean/prod/max/min over axes, argmax/argmin along an axis, running sums
(cumsum), ranking (topk_indices), is_finite's 0-d form. Semantics of openinfer/reference/kernels/reduce.py:

- each output element folds its reduced elements in row-major order; a running value in
  f8/bf16/f16 rounds to that type after every step (as the reference), f32/f64 keep full
  precision;
- integers wrap (modulo 2^32 for types up to 32 bits, then on store); integer means divide the
  exact sum (64-bit, or 128-bit for 64-bit types) by the count, truncating toward zero;
- max/min are IEEE 754-2019 (NaN propagates, -0.0 < +0.0).

Large reductions into few outputs use one workgroup per output element (`_wg_reduce`): each
invocation folds a strided share, then a tree in shared memory combines the shares, which is
exact for integers, max and min (associative) and within tolerance for f32/f64 sums; narrow
float sums stay sequential (their rounding after every step is the semantics).
"""

from __future__ import annotations

from ....dims import capacity
from ....dtypes import DTypeInfo
from ....synth.program import KernelRequest
from ...geometry import collapse, contiguous_strides, numel
from . import rows as rows_
from .registry import Body, family
from .types import FLOAT_CT, NARROW, KernelCtx, conv, index_expr, lit, round_to, signed


def _loops(prefix: str, sizes: list[int]) -> tuple[list[str], list[str]]:
    vars_ = [f"{prefix}{d}" for d in range(len(sizes))]
    return vars_, [f"for (uint {v} = 0u; {v} < {n}u; ++{v}) {{" for v, n in zip(vars_, sizes, strict=True)]


def _offset(vars_, strides) -> str:
    terms = [v if s == 1 else f"{v} * {s}u" for v, s in zip(vars_, strides, strict=True) if s]
    return " + ".join(terms) or "0u"


def _fold(kind: str, w: DTypeInfo, ct: str, s: str, v: str) -> str:
    if kind in ("sum", "mean", "prod"):
        return f"{s} {'*' if kind == 'prod' else '+'} {v}"
    is_max = kind == "max"
    if ct in FLOAT_CT:
        f = ("oi_max_d" if is_max else "oi_min_d") if ct == "double" else ("oi_maxf" if is_max else "oi_minf")
        return f"{f}({s}, {v})"
    return f"({v} {'>' if is_max else '<'} {s} ? {v} : {s})"


def _init(kind: str, w: DTypeInfo, ct: str) -> str:
    if kind == "prod":
        return lit(ct, 1)
    if kind in ("sum", "mean"):
        # NumPy's reduce starts from the first element: the same as starting from -0.0; the
        # reference's narrow fold starts from +0.0
        return lit(ct, -0.0 if ct in FLOAT_CT and w.name not in NARROW else 0)
    if ct in FLOAT_CT:
        return lit(ct, float("-inf") if kind == "max" else float("inf"))
    return lit(ct, w.lo if kind == "max" else w.hi)


@family("sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis")
def emit_reduce(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    t = x.dtype
    kind = req.op[:-len("_axis")]
    w = req.acc[-1] if req.acc else t
    ct = k.ct(w)
    shape = x.shape
    nd = len(shape)
    axes = sorted({a % nd for a in k.static("axes")})
    k.static("keepdims")
    kept = [d for d in range(nd) if d not in axes]
    istr = contiguous_strides(shape)
    count = numel(shape[a] for a in axes)
    int_mean = kind == "mean" and ct not in FLOAT_CT
    kshape = [shape[d] for d in kept]
    base = index_expr("i", kshape, [istr[d] for d in kept]) if kshape else "0u"
    rsizes, rstr = collapse([shape[d] for d in axes], [istr[d] for d in axes])
    rvars, heads = _loops("r", rsizes)
    load = k.load(t, "in0", f"base + {_offset(rvars, rstr)}", ct)
    doc = (f"{req.op}: {kind} of {x} over axes {axes}" + (f", accumulating in {w.name}" if req.acc else "")
           + f" -> {req.output}")
    if (count >= 1024 and req.output.numel * 8 <= count and not int_mean and w.name not in NARROW
            and not req.output.dtype.is_packed):
        return _wg_reduce(req, k, kind, w, ct, kshape, [istr[d] for d in kept], rsizes, rstr, count, doc)
    lines = [f"uint base = {base};"]
    if int_mean:
        if ct in ("int", "uint"):
            wide = k.use("int64_t" if ct == "int" else "uint64_t", "an integer mean's exact sum")
            lines.append(f"{wide} s = {lit(wide, 0)};")
            step = f"s += {conv(load, ct, wide)};"
            final = f"s / {lit(wide, count)}"
            vct = wide
        else:
            functions = _ACC128
            lines.append("uvec4 s = uvec4(0u);")
            step = f"s = oi_acc128_add(s, {load}{', true' if signed(ct) else ', false'});"
            final = f"oi_acc128_mean(s, {count}u, {'true' if signed(ct) else 'false'})"
            vct = "uint64_t"
            body = lines + heads + ["    " * len(heads) + step] + ["}"] * len(heads) + [f"return {final};"]
            return Body(functions=functions, value="\n".join(_indent(body)), vct=vct, doc=doc)
    else:
        lines.append(f"{ct} s = {_init(kind, w, ct)};")
        value = _fold(kind, w, ct, "s", "v")
        if w.name in NARROW:
            value = round_to(k, w, value, ct)
        step = f"{ct} v = {load}; s = {value};"
        final = f"s / {lit(ct, count)}" if kind == "mean" else "s"
        vct = ct
    body = lines + heads + ["    " * len(heads) + step] + ["}"] * len(heads) + [f"return {final};"]
    return Body(value="\n".join(_indent(body)), vct=vct, doc=doc)


def _indent(lines: list[str]) -> list[str]:
    """Indent nested for-loops (cosmetic: the generated shaders are meant to be read)."""
    out, depth = [], 0
    for line in lines:
        stripped = line.strip()
        if stripped == "}":
            depth -= 1
        out.append("    " * depth + stripped)
        if stripped.endswith("{"):
            depth += 1
    return out


_ACC128 = """// 128-bit two's complement accumulator (x: lowest 32 bits ... w: highest) of 64-bit values.
uvec4 oi_acc128_add(uvec4 a, uint64_t v, bool is_signed) {
    uvec2 p = unpackUint2x32(v);
    uint ext = (is_signed && (p.y >> 31) != 0u) ? 0xffffffffu : 0u;
    uint c0, c1, c2, c3;
    a.x = uaddCarry(a.x, p.x, c0);
    a.y = uaddCarry(a.y, p.y, c1); a.y = uaddCarry(a.y, c0, c2); c1 += c2;
    a.z = uaddCarry(a.z, ext, c2); a.z = uaddCarry(a.z, c1, c3); c2 += c3;
    a.w = a.w + ext + c2;
    return a;
}
uvec4 oi_acc128_add(uvec4 a, int64_t v, bool is_signed) { return oi_acc128_add(a, uint64_t(v), is_signed); }
// sum / n truncated toward zero, modulo 2^64 (the reference's Python integers), 0 < n < 2^31.
uint64_t oi_acc128_mean(uvec4 a, uint n, bool is_signed) {
    bool neg = is_signed && (a.w >> 31) != 0u;
    if (neg) {                                   // |sum|
        a = ~a;
        uint c;
        a.x = uaddCarry(a.x, 1u, c); a.y = uaddCarry(a.y, c, c); a.z = uaddCarry(a.z, c, c); a.w += c;
    }
    uint64_t r = uint64_t(0);
    uint q[4];
    uint words[4] = uint[4](a.w, a.z, a.y, a.x);
    for (int wi = 0; wi < 4; ++wi) {             // long division, 32 bits at a time
        uint64_t cur = (r << 32) | uint64_t(words[wi]);
        q[wi] = uint(cur / uint64_t(n));
        r = cur % uint64_t(n);
    }
    uint64_t quo = packUint2x32(uvec2(q[3], q[2]));   // bits above 64 wrap away
    return neg ? uint64_t(0) - quo : quo;
}
"""


def _wg_reduce(req, k: KernelCtx, kind, w, ct, kshape, kstr, rsizes, rstr, count, doc) -> Body:
    """One workgroup per output element: strided partial folds, then a shared-memory tree."""
    t = req.inputs[0].dtype
    wg = min(k.caps.wg, 1 << (max(1, capacity(count) // 4).bit_length() - 1))   # (dynamic: by the bound)
    elem = 8 if ct in ("double", "int64_t", "uint64_t") else 4
    while wg * elem > k.caps.max_shared and wg > 1:
        wg //= 2
    nout = numel(kshape) if kshape else 1
    base = index_expr("o", kshape, kstr) if kshape else "0u"
    # the reduced index r (row-major over the reduced dims) -> element offset
    rvars = [f"(r / {numel(rsizes[d + 1:])}u) % {n}u" if d else f"(r / {numel(rsizes[d + 1:])}u)"
             for d, n in enumerate(rsizes)]
    roff = " + ".join(f"({v}) * {s}u" for v, s in zip(rvars, rstr, strict=True)) or "0u"
    load = k.load(t, "in0", f"base + {roff}", ct)
    fold = _fold(kind, w, ct, "s", "v")
    merge = _fold(kind, w, ct, "oi_part[a]", "oi_part[b]")
    final = f"s / {lit(ct, count)}" if kind == "mean" else "s"
    head = f"""uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
uint lid = gl_LocalInvocationID.x;
uint base = o < {nout}u ? {base} : 0u;
{ct} s = {_init(kind, w, ct)};
if (o < {nout}u) {{
    for (uint r = lid; r < {count}u; r += {wg}u) {{
        {ct} v = {load};
        s = {fold};
    }}
}}
"""
    store = f"""    {ct} v = {final};
    out_[o] = {k.store(req.output.dtype, "v", ct)};"""
    # subgroup arithmetic where the device has it: 32-bit types only (64-bit and narrow types need
    # shaderSubgroupExtendedTypes), and not float max/min (subgroup FMax/FMin leave NaN and -0.0
    # undefined; the reference's IEEE rules need the explicit fold)
    sub = {"sum": "subgroupAdd", "mean": "subgroupAdd", "prod": "subgroupMul",
           "max": "subgroupMax", "min": "subgroupMin"}[kind]
    use_subgroup = (k.caps.subgroup and ct in ("float", "int", "uint")
                    and not (ct == "float" and kind in ("max", "min")))
    if use_subgroup:
        k.need("subgroup", "a workgroup reduction")
        gfold = _fold(kind, w, ct, "s", "oi_part[g]")
        main = head + f"""s = {sub}(s);
if (subgroupElect()) oi_part[gl_SubgroupID] = s;
barrier();
if (lid == 0u && o < {nout}u) {{
    s = oi_part[0];
    for (uint g = 1u; g < gl_NumSubgroups; ++g) s = {gfold};
{store}
}}"""
        how = "subgroup arithmetic, then shared memory"
    else:
        tree = "\n".join(rows_.tree(wg, f"oi_part[a] = {merge};"))
        main = head + f"""oi_part[lid] = s;
{tree}
if (lid == 0u && o < {nout}u) {{
    s = oi_part[0];
{store}
}}"""
        how = "a shared-memory tree"
    gx = min(nout, 65535)
    return Body(main=main, units=None, doc=doc + f" (one workgroup of {wg} per output, {how})",
                shared=f"shared {ct} oi_part[{wg}];", local_size=wg, groups=(gx, -(-nout // gx), 1))


@family("argmax_axis", "argmin_axis")
def emit_arg(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    t = x.dtype
    shape = x.shape
    nd = len(shape)
    axis = k.static("axis") % nd
    first = bool(k.static("select_first"))
    k.static("keepdims")
    istr = contiguous_strides(shape)
    kept = [d for d in range(nd) if d != axis]
    kshape = [shape[d] for d in kept]
    base = index_expr("i", kshape, [istr[d] for d in kept]) if kshape else "0u"
    ct = k.ct(t)
    n, st = shape[axis], istr[axis]
    is_max = req.op == "argmax_axis"
    cmp = ">" if is_max else "<"
    isnan = {"float": "oi_isnan", "double": "oi_isnan_d"}.get(ct)
    def load_at(j: str) -> str:
        return k.load(t, "in0", f"base + ({j}) * {st}u" if st != 1 else f"base + {j}")
    load = load_at("j")
    doc = (f"{req.op}: index of the {'max' if is_max else 'min'}imum of {x} along axis {axis} "
           f"({'first' if first else 'last'} on ties; NaN wins)")
    if capacity(n) > 1 and ct in ("float", "int", "uint"):     # (a dynamic length: at its bound)
        row_base = index_expr("row", kshape, [istr[d] for d in kept]) if kshape else "0u"
        return _arg_rows(req, k, row_base, numel(kshape), n, load_at, ct, isnan, cmp, first, doc)
    order = (f"for (uint jj = 1u; jj < {n}u; ++jj) {{", "uint j = jj;") if first else \
        (f"for (uint jj = 1u; jj < {n}u; ++jj) {{", f"uint j = {n - 1}u - jj;")
    lines = [f"uint base = {base};", f"uint j = {0 if first else n - 1}u;", f"{ct} best = {load};", "uint bi = j;"]
    lines.append(order[0])
    lines.append(f"    {order[1]}")
    if isnan:
        lines.append(f"    if ({isnan}(best)) break;")
    lines.append(f"    {ct} v = {load};")
    if isnan:
        lines.append(f"    if ({isnan}(v)) {{ best = v; bi = j; break; }}")
    lines.append(f"    if (v {cmp} best) {{ best = v; bi = j; }}")
    lines.append("}")
    lines.append("return int(bi);")
    return Body(value="\n".join(lines), vct="int", doc=doc)


def _arg_rows(req: KernelRequest, k: KernelCtx, base: str, rows: int, n: int, load, ct: str, isnan: str | None,
              cmp: str, first: bool, doc: str) -> Body:
    """A workgroup per output element (rows.py; the order of combination does not change an
    argmax, so every 32-bit dtype takes it): each invocation the best of a strided subset,
    then a tree. `oi_better` is a total order on (value, index) that gives the sequential scan's
    answer in any order of combination: NaN above numbers, then the comparison, then the index
    the scan keeps on ties (the first or the last)."""
    wg = rows_.row_wg(k, n)
    pref = "ib < ia" if first else "ib > ia"
    nan = (f"    if ({isnan}(va) || {isnan}(vb)) return {isnan}(vb) && (!{isnan}(va) || {pref});\n"
           if isnan else "")
    functions = (f"bool oi_better({ct} vb, uint ib, {ct} va, uint ia) {{   // (vb, ib) beats (va, ia)\n"
                 "    if (ib == 0xffffffffu || ia == 0xffffffffu) return ia == 0xffffffffu && ib != 0xffffffffu;\n"
                 + nan +
                 f"    return vb {cmp} va || (vb == va && {pref});\n}}")
    lines = rows_.header(rows) + [f"uint base = {base};", f"{ct} best = {ct}(0);",
                                  "uint bi = 0xffffffffu;   // none yet"]
    lines += rows_.strided(n, wg, load, ct, ["if (oi_better(v, j, best, bi)) { best = v; bi = j; }"])
    lines += ["oi_best[lid] = best;", "oi_idx[lid] = bi;"]
    lines += rows_.tree(wg, "if (oi_better(oi_best[b], oi_idx[b], oi_best[a], oi_idx[a])) "
                            "{ oi_best[a] = oi_best[b]; oi_idx[a] = oi_idx[b]; }")
    lines.append(f"if (lid == 0u) out_[row] = {k.store(req.output.dtype, 'int(oi_idx[0])', 'int')};")
    return Body(functions=functions, main="\n".join(lines), local_size=wg,
                shared=f"shared {ct} oi_best[{wg}];\nshared uint oi_idx[{wg}];", groups=rows_.groups(rows),
                doc=f"{doc} (a workgroup of {wg} per output element)")


@family("cumsum")
def emit_cumsum(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: the running sum of its row up to it in scan order, folded sequentially
    from the row's start by this invocation (the C kernel's order, so the same bits; each
    invocation re-reads its row's prefix, which is fine for the rows an exported model scans)."""
    x = req.inputs[0]
    t = x.dtype
    w = req.acc[-1] if req.acc else t
    ct = k.ct(w)
    shape = x.shape
    axis = k.static("axis") % len(shape)
    exclusive, reverse = bool(k.static("exclusive")), bool(k.static("reverse"))
    n, st = shape[axis], contiguous_strides(shape)[axis]
    value = _fold("sum", w, ct, "s", "v")
    if w.name in NARROW:
        value = round_to(k, w, value, ct)
    steps = (f"{n - 1}u - j" if exclusive else f"{n}u - j") if reverse else ("j" if exclusive else "j + 1u")
    lines = [f"uint j = (i / {st}u) % {n}u;", f"uint base = i - j * {st}u;",
             f"{ct} s = {lit(ct, -0.0 if ct in FLOAT_CT else 0)};", f"uint steps = {steps};"]
    if exclusive:
        lines.append(f"if (steps == 0u) return {lit(ct, 0)};")
    lines += ["for (uint p = 0u; p < steps; ++p) {",
              f"    uint q = {f'{n - 1}u - p' if reverse else 'p'};",
              f"    {ct} v = {k.load(t, 'in0', f'base + q * {st}u', ct)};",
              f"    s = {value};", "}", "return s;"]
    doc = (f"cumsum: running sums of {x} along axis {axis}" + (", exclusive" if exclusive else "")
           + (", from the last element" if reverse else "") + (f", accumulating in {w.name}" if req.acc else "")
           + f" -> {req.output}")
    return Body(value="\n".join(lines), vct=ct, doc=doc)


@family("topk_indices")
def emit_topk(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i, rank r of its row: the element of the row that exactly r elements come
    before (a strict total order on (value, index), as the C kernel's), found by ranking each."""
    x = req.inputs[0]
    t = x.dtype
    shape = x.shape
    axis = k.static("axis") % len(shape)
    kk, largest = k.static("k"), bool(k.static("largest"))
    k.static("sorted")
    istr = list(contiguous_strides(shape))
    n, st, ost = shape[axis], istr[axis], contiguous_strides(req.output.shape)[axis]
    istr[axis] = 0
    ct = k.ct(t)
    isnan = {"float": "oi_isnan", "double": "oi_isnan_d"}.get(ct)
    cmp = ">" if largest else "<"
    before = f"va {cmp} vb || (va == vb && a < b)"
    if isnan and largest:
        before = f"{isnan}(va) ? (!{isnan}(vb) || a < b) : (!{isnan}(vb) && ({before}))"
    elif isnan:
        before = f"{isnan}(va) ? ({isnan}(vb) && a < b) : ({isnan}(vb) || {before})"
    lines = [f"uint r = (i / {ost}u) % {kk}u;", f"uint base = {index_expr('i', req.output.shape, istr)};",
             f"for (uint b = 0u; b < {n}u; ++b) {{",
             f"    {ct} vb = {k.load(t, 'in0', f'base + b * {st}u')};",
             "    uint rank = 0u;",
             f"    for (uint a = 0u; a < {n}u; ++a) {{",
             f"        {ct} va = {k.load(t, 'in0', f'base + a * {st}u')};",
             f"        if ({before}) ++rank;",
             "    }",
             "    if (rank == r) return int(b);",
             "}",
             "return 0;"]
    doc = (f"topk_indices: the {kk} {'largest' if largest else 'smallest'} of {x} along axis {axis}, best first "
           "(ties: lower index first; NaN above every number)")
    return Body(value="\n".join(lines), vct="int", doc=doc)


def emit_all_finite(req: KernelRequest, k: KernelCtx) -> Body:
    """is_finite with a 0-d output: all elements finite."""
    x = req.inputs[0]
    ct = k.ct(x.dtype)
    fin = "oi_isfinite_d" if ct == "double" else "oi_isfinite"
    lines = [f"for (uint j = 0u; j < {x.numel}u; ++j) {{",
             f"    if (!{fin}({k.load(x.dtype, 'in0', 'j')})) return 0;", "}", "return 1;"]
    return Body(value="\n".join(lines), vct="int", doc=f"is_finite: all elements of {x} finite")
