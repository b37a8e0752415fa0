"""The DSL conveniences real graphs need, through the reference and the generated C (generic and
the widest target this CPU runs; tests/vulkan/test_vulkan_dsl_conveniences.py runs the same graph
on Vulkan): casts to and from bool, comparisons that broadcast (a vector, a scalar variable),
`arange` (integer and float counts, N-d, a run-time start), slice bounds given by size variables
and `dynamic_slice` at run-time starts inside, before and past the end of a KV-cache-like table.
Every output is checked against NumPy written out here, over several steps with new positions."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.targets.devices import best_host_target

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from synth.test_c_conformance import empty_model  # noqa: E402

REPO = TESTS.parent
SIZES = {"B": 3, "S": 4, "T": 6}

GRAPH = """
dynamic {
    x: f32[B, 6]; y: f32[6]; lim: f32; ids: i64[B, S]; bits: i8[B, 6];
    pos: i32; upos: u16; cache: f16[T, 4];
}
volatile {
    lt_v: bool[B, 6]; ge_s: bool[B, 6]; eq_i: bool[B, S];
    xb: bool[B, 6]; bf: f32[B, 6]; bi: i64[B, 6]; bb: bool[B, 6]; bh: f16[B, 6];
    count: i64[S]; grid: f32[B, S]; frac: f16[7]; down: u8[5]; at_pos: i32[4];
    head: f32[2, 6]; tail: f32[B, 2];
    row: f16[1, 4]; win: f16[2, 2]; urow: f16[T, 1];
}
block entry {
    op lt(x, y) >> lt_v;                          // [B, 6] < [6]
    op ge(x, lim) >> ge_s;                        // against a scalar variable
    op cast(x, to=bool) >> xb;
    op cast(xb, to=f32) >> bf;
    op cast(xb, to=i64) >> bi;
    op cast(bits, to=bool) >> bb;
    op cast(bb, to=f16) >> bh;
    op arange(count, start=2, step=3) >> count;
    op eq(ids, count) >> eq_i;                    // [B, S] == [S]
    op arange(grid, start=-0.5, step=0.1) >> grid;
    op arange(frac, start=1.0, step=0.1) >> frac;
    op arange(down, start=3, step=255) >> down;   // u8 wraps: 3, 2, 1, 0, 255
    op arange(at_pos, start=pos, step=-1) >> at_pos;
    op slice(x, starts=[S], ends=[6], axes=[1]) >> tail;   // x[:, S:6]
    op slice(x, starts=[1], ends=[B]) >> head;            // x[1:B]
    op dynamic_slice(cache, pos, sizes=[1], axes=[0]) >> row;
    op dynamic_slice(cache, pos, pos, sizes=[2, 2]) >> win;
    op dynamic_slice(cache, upos, sizes=[1], axes=[1]) >> urow;
    return;
}
"""


def step_inputs(rng: np.random.Generator, pos: int, upos: int) -> dict[str, np.ndarray]:
    x = rng.standard_normal((3, 6)).astype(np.float32)
    x[0, :3] = [0.0, -0.0, np.nan]
    y = rng.standard_normal(6).astype(np.float32)
    y[2] = np.nan
    ids = rng.integers(0, 12, (3, 4)).astype(np.int64)
    ids[1] = [2, 5, 8, 11]                        # every position equal in one row
    bits = rng.integers(-2, 3, (3, 6)).astype(np.int8)
    cache = (np.arange(24).reshape(6, 4) / 4).astype(np.float16)
    return {"x": x, "y": y, "lim": np.float32(x[1, 1]), "ids": ids, "bits": bits, "pos": np.int32(pos),
            "upos": np.uint16(upos), "cache": cache}


def expected(i: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, cache, pos = i["x"], i["cache"], int(i["pos"])
    row = min(max(pos, 0), 5)                     # clamped: the window stays inside the 6 rows
    win0, win1 = min(max(pos, 0), 4), min(max(pos, 0), 2)   # 6 rows, 4 columns, a 2x2 window
    count = 2 + 3 * np.arange(4)
    return {
        "lt_v": x < i["y"], "ge_s": x >= i["lim"],
        "xb": x != 0, "bf": (x != 0).astype(np.float32), "bi": (x != 0).astype(np.int64),
        "bb": i["bits"] != 0, "bh": (i["bits"] != 0).astype(np.float16),
        "count": count, "eq_i": i["ids"] == count,
        "grid": np.broadcast_to((-0.5 + np.arange(4) * 0.1).astype(np.float32), (3, 4)),
        "frac": (1.0 + np.arange(7) * 0.1).astype(np.float16),
        "down": np.array([3, 2, 1, 0, 255], np.uint8),
        "at_pos": (pos - np.arange(4)).astype(np.int32),
        "tail": x[:, 4:6], "head": x[1:3],
        "row": cache[row:row + 1], "win": cache[win0:win0 + 2, win1:win1 + 2],
        "urow": cache[:, min(int(i["upos"]), 3):][:, :1],
    }


#: positions inside, before (clamped to 0) and past the end (clamped to the last window)
STEPS = ((1, 0), (-3, 2), (9, 70), (5, 3))


def check_steps(executor) -> None:
    rng = np.random.default_rng(17)
    for pos, upos in STEPS:
        inputs = step_inputs(rng, pos, upos)
        executor.insert(**inputs)
        executor.run_step()
        for name, want in expected(inputs).items():
            got = executor.fetch(name)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} at pos={pos}, upos={upos}")


def test_reference() -> None:
    check_steps(oi.Reference(None, oi.graph(GRAPH), sizevars=SIZES).make_executor())


@pytest.mark.parametrize("device", sorted({"x86_64-generic", best_host_target()}))
def test_generated_c(device: str) -> None:
    from openinfer.sim import Simulator

    sim = Simulator(empty_model(), oi.graph(GRAPH), arch=REPO / "devices" / f"{device}.json", sizevars=SIZES)
    check_steps(sim.make_executor())


def test_sizevar_bounds_are_static_and_names_are_checked() -> None:
    g = oi.graph(GRAPH)
    bound = oi.Reference(None, g, sizevars=SIZES)
    assert bound is not None
    bad = GRAPH.replace("starts=[S]", "starts=[pos]")
    with pytest.raises(oi.OpenInferError, match=r"<string>:\d+:\d+: .*`starts`: `pos` is not a size variable") as err:
        oi.Reference(None, oi.graph(bad), sizevars=SIZES)
    assert "dynamic_slice" in str(err.value)
    with pytest.raises(oi.OpenInferError, match="size 7 does not fit axis 0 of length 6"):
        oi.Reference(None, oi.graph(GRAPH.replace("sizes=[1], axes=[0]", "sizes=[7], axes=[0]")), sizevars=SIZES)


#: a broadcasting comparison and a bool cast inside element-wise chains the compiler fuses (only
#: the chains' last values are outputs)
FUSED = """
dynamic { x: f32[3, 5]; y: f32[5]; t: f32; }
volatile { m: bool[3, 5]; mf: f32[3, 5]; out: f32[3, 5]; g: bool[3, 5]; gi: i32[3, 5]; out2: i32[3, 5]; }
block entry {
    op lt(x, y) >> m;
    op cast(m, to=f32) >> mf;
    op mul(mf, x) >> out;
    op ge(x, t) >> g;
    op cast(g, to=i32) >> gi;
    op add(gi, gi) >> out2;
    return;
}
"""


def check_fused(arch) -> None:
    from openinfer.sim import Simulator

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    x[0, 0], y[1] = np.nan, np.nan
    t = np.float32(x[2, 2])
    ex = Simulator(empty_model(), oi.graph(FUSED), arch=arch, outputs=["out", "out2"]).make_executor()
    ex.insert(x=x, y=y, t=t)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("out"), (x < y).astype(np.float32) * x)
    np.testing.assert_array_equal(ex.fetch("out2"), 2 * (x >= t).astype(np.int32))


@pytest.mark.parametrize("device", sorted({"x86_64-generic", best_host_target()}))
def test_fused_chains_in_generated_c(device: str) -> None:
    check_fused(REPO / "devices" / f"{device}.json")
