"""The parse-speed workload (a generated 32-layer transformer decoder, ~2,800 nodes, ~49k tokens)
parses whole: every node and declaration. Its speed is measured by tools/bench/dsl_parse.py (the
target, parse + bind under 200 ms, is a benchmark's figure, not a test's assertion: a busy machine
would fail a wall-clock limit)."""

from __future__ import annotations

from dsl_decoder_graph import decoder_source

from openinfer.dsl import parse


def test_decoder_graph_parses_whole():
    graph = parse(decoder_source(n_layers=32, n_heads=8), "decoder.oig")
    assert graph.next_index == 2786 and len(graph.vars) == 309
