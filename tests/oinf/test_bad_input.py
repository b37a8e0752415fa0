"""Malformed files: each gives one OinfError naming the table, the entry and the byte offset."""

from __future__ import annotations

import os
import struct
import time
import tracemalloc

import numpy as np
import pytest
from oinf_testlib import assemble, quant_blob, sstr

from openinfer import OinfError
from openinfer.oinf import ModelLoader, QuantParams, TensorSpec, verify_file

F32x4 = struct.pack("<4f", 1, 2, 3, 4)


def base_file(version: int = 2) -> bytes:
    return assemble(
        version=version,
        sizevars=[("B", 4)],
        metadata=[("k", 10, struct.pack("<f", 0.5)), ("s", 14, sstr("abc"))],
        tensors=[("a", 10, (2, 2), F32x4, None),
                 ("q", 18, (4,), bytes([0x21, 0x43]), quant_blob(1, 1, 0, 0, [0.5]) if version == 2 else None)],
    )


def offsets(data: bytes, tmp_path) -> dict:
    """Absolute offsets of the fields of base_file's entries (computed from a valid open)."""
    path = tmp_path / "base.oinf"
    path.write_bytes(data)
    with ModelLoader.open(path) as m:
        out = {}
        for name, info in m.tensor_infos.items():
            start = info.entry_offset + len(sstr(name))
            nd = 8 * info.ndim
            out[name] = {"dtype": start, "ndim": start + 4, "flags": start + 8, "dims": start + 12,
                         "data_nbytes": start + 12 + nd, "data_offset": start + 20 + nd,
                         "quant_nbytes": start + 28 + nd, "quant_offset": start + 36 + nd,
                         "data": info.data_offset, "quant": info.quant_offset, "entry": info.entry_offset}
        for key, info in m.metadata_infos.items():
            start = info.entry_offset + len(sstr(key))
            out[key] = {"type": start, "flags": start + 4, "nbytes": start + 8, "offset": start + 16,
                        "value": info.value_offset, "entry": info.entry_offset}
        out["header"] = m.header
    return out


def patch(data: bytes, at: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, *values)
    return bytes(b)


def expect_error(tmp_path, data: bytes, table, entry, offset, match: str, *, read_all: bool = False) -> OinfError:
    path = tmp_path / "bad.oinf"
    path.write_bytes(data)
    with pytest.raises(OinfError, match=match) as info:
        with ModelLoader.open(path) as m:
            if read_all:
                for name in m.tensor_names:
                    m.tensor(name)
    exc = info.value
    assert (exc.table, exc.entry, exc.offset) == (table, entry, offset), str(exc)
    text = str(exc)
    assert str(path) in text and f"byte offset {offset}" in text
    if table:
        assert table in text
    if isinstance(entry, str):
        assert repr(entry) in text
    # the verifier reports the same error (and never anything else)
    with pytest.raises(OinfError, match=match):
        verify_file(path)
    return exc


@pytest.fixture
def base(tmp_path):
    data = base_file()
    return data, offsets(data, tmp_path)


def test_base_file_is_valid(tmp_path, base):
    data, _ = base
    (tmp_path / "ok.oinf").write_bytes(data)
    assert "q: i4[4]" in verify_file(tmp_path / "ok.oinf")


# -- truncated and oversized ---------------------------------------------------------------
@pytest.mark.parametrize("keep", [0, 3, 40, 68])
def test_truncated_inside_the_header(tmp_path, base, keep):
    match = "truncated" if keep < 69 else "file_size"
    expect_error(tmp_path, base[0][:keep], "header", None, keep, match)


@pytest.mark.parametrize("keep", [69, 71, 100, -1, -8])
def test_truncated_file_size_mismatch(tmp_path, base, keep):
    data = base[0][:keep]
    expect_error(tmp_path, data, "header", "file_size", 61, "truncated or extended")


def test_extended_file(tmp_path, base):
    expect_error(tmp_path, base[0] + b"\x00" * 8, "header", "file_size", 61, "truncated or extended")


