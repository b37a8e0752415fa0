"""ONNX Mod, written with the registry's arithmetic (registered into the importer's `SUPPORTED_OPS`
when openinfer/onnx/importer.py is imported).

Integers: fmod=1 (C's truncated remainder, the sign of the dividend) is `rem`; fmod=0 (the sign of
the divisor, as Python and NumPy) is a - floor_div(a, b) * b, exact since integers wrap. Floats:
fmod=1 is a - trunc(a / b) * b computed in the next wider float (f16 in f32, f32 in f64) and
rounded once to the dtype, which is C's fmod wherever the quotient's integer part is exact in the
wider float (|a / b| < 2**24 for f16 and f32 operands) — computed in the operands' own dtype,
the rounding of a / b and of trunc(a / b) * b moves the result by ulps. fmod=0 adds b to a
non-zero remainder whose sign differs from b's (NumPy's mod). f64 is computed in f64 (no wider
float), exact only while a / b rounds to the right integer.
"""

from __future__ import annotations

import numpy as np

from .importer import _FLOATS, _NUMPY_DTYPES, _ONNX_INTS, _ONNX_UINTS, _broadcast, _NodeContext, _op

#: The float each float dtype's Mod is computed in.
_WIDER = {"f16": "f32", "f32": "f64", "f64": "f64"}


@_op("Mod", note="integers: fmod=1 rem, fmod=0 a - floor_div(a, b) * b; floats: a - trunc(a / b) * b in the next "
                 "wider float (f16 in f32, f32 in f64), fmod=0 plus b where the signs differ (filter); folded on "
                 "constants")
def _mod(c: _NodeContext) -> None:
    c.allow("fmod")
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    fmod = int(c.attrs.get("fmod", 0))
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    if a.dtype not in _FLOATS + _ONNX_INTS + _ONNX_UINTS:
        c.fail(f"dtype {a.dtype} is not supported (numeric dtypes)")
    dims = _broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        with np.errstate(all="ignore"):
            value = np.fmod(a.const, b.const) if fmod else np.mod(a.const, b.const)
        c.result(out, c.imp.const_value(value.astype(a.const.dtype)))
        return
    an, bn = c.var(a, 0), c.var(b, 1)
    if a.dtype not in _FLOATS:
        if fmod:
            c.emit("rem", [an, bn], {}, a.dtype, dims, out=out)
            return
        q = c.emit("floor_div", [an, bn], {}, a.dtype, dims, temp=f"{out}_floor_quotient")
        c.emit_inplace("mul", [q.var, bn], q)
        c.emit("sub", [an, q.var], {}, a.dtype, dims, out=out)
        return
    wide = _WIDER[a.dtype]
    if wide != a.dtype:
        an = c.emit("cast", [an], {"to": wide}, wide, a.dims, temp=f"{out}_a_{wide}").var
        bn = c.emit("cast", [bn], {"to": wide}, wide, b.dims, temp=f"{out}_b_{wide}").var
    # fmod: a - trunc(a / b) * b, the product by b clamped to the finite range so that a ±inf
    # divisor (quotient 0) leaves a, not 0 * inf = NaN
    biggest = float(np.finfo(_NUMPY_DTYPES[wide]).max)
    finite_b = c.emit("clamp", [bn], {"min": -biggest, "max": biggest}, wide, b.dims, temp=f"{out}_b_finite")
    q = c.emit("div", [an, bn], {}, wide, dims, temp=f"{out}_quotient")
    c.emit_inplace("trunc", [q.var], q)
    c.emit_inplace("mul", [q.var, finite_b.var], q)
    r = c.emit("sub", [an, q.var], {}, wide, dims, out=out if wide == a.dtype and fmod else None,
               temp=f"{out}_{wide}")
    if not fmod:
        # NumPy's mod: the divisor's sign, so a non-zero remainder of the other sign gains b
        # (filter picks r + b there, so an infinite b gives its infinity, and r elsewhere)
        sign = c.emit("sign", [r.var], {}, "i8", dims, temp=f"{out}_sign")
        divisor_sign = c.emit("sign", [bn], {}, "i8", b.dims, temp=f"{out}_b_sign")
        c.emit_inplace("mul", [sign.var, divisor_sign.var], sign)
        c.emit_inplace("neg", [sign.var], sign)
        differ = c.emit("clamp", [sign.var], {"min": 0}, "i8", dims, temp=f"{out}_signs_differ")
        pick = c.emit("cast", [differ.var], {"to": wide}, wide, dims, temp=f"{out}_add_b")
        shifted = c.emit("add", [r.var, bn], {}, wide, dims, temp=f"{out}_plus_b")
        r = c.emit("filter", [shifted.var, r.var, pick.var], {}, wide, dims,
                   out=out if wide == a.dtype else None, temp=f"{out}_floored_{wide}")
    if wide != a.dtype:
        c.emit("cast", [r.var], {"to": a.dtype}, a.dtype, dims, out=out)
