"""The Cortex-M wing's int8 convolution with the DSP extension (openinfer/targets/mcu/dsp_qconv.py,
templates/mcu/qconv.c.j2) under the Cortex-M4 firmware simulation, bit-exact against the reference:
one program with a qconv2d of its own per case, over two steps of random int8 inputs. Channels 1,
3, 4, 5, 7, 8, 9, 17 and 64 (around the 4 taps an SMLAD pair sums, the 4 channels of a depthwise
word, and K % 4 tails); 1 x 1, 3 x 3, 10 x 4 and 5 x 3 kernels; strides 1 and 2; VALID, SAME and
uneven paddings (windows reaching past every side, and outputs whose every tap is padding);
dilation; odd output channel and position counts (the kernel's 2 x 2 blocks' tails); a batch of
2; depthwise with multiplier 1 (the 4-channel kernel) and 2 and a grouped convolution (both the
portable kernel's); x_zero -128, 0 and 83; with and without bias; ReLU-like activation bounds;
random weights and per-channel multipliers and shifts.

    OI_SLOW=1   also on the Cortex-M7 and the Cortex-M33 (the same wing)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from qkernel_programs import int8_program

import openinfer as oi
from openinfer.testing import assert_matches_reference

SLOW = os.environ.get("OI_SLOW") == "1"

#: (x [N, H, W, C], w [O, KH, KW, C / groups], stride, padding [top, left, bottom, right], dilation,
#: groups, x_zero, bias?, (act_min, act_max))
CASES = [
    ((1, 5, 4, 1), (3, 1, 1, 1), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),       # pointwise C = 1, K = 1
    ((1, 6, 5, 3), (5, 1, 1, 3), 1, [0, 0, 0, 0], 1, 1, 0, False, (-128, 127)),         # K = 3, odd O
    ((1, 3, 7, 4), (4, 1, 1, 4), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),         # K = 4, odd positions
    ((1, 4, 4, 5), (7, 1, 1, 5), 1, [0, 0, 0, 0], 1, 1, -128, True, (-100, 90)),        # K = 5
    ((1, 5, 5, 7), (8, 1, 1, 7), 2, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),          # stride 2
    ((1, 3, 5, 8), (9, 1, 1, 8), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),
    ((1, 4, 3, 9), (17, 1, 1, 9), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 3, 17), (64, 1, 1, 17), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 5, 5, 64), (64, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),    # KWS's pointwise
    ((2, 3, 3, 64), (3, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),       # a batch
    ((1, 3, 5, 12), (6, 1, 1, 12), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),     # K = 12: a pair of groups + 1
    ((1, 4, 3, 16), (2, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, 0, False, (-128, 127)),       # K = 16: pairs only, O = 2
    ((1, 7, 6, 3), (8, 3, 3, 3), 2, [0, 0, 1, 1], 1, 1, -128, True, (-128, 127)),       # VWW's first: SAME, stride 2
    ((1, 6, 6, 4), (5, 3, 3, 4), 1, [1, 1, 1, 1], 1, 1, 0, True, (-128, 127)),          # SAME
    ((1, 5, 7, 5), (4, 3, 3, 5), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),        # VALID
    ((1, 6, 5, 8), (9, 3, 3, 8), 2, [1, 1, 1, 1], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 5, 16), (16, 3, 3, 16), 1, [1, 1, 1, 1], 2, 1, 0, True, (-128, 127)),       # dilation 2
    ((1, 4, 5, 7), (3, 3, 3, 7), 1, [3, 2, 4, 3], 1, 1, 83, True, (-128, 127)),         # outputs of only padding
    ((1, 12, 6, 1), (64, 10, 4, 1), 2, [4, 1, 5, 1], 1, 1, 83, True, (-128, 127)),      # KWS's first (K = 40)
    ((1, 9, 7, 1), (5, 10, 4, 1), 1, [4, 1, 5, 2], 1, 1, -128, False, (-128, 127)),
    ((1, 6, 5, 9), (3, 5, 3, 9), 1, [2, 1, 2, 1], 1, 1, 0, True, (0, 127)),             # K = 135
    ((1, 5, 5, 1), (1, 3, 3, 1), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127)),         # depthwise C = 1: groups 1
    ((1, 6, 5, 3), (3, 3, 3, 1), 1, [1, 1, 1, 1], 1, 3, -128, True, (-128, 127)),
    ((1, 5, 6, 4), (4, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 0, False, (-128, 127)),
    ((1, 7, 7, 5), (5, 3, 3, 1), 2, [0, 0, 1, 1], 1, 5, 83, True, (-128, 127)),
    ((1, 5, 5, 8), (8, 3, 3, 1), 1, [0, 0, 0, 0], 1, 8, -128, True, (-128, 127)),       # VALID
    ((1, 6, 6, 9), (9, 3, 3, 1), 2, [1, 1, 1, 1], 1, 9, 0, True, (-20, 127)),
    ((1, 5, 4, 17), (17, 3, 3, 1), 1, [2, 2, 2, 2], 2, 17, 83, True, (-128, 127)),      # dilation 2
    ((1, 5, 5, 64), (64, 3, 3, 1), 1, [1, 1, 1, 1], 1, 64, -128, True, (-128, 127)),    # KWS's depthwise
    ((2, 4, 3, 7), (7, 3, 3, 1), 1, [3, 3, 3, 3], 1, 7, 0, True, (-128, 127)),          # padding past the taps
    ((1, 4, 5, 5), (5, 3, 3, 1), 2, [0, 0, 6, 6], 2, 5, 83, True, (-128, 127)),         # windows below / right of x
    ((1, 5, 5, 4), (8, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 83, True, (-128, 127)),         # multiplier 2: portable
    ((1, 5, 5, 8), (4, 3, 3, 4), 1, [1, 1, 1, 1], 1, 2, -128, True, (-128, 127)),       # 2 groups: portable
]
#: the cases the DSP kernel takes (groups 1, or depthwise with multiplier 1), by their comment's kind
KIND = ["pointwise"] * 12 + ["regular"] * 10 + ["depthwise"] * 9 + [None] * 2


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-qconv-cache")))
        yield


def _check(tmp_path: Path, arch: str) -> None:
    prog = int8_program(np.random.default_rng(5), conv_cases=CASES)
    text, weights, feeds = prog.text(), prog.weights, prog.feeds()
    oi.write_oinf(tmp_path / "qconv.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "qconv.oinf"), oi.graph(text), arch=arch,
                                   feeds=feeds)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for (xs, ws, *_), kind in zip(CASES, KIND, strict=True):
        line = f"x[{', '.join(map(str, xs))}] * w[{', '.join(map(str, ws))}]"
        taken = [k for k in ("pointwise", "regular", "depthwise") if f"cortex-m SMLAD qconv2d {k}: {line}" in kernels]
        assert taken == ([kind] if kind else []), (xs, ws, taken)


def test_qconv_matches_reference(tmp_path):
    _check(tmp_path, "cortex-m4")


@pytest.mark.skipif(not SLOW, reason="OI_SLOW=1: the Cortex-M7 and M33 builds")
@pytest.mark.parametrize("arch", ("cortex-m7", "cortex-m33"))
def test_qconv_matches_reference_m7_m33(tmp_path, arch):
    _check(tmp_path, arch)