def test_truncated_with_consistent_header(tmp_path, base):
    """Cut the data section and fix file_size: the tensor that no longer fits is named."""
    data, off = base
    cut = off["q"]["data"]
    data = patch(data[:cut], 61, "<Q", cut)
    expect_error(tmp_path, data, "tensors", "q", off["q"]["data_offset"], "runs past the end of the file")


@pytest.mark.parametrize("field, at", [("n_sizevars", 13), ("n_metadata", 17), ("n_tensors", 21)])
def test_huge_counts_do_not_allocate(tmp_path, base, field, at):
    data = patch(base[0], at, "<I", 2**32 - 1)
    tracemalloc.start()
    t0 = time.perf_counter()
    exc = expect_error(tmp_path, data, "header", field, at, "cannot fit")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 2 and peak < 10 * 2**20
    assert "4294967295" in str(exc)


def test_data_nbytes_larger_than_file(tmp_path, base):
    data, off = base
    at = off["a"]["data_nbytes"]
    expect_error(tmp_path, patch(data, at, "<Q", 2**64 - 1), "tensors", "a", at, "data_nbytes")


def test_dims_claiming_more_data_than_the_file(tmp_path, base):
    data, off = base
    at = off["a"]["dims"]
    expect_error(tmp_path, patch(data, at, "<Q", 2**40), "tensors", "a", at + 16, "needs 8796093022208")


def test_metadata_value_past_end(tmp_path, base):
    data, off = base
    at = off["k"]["nbytes"]
    expect_error(tmp_path, patch(data, at, "<Q", 2**63), "metadata", "k", at + 8, "runs past the end of the file")


def test_huge_ndim(tmp_path, base):
    data, off = base
    expect_error(tmp_path, patch(data, off["a"]["ndim"], "<I", 2**32 - 1), "tensors", "a", off["a"]["dims"],
                 "runs past the end of the tensors table")


def test_huge_quant_counts(tmp_path, base):
    data, off = base
    at = off["q"]["quant"]
    expect_error(tmp_path, patch(data, at + 24, "<Q", 2**64 - 1), "quant", "q", at + 24, "quant_nbytes")


# -- overlap, alignment, order ---------------------------------------------------------------
def test_overlapping_tensor_blobs(tmp_path, base):
    data, off = base
    data = patch(data, off["q"]["data_offset"], "<Q", off["a"]["data"] + 8)   # q's 2 bytes inside a's 16
    expect_error(tmp_path, data, "tensors", "q", off["a"]["data"] + 8, "overlaps the data of tensor 'a'")


def test_tensor_overlapping_metadata_value(tmp_path, base):
    data, off = base
    data = patch(data, off["a"]["data_offset"], "<Q", off["k"]["value"])
    exc = expect_error(tmp_path, data, "tensors", "a", off["k"]["value"], "overlaps")
    assert "metadata 'k'" in str(exc)


def test_quant_overlapping_data(tmp_path, base):
    data, off = base
    data = patch(data, off["a"]["data_offset"], "<Q", off["q"]["quant"] + 8)
    expect_error(tmp_path, data, "tensors", "a", off["q"]["quant"] + 8, "overlaps the quant payload of tensor 'q'")


def test_misaligned_data_offset(tmp_path, base):
    data, off = base
    at = off["a"]["data_offset"]
    expect_error(tmp_path, patch(data, at, "<Q", off["a"]["data"] + 4), "tensors", "a", at, "not 8-byte aligned")


def test_misaligned_metadata_offset(tmp_path, base):
    data, off = base
    at = off["k"]["offset"]
    expect_error(tmp_path, patch(data, at, "<Q", off["k"]["value"] + 1), "metadata", "k", at, "not 8-byte aligned")


def test_misaligned_section_offset(tmp_path, base):
    expect_error(tmp_path, patch(base[0], 45, "<Q", base[1]["header"].offset_tensors + 4), "header",
                 "offset_tensors", 45, "not 8-byte aligned")


def test_sections_out_of_order(tmp_path, base):
    h = base[1]["header"]
    expect_error(tmp_path, patch(base[0], 37, "<Q", h.offset_tensors + 8), "header", "offset_tensors", 45,
                 "before offset_metadata")


