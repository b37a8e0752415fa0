"""lrn's generated kernels against the NumPy reference (itself checked against the conformance
oracle): the portable one (templates/c/ops/lrn.c.j2) for every float type, and the AVX2 / AVX-512
one for f32 (templates/x86/lrn.c.j2: a vector of positions at a time, the last partial vector
under a mask, the power as exp(beta log d)).

The conformance cases' planes are small; these have planes of every size around the vector
widths (7, 8, 9 and 15, 16, 17 positions, 31, 33, a prime 13 x 11), channel counts smaller
than the window, odd and even windows, 2-d to 5-d x, specials (NaN, infinities, signed zeros,
squares that overflow, a zero denominator giving NaN, a negative one), a subnormal bias (the vector log's
subnormal path), AlexNet's two layers (split over the pool at 2 threads), an in-place call, and
the requests the vector kernel leaves to the portable one (f64, f16, bf16, attributes read at run
time, beta = 0). Each program runs on every x86-64 target at 1 and 2 pool threads, and once more
built with AddressSanitizer + UBSan.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from sanitized import SANITIZE, run_sanitized
from synth.test_nn_kernels import program_text, run_and_compare

from openinfer.ops import TensorType, get
from openinfer.reference.kernels import run_kernel
from openinfer.targets.devices import best_host_target

DEVICES = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")


def _cases(rng) -> list[tuple[str, np.ndarray, dict]]:
    """(name, x, attrs); every f32 shape is distinct, so a kernel's doc comment names its case."""
    def v(*shape, dtype=np.float32, scale=1.0):
        return (rng.normal(0, scale, shape)).astype(dtype)
    specials = v(1, 5, 2, 9)
    specials[0, 0, 0, :4] = [np.nan, np.inf, -0.0, 0.0]
    specials[0, 2, 1, 3:6] = [-np.inf, 1e18, -1e20]        # (-1e20)^2 overflows: that window's sum is inf
    zeros = v(1, 3, 17)
    zeros[:, :, 4:13] = 0.0                                 # bias 0: 0 / 0 = NaN there, as powf gives
    zeros[0, 1, 6] = -0.0
    return [
        ("w7", v(2, 6, 7), {"size": 5, "alpha": 1.0}),
        ("w8", v(1, 3, 8), {"size": 5, "alpha": 2.0}),                      # fewer channels than the window
        ("w9", v(1, 4, 3, 3), {"size": 3, "alpha": 1.0, "bias": 2.0}),
        ("w15", v(2, 5, 3, 5), {"size": 4, "alpha": 1.0}),                  # even: one more channel above
        ("w16", v(1, 7, 4, 4), {"size": 7, "alpha": 0.5, "beta": 1.25}),
        ("w17", v(1, 2, 17, scale=2.0), {"size": 9, "alpha": 3.0, "beta": 0.5}),
        ("w31", v(1, 11, 31), {"size": 5, "alpha": 1.0, "beta": 2.0}),
        ("w33", v(3, 13, 3, 11), {"size": 6, "alpha": 1.0, "bias": 0.5}),
        ("prime", v(1, 19, 13, 11, scale=3.0), {"size": 5}),                # the zoo's attributes
        ("nc", v(4, 9), {"size": 3, "alpha": 1.0}),
        ("x5d", v(1, 4, 2, 3, 5), {"size": 3, "alpha": 1.0, "beta": 0.3}),
        ("one", v(2, 3, 2, 9), {"size": 1, "alpha": 1.5}),
        ("specials", specials, {"size": 3, "alpha": 1.0}),
        ("zeros", zeros, {"size": 3, "alpha": 1.0, "bias": 0.0}),
        ("subnormal", v(1, 4, 19, scale=1e-30), {"size": 3, "bias": 1e-40}),
        ("negative", v(1, 3, 2, 11), {"size": 3, "alpha": 1.0, "bias": -1.5}),  # NaN where bias + s < 0
        ("alexnet1", np.abs(v(1, 96, 55, 55, scale=20.0)), {"size": 5}),    # the pool's share
        ("alexnet2", np.abs(v(1, 256, 27, 27, scale=20.0)), {"size": 5}),
        ("pool_sensitive", v(2, 24, 29, 31), {"size": 5, "alpha": 1.0}),
        ("f64", v(2, 5, 3, 7, dtype=np.float64), {"size": 5, "alpha": 1.0}),
        ("f64_even", v(1, 3, 17, dtype=np.float64), {"size": 2, "alpha": 2.0, "beta": 0.5}),
        ("f16", v(1, 6, 3, 3, dtype=np.float16), {"size": 3, "alpha": 1.0}),
        ("beta0", v(1, 3, 2, 13), {"size": 3, "alpha": 1.0, "beta": 0.0}),
    ]


#: cases whose f32 request the AVX targets leave to the portable kernel
PORTABLE = {"beta0"}


def _dtype(x: np.ndarray) -> str:
    return {np.float32: "f32", np.float64: "f64", np.float16: "f16"}[x.dtype.type]


