"""The values that go into and come out of a `.oinf` file, besides plain NumPy arrays and numbers.

- `Bitset`: a BITSET metadata value (bit count + LSB-first bytes).
- `QuantParams`: a v2 tensor's quantization parameters (scheme, scales, zero points).
- `TensorSpec`: a tensor with a forced dtype (bf16, f8, i4, ...), quant parameters or a name.
- `UninitializedTensor`: a tensor entry that declares dtype and shape but stores no data.
- `ScalarValue`: a metadata value with a forced type (e.g. `ScalarValue(3, "i32")`).
- `SizeVar`: marks a value as a sizevar (a named u64) when authoring from a dataclass.

All are frozen dataclasses. Those holding arrays compare by value (`==` uses `np.array_equal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import BY_CODE, BY_NAME, DTypeInfo, lookup
from ..errors import OinfError
from .format import SCALE_MODES, SCHEMES, ZP_MODES

DTypeLike = str | int | DTypeInfo | np.dtype | type


def as_dtype(spec: DTypeLike) -> DTypeInfo:
    """An `.oinf` dtype from a name or alias ("bf16", "f8e5m2"), a type code, or a NumPy dtype."""
    if isinstance(spec, DTypeInfo):
        return spec
    if isinstance(spec, bool):
        raise OinfError(f"not a dtype: {spec!r}")
    if isinstance(spec, int | np.integer):
        if int(spec) in BY_CODE:
            return BY_CODE[int(spec)]
        raise OinfError(f"unknown dtype code {int(spec)} (valid codes are 1-25)")
    if isinstance(spec, str):
        try:
            return lookup(spec.strip().lower())
        except KeyError:
            pass
    try:
        return numpy_dtype_to_oinf(np.dtype(spec))
    except (TypeError, ValueError):
        raise OinfError(f"unknown dtype {spec!r}; expected one of {', '.join(BY_NAME)}") from None


def numpy_dtype_to_oinf(dt: np.dtype) -> DTypeInfo:
    """The `.oinf` dtype that stores NumPy dtype `dt` unchanged (bool, ints, f16/f32/f64)."""
    names = {"b": {1: "bool"}, "i": {1: "i8", 2: "i16", 4: "i32", 8: "i64"},
             "u": {1: "u8", 2: "u16", 4: "u32", 8: "u64"}, "f": {2: "f16", 4: "f32", 8: "f64"}}
    name = names.get(dt.kind, {}).get(dt.itemsize)
    if name is None:
        raise OinfError(f"NumPy dtype {dt} has no .oinf equivalent (use bool, integers up to 64 bits, "
                        "float16/32/64, or TensorSpec(..., dtype=...) for bf16/f8/packed types)")
    return BY_NAME[name]


@dataclass(frozen=True)
class Bitset:
    """A BITSET metadata value: `bit_count` bits, stored LSB-first in `bytes` (ceil(bit_count/8))."""

    bit_count: int
    bytes: bytes

    def __post_init__(self) -> None:
        raw = bytes(self.bytes)
        if not isinstance(self.bit_count, int) or isinstance(self.bit_count, bool) or not 0 <= self.bit_count < 2**32:
            raise OinfError(f"Bitset bit_count must be an int in 0..2^32-1, got {self.bit_count!r}")
        if len(raw) != (self.bit_count + 7) // 8:
            raise OinfError(f"Bitset of {self.bit_count} bits needs {(self.bit_count + 7) // 8} bytes, got {len(raw)}")
        object.__setattr__(self, "bytes", raw)

    @classmethod
    def from_bools(cls, bits) -> Bitset:
        flags = np.asarray(list(bits) if not isinstance(bits, np.ndarray) else bits, dtype=bool).reshape(-1)
        return cls(len(flags), np.packbits(flags, bitorder="little").tobytes())

    def to_bools(self) -> np.ndarray:
        return np.unpackbits(np.frombuffer(self.bytes, np.uint8), bitorder="little")[: self.bit_count].astype(bool)

    def __len__(self) -> int:
        return self.bit_count

    def __getitem__(self, i: int) -> bool:
        if not -self.bit_count <= i < self.bit_count:
            raise IndexError(i)
        i %= self.bit_count
        return bool(self.bytes[i // 8] >> (i % 8) & 1)


def quant_problem(scheme: int, scale_mode: int, zp_mode: int, scale_axis: int, scale_count: int,
                  zp_axis: int, zp_count: int, shape: tuple[int, ...] | None) -> str | None:
    """Why these quant header fields are invalid for a tensor of `shape` (digest §1.7), or None.

    `shape` None skips the checks against the tensor's dims. Shared by the reader (which adds the
    byte offset) and by `QuantParams` (which the writer validates).
    """
    if scheme not in SCHEMES:
        return f"quant scheme {scheme} is invalid (1 symmetric, 2 asymmetric)"
    if scale_mode not in SCALE_MODES:
        return f"quant scale mode {scale_mode} is invalid (1 per_tensor, 2 per_channel)"
    if zp_mode not in ZP_MODES:
        return f"quant zero-point mode {zp_mode} is invalid (0 none, 1 per_tensor, 2 per_channel)"
    ndim = None if shape is None else len(shape)
    if scale_mode == 1:
        if scale_axis != 0 or scale_count != 1:
            return f"per-tensor scale needs axis 0 and count 1, got axis {scale_axis} count {scale_count}"
    elif ndim is not None:
        if scale_axis >= ndim:
            return f"per-channel scale axis {scale_axis} is out of range for a {ndim}-d tensor"
        if scale_count != shape[scale_axis]:
            return f"per-channel scale count {scale_count} != dim {scale_axis} size {shape[scale_axis]}"
    if zp_mode == 0 and zp_count != 0:
        return f"zero-point mode none needs count 0, got {zp_count}"
    if zp_mode == 1:
        if scale_mode != 1:
            return "per-tensor zero point needs a per-tensor scale"
        if zp_axis != 0 or zp_count != 1:
            return f"per-tensor zero point needs axis 0 and count 1, got axis {zp_axis} count {zp_count}"
    if zp_mode == 2:
        if scale_mode != 2:
            return "per-channel zero point needs a per-channel scale"
        if zp_axis != scale_axis:
            return f"per-channel zero-point axis {zp_axis} != scale axis {scale_axis}"
        if zp_count != scale_count:
            return f"per-channel zero-point count {zp_count} != scale count {scale_count}"
    if scheme == 1 and zp_mode != 0:
        return "symmetric quantization cannot have zero points"
    return None


def _code(table: dict[int, str], name: str, what: str) -> int:
    for code, n in table.items():
        if n == name:
            return code
    raise OinfError(f"quant {what} must be one of {', '.join(table.values())}, got {name!r}")


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Quantization parameters of one v2 tensor (digest §1.7); separate from packed storage.

    `scheme` is "symmetric" or "asymmetric"; `scale_mode` "per_tensor" or "per_channel";
    `zp_mode` "none", "per_tensor" or "per_channel". `scales` is a 1-D float32 array (one value
    per tensor, or one per index of `scale_axis`); `zero_points` a 1-D int32 array (empty for
    zp_mode "none"). Use `per_tensor(...)` / `per_channel(...)` to build one.
    """

    scheme: str
    scale_mode: str
    zp_mode: str
    scale_axis: int
    scales: np.ndarray
    zp_axis: int = 0
    zero_points: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    def __post_init__(self) -> None:
        try:
            scales = np.array(self.scales, dtype=np.float32).reshape(-1)
            zps = np.asarray(self.zero_points)
        except (TypeError, ValueError) as exc:
            raise OinfError(f"quant scales and zero points must be numbers: {exc}") from None
        if zps.size and (zps.dtype.kind not in "iub" or zps.min() < -2**31 or zps.max() > 2**31 - 1):
            raise OinfError("quant zero points must be integers in the int32 range")
        zps = np.array(zps, dtype=np.int32).reshape(-1)
        scales.flags.writeable = False
        zps.flags.writeable = False
        object.__setattr__(self, "scales", scales)
        object.__setattr__(self, "zero_points", zps)
        for axis_name in ("scale_axis", "zp_axis"):
            axis = getattr(self, axis_name)
            if isinstance(axis, bool) or not isinstance(axis, int | np.integer) or not 0 <= axis < 2**64:
                raise OinfError(f"quant {axis_name} must be a non-negative int, got {axis!r}")
            object.__setattr__(self, axis_name, int(axis))
        problem = quant_problem(self.scheme_code, self.scale_mode_code, self.zp_mode_code, self.scale_axis,
                                len(scales), self.zp_axis, len(zps), None)
        if problem:
            raise OinfError(problem)

    @classmethod
    def per_tensor(cls, scale: float, zero_point: int | None = None) -> QuantParams:
        """One scale for the whole tensor; symmetric without a zero point, asymmetric with one."""
        if zero_point is None:
            return cls("symmetric", "per_tensor", "none", 0, np.array([scale]))
        return cls("asymmetric", "per_tensor", "per_tensor", 0, np.array([scale]), 0, np.array([zero_point]))

    @classmethod
    def per_channel(cls, axis: int, scales, zero_points=None) -> QuantParams:
        """One scale (and zero point) per index along `axis`."""
        if zero_points is None:
            return cls("symmetric", "per_channel", "none", axis, np.asarray(scales))
        return cls("asymmetric", "per_channel", "per_channel", axis, np.asarray(scales), axis, np.asarray(zero_points))

    @property
    def scheme_code(self) -> int:
        return _code(SCHEMES, self.scheme, "scheme")

    @property
    def scale_mode_code(self) -> int:
        return _code(SCALE_MODES, self.scale_mode, "scale_mode")

    @property
    def zp_mode_code(self) -> int:
        return _code(ZP_MODES, self.zp_mode, "zp_mode")

    def check_shape(self, shape: tuple[int, ...], *, entry: str | None = None) -> None:
        """OinfError unless these parameters fit a tensor of `shape`."""
        problem = quant_problem(self.scheme_code, self.scale_mode_code, self.zp_mode_code, self.scale_axis,
                                len(self.scales), self.zp_axis, len(self.zero_points), shape)
        if problem:
            raise OinfError(problem, table="tensors", entry=entry)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuantParams):
            return NotImplemented
        return ((self.scheme, self.scale_mode, self.zp_mode, self.scale_axis, self.zp_axis)
                == (other.scheme, other.scale_mode, other.zp_mode, other.scale_axis, other.zp_axis)
                and np.array_equal(self.scales.view(np.uint32), other.scales.view(np.uint32))
                and np.array_equal(self.zero_points, other.zero_points))

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """A tensor to write: `data` (array-like) stored as `dtype` (default: the array's own dtype).

    With a dtype such as "bf16", "f8" or "i4" the values are rounded (floats, nearest-even) or
    range-checked (integers; out-of-range values are an error, never wrapped). `quant` attaches v2
    quantization parameters. `name` overrides the field name when authoring from a dataclass
    (field names cannot contain dots). `storage=True` means `data` already holds the stored bytes
    (packed bits, bf16/f8 bit patterns) of a tensor of `shape`: see `from_storage`.
    """

    data: Any
    dtype: DTypeLike | None = None
    quant: QuantParams | None = None
    name: str | None = None
    shape: tuple[int, ...] | None = None
    storage: bool = False

    @classmethod
    def from_storage(cls, raw, dtype: DTypeLike, shape, quant: QuantParams | None = None,
                     name: str | None = None) -> TensorSpec:
        """A tensor whose payload bytes are given as stored (e.g. `Model.tensor_bytes(name)`)."""
        return cls(raw, dtype, quant, name, tuple(int(d) for d in shape), True)


@dataclass(frozen=True)
class UninitializedTensor:
    """A tensor entry with dtype and shape but no data (HAS_DATA clear): a declaration only."""

    dtype: DTypeLike
    shape: tuple[int, ...]
    name: str | None = None
    quant: QuantParams | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))


@dataclass(frozen=True, eq=False)
class ScalarValue:
    """A metadata value with its type given instead of inferred.

    `dtype` names a scalar type ("i32", "f16", "bf16", "u4", ...), "str" or "bitset"; when `value`
    is a list or an array it names the element type of an NDARRAY entry.
    """

    value: Any
    dtype: DTypeLike | None = None


@dataclass(frozen=True)
class SizeVar:
    """A sizevar value (a named u64) in a dataclass field, whatever the field's annotation."""

    value: int
