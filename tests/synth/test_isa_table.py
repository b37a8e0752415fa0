"""The ISA table (openinfer/targets/isa.py) is the one statement of the CPU facts: the descriptor
schema, the HAL's header and its feature names, the bundled descriptors and the target registry
agree with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from openinfer.errors import DeviceError
from openinfer.targets import devices, isa
from openinfer.targets.base import target_for

REPO = Path(__file__).resolve().parents[2]


def test_schema_enum_is_the_tables_features():
    schema = json.loads((REPO / "devices" / "schema.json").read_text())
    names = schema["properties"]["isa"]["properties"]["features"]["items"]["enum"]
    assert names == isa.feature_names()
    assert set(schema["properties"]["isa"]["properties"]["vector_bits"]["enum"]) == {
        f.vector_bits for f in isa.FAMILIES}


def test_hal_header_defines_a_distinct_bit_per_feature():
    bits = devices.hal_cpu_bits()
    assert set(bits) == {f.hal_bit for f in isa.FEATURES}
    assert len(set(bits.values())) == len(bits)


def test_hal_feature_table_is_the_isa_table():
    """The HAL's OI_CPU_FEATURE_TABLE (what create() detects, what OI_HOST_ISA hides, how
    oi_cpu_require names what is missing) has the ISA table's rows, in its order, and its
    OI_CPU_FAMILIES are the table's families."""
    text = (REPO / "hal" / "include" / "oi_hal.h").read_text()
    rows = re.findall(r"X\((OI_CPU_\w+),\s*\"([\w.]+)\",\s*\"(\w+)\",", text)
    assert rows == [(f.hal_bit, f.name, f.family) for f in isa.FEATURES]
    families = re.search(r"#define OI_CPU_FAMILIES\(X\) (.*)", text).group(1)
    assert re.findall(r'X\("([\w-]+)"\)', families) == [f.name for f in isa.FAMILIES]


def test_families_and_their_descriptors():
    assert [f.name for f in isa.FAMILIES][0] == "generic" and isa.FAMILY["generic"].architecture == isa.ANY
    for family in isa.FAMILIES:
        dev = devices.load(family.descriptor)
        assert dev.isa == family.name
        assert family.requires <= dev.features
        assert target_for(dev).label == f"c/{family.name}"
        for feature in family.requires:
            assert feature in isa.FEATURE, feature
    for feature in isa.FEATURES:
        assert feature.family in isa.FAMILY


def test_vector_bits_caps_the_family():
    doc = json.loads((REPO / "devices" / "x86_64-avx512.json").read_text())
    assert devices.Device(doc).isa == "avx512"
    doc["isa"]["vector_bits"] = 256
    assert devices.Device(doc).isa == "avx2"          # 256-bit kernels on an AVX-512 CPU
    del doc["isa"]["vector_bits"]
    devices.validate(doc)                              # optional: no cap
    assert devices.Device(doc).isa == "avx512"


def test_host_caps_follow_the_family_order():
    assert isa.hidden_by_cap(isa.FAMILIES[-1].name) == frozenset()
    assert isa.hidden_by_cap("avx2") == {f.name for f in isa.FEATURES if f.family == "avx512"}
    assert isa.hidden_by_cap("generic") == {f.name for f in isa.FEATURES if f.family != "generic"}
    assert isa.hidden_by_cap("neon") == {"asimddp", "fphp", "asimdhp"}      # of its architecture only


def test_probed_descriptor_is_valid_and_names_its_family(monkeypatch):
    monkeypatch.setenv("OI_HOST_ISA", "generic")
    doc = devices.probe_cpu()
    devices.validate(doc)
    assert devices.Device(doc).isa == "generic"
    assert doc["isa"]["vector_bits"] == isa.FAMILY["generic"].vector_bits


def test_unknown_host_cap_is_refused(monkeypatch):
    monkeypatch.setenv("OI_HOST_ISA", "sse9")
    with pytest.raises(DeviceError, match="expected one of avx512, avx2, generic"):
        devices.host_features()
