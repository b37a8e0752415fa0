"""Matmul epilogues on the Vulkan device: the graph of tests/synth/test_epilogues.py (GEMV and
dequantizing GEMV epilogues, the per-element dequant kernel's, and the calls that must stay
apart) against the reference, with no validation message."""

from __future__ import annotations

import sys
from pathlib import Path

import openinfer as oi
from openinfer.testing import assert_matches_reference

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth.test_epilogues import GRAPH, OUTPUTS, inputs, model  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def test_epilogues_match_the_reference(tmp_path):
    sim = assert_matches_reference(oi.ModelLoader.open(model(tmp_path / "m.oinf")), oi.graph(GRAPH), arch=VK_ARCH,
                                   feeds=[inputs()], outputs=OUTPUTS)
    assert sum(1 for k in sim.plan.program.kernels if k.epilogue) == 5
    assert sim.validation_messages() == 0
