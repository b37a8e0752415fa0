"""sdpa reading its keys and values through a transpose on the Vulkan device: the graph of
tests/synth/test_transposed_inputs.py (grouped heads, a mask; transposes that fold and those that
stay) against the reference, with no validation message."""

from __future__ import annotations

import sys
from pathlib import Path

import openinfer as oi
from openinfer.testing import assert_matches_reference

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth.test_transposed_inputs import GRAPH, OUTPUTS, empty_model, inputs  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def test_transposed_inputs_match_the_reference(tmp_path):
    sim = assert_matches_reference(oi.ModelLoader.open(empty_model(tmp_path)), oi.graph(GRAPH), arch=VK_ARCH,
                                   feeds=[inputs()], outputs=OUTPUTS)
    assert sum(1 for k in sim.plan.program.kernels if k.input_perms) == 1
    assert sim.validation_messages() == 0
