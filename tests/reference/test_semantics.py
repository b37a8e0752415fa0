"""Reference executor semantics on small inline graphs: memory kinds, persistent tables and
auto-dim tensors, control flow, yield/await, run-time errors, tracing."""

from __future__ import annotations

import json

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import ExecutionError
from openinfer.reference.executor import Reference
from openinfer.trace import to_chrome, to_json


def run(text: str, sizevars=None, trace=None):
    return Reference(None, oi.graph(text), sizevars=sizevars or {}, trace=trace).make_executor()


# ----------------------------------------------------------------------------------- memory kinds

def test_dynamic_inputs_are_required_before_every_step():
    ex = run("""
        dynamic { x: f32[2]; }
        volatile { y: f32[2]; }
        block entry { op add(x, x) >> y; }
    """)
    with pytest.raises(ExecutionError, match=r"dynamic variable `x` not set before this step"):
        ex.run_step()
    ex.insert(x=np.array([1, 2], np.float32))
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), [2, 4])
    with pytest.raises(ExecutionError, match="not set"):
        ex.run_step()     # consumed by the previous step


def test_volatile_is_reinitialised_every_step_and_persistent_is_kept():
    ex = run("""
        dynamic { x: f32[2]; }
        volatile { acc: f32[2] @init(1.0); }
        persistent { total: f32[2]; }
        block entry {
            op add(acc, x) >> acc;
            cache.read total >> x;
            op add(x, acc) >> x;
            cache.write x >> total;
        }
    """)
    for _ in range(3):
        ex.insert(x=np.array([1, 1], np.float32))
        ex.run_step()
        np.testing.assert_array_equal(ex.fetch("acc"), [2, 2])   # 1 + x, from @init each step
    np.testing.assert_array_equal(ex.fetch("total"), [6, 6])


def test_insert_checks_names_shapes_and_ranges():
    ex = run("""
        dynamic { x: i4[3]; }
        volatile { y: i4[3]; }
        block entry { op neg(x) >> y; }
    """)
    with pytest.raises(ExecutionError, match="only dynamic variables"):
        ex.insert(y=np.zeros(3, np.int8))
    with pytest.raises(ExecutionError, match="expects shape"):
        ex.insert(x=np.zeros(4, np.int8))
    with pytest.raises(ExecutionError, match="out of range"):
        ex.insert(x=np.array([0, 8, 1]))
    ex.insert(x=np.array([-8, 7, 1]))
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), [-8, -7, -1])   # -(-8) wraps to -8 in i4


# ----------------------------------------------------------------------------------- tables

TABLE = """
    dynamic { v: f32[2]; i: i32; }
    volatile { row: f32[2]; rows: f32[3, 2]; tail: f32[2, 2]; }
    persistent { T(r): f32[2] @table @init(7.0); }
    block entry {
        cache.write v >> T[i];
        cache.read T[1] >> row;
        cache.read T[0..3] >> rows;
        cache.read T[1..-1] >> tail;
    }
"""


def test_table_growth_init_values_and_negative_slice_ends():
    ex = run(TABLE)
    ex.insert(v=np.array([1, 2], np.float32), i=np.int32(3))   # grows the size to 4
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("row"), [7, 7])      # never written: @init
    np.testing.assert_array_equal(ex.fetch("rows"), [[7, 7]] * 3)
    np.testing.assert_array_equal(ex.fetch("tail"), [[7, 7], [7, 7]])   # rows 1..size-1 = 1..3
    assert ex.fetch("T").shape == (4, 2)
    np.testing.assert_array_equal(ex.fetch("T")[3], [1, 2])


def test_slices_never_grow_a_table():
    ex = run(TABLE)
    ex.insert(v=np.array([1, 2], np.float32), i=np.int32(0))
    with pytest.raises(ExecutionError, match="past its current size"):
        ex.run_step()     # T[0..3] with a size of 2 (T[1] grew it to 2)


def test_fixed_table_overflow_and_reset_of_a_prefix():
    ex = run("""
        dynamic { v: f32[2]; a: i32; b: i32; }
        volatile { all: f32[2, 3, 2]; }
        persistent { G(p, q): f32[2] @table @fixed(p=2, q=3); }
        block entry {
            cache.write v >> G[a, b];
            cache.read G[] >> all;
        }
    """)
    ex.insert(v=np.array([1, 1], np.float32), a=np.int32(0), b=np.int32(2))
    ex.run_step()
    ex.insert(v=np.array([2, 2], np.float32), a=np.int32(1), b=np.int32(0))
    ex.run_step()
    full = ex.fetch("all")
    assert full[0, 2].tolist() == [1, 1] and full[1, 0].tolist() == [2, 2]
    ex.insert(v=np.array([3, 3], np.float32), a=np.int32(1), b=np.int32(3))
    with pytest.raises(ExecutionError, match="exceeds fixed size 3") as err:
        ex.run_step()
    assert "cache.write v >> G[a,b]" in str(err.value) and "<string>:" in str(err.value)


def test_cache_reset_of_a_prefix_removes_only_matching_entries():
    ex = run("""
        dynamic { v: f32[1]; a: i32; b: i32; go: bool; }
        volatile { all: f32[2, 2, 1]; }
        persistent { G(p, q): f32[1] @table @fixed(p=2, q=2); }
        block entry {
            cache.write v >> G[a, b];
            branch go wipe keep;
            cache.read G[] >> all;
        }
        block wipe { cache.reset G[1, ..]; }
        block keep { return; }
    """)
    for a, b, value in ((0, 0, 1), (0, 1, 2), (1, 0, 3), (1, 1, 4)):
        ex.insert(v=np.array([value], np.float32), a=np.int32(a), b=np.int32(b), go=False)
        ex.run_step()
    np.testing.assert_array_equal(ex.fetch("all").reshape(-1), [1, 2, 3, 4])
    ex.insert(v=np.array([9], np.float32), a=np.int32(0), b=np.int32(0), go=True)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("all").reshape(-1), [9, 2, 0, 0])


