"""Every example on lavapipe (devices/lavapipe.json, or OI_VK_ARCH's GPU): generated, built, run
for several steps and compared with the NumPy reference, with the validation layer on and no validation message; the
decode-style example needs one submission per step; ada_mock.json generates every example."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.inputs import outputs_of, random_inputs
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator
from openinfer.synthesizer import Synthesizer
from openinfer.testing import assert_matches_reference

from .conftest import ADA_MOCK, VK_ARCH

EXAMPLES = ("mlp_regression", "residual_mlp_stack", "linear_attention", "moe_routing", "streaming_pipeline",
            "kv_cache_decode", "online_weight_update", "quantized_linear", "stability_guard", "cache_window_slice",
            "accumulation_demo")
STEPS = {"cache_window_slice": 6, "kv_cache_decode": 4}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_matches_reference_on_vulkan(example, name):
    model, graph = example(name)
    ref = Reference(model, graph)
    ex_ref = ref.make_executor()
    sim = Simulator(model, graph, arch=VK_ARCH)
    ex_sim = sim.make_executor()
    names = outputs_of(ref.bound)
    for step in range(STEPS.get(name, 3)):
        inputs = random_inputs(ref.bound, 11, step)
        if name == "stability_guard" and step == 1:
            inputs["x"] = inputs["x"].copy()
            inputs["x"][1, 2] = np.nan          # the `bad` branch
        for ex in (ex_ref, ex_sim):
            ex.insert(**inputs)
            ex.run_step()
        rows = [compare(n, ref.bound.vars[n].dtype, ex_ref.fetch(n), ex_sim.fetch(n)) for n in names]
        assert all(r.ok for r in rows), f"{name} on {VK_ARCH.stem}, step {step}:\n{table(rows)}"
    assert sim.validation_messages() == 0


def test_decode_step_is_one_submission(example):
    """kv_cache_decode's indices come from a persistent counter the host increments itself: no
    mid-step readback, the step is recorded into one command buffer."""
    model, graph = example("kv_cache_decode")
    sim = Simulator(model, graph, arch=VK_ARCH)
    ex = sim.make_executor()
    for step in range(4):
        ex.insert(q=np.full(16, step, np.float32))   # recorded, not submitted
        before = sim.submissions()
        ex.run_step()
        assert sim.submissions() - before == 1
    np.testing.assert_array_equal(ex.fetch("k_hist")[:, 0], [0, 1, 2, 3])


@pytest.mark.parametrize("replay", ["1", "0"])
def test_steps_at_positions_seen_before_replay_their_commands(example, monkeypatch, replay):
    """After a reset, kv_cache_decode's steps at cache positions 0.. again record the same commands
    as the first time: each submits the command buffer recorded then (OI_VK_REPLAY=0: none does),
    with the same results."""
    monkeypatch.setenv("OI_VK_REPLAY", replay)
    model, graph = example("kv_cache_decode")
    sim = Simulator(model, graph, arch=VK_ARCH)
    ex = sim.make_executor()
    start = sim.vk_counters()["replays"]      # (the counters are the process's)
    hist = []
    for _ in range(2):
        ex.reset()
        for step in range(4):
            ex.insert(q=np.full(16, step, np.float32))
            before = sim.vk_counters()
            ex.run_step()
            after = sim.vk_counters()
            assert after["submissions"] - before["submissions"] == 1
            if hist and replay == "1":
                assert after["replays"] - before["replays"] == 1
        hist.append(ex.fetch("k_hist").copy())
    if replay == "0":
        assert sim.vk_counters()["replays"] == start
    np.testing.assert_array_equal(hist[0], hist[1])
    np.testing.assert_array_equal(hist[1][:, 0], [0, 1, 2, 3])
    assert sim.validation_messages() == 0


def test_trace_hook_flushes_per_node_and_bisect_finds_nothing(example):
    from openinfer.bisect import bisect

    model, graph = example("residual_mlp_stack")
    sim = Simulator(model, graph, arch=VK_ARCH)
    report = bisect(sim.bound, sim, seed=3, step=1)
    assert report.first is None and report.nodes_compared > 4, report.text()
    assert sim.validation_messages() == 0


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_generates_for_ada_mock(example, name):
    model, graph = example(name)
    plan = Synthesizer.from_arch(ADA_MOCK).synthesize(model, graph)
    kernels = [k for k in plan.files if k.endswith(".comp") and k != "shaders/oi_copy.comp"]   # (the HAL's)
    assert "meson.build" in plan.files and "shaders/oi_copy.comp" in plan.files
    assert kernels or name == "kv_cache_decode"


@pytest.mark.parametrize("weights", ["i8", "i4"])
def test_quantized_decoder_matches_reference(weights, tmp_path):
    """The decoder with i8 / i4 weights (dequant_matmul, scales through quant keys) on the GPU."""
    from example_modules import load_example

    decoder = load_example("decoder")
    graph_path, model_path = decoder.write(decoder.with_weights(decoder.SIZES["test"], weights), tmp_path)
    sim = assert_matches_reference(oi.ModelLoader.open(model_path), oi.load_graph(graph_path), arch=VK_ARCH,
                                   feeds=[{"token": np.array([t], np.int32)} for t in (3, 17, 200)],
                                   names=("logits", "next"))
    assert sim.validation_messages() == 0


#: four kernels in three dependent stages after the input's upload (two independent softmaxes,
#: their sum, a softmax of it): the command-count and stage-profile tests' step
SOFTMAXES = """
dynamic { a: f32[4, 32]; }
volatile { b: f32[4, 32]; c: f32[4, 32]; d: f32[4, 32]; e: f32[4, 32]; }
block entry {
    op softmax(a, axis=1) >> b;
    op softmax(a, axis=0) >> c;
    op add(b, c) >> d;
    op softmax(d, axis=1) >> e;
}
"""


def test_table_copies_run_as_the_copy_kernel(example):
    """kv_cache_decode's append (q into row t of K) and read (K whole into k_hist) are copies
    between device buffers at aligned offsets: the HAL runs them as its copy kernel (not
    vkCmdCopyBuffer, after which the next kernel waits longer), counted as transfers too; the
    dynamic input's upload from the staging buffer stays a transfer. The rows match NumPy."""
    model, graph = example("kv_cache_decode")
    sim = Simulator(model, graph, arch=VK_ARCH)
    ex = sim.make_executor()
    rows = []
    for step in range(4):                    # the table's four rows
        q = np.arange(16, dtype=np.float32) + 100 * step
        rows.append(q)
        before = sim.vk_counters()
        ex.insert(q=q)
        ex.run_step()
        after = sim.vk_counters()
        assert after["copy_kernels"] - before["copy_kernels"] == 2, step
        assert after["transfers"] - before["transfers"] == 4, step   # + the upload of q, the status word read back
        want = np.zeros((4, 16), np.float32)
        want[:len(rows)] = rows
        np.testing.assert_array_equal(ex.fetch("k_hist"), want)
    assert sim.validation_messages() == 0


