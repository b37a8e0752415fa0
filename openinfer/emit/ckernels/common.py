"""C expression builders shared by the kernel families: loads, stores, compute types, strides.

They mirror openinfer/ops/kernels/common.py, the reference's rules: floats compute in `float`
(`double` for f64) and round on store (oi_numeric.h); integers compute in 64 bits and wrap to
their width on store; packed values are read and written through oi_numeric.h's helpers.
"""

from __future__ import annotations

from ...dtypes import DTypeInfo, Kind


def compute_ctype(t: DTypeInfo) -> str:
    """The C type values of `t` are computed in."""
    if t.is_float:
        return "double" if t.name == "f64" else "float"
    if t.kind is Kind.BOOL:
        return "int"
    if t.kind in (Kind.UNSIGNED, Kind.BITSET):
        return "uint64_t"
    return "int64_t"


def load(t: DTypeInfo, ptr: str, idx: str) -> str:
    """Element `idx` of storage `ptr` as a value of compute_ctype(t)."""
    if t.name in ("f16", "bf16", "f8"):
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


def store(t: DTypeInfo, ptr: str, idx: str, value: str) -> str:
    """A C statement storing `value` (of any compute type) as element `idx` of `t` storage:
    floats round (via f32 for the narrow ones), integers wrap, bool is non-zero."""
    if t.name in ("f16", "bf16", "f8"):
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


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of an input of `shape` iterated over `out_shape` (0 on broadcast dims)."""
    pad = len(out_shape) - len(shape)
    full = (1,) * pad + tuple(shape)
    base = contiguous_strides(full)
    return tuple(0 if full[i] == 1 and out_shape[i] != 1 else base[i] for i in range(len(out_shape)))


def literal(t: DTypeInfo, value) -> str:
    """A C literal of compute_ctype(t) for a Python value (NaN/inf through math.h macros)."""
    ct = compute_ctype(t)
    if ct in ("float", "double"):
        v = float(value)
        if v != v:
            return "NAN" if ct == "float" else "(double)NAN"
        if v in (float("inf"), float("-inf")):
            return ("-" if v < 0 else "") + ("INFINITY" if ct == "float" else "(double)INFINITY")
        text = repr(v)
        return f"{text}f" if ct == "float" else text
    if ct == "int":
        return "1" if value else "0"
    if ct == "uint64_t":
        return f"UINT64_C({int(value) % (1 << 64)})"
    v = int(value)
    return "INT64_MIN" if v == -(1 << 63) else f"INT64_C({v})"
