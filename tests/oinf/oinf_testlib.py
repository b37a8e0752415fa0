"""Helpers for the .oinf tests: an independent file assembler and a model touching every feature.

`assemble` builds files with `struct.pack` straight from the spec (digest §1), in the order it is
given, without the writer; tests use it to check the reader independently and to craft bad files.
(The module has a distinctive name because tests/ directories are not packages.)
"""

from __future__ import annotations

import struct

import numpy as np

from openinfer.oinf import Bitset, QuantParams, ScalarValue, TensorSpec, UninitializedTensor

HEADER_FMT = "<5sIIIIIIQQQQQ"


def pad8(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 8)


def sstr(name: str | bytes) -> bytes:
    raw = name.encode() if isinstance(name, str) else name
    return pad8(struct.pack("<I", len(raw)) + raw)


def quant_blob(scheme, scale_mode, zp_mode, scale_axis, scales, zp_axis=0, zps=(), reserved=0) -> bytes:
    head = struct.pack("<IIIIQQQQ", scheme, scale_mode, zp_mode, reserved, scale_axis, len(scales), zp_axis, len(zps))
    return pad8(head + struct.pack(f"<{len(scales)}f", *scales) + struct.pack(f"<{len(zps)}i", *zps))


def assemble(*, version=2, sizevars=(), metadata=(), tensors=(), flags=0, reserved=0) -> bytes:
    """A file from raw parts, laid out as the spec says (entries kept in the given order).

    metadata: (key, value_type, payload) with payload the value bytes (value_nbytes = len).
    tensors: (name, dtype_code, dims, payload or None, quant payload or None).
    """
    sv = b"".join(sstr(n) + struct.pack("<Q", v) for n, v in sizevars)
    off_meta = 72 + len(sv)
    md_size = sum(len(sstr(k)) + 24 for k, _, _ in metadata)
    off_tensors = off_meta + md_size
    tail = 16 if version == 1 else 32
    t_size = sum(len(sstr(n)) + 12 + 8 * len(d) + tail for n, _, d, _, _ in tensors)
    off_data = off_tensors + t_size + (-(off_tensors + t_size) % 8)
    cursor = off_data
    blobs = b""
    md = b""
    for k, vt, payload in metadata:
        md += sstr(k) + struct.pack("<IIQQ", vt, 0, len(payload), cursor)
        blobs += pad8(payload)
        cursor += len(pad8(payload))
    entries = b""
    for n, code, dims, payload, quant in tensors:
        data_off = 0
        if payload is not None:
            data_off = cursor
            blobs += pad8(payload)
            cursor += len(pad8(payload))
        q_off = 0
        if quant is not None:
            q_off = cursor
            blobs += quant
            cursor += len(quant)
        fl = (1 if payload is not None else 0) | (2 if quant is not None else 0)
        entries += sstr(n) + struct.pack(f"<III{len(dims)}Q", code, len(dims), fl, *dims)
        entries += struct.pack("<QQ", len(payload or b""), data_off)
        if version == 2:
            entries += struct.pack("<QQ", len(quant or b""), q_off)
    header = struct.pack(HEADER_FMT, b"OINF\x00", version, flags, len(sizevars), len(metadata), len(tensors),
                         reserved, 72, off_meta, off_tensors, off_data, cursor)
    body = header + b"\x00" * 3 + sv + md + entries
    body += b"\x00" * (off_data - len(body))
    return body + blobs


