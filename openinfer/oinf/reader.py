"""Reading `.oinf` files: memory-mapped, lazy, and bounds-checked everywhere.

`ModelLoader.open(path)` maps the file and parses the header, the three tables, the metadata values
and the quant payloads; tensor data is not touched until `Model.tensor(name)` asks for it, and
then numeric tensors come back as zero-copy read-only views of the mapping (every data blob is
8-aligned, so a view is always possible). Every structural rule of digest §1 is checked at open,
plus what the original verifier skipped (blob overlap, header flags), so a hostile file gives one
`OinfError` naming the table, the entry and the byte offset; counts are checked against the bytes
that could hold them before anything is allocated.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import dtypes, numerics
from ..dtypes import BY_CODE, DTypeInfo, Kind
from ..errors import OinfError
from .format import (
    FLAG_HAS_DATA,
    FLAG_HAS_QUANT,
    HEADER,
    HEADER_FIELD_OFFSETS,
    HEADER_SIZE,
    MAGIC,
    MIN_METADATA_ENTRY,
    MIN_SIZEVAR_ENTRY,
    NAME_RE,
    NAME_RULE,
    QUANT_HEADER,
    QUANT_SCALE,
    QUANT_ZERO_POINT,
    SCALE_MODES,
    SCHEMES,
    TABLES_START,
    VERSIONS,
    ZP_MODES,
    Header,
    align8,
    min_tensor_entry,
    numel_of,
    scalar_nbytes,
    shape_problem,
    stored_value_problem,
    tensor_dtype,
    tensor_entry_tail,
)
from .values import Bitset, QuantParams, ScalarValue, TensorSpec, UninitializedTensor, quant_problem


@dataclass(frozen=True)
class TensorInfo:
    """One tensor table entry. Offsets are absolute file offsets; nbytes are unpadded.

    `data_offset`/`data_nbytes` locate the stored payload (packed for sub-byte types), so code
    that reads the file without this module (e.g. a generated C loader) can use them directly.
    """

    name: str
    dtype: DTypeInfo
    shape: tuple[int, ...]
    has_data: bool
    data_offset: int
    data_nbytes: int
    quant: QuantParams | None
    quant_offset: int
    quant_nbytes: int
    entry_offset: int

    @property
    def dtype_code(self) -> int:
        return self.dtype.code

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return numel_of(self.shape)


@dataclass(frozen=True)
class MetadataInfo:
    """One metadata table entry. `type` is the value type (a scalar type, str, bitset or ndarray);
    NDARRAY entries also have `element_dtype` and `shape`."""

    key: str
    type: DTypeInfo
    element_dtype: DTypeInfo | None
    shape: tuple[int, ...] | None
    value_offset: int
    value_nbytes: int
    entry_offset: int


class _Parser:
    """Bounds-checked reads from the mapped file; every structural read goes through `take`."""

    def __init__(self, buf, size: int, path: str):
        self.buf = buf
        self.size = size
        self.path = path

    def fail(self, message: str, table: str, entry: str | int | None, offset: int | None):
        raise OinfError(message, table=table, entry=entry, offset=offset, path=self.path)

    def take(self, off: int, n: int, limit: int, table: str, entry: str | int | None, what: str) -> bytes:
        if off + n > limit:
            where = "the end of the file" if limit == self.size else f"the end of the {table} table (byte {limit})"
            self.fail(f"{what} ({n} bytes at {off}) runs past {where}", table, entry, off)
        return self.buf[off:off + n]

    def u32(self, off: int, limit: int, table: str, entry: str | int | None, what: str) -> int:
        return struct.unpack("<I", self.take(off, 4, limit, table, entry, what))[0]

    def u64(self, off: int, limit: int, table: str, entry: str | int | None, what: str) -> int:
        return struct.unpack("<Q", self.take(off, 8, limit, table, entry, what))[0]

    def string(self, off: int, limit: int, table: str, entry: str | int | None, what: str) -> tuple[str, int]:
        """A length-prefixed string; returns it and the offset after its padding."""
        n = self.u32(off, limit, table, entry, f"{what} length")
        raw = self.take(off + 4, align8(4 + n) - 4, limit, table, entry, f"{what} of length {n}")[:n]
        if NAME_RE.fullmatch(raw) is None:
            shown = raw[:40].decode("ascii", "backslashreplace")
            self.fail(f"invalid {what} {shown!r}: {NAME_RULE}", table, entry, off)
        return raw.decode("ascii"), off + align8(4 + n)


class Model:
    """An open `.oinf` file. Use `ModelLoader.open(path)`; close it (or use `with`) when done.

    Arrays returned by `tensor()` for plain numeric types are read-only views of the mapping and
    stay valid after `close()` (the mapping is released when the last view goes away).
    """

    def __init__(self, path: Path, mm: mmap.mmap, header: Header, sizevars: dict[str, int],
                 metadata: dict[str, Any], metadata_infos: dict[str, MetadataInfo], tensors: dict[str, TensorInfo]):
        self.path = path
        self.header = header
        self._mm: mmap.mmap | None = mm
        self._sizevars = sizevars
        self._metadata = metadata
        self._metadata_infos = metadata_infos
        self._tensors = tensors

    # -- header and tables -------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.header.version

    @property
    def file_size(self) -> int:
        return self.header.file_size

    @property
    def sizevars(self) -> dict[str, int]:
        return dict(self._sizevars)

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    @property
    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    @property
    def tensor_infos(self) -> dict[str, TensorInfo]:
        """Every tensor entry by name, in file order."""
        return dict(self._tensors)

    @property
    def metadata_infos(self) -> dict[str, MetadataInfo]:
        return dict(self._metadata_infos)

    def size_of(self, name: str) -> int:
        if name not in self._sizevars:
            raise OinfError(f"no sizevar named {name!r} (has: {', '.join(self._sizevars) or 'none'})",
                            table="sizevars", entry=name, path=str(self.path))
        return self._sizevars[name]

    def meta(self, key: str) -> Any:
        if key not in self._metadata:
            raise OinfError(f"no metadata key {key!r} (has: {', '.join(self._metadata) or 'none'})",
                            table="metadata", entry=key, path=str(self.path))
        return self._metadata[key]

    def metadata_info(self, key: str) -> MetadataInfo:
        self.meta(key)
        return self._metadata_infos[key]

    @property
    def quant_keys(self) -> list[str]:
        """The keys of the quantization parameters, usable like tensor names: `W#scale` (f32,
        one per scale) for every v2 tensor `W` with quant, `W#zero_point` (i32) where it has zero
        points. Graphs read them with @ref / @pattern (docs/dsl.md)."""
        keys = []
        for name, info in self._tensors.items():
            if info.quant is not None:
                keys.append(name + QUANT_SCALE)
                if info.quant.zero_points.size:
                    keys.append(name + QUANT_ZERO_POINT)
        return keys

    def info(self, name: str) -> TensorInfo:
        if name not in self._tensors:
            quant = self._quant_key_info(name)
            if quant is None:
                raise OinfError(f"no tensor named {name!r}", table="tensors", entry=name, path=str(self.path))
            return quant
        return self._tensors[name]

    def _quant_key_info(self, key: str) -> TensorInfo | None:
        """A quant key as a 1-D tensor entry whose data is the scales / zero points inside the
        quant payload (after its 48-byte header)."""
        base, sep, part = key.rpartition("#")
        info = self._tensors.get(base) if sep else None
        if info is None or info.quant is None or "#" + part not in (QUANT_SCALE, QUANT_ZERO_POINT):
            return None
        q = info.quant
        scales = q.scales.size
        start = info.quant_offset + QUANT_HEADER.size
        if "#" + part == QUANT_SCALE:
            return TensorInfo(key, dtypes.F32, (scales,), True, start, 4 * scales, None, 0, 0, info.entry_offset)
        if not q.zero_points.size:
            return None
        return TensorInfo(key, dtypes.I32, (q.zero_points.size,), True, start + 4 * scales, 4 * q.zero_points.size,
                          None, 0, 0, info.entry_offset)

    # -- tensor data -------------------------------------------------------------------------
    def tensor_bytes(self, name: str) -> np.ndarray:
        """The stored payload of tensor `name` (data_nbytes, no padding) as a read-only uint8 view."""
        info = self.info(name)
        if not info.has_data:
            raise OinfError("tensor has no data (declared uninitialized)", table="tensors", entry=name,
                            offset=info.entry_offset, path=str(self.path))
        if self._mm is None:
            raise OinfError("model is closed", path=str(self.path))
        if info.data_nbytes == 0:
            empty = np.zeros(0, np.uint8)
            empty.flags.writeable = False
            return empty
        return np.frombuffer(self._mm, np.uint8, count=info.data_nbytes, offset=info.data_offset)

    def tensor(self, name: str, *, raw: bool = False) -> np.ndarray:
        """Tensor `name` in its unpacked NumPy representation (see `openinfer.dtypes`).

        f16/f32/f64/integers are zero-copy read-only views; bool is a view after checking every
        byte is 0 or 1; bf16 and f8 decode to float32, packed types unpack to int8/uint8 (copies).
        With `raw=True` nothing is decoded: packed types give their packed bytes (1-D uint8),
        bf16 its uint16 bit patterns, f8 and bool their uint8 bytes, other types as above.
        """
        info = self.info(name)
        buf = self.tensor_bytes(name)
        dt = info.dtype
        try:
            if raw:
                if dt.is_packed:
                    return buf
                if dt.name == "bf16":
                    return buf.view("<u2").reshape(info.shape)
                if dt.name == "f8" or dt.kind is Kind.BOOL:
                    return buf.reshape(info.shape)
            problem = stored_value_problem(buf, dt, info.numel)
            if problem:
                raise OinfError(problem[0], table="data", entry=name, offset=info.data_offset + problem[1],
                                path=str(self.path))
            return numerics.from_storage(buf, dt, info.shape)
        except (ValueError, OverflowError) as exc:  # NumPy cannot hold the shape (a dim >= 2^63, too many dims)
            raise OinfError(f"shape {list(info.shape)} cannot be represented as a NumPy array: {exc}",
                            table="tensors", entry=name, offset=info.entry_offset, path=str(self.path)) from None

    # -- re-encoding -------------------------------------------------------------------------
    def to_write_args(self) -> dict[str, Any]:
        """`tensors=`, `sizevars=` and `metadata=` for `write_oinf` that reproduce this file's contents
        exactly: tensor payloads are copied as stored and every metadata value keeps its type."""
        tensors: dict[str, Any] = {}
        for name, info in self._tensors.items():
            if info.has_data:
                tensors[name] = TensorSpec.from_storage(self.tensor_bytes(name), info.dtype, info.shape, info.quant)
            else:
                tensors[name] = UninitializedTensor(info.dtype, info.shape, quant=info.quant)
        metadata = {}
        for key, minfo in self._metadata_infos.items():
            metadata[key] = ScalarValue(self._metadata[key], minfo.element_dtype or minfo.type)
        return {"tensors": tensors, "sizevars": dict(self._sizevars), "metadata": metadata}

    # -- lifetime ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._mm is None

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # views returned by tensor() still use the mapping; it goes when they do
            self._mm = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Model {str(self.path)!r} v{self.version}: {len(self._sizevars)} sizevars, "
                f"{len(self._metadata)} metadata, {len(self._tensors)} tensors>")


class ModelLoader:
    """Opens `.oinf` files (v1 and v2)."""

    @staticmethod
    def open(path: str | os.PathLike) -> Model:
        path = Path(path)
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):    # a FIFO or device would block or never end
                raise OinfError("not a regular file", path=str(path))
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < TABLES_START:
                    head = f.read(size)
                    _parse_header(_Parser(head, size, str(path)))  # reports bad magic before length
                    raise OinfError(f"file is {size} bytes, shorter than the 72-byte header (truncated)",
                                    table="header", offset=size, path=str(path))
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise OinfError(f"cannot open: {exc.strerror or exc}", path=str(path)) from None
        try:
            return _parse(path, mm)
        except BaseException:
            mm.close()
            raise


def _parse_header(p: _Parser) -> Header:
    if p.size < len(MAGIC):
        p.fail(f"file is {p.size} bytes, too short for an .oinf header (truncated)", "header", None, p.size)
    if p.buf[:len(MAGIC)] != MAGIC:
        p.fail(f"bad magic {bytes(p.buf[:len(MAGIC)])!r}, expected {MAGIC!r} (not an .oinf file)", "header", "magic", 0)
    if p.size < HEADER_SIZE:
        p.fail(f"file is {p.size} bytes, shorter than the {HEADER_SIZE}-byte header (truncated)", "header", None,
               p.size)
    fields = HEADER.unpack(p.buf[:HEADER_SIZE])
    h = Header(*fields[1:])

    def bad(field: str, message: str):
        p.fail(message, "header", field, HEADER_FIELD_OFFSETS[field])

    if h.version not in VERSIONS:
        bad("version", f"unsupported version {h.version} (this reader knows versions 1 and 2)")
    if h.file_size != p.size:
        bad("file_size", f"header says the file is {h.file_size} bytes but it is {p.size} (truncated or extended)")
    if h.flags != 0:
        bad("flags", f"header flags must be 0 (none are defined), got {h.flags:#x}")
    if h.reserved != 0:
        bad("reserved", f"header reserved field must be 0, got {h.reserved}")
    order = ("offset_sizevars", "offset_metadata", "offset_tensors", "offset_data")
    previous, previous_name = TABLES_START, "the 72-byte header"
    for name in order:
        value = getattr(h, name)
        if value % 8:
            bad(name, f"{name} = {value} is not 8-byte aligned")
        if value > h.file_size:
            bad(name, f"{name} = {value} is past the end of the file ({h.file_size} bytes)")
        if value < previous:
            bad(name, f"{name} = {value} is before {previous_name} (sections must be in order)")
        previous, previous_name = value, f"{name} ({value})"
    counts = (("n_sizevars", h.n_sizevars, h.offset_metadata - h.offset_sizevars, MIN_SIZEVAR_ENTRY, "sizevar"),
              ("n_metadata", h.n_metadata, h.offset_tensors - h.offset_metadata, MIN_METADATA_ENTRY, "metadata"),
              ("n_tensors", h.n_tensors, h.offset_data - h.offset_tensors, min_tensor_entry(h.version), "tensor"))
    for field, count, room, smallest, table in counts:
        if count * smallest > room:
            bad(field, f"{field} = {count} entries cannot fit in the {room}-byte {table} table "
                       f"(each needs at least {smallest} bytes)")
    return h


def _parse(path: Path, mm: mmap.mmap) -> Model:
    p = _Parser(mm, len(mm), str(path))
    h = _parse_header(p)
    blobs: list[tuple[int, int, str, str, str]] = []   # (start, end, table, entry, description)

    sizevars: dict[str, int] = {}
    pos, limit = h.offset_sizevars, h.offset_metadata
    for i in range(h.n_sizevars):
        start = pos
        name, pos = p.string(pos, limit, "sizevars", i, "sizevar name")
        if name in sizevars:
            p.fail(f"duplicate sizevar {name!r}", "sizevars", name, start)
        sizevars[name] = p.u64(pos, limit, "sizevars", name, "sizevar value")
        pos += 8

    metadata: dict[str, Any] = {}
    metadata_infos: dict[str, MetadataInfo] = {}
    pos, limit = h.offset_metadata, h.offset_tensors
    for i in range(h.n_metadata):
        start = pos
        key, pos = p.string(pos, limit, "metadata", i, "metadata key")
        if key in metadata:
            p.fail(f"duplicate metadata key {key!r}", "metadata", key, start)
        vtype, vflags, nbytes, voff = struct.unpack("<IIQQ", p.take(pos, 24, limit, "metadata", key, "entry"))
        dt = BY_CODE.get(vtype)
        if dt is None:
            p.fail(f"value type {vtype} is invalid (valid: 1-25)", "metadata", key, pos)
        if vflags != 0:
            p.fail(f"value flags must be 0, got {vflags:#x}", "metadata", key, pos + 4)
        _check_blob(p, h, "metadata", key, pos + 16, voff, nbytes, "value")
        value, element, shape = _decode_metadata(p, key, dt, voff, nbytes)
        metadata[key] = value
        metadata_infos[key] = MetadataInfo(key, dt, element, shape, voff, nbytes, start)
        blobs.append((voff, voff + nbytes, "metadata", key, f"the value of metadata {key!r}"))
        pos += 24

    tensors: dict[str, TensorInfo] = {}
    pos, limit = h.offset_tensors, h.offset_data
    for i in range(h.n_tensors):
        start = pos
        name, pos = p.string(pos, limit, "tensors", i, "tensor name")
        if name in tensors:
            p.fail(f"duplicate tensor name {name!r}", "tensors", name, start)
        code, ndim, flags = struct.unpack("<III", p.take(pos, 12, limit, "tensors", name, "entry"))
        dt = tensor_dtype(code)
        if dt is None:
            what = f"{BY_CODE[code].name} ({code})" if code in BY_CODE else str(code)
            p.fail(f"dtype {what} is not a tensor type (valid: 1-12, 16-25)", "tensors", name, pos)
        allowed = FLAG_HAS_DATA | (FLAG_HAS_QUANT if h.version >= 2 else 0)
        if flags & ~allowed:
            p.fail(f"flags {flags:#x} have unknown bits (v{h.version} allows {allowed:#x})", "tensors", name, pos + 8)
        pos += 12
        tail = tensor_entry_tail(h.version)
        fixed = p.take(pos, 8 * ndim + tail, limit, "tensors", name, f"dims of a {ndim}-d entry")
        shape = struct.unpack_from(f"<{ndim}Q", fixed)
        if problem := shape_problem(shape):
            p.fail(problem, "tensors", name, pos - 8)
        data_nbytes, data_offset = struct.unpack_from("<QQ", fixed, 8 * ndim)
        q_nbytes, q_offset = struct.unpack_from("<QQ", fixed, 8 * ndim + 16) if tail == 32 else (0, 0)
        field = pos + 8 * ndim
        has_data = bool(flags & FLAG_HAS_DATA)
        if has_data:
            expected = dt.storage_nbytes(numel_of(shape))
            if data_nbytes != expected:
                p.fail(f"data_nbytes = {data_nbytes} but {dt.name}{list(shape)} needs {expected}",
                       "tensors", name, field)
            _check_blob(p, h, "tensors", name, field + 8, data_offset, data_nbytes, "data")
            blobs.append((data_offset, data_offset + data_nbytes, "tensors", name, f"the data of tensor {name!r}"))
        elif data_nbytes or data_offset:
            p.fail("a tensor without data must have data_nbytes and data_offset 0", "tensors", name, field)
        quant = None
        if flags & FLAG_HAS_QUANT:
            _check_blob(p, h, "tensors", name, field + 24, q_offset, q_nbytes, "quant payload")
            quant = _decode_quant(p, name, shape, q_offset, q_nbytes)
            blobs.append((q_offset, q_offset + q_nbytes, "quant", name, f"the quant payload of tensor {name!r}"))
        elif q_nbytes or q_offset:
            p.fail("a tensor without quant must have quant_nbytes and quant_offset 0", "tensors", name, field + 16)
        tensors[name] = TensorInfo(name, dt, tuple(shape), has_data, data_offset, data_nbytes, quant,
                                   q_offset, q_nbytes, start)
        pos += 8 * ndim + tail

    _check_overlap(p, blobs)
    return Model(path, mm, h, sizevars, metadata, metadata_infos, tensors)


def _check_blob(p: _Parser, h: Header, table: str, entry: str, field: int, off: int, nbytes: int, what: str) -> None:
    """A blob must be 8-aligned, inside the data section and inside the file."""
    if off % 8:
        p.fail(f"{what} offset {off} is not 8-byte aligned", table, entry, field)
    if off < h.offset_data:
        p.fail(f"{what} offset {off} is before the data section ({h.offset_data})", table, entry, field)
    if off + nbytes > h.file_size:
        p.fail(f"{what} of {nbytes} bytes at offset {off} runs past the end of the file ({h.file_size} bytes)",
               table, entry, field)


def _check_overlap(p: _Parser, blobs: list[tuple[int, int, str, str, str]]) -> None:
    last = None
    for blob in sorted(b for b in blobs if b[1] > b[0]):
        if last is not None and blob[0] < last[1]:
            p.fail(f"{blob[4]} (bytes {blob[0]}..{blob[1]}) overlaps {last[4]} (bytes {last[0]}..{last[1]})",
                   blob[2], blob[3], blob[0])
        if last is None or blob[1] > last[1]:
            last = blob


def _decode_metadata(p: _Parser, key: str, dt: DTypeInfo, off: int, nbytes: int):
    """The value of one metadata entry, with its size rules (digest §1.5); (value, element dtype, shape)."""
    def fail(message: str, at: int = 0):
        p.fail(message, "metadata", key, off + at)

    def need(expected: int) -> None:
        if nbytes != expected:
            fail(f"{dt.name} value_nbytes must be {expected}, got {nbytes}")

    payload = p.take(off, nbytes, p.size, "metadata", key, "value")
    if dt.kind is Kind.STRING:
        if nbytes < 4:
            fail(f"str value_nbytes {nbytes} is too small for a string")
        text, end = p.string(off, off + nbytes, "metadata", key, "string value")
        need(end - off)
        return text, None, None
    if dt.kind is Kind.BITSET:
        if nbytes < 8:
            fail(f"bitset value_nbytes {nbytes} is too small (needs at least 8)")
        bit_count, byte_count = struct.unpack_from("<II", payload)
        if byte_count != (bit_count + 7) // 8:
            fail(f"bitset byte_count {byte_count} != ceil({bit_count} / 8)", 4)
        need(align8(8 + byte_count))
        return Bitset(bit_count, payload[8:8 + byte_count]), None, None
    if dt.kind is Kind.NDARRAY:
        if nbytes < 8:
            fail(f"ndarray value_nbytes {nbytes} is too small (needs at least 8)")
        code, ndim = struct.unpack_from("<II", payload)
        element = tensor_dtype(code)
        if element is None:
            fail(f"ndarray element type {code} is not a tensor type (valid: 1-12, 16-25)")
        if 8 + 8 * ndim > nbytes:
            fail(f"ndarray dims ({ndim}) run past its value_nbytes {nbytes}", 4)
        shape = struct.unpack_from(f"<{ndim}Q", payload, 8)
        if problem := shape_problem(shape):
            fail(f"ndarray {problem}", 4)
        data_nbytes = element.storage_nbytes(numel_of(shape))
        need(align8(8 + 8 * ndim + data_nbytes))
        raw = np.frombuffer(payload, np.uint8, count=data_nbytes, offset=8 + 8 * ndim)
        problem = stored_value_problem(raw, element, numel_of(shape))
        if problem:
            fail(problem[0], 8 + 8 * ndim + problem[1])
        try:
            value = np.array(numerics.from_storage(raw, element, shape))
        except (ValueError, OverflowError) as exc:
            fail(f"ndarray shape {list(shape)} cannot be represented as a NumPy array: {exc}", 8)
        value.flags.writeable = False   # shared by every `metadata` dict handed out
        return value, element, tuple(shape)
    need(scalar_nbytes(dt))
    raw = np.frombuffer(payload, np.uint8)
    if dt.is_packed:
        byte = int(raw[0])
        if byte >> dt.bits or (dt.name == "t2" and byte == 2):
            fail(f"{dt.name} value byte {byte:#04x} is outside the type's {dt.bits}-bit range")
    elif dt.kind is Kind.BOOL and raw[0] > 1:
        fail(f"bool value byte {int(raw[0])} must be 0 or 1")
    return numerics.from_storage(raw, dt, ()).item(), None, None


def _decode_quant(p: _Parser, name: str, shape: tuple[int, ...], off: int, nbytes: int) -> QuantParams:
    def fail(message: str, at: int = 0):
        p.fail(message, "quant", name, off + at)

    if nbytes < QUANT_HEADER.size:
        fail(f"quant payload of {nbytes} bytes is smaller than its {QUANT_HEADER.size}-byte header")
    scheme, smode, zmode, reserved, saxis, scount, zaxis, zcount = QUANT_HEADER.unpack(
        p.take(off, QUANT_HEADER.size, p.size, "quant", name, "quant header"))
    if reserved != 0:
        fail(f"quant reserved field must be 0, got {reserved}", 12)
    expected = align8(QUANT_HEADER.size + 4 * scount + 4 * zcount)
    if nbytes != expected:
        fail(f"quant_nbytes = {nbytes} but {scount} scales and {zcount} zero points need {expected}", 24)
    problem = quant_problem(scheme, smode, zmode, saxis, scount, zaxis, zcount, shape)
    if problem:
        fail(problem)
    body = p.take(off + QUANT_HEADER.size, 4 * (scount + zcount), p.size, "quant", name, "scales and zero points")
    return QuantParams(SCHEMES[scheme], SCALE_MODES[smode], ZP_MODES[zmode], saxis,
                       np.frombuffer(body, "<f4", count=scount), zaxis,
                       np.frombuffer(body, "<i4", count=zcount, offset=4 * scount))