def program(rng) -> tuple[str, dict[str, np.ndarray], list[str]]:
    """Every case in one program, plus an in-place call and one with alpha and beta read at run
    time (scalar variables: the portable kernel on every target)."""
    dyn, vol, body, inputs, outs = [], [], [], {}, []
    for name, x, attrs in _cases(rng):
        t = _dtype(x)
        inputs[f"{name}_x"] = x
        shape = ", ".join(map(str, x.shape))
        dyn.append(f"{name}_x: {t}[{shape}];")
        vol.append(f"{name}: {t}[{shape}];")
        body.append(f"op lrn({name}_x, {', '.join(f'{a}={v!r}' for a, v in attrs.items())}) >> {name};")
        outs.append(name)
    inputs["inplace"] = rng.normal(0, 1, (2, 7, 3, 4)).astype(np.float32)
    dyn.append("inplace: f32[2, 7, 3, 4];")
    body.append("op lrn(inplace, size=3, alpha=1.0) >> inplace;")
    inputs.update(rt_x=rng.normal(0, 1, (1, 5, 2, 9)).astype(np.float32), rt_alpha=np.float32(0.8),
                  rt_beta=np.float32(0.6))
    dyn += ["rt_x: f32[1, 5, 2, 9];", "rt_alpha: f32;", "rt_beta: f32;"]
    vol.append("rt: f32[1, 5, 2, 9];")
    body.append("op lrn(rt_x, size=4, alpha=rt_alpha, beta=rt_beta, bias=1.5) >> rt;")
    outs += ["inplace", "rt"]
    return program_text(dyn, vol, body), inputs, outs


def check(tmp_path: Path, device: str, build_options=None) -> None:
    text, inputs, outs = program(np.random.default_rng(3))
    sim = run_and_compare(tmp_path / "lrn.oinf", device, text, inputs, outs, build_options=build_options)
    # which kernel each f32 case took: the vector one (its power through oiv_log) or the portable one
    kernels = next(sim.project.glob("*_kernels.c")).read_text()
    chunks = kernels.split("/* lrn of ")[1:]             # each from a kernel's doc comment to the next one's
    vector = {chunk[:chunk.index("]") + 1] for chunk in chunks if "oiv_log(d)" in chunk}
    f32 = {name: f"f32{list(x.shape)}" for name, x, _ in _cases(np.random.default_rng(3)) if x.dtype == np.float32}
    want = set() if device == "x86_64-generic" else {s for n, s in f32.items() if n not in PORTABLE}
    want |= {"f32[2, 7, 3, 4]"} if device != "x86_64-generic" else set()     # the in-place call
    assert vector == want, device


@pytest.fixture(autouse=True)
def sim_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("device", DEVICES)
def test_lrn_kernels_match_reference(tmp_path, device):
    check(tmp_path, device)


def test_the_cases_reach_what_they_are_for():
    """The shapes and values do what the docstring says: plane sizes around both vector widths,
    windows wider than the channels, specials that reach the output, AlexNet's layers large
    enough for the pool (openinfer/targets/c/kernels/nn.py `_par_rows` at _PAR_ELEMS_MATH)."""
    from openinfer.targets.c.kernels.nn import _PAR_ELEMS_MATH

    cases = {name: (x, attrs) for name, x, attrs in _cases(np.random.default_rng(3))}
    planes = {int(np.prod(x.shape[2:])) for x, _ in cases.values() if x.dtype == np.float32}
    assert {7, 8, 9, 15, 16, 17, 31, 33} <= planes
    assert any(x.shape[1] < a["size"] for x, a in cases.values())
    for name in ("alexnet1", "alexnet2", "pool_sensitive"):
        assert cases[name][0].size >= _PAR_ELEMS_MATH
    x, attrs = cases["specials"]
    inf = get("lrn").infer([_tt(x)], attrs)
    y = run_kernel(get("lrn"), [x], inf.attrs, inf)
    assert np.isnan(y).sum() > 1 and (y == 0).any()                  # NaN spreads over its window
    x, attrs = cases["zeros"]
    inf = get("lrn").infer([_tt(x)], attrs)
    assert np.isnan(run_kernel(get("lrn"), [x], inf.attrs, inf)).any()


def _tt(x: np.ndarray) -> TensorType:
    from openinfer.dtypes import lookup

    return TensorType(lookup(_dtype(x)), x.shape)


def _sanitizer_child(tmp: str) -> int:
    """Runs in the child interpreter (libasan preloaded)."""
    os.environ["OI_CACHE_DIR"] = str(Path(tmp) / "cache")
    for device in dict.fromkeys(("x86_64-generic", best_host_target())):   # the widest this CPU runs
        check(Path(tmp), device, build_options=SANITIZE)
    print("sanitized lrn kernels: ok", flush=True)
    return 0


def test_lrn_kernels_clean_under_asan_and_ubsan(tmp_path):
    run_sanitized(__file__, "_sanitizer_child", str(tmp_path))
