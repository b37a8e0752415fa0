"""tests/synth/test_dsl_conveniences.py's graph (bool casts, broadcasting comparisons, arange,
size-variable slice bounds, dynamic_slice at clamped run-time starts) on Vulkan, against the same
NumPy expectations, with the validation layer on."""

from __future__ import annotations

from openinfer import graph
from openinfer.sim import Simulator

from .conftest import VK_ARCH


def test_dsl_conveniences_on_vulkan() -> None:
    from synth.test_c_conformance import empty_model
    from synth.test_dsl_conveniences import GRAPH, SIZES, check_steps

    sim = Simulator(empty_model(), graph(GRAPH), arch=VK_ARCH, sizevars=SIZES)
    check_steps(sim.make_executor())
    assert sim.validation_messages() == 0


def test_fused_comparison_and_bool_cast_chains_on_vulkan() -> None:
    from synth.test_dsl_conveniences import check_fused

    check_fused(VK_ARCH)
