"""C expression builders shared by the kernel families: loads, stores, compute types, strides.

They mirror openinfer/reference/kernels/common.py, the reference's rules: floats compute in `float`
(`double` for f64) and round on store (oi_numeric.h); integers compute in 64 bits and wrap to
their width on store; packed values are read and written through oi_numeric.h's helpers.

Values carry their C compute type ("vct"): a `double` stored into f16/bf16/f8 rounds once
(oi_f64_to_f16 ...), as NumPy rounds an f64 array, a `float` rounds from f32.
"""

from __future__ import annotations

import math

import numpy as np

from ....dims import Dim, capacity
from ....dtypes import DTypeInfo, Kind
from ....errors import SynthesisError
from ....synth.program import KernelRequest

#: the C element type of each dtype's storage
_CTYPES = {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "f8": "uint8_t",
           "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
           "bool": "uint8_t", "bitset": "uint8_t"}

NARROW = ("f16", "bf16", "f8")


def ctype(dtype: DTypeInfo) -> str:
    """The C element type of `dtype`'s storage (packed types: their bytes)."""
    return "uint8_t" if dtype.is_packed else _CTYPES[dtype.name]


def compute_ctype(t: DTypeInfo) -> str:
    """The C type values of `t` are computed in."""
    if t.is_float:
        return "double" if t.name == "f64" else "float"
    if t.kind is Kind.BOOL:
        return "int"
    if t.kind in (Kind.UNSIGNED, Kind.BITSET):
        return "uint64_t"
    return "int64_t"


def fn(name: str, ct: str) -> str:
    """The libm function `name` for compute type `ct`: expf for float, exp for double."""
    return name + ("f" if ct == "float" else "")


def load(t: DTypeInfo, ptr: str, idx: str) -> str:
    """Element `idx` of storage `ptr` as a value of compute_ctype(t)."""
    if t.name in NARROW:
        return f"oi_{t.name}_to_f32({ptr}[{idx}])"
    if t.is_float:
        return f"{ptr}[{idx}]"
    if t.kind is Kind.BOOL:
        return f"({ptr}[{idx}] != 0)"
    if t.name == "t1":
        return f"(int64_t)oi_t1_get({ptr}, {idx})"
    if t.is_packed:
        if t.is_signed:
            return f"(int64_t)oi_packed_get_s({ptr}, {idx}, {t.bits})"
        return f"(uint64_t)oi_packed_get_u({ptr}, {idx}, {t.bits})"
    return f"({compute_ctype(t)}){ptr}[{idx}]"


def store(t: DTypeInfo, ptr: str, idx: str, value: str, vct: str | None = None) -> str:
    """A C statement storing `value` (of C type `vct`, default compute_ctype(t)) as element `idx`
    of `t` storage: floats round (narrow ones once, from f32 or from f64 as the value is),
    integers wrap, bool is non-zero."""
    if t.name in NARROW:
        if vct == "double":
            return f"{ptr}[{idx}] = oi_f64_to_{t.name}({value});"
        return f"{ptr}[{idx}] = oi_f32_to_{t.name}((float)({value}));"
    if t.name == "f32":
        return f"{ptr}[{idx}] = (float)({value});"
    if t.name == "f64":
        return f"{ptr}[{idx}] = (double)({value});"
    if t.kind is Kind.BOOL:
        return f"{ptr}[{idx}] = (uint8_t)(({value}) != 0);"
    if t.name == "t1":
        return f"oi_t1_set({ptr}, {idx}, (int64_t)({value}));"
    if t.name == "t2":
        return f"oi_t2_set({ptr}, {idx}, (int64_t)({value}));"
    if t.is_packed:
        return f"oi_packed_set({ptr}, {idx}, {t.bits}, (int64_t)({value}));"
    bits = t.bits
    if t.is_signed:
        # through the unsigned type of the same width: wraps without signed-overflow UB
        return f"{ptr}[{idx}] = (int{bits}_t)(uint{bits}_t)(uint64_t)({value});"
    return f"{ptr}[{idx}] = (uint{bits}_t)({value});"


def round_to(t: DTypeInfo, value: str, vct: str) -> str:
    """`value` (C type `vct`) rounded / wrapped to what `t` holds, as a compute_ctype(t) value:
    what storing it as t and loading it again gives (the reference's `store` of intermediates)."""
    if t.name in NARROW:
        enc = f"oi_f64_to_{t.name}({value})" if vct == "double" else f"oi_f32_to_{t.name}((float)({value}))"
        return f"oi_{t.name}_to_f32({enc})"
    if t.name == "f32":
        return f"(float)({value})"
    if t.name == "f64":
        return f"(double)({value})"
    if t.kind is Kind.BOOL:
        return f"(({value}) != 0)"
    if t.is_signed:
        return f"(int64_t)({value})" if t.bits == 64 else f"oi_wrap_s((int64_t)({value}), {t.bits})"
    return f"(uint64_t)({value})" if t.bits == 64 else f"oi_wrap_u((uint64_t)({value}), {t.bits})"


