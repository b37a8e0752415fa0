"""Writing `.oinf` files: validated, deterministic (digest §1.8), streamed and atomic.

Layout: the header, then the sizevar, metadata and tensor tables back to back (each sorted by name
in code-point order, each section 8-aligned), then the data section: all metadata values (sorted
by key), all tensor payloads (sorted by name; a tensor without data takes no space), and in v2 all
quant payloads, each 8-aligned and zero-padded. The offsets in the tables are exactly where the
blobs are written; the original v2 writer computed them interleaved but wrote them grouped
(digest §1.8), which corrupted files with more than one quantized tensor.

Every input is validated and converted into a plan before the first byte is written; tensor
payloads are then streamed (contiguous arrays of the stored type go to the file without a copy)
into a temporary file in the destination directory, which is fsync'ed and renamed over the
destination. On any failure the destination is untouched and the temporary file removed.
"""

from __future__ import annotations

import fcntl
import io
import os
import stat
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .. import numerics
from ..dtypes import BY_NAME, DTypeInfo, Kind
from ..errors import OinfError
from ..files import REPLACED_WHOLE, fsync_dir, mkstemp, non_regular
from .format import (
    DEFAULT_VERSION,
    FLAG_HAS_DATA,
    FLAG_HAS_QUANT,
    QUANT_HEADER,
    TABLES_START,
    U64_MAX,
    VERSIONS,
    Header,
    align8,
    check_name,
    encode_string,
    numel_of,
    shape_problem,
    stored_value_problem,
    string_size,
    tensor_dtype,
    tensor_entry_tail,
)
from .reader import ModelLoader
from .values import (
    Bitset,
    QuantParams,
    ScalarValue,
    SizeVar,
    TensorSpec,
    UninitializedTensor,
    as_dtype,
    numpy_dtype_to_oinf,
)

#: Elements converted per step when a payload needs converting (a multiple of 8 so that packed
#: chunks end on whole bytes); bounds the writer's extra memory to a few tens of MB.
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: DTypeInfo
    shape: tuple[int, ...]
    has_data: bool
    nbytes: int
    chunks: Callable[[], Iterator[Any]] | None   # yields buffers that together make the payload
    quant: bytes | None


@dataclass(frozen=True)
class _Plan:
    header: Header
    tables: bytes                                 # everything from byte 0 to offset_data
    blobs: tuple[Any, ...]                        # bytes or _Tensor, in file order


# -- public entry points ---------------------------------------------------------------------
def write_oinf(path: str | os.PathLike, tensors: Mapping[str, Any] | None = None,
               sizevars: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
               *, version: int = DEFAULT_VERSION) -> None:
    """Write a `.oinf` file atomically.

    `tensors` values: NumPy arrays (or array-likes) stored in their own dtype, `TensorSpec` to
    force a dtype (bf16, f8, i4, ...) or attach quant parameters, `UninitializedTensor` for a
    declaration without data. `sizevars` values: non-negative ints. `metadata` values are typed
    by `ScalarValue` or inferred (see docs/oinf.md). `version` is 2 (default) or 1 (legacy, no quant).
    """
    plan = plan_oinf(tensors, sizevars, metadata, version=version)
    write_plan(path, plan)


def encode_oinf(tensors: Mapping[str, Any] | None = None, sizevars: Mapping[str, Any] | None = None,
                metadata: Mapping[str, Any] | None = None, *, version: int = DEFAULT_VERSION) -> bytes:
    """The bytes `write_oinf` would write (for small models; large ones should be written)."""
    out = io.BytesIO()
    _emit(out, plan_oinf(tensors, sizevars, metadata, version=version))
    return out.getvalue()


