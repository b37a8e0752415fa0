"""The Helium int8 kernels (openinfer/targets/mcu/helium_quant.py, templates/mcu/helium_qconv.c.j2,
helium_qlinear.c.j2, helium_qbinary.c.j2) under the Cortex-M55 firmware simulation (mps3-an547, QEMU's MVE), bit-exact
against the reference: ONE program with a qconv2d or qlinear of its own per case, over two steps
of random int8 inputs. Around the kernels' widths: K (the taps of a groups-1 window, qlinear's
row) 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33 and longer (VMLADAVA.S8's 16 taps a step and its
predicated tail); output channels / rows of w 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33 (the 4
rows a block and the one-at-a-time tail); depthwise channels 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32,
33 (8 channels a vector, the predicated last group). Pointwise with windows in place and with
padding (copied windows), regular 3 x 3, 10 x 4 (KWS's first, C = 1), 5 x 3, strides 1 and 2,
VALID, SAME and uneven paddings (outputs whose every tap is padding), dilation 2 (tap by tap
copies), a batch of 2; depthwise windows inside x (unrolled) and reaching into the padding, and a
7 x 5 kernel (35 taps: the loop only); x_zero -128, 0 and 83; qlinear w_zero 0 and not; with
and without bias; activation bounds; grouped and depth-multiplier-2 convolutions (the portable
kernel's). Random weights, multipliers, shifts (some left) and scales. qadd, qsub and qmul
(4 elements a vector) of lengths around 4 and primes, inputs of one element on either side, and
per-channel broadcasts (the portable kernel's); their multipliers from random scales as the
TFLite importer makes them (add_params), shifts 0 (equal scales) and below, qmul's some left;
and multipliers of one half, whose roundings meet exact halves of either sign (the fix-up of
the rounding shift: random multipliers meet them too rarely).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from qkernel_programs import Int8Program

import openinfer as oi
from openinfer.testing import assert_matches_reference

#: qconv2d: (x [N, H, W, C], w [O, KH, KW, C / groups], stride, padding [top, left, bottom, right],
#: dilation, groups, x_zero, bias?, (act_min, act_max), the Helium kernel's kind or None)
CONV = [
    ((1, 5, 4, 1), (3, 1, 1, 1), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127), "pointwise"),
    ((1, 4, 3, 3), (5, 1, 1, 3), 1, [0, 0, 0, 0], 1, 1, 0, False, (-128, 127), "pointwise"),
    ((1, 3, 5, 4), (4, 1, 1, 4), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127), "pointwise"),
    ((1, 3, 3, 5), (7, 1, 1, 5), 1, [0, 0, 0, 0], 1, 1, -128, True, (-100, 90), "pointwise"),
    ((1, 5, 5, 7), (8, 1, 1, 7), 2, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127), "pointwise"),
    ((1, 3, 4, 8), (9, 1, 1, 8), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127), "pointwise"),
    ((1, 3, 3, 9), (15, 1, 1, 9), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127), "pointwise"),
    ((1, 3, 3, 15), (16, 1, 1, 15), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127), "pointwise"),
    ((1, 3, 2, 16), (17, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127), "pointwise"),
    ((1, 2, 3, 17), (31, 1, 1, 17), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127), "pointwise"),
    ((1, 3, 3, 31), (32, 1, 1, 31), 1, [0, 0, 0, 0], 1, 1, -128, False, (-128, 127), "pointwise"),
    ((1, 2, 3, 32), (33, 1, 1, 32), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127), "pointwise"),
    ((2, 3, 3, 33), (3, 1, 1, 33), 1, [0, 0, 0, 0], 1, 1, 83, True, (0, 127), "pointwise"),     # a batch
    ((1, 5, 5, 64), (64, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127), "pointwise"),  # KWS's
    ((1, 4, 6, 8), (16, 1, 1, 8), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127), "pointwise"),  # VWW's K = 8
    ((2, 3, 3, 16), (32, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 100), "pointwise"),  # 18 positions
    ((1, 3, 4, 17), (5, 1, 1, 17), 1, [1, 0, 2, 1], 1, 1, 83, True, (-128, 127), "pointwise"),  # padded: copies
    ((1, 7, 6, 3), (8, 3, 3, 3), 2, [0, 0, 1, 1], 1, 1, -128, True, (-128, 127), "regular"),    # K = 27
    ((1, 6, 6, 4), (5, 3, 3, 4), 1, [1, 1, 1, 1], 1, 1, 0, True, (-128, 127), "regular"),       # K = 36
    ((1, 5, 7, 5), (4, 3, 3, 5), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127), "regular"),     # VALID
    ((1, 6, 5, 8), (9, 3, 3, 8), 2, [1, 1, 1, 1], 1, 1, -128, True, (-128, 127), "regular"),
    ((1, 5, 5, 16), (16, 3, 3, 16), 1, [1, 1, 1, 1], 2, 1, 0, True, (-128, 127), "regular"),    # dilation 2
    ((1, 4, 5, 7), (3, 3, 3, 7), 1, [3, 2, 4, 3], 1, 1, 83, True, (-128, 127), "regular"),      # only padding
    ((1, 12, 6, 1), (64, 10, 4, 1), 2, [4, 1, 5, 1], 1, 1, 83, True, (-128, 127), "regular"),   # KWS's first
    ((1, 9, 7, 1), (5, 10, 4, 1), 1, [4, 1, 5, 2], 1, 1, -128, False, (-128, 127), "regular"),
    ((1, 5, 5, 5), (33, 3, 3, 5), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127), "regular"),     # 4 copies a block
    ((1, 4, 3, 7), (32, 1, 1, 7), 1, [1, 0, 0, 1], 1, 1, -128, False, (-50, 127), "pointwise"),  # copies, K < 16
    ((1, 6, 5, 9), (7, 5, 3, 9), 1, [2, 1, 2, 1], 1, 1, 0, True, (0, 127), "regular"),          # K = 135
    ((1, 5, 5, 1), (1, 3, 3, 1), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127), "regular"),      # C = 1: groups 1
    ((1, 6, 5, 3), (3, 3, 3, 1), 1, [1, 1, 1, 1], 1, 3, -128, True, (-128, 127), "depthwise"),
    ((1, 5, 6, 4), (4, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 0, False, (-128, 127), "depthwise"),
    ((1, 7, 7, 5), (5, 3, 3, 1), 2, [0, 0, 1, 1], 1, 5, 83, True, (-128, 127), "depthwise"),
    ((1, 5, 5, 7), (7, 3, 3, 1), 1, [0, 0, 0, 0], 1, 7, 0, True, (-128, 127), "depthwise"),      # VALID
    ((1, 5, 5, 8), (8, 3, 3, 1), 1, [0, 0, 0, 0], 1, 8, -128, True, (-128, 127), "depthwise"),
    ((1, 6, 6, 9), (9, 3, 3, 1), 2, [1, 1, 1, 1], 1, 9, 0, True, (-20, 127), "depthwise"),
    ((1, 5, 4, 15), (15, 3, 3, 1), 1, [1, 1, 1, 1], 1, 15, 83, True, (-128, 127), "depthwise"),
    ((1, 4, 5, 16), (16, 3, 3, 1), 1, [1, 1, 1, 1], 1, 16, -128, False, (-128, 127), "depthwise"),
    ((1, 5, 4, 17), (17, 3, 3, 1), 1, [2, 2, 2, 2], 2, 17, 83, True, (-128, 127), "depthwise"),  # dilation 2
    ((1, 4, 4, 31), (31, 3, 3, 1), 1, [1, 1, 1, 1], 1, 31, 0, True, (-128, 127), "depthwise"),
    ((1, 4, 4, 32), (32, 3, 3, 1), 2, [1, 1, 1, 1], 1, 32, -128, True, (-128, 127), "depthwise"),
    ((1, 3, 5, 33), (33, 3, 3, 1), 1, [0, 1, 0, 1], 1, 33, 83, True, (-128, 127), "depthwise"),
    ((1, 5, 5, 64), (64, 3, 3, 1), 1, [1, 1, 1, 1], 1, 64, -128, True, (-128, 127), "depthwise"),  # KWS's
    ((2, 4, 3, 7), (7, 3, 3, 1), 1, [3, 3, 3, 3], 1, 7, 0, True, (-128, 127), "depthwise"),   # only padding
    ((1, 9, 8, 9), (9, 7, 5, 1), 1, [3, 2, 3, 2], 1, 9, 83, True, (-128, 127), "depthwise"),  # 35 taps: loop
    ((1, 5, 5, 4), (8, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 83, True, (-128, 127), None),        # multiplier 2
    ((1, 5, 5, 8), (4, 3, 3, 4), 1, [1, 1, 1, 1], 1, 2, -128, True, (-128, 127), None),      # 2 groups
]

#: qlinear: (rows, K, N, x_zero, w_zero, bias?, (act_min, act_max))
LINEAR = [
    (1, 1, 3, -128, 0, True, (-128, 127)),
    (1, 3, 1, 0, 0, False, (-128, 127)),
    (2, 4, 4, 89, 0, True, (-128, 127)),
    (1, 5, 5, -128, 3, True, (-128, 127)),
    (3, 7, 7, 0, 0, True, (0, 127)),
    (1, 8, 8, 89, -7, False, (-60, 100)),
    (1, 9, 9, -128, 0, True, (-128, 127)),
    (1, 15, 15, 0, 0, True, (-128, 127)),
    (2, 16, 16, -128, 0, True, (-128, 127)),
    (1, 17, 17, 89, 0, True, (-128, 127)),
    (1, 31, 31, -128, 1, True, (-128, 127)),
    (1, 32, 32, 0, 0, False, (-128, 127)),
    (1, 33, 33, 89, 0, True, (-128, 127)),
    (1, 640, 128, -128, 0, True, (-128, 127)),      # AD's first layer
    (1, 128, 8, 0, -7, True, (-128, 127)),
]

#: qadd / qsub / qmul: (op, a's shape, b's shape, a's scale over b's or 'ties', (act_min, act_max), Helium's?)
#: 4 elements a vector: lengths 1, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33 and longer; one
#: input a single element (either side); a per-channel broadcast (the portable kernel's)
BINARY = [
    ("qadd", (1,), (1,), 1.0, (-128, 127), True),
    ("qadd", (3,), (3,), 0.3, (-128, 127), True),
    ("qadd", (4,), (4,), 1.0, (-128, 127), True),         # equal scales: both shifts 0
    ("qadd", (5,), (5,), 3.7, (-128, 127), True),
    ("qadd", (7,), (7,), 0.06, (0, 127), True),
    ("qadd", (2, 4), (2, 4), 1.9, (-128, 127), True),
    ("qadd", (9,), (9,), 0.5, (-100, 90), True),
    ("qadd", (13,), (13,), 11.0, (-128, 127), True),
    ("qadd", (3, 5), (3, 5), 0.7, (-128, 127), True),
    ("qadd", (16,), (16,), 1.3, (-128, 127), True),
    ("qadd", (17,), (17,), 0.2, (-128, 127), True),
    ("qadd", (1, 4, 4, 2), (1, 4, 4, 2), 2.5, (-128, 127), True),
    ("qadd", (1, 2, 2, 8), (1, 2, 2, 8), 0.9, (-128, 127), True),
    ("qadd", (1, 3, 11, 1), (1, 3, 11, 1), 1.1, (0, 127), True),
    ("qadd", (1, 8, 8, 16), (1, 8, 8, 16), 0.8, (-128, 127), True),    # IC's residual shape
    ("qadd", (5, 3), (1,), 0.4, (-128, 127), True),       # b a single element
    ("qadd", (1,), (2, 9), 2.2, (-128, 127), True),       # a a single element
    ("qadd", (3, 4), (4,), 1.0, (-128, 127), False),      # per-channel broadcast
    ("qsub", (3,), (3,), 0.3, (-128, 127), True),
    ("qsub", (4,), (4,), 1.0, (-128, 127), True),
    ("qsub", (5,), (5,), 5.0, (-128, 127), True),
    ("qsub", (8,), (8,), 0.7, (-128, 127), True),
    ("qsub", (31,), (31,), 1.6, (-50, 127), True),
    ("qsub", (4, 3), (1,), 0.5, (-128, 127), True),
    ("qsub", (1,), (11,), 3.0, (-128, 127), True),
    ("qmul", (3,), (3,), 1.0, (-128, 127), True),
    ("qmul", (4,), (4,), 1.0, (-128, 127), True),
    ("qmul", (5,), (5,), 1.0, (0, 127), True),
    ("qmul", (9,), (9,), 1.0, (-128, 127), True),
    ("qmul", (32,), (32,), 1.0, (-128, 127), True),
    ("qmul", (33,), (33,), 1.0, (-128, 127), True),
    ("qmul", (2, 7), (1,), 1.0, (-128, 127), True),
    ("qmul", (1,), (15,), 1.0, (-90, 127), True),
    ("qmul", (2, 5), (5,), 1.0, (-128, 127), False),
    # multipliers 2^30 (one half): the output's rounding sees exact halves, of either sign
    ("qadd", (37,), (37,), "ties", (-128, 127), True),
    ("qsub", (2, 23), (2, 23), "ties", (-128, 127), True),
]


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("helium-q-cache")))
        yield


def _program(rng: np.random.Generator):
    """CONV, LINEAR and BINARY as one program: (graph text, weights, two steps' inputs)."""
    prog = Int8Program(rng)
    for j, (*case, _) in enumerate(CONV):
        prog.conv(f"c{j}", case, left_shifts=j == 0)
    for j, case in enumerate(LINEAR):
        prog.linear(f"f{j}", case)
    for j, (op, a_shape, b_shape, ratio, bounds, _) in enumerate(BINARY):
        prog.binary(f"q{j}", op, a_shape, b_shape, ratio, bounds)
    return prog.text(), prog.weights, prog.feeds()


def test_helium_qkernels_match_reference(tmp_path):
    text, weights, feeds = _program(np.random.default_rng(11))
    oi.write_oinf(tmp_path / "q.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "q.oinf"), oi.graph(text), arch="cortex-m55",
                                   feeds=feeds)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for xs, ws, *_, kind in CONV:
        line = f"x[{', '.join(map(str, xs))}] * w[{', '.join(map(str, ws))}]"
        taken = [k for k in ("pointwise", "regular", "depthwise") if f"helium qconv2d {k}: {line}" in kernels]
        assert taken == ([kind] if kind else []), (xs, ws, taken)
    for rows, k, n, *_ in LINEAR:
        assert f"helium qlinear: x[{rows}, {k}] * w[{n}, {k}]" in kernels, (rows, k, n)
    for op, a_shape, b_shape, _, _, helium in BINARY:
        count = math.prod(np.broadcast_shapes(a_shape, b_shape))
        scalar = "a" if math.prod(a_shape) < count else "b" if math.prod(b_shape) < count else ""
        line = f"helium {op}: {count} elements{f', input {scalar} broadcast' if scalar else ''} */"
        assert (line in kernels) == helium, (op, a_shape, b_shape)
