"""Bit-exact conversions for the narrow types, shared by `.oinf`, the reference and the tests.

bf16 is the upper half of an IEEE f32; encoding rounds to nearest, ties to even, by adding
`0x7FFF + lsb` before truncating (NaN is kept quiet instead of being rounded into infinity).

f8 is E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, i.e. exactly the upper byte of an
IEEE f16, with infinities (exponent 31, mantissa 0) and NaN (written as 0x7D). Encoding rounds to
nearest even *including the mantissa carry into the exponent* (1.875 -> 2.0, 61440 -> inf): the
original tools lost that carry (digest §1.4), decisions.md fixes it.

Packed integers store `8 // bits` elements per byte, element k of a byte at bit `(k % n) * bits`,
two's complement within the width; t1 stores bit 0 for -1 and 1 for +1.
"""

from __future__ import annotations

import numpy as np

from .dtypes import DTypeInfo, Kind

F8_NAN = 0x7D


def _f32_for_narrowing(x) -> np.ndarray:
    """`x` as float32, ready to be rounded once more to bf16 or f8 without double-rounding error.

    f16/f32 (and small integers) convert exactly. Wider inputs (f64, big integers) are rounded to
    f32 *to odd*: truncate, then set the lowest bit if anything was dropped. An f32 so rounded
    carries more than the 2 extra bits that make the second, narrower rounding exact; a plain
    f64 -> f32 -> bf16 chain would turn e.g. 1 + 2^-8 + 2^-30 into 1.0 instead of 1 + 2^-7.
    """
    a = np.asarray(x)
    if a.dtype.kind == "f" and a.dtype.itemsize <= 4 or a.dtype.kind in "bu" and a.dtype.itemsize <= 2 \
            or a.dtype.kind == "i" and a.dtype.itemsize <= 2:
        return a.astype(np.float32)
    d = a.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = d.astype(np.float32)
        wide = f.astype(np.float64)
        f = np.where(np.abs(wide) > np.abs(d), np.nextafter(f, np.float32(0)), f)   # truncate
        inexact = (f.astype(np.float64) != d) & ~np.isnan(d)
    return (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)


def bf16_bits(x) -> np.ndarray:
    """Values (any real dtype) -> bf16 bit patterns (uint16), round to nearest even."""
    v = _f32_for_narrowing(x)
    b = v.view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(v), ((b >> 16) | 0x0040).astype(np.uint16), rounded)


def bf16_decode(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f8_bits(x) -> np.ndarray:
    """Values (any real dtype) -> E5M2 bit patterns (uint8), round to nearest even with correct carry."""
    with np.errstate(all="ignore"):   # NaN/inf take the masked paths below
        return _f8_bits(_f32_for_narrowing(x))


def _f8_bits(v: np.ndarray) -> np.ndarray:
    b = v.view(np.uint32).astype(np.int64)
    sign = ((b >> 31) & 1).astype(np.uint8) << 7
    mag = b & 0x7FFFFFFF
    absv = np.abs(v.astype(np.float64))
    # Normal range (|x| >= 2^-14): round the 23-bit mantissa to 2 bits; the carry moves into the
    # exponent by itself because exponent and mantissa are adjacent bit fields.
    normal = ((mag + 0xFFFFF + ((mag >> 21) & 1)) >> 21) - ((127 - 15) << 2)
    # Subnormal range: the code *is* round(|x| / 2^-16); 4 lands on the smallest normal (0x04).
    sub = np.rint(absv * 65536.0)
    code = np.where(absv < 2.0 ** -14, np.nan_to_num(sub, nan=0.0), normal)
    code = np.minimum(code, 0x7C)  # past the largest finite value (57344) -> inf
    out = code.astype(np.uint8) | sign
    return np.where(np.isnan(v), np.uint8(F8_NAN), out).astype(np.uint8)


def f8_decode(bits) -> np.ndarray:
    """E5M2 bit patterns -> f32 (exact: an E5M2 value is an f16 with 8 zero low bits).

    NaN codes get the quiet bit: 0x7D (the canonical f8 NaN) shifted up is a *signalling* f16 NaN,
    which would raise NumPy's "invalid value" warning in every later cast or arithmetic.
    """
    h = np.asarray(bits, dtype=np.uint8).astype(np.uint16) << 8
    nan = ((h & 0x7C00) == 0x7C00) & ((h & 0x0300) != 0)
    return np.where(nan, h | 0x0200, h).astype(np.uint16).view(np.float16).astype(np.float32)


def round_float(x, dtype: DTypeInfo) -> np.ndarray:
    """Round f32/f64 values to what `dtype` can hold, returned in its unpacked representation."""
    name = dtype.name
    if name == "f64":
        return np.asarray(x, dtype=np.float64)
    if name == "f32":
        return np.asarray(x, dtype=np.float32)
    if name == "f16":
        return np.asarray(x).astype(np.float16)  # NumPy rounds f64 -> f16 directly (no double rounding)
    if name == "bf16":
        return bf16_decode(bf16_bits(x))
    if name == "f8":
        return f8_decode(f8_bits(x))
    raise TypeError(f"{name} is not a float type")


def wrap_int(x, dtype: DTypeInfo) -> np.ndarray:
    """Integers (any width) wrapped two's-complement into `dtype`'s range, as its unpacked dtype.

    t2 and t1 are not modular types: t2 clamps into -1..1, t1 (which has no zero) maps
    positive values to +1 and the rest to -1.
    """
    a = np.asarray(x)
    if dtype.name == "t1":
        return np.where(a.astype(np.int64) > 0, 1, -1).astype(np.int8)
    if dtype.is_ternary:
        return np.clip(a.astype(np.int64), -1, 1).astype(np.int8)
    if not dtype.is_packed:
        return a.astype(dtype.np_dtype) if a.dtype.kind in "iub" else a.astype(np.int64).astype(dtype.np_dtype)
    span = 1 << dtype.bits
    w = (a.astype(np.int64) - dtype.lo) % span + dtype.lo
    return w.astype(dtype.np_dtype)


def pack(values, dtype: DTypeInfo) -> bytes:
    """Unpacked integer values (already in range) -> packed bytes, LSB-first."""
    v = np.asarray(values).reshape(-1).astype(np.int64)
    per = 8 // dtype.bits
    mask = (1 << dtype.bits) - 1
    if dtype.name == "t1":
        u = (v > 0).astype(np.uint64)
    else:
        u = (v & mask).astype(np.uint64)
    pad = (-len(u)) % per
    if pad:
        u = np.concatenate([u, np.zeros(pad, np.uint64)])
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(dtype.bits))
    return (u.reshape(-1, per) << shifts).sum(axis=1).astype(np.uint8).tobytes()