def test_section_overlapping_the_header(tmp_path, base):
    expect_error(tmp_path, patch(base[0], 29, "<Q", 64), "header", "offset_sizevars", 29, "before the 72-byte")


def test_blob_before_the_data_section(tmp_path, base):
    data, off = base
    at = off["a"]["data_offset"]
    expect_error(tmp_path, patch(data, at, "<Q", 72), "tensors", "a", at, "before the data section")


# -- magic, version, header fields ------------------------------------------------------------
def test_wrong_magic(tmp_path, base):
    expect_error(tmp_path, b"GGUF" + base[0][4:], "header", "magic", 0, "bad magic")


def test_text_file(tmp_path):
    expect_error(tmp_path, b"hello, this is not a model\n" * 4, "header", "magic", 0, "not an .oinf file")


@pytest.mark.parametrize("version", [0, 3, 2**32 - 1])
def test_wrong_version(tmp_path, base, version):
    expect_error(tmp_path, patch(base[0], 5, "<I", version), "header", "version", 5, "unsupported version")


def test_header_flags_and_reserved(tmp_path, base):
    expect_error(tmp_path, patch(base[0], 9, "<I", 1), "header", "flags", 9, "flags must be 0")
    expect_error(tmp_path, patch(base[0], 25, "<I", 7), "header", "reserved", 25, "reserved field must be 0")


# -- strings ------------------------------------------------------------------------------------
def test_bad_charset_in_name(tmp_path, base):
    data, off = base
    at = off["a"]["entry"]
    expect_error(tmp_path, patch(data, at + 4, "<1s", b" "), "tensors", 0, at, "invalid tensor name")


def test_non_ascii_name(tmp_path, base):
    expect_error(tmp_path, patch(base[0], 76, "<1s", b"\xe9"), "sizevars", 0, 72, "invalid sizevar name")


def test_empty_name(tmp_path):
    data = assemble(sizevars=[("B", 4)])
    expect_error(tmp_path, patch(data, 72, "<I", 0), "sizevars", 0, 72, "invalid sizevar name")


def test_string_length_past_end_of_table(tmp_path, base):
    data, off = base
    at = off["k"]["entry"]
    expect_error(tmp_path, patch(data, at, "<I", 2**32 - 1), "metadata", 0, at + 4,
                 "runs past the end of the metadata table")


def test_string_metadata_value_bad(tmp_path, base):
    data, off = base
    at = off["s"]["value"]
    expect_error(tmp_path, patch(data, at + 4, "<1s", b"!"), "metadata", "s", at, "invalid string value")
    expect_error(tmp_path, patch(data, at, "<I", 9), "metadata", "s", at + 4, "runs past")


def test_duplicate_names(tmp_path):
    data = assemble(tensors=[("a", 10, (1,), b"\x00" * 4, None), ("a", 10, (1,), b"\x00" * 4, None)])
    with pytest.raises(OinfError, match="duplicate tensor name 'a'") as info:
        (tmp_path / "d.oinf").write_bytes(data)
        ModelLoader.open(tmp_path / "d.oinf")
    assert info.value.table == "tensors" and info.value.entry == "a" and info.value.offset is not None


# -- dtypes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [0, 13, 14, 15, 26, 2**32 - 1])
def test_bad_tensor_dtype(tmp_path, base, code):
    data, off = base
    at = off["a"]["dtype"]
    expect_error(tmp_path, patch(data, at, "<I", code), "tensors", "a", at, "not a tensor type")


@pytest.mark.parametrize("code", [0, 26, 1000])
def test_bad_metadata_type(tmp_path, base, code):
    data, off = base
    at = off["k"]["type"]
    expect_error(tmp_path, patch(data, at, "<I", code), "metadata", "k", at, "value type")


def test_metadata_size_rules(tmp_path, base):
    data, off = base
    at = off["k"]["type"]
    # k holds 4 bytes: as f64 (8), as bool (1) or as ndarray (>= 8) the size is wrong
    expect_error(tmp_path, patch(data, at, "<I", 11), "metadata", "k", off["k"]["value"], "value_nbytes must be 8")
    expect_error(tmp_path, patch(data, at, "<I", 12), "metadata", "k", off["k"]["value"], "value_nbytes must be 1")
    expect_error(tmp_path, patch(data, at, "<I", 15), "metadata", "k", off["k"]["value"], "too small")


