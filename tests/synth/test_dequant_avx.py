"""dequant_matmul's AVX2 / AVX-512 kernels (templates/x86/dequant.c.j2) against NumPy.

One graph per device holds every case: i8 / u8 / i4 / u4 weights, per-channel and per-tensor
scales, with and without zero points, x of 1 and 2 dims, row counts that fill a row group of the
kernel and leave a remainder (M = 1, 3, 5), K below and around the rows-per-pass, N a multiple of a
cache line of w, of a vector only, and neither (partial vectors, 4-bit tails), and one shape large
enough to split over the pool (run with 1 and 2 threads), by column chunks or, for a narrow w,
by slices of K whose sums are added before the scale. An odd N with 4-bit weights takes the
portable kernel. Special values in x (inf, NaN) must come out as the reference's.

The same graph is also built with -fsanitize=address,undefined and run in a child interpreter
(tests/sanitized.py).
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import numpy as np
import pytest
from sanitized import SANITIZE, run_sanitized

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.dtypes import lookup
from openinfer.oinf.values import TensorSpec
from openinfer.sim import Simulator

DEVICES = ("x86_64-avx2", "x86_64-avx512")
WTYPES = {"i8": (-128, 127), "u8": (0, 255), "i4": (-8, 7), "u4": (0, 15)}

#: name: (M or None for 1-D x, K, N, per channel (else per tensor)?, zero point (of the scale's shape)?, weight
#: dtypes). K < 8 has no pass of whole w rows, K = 129 and 300 leave rows after the last; N = 256
#: is whole lines of w (64 bytes), 208 whole vectors only, 34 / 130 / 200 / 1030 a partial vector.
SHAPES = {
    "v1d": (None, 67, 200, True, False, "i8 u8 i4 u4"),
    "m5": (5, 129, 256, True, True, "i8 u8 i4 u4"),
    "k3": (3, 3, 34, False, True, "i8 u8 i4 u4"),
    "m4": (4, 77, 208, False, False, "i8 u8 i4 u4"),
    "wide": (1, 260, 1030, True, True, "i8 u8 i4 u4"),
    "par": (5, 300, 4100, True, True, "i8 u4"),       # split over the pool: 2 row groups x 4 column chunks
    "slices": (2, 1100, 520, False, True, "i4 u8"),   # narrow w split over the pool along K (last slice: 260 rows)
    "odd": (1, 65, 37, True, True, "i8 i4"),          # 4-bit with odd N: the portable kernel
}


def _dot(x: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x @ d exactly (float64), and |x| @ |d|: the magnitude of its terms (compare's `magnitude`)."""
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return x @ d, np.abs(x) @ np.abs(d)


