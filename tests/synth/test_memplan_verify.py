"""The memory plan's self-check (openinfer/synth/memplan.py `verify`, run by every `plan()`):
plans of real programs pass it, and each way a plan can be wrong is caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
from example_modules import EXAMPLES as EXAMPLE_DIR

import openinfer as oi
from openinfer.errors import SynthesisError
from openinfer.synth import memplan
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices

#: intermediates only the plan places, several live at once (b is computed from a, then both read)
CHAIN = ("dynamic { x: f32[5, 7]; }\n"
         "volatile { a: f32[5, 7]; b: f32[5, 7]; c: f32[5, 7]; y: f32[5, 7]; }\n"
         "block entry {\n  op exp(x) >> a;\n  op tanh(a) >> b;\n  op mul(a, b) >> c;\n  op sub(c, a) >> y;\n"
         "  return;\n}\n")
EXAMPLES = ("mlp_regression", "residual_mlp_stack", "kv_cache_decode", "streaming_pipeline", "cache_window_slice",
            "moe_routing")


@pytest.fixture(scope="module")
def programs(example_models):
    out = {}
    for name in EXAMPLES:
        model = oi.ModelLoader.open(example_models / f"{name}.oinf")
        graph = oi.load_graph(EXAMPLE_DIR / f"{name}.oig")
        out[name] = Synthesizer.from_arch("x86_64-generic").synthesize(model, graph).program
    # unfused, so that the intermediates are buffers of their own
    doc = devices.load("x86_64-generic").doc
    unfused = devices.Device({**doc, "preferences": {**doc["preferences"], "prefer_fusion": False}})
    out["chain"] = Synthesizer(unfused).synthesize(None, oi.graph(CHAIN), outputs={"y"}).program
    return out


@pytest.mark.parametrize("name", (*EXAMPLES, "chain"))
def test_plans_of_the_examples_pass(programs, name):
    prog = programs[name]
    memplan.verify(memplan.plan(prog), prog)


def _shared(plan):
    """Two planned buffers whose lifetimes intersect (the greedy placement keeps them apart)."""
    planned = sorted((p for p in plan.placements.values() if p.region == "arena" and p.start >= 0),
                     key=lambda p: p.buffer)
    for i, a in enumerate(planned):
        for b in planned[i + 1:]:
            if a.start <= b.end and b.start <= a.end:
                return a, b
    raise AssertionError("no two planned buffers live at once:\n" + plan.table())


def test_overlapping_live_buffers_are_caught(programs):
    prog = programs["chain"]
    plan = memplan.plan(prog)
    a, b = _shared(plan)
    bad = replace(plan, placements={**plan.placements, b.buffer: replace(b, offset=a.offset)})
    with pytest.raises(SynthesisError, match="overlap while both are live"):
        memplan.verify(bad, prog)


def test_an_access_outside_the_lifetime_is_caught(programs):
    prog = programs["chain"]
    plan = memplan.plan(prog)
    a, _ = _shared(plan)
    bad = replace(plan, placements={**plan.placements, a.buffer: replace(a, end=a.start)})
    with pytest.raises(SynthesisError, match="outside its lifetime"):
        memplan.verify(bad, prog)


def test_a_placement_past_the_region_or_missing_is_caught(programs):
    prog = programs["kv_cache_decode"]
    plan = memplan.plan(prog)
    name, p = next((k, v) for k, v in sorted(plan.placements.items()) if v.region == "persistent")
    with pytest.raises(SynthesisError, match="outside its persistent region"):
        memplan.verify(replace(plan, placements={**plan.placements, name: replace(p, offset=plan.persistent_bytes)}),
                       prog)
    with pytest.raises(SynthesisError, match="unaligned"):
        memplan.verify(replace(plan, placements={**plan.placements, name: replace(p, offset=p.offset + 4)}), prog)
    rest = {k: v for k, v in plan.placements.items() if k != name}
    with pytest.raises(SynthesisError, match="has no placement"):
        memplan.verify(replace(plan, placements=rest), prog)
