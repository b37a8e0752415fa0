"""Node descriptions in the original's trace format (`describe_node`)."""

from __future__ import annotations

import pytest

import openinfer as oi
from openinfer.ir.describe import describe, node_uuid
from openinfer.ir.nodes import walk


@pytest.mark.parametrize("source, text", [
    ("assign t0: f32[B];", "assign t0"),
    ("op add(x, a) >> t0;", "op add(x,a) >> t0"),
    ("op matmul(x, W[l, 0], acc=[f32, f32]) >> y;", "op matmul(x,W[l,0]) >> y"),
    ("op noargs() >> y;", "op noargs() >> y"),
    ("cache.read A[0..3] >> w;", "cache.read A[0..3] >> w"),
    ("cache.read A >> w;", "cache.read A >> w"),
    ("cache.read A[] >> w;", "cache.read A[] >> w"),
    ("cache.read table[1, .., 2.., ..3, 4..5] >> out;", "cache.read table[1,,2..,..3,4..5] >> out"),
    ("cache.read A[0..-3] >> W[l];", "cache.read A[0..-3] >> W[l]"),
    ("cache.write q >> K[t];", "cache.write q >> K[t]"),
    ("cache.increment 5 step;", "cache.increment 5 step"),
    ("cache.increment 1 step;", "cache.increment step"),
    ("cache.increment step;", "cache.increment step"),
    ("cache.decrement 2 step;", "cache.decrement 2 step"),
    ("cache.decrement step;", "cache.decrement step"),
    ("cache.reset K[l, ..];", "cache.reset K[l,]"),
    ("cache.reset K;", "cache.reset K"),
    ("branch c ok bad;", "branch c ok bad"),
    ("branch helper;", "branch helper"),
    ("barrier;", "barrier"),
    ("dep after(relu) before(cache.write);", "dep after(relu) before(cache.write)"),
    ("loop l (i in 0..4) { return; }", "loop l (i in 0..4)"),
    ("loop layers (l in 0..num_layers) { }", "loop layers (l in 0..num_layers)"),
    ("yield a, b;", "yield a, b"),
    ("await x;", "await x"),
    ("transfer t0 >> W[l];", "transfer t0 >> W[l]"),
    ("return;", "return"),
])
def test_describe(source, text):
    node = oi.graph(f"block entry {{ {source} }}").blocks["entry"].nodes[0]
    assert describe(node) == text


def test_uuid_is_derived_from_index_and_description():
    g = oi.graph("block entry { op add(x, a) >> t0; return; }")
    for node in walk(g.blocks["entry"].nodes):
        assert node.uuid == node_uuid(node.index, describe(node))
    assert node_uuid(0, "return") != node_uuid(1, "return")
