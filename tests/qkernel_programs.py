"""One DSL program holding many int8 layers, for the tests of the wings' int8 kernels
(tests/synth/test_mcu_qconv.py, test_mcu_qlinear.py, test_avx_qkernels.py, test_neon_qkernels.py,
test_helium_qkernels.py): each case is a qconv2d or qlinear of its own with random weights,
multipliers, shifts, scales and biases, so that one build and one run check them all.

The case tuples:
- a convolution: (x [N, H, W, C], w [O, KH, KW, C / groups], stride, padding [top, left, bottom,
  right], dilation, groups, x_zero, bias?, (act_min, act_max));
- a fully connected layer: (rows, K, N, x_zero, w_zero, bias?, (act_min, act_max));
- an element-wise qadd / qsub / qmul: Int8Program.binary's arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from openinfer.tflite.quantization import add_params


@dataclass
class Int8Program:
    """A program under construction: its declarations, statements, weights and input shapes."""

    rng: np.random.Generator
    dynamic: list[str] = field(default_factory=list)
    constant: list[str] = field(default_factory=list)
    volatile: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def conv(self, name: str, case, left_shifts: bool = False, negative_multipliers: bool = False) -> None:
        """A qconv2d of `case` reading `x<name>`, writing `y<name>`; `left_shifts`: its first two
        channels scale up (shifts 1 and 0: the requantization's other branch);
        `negative_multipliers`: every other channel's multiplier negative (rounding by sign)."""
        xs, ws, stride, pad, dil, groups, x_zero, bias, (lo, hi) = case
        n, h, w, _ = xs
        o, kh, kw, cg = ws
        oh = out_size(h, kh, stride, pad[0], pad[2], dil)
        ow = out_size(w, kw, stride, pad[1], pad[3], dil)
        self.weights[f"w{name}"] = self.rng.integers(-128, 128, ws).astype(np.int8)
        mult = self.rng.integers(1 << 30, (1 << 31) - 1, o)
        if negative_multipliers:
            mult[::2] *= -1
        self.weights[f"m{name}"] = mult.astype(np.int32)
        # shifts that put the sums' spread (about 75^2 sqrt(K)) around +-60 outputs, some saturating
        spread = -round(math.log2(75 * 75 * math.sqrt(kh * kw * cg) / 60))
        shifts = spread + self.rng.integers(-1, 2, o)
        if left_shifts:
            shifts[:2] = (1, 0)
        self.weights[f"s{name}"] = shifts.astype(np.int32)
        self.constant += [f"w{name}: i8[{', '.join(map(str, ws))}];", f"m{name}: i32[{o}];", f"s{name}: i32[{o}];"]
        args = f"x{name}, w{name}, m{name}, s{name}"
        if bias:
            self.weights[f"b{name}"] = self.rng.integers(-20000, 20000, o).astype(np.int32)
            self.constant.append(f"b{name}: i32[{o}];")
            args += f", b{name}"
        self.inputs[f"x{name}"] = xs
        self.dynamic.append(f"x{name}: i8[{', '.join(map(str, xs))}];")
        self.volatile.append(f"y{name}: i8[{n}, {oh}, {ow}, {o}];")
        self.body.append(f"  op qconv2d({args}, stride={stride}, padding={pad}, dilation={dil}, groups={groups}, "
                         f"x_zero={x_zero}, y_zero={int(self.rng.integers(-20, 21))}, act_min={lo}, "
                         f"act_max={hi}) >> y{name};\n")

    def linear(self, name: str, case) -> None:
        """A qlinear of `case` reading `x<name>`, writing `y<name>`, with scales of several magnitudes."""
        rows, k, n, x_zero, w_zero, bias, (lo, hi) = case
        self.weights[f"w{name}"] = self.rng.integers(-128, 128, (n, k)).astype(np.int8)
        # scales that put the sums' spread (about 75^2 sqrt(K)) around +-60 outputs, some saturating
        self.weights[f"s{name}"] = (60 / (75 * 75 * np.sqrt(k)) * self.rng.uniform(0.5, 2.0, n)).astype(np.float64)
        self.constant += [f"w{name}: i8[{n}, {k}];", f"s{name}: f64[{n}];"]
        args = f"x{name}, w{name}, s{name}"
        if bias:
            self.weights[f"b{name}"] = self.rng.integers(-20000, 20000, n).astype(np.int32)
            self.constant.append(f"b{name}: i32[{n}];")
            args += f", b{name}"
        self.inputs[f"x{name}"] = (rows, k)
        self.dynamic.append(f"x{name}: i8[{rows}, {k}];")
        self.volatile.append(f"y{name}: i8[{rows}, {n}];")
        self.body.append(f"  op qlinear({args}, x_zero={x_zero}, w_zero={w_zero}, "
                         f"y_zero={int(self.rng.integers(-20, 21))}, act_min={lo}, act_max={hi}) >> y{name};\n")

    def binary(self, name: str, op: str, a_shape, b_shape, ratio, bounds) -> None:
        """A qadd / qsub / qmul of inputs `a<name>`, `b<name>` into `y<name>`. `ratio`: "ties" (y =
        (2 (a - a_zero) + b - b_zero) / 4, rounded: exact halves of either sign), a dict of the
        op's fixed-point attributes, or the ratio of a's scale to b's (qadd / qsub: the attributes
        TFLite's Prepare makes of random scales; qmul: a random multiplier and a shift of -9..1)."""
        lo, hi = bounds
        y_shape = np.broadcast_shapes(a_shape, b_shape)
        zeros = ", ".join(f"{p}_zero={int(self.rng.integers(-128, 128))}" for p in "aby")
        if ratio == "ties":
            fixed = f"a_multiplier={1 << 30}, a_shift=0, b_multiplier={1 << 30}, b_shift=-1, " \
                    f"y_multiplier={1 << 30}, y_shift=-19, left_shift=20"
        elif isinstance(ratio, dict):
            fixed = ", ".join(f"{k}={v}" for k, v in ratio.items())
        elif op == "qmul":
            # products of about 75^2 around +-60 outputs, some saturating
            fixed = f"multiplier={int(self.rng.integers(1 << 30, 1 << 31))}, shift={int(self.rng.integers(-9, 2))}"
        else:
            scale_b = float(self.rng.uniform(0.01, 0.1))
            scale_y = 2 * max(ratio, 1.0) * scale_b * float(self.rng.uniform(0.6, 1.4))
            fixed = ", ".join(f"{k}={v}" for k, v in add_params(ratio * scale_b, scale_b, scale_y).items())
        for side, shape in (("a", a_shape), ("b", b_shape)):
            self.dynamic.append(f"{side}{name}: i8[{', '.join(map(str, shape))}];")
            self.inputs[f"{side}{name}"] = shape
        self.volatile.append(f"y{name}: i8[{', '.join(map(str, y_shape))}];")
        self.body.append(f"  op {op}(a{name}, b{name}, {zeros}, {fixed}, act_min={lo}, act_max={hi}) >> y{name};\n")

    def text(self) -> str:
        return (f"dynamic {{ {' '.join(self.dynamic)} }}\nconstant {{ {' '.join(self.constant)} }}\n"
                f"volatile {{ {' '.join(self.volatile)} }}\nblock entry {{\n{''.join(self.body)}  return;\n}}\n")

    def feeds(self, steps: int = 2) -> list[dict[str, np.ndarray]]:
        """`steps` sets of random int8 inputs."""
        return [{name: self.rng.integers(-128, 128, shape).astype(np.int8) for name, shape in self.inputs.items()}
                for _ in range(steps)]


def out_size(size: int, k: int, stride: int, before: int, after: int, dil: int) -> int:
    return (size + before + after - dil * (k - 1) - 1) // stride + 1


def int8_program(rng: np.random.Generator, conv_cases=(), linear_cases=()) -> Int8Program:
    """Convolutions `c0, c1, ...` (the first with left shifts) and fully connected layers `f0, f1, ...`."""
    prog = Int8Program(rng)
    for j, case in enumerate(conv_cases):
        prog.conv(f"c{j}", case, left_shifts=j == 0)
    for j, case in enumerate(linear_cases):
        prog.linear(f"f{j}", case)
    return prog
