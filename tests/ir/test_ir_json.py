"""Graph JSON in the original's format: exact bytes, lossless round trips, and clear errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import openinfer as oi
from openinfer.dtypes import lookup
from openinfer.ir.json import format_f64, graph_from_json, graph_to_json
from openinfer.ir.nodes import (
    AttrDouble,
    AttrDTypeList,
    AttrFloat,
    AttrUInt,
    Branch,
    CacheSingle,
    CacheSlice,
    Loop,
    Op,
    VarRef,
    walk,
)

DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_hand_written_original_format_is_reproduced_byte_for_byte():
    """A JSON graph written by hand exactly as the original's serde_json would write it."""
    text = (DATA / "original_format.json").read_text()
    graph = graph_from_json(text, "original_format.json")
    assert graph_to_json(graph) == text
    entry = graph.blocks["entry"].nodes
    op = entry[1]
    assert isinstance(op, Op) and op.inputs == (VarRef("x"), VarRef("W", ("l", 0)))
    assert op.attr("f") == AttrFloat(float.fromhex("0x1.99999ap-4")) and op.attr("u") == AttrUInt(2**64 - 1)
    assert op.attr("acc") == AttrDTypeList((lookup("f32"), lookup("f32")))
    assert entry[2].src.indices == (CacheSingle("l"), CacheSlice(None, None), CacheSlice(0, -3))
    assert isinstance(entry[7], Branch) and entry[7].cond is None
    loop = entry[14]
    assert isinstance(loop, Loop) and (loop.var, loop.start, loop.end, loop.index) == ("l", 0, "num_layers", 16)
    v = graph.vars
    assert v["h"].init.value == 1.0 and v["q"].init.value == -1 and v["x"].init.value == float.fromhex("0x1.99999ap-4")
    assert v["K"].fixed == (("i", 4),) and v["W"].pattern == "w.{l}" and v["h"].ref_name == "model.h"


def test_minimal_graph_layout():
    """The layout of the original's own serialize example: sorted keys, `"Return"` as a string."""
    g = oi.graph("dynamic { x: f32[B]; } volatile { a: f32[B]; y: f32[B] @init(5.0); }\n"
                 "block entry { assign t0: f32[B]; op add(x, a) >> t0; op mul(y, t0) >> y; return; }")
    text = graph_to_json(g)
    value = json.loads(text)
    assert list(value) == ["blocks", "next_index", "vars"] and value["next_index"] == 4
    nodes = value["blocks"]["entry"]["nodes"]
    assert nodes[0]["kind"] == {"Assign": {"dims": ["B"], "dtype": "F32", "name": "t0"}}
    assert nodes[1]["kind"] == {"Op": {"attrs": {"items": []}, "inputs": ["x", "a"], "op": "add", "output": "t0"}}
    assert nodes[3]["kind"] == "Return"
    assert value["vars"]["y"] == {"auto_dim": [], "dims": ["B"], "dtype": "F32", "fixed": [], "init": {"F32": 5.0},
                                  "kind": "Volatile", "name": "y", "pattern": None, "ref_name": None,
                                  "table": False, "table_indices": []}
    assert '"init": {\n        "F32": 5.0\n      },' in text and '"items": []' in text
    assert not text.endswith("\n")


@pytest.mark.parametrize("value, text", [
    (1.0, "1.0"), (0.5, "0.5"), (-2.0, "-2.0"), (0.0, "0.0"), (-0.0, "-0.0"), (100.0, "100.0"),
    (1e-5, "0.00001"), (1e-6, "1e-6"), (2.5e-7, "2.5e-7"), (0.0001234, "0.0001234"),
    (1e15, "1000000000000000.0"), (1e16, "1e16"), (1.5e300, "1.5e300"), (123.456, "123.456"),
    (12345678901234567.0, "1.2345678901234568e16"), (5e-324, "5e-324"), (1.7976931348623157e308,
                                                                          "1.7976931348623157e308"),
    (float.fromhex("0x1.99999ap-4"), "0.10000000149011612"),
])
def test_floats_print_like_rust(value, text):
    assert format_f64(value) == text
    assert float(text) == value


def test_non_finite_attributes_survive_the_round_trip():
    g = oi.graph("block entry { op clamp(x, lo=-inf, hi=inf) >> y; }")
    text = graph_to_json(g)
    assert '"Double": "-inf"' in text and '"Double": "inf"' in text
    assert graph_from_json(text) == g


def test_null_attribute_reads_as_inf_and_nan_is_accepted():
    text = graph_to_json(oi.graph("block entry { op clamp(x, hi=inf, lo=1.0) >> y; }"))
    text = text.replace('"Double": "inf"', '"Double": null').replace('"Double": 1.0', '"Double": "NaN"')
    op = graph_from_json(text).blocks["entry"].nodes[0]
    assert op.attr("hi") == AttrDouble(math.inf) and math.isnan(op.attr("lo").value)


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.oig")))
def test_examples_round_trip(name):
    g = oi.load_graph(EXAMPLES / f"{name}.oig")
    text = graph_to_json(g)
    back = graph_from_json(text)
    assert back == g and graph_to_json(back) == text
    assert {name: [n.uuid for n in walk(b.nodes)] for name, b in back.blocks.items()} == \
        {name: [n.uuid for n in walk(b.nodes)] for name, b in g.blocks.items()}


