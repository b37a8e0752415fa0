"""The Cortex-M wing's kernels (openinfer/targets/mcu/) under the Cortex-M4 firmware simulation
(openinfer/firmware.py), against the reference: the register-blocked f32 vecmat for every row
count it takes, at K and N around its column blocks (8, 6, 4 and 2 columns for 1 to 4 rows of x)
and its k steps (4 a statement for one row), and prime; the 4 x 4 register-blocked GEMM at every
M % 4 and N % 4 (its row tail the vecmat's), K odd, even and 1; the DSP extension's dequantizing GEMV
(SMLAD) for i8 / u8 / i4 / u4 weights around its 4-column block, its 4 k pairs an iteration and
its 248-row chunk, with rows of x holding an infinity, zeros, tiny and huge values; the
register-blocked convolution (4 channels x 4 columns of sums) at output widths and channel counts
around its tile, with padding, dilation, row strides, groups, conv1d, and steps past the ADD
immediates; a descriptor this machine cannot run is skipped by tests/conftest.py.

    OI_SLOW=1   also these programs on the Cortex-M7 and the Cortex-M33 (Armv8-M Mainline, the
                same wing)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from compilers import compile_kernels_at
from conv_shapes import conv_out

import openinfer as oi
from openinfer.targets import devices
from openinfer.targets.base import target_for
from openinfer.targets.mcu import CortexMRenderer
from openinfer.testing import assert_matches_reference

SLOW = os.environ.get("OI_SLOW") == "1"
SIZES = (7, 8, 9, 15, 16, 17, 33, 100)
#: (M, K, N): every N with every M, K cycling through the sizes (a shift per M, so each M meets
#: each K too)
CASES = [(m, SIZES[(i + 3 * m) % len(SIZES)], n) for m in range(1, 5) for i, n in enumerate(SIZES)]
#: (M, K, N) of the GEMM: M from 5 on at each M % 4, each N % 4 (N < 4: no whole block), K = 1, 2,
#: odd, even and prime
GEMM_CASES = [(5, 1, 4), (6, 2, 9), (7, 3, 6), (8, 17, 7), (9, 16, 5), (12, 33, 8), (13, 7, 3), (23, 31, 13)]

#: dequant_matmul: (M, or None for a 1-D x; K, N, weight dtype, per-channel scale?, zero point?).
#: K around the asm loop's 4 k pairs (8 rows) and the 248-row chunk (and two chunks), odd (the
#: last row alone), 1, prime; N around the 4-column block, 1, odd for 4-bit (every other row starts
#: mid-byte), even for 4-bit, and past the loads' 12-bit offsets: MOVW for an 8-bit N > 2047 (the
#: pointer's step) and > 4093 (the loads), a 4-bit N > 8191, MOVT once a k pair's rows pass 64 KB
DEQUANT = [
    (1, 1, 1, "i8", False, False),
    (2, 2, 3, "u8", True, True),
    (1, 7, 4, "i8", True, False),
    (3, 8, 5, "i8", False, True),
    (4, 9, 8, "u8", True, False),
    (None, 16, 9, "u8", False, True),
    (2, 17, 7, "i4", True, True),
    (1, 15, 13, "u4", True, False),
    (3, 31, 12, "i4", False, False),
    (4, 33, 17, "u4", False, True),
    (1, 247, 33, "i8", True, True),
    (2, 248, 31, "u8", True, True),
    (1, 249, 29, "i4", True, True),
    (1, 250, 6, "u4", False, False),
    (1, 497, 11, "i8", False, False),
    (1, 503, 15, "i4", True, False),
    (4, 127, 64, "i8", True, True),
    (3, 64, 100, "u4", True, True),
    (2, 40, 101, "i4", False, True),
    (1, 5, 2049, "i8", True, False),
    (1, 4, 4099, "u8", False, True),
    (1, 9, 8195, "i4", True, True),
    (1, 3, 8194, "u4", False, False),
    (1, 3, 65537, "i8", True, True),
]
#: the values of each weight dtype
RANGES = {"i8": (-128, 127), "u8": (0, 255), "i4": (-8, 7), "u4": (0, 15)}
#: (case, row of x, what the row holds) in the first step: an infinity (the row's f32 path), a row
#: of zeros, of tiny (subnormal) and of huge values (the powers of two that scale x at their limits)
SPECIAL_ROWS = [(2, 0, "inf"), (4, 2, "zeros"), (9, 1, "tiny"), (16, 3, "huge"), (17, 0, "inf")]
#: a zero point past +-2^15: every row of that case takes the f32 path
WIDE_ZERO_POINT = 18


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-cache")))
        yield


def test_cortex_m4_takes_the_cortex_m_family():
    assert devices.load("cortex-m4").isa == "cortex-m" and devices.load("cortex-m7").isa == "cortex-m"
    assert devices.load("cortex-m33").isa == "cortex-m-v8m"     # Armv8-M Mainline: the same wing
    assert target_for(devices.load("cortex-m33")).renderer_class is CortexMRenderer


def _matmul_program(cases, tmp_path: Path, seed: int, arch: str) -> str:
    """One program with a matmul of its own for each (M, K, N) of `cases`, simulated on `arch`
    (one firmware build and run) against the reference; the generated kernels' text."""
    decls = [(f"x{j}: f32[{m}, {k}];", f"w{j}: f32[{k}, {n}];", f"y{j}: f32[{m}, {n}];")
             for j, (m, k, n) in enumerate(cases)]
    text = (f"dynamic {{ {' '.join(d[0] for d in decls)} }}\nconstant {{ {' '.join(d[1] for d in decls)} }}\n"
            f"volatile {{ {' '.join(d[2] for d in decls)} }}\nblock entry {{\n"
            + "".join(f"  op matmul(x{j}, w{j}) >> y{j};\n" for j in range(len(cases))) + "  return;\n}\n")
    graph = oi.graph(text)
    rng = np.random.default_rng(seed)
    tmp_path.mkdir(exist_ok=True)
    oi.write_oinf(tmp_path / "matmul.oinf",
                  {f"w{j}": rng.uniform(-1, 1, (k, n)).astype(np.float32) for j, (_, k, n) in enumerate(cases)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "matmul.oinf"), graph, arch=arch, steps=2)
    return "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))


