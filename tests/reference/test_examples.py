"""The ten example workloads on the NumPy reference, with their numbers checked against plain
NumPy computations written here (independently of the interpreter and the op kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import ExecutionError
from openinfer.reference.executor import Reference


def relu(a):
    return np.maximum(a, 0)


def test_mlp_regression_equals_numpy(example):
    model, graph = example("mlp_regression")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(5).uniform(-1, 1, (4, 16)).astype(np.float32)
    ex.insert(x=x)
    ex.run_step()
    w1, b1, w2, b2 = (model.tensor(k) for k in ("w1", "b1", "w2", "b2"))
    want = relu(x @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(ex.fetch("y"), want, rtol=1e-6, atol=1e-6)
    assert ex.fetch("y").dtype == np.float32


def test_prefix_tables_read_each_layers_weights(example):
    model, graph = example("residual_mlp_stack")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(1).uniform(-1, 1, (4, 32)).astype(np.float32)
    ex.insert(x=x)
    ex.run_step()
    y = x + model.tensor("bias0")
    for layer in range(3):
        h = relu(y @ model.tensor(f"res.mlp.w.{layer}") + model.tensor(f"res.mlp.b.{layer}"))
        y = y + h
    np.testing.assert_allclose(ex.fetch("y"), y, rtol=1e-5, atol=1e-6)
    # the original runtime read zeros for prefix tables, which made y = x: we must not
    assert not np.allclose(ex.fetch("y"), x)


def test_linear_attention_sums_heads(example):
    model, graph = example("linear_attention")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(2).uniform(-1, 1, (4, 32)).astype(np.float32)
    ex.insert(x=x)
    ex.run_step()
    out = np.zeros((4, 32), np.float32)
    for h in range(2):
        q = x @ model.tensor(f"attn.wq.{h}")
        k = x @ model.tensor(f"attn.wk.{h}")
        out = out + (q + k) @ model.tensor(f"attn.wv.{h}")
    out = out @ model.tensor("w_out")
    np.testing.assert_allclose(ex.fetch("out"), out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("route", [True, False])
def test_moe_routing_calls_the_chosen_expert(example, route):
    model, graph = example("moe_routing")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(3).uniform(-1, 1, (4, 16)).astype(np.float32)
    ex.insert(x=x, route=route)
    ex.run_step()
    e = 0 if route else 1
    np.testing.assert_allclose(ex.fetch("y"), x @ model.tensor(f"w{e}") + model.tensor(f"b{e}"), rtol=1e-6,
                               atol=1e-6)


def test_streaming_pipeline_consumers_see_a_snapshot(example):
    model, graph = example("streaming_pipeline")
    ex = Reference(model, graph, trace=True).make_executor()
    x = np.random.default_rng(4).uniform(-1, 1, (4, 16)).astype(np.float32)
    ex.insert(x=x)
    ex.run_step()
    bias, w = model.tensor("bias"), model.tensor("w")
    # writer's change to x is visible after entry's await
    np.testing.assert_allclose(ex.fetch("x"), x + bias, rtol=1e-6)
    # reader saw the yielded snapshot of x (not the biased one), and its output is not lost
    np.testing.assert_allclose(ex.fetch("h2"), np.clip(x, 0, 6), rtol=1e-6)
    np.testing.assert_allclose(ex.fetch("h"), np.clip(x @ w, 0, 6), rtol=1e-5, atol=1e-6)
    blocks = {e.block_name for e in ex.trace()}
    assert blocks == {"entry", "reader", "writer"}


def test_kv_cache_history_grows_one_row_per_step(example):
    model, graph = example("kv_cache_decode")
    ex = Reference(model, graph).make_executor()
    qs = [np.random.default_rng(s).uniform(-1, 1, 16).astype(np.float32) for s in range(4)]
    for step, q in enumerate(qs):
        ex.insert(q=q)
        ex.run_step()
        hist = ex.fetch("k_hist")
        assert hist.shape == (4, 16)
        np.testing.assert_array_equal(hist[:step + 1], np.stack(qs[:step + 1]))
        np.testing.assert_array_equal(hist[step + 1:], 0)
        assert int(ex.fetch("t")) == step + 1
    # a fifth write overflows the @fixed(i=4) table
    ex.insert(q=qs[0])
    with pytest.raises(ExecutionError, match="exceeds fixed size 4"):
        ex.run_step()
    ex.reset()   # the executor stays usable; reset clears the table and the counter
    ex.insert(q=qs[1])
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("k_hist")[0], qs[1])
    assert int(ex.fetch("t")) == 1


def test_online_weight_update_second_step_is_x_times_delta(example):
    model, graph = example("online_weight_update")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(5).uniform(-1, 1, (4, 16)).astype(np.float32)
    delta = np.random.default_rng(6).uniform(-0.1, 0.1, (16, 8)).astype(np.float32)
    ex.insert(x=x, delta=delta)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), np.zeros((4, 8), np.float32))
    ex.insert(x=x, delta=delta)
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), x @ delta, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ex.fetch("W"), 2 * delta, rtol=1e-6)


def test_quantized_linear_accumulates_in_i32(example):
    model, graph = example("quantized_linear")
    ex = Reference(model, graph).make_executor()
    ex.run_step()
    x, w = model.tensor("x").astype(np.int64), model.tensor("w").astype(np.int64)
    y = ex.fetch("y")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, x @ w)


def test_stability_guard_branches_on_all_finite(example):
    model, graph = example("stability_guard")
    ex = Reference(model, graph).make_executor()
    x = np.random.default_rng(7).uniform(-1, 1, (4, 16)).astype(np.float32)
    ex.insert(x=x)
    ex.run_step()
    assert bool(ex.fetch("cond")) is True
    np.testing.assert_allclose(ex.fetch("y"), x + model.tensor("bias"), rtol=1e-6)
    x[2, 3] = np.inf
    ex.insert(x=x)
    ex.run_step()
    assert bool(ex.fetch("cond")) is False
    np.testing.assert_array_equal(ex.fetch("y"), np.zeros((4, 16), np.float32))


def test_cache_window_slice_windows_and_overflow(example):
    model, graph = example("cache_window_slice")
    ex = Reference(model, graph).make_executor()
    rows = [np.random.default_rng(s).uniform(-1, 1, 8).astype(np.float32) for s in range(7)]
    expected = [(0, 3), (1, 4), (2, 5), (3, 6), (4, 6), (5, 6)]
    for step in range(6):
        ex.insert(x=rows[step])
        ex.run_step()
        lo, hi = expected[step]
        # rows lo..hi of what was written so far (unwritten rows of the fixed table read as zeros)
        written = np.stack([rows[i] if i <= step else np.zeros(8, np.float32) for i in range(6)])
        np.testing.assert_array_equal(ex.fetch("window"), written[lo:hi])
    ex.insert(x=rows[6])
    with pytest.raises(ExecutionError, match="exceeds fixed size 6"):
        ex.run_step()


def test_accumulation_demo_matches_stored_outputs(example):
    model, graph = example("accumulation_demo")
    ex = Reference(model, graph).make_executor()
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("mm"), model.tensor("matmul_out"), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ex.fetch("row_sum"), model.tensor("sum_axis_out"), rtol=1e-6, atol=1e-7)


def test_every_example_binds_against_the_original_files(compat_dir):
    """The .oig examples bind against the original tools' own .oinf files (v1 and v2)."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    seen = 0
    for version in ("v1", "v2"):
        for path in sorted((compat_dir / version).glob("*.oinf")):
            graph = examples / f"{path.stem}.oig"
            Reference(oi.ModelLoader.open(path), oi.load_graph(graph))
            seen += 1
    assert seen == 19