def _doc(**changes) -> str:
    """The minimal valid document with some top-level or nested replacements applied."""
    value = json.loads(graph_to_json(oi.graph(
        "dynamic { x: f32[B] @init(1.5); } block entry { op relu(x, alpha=0.5) >> x; return; }")))
    for path, new in changes.items():
        *parents, last = path.split("__")
        target = value
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        if new is ...:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = new
    return json.dumps(value)


@pytest.mark.parametrize("changes, message", [
    ({"next_index": ...}, "at top level: missing field `next_index`"),
    ({"blocks": []}, "at blocks: expected an object, found an array"),
    ({"vars__x__dtype": "F31"}, "at vars.x.dtype: unknown dtype 'F31'"),
    ({"vars__x__dtype": "Str"}, "unknown dtype 'Str'"),
    ({"vars__x__kind": "Static"}, "unknown memory kind 'Static'"),
    ({"vars__x__name": "y"}, "variable name 'y' differs from its key 'x'"),
    ({"vars__x__init": {"I32": 1}}, "init variant 'I32' does not match the variable's dtype 'F32'"),
    ({"vars__x__init": {"F32": None}}, "cannot be recovered"),
    ({"vars__x__dims": ["B+1"]}, "malformed value 'B+1'"),
    ({"vars__x__fixed": [["i"]]}, "expected a [name, size] pair"),
    ({"blocks__entry__name": "main"}, "block name 'main' differs from its key 'entry'"),
    ({"blocks__entry__nodes__0__uuid": "not-a-uuid"}, "malformed UUID"),
    ({"blocks__entry__nodes__0__index": -1}, "out of range"),
    ({"blocks__entry__nodes__0__kind": "Nothing"}, "expected an object, found a string"),
    ({"blocks__entry__nodes__0__kind": {"Jump": {}}}, "unknown node kind 'Jump'"),
    ({"blocks__entry__nodes__0__kind": {"Op": {}, "Yield": {}}}, "exactly one variant key"),
    ({"blocks__entry__nodes__0__kind__Op__inputs": ["x[", "y"]}, "malformed variable reference 'x['"),
    ({"blocks__entry__nodes__0__kind__Op__attrs__items__0__value": {"Float": "x"}}, "expected a number"),
    ({"blocks__entry__nodes__0__kind__Op__attrs__items__0__value": {"Complex": 1}}, "unknown attribute value"),
    ({"blocks__entry__nodes__0__kind__Op__attrs__items__0__value": {"Int": 1.5}}, "expected an integer"),
    ({"blocks__entry__nodes__0__kind__Op__attrs__items__0__value": {"Bool": 1}}, "expected true or false"),
])
def test_schema_errors_name_the_field(changes, message):
    with pytest.raises(oi.DslError, match="invalid graph JSON") as info:
        graph_from_json(_doc(**changes), "g.json")
    assert message in str(info.value) and str(info.value).startswith("syntax error: g.json: ")


def test_json_syntax_error_is_located():
    with pytest.raises(oi.DslError) as info:
        graph_from_json('{\n  "blocks": {,\n}', "g.json")
    assert str(info.value).startswith("g.json:2:14: syntax error: invalid JSON")
    with pytest.raises(oi.DslError, match="NaN is not valid JSON"):
        graph_from_json('{"blocks": {}, "vars": {}, "next_index": NaN}')


def test_missing_optional_var_fields_default_like_serde():
    text = json.dumps({"blocks": {}, "next_index": 0, "vars": {"x": {"name": "x", "dtype": "I8", "dims": [],
                                                                      "kind": "Dynamic"}}})
    v = graph_from_json(text).vars["x"]
    assert (v.init, v.ref_name, v.pattern, v.table_indices, v.table, v.auto_dim, v.fixed) == \
        (None, None, None, (), False, (), ())


def test_cache_slice_in_deep_loops_is_bounded():
    node = {"index": 0, "uuid": "0f6c2a58-3d1e-4b7a-9c55-2e8d41f0a6b3", "kind": "Return"}
    for _ in range(70):
        node = {"index": 0, "uuid": node["uuid"], "kind": {"Loop": {"name": "l", "index": "i", "start": "0",
                                                                    "end": "1", "body": [node]}}}
    text = json.dumps({"blocks": {"e": {"name": "e", "nodes": [node]}}, "next_index": 1, "vars": {}})
    with pytest.raises(oi.DslError, match="nested more than 64 deep"):
        graph_from_json(text)