def test_step_command_counts(tmp_path):
    """What a step records, counted by the HAL (oi_vk_dispatches / transfers / barriers): the
    input's upload, four kernels, and a barrier only before each command that reads what an
    earlier one since the last barrier wrote: the first softmax (after the upload), the add (after
    both softmaxes, which need none between them) and the last softmax. The steps' commands are
    the same, so only the first is recorded into a command buffer (oi_vk_replays)."""
    graph = oi.graph(SOFTMAXES)
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    sim = Simulator(oi.ModelLoader.open(tmp_path / "empty.oinf"), graph, arch=VK_ARCH, outputs={"e"})
    ex = sim.make_executor()
    a = np.linspace(-2, 2, 128, dtype=np.float32).reshape(4, 32)
    for step in range(3):
        before = sim.vk_counters()
        ex.insert(a=a)
        ex.run_step()
        after = sim.vk_counters()
        assert after["wait_ns"] > before["wait_ns"]
        # the first step records its command buffer, the next ones submit it again
        assert {k: after[k] - before[k] for k in after if k != "wait_ns"} == {
            "submissions": 1, "replays": int(step > 0), "dispatches": 4, "transfers": 1, "copy_kernels": 0,
            "barriers": 3}

    def softmax(x, axis):
        z = np.exp(x - x.max(axis=axis, keepdims=True))
        return z / z.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(ex.fetch("e"), softmax(softmax(a, 1) + softmax(a, 0), 1), rtol=1e-5)
    assert sim.validation_messages() == 0


def test_stage_profile_times_every_stage(tmp_path, monkeypatch):
    """OI_VK_PROFILE=1: the GPU timestamps of test_step_command_counts' steps give one entry per
    stage (the commands between two barriers) with the kernels and transfers it held: the upload,
    the two independent softmaxes, the add, the last softmax; each took device time."""
    monkeypatch.setenv("OI_VK_PROFILE", "1")
    graph = oi.graph(SOFTMAXES)
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    sim = Simulator(oi.ModelLoader.open(tmp_path / "empty.oinf"), graph, arch=VK_ARCH, outputs={"e"})
    ex = sim.make_executor()
    for _ in range(2):                       # recorded, then replayed: both timed
        ex.insert(a=np.ones((4, 32), np.float32))
        ex.run_step()
        stages = sim.vk_stage_profile()
        assert [(k, t) for _, k, t in stages] == [(0, 1), (2, 0), (1, 0), (1, 0)]
        assert all(us > 0 for us, _, _ in stages), stages
    assert sim.validation_messages() == 0


def test_many_executors_in_one_process(example):
    """Executors created one after another (a test suite, a service reloading a model) share the
    process's VkInstance: on an H200 (driver 580) the 31st instance a process created saw no
    device, even with every earlier one destroyed. 40 executors in turn, then 4 alive at once,
    each computing the reference's numbers."""
    model, graph = example("mlp_regression")
    ref = Reference(model, graph).make_executor()
    sim = Simulator(model, graph, arch=VK_ARCH)
    inputs = random_inputs(Reference(model, graph).bound, 5, 0)
    ref.insert(**inputs)
    ref.run_step()
    want = ref.fetch("y")

    def computed(ex):
        ex.insert(**inputs)
        ex.run_step()
        return ex.fetch("y")

    for _ in range(40):
        ex = sim.make_executor()
        np.testing.assert_allclose(computed(ex), want, rtol=1e-5, atol=1e-5)
        del ex                                   # destroyed here (the handle's last reference)
    alive = [sim.make_executor() for _ in range(4)]
    for ex in alive:
        np.testing.assert_allclose(computed(ex), want, rtol=1e-5, atol=1e-5)
    assert sim.validation_messages() == 0
