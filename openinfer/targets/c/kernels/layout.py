"""Layout ops in portable C: gather, gather_elements, gather_nd, scatter_nd, transpose, reshape, concat, slice,
dynamic_slice, pad, resize. They move stored values without computing (every dtype; packed types element by
element through oi_numeric.h), as openinfer/reference/kernels/layout.py; scatter_nd's reductions compute as the
element-wise kernels of the ops they name, resize's linear mode interpolates floats. Output elements are written
in row-major order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....dtypes import DTypeInfo
from ....numerics import to_storage
from ....ops.resample import pad_source, resize_axis
from ....ops.shapes import slice_extent, transpose_perm
from ....reference.kernels.common import store as ref_store
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import collapse, contiguous_strides, numel
from .common import compute_ctype, copy_elem, ctype, float_literal, load, offset, static_attr, store
from .elementwise import Ctx, expression
from .registry import family, prototype


def _move(t: DTypeInfo, src: str, sizes, sstr, dstr, sbase: int = 0, dbase: int = 0, comment: str = "") -> dict:
    """A strided copy of the box `sizes` from `src` into `out`."""
    sizes, sstr, dstr = collapse(sizes, sstr, dstr)
    vars_ = [f"i{k}" for k in range(len(sizes))]
    if sizes and sstr[-1] == 1 and dstr[-1] == 1:
        run = sizes[-1]
        s, d = offset(vars_[:-1], sstr[:-1], sbase), offset(vars_[:-1], dstr[:-1], dbase)
        if t.is_packed:
            body = f"oi_packed_copy(out, {d}, {src}, {s}, {run}, {t.bits});"
        else:
            body = f"memcpy(out + {d}, {src} + {s}, {run} * sizeof *out);" if (s, d) != ("0", "0") \
                else f"memcpy(out, {src}, {run} * sizeof *out);"
        loops = [[v, n] for v, n in zip(vars_[:-1], sizes[:-1], strict=True)]
    else:
        body = copy_elem(t, "out", offset(vars_, dstr, dbase), src, offset(vars_, sstr, sbase))
        loops = [[v, n] for v, n in zip(vars_, sizes, strict=True)]
    return {"loops": loops, "body": body, "comment": comment}


def _render(req: KernelRequest, name: str, doc: str, moves: list[dict]) -> str:
    return render("c/ops/copy.c.j2", proto=prototype(req, name), doc=doc, moves=moves)


@family("reshape")
def emit_reshape(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    nbytes = x.dtype.storage_nbytes(x.numel)
    mv = {"loops": [], "body": f"memcpy(out, in0, {nbytes});", "comment": ""}
    return _render(req, name, f"reshape: {x} -> {list(req.output.shape)} (same bytes)", [mv])


@family("transpose")
def emit_transpose(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    nd = len(x.shape)
    perm = transpose_perm(static_attr(req, "perm"), nd)
    istr = contiguous_strides(x.shape)
    out_shape = [x.shape[p] for p in perm]
    mv = _move(x.dtype, "in0", out_shape, [istr[p] for p in perm], list(contiguous_strides(tuple(out_shape))))
    return _render(req, name, f"transpose: {x} with perm {perm}", [mv])


@family("slice")
def emit_slice(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    nd = len(x.shape)
    starts, ends = static_attr(req, "starts"), static_attr(req, "ends")
    axes = static_attr(req, "axes") or tuple(range(len(starts)))
    steps = static_attr(req, "steps") or (1,) * len(starts)
    istr = contiguous_strides(x.shape)
    first, step = [0] * nd, [1] * nd
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a %= nd
        first[a], _, step[a] = slice_extent(s, e, st, x.shape[a])
    sbase = sum(f * s for f, s in zip(first, istr, strict=True))
    out_shape = req.output.shape
    mv = _move(x.dtype, "in0", list(out_shape), [st * s for st, s in zip(step, istr, strict=True)],
               list(contiguous_strides(out_shape)), sbase)
    return _render(req, name, f"slice: {x} from {first} by steps {step} -> {list(out_shape)}", [mv])


@family("dynamic_slice")
def emit_dynamic_slice(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    istr = contiguous_strides(x.shape)
    pre, terms = [], []
    for k, (a, size) in enumerate(zip(static_attr(req, "axes"), static_attr(req, "sizes"), strict=True)):
        s = req.inputs[1 + k]
        last = x.shape[a] - size            # the largest start that keeps the window inside x
        pre.append(f"const {compute_ctype(s.dtype)} v{k} = {load(s.dtype, f'in{k + 1}', '0')};")
        low = f"v{k} < 0 ? 0 : " if s.dtype.is_signed else ""
        pre.append(f"const int64_t first{k} = {low}v{k} > {last} ? {last} : (int64_t)v{k};")
        terms.append(f"first{k} * {istr[a]}")
    out_shape = req.output.shape
    mv = _move(x.dtype, "in0", list(out_shape), list(istr), list(contiguous_strides(out_shape)), "base")
    pre.append(f"const int64_t base = {' + '.join(terms)};")
    return render("c/ops/copy.c.j2", proto=prototype(req, name), pre=pre, moves=[mv],
                  doc=f"dynamic_slice: {x} -> {list(out_shape)} at run-time starts along "
                      f"{list(static_attr(req, 'axes'))}, clamped so the window stays inside")


@family("concat")
def emit_concat(req: KernelRequest, name: str, renderer) -> str:
    out_shape = req.output.shape
    nd = len(out_shape)
    axis = static_attr(req, "axis") % nd
    ostr = contiguous_strides(out_shape)
    moves, at = [], 0
    for i, x in enumerate(req.inputs):
        moves.append(_move(x.dtype, f"in{i}", list(x.shape), list(contiguous_strides(x.shape)), list(ostr),
                           0, at * ostr[axis], f"input {i}: {x} at {at} along axis {axis}"))
        at += x.shape[axis]
    return _render(req, name, f"concat: {len(req.inputs)} inputs along axis {axis} -> {list(out_shape)}", moves)


@family("pad")
def emit_pad(req: KernelRequest, name: str, renderer) -> str:
    """The whole output set to the border value, then x copied into its interior box as strided
    moves (contiguous runs as memcpy: every run of an unpadded innermost axis, whole rows where the
    inner axes are unpadded). Filling everything first keeps one loop nest for any rank; the
    interior is written twice, a small cost beside 2 * rank border boxes of their own loops."""
    x, y = req.inputs[0], req.output
    t = y.dtype
    pads = static_attr(req, "pads")
    if static_attr(req, "mode") != "constant":
        return _pad_from_x(req, name, pads)
    raw = to_storage(np.full(8 // t.bits if t.is_packed else 1, ref_store(np.full((), static_attr(req, "value")), t),
                             dtype=t.np_dtype), t)        # the value's stored bytes, as `fill` stores it
    nbytes = t.storage_nbytes(y.numel)
    if not any(pads):                       # no border: the copy alone
        pre = []
    elif len(set(raw)) == 1:                # one repeated byte (packed types, bytes, zeros): memset
        pre = [f"memset(out, 0x{raw[0]:02x}, {nbytes});"]
    else:
        ct = ctype(t)
        pattern = ", ".join(f"0x{b:02x}" for b in raw)
        pre = [f"static const uint8_t border_bytes[{len(raw)}] = {{{pattern}}};", f"{ct} border;",
               "memcpy(&border, border_bytes, sizeof border);",
               f"for (int64_t i = 0; i < {y.numel}; ++i) out[i] = border;"]
    ostr = contiguous_strides(y.shape)
    dbase = sum(pads[2 * i] * s for i, s in enumerate(ostr))
    mv = _move(x.dtype, "in0", list(x.shape), list(contiguous_strides(x.shape)), list(ostr), 0, dbase,
               f"x into the interior, at {[pads[2 * i] for i in range(len(x.shape))]}")
    return render("c/ops/copy.c.j2", proto=prototype(req, name), pre=pre, moves=[mv] if x.numel else [],
                  doc=f"pad: {x} -> {list(y.shape)}, pads {list(pads)}, border value {static_attr(req, 'value')!r}")


def _pad_from_x(req: KernelRequest, name: str, pads) -> str:
    """reflect / edge: every output element copied from x at the indices pad_source gives."""
    x, y = req.inputs[0], req.output
    mode = static_attr(req, "mode")
    sources = [[pad_source(mode, j - before, n) for j in range(m)] if before or m != n else None
               for n, m, before in zip(x.shape, y.shape, pads[0::2], strict=True)]
    return _copied_by_tables(req, name, sources, f"pad: {x} -> {list(y.shape)}, pads {list(pads)}, mode {mode}")


def _copied_by_tables(req: KernelRequest, name: str, sources: list[list[int] | None], doc: str) -> str:
    """Output element (i0, i1, ...) copied from x's element (sources[0][i0], sources[1][i1], ...),
    each axis's indices a table of offsets (None: the axis reads its own index)."""
    x, y = req.inputs[0], req.output
    istr, ostr = contiguous_strides(x.shape), contiguous_strides(y.shape)
    pre, src = [], []
    for a, indices in enumerate(sources):
        if indices is None:
            src.append(offset([f"i{a}"], [istr[a]]))
            continue
        offsets = ", ".join(str(i * istr[a]) for i in indices)
        pre.append(f"static const int64_t from{a}[{len(indices)}] = {{{offsets}}};")
        src.append(f"from{a}[i{a}]")
    loops = [[f"i{a}", d] for a, d in enumerate(y.shape)]
    body = copy_elem(y.dtype, "out", offset([v for v, _ in loops], ostr), "in0", " + ".join(src) or "0")
    return render("c/ops/copy.c.j2", proto=prototype(req, name), pre=pre,
                  moves=[{"loops": loops, "body": body, "comment": "x's element per axis table"}] if y.numel else [],
                  doc=doc)


