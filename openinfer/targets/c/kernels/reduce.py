"""Reductions in portable C: sum/mean/prod/max/min over axes, argmax/argmin along an axis, running sums (cumsum,
sequential in scan order), ranking (topk_indices), and is_finite's 0-d form. Semantics of
openinfer/reference/kernels/reduce.py:

- each output element folds its reduced elements in row-major order; a running value in
  f8/bf16/f16 rounds to that type after every step (as the reference), f32/f64 keep full
  precision (the reference sums pairwise: equal within tolerance);
- integers wrap modulo 2^64 and on store; integer means divide the exact sum (128-bit) by the
  count, truncating toward zero;
- max/min are IEEE 754-2019 (NaN propagates, -0.0 < +0.0).
"""

from __future__ import annotations

from ....dtypes import DTypeInfo
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import collapse, contiguous_strides, numel
from .common import NARROW, compute_ctype, literal_ct, load, offset, round_to, static_attr, store
from .registry import family, prototype


def _loops(prefix: str, sizes: list[int]) -> list[list]:
    return [[f"{prefix}{i}", n] for i, n in enumerate(sizes)]


def _fold(kind: str, w: DTypeInfo, s: str, v: str) -> tuple[str, bool]:
    """The running value after folding v into s (compute type of w); True when the caller must
    round it to w (narrow floats, as the reference's store after each step)."""
    ct = compute_ctype(w)
    if kind in ("sum", "mean", "prod"):
        sym = "*" if kind == "prod" else "+"
        if w.is_float:
            return f"{s} {sym} {v}", w.name in NARROW
        if ct == "int64_t":
            return f"(int64_t)((uint64_t){s} {sym} (uint64_t){v})", False
        return f"{s} {sym} {v}", False
    is_max = kind == "max"
    if w.is_float:
        f = ("oi_maxf" if is_max else "oi_minf") if ct == "float" else ("oi_max_f64" if is_max else "oi_min_f64")
        return f"{f}({s}, {v})", False
    return f"({v} {'>' if is_max else '<'} {s} ? {v} : {s})", False


def _init(kind: str, w: DTypeInfo) -> str:
    ct = compute_ctype(w)
    if kind == "prod":
        return literal_ct(ct, 1)
    if kind in ("sum", "mean"):
        # numpy's reduce starts from the first element: the same as starting from -0.0; the
        # reference's narrow fold starts from +0.0
        return literal_ct(ct, -0.0 if w.is_float and w.name not in NARROW else 0)
    if w.is_float:
        return literal_ct(ct, float("-inf") if kind == "max" else float("inf"))
    return literal_ct(ct, w.lo if kind == "max" else w.hi)


