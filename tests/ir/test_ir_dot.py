"""Graphviz DOT output: clusters, labels, control-flow, yield/await and data edges; deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest
from ir_golden import golden

import openinfer as oi
from openinfer.ir.dot import graph_to_dot
from openinfer.ir.json import graph_from_json, graph_to_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["moe_routing", "streaming_pipeline", "residual_mlp_stack", "kv_cache_decode"])
def test_dot_golden(name):
    dot = graph_to_dot(oi.load_graph(EXAMPLES / f"{name}.oig"), name)
    golden(f"{name}.dot", dot)


def test_dot_is_deterministic_and_independent_of_the_source_form():
    """Blocks are drawn entry first, then by name, whether the graph came from DSL or JSON."""
    g = oi.load_graph(EXAMPLES / "streaming_pipeline.oig")
    assert graph_to_dot(g) == graph_to_dot(oi.load_graph(EXAMPLES / "streaming_pipeline.oig"))
    assert graph_to_dot(graph_from_json(graph_to_json(g))) == graph_to_dot(g)


def test_dot_edges():
    g = oi.graph("""
        dynamic { x: f32[B]; c: bool; }
        volatile { y: f32[B]; }
        block entry {
            op relu(x) >> y;
            branch c yes no;
            loop l (i in 0..n) { op add(y, x) >> y; }
            yield y;
            await y;
            return;
            barrier;
        }
        block yes { }
        block worker { await y; op add(y, x) >> y; yield y; }
    """)
    dot = graph_to_dot(g, "t")
    assert dot.startswith('digraph "t" {') and dot.endswith("}\n")
    assert 'subgraph "cluster_entry"' in dot and 'label="block entry"' in dot
    assert 'n0 [label="[0] op relu(x) >> y", shape=box];' in dot
    assert 'n1 [label="[1] branch c yes no", shape=diamond];' in dot
    assert 'n1 -> "empty_yes" [label="then"' in dot                       # empty block placeholder
    assert 'n1 -> "missing_no" [label="else"' in dot and "block no (undefined)" in dot
    assert 'n2 -> n3 [label="body"];' in dot and 'n3 -> n2 [label="repeat"' in dot
    assert 'n4 -> n8 [label="y", style="dotted"' in dot                   # entry yield -> worker await
    assert 'n10 -> n5 [label="y", style="dotted"' in dot                  # worker yield -> entry await
    assert 'n0 -> n3 [label="y", style="dashed"' in dot                   # data: relu output read in the loop
    assert "n6 -> n7" not in dot                                          # nothing flows on after a return
