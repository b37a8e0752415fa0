"""tools/bench/vulkan_bench.py: every matmul of a step reads operands of its own (a GEMV row whose
GEMVs shared one W found part of it in the GPU's L2 and reported more GB/s than the memory
delivers), the GEMV rows refuse a step whose weights the L2 could hold a good part of, and the
rows, shrunk, match NumPy on lavapipe. No timing is asserted."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

import openinfer as oi
from openinfer.ir import nodes
from openinfer.ir.nodes import MemoryKind
from openinfer.targets import devices

from .conftest import LAVAPIPE, REPO

sys.path.insert(0, str(REPO / "tools" / "bench"))

import vulkan_bench  # noqa: E402

H200 = REPO / "devices" / "nvidia-h200.json"


def _matmuls(text: str) -> tuple[list[nodes.Op], dict[str, int]]:
    """The graph's matmul ops and the bytes of each constant."""
    g = oi.graph(text)
    ops = [n for b in g.blocks.values() for n in b.nodes if isinstance(n, nodes.Op) and n.op == "matmul"]
    consts = {v.name: int(np.prod([int(d) for d in v.dims])) * v.dtype.bits // 8
              for v in g.vars.values() if v.kind is MemoryKind.CONSTANT}
    return ops, consts


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_each_gemv_of_a_step_streams_a_w_of_its_own_beyond_the_l2(dt):
    text, step_bytes = vulkan_bench.gemv_graph(10, dt)
    ops, consts = _matmuls(text)
    weights = [op.inputs[1].name for op in ops]
    assert len(ops) == 10 and len(set(weights)) == 10 and set(weights) <= set(consts)
    assert step_bytes == sum(consts[w] for w in weights)
    l2 = devices.load(H200).doc["memory"]["l2_bytes"]
    assert step_bytes >= vulkan_bench.L2_MARGIN * l2


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_each_gemm_of_a_step_reads_operands_of_its_own(dt):
    ops, consts = _matmuls(vulkan_bench.gemm_graph(vulkan_bench.gemm_reps(10), dt))
    operands = [name for op in ops for name in (op.inputs[0].name, op.inputs[1].name)]
    assert len(ops) == 2 and len(set(operands)) == 4 and set(operands) <= set(consts)


def _bench(tmp_path, arch, reps: int) -> vulkan_bench.Bench:
    args = argparse.Namespace(arch=str(arch), reps=reps, steps=1, repeat=1)
    return vulkan_bench.Bench(args, tmp_path)


def test_gemv_row_refuses_a_step_the_l2_would_serve(tmp_path):
    # 2 f16 GEMVs stream 268 MB, under 8x the H200 descriptor's 60 MB L2
    with pytest.raises(ValueError, match="--reps 2: .* under 8x the device's L2"):
        _bench(tmp_path, H200, 2).gemv(True)


def test_rows_shrunk_match_numpy_on_lavapipe(tmp_path, monkeypatch):
    monkeypatch.setattr(vulkan_bench, "GEMV_K", 96)
    monkeypatch.setattr(vulkan_bench, "GEMV_N", 40)
    monkeypatch.setattr(vulkan_bench, "GEMM_M", 48)
    bench = _bench(tmp_path, LAVAPIPE, 5)
    for f16, tol in ((False, 1e-5), (True, 1e-2)):
        res = bench.gemv(f16)
        assert res["rel_err"] < tol and res["step_weight_mb"] == 5 * 96 * 40 * (2 if f16 else 4) / 1e6
    assert bench.gemm(False)["rel_err"] < 1e-5


def test_chain_row_steps_are_chains_of_dependent_commands(tmp_path):
    """Every command of the chain row's steps waits for the one before (a barrier each), so its
    figures are the cost of a dependent command."""
    res = _bench(tmp_path, LAVAPIPE, 1).chain(steps=2)
    assert res["transfers_barriers_per_step"] == res["kernels_barriers_per_step"] == 66
    assert res["transfers_device_us_per_command"] > 0 and res["kernels_host_us_per_command"] > 0


def test_decoder_stages_row_accounts_for_every_command(tmp_path, monkeypatch):
    """The decoder-stages row (the test-size decoder here): one timed entry per stage, whose
    kernels and transfers add up to what the HAL counted for the step."""
    monkeypatch.setattr(vulkan_bench, "DECODER_SIZE", "test")
    res = _bench(tmp_path, LAVAPIPE, 1).decoder_stages("f32", position=3)
    stages = [res[f"stage{i:03d}"] for i in range(res["stages"])]
    parsed = [(float(s.split()[0]), int(s.split()[2]), int(s.split()[4])) for s in stages]
    assert sum(k for _, k, _ in parsed) == res["dispatches"] and sum(t for _, _, t in parsed) == res["transfers"]
    assert res["stages"] > 8 and all(us > 0 for us, _, _ in parsed)
    # the stages are printed to 0.01 us: their sum is the total within half of that per stage
    assert abs(sum(us for us, _, _ in parsed) - res["total_us"]) <= 0.005 * len(parsed) + 1e-6 * res["total_us"]


def test_decoder_row_reports_replayed_and_recording_passes(tmp_path, monkeypatch):
    """The decoder row (the test-size decoder here) reports its best pass and its first one
    (every step recorded afresh), one submission a token."""
    monkeypatch.setattr(vulkan_bench, "DECODER_SIZE", "test")
    bench = _bench(tmp_path, LAVAPIPE, 1)
    bench.args.repeat = 2
    res = bench.decoder("f32")
    assert res["tokens_per_s"] > 0 and res["recording_tokens_per_s"] > 0
    assert res["submissions_per_token"] == 1 and res["dispatches_per_token"] > 8
