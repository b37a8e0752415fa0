"""A fused element-wise chain that begins with `fill` or `arange` (which read only their input's
shape): the fused kernel must not load the input's elements (an unused variable: -Werror failed
the build of an imported decode step whose mask zeros are filled at run time), and the chain
matches the reference on every CPU target the host runs, under GCC and Clang."""

from __future__ import annotations

import numpy as np
import pytest
from compilers import TOOLCHAINS

import openinfer as oi
from openinfer.targets.devices import best_host_target

GRAPH = """
dynamic { x: f32[3, 37]; n: i32[3, 37]; }
volatile { z: f32[3, 37]; y: f32[3, 37]; c: i32[3, 37]; m: i32[3, 37]; }
block entry {
    op fill(z, value=0.5) >> z;
    op add(x, z) >> y;
    op arange(c, start=2, axis=1) >> c;
    op mul(c, n) >> m;
}
"""


@pytest.mark.parametrize("toolchain", [t for t in TOOLCHAINS if t.name in ("gcc-O3", "clang-O2")],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("arch", sorted({"x86_64-generic", best_host_target()}))
def test_fill_and_arange_chains_build_clean_and_match(arch, toolchain, tmp_path, monkeypatch):
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    graph = oi.graph(GRAPH)
    rng = np.random.default_rng(3)
    feed = {"x": rng.normal(size=(3, 37)).astype(np.float32), "n": rng.integers(-9, 9, (3, 37)).astype(np.int32)}
    with toolchain.active():
        sim = oi.Simulator(None, graph, arch=arch, sizevars={}, outputs={"y", "m"})
    ex = sim.make_executor()
    ex.insert(**feed)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), feed["x"] + np.float32(0.5))
    np.testing.assert_array_equal(ex.fetch("m"), (np.arange(37, dtype=np.int32) + 2)[None, :] * feed["n"])