def copy_elem(t: DTypeInfo, dst: str, d: str, src: str, s: str) -> str:
    """A statement copying storage element `s` of `src` to element `d` of `dst` unchanged."""
    if t.is_packed:
        return f"oi_packed_store_raw({dst}, {d}, {t.bits}, oi_packed_raw({src}, {s}, {t.bits}));"
    return f"{dst}[{d}] = {src}[{s}];"


def offset(vars_, strides, base: int | str = 0) -> str:
    """`base + v0 * s0 + ...` (terms with stride 0 dropped)."""
    terms = [] if base in (0, "0") else [str(base)]
    for v, s in zip(vars_, strides, strict=True):
        if s == 0:
            continue
        terms.append(v if s == 1 else f"{v} * {s}" if s > 0 else f"{v} * ({s})")
    return " + ".join(terms) or "0"


# ---------------------------------------------------------------------------------- literals

def float_literal(ct: str, value: float) -> str:
    """An exact C literal of `value` rounded to `ct` (float: to f32 first, ties to even)."""
    v = float(value)
    if v != v:
        return "NAN" if ct == "float" else "(double)NAN"
    if math.isinf(v):
        return ("-" if v < 0 else "") + ("INFINITY" if ct == "float" else "(double)INFINITY")
    if ct == "float":
        with np.errstate(over="ignore"):
            f = np.float32(v)            # round to f32, ties to even (overflow: inf)
        if np.isinf(f):
            return ("-" if v < 0 else "") + "INFINITY"
        text = str(f)   # the shortest decimal that reads back as this f32 ("1.0", "1e-45")
        return f"{text}f" if ("." in text or "e" in text) else f"{text}.0f"
    return repr(v)            # Python's repr round-trips every double


def literal_ct(ct: str, value) -> str:
    """A C literal of compute type `ct` for a Python value (negative ones parenthesised); a dynamic
    size (a count a mean divides by) is its run-time expression converted to `ct`."""
    if isinstance(value, Dim):
        return f"(({'int' if ct == 'int' else ct})({value}))"
    if ct in ("float", "double"):
        text = float_literal(ct, value)
        return f"({text})" if text.startswith("-") else text
    if ct == "int":
        return "1" if value else "0"
    if ct == "uint64_t":
        return f"UINT64_C({int(value) % (1 << 64)})"
    v = int(value)
    return "INT64_MIN" if v == -(1 << 63) else f"INT64_C({v})"


def literal(t: DTypeInfo, value) -> str:
    """A C literal of compute_ctype(t) for a Python value (NaN/inf through math.h macros)."""
    return literal_ct(compute_ctype(t), value)


# ---------------------------------------------------------------------------------- attributes

def runtime_dtype(req: KernelRequest, name: str) -> DTypeInfo | None:
    for k, d in req.runtime_attrs:
        if k == name:
            return d
    return None


def static_attr(req: KernelRequest, name: str):
    """A static attribute's value; attributes that shape the kernel cannot come from a variable."""
    if runtime_dtype(req, name) is not None:
        raise SynthesisError(f"{req.op}: attribute `{name}` must be a constant for the C backend "
                             "(it decides the kernel's loops), not a variable")
    return req.attr(name)


def scalar_attr(req: KernelRequest, name: str, ct: str, bound: DTypeInfo | None = None) -> str:
    """A scalar attribute as a C expression of type `ct`: a literal, or the run-time parameter
    `rt_<name>` (passed as double or int64_t) converted to `ct`. `bound`: the attribute bounds
    values of that integer type (clamp/relu limits): a run-time value is first clipped into the
    type's range (float values truncated, ±inf meaning no bound), as the registry does statically."""
    d = runtime_dtype(req, name)
    if d is None:
        return literal_ct(ct, req.attr(name))
    p = f"rt_{name}"
    if ct in ("float", "double"):
        return f"(({ct}){p})"
    if ct == "int":
        return f"({p} != 0)"
    if bound is not None and bound.is_int:
        lo, hi = bound.lo, bound.hi
        if d.is_float:
            v = f"oi_f64_to_sint_sat(trunc({p}), 64)"
        else:
            v = f"(int64_t){p}"
        if lo > -(1 << 63):
            v = f"({v} < INT64_C({lo}) ? INT64_C({lo}) : {v})"
        if hi < (1 << 63) - 1:
            v = f"({v} > INT64_C({hi}) ? INT64_C({hi}) : {v})"
        return f"(({ct}){v})"
    if d.is_float:   # a float variable for an integer type: truncate, saturate to 64 bits
        return (f"(({ct})oi_f64_to_sint_sat(trunc({p}), 64))" if ct == "int64_t"
                else f"oi_f64_to_uint_sat(trunc({p}), 64)")
    return f"(({ct}){p})"


def par_rows(rows: int, n: int, par_elems: int) -> dict:
    """Row kernels (every target's): split `rows` rows of `n` elements over the pool when there
    are at least `par_elems` elements in all and more rows than one pool claim takes, each claim
    carrying about par_elems / 8 elements. (A dynamic size decides at its bound: the pool takes
    whatever rows there are at run time.)"""
    rows, n = capacity(rows), capacity(n)
    grain = max(1, -(-par_elems // (8 * n)))
    return {"parallel": rows * n >= par_elems and rows > grain, "grain": grain}
