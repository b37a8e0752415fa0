"""Long reductions in f16 / bf16 / f8: the defined order, bit for bit, through the reference and the C.

Without a wider accumulator, sum_axis / mean_axis and matmul's inner dimension add sequentially in
row-major order, each step in f32 and the running value rounded to the narrow type after every add
(openinfer/reference/kernels/reduce.py). The conformance cases reduce at most 24 elements, where an
accumulator that skips the rounding often lands on the same value; over thousands of elements it
does not (2000 f16 values in [0, 1): 998 against 1004 unrounded). The expected values here come from
a plain loop that rounds with its own code (NumPy's float16, bit arithmetic for bf16, frexp for f8),
not openinfer.numerics; the reference and each runnable C target must equal it exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_c_conformance import REPO, cache_dir, empty_model

from openinfer.reference.executor import Reference
from openinfer.sim import Simulator

N_SUM = 2000          # elements per sum / mean row
K_MATMUL = 1500       # matmul inner dimension
TYPES = ("f16", "bf16", "f8")


def round_to(t: str, x: np.float32) -> np.float32:
    """An f32 value rounded to nearest-even in `t`, as an f32 (independent of openinfer.numerics)."""
    x = np.float32(x)
    if t == "f16":
        return np.float32(np.float16(x))
    if t == "bf16":
        u = int(np.array(x, np.float32).view(np.uint32))
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return np.array(u, np.uint32).view(np.float32)[()]
    if x == 0:                               # f8: E5M2, 3 significant bits, normal exponents from -14
        return x
    _, e = np.frexp(np.float64(x))
    q = max(int(e) - 1, -14) - 2
    return np.float32(np.round(np.float64(x) / 2.0 ** q) * 2.0 ** q)


def values(t: str, rng: np.random.Generator, shape: tuple[int, ...], positive: bool) -> np.ndarray:
    x = rng.uniform(0.0, 1.0, shape) if positive else rng.normal(0.0, 1.0, shape)
    return np.vectorize(lambda v: round_to(t, np.float32(v)), otypes=[np.float32])(x.astype(np.float32))


def folded(t: str, terms: np.ndarray) -> np.float32:
    """0 + terms[0] + terms[1] + ..., each add in f32, the running value rounded to `t` after each."""
    s = np.float32(0.0)
    for v in terms:
        s = round_to(t, np.float32(s + np.float32(v)))
    return s


GRAPH = "\n".join([
    "dynamic { " + " ".join(f"x_{t}: {t}[2, {N_SUM}]; a_{t}: {t}[2, {K_MATMUL}]; b_{t}: {t}[{K_MATMUL}, 2];"
                            for t in TYPES) + " }",
    "volatile { " + " ".join(f"s_{t}: {t}[2]; m_{t}: {t}[2]; y_{t}: {t}[2, 2];" for t in TYPES) + " }",
    "block entry {",
    *[f"  op sum_axis(x_{t}, axes=[1]) >> s_{t};\n  op mean_axis(x_{t}, axes=[1]) >> m_{t};\n"
      f"  op matmul(a_{t}, b_{t}) >> y_{t};" for t in TYPES],
    "  return;",
    "}",
])


@pytest.fixture(scope="module")
def case():
    """Inputs (row 0 positive: the sum grows and rounding bites; row 1 of both signs) and the values
    the defined order gives."""
    rng = np.random.default_rng(16)
    inputs, want = {}, {}
    for t in TYPES:
        x = np.stack([values(t, rng, (N_SUM,), True), values(t, rng, (N_SUM,), False)])
        a = np.stack([values(t, rng, (K_MATMUL,), True), values(t, rng, (K_MATMUL,), False)])
        b = np.stack([values(t, rng, (K_MATMUL,), True), values(t, rng, (K_MATMUL,), False)], axis=1)
        inputs.update({f"x_{t}": x, f"a_{t}": a, f"b_{t}": b})
        sums = np.array([folded(t, row) for row in x], np.float32)
        want[f"s_{t}"] = sums
        want[f"m_{t}"] = np.array([round_to(t, s / np.float32(N_SUM)) for s in sums], np.float32)
        # products of two narrow values are exact in f32
        want[f"y_{t}"] = np.array([[folded(t, a[i] * b[:, j]) for j in range(2)] for i in range(2)], np.float32)
    return inputs, want


def test_the_rounding_matters_here(case):
    """An accumulator that skips the per-step rounding lands elsewhere: these cases can tell them apart."""
    inputs, want = case
    for t in TYPES:
        unrounded = round_to(t, np.float32(np.sum(inputs[f"x_{t}"][0].astype(np.float32))))
        assert unrounded != want[f"s_{t}"][0], t


def _assert_bit_equal(got: dict[str, np.ndarray], want: dict[str, np.ndarray], where: str) -> None:
    bad = [f"{k}: got {np.asarray(got[k]).astype(np.float32).tolist()}, want {v.tolist()}"
           for k, v in want.items() if not np.array_equal(np.asarray(got[k]).astype(np.float32), v)]
    assert not bad, f"{where}:\n" + "\n".join(bad)


def test_reference_rounds_after_every_add(tmp_path, case):
    inputs, want = case
    with cache_dir(tmp_path):
        ex = Reference(empty_model(), GRAPH).make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _assert_bit_equal({k: ex.fetch(k) for k in want}, want, "reference")


@pytest.mark.parametrize("device", ["x86_64-generic", "x86_64-avx2"])
def test_generated_c_rounds_after_every_add(tmp_path, case, device):
    inputs, want = case
    with cache_dir(tmp_path):
        sim = Simulator(empty_model(), GRAPH, arch=Path(REPO) / "devices" / f"{device}.json")
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    _assert_bit_equal({k: ex.fetch(k) for k in want}, want, device)