def unpack(data, dtype: DTypeInfo, numel: int) -> np.ndarray:
    """Packed bytes -> `numel` unpacked values in `dtype`'s NumPy representation."""
    b = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    per = 8 // dtype.bits
    mask = (1 << dtype.bits) - 1
    shifts = np.arange(per, dtype=np.uint8) * dtype.bits
    u = ((b[:, None] >> shifts) & mask).reshape(-1)[:numel].astype(np.int16)
    if dtype.name == "t1":
        return (u * 2 - 1).astype(np.int8)
    if dtype.kind is Kind.SIGNED:
        u = np.where(u >= (1 << (dtype.bits - 1)), u - (1 << dtype.bits), u)
    return u.astype(dtype.np_dtype)


def storage_dtype(dtype: DTypeInfo) -> np.dtype | None:
    """The NumPy dtype whose array bytes are `dtype`'s storage, where there is one (not for
    packed types, bf16, f8 and bool, whose storage is an encoding)."""
    if dtype.is_packed or dtype.name in ("bf16", "f8") or dtype.kind is Kind.BOOL:
        return None
    return dtype.np_dtype.newbyteorder("<")


def to_storage(values: np.ndarray, dtype: DTypeInfo) -> bytes:
    """Unpacked values -> the little-endian bytes `.oinf` and generated C store."""
    if dtype.is_packed:
        return pack(values, dtype)
    if dtype.name == "bf16":
        return bf16_bits(values).astype("<u2").tobytes()
    if dtype.name == "f8":
        return f8_bits(values).tobytes()
    if dtype.kind is Kind.BOOL:
        return np.asarray(values).astype(np.bool_).astype(np.uint8).tobytes()
    return np.ascontiguousarray(values, dtype=dtype.np_dtype.newbyteorder("<")).tobytes()


def from_storage(data, dtype: DTypeInfo, shape: tuple[int, ...]) -> np.ndarray:
    """Stored bytes -> unpacked values of `shape` (a zero-copy view where the type allows)."""
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if dtype.is_packed:
        return unpack(buf, dtype, numel).reshape(shape)
    if dtype.name == "bf16":
        return bf16_decode(buf.view("<u2")[:numel]).reshape(shape)
    if dtype.name == "f8":
        return f8_decode(buf[:numel]).reshape(shape)
    if dtype.kind is Kind.BOOL:
        return buf[:numel].view(np.bool_).reshape(shape)
    return buf.view(dtype.np_dtype.newbyteorder("<"))[:numel].reshape(shape)