@family("sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis")
def emit_reduce(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    kind = req.op[:-len("_axis")]
    w = req.acc[-1] if req.acc else t
    ct = compute_ctype(w)
    shape = x.shape
    nd = len(shape)
    axes = sorted({a % nd for a in static_attr(req, "axes")})
    static_attr(req, "keepdims")
    kept = [d for d in range(nd) if d not in axes]
    istr = contiguous_strides(shape)
    count = numel(shape[a] for a in axes)
    load_v = _as(load(t, "in0", "{}"), compute_ctype(t), ct)
    doc = (f"{req.op}: {kind} of {t.name}{list(shape)} over axes {axes}"
           + (f", accumulating in {w.name}" if req.acc else "") + f" -> {out.name}{list(req.output.shape)}")
    int_mean = kind == "mean" and not w.is_float
    into_out = (nd > 0 and (nd - 1) not in axes and out == w and not int_mean and numel(shape) > 0)
    if into_out:
        # walk the input contiguously; out[o] holds the running value (stored as w = out's type)
        ostr_kept = contiguous_strides(tuple(shape[d] for d in kept))
        ostr = [0] * nd
        for i, d in enumerate(kept):
            ostr[d] = ostr_kept[i]
        sizes, in_s, out_s = collapse(shape, istr, ostr)
        ivars = [f"i{k}" for k in range(len(sizes))]
        value, _ = _fold(kind, w, "s", "v")
        finish = None
        if kind == "mean":
            finish = store(out, "out", "o", f"s / {literal_ct(ct, count)}", ct)
        return render("c/ops/reduce.c.j2", proto=prototype(req, name), doc=doc, mode="into_out", ct=ct,
                      nout=req.output.numel, init_store=store(out, "out", "o", _init(kind, w), ct),
                      all=_loops("i", sizes), out_index=offset(ivars, out_s),
                      load_v=load_v.format(offset(ivars, in_s)), load_s=load(out, "out", "o"),
                      store_step=store(out, "out", "o", value, ct), finish=finish)
    ksizes, kstr = collapse([shape[d] for d in kept], [istr[d] for d in kept])
    rsizes, rstr = collapse([shape[d] for d in axes], [istr[d] for d in axes])
    kvars = [f"k{i}" for i in range(len(ksizes))]
    rvars = [f"r{i}" for i in range(len(rsizes))]
    if int_mean:
        add = "oi_acc128_add_s" if ct == "int64_t" else "oi_acc128_add_u"
        acc_decl = "oi_acc128 s = {0, 0};"
        step = [f"{add}(&s, v);"]
        n = f"(uint64_t)({count})"
        final = (f"(int64_t)oi_acc128_mean(s, {n}, 1)" if ct == "int64_t" else f"oi_acc128_mean(s, {n}, 0)")
    else:
        acc_decl = f"{ct} s = {_init(kind, w)};"
        value, narrow = _fold(kind, w, "s", "v")
        step = [f"s = {round_to(w, value, ct) if narrow else value};"]
        final = f"s / {literal_ct(ct, count)}" if kind == "mean" else "s"
    return render("c/ops/reduce.c.j2", proto=prototype(req, name), doc=doc, mode="local", ct=ct,
                  kept=_loops("k", ksizes), base=offset(kvars, kstr), acc_decl=acc_decl, red=_loops("r", rsizes),
                  load_v=load_v.format("base + " + offset(rvars, rstr)), step=step,
                  store=store(out, "out", "o", final, ct))


@family("argmax_axis", "argmin_axis")
def emit_arg(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t = x.dtype
    shape = x.shape
    nd = len(shape)
    axis = static_attr(req, "axis") % nd
    first = bool(static_attr(req, "select_first"))
    static_attr(req, "keepdims")
    istr = contiguous_strides(shape)
    kept = [d for d in range(nd) if d != axis]
    ksizes, kstr = collapse([shape[d] for d in kept], [istr[d] for d in kept])
    kvars = [f"k{i}" for i in range(len(ksizes))]
    ct = compute_ctype(t)
    is_max = req.op == "argmax_axis"
    doc = (f"{req.op}: index of the {'max' if is_max else 'min'}imum of {t.name}{list(shape)} along axis {axis} "
           f"({'first' if first else 'last'} on ties; NaN wins)")
    return render("c/ops/argreduce.c.j2", proto=prototype(req, name), doc=doc, ct=ct, kept=_loops("k", ksizes),
                  base=offset(kvars, kstr), n=shape[axis], first=first, is_float=t.is_float,
                  load_v=load(t, "in0", f"base + j * {istr[axis]}" if istr[axis] != 1 else "base + j"),
                  cmp=">" if is_max else "<")


@family("cumsum")
def emit_cumsum(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t, out = x.dtype, req.output.dtype
    w = req.acc[-1] if req.acc else t
    ct = compute_ctype(w)
    shape = x.shape
    axis = static_attr(req, "axis") % len(shape)
    exclusive, reverse = bool(static_attr(req, "exclusive")), bool(static_attr(req, "reverse"))
    istr = contiguous_strides(shape)
    kept = [d for d in range(len(shape)) if d != axis]
    ksizes, kstr = collapse([shape[d] for d in kept], [istr[d] for d in kept])
    n = shape[axis]
    value, narrow = _fold("sum", w, "s", "v")
    doc = (f"cumsum: running sums of {t.name}{list(shape)} along axis {axis}"
           + (", exclusive" if exclusive else "") + (", from the last element" if reverse else "")
           + (f", accumulating in {w.name}" if req.acc else "") + f" -> {out.name}")
    return render("c/ops/cumsum.c.j2", proto=prototype(req, name), doc=doc, ct=ct,
                  kept=_loops("k", ksizes), base=offset([f"k{i}" for i in range(len(ksizes))], kstr),
                  init=literal_ct(ct, -0.0 if w.is_float else 0), n=n, j=f"{n} - 1 - jj" if reverse else "jj",
                  stride=f" * {istr[axis]}" if istr[axis] != 1 else "", exclusive=exclusive,
                  load_v=_as(load(t, "in0", "at"), compute_ctype(t), ct),
                  step=round_to(w, value, ct) if narrow else value,
                  store_before=store(out, "out", "at", f"jj == 0 ? {literal_ct(ct, 0)} : s", ct),
                  store_after=store(out, "out", "at", "s", ct))


def _before(ct: str, largest: bool, is_float: bool) -> str:
    """C for "element i (value vi) ranks before element j (vj)" in topk_indices' order."""
    cmp = ">" if largest else "<"
    plain = f"vi {cmp} vj || (vi == vj && i < j)"
    if not is_float:
        return plain
    if largest:          # NaN first
        return f"isnan(vi) ? (!isnan(vj) || i < j) : (!isnan(vj) && ({plain}))"
    return f"isnan(vi) ? (isnan(vj) && i < j) : (isnan(vj) || {plain})"


@family("topk_indices")
def emit_topk(req: KernelRequest, name: str, renderer) -> str:
    x = req.inputs[0]
    t = x.dtype
    shape = x.shape
    axis = static_attr(req, "axis") % len(shape)
    k, largest = static_attr(req, "k"), bool(static_attr(req, "largest"))
    static_attr(req, "sorted")
    istr, ostr = contiguous_strides(shape), contiguous_strides(req.output.shape)
    kept = [d for d in range(len(shape)) if d != axis]
    ksizes, kstr, okstr = collapse([shape[d] for d in kept], [istr[d] for d in kept], [ostr[d] for d in kept])
    kvars = [f"k{i}" for i in range(len(ksizes))]
    ct = compute_ctype(t)
    st = f" * {istr[axis]}" if istr[axis] != 1 else ""
    doc = (f"topk_indices: the {k} {'largest' if largest else 'smallest'} of {t.name}{list(shape)} along axis {axis}, "
           "best first (ties: lower index first; NaN above every number)")
    return render("c/ops/topk.c.j2", proto=prototype(req, name), doc=doc, ct=ct, kept=_loops("k", ksizes),
                  base=offset(kvars, kstr), obase=offset(kvars, okstr), n=shape[axis], k=k,
                  load_j=load(t, "in0", f"base + j{st}"), load_i=load(t, "in0", f"base + i{st}"),
                  before=_before(ct, largest, t.is_float),
                  store=store(req.output.dtype, "out", "obase + rank" + (f" * {ostr[axis]}" if ostr[axis] != 1 else ""),
                              "j", "int64_t"))


def emit_all_finite(req: KernelRequest, name: str, renderer) -> str:
    """is_finite with a 0-d output: all elements finite."""
    x = req.inputs[0]
    return render("c/ops/all_finite.c.j2", proto=prototype(req, name), numel=x.numel,
                  load_x=load(x.dtype, "in0", "i"))


def _as(expr: str, from_ct: str, to_ct: str) -> str:
    return expr if from_ct == to_ct else f"({to_ct}){expr}"

