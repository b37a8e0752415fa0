"""A consumer block sees the snapshot entry yielded, whatever the yielded variable's kind.

`yield x` hands every consumer a copy of x as entry has it (docs/semantics.md). The reference
used to rebuild a consumer's frame from scratch and re-initialise volatile variables and
temporaries *after* taking the snapshot, so a consumer that begins with `await x` for a volatile x
saw zeros, while the generated C saw the snapshot. Both engines are checked against values
computed here with NumPy, at 1 and 2 threads (consumers run on the pool at 2).
"""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator

GRAPH = """
dynamic { a: f32[4]; }
volatile { x: f32[4]; y: f32[4]; z: f32[4]; }
block entry {
    op add(a, a) >> x;        // x = 2a, volatile: re-initialised to zeros every step
    assign t: f32[4];
    op mul(a, a) >> t;        // t = a^2, a temporary
    yield x, t;
    op mul(x, x) >> y;        // entry goes on with its own x: y = 4a^2
    await x;
    op add(x, a) >> z;        // the consumer's x: z = 4a + a^2 + a
    return;
}
block grow {
    await x;
    op add(x, x) >> x;        // 4a, from the snapshot 2a
    op add(x, t) >> x;        // + a^2, t from the snapshot
    yield x;
}
"""


@pytest.fixture(autouse=True)
def sim_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))


def expected(a: np.ndarray) -> dict[str, np.ndarray]:
    x = 4 * a + a * a
    return {"x": x, "y": 4 * a * a, "z": x + a}


STEPS = [np.array([1, -2, 0.5, 3], np.float32), np.array([0, 7, -1, 0.25], np.float32)]


def check(ex) -> None:
    for a in STEPS:
        ex.insert(a=a)
        ex.run_step()
        for name, want in expected(a).items():
            np.testing.assert_array_equal(ex.fetch(name), want, err_msg=name)


def test_reference_consumer_sees_the_yielded_snapshot():
    check(Reference(None, oi.graph(GRAPH), sizevars={}).make_executor())


@pytest.mark.parametrize("threads", ["1", "2"])
def test_generated_c_consumer_sees_the_yielded_snapshot(threads, monkeypatch):
    monkeypatch.setenv("OI_NUM_THREADS", threads)
    check(Simulator(None, oi.graph(GRAPH), arch="x86_64-generic", sizevars={}).make_executor())