def _resize_attrs(req: KernelRequest) -> dict:
    return {k: static_attr(req, k) for k in ("sizes", "scales", "mode", "coordinate_transformation_mode",
                                             "nearest_mode")}


@family("resize")
def emit_resize(req: KernelRequest, name: str, renderer) -> str:
    """nearest: a copy through per-axis index tables. linear: per axis with fractional positions,
    tables of the two neighbours' offsets and the weight of the upper one; each output element is
    the nested (separable) weighted sum of its 2^k neighbours in double, rounded once to T (through
    f32 for the narrow types, as the reference's store)."""
    x, y = req.inputs[0], req.output
    a = _resize_attrs(req)
    taps = [resize_axis(a, axis, n, m) for axis, (n, m) in enumerate(zip(x.shape, y.shape, strict=True))]
    doc = (f"resize: {x} -> {list(y.shape)}, {a['mode']}, {a['coordinate_transformation_mode']}"
           + (f", {a['nearest_mode']}" if a["mode"] == "nearest" else "") + (f", scales {list(a['scales'])}"
                                                                          if a["scales"] else ""))
    identity = [all(i0 == o and w == 0 for o, (i0, _, w) in enumerate(t)) and len(t) == n
                for t, n in zip(taps, x.shape, strict=True)]
    if a["mode"] == "nearest":
        return _copied_by_tables(req, name, [None if same else [i0 for i0, _, _ in t]
                                             for t, same in zip(taps, identity, strict=True)], doc)
    istr, ostr = contiguous_strides(x.shape), contiguous_strides(y.shape)
    pre, single, pairs = [], [], []
    for axis, (t, same) in enumerate(zip(taps, identity, strict=True)):
        m = len(t)
        if same:
            single.append(offset([f"i{axis}"], [istr[axis]]))
            continue
        pre.append(f"static const int64_t lo{axis}[{m}] = {{{', '.join(str(i0 * istr[axis]) for i0, _, _ in t)}}};")
        if not any(w for _, _, w in t):
            single.append(f"lo{axis}[i{axis}]")
            continue
        pre.append(f"static const int64_t hi{axis}[{m}] = {{{', '.join(str(i1 * istr[axis]) for _, i1, _ in t)}}};")
        pre.append(f"static const double w{axis}[{m}] = {{{', '.join(float_literal('double', w) for _, _, w in t)}}};")
        pairs.append(axis)
    t_x = x.dtype
    ct = compute_ctype(t_x)

    def blend(k: int, at: list[str]) -> str:
        """The weighted sum over the interpolated axes pairs[k:], the others' offsets in `at`."""
        if k == len(pairs):
            value = load(t_x, "in0", " + ".join(single + at) or "0")
            return value if ct == "double" else f"(double){value}"
        ax = pairs[k]
        return (f"((1.0 - w{ax}[i{ax}]) * {blend(k + 1, [*at, f'lo{ax}[i{ax}]'])}"
                f" + w{ax}[i{ax}] * {blend(k + 1, [*at, f'hi{ax}[i{ax}]'])})")
    loops = [[f"i{axis}", d] for axis, d in enumerate(y.shape)]
    value = blend(0, [])
    narrow = y.dtype.name not in ("f32", "f64")          # rounded through f32, as the reference's store
    body = store(y.dtype, "out", offset([v for v, _ in loops], ostr), f"(float){value}" if narrow else value)
    return render("c/ops/copy.c.j2", proto=prototype(req, name), pre=pre,
                  moves=[{"loops": loops, "body": body, "comment": "the neighbours' weighted sum"}] if y.numel else [],
                  doc=doc)


