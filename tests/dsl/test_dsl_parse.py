"""The DSL grammar, construct by construct: golden graph JSON plus direct checks on the IR."""

from __future__ import annotations

import math

import pytest
from dsl_golden import golden

import openinfer as oi
from openinfer.dsl import parse
from openinfer.dtypes import lookup
from openinfer.ir.describe import describe
from openinfer.ir.json import graph_from_json, graph_to_json
from openinfer.ir.nodes import (
    Assign,
    AttrBool,
    AttrDimList,
    AttrDouble,
    AttrDType,
    AttrDTypeList,
    AttrInt,
    AttrIntList,
    AttrStr,
    AttrVar,
    Await,
    Barrier,
    Branch,
    CacheAccess,
    CacheDecrement,
    CacheIncrement,
    CacheRead,
    CacheReset,
    CacheSingle,
    CacheSlice,
    CacheWrite,
    Dep,
    Loop,
    MemoryKind,
    Op,
    Return,
    Transfer,
    VarRef,
    Yield,
    walk,
)

FULL = CacheSlice(None, None)

# One source per construct; each is parsed, written as graph JSON and compared with
# tests/dsl/golden/<name>.json (OI_UPDATE_GOLDEN=1 rewrites them).
CASES = {
    "sections": """
        dynamic { x: f32[B, D]; n: i32; }
        volatile { y: i32[4, B*D]; z: f64[]; }
        constant { w: f16[128, K*2, 3*D]; }
        persistent { step: u64; }
        block entry { return; }
    """,
    "init_values": """
        volatile {
            a: f32 @init(1.25);
            b: f32 @init(0.1);
            c: f64 @init(-2.5e-7);
            d: f16 @init(1.0);
            e: bf16 @init(-3.5);
            f: f8 @init(0.3);
            g: i32 @init(-3);
            h: u8 @init(255);
            i: i64 @init(-9223372036854775808);
            j: u64 @init(18446744073709551615);
            k: bool @init(true);
            l: bool @init(0);
            m: bitset @init(170);
            n: i4 @init(-8);
            o: u4 @init(15);
            p: i2 @init(-1);
            q: i1 @init(-1);
            r: u2 @init(3);
            s: u1 @init(1);
            t: t2 @init(-1);
            u: t1 @init(-1);
            v: t1 @init(1);
            w: f32 @init(-0.0);
        }
        block entry { return; }
    """,
    "attributes": """
        constant {
            w: f32[D, D] @ref("w.0") @pattern("gauss");
            r: f32[D] @ref(model_r);
            W(layer): f32[D, D] @pattern("res.mlp.w.{layer}");
            P(a, b): f32[D] @pattern("p.{a}.{b}");
        }
        persistent {
            state(i, j): f32[D] @table @auto_dim(i, j) @fixed(i=2, j=3);
            K(i): f32[D] @fixed(i=4) @table;
            M(r, c): f16[D, H] @auto_dim(r, c);
            cnt: i32 @init(0);
        }
        block entry { return; }
    """,
    "assign": """
        block entry {
            assign t0: f32[B, D];
            assign s: i32;
            assign e: bf16[];
            return;
        }
    """,
    "op_settings": """
        block entry {
            op relu(h, alpha=0.0, clamp_max=6.0, negative_slope=-0.01, clamp_min=-inf) >> h;
            op add(x, W[l], W[l, 0], b[0]) >> y;
            op fill(y, value=3.5) >> y;
            op layer_norm(x, eps=1e-5, scale=2.5E3, shift=1.5e+2) >> y;
            op clamp(x, min=-7, max=7) >> y;
            op f(x, flag=true, off=false, tag="relu", empty="", esc="a\\"b\\n") >> y;
            op sum_axis(x, axes=[1, -2, 3], none=[], keepdims=true) >> y;
            op matmul(x, w, acc=[f32, f32]) >> y;
            op matmul(x, w, acc=i32) >> y;
            op matmul(x, w, acc=[i16 i32]) >> y;
            op cast(x, to=f16) >> y;
            op f(x, limit=inf, cap=-inf, scale=alpha, dt=[u4, bitset]) >> y;
            op noargs() >> y;
            return;
        }
    """,
    "cache_ops": """
        block entry {
            cache.read A >> x;
            cache.read A[] >> x;
            cache.read A[i] >> x;
            cache.read A[0..5] >> x;
            cache.read A[2..] >> x;
            cache.read A[..3] >> x;
            cache.read A[0..-3] >> x;
            cache.read A[i, ..] >> x;
            cache.read table[1, .., 2.., ..3, 4..5] >> x;
            cache.read A[, i] >> x;
            cache.read A[i,] >> x;
            cache.read A[start..end] >> W[l];
            cache.write x >> A[t];
            cache.write W[l, 0] >> A[t, 2];
            cache.increment step;
            cache.increment 5 step;
            cache.decrement step;
            cache.decrement 2 step;
            cache.reset A;
            cache.reset K[l];
            cache.reset K[l, ..];
            return;
        }
    """,
    "control_flow": """
        block entry {
            branch route expert0 expert1;
            branch helper;
            barrier;
            dep after(relu) before(cache.write);
            dep after(h) before(y);
            dep after(loop) before(return);
            yield x, y;
            await x;
            yield a,;
            transfer t0 >> tmp;
            transfer W[l] >> w;
            return;
        }
        block expert0 { return; }
        block expert1 { }
        block helper { return; }
    """,
    "loops": """
        block entry {
            op fill(out, value=0.0) >> out;
            loop layers (l in 0..num_layers) {
                op matmul(y, W[l]) >> h;
                loop heads (h_idx in 1..N) {
                    op add(out, h) >> out;
                    loop inner (k in a..4) { return; }
                }
                op add(y, h) >> y;
            }
            return;
        }
    """,
    "lenient_commas": """
        dynamic { x: f32[B D]; y: f32[B, D,]; }
        constant { T(i j): f32[D] @pattern("t.{i}.{j}"); }
        persistent { A(i j): f32[D] @table @auto_dim(i j) @fixed(i=2 j=3,); }
        block entry {
            op add(x y alpha=1 beta=[1 2,]) >> y;
            op g(T[i j], T[0, 1,],) >> y;
            cache.read A[a b] >> x;
            return;
        }
    """,
    "comments": """
        // a line comment
        dynamic { x: f32[B]; /* a block /* nested */ comment */ }
        /* before a block */
        block entry { // trailing
            op relu(x) >> x; /* inline */ return;
        }
    """,
    "empty_graph": "",
    "order_any": """
        block b { return; }
        dynamic { x: f32; }
        block a { return; }
        volatile { y: f32; }
        dynamic { z: f32; }
    """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_json(name):
    graph = parse(CASES[name], f"{name}.oig")
    text = graph_to_json(graph)
    golden(f"{name}.json", text + "\n")
    again = graph_from_json(text)
    assert again == graph
    assert graph_to_json(again) == text


def nodes_of(src: str, block: str = "entry"):
    return parse(src).blocks[block].nodes


def first_node(body: str):
    return nodes_of(f"block entry {{ {body} }}")[0]


# --------------------------------------------------------------------------- declarations


def test_sections_vars_and_dims():
    g = parse(CASES["sections"])
    assert list(g.vars) == ["x", "n", "y", "z", "w", "step"]
    assert g.vars["x"].kind is MemoryKind.DYNAMIC and g.vars["x"].dims == ("B", "D")
    assert g.vars["n"].dims == () and g.vars["n"].is_scalar
    assert g.vars["y"].dims == ("4", "B*D") and g.vars["y"].kind is MemoryKind.VOLATILE
    assert g.vars["z"].dims == ()
    assert g.vars["w"].dims == ("128", "K*2", "3*D") and g.vars["w"].dtype is lookup("f16")
    assert g.vars["step"].kind is MemoryKind.PERSISTENT


def test_init_values_are_stored_as_the_dtype_holds_them():
    v = parse(CASES["init_values"]).vars
    assert v["a"].init.value == 1.25
    assert v["b"].init.value == float.fromhex("0x1.99999ap-4")   # 0.1 rounded to f32
    assert v["c"].init.value == -2.5e-7
    assert v["f"].init.value == 0.3125                          # f8 E5M2 nearest to 0.3
    assert v["g"].init.value == -3 and v["h"].init.value == 255
    assert v["k"].init.value is True and v["l"].init.value is False
    assert v["m"].init.value == 170 and v["n"].init.value == -8 and v["u"].init.value == -1
    assert math.copysign(1.0, v["w"].init.value) == -1.0


def test_init_too_large_for_the_dtype_is_infinity_like_rust_as():
    v = parse("volatile { a: f32 @init(1e39); b: f16 @init(-70000.0); c: f8 @init(1e10); }").vars
    assert (v["a"].init.value, v["b"].init.value, v["c"].init.value) == (math.inf, -math.inf, math.inf)


def test_attributes():
    v = parse(CASES["attributes"]).vars
    assert v["w"].ref_name == "w.0" and v["w"].pattern == "gauss"
    assert v["r"].ref_name == "model_r"
    assert v["W"].table_indices == ("layer",) and v["W"].is_prefix_table
    assert v["state"].table and v["state"].auto_dim == ("i", "j") and v["state"].fixed == (("i", 2), ("j", 3))
    assert v["K"].table and v["K"].fixed == (("i", 4),)
    assert v["M"].auto_dim == ("r", "c") and not v["M"].table


def test_dtype_names_all_23_and_aliases():
    names = "i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f8 f32 f64 bool i4 u4 i1 i2 u1 u2 t1 t2 bitset".split()
    src = "dynamic {\n" + "".join(f"    v_{n}: {n}[B];\n" for n in names) + "    e1: f8e5m2;\n    e2: float8e5m2;\n}"
    v = parse(src).vars
    assert [v[f"v_{n}"].dtype.name for n in names] == names
    assert v["e1"].dtype is lookup("f8") and v["e2"].dtype is lookup("f8")


def test_dsl_words_are_not_reserved_but_rust_keywords_are():
    g = parse("dynamic { op: f32; block: f32; cache: f32; dynamic: f32; inf: f32; f32: f32; } block op { return; }")
    assert list(g.vars) == ["op", "block", "cache", "dynamic", "inf", "f32"]
    assert "op" in g.blocks
    for kw in ("in", "type", "loop", "ref", "return", "yield", "fn", "self", "_"):
        with pytest.raises(oi.DslError, match="keyword"):
            parse(f"dynamic {{ {kw}: f32; }}")


# --------------------------------------------------------------------------- nodes


def test_op_attribute_lowering():
    n = first_node("op f(x, a=1.5, b=-7, c=1e-5, d=inf, e=-inf, f=true, g=\"s\", h=[1, -2], i=[], "
                   "j=[f32, i8], k=v, acc=i32, to=bf16) >> y;")
    assert isinstance(n, Op) and n.op == "f" and n.inputs == (VarRef("x"),) and n.output == "y"
    got = {a.name: a.value for a in n.attrs}
    assert got["a"] == AttrDouble(1.5) and got["b"] == AttrInt(-7) and got["c"] == AttrDouble(1e-5)
    assert got["d"] == AttrDouble(math.inf) and got["e"] == AttrDouble(-math.inf)
    assert got["f"] == AttrBool(True) and got["g"] == AttrStr("s")
    assert got["h"] == AttrIntList((1, -2)) and got["i"] == AttrIntList(())
    assert got["j"] == AttrDTypeList((lookup("f32"), lookup("i8"))) and got["k"] == AttrVar("v")
    assert got["acc"] == AttrDType(lookup("i32")) and got["to"] == AttrDType(lookup("bf16"))
    assert [a.name for a in n.attrs] == list("abcdefghijk") + ["acc", "to"]   # source order kept
    list_acc = first_node("op matmul(x, w, acc=[f32, f32]) >> y;").attr("acc")
    assert list_acc == AttrDTypeList((lookup("f32"), lookup("f32")))


def test_size_variables_in_integer_lists():
    n = first_node("op slice(x, starts=[0 S], ends=[-1, T,], axes=[]) >> y;")
    assert n.attr("starts") == AttrDimList((0, "S")) and n.attr("ends") == AttrDimList((-1, "T"))
    assert n.attr("axes") == AttrIntList(())
    g = oi.graph("dynamic { x: f32[S, 4]; } volatile { y: f32[1, 4]; } block entry { "
                 "op slice(x, starts=[S], ends=[6], axes=[0]) >> y; return; }")
    text = graph_to_json(g)
    assert '"DimList": [' in text and graph_to_json(graph_from_json(text)) == text
    with pytest.raises(oi.DslError, match=r"1:25: syntax error: unexpected '-' before a size variable"):
        parse("block b { op f(x, a=[1, -S]) >> y; }")
    with pytest.raises(oi.DslError, match=r"1:23: syntax error: unexpected '-' after size variable `S`"):
        parse("block b { op f(x, a=[S-1]) >> y; }")
    assert first_node("op f(x, a=[S, -1]) >> y;").attr("a") == AttrDimList(("S", -1))


def test_var_ref_indices():
    n = first_node("op add(W[l], W[l, 0], b[0], x) >> y;")
    assert n.inputs == (VarRef("W", ("l",)), VarRef("W", ("l", 0)), VarRef("b", (0,)), VarRef("x"))
    assert describe(n) == "op add(W[l],W[l,0],b[0],x) >> y"


def test_op_accepts_split_arrow_like_the_original():
    assert first_node("op f(x) > > y;").output == "y"


def test_cache_slices():
    n = first_node("cache.read table[1, .., 2.., ..3, 4..5] >> out;")
    assert isinstance(n, CacheRead)
    assert n.src == CacheAccess("table", (CacheSingle(1), FULL, CacheSlice(2, None), CacheSlice(None, 3),
                                          CacheSlice(4, 5)), bracketed=True)
    assert n.dst == VarRef("out")


@pytest.mark.parametrize("access, indices", [
    ("A[, i]", (FULL, CacheSingle("i"))),          # leading comma: a full slice
    ("A[i,]", (CacheSingle("i"), FULL)),           # trailing comma: a full slice appended
    ("A[i, , j]", (CacheSingle("i"), FULL, CacheSingle("j"))),
    ("A[,]", (FULL,)),
    ("A[..]", (FULL,)),
    ("A[0..-3]", (CacheSlice(0, -3),)),
    ("A[-2]", (CacheSingle(-2),)),
    ("A[..-1]", (CacheSlice(None, -1),)),
    ("A[a b]", (CacheSingle("a"), CacheSingle("b"))),
    ("A[0..5 6]", (CacheSlice(0, 5), CacheSingle(6))),
    ("A[s..e]", (CacheSlice("s", "e"),)),
])
def test_cache_index_forms(access, indices):
    n = first_node(f"cache.reset {access};")
    assert isinstance(n, CacheReset) and n.target.indices == indices and n.target.bracketed


def test_bare_and_empty_bracket_access_differ():
    bare, empty = nodes_of("block entry { cache.read A >> x; cache.read A[] >> x; }")
    assert bare.src == CacheAccess("A") and not bare.src.bracketed
    assert empty.src == CacheAccess("A", (), bracketed=True)
    assert describe(bare) == "cache.read A >> x" and describe(empty) == "cache.read A[] >> x"


def test_cache_write_increment_decrement_reset():
    w, i1, i5, d1, d2, r = nodes_of("block entry { cache.write q >> K[t]; cache.increment t; cache.increment 5 t;"
                                    " cache.decrement t; cache.decrement 2 t; cache.reset K[l, ..]; }")
    assert isinstance(w, CacheWrite) and w.src == VarRef("q") and w.dst.indices == (CacheSingle("t"),)
    assert isinstance(i1, CacheIncrement) and (i1.target, i1.amount) == ("t", 1) and i5.amount == 5
    assert isinstance(d1, CacheDecrement) and d1.amount == 1 and d2.amount == 2
    assert r.target.indices == (CacheSingle("l"), FULL)
    assert describe(r) == "cache.reset K[l,]"      # the original prints a full slice as nothing


def test_control_flow_nodes():
    nodes = parse(CASES["control_flow"]).blocks["entry"].nodes
    kinds = [type(n) for n in nodes]
    assert kinds == [Branch, Branch, Barrier, Dep, Dep, Dep, Yield, Await, Yield, Transfer, Transfer, Return]
    assert (nodes[0].cond, nodes[0].then_block, nodes[0].else_block) == ("route", "expert0", "expert1")
    assert (nodes[1].cond, nodes[1].then_block, nodes[1].else_block) == (None, "helper", None)
    assert (nodes[3].after, nodes[3].before) == ("relu", "cache.write")
    assert (nodes[5].after, nodes[5].before) == ("loop", "return")
    assert nodes[6].vars == ("x", "y") and nodes[8].vars == ("a",)
    assert nodes[10].src == VarRef("W", ("l",))


def test_loop_numbering_body_first():
    g = parse(CASES["loops"])
    entry = g.blocks["entry"].nodes
    layers = entry[1]
    assert isinstance(layers, Loop) and (layers.name, layers.var, layers.start, layers.end) == \
        ("layers", "l", 0, "num_layers")
    heads = layers.body[1]
    inner = heads.body[1]
    assert (heads.start, heads.end) == (1, "N") and (inner.start, inner.end) == ("a", 4)
    # text order except that every loop comes right after its body
    assert [n.index for n in walk(entry)] == [0, 7, 1, 5, 2, 4, 3, 6, 8]
    assert inner.index > inner.body[0].index and layers.index > heads.index
    assert g.next_index == 9
    assert describe(layers) == "loop layers (l in 0..num_layers)"


def test_index_numbering_continues_across_blocks():
    g = parse("block a { return; barrier; } block b { loop l (i in 0..2) { return; } return; }")
    assert [n.index for n in g.blocks["a"].nodes] == [0, 1]
    assert [n.index for n in walk(g.blocks["b"].nodes)] == [3, 2, 4]


def test_uuids_are_deterministic_and_v4_shaped():
    a = parse(CASES["loops"], "one.oig")
    b = parse(CASES["loops"], "two.oig")
    assert graph_to_json(a) == graph_to_json(b)
    uuids = [n.uuid for n in walk(a.blocks["entry"].nodes)]
    assert len(set(uuids)) == len(uuids)
    assert all(u[14] == "4" and u[19] in "89ab" for u in uuids)


def test_locations_point_at_the_source():
    g = parse("dynamic {\n  x: f32;\n}\nblock entry {\n    op relu(x) >> x;\n}", "g.oig")
    assert (g.vars["x"].loc.line, g.vars["x"].loc.col) == (2, 3)
    op = g.blocks["entry"].nodes[0]
    assert str(op.loc) == "g.oig:5:5"
    assert g.line(op.loc) == "    op relu(x) >> x;"


def test_assign():
    n = first_node("assign t0: f32[B, D];")
    assert isinstance(n, Assign) and n.name == "t0" and n.dtype is lookup("f32") and n.dims == ("B", "D")
    assert describe(n) == "assign t0"


def test_lenient_commas():
    g = parse(CASES["lenient_commas"])
    assert g.vars["x"].dims == ("B", "D") and g.vars["y"].dims == ("B", "D")
    assert g.vars["T"].table_indices == ("i", "j") and g.vars["A"].auto_dim == ("i", "j")
    assert g.vars["A"].fixed == (("i", 2), ("j", 3))
    op, op2, read, _ = g.blocks["entry"].nodes
    assert op.inputs == (VarRef("x"), VarRef("y")) and op.attr("beta") == AttrIntList((1, 2))
    assert op2.inputs == (VarRef("T", ("i", "j")), VarRef("T", (0, 1)))
    assert read.src.indices == (CacheSingle("a"), CacheSingle("b"))


def test_graph_function_and_string_source_name():
    g = oi.graph("dynamic { x: f32; } block entry { return; }")
    assert g.source_name == "<string>" and "entry" in g.blocks
    with pytest.raises(oi.DslError, match=r"^<string>:1:"):
        oi.graph("oops")
