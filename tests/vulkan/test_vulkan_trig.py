"""oi_trig.glsl's argument reduction (templates/vulkan/glsl/oi_trig.glsl): sin, cos and tan of f32
and f64 arguments over the whole exponent range, of arguments next to large multiples of pi/2
(where |x| * 2/pi needs its most fraction bits: the reduced argument is tiny) and of the double
that comes closest to one (6381956970095103 * 2^797), on lavapipe against the conformance oracle
(Python's libm, in double), with the validation layer on and silent."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conformance.cases import ConformanceCase, assert_matches, tolerance
from conformance.oracle import expected

from openinfer import dtypes as dt

from .test_vulkan_conformance import run_chunk


def _arguments(t, rng: np.random.Generator) -> np.ndarray:
    top = {"f32": 127, "f64": 1023}[t.name]
    wide = rng.choice([-1.0, 1.0], 600) * np.exp2(rng.uniform(-2, top + 0.99, 600))
    # the nearest t values to k pi/2: k up to 2^(top - 1)
    k = np.floor(np.exp2(rng.uniform(0, top - 1, 300)))
    near = (k * (math.pi / 2)).astype(t.np_dtype)
    near = np.concatenate([near, np.nextafter(near, np.inf), np.nextafter(near, -np.inf)])
    hard = [6381956970095103 * 2.0 ** 797] if t.name == "f64" else [np.float32(2.0 ** 126).item()]
    x = np.concatenate([wide, near.astype(np.float64), hard]).astype(t.np_dtype)
    return x[np.isfinite(x)]


@pytest.mark.parametrize("t", [dt.F32, dt.F64], ids=lambda t: t.name)
def test_trig_reduction_over_the_whole_range(t):
    x = _arguments(t, np.random.default_rng(11))
    cases = [ConformanceCase(f"{op}/{t.name}/trig/range", op, "normal", (x,), (t,), {}, t, x.shape, tolerance(op, t))
             for op in ("sin", "cos", "tan")]
    results, messages = run_chunk(cases, f"trig_{t.name}")
    for case in cases:
        got = results[case.id]
        if isinstance(got, BaseException):
            raise got
        assert_matches(case, got, expected(case))
    assert messages == 0
