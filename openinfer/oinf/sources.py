"""Tensors from other containers: NumPy `.npz` and `.safetensors`, for `openinfer oinf pack`.

`.safetensors` is parsed here rather than with the `safetensors` package: its NumPy loader has no
bf16 or f8 (NumPy has neither), while the format is just a u64 header length, a JSON header and
raw little-endian payloads. Parsing it directly keeps BF16 and F8_E5M2 tensors bit-exact (their
bytes are copied as stored: safetensors' BF16 and F8_E5M2 are exactly `.oinf` bf16 and f8) and
maps the file instead of reading it.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import numerics
from ..errors import OinfError
from .format import DEFAULT_VERSION, numel_of
from .values import TensorSpec, as_dtype
from .writer import write_oinf

#: safetensors dtype -> (NumPy dtype read as-is, or the `.oinf` dtype copied as stored bytes)
SAFETENSORS_DTYPES: dict[str, tuple[str, str | None]] = {
    "BOOL": ("u1", "bool"), "U8": ("u1", None), "I8": ("i1", None), "U16": ("<u2", None), "I16": ("<i2", None),
    "U32": ("<u4", None), "I32": ("<i4", None), "U64": ("<u8", None), "I64": ("<i8", None),
    "F16": ("<f2", None), "F32": ("<f4", None), "F64": ("<f8", None),
    "BF16": ("<u2", "bf16"), "F8_E5M2": ("u1", "f8"),
}
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024   # the limit the safetensors library itself enforces


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of an `.npz` archive by name (pickled object arrays are refused)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise OinfError("not an .npz archive (a single .npy array?)", path=str(path))
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise OinfError(f"cannot read .npz: {exc}", path=str(path)) from None


def load_safetensors(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, str]]:
    """(tensors, `__metadata__`) of a `.safetensors` file; tensors are NumPy views of the mapped
    file, or `TensorSpec`s holding the stored bytes for bool, bf16 and f8."""
    path = str(path)

    def fail(message: str) -> None:
        raise OinfError(f"bad .safetensors file: {message}", path=path)

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                fail(f"{size} bytes is too short for the 8-byte header length")
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > min(size - 8, MAX_SAFETENSORS_HEADER):
                fail(f"header length {header_len} runs past the end of the {size}-byte file")
            header_bytes = f.read(header_len)
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise OinfError(f"cannot open: {exc.strerror or exc}", path=path) from None
    try:
        header = json.loads(header_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"header is not JSON: {exc}")
    if not isinstance(header, dict):
        fail("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        fail("__metadata__ must map strings to strings")
    base = 8 + header_len
    tensors: dict[str, Any] = {}
    for name, entry in header.items():
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            fail(f"tensor {name!r} needs dtype, shape and data_offsets")
        kind, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if kind not in SAFETENSORS_DTYPES:
            fail(f"tensor {name!r} has dtype {kind!r}; supported: {', '.join(SAFETENSORS_DTYPES)}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            fail(f"tensor {name!r} has an invalid shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= size - base):
            fail(f"tensor {name!r} has data_offsets {offsets!r} outside the data section")
        storage, oinf_type = SAFETENSORS_DTYPES[kind]
        if offsets[1] - offsets[0] != numel_of(tuple(shape)) * np.dtype(storage).itemsize:
            fail(f"tensor {name!r}: {offsets[1] - offsets[0]} bytes do not hold {kind}{shape}")
        count = numel_of(tuple(shape))
        raw = np.frombuffer(mm, np.dtype(storage), count=count, offset=base + offsets[0]) if count else \
            np.zeros(0, np.dtype(storage))
        tensors[name] = (TensorSpec.from_storage(raw, oinf_type, shape) if oinf_type
                         else raw.reshape(shape))
    return tensors, meta


def load_source(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, str]]:
    """(tensors, string metadata) from an `.npz` or `.safetensors` file, chosen by suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        return load_npz(path), {}
    if suffix == ".safetensors":
        return load_safetensors(path)
    raise OinfError(f"unknown source format {suffix or '(no suffix)'!r}: expected .npz or .safetensors",
                    path=str(path))


def retype(value: Any, dtype: Any) -> TensorSpec:
    """`value` (an array or a stored-bytes TensorSpec from a loader) to be written as `dtype`."""
    if isinstance(value, TensorSpec) and value.storage:
        value = numerics.from_storage(np.asarray(value.data).reshape(-1).view(np.uint8),
                                      as_dtype(value.dtype), value.shape)
    return TensorSpec(value, as_dtype(dtype))


def pack_oinf(out: str | os.PathLike, source: str | os.PathLike, *, sizevars: dict[str, Any] | None = None,
              metadata: dict[str, Any] | None = None, dtypes: dict[str, Any] | None = None,
              version: int = DEFAULT_VERSION, source_metadata: bool = True) -> None:
    """Write the tensors of an `.npz`/`.safetensors` file as `.oinf`, with sizevars and metadata added.

    `dtypes` maps tensor names to the dtype to store them as (e.g. {"w": "bf16"}); the safetensors
    `__metadata__` strings are kept as str metadata unless `source_metadata` is False.
    """
    tensors, extra = load_source(source)
    for name, dtype in (dtypes or {}).items():
        if name not in tensors:
            raise OinfError(f"no tensor named {name!r} to retype (has: {', '.join(sorted(tensors))})", path=str(source))
        tensors[name] = retype(tensors[name], dtype)
    merged = {**(extra if source_metadata else {}), **(metadata or {})}
    write_oinf(out, tensors, sizevars or {}, merged, version=version)
