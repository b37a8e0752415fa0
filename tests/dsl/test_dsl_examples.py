"""The example workloads (examples/*.oig, digest §5): they parse, round-trip through JSON, match
their golden JSON, and name exactly the tensors their model file holds (so they can bind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dsl_golden import golden

import openinfer as oi
from openinfer.dtypes import lookup
from openinfer.ir.json import graph_from_json, graph_to_json
from openinfer.ir.nodes import AttrDTypeList, MemoryKind, Op, walk

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ["mlp_regression", "residual_mlp_stack", "linear_attention", "moe_routing", "streaming_pipeline",
         "kv_cache_decode", "online_weight_update", "quantized_linear", "stability_guard", "cache_window_slice",
         "accumulation_demo"]


def model_of(manifest: dict, name: str) -> dict:
    """The example's model: the v2 file when there is one, else v1 (quantized, online update)."""
    files = manifest["files"]
    return files.get(f"v2/{name}.oinf") or files[f"v1/{name}.oinf"]


def test_every_example_is_listed():
    assert sorted(p.stem for p in EXAMPLES.glob("*.oig")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_parses_and_round_trips(name):
    graph = oi.load_graph(EXAMPLES / f"{name}.oig")
    text = graph_to_json(graph)
    assert graph_from_json(text) == graph
    assert graph_to_json(graph_from_json(text)) == text
    assert "entry" in graph.blocks
    golden(f"examples/{name}.json", text + "\n")


@pytest.mark.parametrize("name", NAMES)
def test_example_names_match_its_model(name, manifest):
    """Every constant is a model tensor of the declared dtype and shape; every model tensor is used."""
    model = model_of(manifest, name)
    sizes, tensors = model["sizevars"], model["tensors"]
    graph = oi.load_graph(EXAMPLES / f"{name}.oig")
    used = set()
    for var in graph.vars.values():
        if var.kind is not MemoryKind.CONSTANT:
            continue
        if var.pattern is None:
            keys = {var.ref_name or var.name: ()}
        else:   # a prefix table over one index: one tensor per index value
            (index,) = var.table_indices
            bound = _loop_bound(graph, var.name)
            keys = {var.pattern.replace("{" + index + "}", str(i)): () for i in range(sizes[bound])}
        for key in keys:
            assert key in tensors, f"{name}: {var.name} needs model tensor {key!r}"
            assert tensors[key]["dtype"] == var.dtype.name
            shape = [int(d) if d.isdigit() else sizes[d] for d in var.dims]
            assert tensors[key]["shape"] == shape, f"{name}: {key} shape"
            used.add(key)
    assert used == set(tensors), f"{name}: model tensors not declared: {set(tensors) - used}"


def _loop_bound(graph, table: str) -> str:
    """The loop bound of the loop that indexes `table` (the examples loop over a size variable)."""
    for block in graph.blocks.values():
        for node in walk(block.nodes):
            if hasattr(node, "body") and any(isinstance(n, Op) and any(i.name == table for i in n.inputs)
                                             for n in walk(node.body)):
                return node.end
    raise AssertionError(f"no loop uses {table}")


def test_examples_use_the_documented_forms():
    text = {name: (EXAMPLES / f"{name}.oig").read_text() for name in NAMES}
    assert "acc=i32" in text["quantized_linear"]
    demo = oi.load_graph(EXAMPLES / "accumulation_demo.oig").blocks["entry"].nodes
    f32_pair = AttrDTypeList((lookup("f32"), lookup("f32")))
    assert [(n.op, n.attr("acc")) for n in demo if isinstance(n, Op)] == [("matmul", f32_pair), ("sum_axis", f32_pair)]
    assert "cache.read K[] >> k_hist" in text["kv_cache_decode"]
    assert "cache.read A[start..end] >> window" in text["cache_window_slice"]
    assert re.search(r"branch route expert0 expert1;", text["moe_routing"])
    assert "yield x;" in text["streaming_pipeline"] and "await x;" in text["streaming_pipeline"]
