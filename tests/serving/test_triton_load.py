"""A bounded load run on a real Triton (tools/bench/triton_load.py): 2,000 requests from 8
concurrent clients, none failing, sampled outputs equal to the reference; then the model
instance's process killed mid-run: the failures are counted, the helper reloads the model
(explicit model control) and requests succeed again. Figures are printed, not asserted."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import EXAMPLES, REPO, emit_triton, example_model, needs_triton, random, reference_steps, start_server

sys.path.insert(0, str(REPO / "tools" / "bench"))

import triton_load  # noqa: E402

GRAPH = EXAMPLES / "mlp_regression.oig"
MODEL = "mlp_regression"


@pytest.fixture(scope="module")
def server(scratch):
    needs_triton()
    model = example_model(scratch, MODEL)
    repo = scratch / "repo"
    emit_triton(GRAPH, model, repo, "--dynamic", "B=64")
    with start_server(repo, scratch, MODEL) as s:
        s.model = model
        yield s


@pytest.fixture(scope="module")
def workload(server):
    """Sixteen requests of 1..16 rows, each with its reference output; request n sends n % 16."""
    rng = np.random.default_rng(3)
    xs = [random(rng, (rows, 16)) for rows in range(1, 17)]
    want = [reference_steps(GRAPH, server.model, [{"x": x}], {"B": x.shape[0]})[0]["y"] for x in xs]

    def request(n):
        k = n % len(xs)

        def check(outputs):
            np.testing.assert_allclose(outputs["y"], want[k], rtol=1e-5, atol=1e-5)
        return {"x": xs[k]}, (check if n % 25 == 0 else None)
    return request


def _stub_pids(model: str) -> list[int]:
    """The Python backend processes serving `model` (their command line names its model.py)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"triton_python_backend_stub") and any(
                a.endswith(f"/{model}/1/model.py".encode()) for a in argv):
            pids.append(int(entry.name))
    return pids


def test_load_run_has_no_failures(server, workload):
    report = triton_load.run_load(server.grpc_url, MODEL, workload, ["y"], requests=2000, clients=8)
    print(report.text())
    assert report.failed == 0 and report.succeeded == 2000
    assert report.checked == 80
    assert report.gap_s is None and 0 < report.p50_ms <= report.p99_ms


def test_a_killed_instance_is_detected_and_reloaded(server, workload):
    stubs = _stub_pids(MODEL)
    assert stubs, "no Python backend process found for the model"
    killed = []

    def kill_once(n):
        if n == 300 and not killed:
            killed.append(n)
            for pid in stubs:
                os.kill(pid, signal.SIGKILL)

    report = triton_load.run_load(server.grpc_url, MODEL, workload, ["y"], requests=1000, clients=8,
                                  on_request=kill_once, on_failure=lambda: server.reload(MODEL))
    print(report.text())
    assert killed and report.failed > 0
    assert report.gap_s is not None and report.gap_s < 120
    assert report.succeeded + report.failed == 1000 and report.checked > 0
    assert _stub_pids(MODEL) and not set(_stub_pids(MODEL)) & set(stubs)     # a new instance serves
    after = triton_load.run_load(server.grpc_url, MODEL, workload, ["y"], requests=50, clients=2)
    assert after.failed == 0