def test_bad_ndarray_and_bitset_metadata(tmp_path):
    nd = struct.pack("<IIQ", 14, 1, 2) + b"\x00" * 8
    data = assemble(metadata=[("n", 15, nd)])
    value = len(data) - 24
    expect_error(tmp_path, data, "metadata", "n", value, "element type 14 is not a tensor type")
    bits = struct.pack("<II", 10, 1) + b"\x00" * 8
    data = assemble(metadata=[("b", 13, bits)])
    expect_error(tmp_path, data, "metadata", "b", len(data) - 16 + 4, "byte_count 1 != ceil")


def test_metadata_flags(tmp_path, base):
    data, off = base
    at = off["k"]["flags"]
    expect_error(tmp_path, patch(data, at, "<I", 1), "metadata", "k", at, "flags must be 0")


def test_tensor_flags(tmp_path, base):
    data, off = base
    at = off["a"]["flags"]
    expect_error(tmp_path, patch(data, at, "<I", 5), "tensors", "a", at, "unknown bits")
    v1 = base_file(1)
    off1 = offsets(v1, tmp_path)
    expect_error(tmp_path, patch(v1, off1["a"]["flags"], "<I", 3), "tensors", "a", off1["a"]["flags"], "unknown bits")


def test_no_data_with_offsets(tmp_path, base):
    data, off = base
    data = patch(data, off["a"]["flags"], "<I", 0)
    expect_error(tmp_path, data, "tensors", "a", off["a"]["data_nbytes"], "without data must have")


def test_bad_stored_values(tmp_path):
    data = assemble(tensors=[("b", 12, (3,), bytes([0, 1, 2]), None)])
    value = len(data) - 8
    expect_error(tmp_path, data, "data", "b", value + 2, "must be 0 or 1", read_all=True)
    data = assemble(tensors=[("t", 24, (4,), bytes([0b00100001]), None)])
    expect_error(tmp_path, data, "data", "t", len(data) - 8, "t2 element 2", read_all=True)
    data = assemble(metadata=[("m", 21, bytes([0x1F]))])
    expect_error(tmp_path, data, "metadata", "m", len(data) - 8, "outside the type's 4-bit range")


# -- quant ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("blob, at, match", [
    (quant_blob(1, 1, 0, 0, [0.5], reserved=9), 12, "reserved field must be 0"),
    (quant_blob(3, 1, 0, 0, [0.5]), 0, "scheme 3 is invalid"),
    (quant_blob(1, 4, 0, 0, [0.5]), 0, "scale mode 4 is invalid"),
    (quant_blob(1, 1, 7, 0, [0.5]), 0, "zero-point mode 7 is invalid"),
    (quant_blob(1, 2, 0, 0, [0.5, 1]), 0, "per-channel scale count 2 != dim 0 size 4"),
    (quant_blob(1, 2, 0, 1, [1, 1, 1, 1]), 0, "axis 1 is out of range for a 1-d tensor"),
    (quant_blob(1, 1, 1, 0, [0.5], 0, [3]), 0, "symmetric quantization cannot have zero points"),
    (quant_blob(2, 1, 2, 0, [0.5], 0, [3]), 0, "per-channel zero point needs a per-channel scale"),
    (quant_blob(2, 1, 1, 0, [0.5, 0.5], 0, [3]), 0, "per-tensor scale needs axis 0 and count 1"),
])
def test_bad_quant_payload(tmp_path, blob, at, match):
    data = assemble(tensors=[("q", 18, (4,), bytes([0x21, 0x43]), blob)])
    expect_error(tmp_path, data, "quant", "q", len(data) - len(blob) + at, match)


def test_quant_nbytes_mismatch_and_small(tmp_path, base):
    data, off = base
    at = off["q"]["quant_nbytes"]
    expect_error(tmp_path, patch(data, at, "<Q", 40), "quant", "q", off["q"]["quant"], "smaller than its 48-byte")
    expect_error(tmp_path, patch(data[:-8], 61, "<Q", len(data) - 8)[:len(data) - 8], "tensors", "q",
                 off["q"]["quant_offset"], "runs past the end of the file")


