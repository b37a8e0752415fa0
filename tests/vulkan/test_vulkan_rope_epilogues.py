"""RoPE applied by the GEMVs that computed its input, on the Vulkan device: the graph of
tests/synth/test_rope_epilogues.py (ropes folded into f32, i8 and i4 GEMVs, one with a norm
prologue too, beside those that stay kernels) against the reference at three positions, with no
validation message. (The decoder, whose q and k projections store rotated rows this way, runs in
test_vulkan_prologues.py and test_vulkan_examples.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import openinfer as oi
from openinfer.testing import assert_matches_reference

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth.test_rope_epilogues import GRAPH, OUTPUTS, inputs, model  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def test_rope_epilogues_match_the_reference(tmp_path):
    m = oi.ModelLoader.open(model(tmp_path / "m.oinf"))
    sim = assert_matches_reference(m, oi.graph(GRAPH), arch=VK_ARCH, feeds=[inputs(s) for s in range(3)],
                                   outputs=OUTPUTS)
    prog = sim.plan.program
    assert sum(1 for s in prog.blocks[prog.entry] if getattr(s, "kernel", None) is not None
               and (e := prog.kernels[s.kernel].epilogue) is not None and e.op == "rope") == 4
    assert sim.validation_messages() == 0
