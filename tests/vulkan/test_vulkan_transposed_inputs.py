"""sdpa reading its keys and values through a transpose on the Vulkan device: the graph of
tests/synth/test_transposed_inputs.py (grouped heads, a mask; transposes that fold and those that
stay) against the reference, with no validation message."""

from __future__ import annotations

import sys
from pathlib import Path

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.sim import Simulator

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth.test_transposed_inputs import GRAPH, OUTPUTS, empty_model, inputs  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def test_transposed_inputs_match_the_reference(tmp_path):
    m = oi.ModelLoader.open(empty_model(tmp_path))
    graph = oi.graph(GRAPH)
    ref = oi.Reference(m, graph).make_executor()
    sim = Simulator(m, graph, arch=VK_ARCH, outputs=OUTPUTS)
    assert sum(1 for k in sim.plan.program.kernels if k.input_perms) == 1
    ex = sim.make_executor()
    feeds = inputs()
    for e in (ref, ex):
        e.insert(**feeds)
        e.run_step()
    rows = [compare(n, sim.vars[n].dtype, ref.fetch(n), ex.fetch(n)) for n in sorted(OUTPUTS)]
    assert all(r.ok for r in rows), table(rows)
    assert sim.validation_messages() == 0