def _index_check(ict: str, n: int) -> tuple[str, str]:
    """(the condition that index `v` of C type `ict` is outside [-n, n), its row as int64_t): a
    signed index (loaded as int64_t) counts from the end when negative."""
    if ict == "int64_t":
        return f"v < -{n} || v >= {n}", f"v < 0 ? v + {n} : v"
    return f"v >= {n}u", "(int64_t)v"


@family("gather")
def emit_gather(req: KernelRequest, name: str, renderer) -> str:
    table, idx = req.inputs
    t = table.dtype
    axis = static_attr(req, "axis") % len(table.shape)
    n = table.shape[axis]
    outer = 1
    for d in table.shape[:axis]:
        outer *= d
    inner = 1
    for d in table.shape[axis + 1:]:
        inner *= d
    ict = compute_ctype(idx.dtype)
    bad, row = _index_check(ict, n)
    if t.is_packed:
        copy = f"oi_packed_copy(out, dst, in0, src, {inner}, {t.bits});"
    elif inner == 1:
        copy = "out[dst] = in0[src];"
    else:
        copy = f"memcpy(out + dst, in0 + src, {inner} * sizeof *out);"
    doc = f"gather: {table} rows along axis {axis} picked by {idx} (indices in [-{n}, {n}))"
    return render("c/ops/gather.c.j2", proto=prototype(req, name), doc=doc, nidx=idx.numel, ict=ict,
                  load_idx=load(idx.dtype, "in1", "p"), bad=bad, row=row, outer=outer, n=n, inner=inner, copy=copy)


