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

import openinfer as oi
from openinfer.testing import assert_matches_reference
from openinfer.tflite.quantization import add_params

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


def _out_size(size: int, k: int, stride: int, before: int, after: int, dil: int) -> int:
    return (size + before + after - dil * (k - 1) - 1) // stride + 1


def _program(rng: np.random.Generator):
    """CONV and LINEAR as one program: (graph text, weights, two steps' inputs)."""
    dyn, const, outs, body, weights, shapes = [], [], [], [], {}, {}
    for j, (xs, ws, stride, pad, dil, groups, x_zero, bias, (lo, hi), _) in enumerate(CONV):
        n, h, w, _ = xs
        o, kh, kw, cg = ws
        oh = _out_size(h, kh, stride, pad[0], pad[2], dil)
        ow = _out_size(w, kw, stride, pad[1], pad[3], dil)
        weights[f"w{j}"] = rng.integers(-128, 128, ws).astype(np.int8)
        weights[f"m{j}"] = rng.integers(1 << 30, (1 << 31) - 1, o).astype(np.int32)
        # shifts that put the sums' spread (about 75^2 sqrt(K)) around +-60 outputs, some saturating
        shifts = -round(math.log2(75 * 75 * math.sqrt(kh * kw * cg) / 60)) + rng.integers(-1, 2, o)
        if j == 0:                  # left shifts too (the requantization's other branch)
            shifts[:2] = (1, 0)
        weights[f"s{j}"] = shifts.astype(np.int32)
        const += [f"w{j}: i8[{', '.join(map(str, ws))}];", f"m{j}: i32[{o}];", f"s{j}: i32[{o}];"]
        args = f"x{j}, w{j}, m{j}, s{j}"
        if bias:
            weights[f"b{j}"] = rng.integers(-20000, 20000, o).astype(np.int32)
            const.append(f"b{j}: i32[{o}];")
            args += f", b{j}"
        shapes[f"x{j}"] = xs
        dyn.append(f"x{j}: i8[{', '.join(map(str, xs))}];")
        outs.append(f"y{j}: i8[{n}, {oh}, {ow}, {o}];")
        body.append(f"  op qconv2d({args}, stride={stride}, padding={pad}, dilation={dil}, groups={groups}, "
                    f"x_zero={x_zero}, y_zero={int(rng.integers(-20, 21))}, act_min={lo}, act_max={hi}) >> y{j};\n")
    for j, (rows, k, n, x_zero, w_zero, bias, (lo, hi)) in enumerate(LINEAR):
        weights[f"lw{j}"] = rng.integers(-128, 128, (n, k)).astype(np.int8)
        weights[f"ls{j}"] = (60 / (75 * 75 * np.sqrt(k)) * rng.uniform(0.5, 2.0, n)).astype(np.float64)
        const += [f"lw{j}: i8[{n}, {k}];", f"ls{j}: f64[{n}];"]
        args = f"lx{j}, lw{j}, ls{j}"
        if bias:
            weights[f"lb{j}"] = rng.integers(-20000, 20000, n).astype(np.int32)
            const.append(f"lb{j}: i32[{n}];")
            args += f", lb{j}"
        shapes[f"lx{j}"] = (rows, k)
        dyn.append(f"lx{j}: i8[{rows}, {k}];")
        outs.append(f"ly{j}: i8[{rows}, {n}];")
        body.append(f"  op qlinear({args}, x_zero={x_zero}, w_zero={w_zero}, y_zero={int(rng.integers(-20, 21))}, "
                    f"act_min={lo}, act_max={hi}) >> ly{j};\n")
    for j, (op, a_shape, b_shape, ratio, (lo, hi), _) in enumerate(BINARY):
        y_shape = np.broadcast_shapes(a_shape, b_shape)
        zeros = ", ".join(f"{p}_zero={int(rng.integers(-128, 128))}" for p in "aby")
        if ratio == "ties":           # y = (2 (a - a_zero) + b - b_zero) / 4, rounded
            fixed = f"a_multiplier={1 << 30}, a_shift=0, b_multiplier={1 << 30}, b_shift=-1, " \
                    f"y_multiplier={1 << 30}, y_shift=-19, left_shift=20"
        elif op == "qmul":
            # a shift of -9..1 (some left): products of about 75^2 around +-60 outputs, some saturating
            fixed = f"multiplier={int(rng.integers(1 << 30, 1 << 31))}, shift={int(rng.integers(-9, 2))}"
        else:
            scale_b = float(rng.uniform(0.01, 0.1))
            scale_y = 2 * max(ratio, 1.0) * scale_b * float(rng.uniform(0.6, 1.4))
            fixed = ", ".join(f"{k}={v}" for k, v in add_params(ratio * scale_b, scale_b, scale_y).items())
        dyn += [f"ba{j}: i8[{', '.join(map(str, a_shape))}];", f"bb{j}: i8[{', '.join(map(str, b_shape))}];"]
        shapes[f"ba{j}"], shapes[f"bb{j}"] = a_shape, b_shape
        outs.append(f"by{j}: i8[{', '.join(map(str, y_shape))}];")
        body.append(f"  op {op}(ba{j}, bb{j}, {zeros}, {fixed}, act_min={lo}, act_max={hi}) >> by{j};\n")
    text = (f"dynamic {{ {' '.join(dyn)} }}\nconstant {{ {' '.join(const)} }}\n"
            f"volatile {{ {' '.join(outs)} }}\nblock entry {{\n{''.join(body)}  return;\n}}\n")
    feeds = [{name: rng.integers(-128, 128, shape).astype(np.int8) for name, shape in shapes.items()} for _ in range(2)]
    return text, weights, feeds


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