def _check_vecmat(tmp_path: Path, arch: str) -> None:
    kernels = _matmul_program(CASES, tmp_path / "vecmat", 7, arch)
    for m, k, n in CASES:
        assert f"cortex-m vecmat: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)


def _check_gemm(tmp_path: Path, arch: str) -> None:
    kernels = _matmul_program(GEMM_CASES, tmp_path / "gemm", 11, arch)
    for m, k, n in GEMM_CASES:
        assert f"cortex-m gemm: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)
        if m % 4:
            assert f"cortex-m vecmat: f32[{m % 4}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)


def test_vecmat_matches_reference(tmp_path):
    _check_vecmat(tmp_path, "cortex-m4")


def test_gemm_matches_reference(tmp_path):
    _check_gemm(tmp_path, "cortex-m4")


def _dequant_program(rng: np.random.Generator):
    """The DEQUANT cases as one program: (graph text, weights, two steps' inputs)."""
    dyn, const, outs, body, weights = [], [], [], [], {}
    for j, (m, k, n, wt, per_channel, zp) in enumerate(DEQUANT):
        lo, hi = RANGES[wt]
        w = rng.integers(lo, hi + 1, (k, n)).astype(np.int8 if wt[0] == "i" else np.uint8)
        w.reshape(-1)[:2] = (lo, hi)[:w.size]
        nc = n if per_channel else 1
        # dequantized weights of about +-1 (the reference's f32 sums then of the size of x's)
        weights[f"w{j}"] = oi.TensorSpec(w, dtype=wt)
        weights[f"s{j}"] = rng.uniform(0.5, 1.5, nc).astype(np.float32) / (hi - lo + 1) * 2
        const += [f"w{j}: {wt}[{k}, {n}];", f"s{j}: f32[{nc}];"]
        args = f"x{j}, w{j}, s{j}"
        if zp:
            z = rng.integers(lo, hi + 1, nc).astype(np.int32)
            if j == WIDE_ZERO_POINT:
                z[0] = 40000
            weights[f"z{j}"] = z
            const.append(f"z{j}: i32[{nc}];")
            args += f", z{j}"
        dims = f"{k}" if m is None else f"{m}, {k}"
        dyn.append(f"x{j}: f32[{dims}];")
        outs.append(f"y{j}: f32[{n if m is None else f'{m}, {n}'}];")
        body.append(f"  op dequant_matmul({args}) >> y{j};\n")
    text = (f"dynamic {{ {' '.join(dyn)} }}\nconstant {{ {' '.join(const)} }}\n"
            f"volatile {{ {' '.join(outs)} }}\nblock entry {{\n{''.join(body)}  return;\n}}\n")
    feeds = [{f"x{j}": rng.uniform(-1, 1, (k,) if m is None else (m, k)).astype(np.float32)
              for j, (m, k, *_) in enumerate(DEQUANT)} for _ in range(2)]
    for j, row, what in SPECIAL_ROWS:
        x = feeds[0][f"x{j}"][row]
        if what == "inf":
            x[len(x) // 2] = np.inf
        else:
            x *= {"zeros": 0.0, "tiny": 1e-39, "huge": 1e30}[what]
    return text, weights, feeds


def _check_dequant(tmp_path: Path, arch: str):
    text, weights, feeds = _dequant_program(np.random.default_rng(11))
    oi.write_oinf(tmp_path / "dequant.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "dequant.oinf"), oi.graph(text), arch=arch,
                                   feeds=feeds)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for m, k, n, wt, *_ in DEQUANT:
        assert f"cortex-m SMLAD dequant_matmul: f32[{m or 1}, {k}] @ {wt}[{k}, {n}]" in kernels, (m, k, n, wt)
    return sim


def test_dequant_matches_reference(tmp_path):
    """Every case one dequant_matmul of its own in one program, over two steps; the kernels also
    compile warning-free unoptimised (the block routine is a naked function, whose registers GCC
    does not allocate)."""
    sim = _check_dequant(tmp_path, "cortex-m4")
    compile_kernels_at(sim.project, "-O0")


#: name -> (x, w, attributes, bias?): output channels around the 4-channel block (3, 4, 5, 7, 8,
#: 9) and blocks of 1, 2 and 3 channels left over, whose tiles are 12, 8 and 5 columns wide (4 x 4
#: sums: 1 x 12, 2 x 8, 3 x 5), output widths around each tile width (3, 4, 5, 6, 7, 8, 9, 11, 12,
#: 13) and prime (17, 31), 3 x 3, 1 x 1 (input channels odd, even and 1; two an iteration from 2
#: output channels on), 5 x 5, 1 x 11 and 1 x 12 taps (segments of 14 inputs, weights loaded two
#: at a time), padding 0, 1, 2, on one side, on four sides and wider than the taps (outputs of
#: only padding, the bias; the last case's every output), dilation (5 columns: a segment of 14), a
#: row stride of 2, groups and depthwise convolutions, a batch, conv1d; steps no ADD immediate
#: encodes (a row of 4,400 bytes, a channel plane past 64 KB: MOVT)
CONVS = {
    "k3_w3": ((1, 3, 5, 3), (4, 3, 3, 3), {"padding": 1}, True),
    "k3_w4": ((1, 2, 4, 4), (5, 2, 3, 3), {"padding": 1}, False),
    "k3_w5": ((2, 5, 6, 5), (3, 5, 3, 3), {"padding": 1}, True),
    "k3_w7": ((1, 4, 7, 7), (8, 4, 3, 3), {"padding": 1}, True),
    "k3_w9": ((1, 3, 5, 9), (9, 3, 3, 3), {"padding": 1}, False),
    "k3_w13": ((1, 4, 6, 15), (7, 4, 3, 3), {}, True),
    "k3_o6": ((1, 3, 4, 9), (6, 3, 3, 3), {"padding": 1}, True),
    "k3_o2": ((1, 2, 3, 7), (2, 2, 3, 3), {"padding": 1}, False),
    "k3_o1": ((1, 2, 3, 11), (1, 2, 3, 3), {"padding": 1}, True),
    "c32": ((1, 32, 14, 14), (32, 32, 3, 3), {"padding": 1}, True),
    "k1": ((1, 17, 5, 7), (9, 17, 1, 1), {}, False),
    "k1_even": ((1, 8, 3, 13), (5, 8, 1, 1), {}, True),
    "k1_o6": ((1, 6, 4, 11), (6, 6, 1, 1), {}, True),
    "k1_o7": ((1, 5, 3, 6), (7, 5, 1, 1), {"padding": [0, 1]}, False),
    "k1_pad": ((1, 3, 4, 6), (4, 3, 1, 1), {"padding": 1}, True),
    "k5": ((1, 3, 9, 11), (5, 3, 5, 5), {"padding": 2}, True),
    "k5_sides": ((1, 2, 7, 8), (4, 2, 5, 5), {"padding": [1, 2, 0, 3]}, False),
    "wide_pad": ((1, 2, 4, 5), (4, 2, 3, 3), {"padding": 3}, True),
    "dil": ((1, 4, 12, 11), (5, 4, 3, 3), {"dilation": 2, "padding": 2}, True),
    "dil5": ((1, 2, 6, 17), (3, 2, 3, 3), {"dilation": [1, 5], "padding": [1, 5]}, True),
    "k11": ((1, 2, 3, 20), (4, 2, 1, 11), {"padding": [0, 5]}, True),
    "k12": ((1, 2, 3, 16), (3, 2, 1, 12), {}, False),
    "s2": ((2, 3, 15, 17), (8, 3, 3, 3), {"stride": [2, 1], "padding": 1}, False),
    "groups": ((1, 12, 6, 10), (9, 4, 3, 3), {"padding": 1, "groups": 3}, True),
    "depthwise": ((1, 5, 5, 13), (5, 1, 3, 3), {"padding": 1, "groups": 5}, False),
    "depthwise12": ((1, 2, 4, 12), (2, 1, 3, 3), {"padding": 1, "groups": 2}, True),
    "c1d": ((2, 5, 31), (7, 5, 5), {"padding": 2}, True),
    "c1d_long": ((1, 2, 1100), (5, 2, 3), {"padding": 1}, True),
    "wide_rows": ((1, 1, 3, 1100), (5, 1, 2, 3), {"padding": 1}, True),
    "big_plane": ((1, 1, 131, 129), (2, 1, 1, 1), {}, False),
    "all_pad": ((1, 2, 2), (3, 2, 2), {"dilation": 3, "padding": 1}, True),
}
#: convolutions the kernel leaves to the portable one: a column stride of 2, taps reaching past 14
#: input columns (1 x 15)
PORTABLE_CONVS = {
    "sw2": ((1, 3, 7, 9), (4, 3, 3, 3), {"stride": [1, 2], "padding": 1}, True),
    "k15": ((1, 2, 3, 16), (3, 2, 1, 15), {}, False),
}


def _conv_signature(xs, ws) -> str:
    return f"cortex-m conv{len(xs) - 2}d: f32{list(xs)} * f32{list(ws)}"


def _check_conv(tmp_path: Path, arch: str) -> None:
    """Every convolution of CONVS and PORTABLE_CONVS one op of one program (random weights and
    bias), two steps against the reference; CONVS take the register-blocked kernel, the others not."""
    rng = np.random.default_rng(13)
    convs = {**CONVS, **PORTABLE_CONVS}
    weights, dyn, const, outs, body = {}, [], [], [], []
    for name, (xs, ws, attrs, bias) in convs.items():
        dyn.append(f"{name}_x: f32{list(xs)};")
        weights[f"{name}_w"] = rng.uniform(-1, 1, ws).astype(np.float32)
        const.append(f"{name}_w: f32{list(ws)};")
        args = f"{name}_x, {name}_w"
        if bias:
            weights[f"{name}_b"] = rng.uniform(-1, 1, ws[0]).astype(np.float32)
            const.append(f"{name}_b: f32[{ws[0]}];")
            args += f", {name}_b"
        args += "".join(f", {k}={v}" for k, v in attrs.items())
        body.append(f"  op conv{len(xs) - 2}d({args}) >> {name};\n")
        outs.append(f"{name}: f32{list(conv_out(xs, ws, attrs))};")
    text = (f"dynamic {{ {' '.join(dyn)} }}\nconstant {{ {' '.join(const)} }}\nvolatile {{ {' '.join(outs)} }}\n"
            f"block entry {{\n{''.join(body)}  return;\n}}\n")
    tmp_path.mkdir(exist_ok=True)
    oi.write_oinf(tmp_path / "conv.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "conv.oinf"), oi.graph(text), arch=arch, steps=2)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for name, (xs, ws, _, _) in CONVS.items():
        assert _conv_signature(xs, ws) in kernels, name
    for name, (xs, ws, _, _) in PORTABLE_CONVS.items():
        assert _conv_signature(xs, ws) not in kernels, name


def test_conv_matches_reference(tmp_path):
    _check_conv(tmp_path / "conv", "cortex-m4")


@pytest.mark.skipif(not SLOW, reason="OI_SLOW=1: the Cortex-M7 and M33 builds")
@pytest.mark.parametrize("arch", ("cortex-m7", "cortex-m33"))
def test_cortex_m7_and_m33_match_reference(tmp_path, arch):
    _check_vecmat(tmp_path, arch)
    _check_gemm(tmp_path, arch)
    _check_dequant(tmp_path, arch)
    _check_conv(tmp_path / "conv", arch)
