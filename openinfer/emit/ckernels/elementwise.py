"""Element-wise C kernels: one expression per op over compute-typed operands x0, x1, ...

Each `_EXPR` entry maps (request, operand names) to (extra statement lines, value expression);
the value is in the compute type of the working dtype (the accumulator in accumulate mode, else
the input type) and is stored into the output with the reference's rounding/wrapping. Semantics
follow openinfer/ops/kernels/elementwise.py exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from ...dtypes import DTypeInfo, Kind
from ...synth.program import KernelRequest
from ..env import render
from . import family, prototype
from .common import broadcast_strides, compute_ctype, contiguous_strides, literal, load, store

Expr = Callable[[KernelRequest, list[str]], tuple[list[str], str]]
_EXPR: dict[str, Expr] = {}


def expr(*ops: str):
    def deco(fn: Expr) -> Expr:
        for op in ops:
            _EXPR[op] = fn
        return fn
    return deco


def work(req: KernelRequest) -> DTypeInfo:
    return req.acc[-1] if req.acc else req.inputs[0].dtype


def _wrapping(op: str, w: DTypeInfo, xs: list[str]) -> str:
    """Integer +, -, * in 64 bits without signed-overflow UB (wraps; the store truncates)."""
    if compute_ctype(w) == "int64_t":
        return f"(int64_t)((uint64_t){xs[0]} {op} (uint64_t){xs[1]})"
    return f"({xs[0]} {op} {xs[1]})"


@expr("add", "sub", "mul")
def _arith(req: KernelRequest, xs: list[str]) -> tuple[list[str], str]:
    w = work(req)
    sym = {"add": "+", "sub": "-", "mul": "*"}[req.op]
    if w.kind is Kind.BOOL:
        return [], f"({xs[0]} {'|' if req.op == 'add' else '&'} {xs[1]})"
    if w.is_float:
        return [], f"({xs[0]} {sym} {xs[1]})"
    return [], _wrapping(sym, w, xs)


@expr("relu")
def _relu(req: KernelRequest, xs: list[str]) -> tuple[list[str], str]:
    t = req.inputs[0].dtype
    ct = compute_ctype(t)
    alpha, cmax, cmin = req.attr("alpha"), req.attr("clamp_max"), req.attr("clamp_min")
    # IEEE minimum/maximum as the reference: NaN propagates through the clamps
    return [f"{ct} y = {xs[0]} >= 0 ? {xs[0]} : {literal(t, alpha)} * {xs[0]};",
            f"y = y > {literal(t, cmax)} ? {literal(t, cmax)} : y;",
            f"y = y < {literal(t, cmin)} ? {literal(t, cmin)} : y;"], "y"


@family(*_EXPR)
def emit(req: KernelRequest, name: str, renderer) -> str:
    w = work(req)
    out = req.output
    ct = compute_ctype(w)
    inputs = []
    flat = all(t.shape == out.shape for t in req.inputs)
    ostr = contiguous_strides(out.shape)
    for i, t in enumerate(req.inputs):
        strides = broadcast_strides(t.shape, out.shape)
        idx = " + ".join(f"i{d} * {s}" for d, s in enumerate(strides) if s) or "0"
        inputs.append({"ct": ct, "load_flat": f"({ct}){load(t.dtype, f'in{i}', 'i')}",
                       "load_nd": f"({ct}){load(t.dtype, f'in{i}', idx)}"})
    pre, value = _EXPR[req.op](req, [f"x{i}" for i in range(len(req.inputs))])
    if w != out.dtype:
        value = f"({compute_ctype(out.dtype)})({value})"
    out_idx = " + ".join(f"i{d} * {s}" for d, s in enumerate(ostr)) or "0"
    return render("c/ops/elementwise.c.j2", proto=prototype(req, name), flat=flat, numel=out.numel,
                  inputs=inputs, pre=pre, dims=list(out.shape), out_index=out_idx,
                  store_flat=store(out.dtype, "out", "i", value), store_nd=store(out.dtype, "out", "o", value))
