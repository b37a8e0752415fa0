"""The Cortex-M wing's Helium kernels (openinfer/targets/mcu/helium.py) under the Cortex-M55
firmware simulation (openinfer/firmware.py: mps3-an547, whose QEMU emulates MVE with floating
point), against the reference with random operands: for each kernel one program holds every
case, so one firmware build and run covers them, and the generated kernels must carry the
Helium kernel's comment line for each case (a silent fallback to the portable kernel fails).
A descriptor this machine cannot run is skipped by tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conv_shapes import conv_out

import openinfer as oi
from openinfer.targets import devices
from openinfer.testing import assert_matches_reference

#: rows of x: 1 to 4 (the GEMVs' 1 x 6, 2 x 3 tiles), 3 and its multiples +-1 (the GEMM's 3 x 2
#: tiles and the remainders of 1 and 2 rows)
ROWS = (1, 2, 3, 4, 5, 7)
#: columns: the last partial vector alone (1, 3), a vector +-1, each tile's width +-1 (8, 12, 24
#: columns for 3, 2, 1 rows) and primes
COLS = (1, 3, 4, 5, 7, 8, 9, 12, 13, 23, 24, 25, 29)
#: depths: the asm statement's 4 k steps +-1, its pairs, one step alone, primes
DEPTHS = (1, 2, 3, 4, 5, 7, 8, 9, 17)
#: (M, K, N): every N with every M, K cycling through the depths (a shift per M), and two GEMMs
#: of many row blocks
MATMULS = [(m, DEPTHS[(i + 2 * j) % len(DEPTHS)], n) for j, m in enumerate(ROWS) for i, n in enumerate(COLS)] + \
    [(13, 37, 29), (16, 64, 50)]


#: x @ W^T (W stored [N, K], an imported Gemm's weight): rows 1 to 3 and 5 (2-row blocks, a 1-row
#: rest), rows of W around the tiles' 6 (one row of x) and 2 (two), depths around the 8 k steps of
#: a statement, its 4, the predicated last K % 4, primes
DOT_ROWS = (1, 2, 3, 5)
DOT_COLS = (1, 2, 3, 5, 6, 7, 12, 13)
DOT_DEPTHS = (1, 3, 4, 5, 7, 8, 9, 12, 17, 33)
DOTS = [(m, DOT_DEPTHS[(i + 3 * j) % len(DOT_DEPTHS)], n) for j, m in enumerate(DOT_ROWS)
        for i, n in enumerate(DOT_COLS)] + [(11, 70, 23)]


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("helium-cache")))
        yield


def _kernels(sim) -> str:
    return "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))


def test_cortex_m55_takes_the_helium_family():
    dev = devices.load("cortex-m55")
    assert dev.isa == "helium" and dev.family.includes == ("arm_mve.h",)


def test_matmul_matches_reference(tmp_path):
    """Every case one matmul of its own in one program (W a constant: a layer's weight), x @ W
    and x @ W^T."""
    cases = [(m, k, n, False) for m, k, n in MATMULS] + [(m, k, n, True) for m, k, n in DOTS]
    wshape = {j: (n, k) if tb else (k, n) for j, (_, k, n, tb) in enumerate(cases)}
    decls = [(f"x{j}: f32[{m}, {k}];", f"w{j}: f32[{', '.join(map(str, wshape[j]))}];", f"y{j}: f32[{m}, {n}];")
             for j, (m, k, n, _) in enumerate(cases)]
    text = (f"dynamic {{ {' '.join(d[0] for d in decls)} }}\nconstant {{ {' '.join(d[1] for d in decls)} }}\n"
            f"volatile {{ {' '.join(d[2] for d in decls)} }}\nblock entry {{\n"
            + "".join(f"  op matmul(x{j}, w{j}{', transpose_b=true' if tb else ''}) >> y{j};\n"
                      for j, (*_, tb) in enumerate(cases)) + "  return;\n}\n")
    rng = np.random.default_rng(11)
    oi.write_oinf(tmp_path / "matmul.oinf",
                  {f"w{j}": rng.uniform(-1, 1, s).astype(np.float32) for j, s in wshape.items()})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "matmul.oinf"), oi.graph(text), arch="cortex-m55",
                                   steps=2)
    kernels = _kernels(sim)
    for m, k, n in MATMULS:
        assert f"helium matmul: f32[{m}, {k}] @ f32[{k}, {n}]," in kernels, (m, k, n)
    for m, k, n in DOTS:
        assert f"helium matmul: f32[{m}, {k}] @ f32[{n}, {k}]^T," in kernels, (m, k, n)


#: the element-wise ops with an MVE form, one kernel each over [7, 37] (whole vectors and a
#: partial one on every row), with broadcasts of a row, a column and a scalar
UNARY = ["neg(x)", "abs(x)", "relu(x)", "relu(x, alpha=0.1, clamp_max=2.5, clamp_min=-1.0)", "exp(x)", "tanh(x)",
         "sigmoid(x)", "silu(x)", "gelu(x)", 'gelu(x, approximate="tanh")', "erf(x)", "sqrt(x)", "rsqrt(x)",
         "recip(x)", "clamp(x, min=-0.5, max=0.75)", "floor(x)", "ceil(x)", "trunc(x)", "round(x)"]
BINARY = ["add(x, z)", "sub(x, z)", "mul(x, z)", "div(x, z)", "min(x, z)", "max(x, z)", "fma(x, z, x)",
          "div(x, z, div_by_zero_mask=7.0)", "add(x, brow)", "sub(bcol, x)", "mul(x, bs)", "add(brow, bcol)"]


def _decls(kind: str, shapes: dict[str, tuple[int, ...]]) -> str:
    return f"{kind} {{ " + " ".join(f"{k}: f32[{', '.join(map(str, s))}];" for k, s in shapes.items()) + " }\n"


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
def test_elementwise_matches_reference(tmp_path):
    rng = np.random.default_rng(3)
    shapes = {"x": (7, 37), "z": (7, 37), "brow": (37,), "bcol": (7, 1), "bs": (1,), "u": (5,), "w": (3,),
              "v": (4,), "big": (9, 67)}
    inputs = {k: rng.uniform(-4, 4, s).astype(np.float32) for k, s in shapes.items()}
    # special values; subnormals, which MVE's arithmetic flushes to zero (helium_elementwise.py)
    inputs["x"][0, :10] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -100.0, 100.0, -1e-40, 3e-39]
    inputs["z"][0, :8] = [0.0, -0.0, np.nan, 2.0, -0.0, 0.0, 1e-40, -1e-40]
    inputs["x"][1] = rng.uniform(-90, 90, 37)           # exp overflow / underflow, saturated tanh
    inputs["x"][2] = rng.uniform(-1e-3, 1e-3, 37)        # small |x|: polynomial branches
    inputs["x"][3] = rng.integers(-8, 8, 37) + 0.5       # halves: round's ties (away from zero)
    ops = UNARY + BINARY
    outs = {f"y{i}": (7, 37) for i in range(len(ops))}
    body = "".join(f"  op {o} >> y{i};\n" for i, o in enumerate(ops))
    # in place (the output aliasing the first or the second operand); a vector +-1, shorter than one
    body += "  op exp(u) >> u;\n  op mul(w, w) >> w;\n  op sub(v, v) >> v;\n  op add(brow, z) >> z;\n"
    # chains the fusion pass merges into one kernel: in place, with broadcasts, a step reading an input twice
    outs["h"] = outs["t"] = outs["f"] = (7, 37)
    outs["g"] = (9, 67)
    body += ("  op add(x, brow) >> h;\n  op relu(h, alpha=0.1) >> h;\n  op mul(h, bcol) >> h;\n  op gelu(h) >> h;\n"
             "  op sub(z, x) >> t;\n  op exp(t) >> t;\n  op div(t, brow) >> f;\n"
             "  op floor(big) >> g;\n  op max(g, big) >> g;\n  op silu(g) >> g;\n")
    text = _decls("dynamic", shapes) + _decls("volatile", outs) + f"block entry {{\n{body}  return;\n}}\n"
    oi.write_oinf(tmp_path / "none.oinf", {"unused": np.zeros(1, np.float32)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "none.oinf"), oi.graph(text), arch="cortex-m55",
                                   feeds=[inputs])
    kernels = _kernels(sim)
    for op in ops:
        assert f"helium element-wise: {op.split('(')[0]} over" in kernels, op
    for chain in ("add, relu, mul, gelu", "sub, exp", "floor, max, silu"):
        assert f"helium element-wise: {chain} over" in kernels, chain


#: name -> (x, w, attributes, bias?): output widths around a vector (3, 4, 5) and the tiles (8
#: columns for 3 channels +-1; 12 for 2; 24 for 1, a depthwise convolution's), a width of 1,
#: channel counts leaving blocks of 1 and 2 channels (4, 5, 7, 17), 1 x 1 and 5 x 5 taps, padding
#: on one side, on four sides and wider than the taps (outputs that see only padding), dilation,
#: a row stride of 2, groups, a batch, conv1d
CONVS = {
    "c32": ((1, 32, 14, 14), (32, 32, 3, 3), {"padding": 1}, True),
    "c_w7": ((1, 3, 6, 7), (4, 3, 3, 3), {"padding": 1}, True),
    "c_w8": ((2, 2, 5, 8), (5, 2, 3, 3), {"padding": 1}, False),
    "c_w9": ((1, 3, 5, 9), (7, 3, 3, 3), {"padding": 1}, True),
    "c_w13": ((1, 4, 4, 13), (2, 4, 3, 3), {"padding": [1, 0]}, True),
    "c_dw25": ((1, 3, 4, 25), (3, 1, 3, 3), {"padding": 1, "groups": 3}, True),
    "c_dw23": ((1, 2, 3, 23), (2, 1, 3, 3), {"padding": 1, "groups": 2}, False),
    "c_small": ((1, 2, 3, 3), (5, 2, 3, 3), {"padding": 1}, True),
    "c_one": ((1, 3, 4, 1), (4, 3, 3, 3), {"padding": 1}, True),
    "c_1x1": ((1, 17, 5, 7), (9, 17, 1, 1), {}, False),
    "c_5x5": ((1, 3, 9, 11), (5, 3, 5, 5), {"padding": [1, 2, 0, 3]}, True),
    "c_wide_pad": ((1, 2, 4, 5), (4, 2, 3, 3), {"padding": 3}, True),
    "c_dil": ((1, 4, 12, 11), (5, 4, 3, 3), {"dilation": 2, "padding": 2}, True),
    "c_s2": ((2, 3, 15, 17), (8, 3, 3, 3), {"stride": [2, 1], "padding": 1}, False),
    "c_groups": ((1, 12, 6, 10), (9, 4, 3, 3), {"padding": 1, "groups": 3}, True),
    "c_1d": ((2, 5, 31), (7, 5, 5), {"padding": 2}, True),
}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
def test_conv_matches_reference(tmp_path):
    rng = np.random.default_rng(5)
    weights, inputs, dyn, const, outs, body = {}, {}, {}, {}, {}, []
    for name, (xs, ws, attrs, bias) in CONVS.items():
        inputs[f"{name}_x"], dyn[f"{name}_x"] = rng.standard_normal(xs).astype(np.float32), xs
        weights[f"{name}_w"], const[f"{name}_w"] = rng.standard_normal(ws).astype(np.float32), ws
        args = f"{name}_x, {name}_w"
        if bias:
            weights[f"{name}_b"], const[f"{name}_b"] = rng.standard_normal(ws[0]).astype(np.float32), (ws[0],)
            args += f", {name}_b"
        args += "".join(f", {k}={v}" for k, v in attrs.items())
        body.append(f"  op conv{len(xs) - 2}d({args}) >> {name};\n")
        outs[name] = conv_out(xs, ws, attrs)
    inputs["c_w9_x"].reshape(-1)[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]    # through the sums
    text = (_decls("dynamic", dyn) + _decls("constant", const) + _decls("volatile", outs)
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    oi.write_oinf(tmp_path / "conv.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "conv.oinf"), oi.graph(text), arch="cortex-m55",
                                   feeds=[inputs])
    kernels = _kernels(sim)
    for name, (xs, ws, _, _) in CONVS.items():
        assert f"helium conv{len(xs) - 2}d: f32{list(xs)} * f32{list(ws)}" in kernels, name


def test_elementwise_with_a_run_time_row(tmp_path):
    """A row whose length is a run-time size (openinfer/dims.py): the Helium kernels, whose
    extents render its C expression, take it (a chain with a row broadcast; a column's)."""
    text = ("dynamic { x: f32[3, T]; r: f32[T]; c: f32[3, 1]; }\nvolatile { y: f32[3, T]; z: f32[3, T]; }\n"
            "block entry {\n  op add(x, r) >> y;\n  op gelu(y) >> y;\n  op mul(x, c) >> z;\n  return;\n}\n")
    oi.write_oinf(tmp_path / "none.oinf", {"unused": np.zeros(1, np.float32)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "none.oinf"), oi.graph(text), arch="cortex-m55",
                                   sizevars={"T": 11}, steps=2)
    kernels = _kernels(sim)
    assert "helium element-wise: add, gelu over" in kernels and "helium element-wise: mul over" in kernels
