"""The integer-only int8 ops (TFLite's int8 kernels) in portable C: qconv2d, qlinear,
qavg_pool2d / qmax_pool2d, qadd, qsub, qmul, qmean, qsoftmax, qlut, qhard_swish, quantize, dequantize,
requantize
(openinfer/reference/kernels/quantized.py). Every one is bit-exact with the reference: the
fixed-point steps are hal/include/oi_quant.h's, which follow TFLite's C line by line; the shapes,
zero points, multipliers of per-tensor scales and activation bounds are constants here, the
per-channel multipliers, shifts, scales and biases arrive as the op's inputs.

The sums are plain loops over NHWC data with the channels innermost and contiguous, which any
compiler vectorises or not without changing a result (integer sums are exact). Shapes must be
static: TFLite models have fixed shapes."""

from __future__ import annotations

from ....errors import SynthesisError
from ....reference.kernels.quantized import mean_multiplier, wrap32
from ....synth.program import KernelRequest
from ...env import render
from ...geometry import contiguous_strides, numel
from .common import float_literal, par_rows, static_attr
from .registry import family, prototype

#: Multiply-adds from which a convolution or fully connected layer splits its rows over the pool
#: (also the wings' int8 kernels' threshold)
PAR_MACS = 1 << 18


def plain_static(req: KernelRequest, modes: tuple[str, ...] = ("normal",)) -> bool:
    """Whether a request is what the wings' SIMD int8 kernels take: static, non-empty shapes and
    none of the planner's fused, aliased or packed forms (`modes` with "inplace": an element-wise
    kernel that reads each element before it writes it, which may also alias)."""
    if req.mode not in modes or (req.aliased and "inplace" not in modes) or req.acc or req.epilogue \
            or req.prologue or req.input_perms or req.packed or req.sizes or req.runtime_attrs:
        return False
    return all(isinstance(d, int) for t in (*req.inputs, req.output) for d in t.shape) and numel(req.output.shape) > 0


def broadcast_operand(req: KernelRequest) -> str | None:
    """For an element-wise int8 op of two inputs: "" when both have the output's shape, "a" or "b"
    when that one is a single element, None for any other broadcast (the portable kernel's)."""
    count = numel(req.output.shape)
    sizes = [numel(t.shape) for t in req.inputs]
    if any(s not in (1, count) for s in sizes) or (count > 1 and max(sizes) < count):
        return None
    return "a" if sizes[0] < count else "b" if sizes[1] < count else ""


def _static(req: KernelRequest) -> None:
    for t in (*req.inputs, req.output):
        if not all(isinstance(d, int) for d in t.shape):
            raise SynthesisError(f"{req.op}: the integer-only ops need static shapes, got {t}")


def _attrs(req: KernelRequest, *names: str) -> dict:
    return {n: static_attr(req, n) for n in names}