def _cases(rng):
    """(graph text, weights, inputs, expected outputs, the magnitude of the terms of each expected sum)."""
    weights, inputs, decl_dyn, decl_const, decl_out, body, want, terms = {}, {}, [], [], [], [], {}, {}
    for sname, (m, k, n, per_channel, zp, wts) in SHAPES.items():
        for wt in wts.split():
            lo, hi = WTYPES[wt]
            tag = f"{wt}_{sname}"
            w = rng.integers(lo, hi + 1, (k, n)).astype(np.int8 if wt[0] == "i" else np.uint8)
            w[0, :2] = lo, hi
            xs = (k,) if m is None else (m, k)
            x = rng.standard_normal(xs).astype(np.float32)
            nc = n if per_channel else 1
            s = rng.uniform(0.01, 0.2, nc).astype(np.float32)
            weights[f"w_{tag}"] = TensorSpec(w, dtype=wt)
            weights[f"s_{tag}"] = s
            decl_const += [f"w_{tag}: {wt}[{k}, {n}];", f"s_{tag}: f32[{nc}];"]
            args = f"x_{tag}, w_{tag}, s_{tag}"
            deq = w.astype(np.float64)
            if zp:
                z = rng.integers(lo // 2, hi // 2 + 1, nc).astype(np.int32)
                weights[f"z_{tag}"] = z
                decl_const.append(f"z_{tag}: i32[{z.size}];")
                args += f", z_{tag}"
                deq = deq - z
            inputs[f"x_{tag}"] = x
            decl_dyn.append(f"x_{tag}: f32[{', '.join(map(str, xs))}];")
            out = (n,) if m is None else (m, n)
            decl_out.append(f"y_{tag}: f32[{', '.join(map(str, out))}];")
            body.append(f"  op dequant_matmul({args}) >> y_{tag};\n")
            want[f"y_{tag}"], terms[f"y_{tag}"] = _dot(x, deq * s.astype(np.float64))
    # special values: inf and NaN in x (an inf against w == zero point is NaN, as in the reference);
    # with a zero point the row group takes the exact loop, without one the vector kernel
    x = rng.standard_normal((3, 40)).astype(np.float32)
    x[0, 5], x[1, 7] = np.inf, np.nan
    w = rng.integers(-8, 8, (40, 64)).astype(np.int8)
    z = rng.integers(-4, 4, 64).astype(np.int32)
    w[5, :8] = z[:8]
    s = rng.uniform(0.01, 0.2, 64).astype(np.float32)
    weights.update(w_sp=TensorSpec(w, dtype="i4"), s_sp=s, z_sp=z, w_sp8=w)
    inputs["x_sp"] = x
    decl_dyn.append("x_sp: f32[3, 40];")
    decl_const += ["w_sp: i4[40, 64];", "s_sp: f32[64];", "z_sp: i32[64];", "w_sp8: i8[40, 64];"]
    decl_out += ["y_sp: f32[3, 64];", "y_sp8: f32[3, 64];"]
    body += ["  op dequant_matmul(x_sp, w_sp, s_sp, z_sp) >> y_sp;\n",
             "  op dequant_matmul(x_sp, w_sp8, s_sp) >> y_sp8;\n"]
    want["y_sp"], terms["y_sp"] = _dot(x, (w - z.astype(np.float64)) * s)
    want["y_sp8"], terms["y_sp8"] = _dot(x, w * s.astype(np.float64))
    # and where w is split along K: every slice's sums of a non-finite row of x are discarded
    x = rng.standard_normal((2, 1100)).astype(np.float32)
    x[1, 17] = np.inf
    w = rng.integers(-8, 8, (1100, 520)).astype(np.int8)
    z = rng.integers(-4, 4, 520).astype(np.int32)
    w[17, :8] = z[:8]
    s = rng.uniform(0.01, 0.2, 520).astype(np.float32)
    weights.update(w_spk=TensorSpec(w, dtype="i4"), s_spk=s, z_spk=z)
    inputs["x_spk"] = x
    decl_dyn.append("x_spk: f32[2, 1100];")
    decl_const += ["w_spk: i4[1100, 520];", "s_spk: f32[520];", "z_spk: i32[520];"]
    decl_out.append("y_spk: f32[2, 520];")
    body.append("  op dequant_matmul(x_spk, w_spk, s_spk, z_spk) >> y_spk;\n")
    want["y_spk"], terms["y_spk"] = _dot(x, (w - z.astype(np.float64)) * s)
    _epilogue_cases(rng, weights, inputs, decl_dyn, decl_const, decl_out, body, want, terms)
    text = (f"dynamic {{ {' '.join(decl_dyn)} }}\nconstant {{ {' '.join(decl_const)} }}\n"
            f"volatile {{ {' '.join(decl_out)} }}\nblock entry {{\n{''.join(body)}  return;\n}}\n")
    return text, weights, inputs, want, terms


#: epilogues (x86/renderer.py `takes_epilogue`): name -> (x operand, weights, epilogue statements after
#: `>> p_<name>`, extra inputs). Paths: one row group over column chunks (e_res: a residual in place),
#: three rows with per-channel zero points (bias, GELU), the K slices (a residual in place, SiLU),
#: the exact loop of a non-finite row of x (times a per-row column), two row-group kernels over the
#: pool (bias).
EPILOGUES = {
    "e_res": ("x_i8_wide", "w_i8_wide, s_i8_wide, z_i8_wide", ["add(r_e_res, p_e_res) >> r_e_res"],
              {"r_e_res": (1, 1030)}),
    "e_gelu": ("x_u4_k3e", "w_u4_m5, s_u4_m5, z_u4_m5",
               ["add(p_e_gelu, b_e_gelu) >> p_e_gelu", "gelu(p_e_gelu) >> p_e_gelu"], {"b_e_gelu": (256,)}),
    "e_slices": ("x_e_slices", "w_spk, s_spk, z_spk", ["add(r_e_slices, p_e_slices) >> r_e_slices",
                                                       "silu(r_e_slices) >> r_e_slices"], {"r_e_slices": (2, 520)}),
    "e_exact": ("x_sp", "w_sp, s_sp, z_sp", ["mul(p_e_exact, c_e_exact) >> p_e_exact"], {"c_e_exact": (3, 1)}),
    "e_par": ("x_u4_par", "w_u4_par, s_u4_par, z_u4_par", ["add(p_e_par, b_e_par) >> p_e_par"], {"b_e_par": (4100,)}),
}


def _epilogue_cases(rng, weights, inputs, decl_dyn, decl_const, decl_out, body, want, terms) -> None:
    """EPILOGUES added to _cases' graph; `want` gets each chain's result, not the product, and `terms`
    the magnitude of the terms of the sum entering the chain (GELU's and SiLU's slopes stay below 1.13)."""
    x_m5 = inputs["x_u4_m5"]
    inputs["x_u4_k3e"], inputs["x_e_slices"] = x_m5[:3].copy(), rng.standard_normal((2, 1100)).astype(np.float32)
    decl_dyn += ["x_u4_k3e: f32[3, 129];", "x_e_slices: f32[2, 1100];"]
    products, mags = {}, {}
    for name, (x, operands, chain, extra) in EPILOGUES.items():
        ws = [weights[o.strip()] for o in operands.split(",")]
        w, sc, z = (t.data if isinstance(t, TensorSpec) else t for t in ws)
        products[name], mags[name] = _dot(inputs[x], (w - z.astype(np.float64)) * sc)
        out = products[name].shape
        decl_out.append(f"p_{name}: f32[{', '.join(map(str, out))}];")
        body.append(f"  op dequant_matmul({x}, {operands}) >> p_{name};\n")
        body += [f"  op {c};\n" for c in chain]
        for v, shape in extra.items():
            inputs[v] = rng.standard_normal(shape).astype(np.float32)
            decl_dyn.append(f"{v}: f32[{', '.join(map(str, shape))}];")
    erf = np.vectorize(math.erf)
    with np.errstate(invalid="ignore", over="ignore"):
        want["r_e_res"] = inputs["r_e_res"] + products["e_res"]
        y = products["e_gelu"] + inputs["b_e_gelu"]
        want["p_e_gelu"] = 0.5 * y * (1 + erf(y / math.sqrt(2)))
        y = inputs["r_e_slices"] + products["e_slices"]
        want["r_e_slices"] = y / (1 + np.exp(-y))
        want["p_e_exact"] = products["e_exact"] * inputs["c_e_exact"]
        want["p_e_par"] = products["e_par"] + inputs["b_e_par"]
    terms["r_e_res"] = np.abs(inputs["r_e_res"]) + mags["e_res"]
    terms["p_e_gelu"] = mags["e_gelu"] + np.abs(inputs["b_e_gelu"])
    terms["r_e_slices"] = np.abs(inputs["r_e_slices"]) + mags["e_slices"]
    terms["p_e_exact"] = mags["e_exact"] * np.abs(inputs["c_e_exact"])
    terms["p_e_par"] = mags["e_par"] + np.abs(inputs["b_e_par"])


def check(tmp_path, device: str, threads=("1", "2"), build_options=None, env=None) -> Simulator:
    rng = np.random.default_rng(11)
    text, weights, inputs, want, terms = _cases(rng)
    path = tmp_path / "dq.oinf"
    oi.write_oinf(path, weights)
    sim = Simulator(oi.ModelLoader.open(path), oi.graph(text), arch=device, build_options=build_options,
                    outputs=set(want))
    env = env if env is not None else pytest.MonkeyPatch.context
    f32 = lookup("f32")
    for n_threads in threads:
        with env() as mp:        # the pool's size is read when the model is created
            mp.setenv("OI_NUM_THREADS", n_threads)
            ex = sim.make_executor()
        ex.insert(**inputs)
        ex.run_step()
        with np.errstate(invalid="ignore"):
            rows = [compare(v, f32, ref, ex.fetch(v), terms[v]) for v, ref in want.items()]
        assert all(r.ok for r in rows), f"{device} threads={n_threads}\n" + table([r for r in rows if not r.ok])
    return sim


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("dq-cache")))
        yield


