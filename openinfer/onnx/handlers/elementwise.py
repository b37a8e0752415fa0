"""Element-wise ONNX ops: arithmetic (Add, Sub, Mul, Div, Mod, Pow), math (Sqrt, Exp, Log, Erf,
..., the trigonometric and hyperbolic functions), comparisons and logic, Where, Cast, Clip and the variadic Max,
Min and Sum. Each is folded when its inputs are constants (the shape and index arithmetic of
exported models), and broadcasts as NumPy does.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..context import (
    DSL_OPS,
    FLOATS,
    NUMPY_DTYPES,
    ONNX_DTYPES,
    ONNX_INTS,
    ONNX_UINTS,
    NodeContext,
    Value,
    aligned_at,
    broadcast,
    dim_difference,
    dim_product,
    dim_quotient,
    dim_sum,
    element_dims,
    expanded,
    handler,
    quoted,
)
from ..fusions import bool_mask_where

_BINARY_FOLDS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None}


def _fold_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return (np.trunc(a.astype(np.float64) / b)).astype(a.dtype)
    return (a / b).astype(a.dtype)


@handler("Add", "Sub", "Mul", "Div", note="{dsl}, NumPy broadcasting (opset < 7: the legacy broadcast and axis "
                                          "attributes); folded when both inputs are constants")
def _binary(c: NodeContext) -> None:
    c.allow(*(("broadcast", "axis") if c.opset < 7 else ()))
    a, b = c.inputs(2, 2)
    if c.attrs.get("broadcast", 0) and "axis" in c.attrs:
        b = aligned_at(c, b, 1, len(a.dims), int(c.attrs["axis"]) % max(len(a.dims), 1))
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    fold = _BINARY_FOLDS[c.node.op_type]
    op = DSL_OPS[c.node.op_type]
    dims = broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        value = (fold or _fold_div)(a.const, b.const).astype(a.const.dtype)
        c.folded(out, value, dims, elements=_shape_arithmetic(c.node.op_type, a, b, value))
        return
    c.emit(op, [c.var(a, 0), c.var(b, 1)], {}, a.dtype, dims, out=out)


_DIM_ARITHMETIC = {"Add": lambda x, y: dim_sum((x, y)), "Sub": dim_difference,
                   "Mul": lambda x, y: dim_product((x, y)), "Div": dim_quotient}


def _shape_arithmetic(op_type: str, a: Value, b: Value, value: np.ndarray) -> tuple | None:
    """The elements of arithmetic on sizes (`batch * seq`, `seq // heads`) as dims, so that a
    Reshape to them stays symbolic; None where neither operand holds sizes."""
    if (a.elements is None and b.elements is None) or value.ndim > 1 or value.dtype.kind not in "iu":
        return None
    xs, ys = element_dims(a), element_dims(b)
    n = value.size
    if {len(xs), len(ys)} - {1, n}:
        return None
    return tuple(_DIM_ARITHMETIC[op_type](xs[k if len(xs) > 1 else 0], ys[k if len(ys) > 1 else 0])
                 for k in range(n))


@handler("Clip", note="clamp; min/max constant (inputs, or attributes before opset 11)")
def _clip(c: NodeContext) -> None:
    c.allow("min", "max")
    x, lo_in, hi_in = c.inputs(1, 3)
    (out,) = c.outputs()
    bounds = {}
    for key, v in (("min", lo_in), ("max", hi_in)):
        if key in c.attrs:
            bounds[key] = c.attrs[key]
        value = c.const_input(v, f"the {key} input")
        if value is not None:
            if value.size != 1:
                c.fail(f"the {key} input must be a scalar")
            bounds[key] = value.reshape(()).item()
    settings = {}
    for key, b in bounds.items():
        if x.dtype in FLOATS:
            if math.isnan(float(b)):
                c.fail(f"{key} is NaN")
            settings[key] = float(b)
        else:
            settings[key] = int(b)
    c.emit("clamp", [c.var(x, 0)], settings, x.dtype, x.dims, out=out)


#: NumPy folds of the unary ops, for constant inputs (shape arithmetic); Erf has none and is emitted.
_UNARY_FOLDS = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Neg": np.negative, "Abs": np.abs,
                "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil, "Sign": np.sign}


@handler("Sqrt", "Exp", "Log", "Floor", "Ceil", note="{dsl} (float dtypes); folded on constants")
@handler("IsNaN", note="is_nan (float dtypes)")
@handler("Erf", note="erf (float dtypes)")
@handler("Reciprocal", note="recip(div_by_zero_mask=inf) (float dtypes: 1/±0 gives +inf, ONNX ±inf); folded on "
                            "constants")
@handler("Neg", note="neg (float and signed dtypes); folded on constants")
@handler("Sign", note="sign (float and signed dtypes), cast from its i8 back to the input's dtype; folded on constants")
@handler("Abs", note="abs (float and signed dtypes; of unsigned dropped); folded on constants")
def _math(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    op_type = c.node.op_type
    fold = _UNARY_FOLDS.get(op_type)
    if x.const is not None and fold is not None:
        with np.errstate(all="ignore"):
            c.folded(out, np.asarray(fold(x.const)).astype(x.const.dtype), x.dims)
        return
    if op_type == "Abs" and x.dtype in ONNX_UINTS:
        c.result(out, x)
        return
    if op_type in ("Neg", "Abs", "Sign"):
        if x.dtype not in FLOATS + ONNX_INTS:
            c.fail(f"dtype {x.dtype} is not supported (float and signed dtypes)")
    else:
        c.float_input(x)
    if op_type == "Sign" and x.dtype != "i8":      # the registry's sign gives i8, cast back to x's dtype
        sign = c.emit("sign", [c.var(x, 0)], {}, "i8", x.dims, temp=f"{out}_i8")
        c.emit("cast", [sign.var], {"to": x.dtype}, x.dtype, x.dims, out=out)
        return
    settings = {"div_by_zero_mask": math.inf} if op_type == "Reciprocal" else {}
    c.emit(DSL_OPS[op_type], [c.var(x, 0)], settings, "bool" if op_type == "IsNaN" else x.dtype, x.dims, out=out)


#: the trigonometric and hyperbolic functions' NumPy folds
_TRIG = {"Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan,
         "Sinh": np.sinh, "Cosh": np.cosh}


@handler(*_TRIG, note="{dsl} (float dtypes); folded on constants (in f64: exported RoPE tables)")
def _trig(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    if x.const is not None:
        with np.errstate(all="ignore"):
            folded = _TRIG[c.node.op_type](x.const.astype(np.float64)).astype(x.const.dtype)
        c.folded(out, folded, x.dims)
        return
    c.emit(DSL_OPS[c.node.op_type], [c.var(x, 0)], {}, x.dtype, x.dims, out=out)


_COMPARE_FOLDS = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
                  "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
                  "GreaterOrEqual": np.greater_equal}


@handler("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
         note="{dsl} to bool, NumPy broadcasting (the registry's comparisons broadcast); folded on constants")
@handler("And", "Or", "Xor", note="{dsl} of bool, NumPy broadcasting (the registry's bool ops broadcast); folded on "
                                  "constants")
def _compare(c: NodeContext) -> None:
    c.allow()
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    op_type = c.node.op_type
    if a.dtype == "bool" and op_type not in ("Equal", "And", "Or", "Xor"):
        c.fail("bool inputs are supported by Equal only")
    dims = broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        c.folded(out, _COMPARE_FOLDS[op_type](a.const, b.const), dims)
        return
    c.emit(DSL_OPS[op_type], [c.var(a, 0), c.var(b, 1)], {}, "bool", dims, out=out)


@handler("Not", note="not (bool)")
def _not(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    if x.dtype != "bool":
        c.fail(f"dtype {x.dtype} (ONNX Not takes bool)")
    if x.const is not None:
        c.folded(out, np.logical_not(x.const), x.dims)
        return
    c.emit("not", [c.var(x, 0)], {}, "bool", x.dims, out=out)


@handler("Where", note="filter(x, y, cond), operands broadcast; a computed cond cast from bool to x's dtype")
def _where(c: NodeContext) -> None:
    c.allow()
    cond, a, b = c.inputs(3, 3)
    (out,) = c.outputs()
    if a.dtype != b.dtype or cond.dtype != "bool":
        c.fail(f"inputs of dtypes {cond.dtype}, {a.dtype}, {b.dtype}: expected bool, T, T")
    dims = broadcast(c.fail, broadcast(c.fail, cond.dims, a.dims), b.dims)
    if all(v.const is not None for v in (cond, a, b)):
        c.folded(out, np.where(cond.const, a.const, b.const).astype(a.const.dtype), dims)
        return
    if cond.const is not None:      # filter's condition has the operands' type
        cn = c.imp.new_constant(np.broadcast_to(cond.const.astype(NUMPY_DTYPES[a.dtype]), tuple(d.size for d in dims)),
                                f"{out}_cond", f"{c.label}'s condition as {a.dtype}")
    elif a.dtype == "bool":
        cn = expanded(c, cond, 0, dims, f"{out}_cond")
    elif bool_mask_where(c, cond, a, b, out):
        return
    else:                           # filter's condition has the operands' type: 0 / 1
        cast = c.emit("cast", [c.var(cond, 0)], {"to": a.dtype}, a.dtype, cond.dims, temp=f"{out}_cond")
        cn = expanded(c, cast, None, dims, f"{out}_cond")
    an = expanded(c, a, 1, dims, f"{out}_x")
    bn = expanded(c, b, 2, dims, f"{out}_y")
    c.emit("filter", [an, bn, cn], {}, a.dtype, dims, out=out)


def _cast_allowed(src: str, dst: str) -> bool:
    """The registry's cast: any numeric type to a float, a float to an integer, an integer to a
    strictly wider one of the same signedness; numeric to bool (x != 0) and bool to numeric (0/1)."""
    if "bool" in (src, dst):
        return src != dst
    if dst in FLOATS:
        return True
    if src in FLOATS:
        return True
    same = (ONNX_INTS if src in ONNX_INTS else ONNX_UINTS)
    return dst in same and same.index(dst) > same.index(src)


@handler("Cast", note="cast(to) where the registry's cast allows it (numeric to float, float to integer, integer "
                      "to a wider one of its signedness, to and from bool); same dtype dropped; folded on constants")
def _cast(c: NodeContext) -> None:
    c.allow("to", "saturate")
    (x,) = c.inputs(1, 1)
    to = ONNX_DTYPES.get(int(c.attrs.get("to", 0)))
    if to is None:
        c.fail(f"cast to ONNX element type {c.attrs.get('to')} is not supported "
               f"({', '.join(sorted(set(ONNX_DTYPES.values())))} are)")
    _cast_to(c, x, to)


@handler("CastLike", note="as Cast, to the second input's dtype")
def _cast_like(c: NodeContext) -> None:
    c.allow("saturate")
    x, like = c.inputs(2, 2)
    _cast_to(c, x, like.dtype)


def _cast_to(c: NodeContext, x: Value, to: str) -> None:
    (out,) = c.outputs()
    if x.const is not None:
        with np.errstate(all="ignore"):
            c.folded(out, x.const.astype(NUMPY_DTYPES[to]), x.dims, elements=x.elements if to != "bool" else None)
        return
    if to == x.dtype:
        c.result(out, x)
        return
    if not _cast_allowed(x.dtype, to):
        c.fail(f"cast from {x.dtype} to {to} is not one the registry's cast does (numeric to float, float to "
               f"integer, integer to a wider integer of the same signedness, to and from bool)")
    c.emit("cast", [c.var(x, 0)], {"to": to}, to, x.dims, out=out)


@handler("Pow", note="pow (NumPy broadcasting; an exponent of another dtype cast to the base's; an integer base "
                     "through f64 and back); a constant scalar exponent 1 dropped, 2 and 3 as mul, 0.5 sqrt, -0.5 "
                     "rsqrt, -1 recip; folded on constants")
def _pow(c: NodeContext) -> None:
    c.allow()
    x, y = c.inputs(2, 2)
    (out,) = c.outputs()
    if x.const is not None and y.const is not None:
        with np.errstate(all="ignore"):
            c.folded(out, np.power(x.const, y.const).astype(x.const.dtype), broadcast(c.fail, x.dims, y.dims))
        return
    if x.dtype not in FLOATS + ONNX_INTS + ONNX_UINTS or y.dtype not in FLOATS + ONNX_INTS + ONNX_UINTS:
        c.fail(f"a base of dtype {x.dtype} and an exponent of dtype {y.dtype} (numeric dtypes only)")
    dims = broadcast(c.fail, x.dims, y.dims)
    name = c.var(x, 0)
    e = float(y.const.reshape(()).item()) if y.const is not None and y.const.size == 1 and dims == x.dims else None
    if x.dtype in FLOATS and e in (1.0, 2.0, 3.0, 0.5, -0.5, -1.0):
        if e == 1.0:
            c.result(out, x)
        elif e in (2.0, 3.0):
            y2 = c.emit("mul", [name, name], {}, x.dtype, x.dims, out=out)
            if e == 3.0:
                c.emit_inplace("mul", [y2.var, name], y2)
        else:
            op = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "recip"}[e]
            c.emit(op, [name], {"div_by_zero_mask": math.inf} if op == "recip" else {}, x.dtype, x.dims, out=out)
        return
    # the registry's pow takes floats of one dtype: an integer base computes in f64 (exact up to 2**53)
    # and rounds back; an exponent of another dtype is cast to the base's
    work = x.dtype if x.dtype in FLOATS else "f64"
    if work != x.dtype:
        name = c.emit("cast", [name], {"to": work}, work, x.dims, temp=f"{out}_base").var
    if y.const is not None and (y.dtype != work or y.var is None):
        exponent = c.imp.new_constant(y.const.astype(NUMPY_DTYPES[work]), f"{c.node.input[1]}_{work}",
                                      f"ONNX {quoted(c.node.input[1])} as {work}")
    elif y.dtype != work:
        exponent = c.emit("cast", [c.var(y, 1)], {"to": work}, work, y.dims, temp=f"{out}_exponent").var
    else:
        exponent = c.var(y, 1)
    if work == x.dtype:
        c.emit("pow", [name, exponent], {}, work, dims, out=out)
        return
    p = c.emit("pow", [name, exponent], {}, work, dims, temp=f"{out}_{work}")
    c.emit("cast", [p.var], {"to": x.dtype, "rounding_mode": '"nearest"'}, x.dtype, dims, out=out)


@handler("Max", "Min", "Sum", note="{dsl} of each next input, NumPy broadcasting through an add of zeros (numeric "
                                   "dtypes)")
def _min_max(c: NodeContext) -> None:
    c.allow()
    ins = c.inputs(1, len(c.ins))
    (out,) = c.outputs()
    if any(v.dtype != ins[0].dtype for v in ins) or ins[0].dtype == "bool":
        c.fail(f"inputs of dtypes {[v.dtype for v in ins]}: one numeric dtype")
    dims = ins[0].dims
    for v in ins[1:]:
        dims = broadcast(c.fail, dims, v.dims)
    if all(v.const is not None for v in ins):        # index arithmetic of exported masks
        fold = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}[c.node.op_type]
        c.folded(out, functools.reduce(fold, [v.const for v in ins]).astype(ins[0].const.dtype), dims)
        return
    names = [expanded(c, v, k, dims, f"{out}_{k}") for k, v in enumerate(ins)]
    if len(names) == 1:
        c.emit("reshape", names, {}, ins[0].dtype, dims, out=out)
        return
    y = c.emit(DSL_OPS[c.node.op_type], names[:2], {}, ins[0].dtype, dims, out=out)
    for name in names[2:]:
        c.emit_inplace(DSL_OPS[c.node.op_type], [y.var, name], y)


#: The float each float dtype's Mod is computed in.
_WIDER = {"f16": "f32", "f32": "f64", "f64": "f64"}


@handler("Mod", note="integers: fmod=1 rem, fmod=0 a - floor_div(a, b) * b; floats: a - trunc(a / b) * b in the next "
                     "wider float (f16 in f32, f32 in f64), fmod=0 plus b where the signs differ (filter); folded on "
                     "constants")
def _mod(c: NodeContext) -> None:
    """ONNX Mod, written with the registry's arithmetic. Integers: fmod=1 (C's truncated remainder,
    the sign of the dividend) is `rem`; fmod=0 (the sign of the divisor, as Python and NumPy) is
    a - floor_div(a, b) * b, exact since integers wrap. Floats: fmod=1 is a - trunc(a / b) * b
    computed in the next wider float (f16 in f32, f32 in f64) and rounded once to the dtype, which
    is C's fmod wherever the quotient's integer part is exact in the wider float (|a / b| < 2**24
    for f16 and f32 operands) — computed in the operands' own dtype, the rounding of a / b and of
    trunc(a / b) * b moves the result by ulps. fmod=0 adds b to a non-zero remainder whose sign
    differs from b's (NumPy's mod). f64 is computed in f64 (no wider float), exact only while a / b
    rounds to the right integer."""
    c.allow("fmod")
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    fmod = int(c.attrs.get("fmod", 0))
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype} (ONNX requires one)")
    if a.dtype not in FLOATS + ONNX_INTS + ONNX_UINTS:
        c.fail(f"dtype {a.dtype} is not supported (numeric dtypes)")
    dims = broadcast(c.fail, a.dims, b.dims)
    if a.const is not None and b.const is not None:
        with np.errstate(all="ignore"):
            value = np.fmod(a.const, b.const) if fmod else np.mod(a.const, b.const)
        c.folded(out, value.astype(a.const.dtype), dims)
        return
    an, bn = c.var(a, 0), c.var(b, 1)
    if a.dtype not in FLOATS:
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
    biggest = float(np.finfo(NUMPY_DTYPES[wide]).max)
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