@family("qconv2d")
def emit_qconv(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    x, w = req.inputs[0].shape, req.inputs[1].shape
    n, oh, ow, o = req.output.shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = (static_attr(req, a) for a in ("stride", "dilation", "padding"))
    groups = static_attr(req, "groups")
    rows = n * oh
    macs = numel(req.output.shape) * w[1] * w[2] * w[3]
    return render("c/ops/qconv.c.j2", proto=prototype(req, name), name=name, doc=_doc(req),
                  h=x[1], w=x[2], c=x[3], oh=oh, ow=ow, o=o, kh=w[1], kw=w[2], cg=w[3], og=o // groups,
                  sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, has_bias=len(req.inputs) > 4, rows=rows,
                  **_attrs(req, "x_zero", "y_zero", "act_min", "act_max"), **par_rows(rows, macs // rows, PAR_MACS))


@family("qlinear")
def emit_qlinear(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    n, k = req.inputs[1].shape
    rows = numel(req.output.shape) // n
    return render("c/ops/qlinear.c.j2", proto=prototype(req, name), name=name, doc=_doc(req), k=k, n=n,
                  rows=rows, has_bias=len(req.inputs) > 3,
                  **_attrs(req, "x_zero", "w_zero", "y_zero", "act_min", "act_max"), **par_rows(rows, n * k, PAR_MACS))


@family("qavg_pool2d", "qmax_pool2d")
def emit_qpool(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    batch, h, w, c = req.inputs[0].shape
    _, oh, ow, _ = req.output.shape
    (kh, kw), (sh, sw), (pt, pl, _, _) = (static_attr(req, a) for a in ("kernel", "stride", "padding"))
    return render("c/ops/qpool.c.j2", proto=prototype(req, name), doc=_doc(req), is_max=req.op == "qmax_pool2d",
                  batch=batch, h=h, w=w, c=c, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl,
                  **_attrs(req, "act_min", "act_max"))


def _broadcast_index(shape: tuple[int, ...], out: tuple[int, ...], var: str) -> tuple[list[str], str]:
    """C lines and the index expression of the element of an input of `shape` that output element
    `i` (of shape `out`) reads under NumPy broadcasting."""
    if tuple(shape) == tuple(out):
        return [], "i"
    if numel(shape) == 1:
        return [], "0"
    lead = len(out) - len(shape)
    strides = contiguous_strides(shape)
    out_strides = contiguous_strides(out)
    terms = [f"((i / {out_strides[lead + k]}) % {out[lead + k]}) * {strides[k]}"
             for k in range(len(shape)) if shape[k] != 1]
    return [f"const int64_t {var} = {' + '.join(terms) or '0'};"], var


def _binary_indexes(req: KernelRequest) -> dict:
    out = req.output.shape
    a_lines, a_index = _broadcast_index(req.inputs[0].shape, out, "ia")
    b_lines, b_index = _broadcast_index(req.inputs[1].shape, out, "ib")
    return {"count": numel(out), "index_lines": a_lines + b_lines, "a_index": a_index, "b_index": b_index}


@family("qadd", "qsub")
def emit_qadd(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    a = _attrs(req, "a_zero", "a_shift", "b_zero", "b_shift", "y_zero", "y_shift", "left_shift", "act_min", "act_max")
    return render("c/ops/qadd.c.j2", proto=prototype(req, name), doc=_doc(req), subtract=req.op == "qsub",
                  a_mult=static_attr(req, "a_multiplier"), b_mult=static_attr(req, "b_multiplier"),
                  y_mult=static_attr(req, "y_multiplier"), **_binary_indexes(req), **a)


@family("qmul")
def emit_qmul(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    return render("c/ops/qmul.c.j2", proto=prototype(req, name), doc=_doc(req), **_binary_indexes(req),
                  **_attrs(req, "a_zero", "b_zero", "y_zero", "multiplier", "shift", "act_min", "act_max"))


def _offset(index: str, dims: list[tuple[int, int]]) -> str:
    """The C expression of the input offset of coordinate `index` into the row-major block of
    `dims` [(extent, input stride)], extents of 1 left out."""
    terms, inner = [], 1
    for extent, stride in reversed(dims):
        if extent != 1:
            terms.append(f"(({index} / {inner}) % {extent}) * {stride}")
        inner *= extent
    return " + ".join(reversed(terms)) or "0"


@family("qmean")
def emit_qmean(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    shape = req.inputs[0].shape
    axes = static_attr(req, "axes")
    strides = contiguous_strides(shape)
    kept = [(d, s) for i, (d, s) in enumerate(zip(shape, strides, strict=True)) if i not in axes]
    reduced = [(d, s) for i, (d, s) in enumerate(zip(shape, strides, strict=True)) if i in axes]
    count = numel([d for d, _ in reduced])
    multiplier, shift = mean_multiplier(static_attr(req, "multiplier"), static_attr(req, "shift"), count)
    zero_times_count = int(wrap32(static_attr(req, "x_zero") * count))
    return render("c/ops/qmean.c.j2", proto=prototype(req, name), doc=_doc(req), outputs=numel(req.output.shape),
                  count=count, base=_offset("o", kept), reduced=_offset("r", reduced), multiplier=multiplier,
                  shift=shift, zero_times_count=zero_times_count, y_zero=static_attr(req, "y_zero"))


@family("qsoftmax")
def emit_qsoftmax(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    shape = req.inputs[0].shape
    depth = shape[-1] if shape else 1
    return render("c/ops/qsoftmax.c.j2", proto=prototype(req, name), doc=_doc(req), rows=numel(shape) // depth,
                  depth=depth, **_attrs(req, "multiplier", "left_shift", "diff_min"))


@family("qlut")
def emit_qlut(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    return render("c/ops/qlut.c.j2", proto=prototype(req, name), doc=_doc(req), count=numel(req.output.shape))


@family("qhard_swish")
def emit_qhard_swish(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    return render("c/ops/qhard_swish.c.j2", proto=prototype(req, name), doc=_doc(req), count=numel(req.output.shape),
                  **_attrs(req, "x_zero", "y_zero", "output_multiplier", "output_shift", "reluish_multiplier",
                           "reluish_shift"))


@family("quantize", "dequantize", "requantize")
def emit_qconvert(req: KernelRequest, name: str, renderer) -> str:
    _static(req)
    ctx = {"op": req.op, "count": numel(req.output.shape)}
    if req.op == "requantize":
        ctx.update(_attrs(req, "x_zero", "y_zero", "multiplier", "shift", "act_min", "act_max"))
    else:
        scale = static_attr(req, "scale")
        ctx.update(zero=static_attr(req, "zero"),
                   scale=float_literal("float", scale) if req.op == "quantize" else float_literal("double", scale))
    return render("c/ops/qconvert.c.j2", proto=prototype(req, name), doc=_doc(req), **ctx)


def _doc(req: KernelRequest) -> str:
    ins = ", ".join(str(t) for t in req.inputs)
    return f"{req.op}({ins}) -> {req.output}"
