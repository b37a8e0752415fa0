"""Row norms and element-wise calls folded into the GEMVs that read them, on the Vulkan device: the
graphs of tests/synth/test_norm_prologues.py (norms that fold into one, three and a two-row GEMV
and into a dequantizing GEMV with an epilogue, and those that must stay apart) and
tests/synth/test_elementwise_prologues.py (an in-place product into a GEMV with an epilogue, a
difference into i8 and i4 dequantizing GEMVs, and those that stay) against the reference, with
no validation message; and the decoder (f32 and 4-bit weights), every norm and SwiGLU's product
folded, token by token."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from example_modules import load_example

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.sim import Simulator
from openinfer.testing import assert_matches_reference

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth import test_elementwise_prologues as elementwise  # noqa: E402
from synth.test_norm_prologues import GRAPH, OUTPUTS, inputs, model  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def test_norm_prologues_match_the_reference(tmp_path):
    feeds = inputs()
    feeds["x"][0, 3] = 1e19             # x * x overflows f32: the row's scale is inf, the norm 0 or NaN
    sim = assert_matches_reference(oi.ModelLoader.open(model(tmp_path / "m.oinf")), oi.graph(GRAPH), arch=VK_ARCH,
                                   feeds=[feeds], outputs=OUTPUTS)
    prog = sim.plan.program
    assert sum(1 for s in prog.blocks[prog.entry] if getattr(s, "kernel", None) is not None
               and prog.kernels[s.kernel].prologue) == 5
    assert sim.validation_messages() == 0


def test_elementwise_prologues_match_the_reference(tmp_path):
    feeds = elementwise.inputs()
    m = oi.ModelLoader.open(elementwise.model(tmp_path / "m.oinf"))
    sim = assert_matches_reference(m, oi.graph(elementwise.GRAPH), arch=VK_ARCH, feeds=[feeds],
                                   outputs=elementwise.OUTPUTS)
    prog = sim.plan.program
    assert sum(1 for s in prog.blocks[prog.entry] if getattr(s, "kernel", None) is not None
               and prog.kernels[s.kernel].prologue) == 3
    assert sim.validation_messages() == 0


@pytest.mark.parametrize("weights", ["f32", "i4"])
def test_decoder_with_folded_norms_matches_the_reference(tmp_path, weights):
    decoder = load_example("decoder")
    graph, weights = decoder.write(decoder.with_weights(decoder.SIZES["test"], weights), tmp_path)
    m, g = oi.ModelLoader.open(weights), oi.load_graph(graph)
    sim = Simulator(m, g, arch=VK_ARCH, outputs={"next", "logits"})
    assert not any(k.op in ("rms_norm", "mul") for k in sim.plan.program.kernels)
    ref, ex = oi.Reference(m, g).make_executor(), sim.make_executor()
    for step in range(5):
        for e in (ref, ex):
            e.insert(token=np.array([step * 7 % 50], np.int32))
            e.run_step()
        row = compare("logits", sim.vars["logits"].dtype, ref.fetch("logits"), ex.fetch("logits"))
        assert row.ok, table([row])
        assert ex.fetch("next") == ref.fetch("next"), step
    assert sim.validation_messages() == 0
