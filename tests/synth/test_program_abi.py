"""One program ABI version: the generated NAME.h's NAME_ABI_VERSION (a literal number), NAME.json's
abi_version and the simulator's declarations all follow PROGRAM_ABI_VERSION; the header's memory
sizes are the manifest's."""

from __future__ import annotations

import json
import re

import pytest
from example_modules import EXAMPLES

import openinfer as oi
from openinfer import sim
from openinfer.synthesizer import Synthesizer
from openinfer.targets.base import PROGRAM_ABI_VERSION


@pytest.mark.parametrize("arch", ["x86_64-generic", "x86_64-avx2", "lavapipe"])
def test_header_manifest_and_simulator_agree(example_models, arch):
    model = oi.ModelLoader.open(example_models / "kv_cache_decode.oinf")
    plan = Synthesizer.from_arch(arch).synthesize(model, oi.load_graph(EXAMPLES / "kv_cache_decode.oig"))
    header = plan.files["kv_cache_decode.h"].decode()
    macro = re.search(r"^#define OI_KV_CACHE_DECODE_ABI_VERSION (\d+)$", header, re.M)
    assert macro and int(macro.group(1)) == PROGRAM_ABI_VERSION
    manifest = json.loads(plan.files["kv_cache_decode.json"])
    assert manifest["abi_version"] == PROGRAM_ABI_VERSION
    # the memory create_in takes, as the header's macros and the manifest (loaders read it) say it
    for region in ("context", "arena", "persistent", "weight"):
        size = re.search(rf"^#define OI_KV_CACHE_DECODE_{region.upper()}_BYTES (\d+)u$", header, re.M)
        assert size and int(size.group(1)) == manifest[f"{region}_bytes"], region
    # every program function the simulator declares is one the header declares, with the same
    # parameter count
    prefix = "oi_kv_cache_decode"
    declared = dict(re.findall(rf"\b({prefix}_\w+)\(([^)]*)\)", header))
    for name, params in re.findall(r"\{p\}(_\w+)\(([^)]*)\)", sim._CDEF):
        assert f"{prefix}{name}" in declared, name
        assert params.count(",") == declared[f"{prefix}{name}"].count(","), name
