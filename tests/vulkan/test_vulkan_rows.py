"""The workgroup-per-row kernels (openinfer/targets/vulkan/glsl/rows.py) at shapes the conformance cases do
not reach: rows longer than a workgroup (several elements per invocation, idle invocations in
the last stride), many rows, NaN and -inf rows, ties and NaNs in different invocations' shares
of an argmax, rows whose length the argmax's batches of loads (rows.strided) divide and do not,
and attention over more keys than invocations with masked and causal keys (and scores large
enough that the softmax overflows unless it subtracts the true maximum).
Results are compared with the NumPy reference executor: f32 at the reduction tolerance of
tests/conformance (rtol 1e-4 plus 2e-5 x the largest magnitude), indices exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

import openinfer as oi
from openinfer.sim import Simulator

from .conftest import VK_ARCH
from .test_vulkan_matmul import _model

GRAPH = """
dynamic {
    x: f32[5, 1000]; g: f32[777]; b: f32[777]; y: f32[3, 777];
    a: f32[4, 700]; c: i32[600, 3]; e: f32[3, 4096];
    q: f32[2, 3, 5, 64]; k: f32[2, 3, 300, 64]; v: f32[2, 3, 300, 40]; keep: bool[300];
    qd: f32[4, 1, 64]; kd: f32[2, 70, 64]; vd: f32[2, 70, 300];
}
volatile {
    sm: f32[5, 1000]; lsm: f32[5, 1000]; rn: f32[3, 777]; ln: f32[3, 777];
    amax: i64[4]; amaxl: i64[4]; amin: i64[4]; cmax: i64[3]; emax: i64[3];
    att: f32[2, 3, 5, 40]; catt: f32[2, 3, 5, 40]; datt: f32[4, 1, 300]; hatt: f32[2, 3, 5, 40];
}
block entry {
    op softmax(x) >> sm;
    op log_softmax(x) >> lsm;
    op rms_norm(y, g, eps=1e-6) >> rn;
    op layer_norm(y, g, b, eps=1e-5) >> ln;
    op argmax_axis(a, axis=1) >> amax;
    op argmax_axis(a, axis=1, select_first=false) >> amaxl;
    op argmin_axis(a, axis=1) >> amin;
    op argmax_axis(c, axis=0) >> cmax;
    op argmax_axis(e, axis=1) >> emax;               // 4096: two whole rounds of 8 loads a lane
    op sdpa(q, k, v, keep) >> att;
    op sdpa(q, k, v, causal=true, scale=0.05) >> catt;
    op sdpa(q, k, v, keep, scale=40.0) >> hatt;     // scores of +-400: exp overflows unless the max is right
    op sdpa(qd, kd, vd) >> datt;                     // grouped: two query heads per kv head
    return;
}
"""


def _inputs(rng) -> dict[str, np.ndarray]:
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    x = f(5, 1000) * 4
    x[1, 613] = np.nan                       # a NaN row
    x[2, :] = -np.inf                        # every element -inf: NaN as in the reference
    x[3, 999] = 80.0                         # one dominant element in the last invocation's share
    a = np.round(f(4, 700) * 2)              # small integers: many ties
    a[0, [5, 300, 650]] = 9.0                # the maximum three times, in three invocations' shares
    a[1, [17, 400]] = np.nan                 # NaNs in two shares: the first (or last) wins
    a[2, [100, 356]] = -9.0                  # the minimum twice
    c = rng.integers(-5, 5, (600, 3)).astype(np.int32)
    c[[10, 500], 1] = 99
    e = np.round(f(3, 4096) * 2)
    e[0, 3000] = 50.0                        # in the second round of a lane's batched loads
    e[1, [2049, 4095]] = np.nan              # the first NaN wins, from either round
    e[2, [7, 2055]] = 50.0                   # a tie across rounds of the same lane: the first
    keep = np.ones(300, bool)
    keep[::7] = False
    return {"x": x, "g": f(777), "b": f(777), "y": f(3, 777) * 3 + 1, "a": a, "c": c, "e": e,
            "q": f(2, 3, 5, 64), "k": f(2, 3, 300, 64), "v": f(2, 3, 300, 40), "keep": keep,
            "qd": f(4, 1, 64), "kd": f(2, 70, 64), "vd": f(2, 70, 300)}


@pytest.mark.parametrize("subgroups", [True, False])
def test_row_kernels_match_the_reference(subgroups, tmp_path):
    """With the device's subgroup arithmetic (sdpa's softmax by one subgroup) and, on the same
    device described without it, the shared-memory trees."""
    doc = json.loads(VK_ARCH.read_text())
    doc["features"]["subgroup_ops"] = doc["features"].get("subgroup_ops", False) and subgroups
    arch = tmp_path / VK_ARCH.name
    arch.write_text(json.dumps(doc))
    g = oi.graph(GRAPH)
    sim = Simulator(_model(), g, arch=arch)
    shaders = {n: s.decode() for n, s in sim.plan.files.items() if n.endswith(".comp")}
    per_row = [n for n, s in shaders.items() if "a workgroup of" in s.splitlines()[1]]
    assert len(per_row) == 13, sorted(shaders)
    vec4 = [s for n, s in shaders.items() if n.endswith("sdpa.comp") and "vec4 loads" in s.splitlines()[1]]
    assert len(vec4) == 4 and all(("subgroupMax" in s) == doc["features"]["subgroup_ops"] for s in vec4)
    inputs = _inputs(np.random.default_rng(3))
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    ref = oi.Reference(None, g).make_executor()
    ref.insert(**inputs)
    ref.run_step()
    for name in ("sm", "lsm", "rn", "ln", "att", "catt", "datt", "hatt"):
        got, want = ex.fetch(name).astype(np.float64), ref.fetch(name).astype(np.float64)
        big = np.nanmax(np.abs(want[np.isfinite(want)]))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * big, equal_nan=True, err_msg=name)
    assert np.isnan(ex.fetch("sm")[1]).all() and np.isnan(ex.fetch("sm")[2]).all()
    for name in ("amax", "amaxl", "amin", "cmax", "emax"):
        np.testing.assert_array_equal(ex.fetch(name), ref.fetch(name), err_msg=name)
    # the cases the data was built for, independently of the reference
    assert list(ex.fetch("amax")[[0, 1]]) == [5, 17] and ex.fetch("amaxl")[0] == 650
    assert ex.fetch("amaxl")[1] == 400 and ex.fetch("amin")[2] == 100 and ex.fetch("cmax")[1] == 10
    assert list(ex.fetch("emax")) == [3000, 2049, 7]
    assert sim.validation_messages() in (0, None)