@family("gather_elements")
def emit_gather_elements(req: KernelRequest, name: str, renderer) -> str:
    data, idx = req.inputs
    t = data.dtype
    axis = static_attr(req, "axis") % len(data.shape)
    n = data.shape[axis]
    dstr = list(contiguous_strides(data.shape))
    along = dstr[axis]
    dstr[axis] = 0                       # the coordinate on the axis comes from the index
    sizes, pstr, sstr = collapse(list(idx.shape), list(contiguous_strides(idx.shape)), dstr)
    pvars = [f"i{d}" for d in range(len(sizes))]
    ict = compute_ctype(idx.dtype)
    bad, row = _index_check(ict, n)
    src = offset(pvars, sstr)
    doc = f"gather_elements: {data} along axis {axis} at the indices of {idx} (in [-{n}, {n}))"
    return render("c/ops/gather_elements.c.j2", proto=prototype(req, name), doc=doc, nidx=idx.numel, ict=ict,
                  load_p=load(idx.dtype, "in1", "p"), bad=bad, p=offset(pvars, pstr),
                  loops=[[v, s] for v, s in zip(pvars, sizes, strict=True)],
                  src="" if src == "0" else f"{src} + ", row=row, axis_stride=f" * {along}" if along != 1 else "",
                  copy=copy_elem(t, "out", "p", "in0", "src"))


