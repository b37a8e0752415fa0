"""Cache reads as views on the Vulkan device: the graph of tests/synth/test_table_views.py (reads
that became bindings of the table's rows beside those that stay copies, a loop over the table's
leading index) against the reference over steps that change the table, with no validation
message; the transfers a step records drop by the reads made views; and GRAPH_W, where a
kernel stores a table row itself. (The decoder, whose attention
reads its caches this way, runs in test_vulkan_prologues.py and test_vulkan_examples.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import ExecutionError
from openinfer.testing import assert_matches_reference

TESTS = Path(__file__).resolve().parent.parent
for path in (TESTS, TESTS / "synth"):        # (the synth module imports its neighbours by name)
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from synth.test_c_conformance import empty_model  # noqa: E402
from synth.test_table_views import GRAPH, GRAPH_W, OUTPUTS, OUTPUTS_W  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402


def _feeds(steps: int) -> list[dict]:
    rng = np.random.default_rng(5)
    return [{"a": rng.standard_normal(4).astype(np.float32), "j": np.array(step % 2, np.int32)}
            for step in range(steps)]


def test_table_reads_as_views_match_the_reference():
    sim = assert_matches_reference(empty_model(), oi.graph(GRAPH), arch=VK_ARCH, feeds=_feeds(4), outputs=OUTPUTS)
    assert sim.validation_messages() == 0


def test_a_view_records_no_transfer():
    """r1 and r6 (which runs twice, in its loop) are views: a step records three transfers fewer
    than the same graph with every kc observable, where every read is a copy."""
    counts = []
    for outputs in (OUTPUTS, None):
        sim = oi.Simulator(empty_model(), oi.graph(GRAPH), arch=VK_ARCH,
                           outputs=set(outputs) if outputs is not None else None)
        ex = sim.make_executor()
        feed = _feeds(1)[0]
        ex.insert(**feed)
        ex.run_step()
        before = sim.vk_counters()
        ex.insert(**feed)
        ex.run_step()
        after = sim.vk_counters()
        counts.append(after["transfers"] - before["transfers"])
    viewed, copied = counts
    assert copied - viewed == 3, counts


def test_table_writes_in_kernels_match_the_reference():
    """GRAPH_W's three steps (rows 0, 1, 2 of each table) against the reference; a fourth step
    fails as the copy did, its row past the table's fixed size."""
    feeds = [{"a": np.arange(4, dtype=np.float32) * (step + 1) / 3} for step in range(4)]
    sim = assert_matches_reference(empty_model(), oi.graph(GRAPH_W), arch=VK_ARCH, feeds=feeds[:3],
                                   outputs=OUTPUTS_W)
    assert sim.validation_messages() == 0
    ex = sim.make_executor()
    for feed in feeds[:3]:
        ex.insert(**feed)
        ex.run_step()
    ex.insert(**feeds[3])
    with pytest.raises(ExecutionError, match=r"in `cache\.write x >> K\[n\]`: cache table K index exceeds fixed size"):
        ex.run_step()
