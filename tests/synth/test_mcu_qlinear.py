"""The Cortex-M wing's int8 fully connected layer with the DSP extension
(openinfer/targets/mcu/dsp_qlinear.py, templates/mcu/qlinear.c.j2) under the Cortex-M4 firmware
simulation, bit-exact against the reference: one program with a qlinear of its own per case, over
two steps of random int8 inputs. K 1, 3, 4, 5, 8, 12, 13, 15, 17, 24, 33, 128, 640 (around the 4 k
an SMLAD pair sums and the 2 or 4 groups of the loop's iteration, K % 4 tails, the MLPerf Tiny AD
model's 640 and 128); N 1, 2, 3, 4, 5, 7, 8, 9, 128 (around the 4 rows of w a block); 1 to 3 rows
of x; x_zero -128, 0, 89; w_zero 0 and not (folded); with and without bias; random weights and
scales of several magnitudes. And the requantization's ties: a layer whose weights are 0, so that
each output's accumulator is its bias, chosen with its scale so that the exact product lies just
under a half-integer and the double rounds it onto the tie (the integer emulation must round as the
double, not as the exact product).

    OI_SLOW=1   also on the Cortex-M7 and the Cortex-M33 (the same wing)
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from qkernel_programs import int8_program

import openinfer as oi
from openinfer.testing import assert_matches_reference

SLOW = os.environ.get("OI_SLOW") == "1"

#: (rows, K, N, x_zero, w_zero, bias?, (act_min, act_max))
CASES = [
    (1, 1, 3, -128, 0, True, (-128, 127)),
    (1, 3, 1, 0, 0, False, (-128, 127)),
    (2, 4, 2, 89, 0, True, (-128, 127)),
    (1, 5, 8, -128, 3, True, (-128, 127)),
    (3, 13, 9, 0, 0, True, (0, 127)),
    (1, 33, 128, 89, 0, True, (-128, 127)),
    (1, 640, 128, -128, 0, True, (-128, 127)),      # AD's first layer
    (1, 128, 8, 0, -7, True, (-128, 127)),
    (2, 8, 9, 89, 0, False, (-60, 100)),
    (1, 12, 3, -128, 0, True, (-128, 127)),
    (1, 640, 9, 0, 1, True, (-128, 127)),
    (1, 15, 5, 89, 0, True, (-128, 127)),          # 3 groups: the loop's 2 and the odd one
    (2, 17, 4, -128, 0, True, (-128, 127)),        # 4 groups: one iteration of 4
    (1, 24, 7, 0, 2, False, (-128, 127)),          # 6 groups: 3 iterations of 2
]
TIES = 16           # outputs of the layer of ties


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-qlinear-cache")))
        yield


def _round_half_away(v: Fraction) -> int:
    whole = int(v)
    return whole + (1 if v - whole >= Fraction(1, 2) else -1 if v - whole <= Fraction(-1, 2) else 0)


def _ties(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """TIES (accumulator, scale) pairs of small results whose double product rounds onto a
    half-integer the exact product is just under (a odd, a M = q 2^S + 2^(S-1) - r, r at most half
    the bits the product drops past 53), so the double's result differs from the exact one's."""
    accs, scales = [], []
    while len(accs) < TIES:
        a = int(rng.integers(3, 128)) | 1
        s = int(rng.integers(53, 62))
        d = (a * 2**52).bit_length() - 53
        low = 2**(s - 1) - int(rng.integers(1, 2**(d - 1) + 1))
        q = (-low * pow(2**s, -1, a)) % a
        mant = (q * 2**s + low) // a
        if not 2**52 <= mant < 2**53:
            continue
        scale = mant * 2.0**-s
        acc = a if rng.random() < 0.5 else -a
        if _round_half_away(acc * Fraction(scale)) != _round_half_away(Fraction(acc * scale)):
            accs.append(acc)
            scales.append(scale)
    return np.array(accs, np.int32), np.array(scales, np.float64)


def _program(rng: np.random.Generator):
    """CASES and the layer of ties as one program: (graph text, weights, two steps' inputs)."""
    prog = int8_program(rng, linear_cases=CASES)
    prog.weights["bt"], prog.weights["st"] = _ties(rng)
    prog.weights["wt"] = np.zeros((TIES, 4), np.int8)
    prog.inputs["xt"] = (1, 4)
    prog.constant += [f"wt: i8[{TIES}, 4];", f"st: f64[{TIES}];", f"bt: i32[{TIES}];"]
    prog.dynamic.append("xt: i8[1, 4];")
    prog.volatile.append(f"yt: i8[1, {TIES}];")
    prog.body.append("  op qlinear(xt, wt, st, bt, x_zero=5, y_zero=0, act_min=-128, act_max=127) >> yt;\n")
    return prog.text(), prog.weights, prog.feeds()


def _check(tmp_path: Path, arch: str) -> None:
    text, weights, feeds = _program(np.random.default_rng(7))
    oi.write_oinf(tmp_path / "qlinear.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "qlinear.oinf"), oi.graph(text), arch=arch,
                                   feeds=feeds)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for rows, k, n, *_ in [*CASES, (1, 4, TIES)]:
        assert f"cortex-m SMLAD qlinear: x[{rows}, {k}] * w[{n}, {k}]" in kernels, (rows, k, n)


def test_qlinear_matches_reference(tmp_path):
    _check(tmp_path, "cortex-m4")


@pytest.mark.skipif(not SLOW, reason="OI_SLOW=1: the Cortex-M7 and M33 builds")
@pytest.mark.parametrize("arch", ("cortex-m7", "cortex-m33"))
def test_qlinear_matches_reference_m7_m33(tmp_path, arch):
    _check(tmp_path, arch)
