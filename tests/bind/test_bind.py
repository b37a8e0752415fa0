"""Binding and validation: every rule gives a located error, and good graphs bind to the right
shapes, dtypes, model keys and modes."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import BindError
from openinfer.ir.bind import bind


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("bind") / "m.oinf"
    oi.write_oinf(path, tensors={
        "w": np.zeros((4, 8), np.float32),
        "b": np.zeros(8, np.float32),
        "layer.0": np.zeros((8, 8), np.float32),
        "layer.1": np.zeros((8, 8), np.float32),
        "half": np.zeros(8, np.float16),
        "scale": np.array(0.5, np.float32),
    }, sizevars={"B": 2, "D": 4, "H": 8, "L": 2}, metadata={"eps": 1e-5, "mode": "fast"})
    return oi.ModelLoader.open(path)


def bound(text, model=None, **sizevars):
    return bind(oi.graph(text), model, sizevars or None)


def test_good_graph_resolves_shapes_keys_and_modes(model):
    b = bound("""
        dynamic { x: f32[B, D]; }
        constant { w: f32[D, H]; bb: f32[H] @ref("b"); W(l): f32[H, H] @pattern("layer.{l}"); }
        volatile { h: f32[B, H]; }
        block entry {
            op matmul(x, w) >> h;
            op add(h, bb) >> h;
            loop layers (l in 0..L) { op matmul(h, W[l]) >> h; }
        }
    """, model)
    assert b.vars["x"].shape == (2, 4) and b.vars["h"].shape == (2, 8)
    assert b.vars["bb"].model_key == "b"
    assert b.vars["W"].prefix_keys == {(0,): "layer.0", (1,): "layer.1"}
    modes = [b.ops[i].inference.mode for i in sorted(b.ops)]
    assert modes == ["normal", "inplace", "inplace"]   # the output is also an input


def test_attribute_values_from_metadata_and_constants(model):
    b = bound("""
        dynamic { x: f32[H]; t: f32; }
        constant { scale: f32; }
        volatile { y: f32[H]; z: f32[H]; }
        block entry {
            op clamp(x, min=scale, max=eps) >> y;
            op relu(x, clamp_max=t) >> z;
        }
    """, model)
    first, second = (b.ops[i] for i in sorted(b.ops))
    assert first.attrs["min"] == pytest.approx(0.5) and first.attrs["max"] == pytest.approx(1e-5)
    assert "clamp_max" in second.runtime_attrs and second.runtime_attrs["clamp_max"].var == "t"


#: a persistent table of 4 entries of f32[2], and a constant prefix table over `layer.{l}`
TABLE = "persistent { t(i): f32[2] @table @fixed(i=4); }\n"
PREFIX = "constant { W(l): f32[H, H] @pattern(\"layer.{l}\"); }\n"

ERRORS = [
    # (graph text, message fragment, line of the error)
    ("dynamic { x: f32[Q]; }\nblock entry { }", "unknown size variable `Q`", 1),
    ("constant { nothing: f32[D]; }\nblock entry { }", "constant `nothing` has no data", 1),
    ("constant { w: f32[D, D]; }\nblock entry { }", "declared f32[4, 4] but model tensor `w` is f32[4, 8]", 1),
    ("constant { half: f32[H]; }\nblock entry { }", "model tensor `half` is f16[8]", 1),
    ("constant { r: f32[H] @ref(\"nope\"); }\nblock entry { }", "names no tensor of the model", 1),
    ("constant { W(l): f32[H, H] @pattern(\"lay.{l}\"); }\nblock entry { }", "matches no tensor", 1),
    ("constant { W(l): f32[H, H] @pattern(\"layer.{k}\"); }\nblock entry { }", "exactly once", 1),
    ("constant { W(l): f32[H, H]; }\nblock entry { }", "needs @pattern", 1),
    ("volatile { t(i): f32[2] @table; }\nblock entry { }", "only allowed on persistent", 1),
    ("persistent { t(i): f32[2] @table @fixed(j=3); }\nblock entry { }", "@fixed names `j`", 1),
    ("persistent { m(a): f32[2, 2] @auto_dim(a); }\nblock entry { }", "auto_dim requires 2 dims", 1),
    ("volatile { y: f32[2]; }\nblock main { }", "no `entry` block", 0),
    ("volatile { y: f32[2]; }\nblock entry {\n  op add(y, q) >> y;\n}", "unknown variable `q`", 3),
    ("volatile { y: f32[2]; }\nblock entry {\n  op frobnicate(y) >> y;\n}", "unknown op", 3),
    ("dynamic { x: f32[2]; h: f16[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op add(x, h) >> y;\n}",
     "input dtypes differ", 4),
    ("dynamic { x: f32[2]; }\nvolatile { y: f32[3]; }\nblock entry {\n  op add(x, x) >> y;\n}", "shape", 4),
    ("dynamic { x: f32[2]; }\nconstant { c: f32[2] @init(1.0); }\nblock entry {\n  op add(x, x) >> c;\n}",
     "constant `c` cannot be the output", 4),
    ("persistent { p: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op add(p, p) >> y;\n}",
     "persistent `p` cannot be an op input", 4),
    ("dynamic { x: f32[2]; }\nblock entry {\n  branch x a b;\n}\nblock a { }\nblock b { }", "must be a scalar", 3),
    ("dynamic { c: bool; }\nblock entry {\n  branch c a nope;\n}\nblock a { }", "block `nope` does not exist", 3),
    ("block entry {\n  branch a;\n}\nblock a {\n  branch b;\n}\nblock b {\n  branch a;\n}", "cycle", 7),
    ("volatile { y: f32[2]; }\nblock entry {\n  loop l (i in 0..Z) { }\n}", "loop bound `Z`", 3),
    ("volatile { v: f32[2]; }\npersistent { t(i): f32[2] @table @fixed(i=2); }\nblock entry {\n"
     "  cache.read t[0..5] >> v;\n}", "past the fixed size", 4),
    ("volatile { v: f32[3]; }\npersistent { t(i): f32[2] @table @fixed(i=2); }\nblock entry {\n"
     "  cache.read t[1] >> v;\n}", "reads shape [2]", 4),
    ("volatile { v: f32[2]; }\npersistent { p: f32[2]; }\nblock entry {\n  cache.read p[0] >> v;\n}",
     "does not support indexed access", 4),
    ("volatile { v: f32[2]; }\npersistent { t(i): f32[2] @table; }\nblock entry {\n  cache.write v >> t[zz];\n}",
     "unknown cache index `zz`", 4),
    ("persistent { flag: bool; }\nblock entry {\n  cache.increment flag;\n}", "cannot increment", 3),
    ("dynamic { x: f32[2]; }\nvolatile { y: f16[2]; }\nblock entry {\n  transfer x >> y;\n}", "equal types", 4),
    ("dynamic { x: f32[2]; }\nblock entry {\n  yield x;\n  yield x;\n}\nblock c {\n  await x;\n  yield x;\n}",
     "await required before next yield", 4),
    ("dynamic { x: f32[2]; }\nblock entry {\n  yield x;\n  await x;\n}\nblock c {\n  yield x;\n  await x;\n}",
     "must be the last node", 7),
    ("dynamic { x: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  yield x;\n  await x;\n}\n"
     "block c1 {\n  await x;\n  op add(x, x) >> y;\n  yield x;\n}\nblock c2 {\n  await x;\n  op add(x, x) >> y;\n"
     "  yield x;\n}", "both modify `y`", 12),
    ("volatile { y: f32[2]; }\nblock entry {\n  op relu(y) >> y;\n  dep after(nothing) before(y);\n}",
     "names no node", 4),
    ("volatile { y: f32[2]; }\nblock entry {\n  assign y: f32[2];\n}", "already declared", 3),
    # declarations
    ("volatile { p: f32[2] @pattern(\"layer.{l}\"); }\nblock entry { }", "@pattern needs table indices", 1),
    ("dynamic { W(l): f32[H, H] @pattern(\"layer.{l}\"); }\nblock entry { }",
     "prefix table `W` must be constant or volatile", 1),
    ("constant { W(l): f32[H] @pattern(\"layer.{l}\"); }\nblock entry { }",
     "prefix table `W` is declared f32[8] but model tensor `layer.0` is f32[8, 8]", 1),
    ("persistent { P(l): f32[H, H] @pattern(\"layer.{l}\"); }\nblock entry { }", "cannot have @pattern", 1),
    ("persistent { t(i): f32[2]; }\nblock entry { }", "has indices but neither @table nor @auto_dim", 1),
    ("persistent { t: f32[2] @table; }\nblock entry { }", "@table `t` needs at least one index", 1),
    ("persistent { m(a): f32[2] @auto_dim(b); }\nblock entry { }", "@auto_dim index `b` is not an index of `m`", 1),
    ("persistent { t(i): i4[2] @table; }\nblock entry { }", "cannot hold packed dtype i4", 1),
    ("persistent { p: f32[2] @fixed(i=2); }\nblock entry { }", "@fixed on `p` needs @table or @auto_dim", 1),
    ("block entry {\n  assign t: f32[2];\n  assign t: f32[2];\n}", "temporary `t` is assigned twice", 3),
    # blocks and references
    ("dynamic { c: bool; }\nblock entry {\n  branch c entry a;\n}\nblock a { }", "cannot branch to `entry`", 3),
    ("block entry {\n  branch nope a b;\n}\nblock a { }\nblock b { }",
     "branch condition `nope` is not a declared variable", 2),
    ("dynamic { c: i4; }\nblock entry {\n  branch c a b;\n}\nblock a { }\nblock b { }",
     "branch condition `c` cannot have dtype i4", 3),
    (PREFIX + "volatile { y: f32[H, H]; }\nblock entry {\n  op relu(W) >> y;\n}",
     "prefix table `W` takes 1 index(es)", 4),
    ("dynamic { x: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op relu(x[0]) >> y;\n}",
     "`x` is not a prefix table and cannot be indexed", 4),
    (PREFIX + "volatile { y: f32[H, H]; }\nblock entry {\n  op relu(W[q]) >> y;\n}",
     "index `q` of `W[q]` is neither a loop variable, a sizevar nor a literal", 4),
    (PREFIX + "volatile { y: f32[H, H]; }\nblock entry {\n  op relu(W[5]) >> y;\n}",
     "`W[5]` needs model tensor `layer.5`", 4),
    ("persistent { p: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  transfer p >> y;\n}",
     "persistent `p` cannot be transferred", 4),
    ("block entry {\n  yield nope;\n}", "unknown variable `nope`", 2),
    ("constant { c: f32[2] @init(1.0); }\nblock entry {\n  yield c;\n  await c;\n}",
     "constant `c` cannot be awaited", 4),
    ("dynamic { x: f32[2]; }\npersistent { p: f32[2]; }\nblock entry {\n  op relu(x) >> p;\n}",
     "persistent `p` cannot be the output of an op", 4),
    ("volatile { W(l): f32[H, H] @pattern(\"layer.{l}\"); }\ndynamic { x: f32[H, H]; }\nblock entry {\n"
     "  transfer x >> W[0];\n}",
     "prefix table `W` cannot be the transfer destination", 4),
    ("block entry {\n  loop a (i in 0..2) {\n    loop b (i in 0..2) { }\n  }\n}",
     "loop variable `i` shadows an enclosing loop's variable", 3),
    ("dynamic { n: f32; }\nblock entry {\n  loop a (i in 0..n) { }\n}",
     "loop bound `n` must have an integer dtype, not f32", 3),
    ("dynamic { x: f32[2]; }\nblock entry {\n  op relu(x) >> nope;\n}", "unknown output variable `nope`", 3),
    ("dynamic { x: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op clamp(x, min=nope) >> y;\n}",
     "attribute value `nope` is not a variable, sizevar or model metadata key", 4),
    # op signatures (registry and shape rules, reported at the node)
    ("volatile { y: f32[2]; }\nblock entry {\n  op relu() >> y;\n}", "relu takes at least one input", 3),
    ("dynamic { x: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op gelu(x, approximate=1) >> y;\n}",
     "a string", 4),
    ("dynamic { x: f32[2, 2, 4]; q: i8[4, 3]; s: f32[3]; }\nvolatile { y: f32[2, 3]; }\nblock entry {\n"
     "  op dequant_matmul(x, q, s) >> y;\n}", "x must be [K] or [M, K] and w [K, N]", 4),
    ("dynamic { x: f32[2, 5]; q: i8[4, 3]; s: f32[3]; }\nvolatile { y: f32[2, 3]; }\nblock entry {\n"
     "  op dequant_matmul(x, q, s) >> y;\n}", "dequant_matmul: inner dims differ", 4),
    ("dynamic { x: f32[2, 4]; q: i8[4, 3]; s: f32[2]; }\nvolatile { y: f32[2, 3]; }\nblock entry {\n"
     "  op dequant_matmul(x, q, s) >> y;\n}", "must be [3] (per output channel) or [1] (per tensor)", 4),
    ("dynamic { x: f32[2, 4]; q: i8[4, 3]; s: f32[3]; z: i32[1]; }\nvolatile { y: f32[2, 3]; }\n"
     "block entry {\n  op dequant_matmul(x, q, s, z) >> y;\n}", "must have scale's shape", 4),
    # cache operations
    ("block entry {\n  cache.increment nope;\n}", "unknown variable `nope`", 2),
    ("dynamic { x: i32; }\nblock entry {\n  cache.increment x;\n}",
     "`x` is dynamic; cache operations work on persistent variables only", 3),
    ("persistent { p: i32[2]; }\nblock entry {\n  cache.increment p;\n}", "`p` must be a scalar to be incremented", 3),
    ("volatile { v: f32[2]; }\n" + TABLE + "block entry {\n  cache.read t[-1] >> v;\n}",
     "cache index -1 is negative", 4),
    ("dynamic { f: f32; }\nvolatile { v: f32[2]; }\n" + TABLE + "block entry {\n  cache.write v >> t[f];\n}",
     "cache index `f` must have an integer dtype, not f32", 5),
    ("volatile { v: f32[2]; }\n" + TABLE + "block entry {\n  cache.read t[0, 1] >> v;\n}",
     "has 2 indices but `t` has 1", 4),
    ("volatile { v: f32[2]; }\n" + TABLE + "block entry {\n  cache.write v >> t[0..1];\n}",
     "cache.write needs scalar indices, got a slice", 4),
    ("volatile { v: f32[1, 2]; }\npersistent { m(a): f32[2] @auto_dim(a); }\nblock entry {\n"
     "  cache.read m[0..1] >> v;\n}", "slices are not allowed on auto_dim variable `m`", 4),
    ("volatile { v: f32[2]; }\n" + TABLE + "block entry {\n  cache.read t[3..1] >> v;\n}",
     "slice end 1 is before its start 3", 4),
    ("volatile { v: f32[2]; }\npersistent { t(i, j): f32[2] @table; }\nblock entry {\n  cache.write v >> t[0];\n}",
     "must give every index of `t` (i, j)", 4),
    (TABLE + "block entry {\n  cache.reset t[0..1];\n}", "cache.reset takes scalar prefix indices then full slices", 3),
    ("persistent { t(i, j): f32[2] @table; }\nblock entry {\n  cache.reset t[.., 0];\n}",
     "scalar indices must come before `..`", 3),
    ("persistent { p: f32[2]; }\nblock entry {\n  cache.reset p[0];\n}",
     "`p` is not a table and does not support indexed access", 3),
    ("volatile { v: f16[2]; }\n" + TABLE + "block entry {\n  cache.read t[0] >> v;\n}",
     "cache.read from f32 `t` into f16 `v`: dtypes must match", 4),
    ("persistent { p: f32[2]; }\n" + TABLE + "block entry {\n  cache.write p >> t[0];\n}",
     "persistent `p` cannot be the source of cache.write", 4),
    ("volatile { v: f16[2]; }\n" + TABLE + "block entry {\n  cache.write v >> t[0];\n}",
     "cache.write of f16 `v` into f32 `t`: dtypes must match", 4),
    # same rank, another length: a rank-only check would accept these
    ("volatile { v: f32[3]; }\n" + TABLE + "block entry {\n  cache.write v >> t[0];\n}",
     "`v` has shape [3] but `t[0]` holds [2]", 4),
    ("volatile { v: f32[3]; }\npersistent { p: f32[2]; }\nblock entry {\n  cache.write v >> p;\n}",
     "`v` has shape [3] but `p` holds [2]", 4),
    ("volatile { v: f32[2, 3]; }\npersistent { t(i): f32[3, 2] @table; }\nblock entry {\n  cache.write v >> t[0];\n}",
     "`v` has shape [2, 3] but `t[0]` holds [3, 2]", 4),
    # consumer blocks
    ("dynamic { x: f32[2]; }\nblock entry {\n  yield x;\n  await x;\n}\nblock c {\n  await x;\n}",
     "consumer block `c` awaits x but does not yield it back", 6),
    ("dynamic { x: f32[2]; y: f32[2]; }\nblock entry {\n  yield x;\n  await x;\n}\nblock c {\n  await y;\n"
     "  yield y;\n}", "consumer block `c` awaits y, which `entry` never yields", 6),


    # sizes the generated C cannot hold (int64_t / size_t arithmetic, objects of at most 2^63 - 1 bytes)
    ("volatile { y: f32[2]; }\ndynamic { x: f32[18446744073709551615]; }\nblock entry { }",
     "f32[18446744073709551615] is 73786976294838206460 bytes, more than the generated code can address", 2),
    ("dynamic { x: u8[4294967296*4294967296]; }\nblock entry { }", "u8[18446744073709551616] is", 1),
    ("dynamic { x: f64[1152921504606846976]; }\nblock entry { }", "is 9223372036854775808 bytes", 1),
    ("dynamic { x: u8[4611686018427387904]; }\nvolatile { y: u8[4611686018427387904]; }\nblock entry { }",
     "hold more than 2^63 - 1 bytes together", 2),
    ("persistent { t(i): f32[1024] @table @fixed(i=2305843009213693952); }\nblock entry { }",
     "f32[1024] x 2305843009213693952 is", 1),
    ("volatile { y: f32[2]; }\nblock entry {\n  assign big: i64[D, 2305843009213693952];\n}",
     "i64[4, 2305843009213693952] is", 3),
]


@pytest.mark.parametrize("text,fragment,line", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_errors_are_located(model, text, fragment, line):
    with pytest.raises(BindError) as err:
        bound(text, model)
    msg = str(err.value)
    assert fragment in msg
    if line:
        assert err.value.loc is not None and err.value.loc.line == line, msg
        assert "^" in msg     # the offending line is quoted with a caret


def test_dep_accepts_outputs_op_names_and_node_kinds(model):
    bound("""
        dynamic { x: f32[2]; }
        volatile { y: f32[2]; }
        persistent { p: f32[2]; }
        block entry {
            op relu(x) >> y;
            cache.write y >> p;
            dep after(relu) before(cache.write);
            dep after(y) before(cache.write);
        }
    """, model)


@pytest.mark.parametrize("text,line", [
    ("dynamic { x: f32[N]; }\nblock entry { }", 1),
    ("volatile { y: f32[2]; }\ndynamic { x: f32[2, N*2]; }\nblock entry { }", 2),
    ("volatile { y: f32[2]; }\nblock entry {\n  loop l (i in 0..N) { }\n}", 3),
    ("volatile { y: f32[2]; }\npersistent { t(i): f32[2] @table @fixed(i=4); }\nblock entry {\n"
     "  cache.read t[N] >> y;\n}", 4),
])
def test_a_sizevar_too_large_for_the_generated_code_is_refused_where_it_is_used(text, line):
    """--sizevar N=2**64 binds no graph: each use of N is an error at that use."""
    for value in (2 ** 64, 2 ** 63):
        with pytest.raises(BindError) as err:
            bound(text, N=value)
        assert f"sizevar `N` = {value} is too large: sizes are at most 2^63 - 1" in str(err.value)
        assert err.value.loc.line == line
    bound(text, N=2)


def test_the_largest_sizes_the_generated_code_holds_bind():
    b = bound("dynamic { x: u8[N]; y: bool[3]; }\nblock entry { }", N=2 ** 63 - 4)
    assert b.vars["x"].shape == (2 ** 63 - 4,)


def test_sizevar_overrides_win(model):
    b = bound("dynamic { x: f32[B]; }\nblock entry { }", model, B=16)
    assert b.vars["x"].shape == (16,)
    with pytest.raises(BindError, match="non-negative integer"):
        bound("block entry { }", model, B=-1)


def test_quant_keys_bind_through_ref_and_pattern(tmp_path):
    from openinfer import QuantParams, TensorSpec, write_oinf

    path = tmp_path / "q.oinf"
    write_oinf(path, {f"l.{i}.w": TensorSpec(np.ones((4, 3), np.int8), quant=QuantParams.per_channel(1, [1, 2, 3]))
                      for i in range(2)} | {"plain": np.ones((4, 3), np.float32)})
    m = oi.ModelLoader.open(path)
    g = oi.graph('constant { w(l): i8[4, 3] @pattern("l.{l}.w"); s(l): f32[3] @pattern("l.{l}.w#scale"); }\n'
                 "dynamic { x: f32[4]; }\nvolatile { y: f32[3]; }\n"
                 "block entry {\n  loop i (l in 0..2) {\n    op dequant_matmul(x, w[l], s[l]) >> y;\n  }\n"
                 "  return;\n}\n")
    bound = bind(g, m)
    assert bound.vars["s"].prefix_keys == {(0,): "l.0.w#scale", (1,): "l.1.w#scale"}
    bad = oi.graph('constant { s: f32[3] @ref("plain#scale"); }\nblock entry {\n  return;\n}\n')
    with pytest.raises(BindError, match=r'@ref\("plain#scale"\) names no tensor'):
        bind(bad, m)


def test_invalid_dimension_expression_is_located():
    """The DSL's grammar only writes `N`, `NAME` or `A*B` dims; a Graph IR built otherwise (JSON, the
    API) can hold any string, which bind refuses with the declaration's location."""
    from openinfer.dtypes import F32
    from openinfer.ir import nodes as ir

    loc = ir.SourceLoc("g.oig", 3, 7)
    g = ir.Graph({"x": ir.VarDecl("x", ir.MemoryKind.DYNAMIC, F32, ("B+1",), loc=loc)},
                 {"entry": ir.Block("entry", ())}, 0)
    with pytest.raises(BindError, match=r"invalid dimension expression `B\+1`") as err:
        bind(g, None, {"B": 2})
    assert err.value.loc == loc


def test_model_dependent_errors(tmp_path):
    """Errors that need a model holding a declaration without data, or array metadata."""
    path = tmp_path / "m.oinf"
    oi.write_oinf(path, tensors={"layer.0": np.zeros(2, np.float32), "layer.1": oi.UninitializedTensor("f32", (2,))},
                  metadata={"arr": np.arange(3, dtype=np.int32)})
    m = oi.ModelLoader.open(path)
    with pytest.raises(BindError, match=r"model tensor `layer.1` of prefix table `W` has no data") as err:
        bound('constant { W(l): f32[2] @pattern("layer.{l}"); }\nblock entry { }', m)
    assert err.value.loc.line == 1
    with pytest.raises(BindError, match=r"model metadata `arr` is not a scalar or string") as err:
        bound("dynamic { x: f32[2]; }\nvolatile { y: f32[2]; }\nblock entry {\n  op clamp(x, min=arr) >> y;\n}", m)
    assert err.value.loc.line == 4
