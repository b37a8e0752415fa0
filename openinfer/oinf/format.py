"""The byte layout of `.oinf` (digest §1): constants, the header, strings and size rules.

Everything is little-endian. The file is `[header][sizevar table][metadata table][tensor table]
[data blobs]`; every section and every blob starts 8-aligned. This module holds only the facts of
the format, shared by the reader, the writer and the tests; it does no I/O.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from .. import numerics
from ..dtypes import BY_CODE, BY_NAME, DTypeInfo, Kind
from ..errors import OinfError

MAGIC = b"OINF\x00"
VERSIONS = (1, 2)
DEFAULT_VERSION = 2

#: `<5sIIIIIIQQQQQ`: magic, version, flags, n_sizevars, n_metadata, n_tensors, reserved, then the
#: offsets of the four sections and the file size. 69 bytes, padded with zeros to 72.
HEADER = struct.Struct("<5sIIIIIIQQQQQ")
HEADER_SIZE = HEADER.size
TABLES_START = 72
ALIGN = 8

#: Byte offset of each header field, for error messages that point at the field.
HEADER_FIELD_OFFSETS = {
    "magic": 0, "version": 5, "flags": 9, "n_sizevars": 13, "n_metadata": 17, "n_tensors": 21,
    "reserved": 25, "offset_sizevars": 29, "offset_metadata": 37, "offset_tensors": 45,
    "offset_data": 53, "file_size": 61,
}

FLAG_HAS_DATA = 1
FLAG_HAS_QUANT = 2      # v2 only

#: Quant payload header `<IIIIQQQQ`: scheme, scale_mode, zp_mode, reserved, scale_axis,
#: scale_count, zp_axis, zp_count; then f32 scales, i32 zero points, zero padding.
QUANT_HEADER = struct.Struct("<IIIIQQQQ")
#: Suffixes of the keys that name a tensor's quantization parameters (`W#scale`, `W#zero_point`).
#: `#` is not allowed in names (NAME_RE), so such a key never names a stored tensor.
QUANT_SCALE, QUANT_ZERO_POINT = "#scale", "#zero_point"
SCHEMES = {1: "symmetric", 2: "asymmetric"}
SCALE_MODES = {1: "per_tensor", 2: "per_channel"}
ZP_MODES = {0: "none", 1: "per_tensor", 2: "per_channel"}

U64_MAX = (1 << 64) - 1

NAME_RE = re.compile(rb"[A-Za-z0-9._-]+")
NAME_RULE = "names and strings must match ^[A-Za-z0-9._-]+$"

# Smallest encodings, used to reject entry counts that cannot fit in their table before looping.
MIN_SIZEVAR_ENTRY = 8 + 8                   # string (>= 8 bytes) + u64 value
MIN_METADATA_ENTRY = 8 + 4 + 4 + 8 + 8      # string + type + flags + nbytes + offset


def align8(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


#: Shapes both readers accept (hal/src/oi_hal_core.c reads dims into a fixed `dims[8]`): at most
#: MAX_DIMS dims, and the product of the non-zero dims below MAX_NUMEL, so the C reader's numel * 64
#: bits fits a u64 and NumPy can hold the array. Tensors and ndarray metadata alike.
MAX_DIMS = 8
MAX_NUMEL = 1 << 58


def shape_problem(shape: tuple[int, ...]) -> str | None:
    """Why a tensor or ndarray shape is outside what the readers accept, or None."""
    if len(shape) > MAX_DIMS:
        return f"{len(shape)} dims; at most {MAX_DIMS} are supported"
    nonzero = 1
    for d in shape:
        nonzero *= d or 1
    if nonzero >= MAX_NUMEL:
        return f"shape {list(shape)} is too large (the product of its non-zero dims must be below 2^58)"
    return None


def tensor_entry_tail(version: int) -> int:
    """Bytes after the dims of a tensor entry: data nbytes/offset, plus quant nbytes/offset in v2."""
    return 16 if version == 1 else 32


def min_tensor_entry(version: int) -> int:
    return 8 + 12 + tensor_entry_tail(version)


def is_valid_name(name: str) -> bool:
    return isinstance(name, str) and name.isascii() and NAME_RE.fullmatch(name.encode("ascii")) is not None


def check_name(name: object, *, table: str, what: str = "name") -> str:
    """`name` if it is a valid `.oinf` string, else an OinfError saying why."""
    if not isinstance(name, str):
        raise OinfError(f"{what} must be a str, got {type(name).__name__}", table=table)
    if not is_valid_name(name):
        raise OinfError(f"invalid {what} {name!r}: {NAME_RULE}", table=table, entry=name if name else None)
    return name


def encode_string(s: str) -> bytes:
    """u32 length, ASCII bytes, zero padding so the whole string is a multiple of 8 bytes."""
    raw = s.encode("ascii")
    return struct.pack("<I", len(raw)) + raw + b"\x00" * (align8(4 + len(raw)) - 4 - len(raw))


def string_size(s: str) -> int:
    return align8(4 + len(s))


def scalar_nbytes(dtype: DTypeInfo) -> int:
    """value_nbytes of a scalar metadata entry: the element size, one byte for packed types."""
    return max(1, dtype.bits // 8)


def tensor_dtype(code: int) -> DTypeInfo | None:
    """The dtype for a tensor dtype code (1-12, 16-25), None for anything else."""
    d = BY_CODE.get(code)
    if d is None or d.kind in (Kind.BITSET, Kind.STRING, Kind.NDARRAY):
        return None
    return d


def numel_of(shape: tuple[int, ...]) -> int:
    """Element count of a shape (1 for a scalar), as an exact Python int (no overflow)."""
    n = 1
    for d in shape:
        n *= d
    return n


def stored_value_problem(stored: np.ndarray, dtype: DTypeInfo, numel: int) -> tuple[str, int] | None:
    """Why stored bytes hold a value outside `dtype`, and the byte index; None when they are fine.

    Only two types have bit patterns that are not values: bool (a byte other than 0 or 1) and t2
    (the code 0b10, i.e. -2). Every other pattern of every type decodes to a value.
    """
    if numel and dtype.kind is Kind.BOOL:
        bad = stored > 1
        if bad.any():
            i = int(np.argmax(bad))
            return f"bool element {i} is stored as {int(stored[i])} (must be 0 or 1)", i
    elif numel and dtype.name == "t2":
        bad = numerics.unpack(stored, BY_NAME["u2"], numel) == 2   # the raw 2-bit fields
        if bad.any():
            i = int(np.argmax(bad))
            return f"t2 element {i} has the code 0b10 (-2), outside -1..1", i // 4
    return None


@dataclass(frozen=True)
class Header:
    """The fixed 69-byte header. Offsets are absolute; `file_size` is the whole file's length."""

    version: int
    flags: int
    n_sizevars: int
    n_metadata: int
    n_tensors: int
    reserved: int
    offset_sizevars: int
    offset_metadata: int
    offset_tensors: int
    offset_data: int
    file_size: int

    def pack(self) -> bytes:
        raw = HEADER.pack(MAGIC, self.version, self.flags, self.n_sizevars, self.n_metadata, self.n_tensors,
                          self.reserved, self.offset_sizevars, self.offset_metadata, self.offset_tensors,
                          self.offset_data, self.file_size)
        return raw + b"\x00" * (TABLES_START - HEADER_SIZE)
