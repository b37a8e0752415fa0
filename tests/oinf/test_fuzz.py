"""Hostile files: mutate valid ones and check that only OinfError (or success) ever comes out.

Each example takes a valid file (the original tools' files and ones using every feature), applies
one to four mutations (byte flips, u32/u64 fields overwritten with extreme values, truncation,
extension, a header file_size made consistent again) and then opens it, reads every tensor in both
representations, decodes the metadata, renders `inspect --json` and the verifier report, and
re-encodes it. Any exception but OinfError, and any NumPy warning, fails the test. A file that opens
must also survive a write/read round trip with the same contents.

CI runs 300 examples; `OI_FUZZ_EXAMPLES=200000 python3 -m pytest tests/oinf/test_fuzz.py -s` runs a
long campaign and prints how many inputs it tried.
"""

from __future__ import annotations

import os
import struct
import tempfile
import warnings
from pathlib import Path

import numpy as np
from conftest import COMPAT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oinf_testlib import assemble, quant_blob, rich_model, sstr

from openinfer import OinfError
from openinfer.oinf import ModelLoader, encode_oinf, verify_report
from openinfer.oinf.summary import summary_json

EXAMPLES = int(os.environ.get("OI_FUZZ_EXAMPLES", "300"))
STATS = {"tried": 0, "opened": 0, "rejected": 0}


def _seeds() -> list[bytes]:
    seeds = [p.read_bytes() for p in sorted(COMPAT_DIR.glob("v*/*.oinf"))]
    tensors, sizevars, metadata = rich_model()
    seeds.append(encode_oinf(tensors, sizevars, metadata))
    plain = {k: v for k, v in tensors.items() if getattr(v, "quant", None) is None}
    seeds.append(encode_oinf(plain, sizevars, metadata, version=1))
    ndarray_i4 = struct.pack("<IIQ", 18, 1, 3) + b"\x21\x03" + b"\0" * 6
    seeds.append(assemble(metadata=[("s", 14, sstr("abc")), ("n", 15, ndarray_i4)],
                          tensors=[("a", 1, (2,), b"\x01\x02", quant_blob(2, 2, 2, 0, [1, 2], 0, [3, 4])),
                                   ("b", 12, (2, 2), b"\x01\x00\x00\x01", None)]))
    return seeds


SEEDS = _seeds()


def _fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every header and table field of a valid file: where mutations hurt most."""
    out = [(5, 4), (9, 4), (13, 4), (17, 4), (21, 4), (25, 4)] + [(29 + 8 * i, 8) for i in range(5)]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "seed.oinf"
        path.write_bytes(data)
        with ModelLoader.open(path) as m:
            for info in m.metadata_infos.values():
                at = info.entry_offset + len(sstr(info.key))
                out += [(info.entry_offset, 4), (at, 4), (at + 4, 4), (at + 8, 8), (at + 16, 8),
                        (info.value_offset, 4), (info.value_offset + 4, 4), (info.value_offset + 8, 8)]
            for info in m.tensor_infos.values():
                at = info.entry_offset + len(sstr(info.name))
                out += [(info.entry_offset, 4), (at, 4), (at + 4, 4), (at + 8, 4)]
                out += [(at + 12 + 8 * i, 8) for i in range(info.ndim + (4 if m.version == 2 else 2))]
                if info.quant is not None:
                    out += [(info.quant_offset + 4 * i, 4) for i in range(4)]
                    out += [(info.quant_offset + 16 + 8 * i, 8) for i in range(4)]
    return out


FIELDS = [_fields(s) for s in SEEDS]
U32 = st.sampled_from([0, 1, 2, 3, 7, 8, 12, 13, 14, 15, 16, 25, 26, 2**31 - 1, 2**31, 2**32 - 1]) | \
    st.integers(0, 2**32 - 1)
U64 = st.sampled_from([0, 1, 8, 48, 72, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 8, 2**64 - 1]) | \
    st.integers(0, 2**64 - 1)
MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 2**20), st.integers(1, 255)),
    st.tuples(st.just("field"), st.integers(0, 2**20), U32, U64),
    st.tuples(st.just("u32"), st.integers(0, 2**20), U32),
    st.tuples(st.just("u64"), st.integers(0, 2**20), U64),
    st.tuples(st.just("truncate"), st.integers(0, 2**20)),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("fix_size")),
)


def mutate(seed: int, mutations) -> bytes:
    b = bytearray(SEEDS[seed])
    for m in mutations:
        kind = m[0]
        if kind == "flip" and b:
            b[m[1] % len(b)] ^= m[2]
        elif kind == "field":
            at, width = FIELDS[seed][m[1] % len(FIELDS[seed])]
            if at + width <= len(b):
                struct.pack_into("<I" if width == 4 else "<Q", b, at, m[2] if width == 4 else m[3])
        elif kind in ("u32", "u64") and len(b) >= 8:
            at = m[1] % (len(b) - 7)
            struct.pack_into("<I" if kind == "u32" else "<Q", b, at, m[2])
        elif kind == "truncate":
            del b[m[1] % (len(b) + 1):]
        elif kind == "extend":
            b += m[1]
        elif kind == "fix_size" and len(b) >= 69:
            struct.pack_into("<Q", b, 61, len(b))   # past the size check, into the tables
    return bytes(b)


def exercise(path: Path) -> None:
    """Everything a user can do with a file; a valid one must also round-trip through the writer."""
    with ModelLoader.open(path) as m:
        for name in m.tensor_names:
            info = m.info(name)
            if info.has_data:
                m.tensor(name)
                m.tensor(name, raw=True)
        summary_json(m)
        verify_report(m)
        again = path.with_suffix(".again")
        encoded = encode_oinf(**m.to_write_args(), version=m.version)
        again.write_bytes(encoded)
        with ModelLoader.open(again) as m2:
            assert sorted(m2.tensor_names) == sorted(m.tensor_names) and m2.sizevars == m.sizevars
            assert sorted(m2.metadata) == sorted(m.metadata)
            for name in m.tensor_names:
                assert m2.info(name).has_data == m.info(name).has_data and m2.info(name).quant == m.info(name).quant
                if m.info(name).has_data:
                    assert m2.tensor_bytes(name).tobytes() == m.tensor_bytes(name).tobytes()
            assert encode_oinf(**m2.to_write_args(), version=m2.version) == encoded   # canonical form is stable


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, len(SEEDS) - 1), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_files_give_only_oinf_errors(seed, mutations):
    data = mutate(seed, mutations)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.oinf"
        path.write_bytes(data)
        STATS["tried"] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # NumPy overflow/invalid warnings are bugs too
            try:
                exercise(path)
                STATS["opened"] += 1
            except OinfError as exc:
                STATS["rejected"] += 1
                assert exc.table is None or exc.offset is not None or exc.entry is not None


def test_zz_report_fuzz_counts():
    """Runs after the fuzz test (file order): print the campaign's size (shown with -s)."""
    print(f"\nfuzz: {STATS['tried']} inputs tried, {STATS['opened']} opened and fully read, "
          f"{STATS['rejected']} rejected with OinfError")
    assert STATS["tried"] == 0 or STATS["opened"] + STATS["rejected"] == STATS["tried"]
    assert np.all(np.array([len(s) for s in SEEDS]) >= 72)