@pytest.mark.parametrize("device", DEVICES)
def test_dequant_matmul_avx(tmp_path, device):
    sim = check(tmp_path, device)
    kernels = next(sim.project.glob("*_kernels.c")).read_text()
    wide = "_mm512_" if device.endswith("512") else "_mm256_"
    nibbles = "_mm512_permutexvar_ps(" if device.endswith("512") else "_mm256_srai_epi32("
    assert f"{wide}cvtepi8_epi32(" in kernels and nibbles in kernels and "_exact(" in kernels
    ops = [k.op for k in sim.program.kernels]
    vector = sum(f"_k{i}_dequant_matmul_units(" in kernels for i, op in enumerate(ops) if op == "dequant_matmul")
    assert vector == ops.count("dequant_matmul") - 1     # all but the 4-bit weights with odd N
    fused = sorted(k.output.shape for k in sim.program.kernels if k.op == "dequant_matmul" and k.epilogue)
    assert fused == sorted(((1, 1030), (3, 256), (2, 520), (3, 64), (5, 4100)))     # each EPILOGUES chain


def _sanitized_child(directory: str, device: str) -> int:
    """Runs in the child interpreter (libasan preloaded)."""
    os.environ["OI_CACHE_DIR"] = str(Path(directory) / "cache")
    (Path(directory) / device).mkdir()
    check(Path(directory) / device, device, build_options=SANITIZE, env=_Env)
    print("sanitized dequant_matmul: ok", flush=True)
    return 0


class _Env(contextlib.AbstractContextManager):
    """pytest.MonkeyPatch.context's setenv outside pytest (the child sets the thread count once per run)."""

    def setenv(self, name: str, value: str) -> None:
        os.environ[name] = value

    def __exit__(self, *exc):
        return None


@pytest.mark.parametrize("device", DEVICES)
def test_dequant_matmul_clean_under_asan_and_ubsan(tmp_path, device):
    assert "sanitized dequant_matmul: ok" in run_sanitized(__file__, "_sanitized_child", str(tmp_path), device)
