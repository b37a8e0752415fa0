"""The NEON wing's int8 kernels (openinfer/targets/arm/quantized.py, templates/arm/qconv.c.j2,
qlinear.c.j2) under qemu-aarch64, bit-exact against the reference: per target (aarch64-neon: the
SMULL / SADALP dot; aarch64-v82: SDOT) ONE program with a qconv2d or qlinear of its own per case,
over two steps of random int8 inputs.

qconv2d: the Cortex-M test's cases (tests/synth/test_mcu_qconv.py: 1 x 1, 3 x 3, 10 x 4 and 5 x 3
kernels, strides, SAME / VALID / uneven padding with outputs of only padding, dilation, a batch
of 2, x_zero -128 / 0 / 83, bias or not, activation bounds, depthwise multiplier 1 and the
portable kernel's multiplier 2 and grouped) and more around this kernel's widths: output channels
3, 4, 5, 7, 8, 9, 15, 16, 17 (its blocks of 4 channels), K = KH KW C of 7, 8, 9, 15, 16, 17, 23, 24,
25, 31, 32, 33 (its 16- and 8-byte steps and the scalar tail), position counts around its blocks of
2 (Armv8.0-A) and 4 (SDOT), depthwise channels 7, 8, 9, 15, 16, 17 (8 lanes of int16). qlinear:
K 1 to 640 around 8 and 16, N around the blocks of 4, 1 to 3 rows, x_zero and w_zero 0 or not.
A layer of each kind large enough to split over the pool's threads (the descriptors' 4).
Random weights, multipliers (some negative), shifts and scales; a pointwise, a regular and a depthwise layer with
some left shifts (the requantization in lanes covers right shifts: those layers take the scalar
table), the others right shifts only (in lanes).
qadd / qsub (templates/arm/qadd.c.j2, 16 elements a step): lengths around 4 and 16 (15, 16, 17,
31, 32, 33, 35), primes, inputs of one element on either side, a per-channel broadcast (the
portable kernel's); multipliers from random scales as the TFLite importer makes them
(add_params), multipliers of one half whose roundings meet exact halves of either sign (the
rounding shift's fix-up: random multipliers meet them too rarely), left shifts 0, 7, 15, 16, 21
(the int16 and SSHLL parts) and 22 (portable), an output shift of 0, and outputs far past int16
(the saturating narrowing and y_zero addition).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from qkernel_programs import Int8Program

import openinfer as oi
from openinfer.ir.nodes import MemoryKind
from openinfer.testing import assert_matches_reference
from openinfer.tflite.quantization import add_params

pytestmark = pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="needs qemu-aarch64 and aarch64-linux-gnu-gcc")

#: (x [N, H, W, C], w [O, KH, KW, C / groups], stride, padding [top, left, bottom, right], dilation,
#: groups, x_zero, bias?, (act_min, act_max))
QCONV = [
    ((1, 5, 4, 1), (3, 1, 1, 1), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),       # pointwise, K = 1
    ((1, 6, 5, 3), (5, 1, 1, 3), 1, [0, 0, 0, 0], 1, 1, 0, False, (-128, 127)),
    ((1, 3, 7, 4), (4, 1, 1, 4), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 4, 4, 5), (7, 1, 1, 5), 1, [0, 0, 0, 0], 1, 1, -128, True, (-100, 90)),
    ((1, 5, 5, 7), (8, 1, 1, 7), 2, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),          # stride 2
    ((1, 3, 5, 8), (9, 1, 1, 8), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),
    ((1, 4, 3, 9), (17, 1, 1, 9), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 3, 3, 15), (15, 1, 1, 15), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 2, 3, 16), (16, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 3, 17), (64, 1, 1, 17), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 1, 7, 23), (3, 1, 1, 23), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 3, 1, 24), (5, 1, 1, 24), 1, [0, 0, 0, 0], 1, 1, -128, False, (-128, 127)),
    ((1, 3, 3, 25), (7, 1, 1, 25), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 2, 2, 31), (8, 1, 1, 31), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 3, 3, 32), (9, 1, 1, 32), 2, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 3, 2, 33), (16, 1, 1, 33), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 5, 5, 64), (64, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),    # KWS's pointwise
    ((2, 3, 3, 64), (3, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),       # a batch
    ((1, 8, 8, 64), (64, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),    # over the pool's threads
    ((1, 7, 6, 3), (8, 3, 3, 3), 2, [0, 0, 1, 1], 1, 1, -128, True, (-128, 127)),       # regular: VWW's first
    ((1, 6, 6, 4), (5, 3, 3, 4), 1, [1, 1, 1, 1], 1, 1, 0, True, (-128, 127)),          # SAME
    ((1, 5, 7, 5), (4, 3, 3, 5), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),        # VALID
    ((1, 6, 5, 8), (9, 3, 3, 8), 2, [1, 1, 1, 1], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 5, 16), (16, 3, 3, 16), 1, [1, 1, 1, 1], 2, 1, 0, True, (-128, 127)),       # dilation 2
    ((1, 4, 5, 7), (3, 3, 3, 7), 1, [3, 2, 4, 3], 1, 1, 83, True, (-128, 127)),         # outputs of only padding
    ((1, 12, 6, 1), (64, 10, 4, 1), 2, [4, 1, 5, 1], 1, 1, 83, True, (-128, 127)),      # KWS's first (K = 40)
    ((1, 9, 7, 1), (5, 10, 4, 1), 1, [4, 1, 5, 2], 1, 1, -128, False, (-128, 127)),
    ((1, 6, 5, 9), (3, 5, 3, 9), 1, [2, 1, 2, 1], 1, 1, 0, True, (0, 127)),             # K = 135
    ((1, 5, 5, 1), (1, 3, 3, 1), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127)),         # K = 9, C = 1
    ((1, 4, 4, 1), (15, 4, 4, 1), 1, [1, 2, 2, 1], 1, 1, -128, True, (-128, 127)),      # K = 16
    ((1, 5, 4, 17), (17, 1, 2, 17), 1, [0, 1, 0, 0], 1, 1, 0, True, (-128, 127)),       # K = 34, padding left
    ((1, 4, 4, 8), (7, 3, 1, 8), 1, [1, 0, 1, 0], 2, 1, 83, True, (-128, 127)),         # K = 24, dilation 2
    ((1, 5, 5, 3), (16, 3, 3, 3), 1, [1, 1, 1, 1], 2, 1, -128, False, (-128, 127)),     # K = 27, dilation 2
    ((2, 4, 3, 5), (4, 1, 1, 5), 1, [1, 1, 0, 0], 1, 1, 83, True, (-128, 127)),         # 1 x 1 with padding
    ((1, 16, 16, 16), (16, 3, 3, 16), 1, [1, 1, 1, 1], 1, 1, 0, True, (-128, 127)),     # over the pool's threads
    ((1, 6, 5, 3), (3, 3, 3, 1), 1, [1, 1, 1, 1], 1, 3, -128, True, (-128, 127)),       # depthwise
    ((1, 5, 6, 4), (4, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 0, False, (-128, 127)),
    ((1, 7, 7, 5), (5, 3, 3, 1), 2, [0, 0, 1, 1], 1, 5, 83, True, (-128, 127)),
    ((1, 5, 5, 7), (7, 3, 3, 1), 1, [1, 1, 1, 1], 1, 7, -128, True, (-128, 127)),
    ((1, 5, 5, 8), (8, 3, 3, 1), 1, [0, 0, 0, 0], 1, 8, -128, True, (-128, 127)),       # VALID
    ((1, 6, 6, 9), (9, 3, 3, 1), 2, [1, 1, 1, 1], 1, 9, 0, True, (-20, 127)),
    ((1, 4, 5, 15), (15, 3, 3, 1), 1, [1, 1, 1, 1], 1, 15, 83, False, (-128, 127)),
    ((1, 5, 4, 16), (16, 3, 3, 1), 2, [1, 1, 1, 1], 1, 16, -128, True, (-128, 127)),
    ((1, 5, 4, 17), (17, 3, 3, 1), 1, [2, 2, 2, 2], 2, 17, 83, True, (-128, 127)),      # dilation 2
    ((1, 5, 5, 64), (64, 3, 3, 1), 1, [1, 1, 1, 1], 1, 64, -128, True, (-128, 127)),    # KWS's depthwise
    ((2, 4, 3, 7), (7, 3, 3, 1), 1, [3, 3, 3, 3], 1, 7, 0, True, (-128, 127)),          # padding past the taps
    ((1, 6, 7, 16), (16, 5, 3, 1), 1, [3, 0, 2, 4], 1, 16, 0, True, (-128, 127)),       # padding past the taps
    ((1, 24, 24, 64), (64, 3, 3, 1), 1, [1, 1, 1, 1], 1, 64, 83, True, (-128, 127)),    # over the pool's threads
    ((1, 5, 5, 4), (8, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 83, True, (-128, 127)),         # multiplier 2: portable
    ((1, 5, 5, 8), (4, 3, 3, 4), 1, [1, 1, 1, 1], 1, 2, -128, True, (-128, 127)),       # 2 groups: portable
]
#: the kernel each case takes, in order (None: the portable kernel)
KIND = ["pointwise"] * 19 + ["regular"] * 16 + ["depthwise"] * 13 + [None] * 2

#: (rows, K, N, x_zero, w_zero, bias?, (act_min, act_max))
QLINEAR = [
    (1, 1, 3, -128, 0, True, (-128, 127)),
    (1, 3, 1, 0, 0, False, (-128, 127)),
    (2, 4, 2, 89, 0, True, (-128, 127)),
    (1, 5, 8, -128, 3, True, (-128, 127)),
    (1, 7, 4, 0, -2, True, (-128, 127)),
    (1, 8, 5, -128, 0, True, (-128, 127)),
    (3, 9, 9, 0, 0, True, (0, 127)),
    (1, 15, 7, 89, 0, False, (-128, 127)),
    (1, 16, 16, -128, 0, True, (-128, 127)),
    (2, 17, 17, 5, 4, True, (-128, 127)),
    (1, 24, 15, -128, 0, True, (-60, 100)),
    (1, 31, 3, 0, 0, True, (-128, 127)),
    (1, 33, 128, 89, 0, True, (-128, 127)),
    (1, 64, 12, -128, 0, True, (-128, 127)),        # KWS's last
    (1, 640, 128, -128, 0, True, (-128, 127)),      # AD's first
    (1, 128, 8, 0, -7, True, (-128, 127)),
    (1, 8, 128, 3, 0, True, (-128, 127)),           # AD's K = 8
    (1, 640, 9, 0, 1, True, (-128, 127)),
]

#: qadd / qsub: (op, a's shape, b's shape, a's scale over b's, 'ties' or the attributes, (act_min,
#: act_max), the NEON kernel's?)
BINARY = [
    ("qadd", (1,), (1,), 1.0, (-128, 127), True),
    ("qadd", (3,), (3,), 0.3, (-128, 127), True),
    ("qadd", (4,), (4,), 1.0, (-128, 127), True),         # equal scales: both input shifts 0
    ("qadd", (5,), (5,), 3.7, (-128, 127), True),
    ("qadd", (7,), (7,), 0.06, (0, 127), True),
    ("qadd", (2, 4), (2, 4), 1.9, (-128, 127), True),
    ("qadd", (9,), (9,), 0.5, (-100, 90), True),
    ("qadd", (13,), (13,), 11.0, (-128, 127), True),
    ("qadd", (3, 5), (3, 5), 0.7, (-128, 127), True),     # 15
    ("qadd", (16,), (16,), 1.3, (-128, 127), True),
    ("qadd", (17,), (17,), 0.2, (-128, 127), True),
    ("qadd", (31,), (31,), 1.0, (-128, 127), True),
    ("qadd", (2, 16), (2, 16), 0.9, (-128, 127), True),
    ("qadd", (3, 11), (3, 11), 2.5, (-128, 127), True),   # 33
    ("qadd", (1, 4, 4, 2), (1, 4, 4, 2), 2.5, (-128, 127), True),
    ("qadd", (1, 3, 11, 1), (1, 3, 11, 1), 1.1, (0, 127), True),
    ("qadd", (1, 8, 8, 16), (1, 8, 8, 16), 0.8, (-128, 127), True),     # IC's residual shape
    ("qadd", (5, 3), (1,), 0.4, (-128, 127), True),       # b a single element
    ("qadd", (1,), (2, 9), 2.2, (-128, 127), True),       # a a single element
    ("qadd", (1,), (16,), 1.4, (-128, 127), True),
    ("qadd", (3, 4), (4,), 1.0, (-128, 127), False),      # per-channel broadcast: portable
    ("qsub", (3,), (3,), 0.3, (-128, 127), True),
    ("qsub", (8,), (8,), 1.0, (-128, 127), True),
    ("qsub", (15,), (15,), 5.0, (-128, 127), True),
    ("qsub", (16,), (16,), 0.7, (-128, 127), True),
    ("qsub", (29,), (29,), 1.6, (-50, 127), True),
    ("qsub", (4, 3), (1,), 0.5, (-128, 127), True),
    ("qsub", (1,), (17,), 3.0, (-128, 127), True),
    # multipliers 2^30 (one half): the output's rounding sees exact halves, of either sign
    ("qadd", (37,), (37,), "ties", (-128, 127), True),
    ("qsub", (2, 23), (2, 23), "ties", (-128, 127), True),
    # left shifts 0, 15 and 16 (SSHLL's 15 and one more SHL), multipliers near 2^31 and a shift
    # of 0 on the output: its rounding without the fix-up
    ("qadd", (19,), (19,), {"a_multiplier": (1 << 31) - 1, "a_shift": 0, "b_multiplier": 1 << 30, "b_shift": -3,
                            "y_multiplier": (1 << 31) - 1, "y_shift": -1, "left_shift": 0}, (-128, 127), True),
    ("qadd", (21,), (21,), {"a_multiplier": 1 << 30, "a_shift": -2, "b_multiplier": 1 << 30, "b_shift": 0,
                            "y_multiplier": 1 << 30, "y_shift": -15, "left_shift": 15}, (-128, 127), True),
    ("qsub", (18,), (18,), {"a_multiplier": 1 << 30, "a_shift": 0, "b_multiplier": 1717986918, "b_shift": 0,
                            "y_multiplier": 1 << 30, "y_shift": -16, "left_shift": 16}, (-128, 127), True),
    ("qadd", (20,), (20,), {"a_multiplier": 1 << 30, "a_shift": -8, "b_multiplier": 1 << 30, "b_shift": -8,
                            "y_multiplier": 1 << 30, "y_shift": 0, "left_shift": 7}, (-128, 127), True),
    # the largest left shift taken (21: SHL #6, SSHLL #15) and outputs h far past int16 (the
    # saturating SQXTN and SQADD) and around its bounds
    ("qsub", (35,), (35,), {"a_multiplier": (1 << 31) - 1, "a_shift": 0, "b_multiplier": (1 << 31) - 1, "b_shift": 0,
                            "y_multiplier": (1 << 31) - 1, "y_shift": 0, "left_shift": 21}, (-128, 127), True),
    ("qadd", (3, 15), (3, 15), {"a_multiplier": (1 << 31) - 1, "a_shift": 0, "b_multiplier": 1 << 30, "b_shift": -1,
                                "y_multiplier": (1 << 31) - 1, "y_shift": -13, "left_shift": 21}, (-128, 127), True),
    # a left shift of 22: int32 sums that could wrap, the portable kernel's
    ("qadd", (2, 13), (2, 13), {"a_multiplier": 1 << 30, "a_shift": 0, "b_multiplier": 1 << 30, "b_shift": 0,
                                "y_multiplier": 1 << 30, "y_shift": -21, "left_shift": 22}, (-128, 127), False),
]

#: a qadd in place, of a count found in no other case
INPLACE, INPLACE_COUNT = "inplace", 41


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("neon-q-cache")))
        yield


def _program(rng: np.random.Generator):
    """QCONV, QLINEAR, BINARY and the in-place qadd as one program: (graph text, weights, two steps' inputs)."""
    prog = Int8Program(rng)
    for j, case in enumerate(QCONV):
        # left shifts in three layers (a scale above 1: the scalar table's other branch; the kernels'
        # lanes then leave the whole layer to the scalar table), negative multipliers in every fourth
        prog.conv(f"c{j}", case, left_shifts=j in (0, 19, 40), negative_multipliers=j % 4 == 1)
    for j, case in enumerate(QLINEAR):
        prog.linear(f"f{j}", case)
    for j, (op, a_shape, b_shape, ratio, bounds, _) in enumerate(BINARY):
        prog.binary(f"q{j}", op, a_shape, b_shape, ratio, bounds)
    # in place (mode inplace; the program computes into scratch and copies over): the output is
    # input a, a dynamic variable compared after each step
    params = ", ".join(f"{k}={v}" for k, v in add_params(0.03, 0.05, 0.1).items())
    prog.dynamic += [f"{INPLACE}: i8[{INPLACE_COUNT}];", f"{INPLACE}_b: i8[{INPLACE_COUNT}];"]
    prog.inputs[INPLACE], prog.inputs[f"{INPLACE}_b"] = (INPLACE_COUNT,), (INPLACE_COUNT,)
    prog.body.append(f"  op qadd({INPLACE}, {INPLACE}_b, a_zero=5, b_zero=-9, y_zero=3, {params}, act_min=-128, "
                f"act_max=127) >> {INPLACE};\n")
    return prog.text(), prog.weights, prog.feeds()


@pytest.mark.parametrize("arch, isa", [("aarch64-neon", "neon"), ("aarch64-v82", "sdot")])
def test_neon_qkernels_match_reference(tmp_path: Path, arch: str, isa: str):
    text, weights, feeds = _program(np.random.default_rng(11))
    oi.write_oinf(tmp_path / "q.oinf", weights)
    graph = oi.graph(text)
    names = [v.name for v in graph.vars.values() if v.kind is MemoryKind.VOLATILE] + [INPLACE]
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "q.oinf"), graph, arch=arch, feeds=feeds,
                                   names=names)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for (xs, ws, *_), kind in zip(QCONV, KIND, strict=True):
        line = f"x[{', '.join(map(str, xs))}] * w[{', '.join(map(str, ws))}]"
        taken = [k for k in ("pointwise", "regular", "depthwise") if f"{isa} qconv2d {k}: {line}" in kernels]
        assert taken == ([kind] if kind else []), (xs, ws, taken)
    for rows, k, n, *_ in QLINEAR:
        assert f"{isa} qlinear: x[{rows}, {k}] * w[{n}, {k}]" in kernels, (rows, k, n)
    for op, a_shape, b_shape, _, _, neon in BINARY:
        count = math.prod(np.broadcast_shapes(a_shape, b_shape))
        scalar = "a" if math.prod(a_shape) < count else "b" if math.prod(b_shape) < count else ""
        line = f"neon {op}: {count} elements{f', input {scalar} broadcast' if scalar else ''} */"
        assert (line in kernels) == neon, (op, a_shape, b_shape)
    assert f"neon qadd: {INPLACE_COUNT} elements */" in kernels