def test_auto_dim_grows_keeping_data_top_left():
    ex = run("""
        dynamic { r: i32; c: i32; v: f32[2, 3]; }
        volatile { m: f32[2, 3]; }
        persistent { M(a, b): f32[1, 1] @auto_dim(a, b) @fixed(a=3, b=3); }
        block entry { cache.read M[r, c] >> m; }
    """)
    ex.insert(r=np.int32(1), c=np.int32(2), v=np.zeros((2, 3), np.float32))
    ex.run_step()
    assert ex.fetch("m").shape == (2, 3)                 # base [1,1] + counts (1,2)
    ex.insert(r=np.int32(4), c=np.int32(0), v=np.zeros((2, 3), np.float32))
    with pytest.raises(ExecutionError, match="exceeds fixed max 3"):
        ex.run_step()


def test_auto_dim_write_then_grow_moves_data_into_the_corner():
    ex = run("""
        dynamic { v: f32[2, 2]; grow: i32; }
        volatile { m: f32[2, 2]; }
        persistent { M(a, b): f32[1, 1] @auto_dim(a, b); }
        block entry {
            cache.write v >> M[1, 1];
            cache.read M[grow, grow] >> m;
        }
    """)
    v = np.array([[1, 2], [3, 4]], np.float32)
    ex.insert(v=v, grow=np.int32(1))
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("m"), v)
    ex.insert(v=v, grow=np.int32(2))
    ex.run_step()
    grown = ex.fetch("m")
    assert grown.shape == (3, 3)
    np.testing.assert_array_equal(grown[:2, :2], v)
    np.testing.assert_array_equal(grown[2], 0)


def test_increment_wraps_integers_and_rounds_narrow_floats():
    ex = run("""
        persistent { n: i8 @init(126); h: f16 @init(2048.0); }
        block entry { cache.increment 1 n; cache.increment 1 h; }
    """)
    ex.run_step()
    assert int(ex.fetch("n")) == 127
    ex.run_step()
    assert int(ex.fetch("n")) == -128          # wraps
    assert float(ex.fetch("h")) == 2048.0      # 2049 is not an f16: rounds back to 2048


# ----------------------------------------------------------------------------------- control flow

def test_loops_with_symbolic_bounds_nesting_and_return_from_a_loop():
    ex = run("""
        dynamic { n: i32; }
        volatile { count: f32[1]; one: f32[1] @init(1.0); }
        block entry {
            loop outer (i in 0..N) {
                loop inner (j in 0..n) {
                    op add(count, one) >> count;
                }
            }
            branch early;
            op add(count, one) >> count;
        }
        block early {
            loop forever (k in 0..100) {
                op add(count, one) >> count;
                return;
            }
            op add(count, one) >> count;
        }
    """, sizevars={"N": 3})
    ex.insert(n=np.int32(2))
    ex.run_step()
    # 3*2 in the nested loops, 1 in `early` (return leaves the loop *and* the block), 1 after
    assert float(ex.fetch("count")[0]) == 8.0


def test_return_in_entry_ends_the_step():
    ex = run("""
        volatile { y: f32[1]; one: f32[1] @init(1.0); }
        block entry { op add(y, one) >> y; return; op add(y, one) >> y; }
    """)
    ex.run_step()
    assert float(ex.fetch("y")[0]) == 1.0


# ----------------------------------------------------------------------------------- tracing

def test_trace_events_in_the_original_format_and_chrome_export():
    ex = run("""
        dynamic { x: f32[2]; }
        volatile { y: f32[2]; }
        block entry { op add(x, x) >> y; barrier; return; }
    """, trace="full")
    ex.insert(x=np.ones(2, np.float32))
    ex.run_step()
    events = ex.trace()
    assert [e.kind for e in events] == ["OpExecute", "Barrier", "Return"]
    doc = json.loads(to_json(events))
    assert set(doc[0]) == {"block_name", "node_index", "node_uuid", "kind", "params", "output", "micros"}
    assert doc[0]["params"] == ["x", "x"] and doc[0]["output"] == ["y"]
    assert len(doc[0]["micros"]) == 3
    assert "y" in events[0].values and "2" in events[0].values["y"]
    chrome = to_chrome(events)
    spans = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    assert [s["name"] for s in spans] == ["op add(x,x) >> y", "barrier", "return"]


def test_openinfer_trace_env_prints_lines(monkeypatch, capsys):
    monkeypatch.setenv("OPENINFER_TRACE", "1")
    ex = run("""
        volatile { y: f32[1]; }
        block entry { op fill(y, value=2.0) >> y; }
    """)
    ex.run_step()
    err = capsys.readouterr().err
    assert "[entry] -- op fill(y,value=2.0) >> y" in err or "[entry] -- op fill(y" in err
    assert len(ex.trace()) == 1


def test_iterate_allows_fetch_between_nodes():
    ex = run("""
        volatile { y: f32[1]; one: f32[1] @init(1.0); }
        block entry { op add(y, one) >> y; op add(y, one) >> y; }
    """)
    seen = [float(ex.fetch("y")[0]) for _ in ex.iterate()]
    assert seen == [1.0, 2.0]
