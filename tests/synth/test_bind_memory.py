"""NAME_bind (SimExecutor.bind): inputs and outputs in caller memory, checked against NumPy on every
CPU target this host runs (tests/vulkan/test_vulkan_bind.py runs the same checks on Vulkan): a bound
input is read in place by every step, a bound output is written there, set() of a bound variable,
overlapping, misaligned or wrong-sized memory and variables that cannot be bound are refused with
their names, and unbinding puts the variable back in its own buffer."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import ExecutionError
from openinfer.sim import Simulator

#: x and w: inputs read only (bindable); s: an input the graph writes (not bindable); y, z:
#: observable outputs (bindable); n: a run-time-sized input (not bindable)
GRAPH = """
dynamic { x: f32[5, 7]; w: f32[7, 3]; s: f32[5, 7]; n: f32[R, 3]; }
volatile { y: f32[5, 3]; z: f32[5, 7]; q: f32[R, 3]; }
block entry {
    op matmul(x, w) >> y;
    op relu(s) >> s;
    op add(x, s) >> z;
    op exp(n) >> q;
    return;
}
"""


@pytest.fixture(autouse=True)
def sim_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))


def check_bind(arch, tmp_path) -> None:
    rng = np.random.default_rng(4)
    oi.write_oinf(tmp_path / "r.oinf", tensors={}, sizevars={"R": 1})
    ex = Simulator(oi.ModelLoader.open(tmp_path / "r.oinf"), oi.graph(GRAPH), arch=arch,
                   dynamic={"R": 4}).make_executor()
    x = rng.standard_normal((5, 7)).astype(np.float32)
    w = rng.standard_normal((7, 3)).astype(np.float32)
    y, z = np.full((5, 3), np.nan, np.float32), np.full((5, 7), np.nan, np.float32)
    for name, array in (("x", x), ("w", w), ("y", y), ("z", z)):
        ex.bind(name, array)
    n = rng.standard_normal((4, 3)).astype(np.float32)

    def step():
        s = rng.standard_normal((5, 7)).astype(np.float32)
        ex.insert(s=s, n=n)
        ex.run_step()
        np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(z, x + np.maximum(s, 0))
        np.testing.assert_array_equal(ex.fetch("y"), y)       # get() reads the bound memory

    step()
    x[:] = rng.standard_normal((5, 7))       # the caller writes a bound input in place: no set()
    step()

    def refused(fragments, fn, *args):
        with pytest.raises(ExecutionError) as err:
            fn(*args)
        for f in fragments:
            assert f in str(err.value), str(err.value)

    refused(["`x`", "bound"], ex.insert, "x", x)
    refused(["cannot be bound"], ex.bind, "s", np.zeros((5, 7), np.float32))     # the graph writes s
    refused(["cannot be bound"], ex.bind, "q", np.zeros((4, 3), np.float32))     # run-time rows
    shared = np.zeros(60, np.float32)
    ex.bind("y", shared[:15].reshape(5, 3))
    refused(["`z`", "overlaps", "`y`"], ex.bind, "z", shared[10:45].reshape(5, 7))
    odd = np.frombuffer(bytearray(5 * 7 * 4 + 1), np.float32, count=35, offset=1).reshape(5, 7)
    refused(["`z`", "aligned to 4"], ex.bind, "z", odd)
    refused(["float32[5, 3]"], ex.bind, "y", np.zeros((3, 5), np.float32))

    # unbound: back in the program's own buffer, which holds no input until set again
    ex.bind("y", y)
    ex.bind("x", None)
    refused(["`x`", "not set"], ex.run_step)
    x2 = rng.standard_normal((5, 7)).astype(np.float32)
    ex.insert(x=x2, s=np.ones((5, 7), np.float32), n=n)
    ex.bind("z", None)
    ex.run_step()
    np.testing.assert_allclose(y, x2.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ex.fetch("z"), x2 + 1)


@pytest.mark.parametrize("arch", ["x86_64-generic", "x86_64-avx2", "x86_64-avx512"])
def test_bind(arch, tmp_path):
    check_bind(arch, tmp_path)
