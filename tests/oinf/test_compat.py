"""The original tools' files: decoding matches MANIFEST.json, re-encoding gives the same bytes."""

from __future__ import annotations

import filecmp
import hashlib
import math

import numpy as np
import pytest
from conftest import COMPAT_DIR, SHARED_COMPAT_DIR

from openinfer.oinf import ModelLoader, TensorSpec, convert_oinf, encode_oinf

FILES = sorted(p.relative_to(COMPAT_DIR).as_posix() for p in COMPAT_DIR.glob("v*/*.oinf"))


def test_every_file_is_in_the_manifest(manifest):
    assert FILES == sorted(manifest["files"])
    assert len(FILES) == 19


@pytest.mark.skipif(not SHARED_COMPAT_DIR.exists(), reason="shared/compat/oinf is not on this machine")
def test_copy_equals_shared():
    for rel in [*FILES, "MANIFEST.json"]:
        assert filecmp.cmp(COMPAT_DIR / rel, SHARED_COMPAT_DIR / rel, shallow=False), rel


def _expected_value(v):
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, v) if isinstance(v, str) else v


@pytest.mark.parametrize("rel", FILES)
def test_decodes_as_manifest_says(rel, manifest):
    want = manifest["files"][rel]
    data = (COMPAT_DIR / rel).read_bytes()
    assert len(data) == want["file_size"]
    assert hashlib.sha256(data).hexdigest() == want["sha256"]
    with ModelLoader.open(COMPAT_DIR / rel) as model:
        h = model.header
        assert model.version == want["version"]
        assert h.file_size == want["file_size"]
        for field, value in want["header"].items():
            assert getattr(h, field) == value, field
        assert model.sizevars == want["sizevars"]
        assert model.metadata == want["metadata"]
        assert model.tensor_names == list(want["tensors"])
        for name in want["sizevars"]:
            assert model.size_of(name) == want["sizevars"][name]
        for name, t in want["tensors"].items():
            info = model.info(name)
            assert info.dtype.name == t["dtype"]
            assert info.dtype_code == t["dtype_code"]
            assert list(info.shape) == t["shape"]
            assert info.numel == t["numel"]
            assert info.has_data == t["has_data"]
            assert info.data_nbytes == t["data_nbytes"]
            assert info.data_offset == t["data_offset"]
            assert (info.quant is not None) == t.get("has_quant", False)
            payload = data[info.data_offset:info.data_offset + info.data_nbytes]
            assert hashlib.sha256(payload).hexdigest() == t["sha256"]
            assert model.tensor_bytes(name).tobytes() == payload
            values = model.tensor(name)
            assert values.shape == tuple(t["shape"])
            if "values" in t:
                expected = np.array([_expected_value(v) for v in t["values"]], dtype=np.float64)
                np.testing.assert_array_equal(values.reshape(-1).astype(np.float64), expected)


@pytest.mark.parametrize("rel", FILES)
def test_reencode_same_version_is_byte_identical(rel):
    data = (COMPAT_DIR / rel).read_bytes()
    with ModelLoader.open(COMPAT_DIR / rel) as model:
        assert encode_oinf(**model.to_write_args(), version=model.version) == data
        # and from the decoded values (not the stored bytes): the writer's own conversions agree
        tensors = {n: TensorSpec(np.array(model.tensor(n)), model.info(n).dtype) for n in model.tensor_names}
        assert encode_oinf(tensors, model.sizevars, model.metadata, version=model.version) == data


@pytest.mark.parametrize("rel", FILES)
def test_version_round_trips_are_byte_identical(rel, tmp_path):
    src = COMPAT_DIR / rel
    version = int(rel[1])
    other = 3 - version
    convert_oinf(src, tmp_path / "other.oinf", version=other)
    convert_oinf(tmp_path / "other.oinf", tmp_path / "back.oinf", version=version)
    assert (tmp_path / "back.oinf").read_bytes() == src.read_bytes()
    with ModelLoader.open(src) as a, ModelLoader.open(tmp_path / "other.oinf") as b:
        assert b.version == other
        # a v2 file is 16 bytes per tensor larger than its v1 twin; the payloads are identical
        assert (b.file_size - a.file_size) == (other - version) * 16 * len(a.tensor_names)
        for name in a.tensor_names:
            assert a.tensor_bytes(name).tobytes() == b.tensor_bytes(name).tobytes()


def test_v1_and_v2_twins_hold_the_same_tensors():
    for rel in FILES:
        if rel.startswith("v1/") and (COMPAT_DIR / "v2" / rel[3:]).exists():
            with ModelLoader.open(COMPAT_DIR / rel) as a, ModelLoader.open(COMPAT_DIR / "v2" / rel[3:]) as b:
                assert a.sizevars == b.sizevars and a.tensor_names == b.tensor_names
                for name in a.tensor_names:
                    np.testing.assert_array_equal(a.tensor(name), b.tensor(name))