def rich_model(rng_seed: int = 0):
    """(tensors, sizevars, metadata) using every dtype, quant modes, uninitialized tensors and
    every metadata kind. Quantized tensors are interleaved with plain ones (the original's bug)."""
    rng = np.random.default_rng(rng_seed)
    tensors = {
        "a.f32": rng.standard_normal((3, 5)).astype(np.float32),
        "b.f16": rng.standard_normal(7).astype(np.float16),
        "c.f64": rng.standard_normal((2, 2, 2)),
        "d.i8": rng.integers(-128, 128, 9, dtype=np.int8),
        "e.i16": rng.integers(-30000, 30000, (2, 3), dtype=np.int16),
        "f.i32": np.array(-7, np.int32),
        "g.i64": rng.integers(-2**62, 2**62, 4, dtype=np.int64),
        "h.u8": rng.integers(0, 256, 11, dtype=np.uint8),
        "i.u16": rng.integers(0, 65536, 3, dtype=np.uint16),
        "j.u32": np.array([0, 1, 2**32 - 1], np.uint32),
        "k.u64": np.array([2**64 - 1, 5], np.uint64),
        "l.bool": rng.integers(0, 2, (4, 3)).astype(bool),
        "m.bf16": TensorSpec(rng.standard_normal((2, 6)).astype(np.float32), "bf16"),
        "n.f8": TensorSpec(np.array([0.0, -0.0, 1.875, 57344.0, 1e-5, -3.5, np.inf, -np.inf, np.nan], np.float32),
                           "f8"),
        "o.i4": TensorSpec(rng.integers(-8, 8, (3, 3)), "i4", QuantParams.per_channel(0, [0.5, 0.25, 2.0])),
        "p.i2": TensorSpec(rng.integers(-2, 2, 7), "i2"),
        "q.i1": TensorSpec(rng.integers(-1, 1, 9), "i1"),
        "r.u4": TensorSpec(rng.integers(0, 16, (5,)), "u4", QuantParams.per_tensor(0.1, 8)),
        "s.u2": TensorSpec(rng.integers(0, 4, 6), "u2"),
        "t.u1": TensorSpec(rng.integers(0, 2, 13), "u1"),
        "u.t2": TensorSpec(rng.integers(-1, 2, (2, 5)), "t2",
                           QuantParams.per_channel(1, [1, 2, 3, 4, 5], [0, 1, -1, 2, -2])),
        "v.t1": TensorSpec(np.where(rng.integers(0, 2, 10) > 0, 1, -1), "t1"),
        "w.empty": np.zeros((0, 4), np.float32),
        "x.uninit": UninitializedTensor("f32", (2, 8)),
        "y.uninit_q": UninitializedTensor("i8", (4,), quant=QuantParams.per_tensor(0.5)),
    }
    sizevars = {"B": 4, "D": 16, "big": 2**64 - 1, "zero": 0}
    metadata = {
        "m.bool": True, "m.str": "hello-world_1.0", "m.u8": 200, "m.u16": 60000, "m.u32": 70000, "m.u64": 2**63,
        "m.i8": -5, "m.i16": -300, "m.i32": -70000, "m.i64": -2**40, "m.f32": 0.1,
        "m.f64": np.float64(1e-300), "m.f16": np.float16(2.5), "m.bf16": ScalarValue(3.14159, "bf16"),
        "m.f8": ScalarValue(-0.75, "f8"), "m.i4": ScalarValue(-8, "i4"), "m.i2": ScalarValue(1, "i2"),
        "m.i1": ScalarValue(-1, "i1"), "m.u4": ScalarValue(15, "u4"), "m.u2": ScalarValue(3, "u2"),
        "m.u1": ScalarValue(1, "u1"), "m.t2": ScalarValue(-1, "t2"), "m.t1": ScalarValue(1, "t1"),
        "m.bitset": Bitset.from_bools([1, 0, 1, 1, 0, 0, 0, 1, 1, 1]),
        "m.list_f": [1.5, 2.5, -1.0], "m.list_i": [[1, -2], [3, 4]],
        "m.nd_u4": ScalarValue([[1, 2, 3], [15, 0, 7]], "u4"),
        "m.nd_bool": np.array([[True, False], [False, True]]), "m.nd_bf16": ScalarValue(np.array([0.5, 1e10]), "bf16"),
        "m.nd_scalar": np.array(2.5, np.float64), "m.nd_t1": ScalarValue([1, -1, -1], "t1"),
    }
    return tensors, sizevars, metadata
