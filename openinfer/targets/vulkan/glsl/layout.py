"""Layout ops in GLSL: gather, gather_elements, gather_nd, scatter_nd, transpose, reshape, concat, slice,
dynamic_slice, pad, resize. They move stored values without computing (every dtype, bit for bit; scatter_nd's
reductions compute as the element-wise kernels of the ops they name, resize's linear mode interpolates floats):
`oi_elem(i)` returns the storage value (packed types: the raw bits) of output element i and main() writes it,
assembling whole bytes for packed types."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....numerics import to_storage
from ....ops.resample import resize_axis
from ....ops.shapes import slice_extent, transpose_perm
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...geometry import contiguous_strides, numel
from .elementwise import Ew, expression
from .registry import Body, family
from .types import KernelCtx, compute_type, conv, index_expr, lit, round_to, storage_type


def _fetch(t, buf: str, idx: str) -> str:
    if t.is_packed:
        per = 8 // t.bits
        return f"oi_raw(uint({buf}[({idx}) / {per}u]), ({idx}) % {per}u, {t.bits}u)"
    return f"{buf}[{idx}]"


def _body(req: KernelRequest, fn_lines: list[str], doc: str) -> Body:
    """Wrap an `oi_elem(uint i)` body into the main() that stores (and packs) its values."""
    t = req.output.dtype
    n = req.output.numel
    rt = "uint" if t.is_packed else storage_type(t)
    functions = f"{rt} oi_elem(uint i) {{\n" + "\n".join("    " + s for s in fn_lines) + "\n}"
    if t.is_packed:
        per = 8 // t.bits
        main = (f"uint byte_ = 0u;\nfor (uint e = 0u; e < {per}u; ++e) {{\n    uint i = u * {per}u + e;\n"
                f"    if (i >= {n}u) break;\n    byte_ |= oi_elem(i) << (e * {t.bits}u);\n}}\n"
                "out_[u] = uint8_t(byte_);")
        units = t.storage_nbytes(n)
    else:
        main, units = "out_[u] = oi_elem(u);", n
    return Body(functions=functions, main=main, units=units, doc=doc)


@family("reshape")
def emit_reshape(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    return _body(req, [f"return {_fetch(x.dtype, 'in0', 'i')};"], f"reshape: {x} -> {list(req.output.shape)}")


@family("transpose")
def emit_transpose(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    nd = len(x.shape)
    perm = transpose_perm(k.static("perm"), nd)
    istr = contiguous_strides(x.shape)
    out_shape = [x.shape[p] for p in perm]
    idx = index_expr("i", out_shape, [istr[p] for p in perm])
    return _body(req, [f"return {_fetch(x.dtype, 'in0', idx)};"], f"transpose: {x} with perm {perm}")


@family("slice")
def emit_slice(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    nd = len(x.shape)
    starts, ends = k.static("starts"), k.static("ends")
    axes = k.static("axes") or tuple(range(len(starts)))
    steps = k.static("steps") or (1,) * len(starts)
    istr = contiguous_strides(x.shape)
    first, step = [0] * nd, [1] * nd
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a %= nd
        first[a], _, step[a] = slice_extent(s, e, st, x.shape[a])
    sbase = sum(f * s for f, s in zip(first, istr, strict=True))
    idx = index_expr("i", req.output.shape, [st * s for st, s in zip(step, istr, strict=True)], sbase)
    return _body(req, [f"return {_fetch(x.dtype, 'in0', idx)};"],
                 f"slice: {x} from {first} by steps {step} -> {list(req.output.shape)}")


@family("dynamic_slice")
def emit_dynamic_slice(req: KernelRequest, k: KernelCtx) -> Body:
    x = req.inputs[0]
    istr = contiguous_strides(x.shape)
    lines, terms = [], []
    for j, (a, size) in enumerate(zip(k.static("axes"), k.static("sizes"), strict=True)):
        s = req.inputs[1 + j]
        ct = k.ct(s.dtype)
        last = x.shape[a] - size            # the largest start that keeps the window inside x
        lines.append(f"{ct} v{j} = {k.load(s.dtype, f'in{j + 1}', '0u')};")
        low = f"v{j} < {lit(ct, 0)} ? 0u : " if s.dtype.is_signed else ""
        lines.append(f"uint first{j} = {low}v{j} > {lit(ct, last)} ? {last}u : uint(v{j});")
        terms.append(f"first{j} * {istr[a]}u")
    src = " + ".join([*terms, index_expr("i", req.output.shape, istr)])
    lines.append(f"return {_fetch(x.dtype, 'in0', src)};")
    return _body(req, lines, f"dynamic_slice: {x} -> {list(req.output.shape)} at run-time starts along "
                             f"{list(k.static('axes'))}, clamped so the window stays inside")


@family("concat")
def emit_concat(req: KernelRequest, k: KernelCtx) -> Body:
    out_shape = req.output.shape
    nd = len(out_shape)
    axis = k.static("axis") % nd
    inner = numel(out_shape[axis + 1:])
    dim = out_shape[axis]
    lines = [f"uint c = (i / {inner}u) % {dim}u, outer = i / {dim * inner}u, q = i % {inner}u;"]
    at = 0
    for j, x in enumerate(req.inputs):
        s = x.shape[axis]
        idx = f"outer * {s * inner}u + (c - {at}u) * {inner}u + q"
        cond = f"c < {at + s}u" if j < len(req.inputs) - 1 else "true"
        lines.append(f"if ({cond}) return {_fetch(x.dtype, f'in{j}', idx)};")
        at += s
    return _body(req, lines, f"concat: {len(req.inputs)} inputs along axis {axis} -> {list(out_shape)}")


@family("pad")
def emit_pad(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i is x's element at i's coordinates less the `before` pads where every
    coordinate falls inside x, else the border value's stored bits (as `fill` stores it)."""
    x, y = req.inputs[0], req.output
    t = y.dtype
    pads = k.static("pads")
    mode = k.static("mode")
    if mode != "constant":
        return _pad_from_x(req, pads, mode)
    raw = to_storage(np.full(1, ref_store(np.full((), k.static("value")), t), dtype=t.np_dtype), t)
    bits = int.from_bytes(raw, "little") & ((1 << t.bits) - 1 if t.is_packed else (1 << 8 * len(raw)) - 1)
    st = storage_type(t)
    if t.is_packed:
        border = f"{bits}u"
    elif st == "float":
        border = f"uintBitsToFloat({bits}u)"
    elif st == "double":
        k.use("uint64_t", "the border value's bits")
        border = f"uint64BitsToDouble({bits}ul)"
    elif st in ("uint", "uint64_t"):
        border = f"{st}({bits}{'ul' if st == 'uint64_t' else 'u'})"
    else:        # 8/16-bit storage and signed 32/64: the bits as the storage type's two's complement
        wide = "uint64_t" if st == "int64_t" else "uint"
        border = f"{st}({wide}({bits}{'ul' if wide == 'uint64_t' else 'u'}))"
    ostr = contiguous_strides(y.shape)
    istr = contiguous_strides(x.shape)
    lines, inside, src = [], [], []
    for a, (n, before) in enumerate(zip(x.shape, pads[0::2], strict=True)):
        lines.append(f"int c{a} = int((i / {ostr[a]}u) % {y.shape[a]}u) - {before};")
        inside.append(f"c{a} >= 0 && c{a} < {n}")
        src.append(f"uint(c{a}) * {istr[a]}u")
    cond = " && ".join(inside) or "true"
    lines.append(f"if ({cond}) return {_fetch(x.dtype, 'in0', ' + '.join(src) or '0u')};")
    lines.append(f"return {border};")
    return _body(req, lines, f"pad: {x} -> {list(y.shape)}, pads {list(pads)}, border value {k.static('value')!r}")