def write_plan(path: str | os.PathLike, plan: _Plan) -> None:
    """Stream `plan` to a temporary file next to `path`, fsync it, and rename it over `path`.

    The temporary, `.<name>.<pid>.<random>.tmp`, is locked (flock) while it is written; one left by
    a writer that was killed is removed by the next write of the same path."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    kind = non_regular(path)
    if kind is not None:
        raise OinfError(f"cannot write: it is {kind}, not a regular file; {REPLACED_WHOLE}", path=str(path))
    _remove_stale_temporaries(directory, path.name)
    try:
        fd, tmp = mkstemp(prefix=f".{path.name}.{os.getpid()}.", dir=directory)
    except OSError as exc:
        raise OinfError(f"cannot create a file in {str(directory)!r}: {exc.strerror or exc}", path=str(path)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)      # released when fd closes (or the process dies)
        with os.fdopen(fd, "wb") as f:
            _emit(f, plan)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OinfError(f"cannot write: {exc.strerror or exc}", path=str(path)) from exc
        raise
    fsync_dir(directory)


def _remove_stale_temporaries(directory: Path, name: str) -> None:
    """Delete the temporaries write_plan made for `directory/name` whose writer is gone: only names
    of exactly its pattern, whose pid is no live process and whose lock no one holds."""
    prefix = f".{name}."
    try:
        entries = os.listdir(directory)
    except OSError:
        return                  # (mkstemp will report a folder that cannot be used)
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        parts = entry[len(prefix):-len(".tmp")].split(".")
        if len(parts) != 2 or not parts[0].isdigit() or _process_exists(int(parts[0])):
            continue
        stale = directory / entry
        try:
            fd = os.open(stale, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.unlink(stale)
        except OSError:
            pass                # locked by a live writer, or already gone
        finally:
            os.close(fd)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True             # (another user's process: EPERM)
    return True


# -- planning --------------------------------------------------------------------------------
def plan_oinf(tensors: Mapping[str, Any] | None, sizevars: Mapping[str, Any] | None,
              metadata: Mapping[str, Any] | None, *, version: int = DEFAULT_VERSION) -> _Plan:
    """Validate and convert every input, and lay the file out (nothing is written yet)."""
    if isinstance(version, bool) or version not in VERSIONS:
        raise OinfError(f"unsupported version {version!r} (write 1 or 2)")
    for table, given in (("tensors", tensors), ("sizevars", sizevars), ("metadata", metadata)):
        if given is not None and not isinstance(given, Mapping):
            raise OinfError(f"{table} must be a mapping of names to values (a dict), got {type(given).__name__}",
                            table=table)
    svs = sorted((check_name(k, table="sizevars", what="sizevar name"), _sizevar(k, v))
                 for k, v in (sizevars or {}).items())
    metas = sorted((check_name(k, table="metadata", what="metadata key"), *encode_metadata_value(k, v))
                   for k, v in (metadata or {}).items())
    planned = sorted((_plan_tensor(k, v) for k, v in (tensors or {}).items()), key=lambda t: t.name)
    for t in planned:
        if t.quant is not None and version == 1:
            raise OinfError("version 1 files cannot hold quant parameters; write version 2",
                            table="tensors", entry=t.name)

    sizevar_table = b"".join(encode_string(k) + struct.pack("<Q", v) for k, v in svs)
    off_meta = align8(TABLES_START + len(sizevar_table))
    off_tensors = align8(off_meta + sum(string_size(k) + 24 for k, _, _ in metas))
    tail = tensor_entry_tail(version)
    off_data = align8(off_tensors + sum(string_size(t.name) + 12 + 8 * len(t.shape) + tail for t in planned))

    cursor = off_data
    blobs: list[Any] = []
    meta_table = bytearray()
    for key, code, payload in metas:
        meta_table += encode_string(key) + struct.pack("<IIQQ", code, 0, len(payload), cursor)
        blobs.append(payload)
        cursor += align8(len(payload))
    data_at: dict[str, int] = {}
    for t in planned:
        if t.has_data:
            data_at[t.name] = cursor
            blobs.append(t)
            cursor += align8(t.nbytes)
    quant_at: dict[str, int] = {}
    for t in planned:
        if t.quant is not None:
            quant_at[t.name] = cursor
            blobs.append(t.quant)
            cursor += len(t.quant)
    tensor_table = bytearray()
    for t in planned:
        flags = (FLAG_HAS_DATA if t.has_data else 0) | (FLAG_HAS_QUANT if t.quant is not None else 0)
        tensor_table += encode_string(t.name) + struct.pack(f"<III{len(t.shape)}Q", t.dtype.code, len(t.shape),
                                                            flags, *t.shape)
        tensor_table += struct.pack("<QQ", t.nbytes if t.has_data else 0, data_at.get(t.name, 0))
        if version >= 2:
            tensor_table += struct.pack("<QQ", len(t.quant or b""), quant_at.get(t.name, 0))

    header = Header(version, 0, len(svs), len(metas), len(planned), 0, TABLES_START, off_meta, off_tensors,
                    off_data, cursor)
    tables = bytearray(header.pack())
    for offset, table in ((TABLES_START, sizevar_table), (off_meta, meta_table), (off_tensors, tensor_table)):
        tables += b"\x00" * (offset - len(tables)) + table
    tables += b"\x00" * (off_data - len(tables))
    return _Plan(header, bytes(tables), tuple(blobs))


def _sizevar(name: str, value: Any) -> int:
    if isinstance(value, SizeVar):
        value = value.value
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise OinfError(f"a sizevar must be a non-negative int, got {type(value).__name__} {value!r}",
                        table="sizevars", entry=name)
    if not 0 <= int(value) <= U64_MAX:
        raise OinfError(f"a sizevar must be in 0..2^64-1, got {int(value)}", table="sizevars", entry=name)
    return int(value)


def _shape(value: Any, name: str) -> tuple[int, ...]:
    try:
        dims = tuple(value)
    except TypeError:
        raise OinfError(f"shape must be a sequence of ints, got {value!r}", table="tensors", entry=name) from None
    for d in dims:
        if isinstance(d, bool | np.bool_) or not isinstance(d, int | np.integer) or not 0 <= int(d) <= U64_MAX:
            raise OinfError(f"shape {list(dims)} must hold ints in 0..2^64-1", table="tensors", entry=name)
    dims = tuple(int(d) for d in dims)
    if problem := shape_problem(dims):      # what both readers refuse is never written
        raise OinfError(problem, table="tensors", entry=name)
    return dims


def _tensor_type(spec: Any, name: str) -> DTypeInfo:
    dt = as_dtype(spec)
    if tensor_dtype(dt.code) is None:
        raise OinfError(f"{dt.name} is not a tensor type (tensors may be any type but bitset, str and ndarray)",
                        table="tensors", entry=name)
    return dt


def _plan_tensor(key: str, value: Any) -> _Tensor:
    spec_name = getattr(value, "name", None) if isinstance(value, TensorSpec | UninitializedTensor) else None
    if spec_name is not None and spec_name != key:
        raise OinfError(f"the spec's name {spec_name!r} differs from its key {key!r}", table="tensors", entry=key)
    name = check_name(key, table="tensors", what="tensor name")
    if isinstance(value, UninitializedTensor):
        dt, shape = _tensor_type(value.dtype, name), _shape(value.shape, name)
        return _Tensor(name, dt, shape, False, 0, None, _quant_payload(value.quant, shape, name))
    spec = value if isinstance(value, TensorSpec) else TensorSpec(value)
    if spec.storage:
        if spec.dtype is None or spec.shape is None:
            raise OinfError("a tensor given as stored bytes needs dtype and shape", table="tensors", entry=name)
        dt, shape = _tensor_type(spec.dtype, name), _shape(spec.shape, name)
        raw = _stored_bytes(spec.data, name)
        expected = dt.storage_nbytes(numel_of(shape))
        if raw.size != expected:
            raise OinfError(f"{dt.name}{list(shape)} is stored in {expected} bytes, got {raw.size}",
                            table="tensors", entry=name)
        problem = stored_value_problem(raw, dt, numel_of(shape))
        if problem:
            raise OinfError(problem[0], table="tensors", entry=name)
        return _Tensor(name, dt, shape, True, raw.size, lambda: iter((raw,)), _quant_payload(spec.quant, shape, name))
    arr = _as_array(spec.data, name, "tensors")
    dt = _tensor_type(spec.dtype, name) if spec.dtype is not None else numpy_dtype_to_oinf(arr.dtype)
    _check_representable(arr, dt, name, "tensors")
    return _Tensor(name, dt, arr.shape, True, dt.storage_nbytes(arr.size), lambda: _storage_chunks(arr, dt),
                   _quant_payload(spec.quant, arr.shape, name))


def _stored_bytes(data: Any, name: str) -> np.ndarray:
    try:
        if isinstance(data, np.ndarray):
            return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        return np.frombuffer(memoryview(data).cast("B"), np.uint8)
    except (TypeError, ValueError) as exc:
        raise OinfError(f"stored bytes must be a bytes-like object or array: {exc}", table="tensors",
                        entry=name) from None


def _as_array(data: Any, name: str, table: str) -> np.ndarray:
    if isinstance(data, np.ma.MaskedArray) and np.ma.getmask(data).any():    # asarray would drop the mask
        raise OinfError("a masked array with masked values cannot be stored (a file has no mask): fill them, "
                        "e.g. arr.filled(0)", table=table, entry=name)
    try:
        arr = np.asarray(data)
    except (TypeError, ValueError, OverflowError) as exc:
        raise OinfError(f"cannot make an array of this value: {exc}", table=table, entry=name) from None
    if arr.dtype.kind not in "biuf":
        raise OinfError(f"values must be numbers or bools, got NumPy dtype {arr.dtype}", table=table, entry=name)
    return arr


def _check_representable(arr: np.ndarray, dt: DTypeInfo, name: str, table: str) -> None:
    """Refuse values the target cannot hold: integer/bool targets that would wrap or truncate
    (every value must be in range), float targets that a finite value would overflow to inf.

    Floats are otherwise rounded as IEEE does (to nearest even); infinities and NaN are kept.
    """
    if arr.size == 0:
        return
    if dt.is_float:
        if arr.dtype == np.dtype(dt.numpy) and dt.name in ("f16", "f32"):
            return                  # the target's own IEEE format: stored as is, nothing can overflow
        if dt.name != "f64" and arr.dtype.kind in "fiu":
            largest = 0.0           # the largest finite magnitude (rounding is monotonic), in pieces
            flat = arr.reshape(-1)
            for start in range(0, flat.size, CHUNK_ELEMENTS):
                chunk = flat[start:start + CHUNK_ELEMENTS].astype(np.float64)
                chunk = np.abs(chunk[np.isfinite(chunk)])
                largest = max(largest, float(chunk.max())) if chunk.size else largest
            with np.errstate(over="ignore"):
                if np.isinf(numerics.round_float(np.float64(largest), dt)):
                    raise OinfError(f"{largest!r} is beyond the {dt.name} range (it would be stored as inf)",
                                    table=table, entry=name)
        return
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if not finite.all() or not np.array_equal(arr, np.trunc(arr)):
            raise OinfError(f"float values are not all integral, cannot store them as {dt.name}",
                            table=table, entry=name)
    lo, hi = (0, 1) if dt.kind is Kind.BOOL else (dt.lo, dt.hi)
    vmin, vmax = arr.min(), arr.max()
    if vmin < lo or vmax > hi:
        raise OinfError(f"values {vmin}..{vmax} are out of the {dt.name} range {lo}..{hi}", table=table, entry=name)
    if dt.name == "t1" and (arr == 0).any():
        raise OinfError("t1 holds only -1 and +1, got 0", table=table, entry=name)


def _storage_chunks(arr: np.ndarray, dt: DTypeInfo) -> Iterator[Any]:
    """The stored bytes of `arr` as `dt`, in pieces. Already-stored layouts go out without a copy."""
    native = not (dt.is_packed or dt.name in ("bf16", "f8") or dt.kind is Kind.BOOL)
    if native and arr.dtype == dt.np_dtype.newbyteorder("<") and arr.flags.c_contiguous:
        yield arr.reshape(-1).view(np.uint8)
        return
    if dt.kind is Kind.BOOL and arr.dtype == np.bool_ and arr.flags.c_contiguous:
        yield arr.reshape(-1).view(np.uint8)
        return
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, flat.size, CHUNK_ELEMENTS):
            yield numerics.to_storage(flat[start:start + CHUNK_ELEMENTS], dt)


def _quant_payload(quant: QuantParams | None, shape: tuple[int, ...], name: str) -> bytes | None:
    if quant is None:
        return None
    if not isinstance(quant, QuantParams):
        raise OinfError(f"quant must be a QuantParams, got {type(quant).__name__}", table="tensors", entry=name)
    quant.check_shape(shape, entry=name)
    if not np.isfinite(quant.scales).all():
        raise OinfError(f"quant scales must be finite, got {float(quant.scales[~np.isfinite(quant.scales)][0])!r}",
                        table="tensors", entry=name)
    body = (QUANT_HEADER.pack(quant.scheme_code, quant.scale_mode_code, quant.zp_mode_code, 0, quant.scale_axis,
                              len(quant.scales), quant.zp_axis, len(quant.zero_points))
            + quant.scales.astype("<f4").tobytes() + quant.zero_points.astype("<i4").tobytes())
    return body + b"\x00" * (align8(len(body)) - len(body))


# -- metadata values -------------------------------------------------------------------------
def encode_metadata_value(key: str, value: Any) -> tuple[int, bytes]:
    """(value type code, payload) of one metadata value: typed by `ScalarValue`, else inferred.

    Inference: bool -> bool; str -> str; Bitset -> bitset; Python int -> the smallest of u8..u64
    (>= 0) or i8..i64; Python float -> f32; NumPy scalars and arrays keep their dtype; lists and
    tuples -> ndarray with floats as f32 and integers narrowed to the smallest type holding them.
    """
    dtype = None
    if isinstance(value, ScalarValue):
        dtype = as_dtype(value.dtype) if value.dtype is not None else None
        value = value.value
    if dtype is None:
        dtype = _infer_metadata_type(key, value)
    if dtype.kind is Kind.STRING:
        if not isinstance(value, str):
            raise OinfError(f"a str value must be a str, got {type(value).__name__}", table="metadata", entry=key)
        return dtype.code, encode_string(check_name(value, table="metadata", what=f"string value of {key!r}"))
    if dtype.kind is Kind.BITSET:
        bits = value if isinstance(value, Bitset) else Bitset.from_bools(value)
        body = struct.pack("<II", bits.bit_count, len(bits.bytes)) + bits.bytes
        return dtype.code, body + b"\x00" * (align8(len(body)) - len(body))
    if dtype.kind is Kind.NDARRAY or isinstance(value, list | tuple | np.ndarray):
        element = None if dtype.kind is Kind.NDARRAY else dtype
        return BY_NAME["ndarray"].code, _ndarray_payload(key, value, element)
    arr = _as_array(value, key, "metadata")
    if arr.ndim != 0:
        raise OinfError(f"a {dtype.name} scalar needs one value, got shape {list(arr.shape)}",
                        table="metadata", entry=key)
    _check_representable(arr, dtype, key, "metadata")
    with np.errstate(over="ignore", invalid="ignore"):
        return dtype.code, numerics.to_storage(arr.reshape(1), dtype)


def _infer_metadata_type(key: str, value: Any) -> DTypeInfo:
    if isinstance(value, bool | np.bool_):
        return BY_NAME["bool"]
    if isinstance(value, str):
        return BY_NAME["str"]
    if isinstance(value, Bitset):
        return BY_NAME["bitset"]
    if isinstance(value, np.generic):
        return numpy_dtype_to_oinf(value.dtype)
    if isinstance(value, int):
        return _smallest_int(value, value, key)
    if isinstance(value, float):
        return BY_NAME["f32"]
    if isinstance(value, list | tuple | np.ndarray):
        return BY_NAME["ndarray"]
    raise OinfError(f"cannot store a {type(value).__name__} as metadata (use bool, int, float, str, Bitset, "
                    "a list or array of numbers, or ScalarValue)", table="metadata", entry=key)


def _smallest_int(lo: int, hi: int, key: str) -> DTypeInfo:
    """u8..u64 when lo >= 0, else i8..i64: the first that holds lo..hi."""
    names = ("u8", "u16", "u32", "u64") if lo >= 0 else ("i8", "i16", "i32", "i64")
    for n in names:
        if BY_NAME[n].lo <= lo and hi <= BY_NAME[n].hi:
            return BY_NAME[n]
    raise OinfError(f"integer {lo if lo < BY_NAME['i64'].lo else hi} does not fit in 64 bits", table="metadata",
                    entry=key)


def _ndarray_payload(key: str, value: Any, element: DTypeInfo | None) -> bytes:
    arr = _as_array(value, key, "metadata")
    if element is None:
        if isinstance(value, np.ndarray):
            element = numpy_dtype_to_oinf(arr.dtype)
        elif arr.dtype.kind == "f":
            element = BY_NAME["f32"]
        elif arr.dtype.kind in "iu":
            lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
            element = _smallest_int(lo, hi, key) if arr.dtype.kind == "u" else _smallest_signed(lo, hi, key)
        else:
            element = BY_NAME["bool"]
    elif tensor_dtype(element.code) is None:
        raise OinfError(f"ndarray elements cannot be {element.name}", table="metadata", entry=key)
    _check_representable(arr, element, key, "metadata")
    with np.errstate(over="ignore", invalid="ignore"):
        data = numerics.to_storage(arr.reshape(-1), element)
    body = struct.pack(f"<II{arr.ndim}Q", element.code, arr.ndim, *arr.shape) + data
    return body + b"\x00" * (align8(len(body)) - len(body))


def _smallest_signed(lo: int, hi: int, key: str) -> DTypeInfo:
    """Lists of Python ints narrow to the smallest *signed* type (as the original did)."""
    for n in ("i8", "i16", "i32", "i64"):
        if BY_NAME[n].lo <= lo and hi <= BY_NAME[n].hi:
            return BY_NAME[n]
    return _smallest_int(lo, hi, key)


# -- emitting --------------------------------------------------------------------------------
def _emit(f: BinaryIO, plan: _Plan) -> None:
    f.write(plan.tables)
    written = len(plan.tables)
    for blob in plan.blobs:
        n = _write_tensor(f, blob) if isinstance(blob, _Tensor) else f.write(blob)
        f.write(b"\x00" * (align8(n) - n))
        written += align8(n)
    if written != plan.header.file_size:
        raise OinfError(f"internal error: wrote {written} bytes, planned {plan.header.file_size}")


def _write_tensor(f: BinaryIO, t: _Tensor) -> int:
    n = 0
    for chunk in t.chunks():
        n += _write_all(f, chunk)
    if n != t.nbytes:
        raise OinfError(f"internal error: tensor payload is {n} bytes, planned {t.nbytes}", table="tensors",
                        entry=t.name)
    return n


def _write_all(f: BinaryIO, chunk: Any) -> int:
    view = memoryview(chunk).cast("B")
    f.write(view)
    return view.nbytes



def convert_oinf(src: str | os.PathLike, dst: str | os.PathLike, *, version: int) -> None:
    """Rewrite `src` as format `version`, copying every payload as stored (v2 with quant -> v1 is refused)."""
    with ModelLoader.open(src) as model:
        if version == 1:
            quantized = [name for name, info in model.tensor_infos.items() if info.quant is not None]
            if quantized:
                raise OinfError(f"cannot convert to version 1: tensor(s) {', '.join(map(repr, quantized))} have "
                                "quant parameters, which version 1 cannot hold", table="tensors",
                                entry=quantized[0], path=str(src))
        write_oinf(dst, **model.to_write_args(), version=version)
