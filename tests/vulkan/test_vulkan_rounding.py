"""floor / ceil / trunc / round return IEEE results, signed zeros included, on any driver: Mesa's
llvmpipe on an AVX2-only CPU gave trunc(-0.5) = trunc(-0.0) = +0.0 in f64, so the kernels no
longer trust the driver with the sign of a zero. Compared bit for bit with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.sim import Simulator

from .conftest import VK_ARCH
from .test_vulkan_matmul import _model

EDGES = [-0.0, 0.0, -0.5, 0.5, -0.4, 0.4, -0.7, 0.7, -1.0, 1.0, -1.5, 1.5, -2.5, 2.5, -1e-300, 1e-300,
         -4503599627370495.5, 4503599627370495.5, -np.inf, np.inf, -3.75, 3.75, -1e20, 1e20]
N = len(EDGES)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        r = np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
    return np.copysign(r, x)


ORACLE = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away}


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_roundings_keep_the_sign_of_zero(tmp_path, dtype):
    np_dtype = {"f64": np.float64, "f32": np.float32}[dtype]
    vol = " ".join(f"{op}_y: {dtype}[{N}];" for op in ORACLE)
    body = "".join(f"    op {op}(x) >> {op}_y;\n" for op in ORACLE)
    graph = oi.graph(f"dynamic {{ x: {dtype}[{N}]; }}\nvolatile {{ {vol} }}\nblock entry {{\n{body}    return;\n}}\n")
    sim = Simulator(_model(), graph, arch=VK_ARCH)
    ex = sim.make_executor()
    x = np.array(EDGES, np_dtype)
    ex.insert(x=x)
    ex.run_step()
    uint = {"f64": np.uint64, "f32": np.uint32}[dtype]
    for op, fn in ORACLE.items():
        want = fn(x).astype(np_dtype)
        got = ex.fetch(f"{op}_y")
        bad = [(float(a), float(w), float(g)) for a, w, g in zip(x, want, got, strict=True)
               if w.view(uint) != np.asarray(g, np_dtype).view(uint)]
        assert not bad, f"{op} ({dtype}): (x, want, got) {bad}"
    assert sim.validation_messages() in (0, None)


def test_f64_to_integer_casts_round_exactly(tmp_path):
    """cast(f64 -> i64) under each rounding mode, at the halves just below 2^52 and around zero."""
    finite = np.array([e for e in EDGES if abs(e) < 2.0**53] + [-2.5, -3.5, 5.5, 6.5], np.float64)
    n = len(finite)
    modes = {"trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "nearest": np.rint}
    vol = " ".join(f"{m}_i: i64[{n}];" for m in modes)
    body = "".join(f"    op cast(x, to=i64, rounding_mode=\"{m}\") >> {m}_i;\n" for m in modes)
    graph = oi.graph(f"dynamic {{ x: f64[{n}]; }}\nvolatile {{ {vol} }}\nblock entry {{\n{body}    return;\n}}\n")
    sim = Simulator(_model(), graph, arch=VK_ARCH)
    ex = sim.make_executor()
    ex.insert(x=finite)
    ex.run_step()
    for mode, fn in modes.items():
        np.testing.assert_array_equal(ex.fetch(f"{mode}_i"), fn(finite).astype(np.int64), err_msg=mode)
    assert sim.validation_messages() in (0, None)