def test_quant_flags_without_quant_fields(tmp_path, base):
    data, off = base
    data = patch(data, off["q"]["flags"], "<I", 1)
    expect_error(tmp_path, data, "tensors", "q", off["q"]["quant_nbytes"], "without quant must have")


def test_interleaved_quant_layout_is_accepted(tmp_path):
    """The original's *intended* layout (data_i, quant_i, data_i+1, ...) is valid; our reader reads it."""
    q1, q2 = quant_blob(1, 1, 0, 0, [0.5]), quant_blob(2, 2, 2, 0, [1, 2], 0, [3, 4])
    data = assemble(tensors=[("a", 1, (2,), b"\x01\x02", q1), ("b", 10, (1,), struct.pack("<f", 7), None),
                             ("c", 1, (2,), b"\x03\x04", q2)])
    (tmp_path / "i.oinf").write_bytes(data)
    with ModelLoader.open(tmp_path / "i.oinf") as m:
        np.testing.assert_array_equal(m.tensor("c"), [3, 4])
        assert m.info("c").quant.zero_points.tolist() == [3, 4] and m.tensor("b")[0] == 7


def test_unreadable_path(tmp_path):
    with pytest.raises(OinfError, match="cannot open"):
        ModelLoader.open(tmp_path / "missing.oinf")
    with pytest.raises(OinfError, match="not a regular file"):
        ModelLoader.open(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.oinf")          # opening it for reading would block forever
        with pytest.raises(OinfError, match="not a regular file"):
            ModelLoader.open(tmp_path / "fifo.oinf")


# -- values the writer must refuse rather than store something else ---------------------------
@pytest.mark.parametrize("kwargs,phrase", [
    ({"tensors": [np.ones(2)]}, "tensors must be a mapping of names to values (a dict), got list"),
    ({"sizevars": [("B", 2)]}, "sizevars must be a mapping"),
    ({"metadata": "eps=1"}, "metadata must be a mapping"),
    ({"tensors": {"m": np.ma.masked_array([1.0, 2.0], mask=[False, True])}}, "masked array with masked values"),
    ({"tensors": {"h": TensorSpec(np.array([1.0, 1e10]), "f16")}}, "10000000000.0 is beyond the f16 range"),
    ({"tensors": {"h": TensorSpec(np.array([-65520.0]), "f16")}}, "65520.0 is beyond the f16 range"),
    ({"tensors": {"h": TensorSpec(np.array([2 ** 40]), "f16")}}, "is beyond the f16 range"),
    ({"tensors": {"h": TensorSpec(np.array([1e39]), "f32")}}, "1e+39 is beyond the f32 range"),
    ({"tensors": {"q": TensorSpec(np.zeros(4, np.int8), "i4", QuantParams.per_tensor(float("nan")))}},
     "quant scales must be finite, got nan"),
    ({"tensors": {"q": TensorSpec(np.zeros((2, 2), np.int8), "i8", QuantParams.per_channel(0, [1.0, np.inf]))}},
     "quant scales must be finite, got inf"),
])
def test_writer_refuses_values_it_cannot_store_as_given(tmp_path, kwargs, phrase):
    from openinfer import write_oinf

    with pytest.raises(OinfError) as info:
        write_oinf(tmp_path / "w.oinf", **kwargs)
    assert phrase in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_writer_keeps_what_converts_faithfully(tmp_path):
    """The limits of the refusals: infinities and NaN stay, values that round to the largest
    finite f16 are kept, and a masked array without masked values is its data."""
    from openinfer import write_oinf

    x = np.array([np.inf, -np.inf, np.nan, 65519.0, -65504.0])
    write_oinf(tmp_path / "w.oinf", {"h": TensorSpec(x, "f16"),
                                      "m": np.ma.masked_array([1.0, 2.0], mask=[False, False])})
    with ModelLoader.open(tmp_path / "w.oinf") as m:
        np.testing.assert_array_equal(m.tensor("h"), x.astype(np.float16))
        assert m.tensor("h")[3] == 65504.0 and m.tensor("m").tolist() == [1.0, 2.0]