def _pad_from_x(req: KernelRequest, pads, mode: str) -> Body:
    """reflect / edge: output element i reads x at i's coordinates less the `before` pads, each
    folded back inside x (mirrored once, which the shape rule's pads < n make enough, or clamped)."""
    x, y = req.inputs[0], req.output
    ostr, istr = contiguous_strides(y.shape), contiguous_strides(x.shape)
    lines, src = [], []
    for a, (n, before) in enumerate(zip(x.shape, pads[0::2], strict=True)):
        lines.append(f"int c{a} = int((i / {ostr[a]}u) % {y.shape[a]}u) - {before};")
        if mode == "edge":
            lines.append(f"c{a} = clamp(c{a}, 0, {n - 1});")
        else:
            lines.append(f"c{a} = c{a} < 0 ? -c{a} : c{a} >= {n} ? {2 * (n - 1)} - c{a} : c{a};")
        src.append(f"uint(c{a}) * {istr[a]}u")
    lines.append(f"return {_fetch(x.dtype, 'in0', ' + '.join(src) or '0u')};")
    return _body(req, lines, f"pad: {x} -> {list(y.shape)}, pads {list(pads)}, mode {mode}")


@family("resize")
def emit_resize(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i's coordinates, each through its axis's table of openinfer/ops/resample.py's
    taps (an axis read at its own index has none): nearest returns x's element there; linear the
    nested (separable) weighted sum of the 2^k neighbours on its k interpolated axes, in f32 (f64
    for f64), rounded once on store."""
    x, y = req.inputs[0], req.output
    a = {n: k.static(n) for n in ("sizes", "scales", "mode", "coordinate_transformation_mode", "nearest_mode")}
    ostr, istr = contiguous_strides(y.shape), contiguous_strides(x.shape)
    doc = f"resize: {x} -> {list(y.shape)}, {a['mode']}, {a['coordinate_transformation_mode']}"
    lines, single, pairs = [], [], []
    for axis, (n, m) in enumerate(zip(x.shape, y.shape, strict=True)):
        taps = resize_axis(a, axis, n, m)
        lines.append(f"uint c{axis} = (i / {ostr[axis]}u) % {m}u;")
        if m == n and all(i0 == o and w == 0 for o, (i0, _, w) in enumerate(taps)):
            single.append(f"c{axis} * {istr[axis]}u")
            continue
        lines.append(f"const uint lo{axis}[{m}] = uint[]({', '.join(f'{i0 * istr[axis]}u' for i0, _, _ in taps)});")
        if a["mode"] == "nearest" or not any(w for _, _, w in taps):
            single.append(f"lo{axis}[c{axis}]")
            continue
        ct = k.ct(x.dtype)
        lines.append(f"const uint hi{axis}[{m}] = uint[]({', '.join(f'{i1 * istr[axis]}u' for _, i1, _ in taps)});")
        lines.append(f"const {ct} w{axis}[{m}] = {ct}[]({', '.join(lit(ct, w) for _, _, w in taps)});")
        pairs.append(axis)
    if a["mode"] == "nearest":
        lines.append(f"return {_fetch(x.dtype, 'in0', ' + '.join(single) or '0u')};")
        return _body(req, lines, doc)
    ct = k.ct(x.dtype)

    def blend(j: int, at: list[str]) -> str:
        """The weighted sum over the interpolated axes pairs[j:], the others' offsets in `at`."""
        if j == len(pairs):
            return k.load(x.dtype, "in0", " + ".join(single + at) or "0u")
        ax = pairs[j]
        return (f"(({lit(ct, 1)} - w{ax}[c{ax}]) * {blend(j + 1, [*at, f'lo{ax}[c{ax}]'])}"
                f" + w{ax}[c{ax}] * {blend(j + 1, [*at, f'hi{ax}[c{ax}]'])})")
    lines.append(f"return {blend(0, [])};")
    return Body(value="\n".join(lines), vct=ct, doc=doc)


def _index_check(ict: str, n: int, v: str = "v") -> tuple[str, str]:
    """(the condition that index `v` of GLSL type `ict` is outside [-n, n), its row as a uint):
    a signed index counts from the end when negative."""
    if ict in ("int", "int64_t"):
        return (f"{v} < {lit(ict, -n)} || {v} >= {lit(ict, n)}",
                f"uint({v} < {lit(ict, 0)} ? {v} + {lit(ict, n)} : {v})")
    return f"{v} >= {lit(ict, n)}", f"uint({v})"


@family("gather")
def emit_gather(req: KernelRequest, k: KernelCtx) -> Body:
    table, idx = req.inputs
    t = table.dtype
    axis = k.static("axis") % len(table.shape)
    n = table.shape[axis]
    inner = numel(table.shape[axis + 1:])
    nidx = idx.numel
    ict = k.ct(idx.dtype)
    k.fallible = True
    v = k.load(idx.dtype, "in1", "p")
    bad, row = _index_check(ict, n)
    zero = "0u" if t.is_packed else f"{storage_type(t)}(0)"
    lines = [f"uint o = i / {nidx * inner}u, p = (i / {inner}u) % {nidx}u, q = i % {inner}u;",
             f"{compute_type(idx.dtype)} v = {v};",
             f"if ({bad}) {{ oi_fail(); return {zero}; }}",
             f"uint src = (o * {n}u + {row}) * {inner}u + q;",
             f"return {_fetch(t, 'in0', 'src')};"]
    return _body(req, lines, f"gather: {table} rows along axis {axis} picked by {idx} (indices in [-{n}, {n}))")


@family("gather_elements")
def emit_gather_elements(req: KernelRequest, k: KernelCtx) -> Body:
    data, idx = req.inputs
    t = data.dtype
    axis = k.static("axis") % len(data.shape)
    n = data.shape[axis]
    dstr = list(contiguous_strides(data.shape))
    along = dstr[axis]
    dstr[axis] = 0                       # the coordinate on the axis comes from the index
    ict = k.ct(idx.dtype)
    k.fallible = True
    bad, row = _index_check(ict, n)
    zero = "0u" if t.is_packed else f"{storage_type(t)}(0)"
    lines = [f"{compute_type(idx.dtype)} v = {k.load(idx.dtype, 'in1', 'i')};",
             f"if ({bad}) {{ oi_fail(); return {zero}; }}",
             f"uint src = {index_expr('i', idx.shape, dstr)} + {row} * {along}u;",
             f"return {_fetch(t, 'in0', 'src')};"]
    return _body(req, lines, f"gather_elements: {data} along axis {axis} at the indices of {idx} "
                             f"(in [-{n}, {n}))")


def _tuple_slot(k: KernelCtx, idx, dims, tuple_at: str, failed: str) -> list[str]:
    """Lines adding to `s` the row-major slot among `dims` that index tuple `tuple_at` (of idx's
    last dim) picks; an index outside [-n, n) of its dim fails the kernel and returns `failed`."""
    ict = k.ct(idx.dtype)
    lines = []
    for j, (n, stride) in enumerate(zip(dims, contiguous_strides(tuple(dims)), strict=True)):
        v = f"v{j}"
        lines.append(f"{ict} {v} = {k.load(idx.dtype, 'in1', f'{tuple_at} * {len(dims)}u + {j}u')};")
        bad, row = _index_check(ict, n, v)
        lines.append(f"if ({bad}) {{ oi_fail(); return {failed}; }}")
        lines.append(f"s += {row}" + (f" * {stride}u;" if stride != 1 else ";"))
    return lines


@family("gather_nd")
def emit_gather_nd(req: KernelRequest, k: KernelCtx) -> Body:
    data, idx = req.inputs
    t = data.dtype
    b = k.static("batch_dims")
    kk = idx.shape[-1]
    lead = data.shape[b:b + kk]
    rows, inner = numel(idx.shape[b:-1]), numel(data.shape[b + kk:])
    k.fallible = True
    zero = "0u" if t.is_packed else f"{storage_type(t)}(0)"
    lines = [f"uint o = i / {inner}u, q = i % {inner}u;",      # o: the tuple, among all batches'
             f"uint s = (o / {rows}u) * {numel(lead)}u;" if b else "uint s = 0u;",
             *_tuple_slot(k, idx, lead, "o", zero),
             f"return {_fetch(t, 'in0', f's * {inner}u + q')};"]
    return _body(req, lines, f"gather_nd: {data} slices picked by the index tuples of {idx}"
                             + (f", batch_dims {b}" if b else "") + f" (indices in [-n, n) of dims {list(lead)})")


@family("scatter_nd")
def emit_scatter_nd(req: KernelRequest, k: KernelCtx) -> Body:
    """Output element i: data's, unless an index tuple picks its slot; then (reduction none) the
    last such row's update, or data's value combined with every such row's update in order. Each
    invocation reads all the tuples (and checks them all): no two invocations write one element,
    so no atomics, and the result is the C kernel's, bit for bit (it applies the rows in order)."""
    data, idx, upd = req.inputs
    t = data.dtype
    kk = idx.shape[-1]
    dims = data.shape[:kk]
    inner, nrows = numel(data.shape[kk:]), numel(idx.shape[:-1])
    reduction = k.static("reduction")
    k.fallible = True
    own = _fetch(t, "in0", "i")
    lines = [f"uint slot = i / {inner}u, q = i % {inner}u;", "bool hit = false;"]
    if reduction == "none":
        lines.append("uint last = 0u;")
        picked = ["hit = true;", "last = p;"]
    else:
        ct = k.ct(t)
        c = Ew(replace(req, op=reduction, inputs=(data, data), aliased=False), k, t, t, ct, ("acc", "b"))
        pre, value, vct = expression(c)
        after = "int" if t.kind.name == "BOOL" else ("double" if t.name == "f64" else "float" if t.is_float else vct)
        lines.append(f"{ct} acc = {k.load(t, 'in0', 'i')};")
        picked = ["hit = true;", f"{ct} b = {k.load(t, 'in2', f'p * {inner}u + q')};", *pre,
                  f"acc = {conv(round_to(k, t, value, vct), after, ct)};"]
    lines += [f"for (uint p = 0u; p < {nrows}u; ++p) {{", "    uint s = 0u;",
              *(f"    {line}" for line in _tuple_slot(k, idx, dims, "p", own)),
              "    if (s == slot) {", *(f"        {line}" for line in picked), "    }", "}",
              f"if (!hit) return {own};"]
    if reduction == "none":
        lines.append(f"return {_fetch(t, 'in2', f'last * {inner}u + q')};")
    else:
        lines.append(f"return {k.raw(t, 'acc', ct) if t.is_packed else k.store(t, 'acc', ct)};")
    how = "replacing them: the last of repeated tuples wins" if reduction == "none" else f"by {reduction}, row by row"
    return _body(req, lines, f"scatter_nd: {upd} into {data} at the slices the index tuples of {idx} pick ({how}; "
                             f"indices in [-n, n) of dims {list(dims)})")
