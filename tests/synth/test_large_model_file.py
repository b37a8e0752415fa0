"""A model file and an arena large enough for the HAL's 2 MiB-page paths (hal/src/oi_hal.c):
oi_oinf_open reads a file of >= 4 MiB into private memory on 2 MiB pages instead of mapping it,
and oi_aligned_alloc puts buffers of >= 4 MiB on 2 MiB boundaries; a descriptor preferring
`weights_memory: "mapped"` (the Arm descriptors) maps the file instead. Every byte must arrive: the
weight spans the whole file but its last bytes, a small tensor sits after it (the file's length
is no multiple of 2 MiB), and a 4.4 MiB intermediate lives in the arena. Outputs against NumPy,
on the portable C target (every host) and on the host's widest ISA."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.dtypes import lookup
from openinfer.sim import Simulator
from openinfer.targets.devices import best_host_target

REPO = Path(__file__).resolve().parents[2]
TARGETS = sorted({"x86_64-generic", best_host_target()})

GRAPH = """
dynamic { x: f32[1, 1100]; }
constant { w: f32[1100, 1024]; tail: f32[3]; }
volatile { h: f32[1100, 1024]; y: f32[1, 1024]; z: f32[3]; }
block entry {
    op relu(w) >> h;
    op matmul(x, h) >> y;
    op add(tail, tail) >> z;
    return;
}
"""


@pytest.mark.parametrize("weights_memory", ["huge_pages", "mapped"])
@pytest.mark.parametrize("arch", TARGETS)
def test_large_model_file_and_arena(tmp_path, monkeypatch, arch, weights_memory):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    if weights_memory == "mapped":
        doc = json.loads((REPO / "devices" / f"{arch}.json").read_text())
        doc.setdefault("preferences", {})["weights_memory"] = "mapped"
        arch = tmp_path / f"{arch}-mapped.json"
        arch.write_text(json.dumps(doc))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1100, 1024), dtype=np.float32)
    tail = np.array([1.5, -2.25, 1e-3], np.float32)
    x = rng.standard_normal((1, 1100), dtype=np.float32)
    path = tmp_path / "large.oinf"
    oi.write_oinf(path, {"w": w, "tail": tail})
    assert path.stat().st_size >= 4 << 20 and path.stat().st_size % (2 << 20)
    sim = Simulator(oi.ModelLoader.open(path), oi.graph(GRAPH), arch=arch)
    ex = sim.make_executor()
    if Path("/proc/self/maps").exists():    # Linux: the file read into its own region, or mapped
        size = path.stat().st_size
        want = -(-size // (2 << 20)) * (2 << 20)
        regions = [line.split() for line in Path("/proc/self/maps").read_text().splitlines()]
        spans = {int(r[0].split("-")[1], 16) - int(r[0].split("-")[0], 16) for r in regions
                 if r[1] == "r--p" and len(r) == 5}
        mapped = [r for r in regions if len(r) == 6 and r[5] == str(path) and r[1] == "r--p"]   # (ModelLoader: r--s)
        if weights_memory == "mapped":
            assert mapped
        else:
            assert want in spans and not mapped
    ex.insert(x=x)
    ex.run_step()
    h = np.maximum(w, 0).astype(np.float64)
    rows = [compare("y", lookup("f32"), (x.astype(np.float64) @ h).astype(np.float32), ex.fetch("y"),
                    np.abs(x.astype(np.float64)) @ np.abs(h))]
    assert all(r.ok for r in rows), table(rows)
    np.testing.assert_array_equal(ex.fetch("z"), tail * 2)
