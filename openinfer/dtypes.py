"""Element types: the one table every stage (`.oinf`, DSL, registry, reference, emitters) reads.

Each dtype has the `.oinf` ValueType code of digest §1.4, the variant name the original's graph
JSON uses (§3.10), its width in bits, and the NumPy dtype OpenInfer uses to hold *unpacked*
values in Python:

- f16 is held as `np.float16`; bf16 and f8 (E5M2) as `np.float32` whose values are exactly
  representable in the narrow type (they are rounded on every store, see `numerics`).
- The packed integers (i4 i2 i1 u4 u2 u1 t2 t1) are held one element per `int8`/`uint8`, always
  inside their range; packing to bits happens only at the `.oinf` boundary and in generated code.
- bool is `np.bool_`; bitset is `uint8` (one byte per element, as the original runtime).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class Kind(enum.Enum):
    FLOAT = "float"
    SIGNED = "signed"        # two's complement integers, packed or not (t2/t1 included)
    UNSIGNED = "unsigned"
    BOOL = "bool"
    BITSET = "bitset"
    STRING = "string"        # metadata only
    NDARRAY = "ndarray"      # metadata only


@dataclass(frozen=True)
class DTypeInfo:
    name: str
    code: int
    rust: str
    bits: int
    kind: Kind
    numpy: str | None          # NumPy dtype holding unpacked values (None: metadata-only types)
    lo: int | None = None      # value range of integer types (inclusive)
    hi: int | None = None

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.SIGNED

    @property
    def is_packed(self) -> bool:
        """Sub-byte types: stored `8 // bits` per byte, LSB first."""
        return self.bits < 8 and self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_ternary(self) -> bool:
        return self.name in ("t1", "t2")

    @property
    def np_dtype(self) -> np.dtype:
        if self.numpy is None:
            raise TypeError(f"{self.name} has no array representation")
        return np.dtype(self.numpy)

    @property
    def itemsize(self) -> int:
        """Bytes per element in `.oinf`/C storage for byte-addressed types (packed: 0)."""
        return self.bits // 8

    def storage_nbytes(self, numel: int) -> int:
        """Payload bytes for `numel` elements: packed types round up to whole bytes."""
        if self.bits % 8 == 0:      # (a dynamic numel then stays a product, not a quotient)
            return numel * (self.bits // 8)
        return (numel * self.bits + 7) // 8

    def __str__(self) -> str:
        return self.name


def _int(name: str, code: int, rust: str, bits: int, signed: bool, numpy: str) -> DTypeInfo:
    if signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    return DTypeInfo(name, code, rust, bits, Kind.SIGNED if signed else Kind.UNSIGNED, numpy, lo, hi)


_ALL = [
    _int("i8", 1, "I8", 8, True, "int8"),
    _int("i16", 2, "I16", 16, True, "int16"),
    _int("i32", 3, "I32", 32, True, "int32"),
    _int("i64", 4, "I64", 64, True, "int64"),
    _int("u8", 5, "U8", 8, False, "uint8"),
    _int("u16", 6, "U16", 16, False, "uint16"),
    _int("u32", 7, "U32", 32, False, "uint32"),
    _int("u64", 8, "U64", 64, False, "uint64"),
    DTypeInfo("f16", 9, "F16", 16, Kind.FLOAT, "float16"),
    DTypeInfo("f32", 10, "F32", 32, Kind.FLOAT, "float32"),
    DTypeInfo("f64", 11, "F64", 64, Kind.FLOAT, "float64"),
    DTypeInfo("bool", 12, "Bool", 8, Kind.BOOL, "bool", 0, 1),
    DTypeInfo("bitset", 13, "Bitset", 8, Kind.BITSET, "uint8", 0, 255),
    DTypeInfo("str", 14, "Str", 0, Kind.STRING, None),
    DTypeInfo("ndarray", 15, "NDArray", 0, Kind.NDARRAY, None),
    DTypeInfo("bf16", 16, "BF16", 16, Kind.FLOAT, "float32"),
    DTypeInfo("f8", 17, "F8", 8, Kind.FLOAT, "float32"),
    _int("i4", 18, "I4", 4, True, "int8"),
    _int("i2", 19, "I2", 2, True, "int8"),
    _int("i1", 20, "I1", 1, True, "int8"),
    _int("u4", 21, "U4", 4, False, "uint8"),
    _int("u2", 22, "U2", 2, False, "uint8"),
    _int("u1", 23, "U1", 1, False, "uint8"),
    DTypeInfo("t2", 24, "T2", 2, Kind.SIGNED, "int8", -1, 1),
    DTypeInfo("t1", 25, "T1", 1, Kind.SIGNED, "int8", -1, 1),
]

BY_NAME: dict[str, DTypeInfo] = {d.name: d for d in _ALL}
BY_CODE: dict[int, DTypeInfo] = {d.code: d for d in _ALL}
BY_RUST: dict[str, DTypeInfo] = {d.rust: d for d in _ALL}

#: Parsers also accept these spellings (digest §1.4).
ALIASES = {"f8e5m2": "f8", "float8e5m2": "f8"}

#: Types a tensor may have (codes 1-12 and 16-25).
TENSOR_DTYPES = tuple(d for d in _ALL if d.code <= 12 or d.code >= 16)

#: The 23 dtype names the DSL accepts (every tensor type plus bitset).
DSL_DTYPES = tuple(d for d in _ALL if d.numpy is not None)

F16, F32, F64, BF16, F8 = (BY_NAME[n] for n in ("f16", "f32", "f64", "bf16", "f8"))
BOOL, BITSET = BY_NAME["bool"], BY_NAME["bitset"]
I8, I16, I32, I64 = (BY_NAME[n] for n in ("i8", "i16", "i32", "i64"))
U8, U16, U32, U64 = (BY_NAME[n] for n in ("u8", "u16", "u32", "u64"))


def lookup(name: str) -> DTypeInfo:
    """The dtype called `name` (aliases allowed); KeyError if there is none."""
    name = ALIASES.get(name, name)
    return BY_NAME[name]


def is_dtype_name(name: str) -> bool:
    return ALIASES.get(name, name) in BY_NAME and BY_NAME[ALIASES.get(name, name)].numpy is not None
