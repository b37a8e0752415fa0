"""The two `.oinf` readers give the same verdict: `openinfer oinf verify` (the Python reader) and the
C loader (`oi_oinf_open_memory`, hal/src/oi_hal_core.c) accept and reject the same files.

The differential campaign lives in tools/fuzz_oinf.py (seeds, mutations, the C driver); here it
runs with a fixed seed and a small budget (plus a smaller one with the driver under ASan/UBSan),
and hand-made files pin each rule the C reader once lacked. `OI_SLOW=1` runs 100k mutants under
ASan/UBSan (docs/oinf.md records the counts of such a run).
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from oinf_testlib import assemble, pad8, quant_blob, sstr

from openinfer import OinfError
from openinfer.oinf import verify_file

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import fuzz_oinf  # noqa: E402

SLOW = os.environ.get("OI_SLOW") == "1"
F32 = np.arange(4, dtype=np.float32).tobytes()


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    return fuzz_oinf.build_driver(tmp_path_factory.mktemp("oinf_driver"), asan=False)


def verdicts(driver: Path, tmp_path: Path, image: bytes) -> tuple[str, str]:
    """(Python's, C's): 'A' accepted, 'R' rejected."""
    path = tmp_path / "f.oinf"
    path.write_bytes(image)
    try:
        verify_file(path)
        python = "A"
    except OinfError:
        python = "R"
    return python, fuzz_oinf.c_verdicts(driver, [image])


def _with_field(image: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(image)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


# Field offsets of entries assembled without sizevars (tables start at byte 72): a metadata entry
# is its key then type u32, flags u32, nbytes u64, offset u64; a v2 tensor entry is its name,
# dtype/ndim/flags u32, dims, data nbytes/offset, quant nbytes/offset (u64 each).
TWO_TENSORS = assemble(tensors=[("a", 10, (4,), F32, None), ("b", 10, (2,), F32[:8], None)])
A_DATA_OFFSET = 72 + len(sstr("a")) + 12 + 8 + 8
B_DATA_OFFSET = A_DATA_OFFSET + 8 + 16 + len(sstr("b")) + 12 + 8 + 8
A_DATA = struct.unpack_from("<Q", TWO_TENSORS, A_DATA_OFFSET)[0]
MD_AND_TENSOR = assemble(metadata=[("k", 3, struct.pack("<i", 5))], tensors=[("a", 10, (4,), F32, None)])
MD_FLAGS, MD_OFFSET = 72 + len(sstr("k")) + 4, 72 + len(sstr("k")) + 16
MD_TENSOR_DATA = struct.unpack_from("<Q", MD_AND_TENSOR, 72 + len(sstr("k")) + 24 + len(sstr("a")) + 12 + 8 + 8)[0]


# Files the C reader accepted on the branch's starting commit while the verifier rejected them
# (and, last, ones it rejected while the verifier accepted them): each is now rejected by both.
REJECTED_BY_BOTH = {
    "overlapping tensor data": _with_field(TWO_TENSORS, B_DATA_OFFSET, "<Q", A_DATA + 8),
    "overlapping metadata value and tensor data": _with_field(MD_AND_TENSOR, MD_OFFSET, "<Q", MD_TENSOR_DATA + 8),
    "invalid sizevar name": assemble(sizevars=[("bad name", 3)]),
    "duplicate sizevar": assemble(sizevars=[("n", 3), ("n", 4)]),
    "invalid metadata key": assemble(metadata=[("k/v", 3, struct.pack("<i", 5))]),
    "duplicate metadata key": assemble(metadata=[("k", 3, struct.pack("<i", 5)), ("k", 3, struct.pack("<i", 6))]),
    "metadata value flags": _with_field(MD_AND_TENSOR, MD_FLAGS, "<I", 1),
    "metadata i32 of 8 bytes": assemble(metadata=[("k", 3, struct.pack("<q", 5))]),
    "metadata string with a space": assemble(metadata=[("s", 14, sstr("a b"))]),
    "metadata bitset byte count": assemble(metadata=[("b", 13, struct.pack("<II", 9, 1) + b"\x01")]),
    "metadata bool byte 2": assemble(metadata=[("b", 12, b"\x02")]),
    "metadata t2 code 0b10": assemble(metadata=[("t", 24, b"\x02")]),
    "metadata ndarray bool byte 7": assemble(metadata=[("n", 15, pad8(struct.pack("<IIQ", 12, 1, 2) + b"\x01\x07"))]),
    "header flags": assemble(tensors=[("a", 10, (4,), F32, None)], flags=1),
    "header reserved": assemble(tensors=[("a", 10, (4,), F32, None)], reserved=7),
    "duplicate tensor": assemble(tensors=[("a", 10, (4,), F32, None), ("a", 10, (4,), F32, None)]),
    "bool tensor byte 2": assemble(tensors=[("b", 12, (3,), b"\x00\x02\x01", None)]),
    "t2 tensor code 0b10": assemble(tensors=[("t", 24, (3,), b"\x21", None)]),
    "quant reserved": assemble(tensors=[("w", 1, (2,), b"\x01\x02", quant_blob(1, 1, 0, 0, [0.5], reserved=1))]),
    "quant per-channel count": assemble(tensors=[("w", 1, (2,), b"\x01\x02", quant_blob(1, 2, 0, 0, [0.5]))]),
    "symmetric quant with zero points": assemble(tensors=[("w", 1, (2,), b"\x01\x02",
                                                           quant_blob(1, 1, 1, 0, [0.5], 0, [3]))]),
    # the C reader rejected these two; the verifier accepted them (shape rule now shared)
    "9-d uninitialized tensor": assemble(tensors=[("u", 10, (1,) * 9, None, None)]),
    "uninitialized tensor of 2^80 elements": assemble(tensors=[("u", 10, (2**40, 2**40), None, None)]),
    "ndarray of 2^64-1 x 0 elements": assemble(metadata=[("n", 15, struct.pack("<IIQQ", 10, 2, 2**64 - 1, 0))]),
}


# Valid files laid out unlike the writer's (names unsorted, blobs in reverse order): both accept,
# so the C reader's pairwise checks find no false duplicates or overlaps.
ACCEPTED_BY_BOTH = {
    "unsorted names": assemble(sizevars=[("z", 1), ("a", 2)], metadata=[("y", 3, b"\1\0\0\0"), ("b", 3, b"\2\0\0\0")],
                               tensors=[("t2", 10, (4,), F32, None), ("t1", 10, (4,), F32, None)]),
    "same name in two tables": assemble(sizevars=[("x", 1)], metadata=[("x", 3, b"\1\0\0\0")],
                                        tensors=[("x", 10, (4,), F32, None)]),
    "8-d tensor, 2^57 empty elements": assemble(tensors=[("u", 10, (2**57, 1, 1, 1, 1, 1, 1, 0), None, None),
                                                         ("e", 10, (2**57 - 1, 0), b"", None)]),
}


# b's 8 bytes first, then a's 16: swapped against the writer's order
ACCEPTED_BY_BOTH["blobs in reverse order"] = _with_field(_with_field(TWO_TENSORS, B_DATA_OFFSET, "<Q", A_DATA),
                                                         A_DATA_OFFSET, "<Q", A_DATA + 8)


@pytest.mark.parametrize("case", REJECTED_BY_BOTH)
def test_files_the_readers_disagreed_on_are_rejected_by_both(case, driver, tmp_path):
    assert verdicts(driver, tmp_path, REJECTED_BY_BOTH[case]) == ("R", "R")


@pytest.mark.parametrize("case", ACCEPTED_BY_BOTH)
def test_valid_files_in_any_layout_are_accepted_by_both(case, driver, tmp_path):
    assert verdicts(driver, tmp_path, ACCEPTED_BY_BOTH[case]) == ("A", "A")


def _check(counts: fuzz_oinf.Counts) -> None:
    print("\n" + counts.line())
    assert not counts.exceptions, counts.exceptions[:3]
    assert not counts.disagreements, [(len(i), py, c) for i, py, c in counts.disagreements[:10]]
    assert counts.accepted_by_both > 0 and counts.rejected_by_both > counts.accepted_by_both   # both kinds seen


def test_mutants_get_the_same_verdict_from_both_readers(tmp_path):
    """A fixed-seed campaign of 600 mutants (about 3 s)."""
    _check(fuzz_oinf.campaign(600, seed=16, work_dir=tmp_path))


def test_c_reader_is_clean_under_asan_and_ubsan_on_mutants(tmp_path):
    """The same comparison with the C driver built with -fsanitize=address,undefined (any report
    kills the driver and fails the campaign); 100k mutants with OI_SLOW=1."""
    _check(fuzz_oinf.campaign(100_000 if SLOW else 300, seed=17, work_dir=tmp_path, asan=True))