def _index_tuples(idx, dims) -> dict:
    """What templates/c/ops/index_tuples.j2 needs for the tuples in idx's last dim indexing `dims`."""
    k = len(dims)
    ict = compute_ctype(idx.dtype)
    if ict == "int64_t":
        bad, row = "v < -dims[e % K] || v >= dims[e % K]", "v < 0 ? v + dims[j] : v"
    else:
        bad, row = "v >= (uint64_t)dims[e % K]", "(int64_t)v"
    return {"k": k, "dims": list(dims), "strides": list(contiguous_strides(tuple(dims))), "nidx": idx.numel,
            "ict": ict, "load_e": load(idx.dtype, "in1", "e"), "load_pj": load(idx.dtype, "in1", f"p * {k} + j"),
            "bad": bad.replace("K", str(k)), "row": row}


def _slice_copy(t, dst: str, src: str, inner) -> str:
    """A statement copying `inner` stored elements from `src` + src to `out` + dst unchanged."""
    if t.is_packed:
        return f"oi_packed_copy(out, dst, {src}, src, {inner}, {t.bits});"
    if inner == 1:
        return f"out[dst] = {src}[src];"
    return f"memcpy(out + dst, {src} + src, {inner} * sizeof *out);"


@family("gather_nd")
def emit_gather_nd(req: KernelRequest, name: str, renderer) -> str:
    data, idx = req.inputs
    b = static_attr(req, "batch_dims")
    k = idx.shape[-1]
    lead = data.shape[b:b + k]
    rows = numel(idx.shape[b:-1])               # tuples per batch index
    inner = numel(data.shape[b + k:])
    base = f"(p / {rows}) * {numel(lead)}" if b else "0"
    what = f"slices {list(data.shape[b + k:])}" if b + k < len(data.shape) else "elements"
    doc = (f"gather_nd: {what} of {data} picked by the index tuples of {idx}" + (f", batch_dims {b}" if b else "")
           + f" (indices in [-n, n) of dims {list(lead)})")
    return render("c/ops/gather_nd.c.j2", proto=prototype(req, name), doc=doc, t=_index_tuples(idx, lead),
                  nrows=numel(idx.shape[:-1]), batch_base=base, inner=inner,
                  copy=_slice_copy(data.dtype, "dst", "in0", inner))


@family("scatter_nd")
def emit_scatter_nd(req: KernelRequest, name: str, renderer) -> str:
    data, idx, upd = req.inputs
    t = data.dtype
    k = idx.shape[-1]
    inner = numel(data.shape[k:])
    reduction = static_attr(req, "reduction")
    combine = None
    if reduction != "none":
        # the element-wise kernel of the op `reduction` names, over the stored value a and the update b
        ct = compute_ctype(t)
        c = Ctx(replace(req, op=reduction, inputs=(data, data), aliased=False), t, t, ct, ("a", "b"))
        pre, value, vct = expression(c)
        combine = {"pre": pre, "store": store(t, "out", "dst + q", value, vct)}
    nbytes = t.storage_nbytes(data.numel) if t.is_packed else f"{data.numel} * sizeof *out"
    doc = (f"scatter_nd: {upd} into the slices of {data} that the index tuples of {idx} pick, "
           + ("replacing them (the last of repeated tuples wins)" if reduction == "none" else f"by {reduction}")
           + f" (indices in [-n, n) of dims {list(data.shape[:k])})" + (" in place" if req.aliased else ""))
    return render("c/ops/scatter_nd.c.j2", proto=prototype(req, name), doc=doc, t=_index_tuples(idx, data.shape[:k]),
                  copy_data=None if req.aliased else f"memcpy(out, in0, {nbytes});", nrows=numel(idx.shape[:-1]),
                  inner=inner, combine=combine, ct=compute_ctype(t), load_a=load(t, "out", "dst + q"),
                  load_b=load(t, "in2", "src + q"), copy=_slice_copy(t, "dst", "in2", inner))
