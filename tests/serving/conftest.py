"""Fixtures of the serving tests: Triton repositories written by `openinfer gen --emit triton`,
one real server per test module (tests/serving/triton_server.py), the NumPy reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from openinfer.api import bind_inputs
from openinfer.reference.executor import ReferenceExecutor

from .triton_server import REPO, TritonServer, server_tree

EXAMPLES = REPO / "examples"


def needs_triton():
    """Skip (with the reason) where no Triton environment was installed."""
    found = server_tree()
    if isinstance(found, str):
        pytest.skip(found)
    pytest.importorskip("tritonclient.http", reason="tritonclient[http,grpc] is not installed")


def example_model(tmp: Path, name: str) -> Path:
    subprocess.run([sys.executable, str(EXAMPLES / "models.py"), "--out", str(tmp), name], check=True,
                   capture_output=True)
    return tmp / f"{name}.oinf"


def emit_triton(graph: Path, model: Path, repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openinfer", "gen", str(graph), "-m", str(model),
                           "--arch", "x86_64-generic", "--emit", "triton", "-o", str(repo), "-q", *args],
                          capture_output=True, text=True, check=True, cwd=REPO)


def reference_steps(graph: Path, model: Path, feeds: list[dict], sizes: dict | None = None) -> list[dict]:
    """The reference's outputs of one run over `feeds` (one dict per step), at `sizes`."""
    _, _, bound = bind_inputs(str(model), graph, sizes or {}, None)
    ref = ReferenceExecutor(bound)
    outs = []
    for feed in feeds:
        ref.insert(**feed)
        ref.run_step()
        outs.append({n: ref.fetch(n) for n, v in bound.vars.items() if v.kind.value == "Volatile"})
    return outs


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("triton")


def start_server(repo: Path, scratch: Path, *models: str) -> TritonServer:
    server = TritonServer(repo, scratch)
    try:
        for m in models:
            server.load(m)
    except BaseException:
        server.stop()
        raise
    return server


def random(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)
