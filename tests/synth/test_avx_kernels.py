"""The AVX2 / AVX-512 kernels (openinfer/targets/x86/renderer.py, templates/x86/) against the NumPy reference.

Each graph groups many cases of one kernel family so a device needs few builds: odd sizes (1, 3,
17, 63, 65, 127, 257, ...) that exercise partial vectors and microkernel edges, broadcasting,
in-place requests, batch matmul, GEMV shapes, several K slices and N blocks, and special values.
Every graph runs on both AVX devices through openinfer.sim.Simulator (built with -Wall -Wextra
-Werror by the generated meson project) and is compared with openinfer.reference.executor.Reference;
matmul and element-wise graphs run with 1 and 2 pool threads, the matmul graph also built with
-fsanitize=address,undefined (tests/sanitized.py). A fused element-wise chain (the
request openinfer/synth/fusion.py makes) is rendered alone, compiled and called directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sanitized import SANITIZE, run_sanitized

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.dtypes import lookup
from openinfer.ops.types import TensorType
from openinfer.reference.executor import Reference
from openinfer.resources import hal_dir, hal_sources
from openinfer.sim import Simulator
from openinfer.synth.program import Call, KernelRequest
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices
from openinfer.targets.base import target_for
from openinfer.targets.x86.renderer import Avx2Renderer, Avx512Renderer, gemm_blocking

DEVICES = ("x86_64-avx2", "x86_64-avx512")


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("avx-cache")))
        yield


def special(x: np.ndarray) -> np.ndarray:
    """x with NaN, infinities and signed zeros in its first elements."""
    flat = x.reshape(-1)
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -100.0, 100.0]
    flat[:min(len(vals), flat.size)] = vals[:flat.size]
    return x


def run(tmp_path: Path, device: str, text: str, weights: dict, inputs: dict, outputs: list[str],
        threads: tuple[str, ...] = ("",), build_options: list[str] | None = None,
        only_outputs: bool = False, terms: dict[str, np.ndarray] | None = None) -> Simulator:
    """Build `text` for `device`; compare `outputs` with the reference for each OI_NUM_THREADS.
    only_outputs: the host observes `outputs` alone (other variables may be fused away).
    terms: per output, the magnitude of the terms of its sums (compare's `magnitude`)."""
    model = tmp_path / "model.oinf"
    oi.write_oinf(model, weights or {"unused": np.zeros(1, np.float32)})
    m = oi.ModelLoader.open(model)
    graph = oi.graph(text)
    ref = Reference(m, graph).make_executor()
    ref.insert(**inputs)
    ref.run_step()
    sim = Simulator(m, graph, arch=device, build_options=build_options, outputs=outputs if only_outputs else None)
    for n_threads in threads:
        with pytest.MonkeyPatch.context() as mp:     # the pool's size is read when the model is created
            if n_threads:
                mp.setenv("OI_NUM_THREADS", n_threads)
            else:
                mp.delenv("OI_NUM_THREADS", raising=False)
            ex = sim.make_executor()
        ex.insert(**inputs)
        ex.run_step()
        rows = [compare(n, sim.vars[n].dtype, ref.fetch(n), ex.fetch(n), (terms or {}).get(n)) for n in outputs]
        assert all(r.ok for r in rows), f"{device} threads={n_threads or 'default'}\n" + table(rows)
    return sim


def decls(kind: str, shapes: dict[str, tuple[int, ...]]) -> str:
    return f"{kind} {{ " + " ".join(f"{k}: f32[{', '.join(map(str, s))}];" for k, s in shapes.items()) + " }\n"


# ---------------------------------------------------------------------------------------- renderer choice

def test_renderer_follows_the_device_isa():
    assert target_for(devices.load("x86_64-avx2")).renderer_class is Avx2Renderer
    zen3 = devices.load("x86_64-zen3")      # AVX2 tuned for Zen 2/3: the vecmat leaves prefetching to the core
    assert target_for(zen3).renderer_class is Avx2Renderer and zen3.preferences["stream_prefetch"] is False
    # the generic AVX2 descriptor's code runs on CPUs that disagree (the prefetch costs Zen 3 and
    # an Intel Xeon, pays on Zen 4): its kernels ask the HAL when they run
    assert devices.load("x86_64-avx2").preferences["stream_prefetch"] == "cpu"
    assert target_for(devices.load("x86_64-avx512")).renderer_class is Avx512Renderer
    assert target_for(devices.load("x86_64-generic")).renderer_class.__name__ == "CRenderer"
    # the AVX-512 class reuses the AVX2 code: only the vector description, the GEMM block and
    # the intrinsics tiles of the portable conv / sdpa differ
    assert {k for k in vars(Avx512Renderer) if not k.startswith("__")} == {"vec", "gemm_mr", "gemm_nv", "conv_tile",
                                                                           "sdpa_tile"}


def test_gemm_blocking_from_caches():
    dev = devices.load("x86_64-avx512")
    r = Avx512Renderer
    nr = r.gemm_nv * 16
    kc, nc = gemm_blocking(nr, dev, 1024, 4096, 1024)
    assert r.gemm_mr * kc * 4 <= dev.cache_bytes("l1d", 0) // 2
    assert kc * nc * 4 == dev.cache_bytes("l2", 0) // 2 and nc % nr == 0
    assert gemm_blocking(nr, dev, 5, 40, 7) == (7, 64)        # clamped to the problem
    # N blocks of one width: 1.5 times the widest block is two blocks of 3/4 of it
    assert gemm_blocking(nr, dev, 64, nc * 3 // 2, 1024) == (kc, nc * 3 // 4)
    assert gemm_blocking(nr, dev, 64, nc + 1, 1024) == (kc, -(-(nc + 1) // 2 // nr) * nr)


# ---------------------------------------------------------------------------------------- element-wise

UNARY = ["neg(x)", "abs(x)", "relu(x)", "relu(x, alpha=0.1, clamp_max=2.5, clamp_min=-1.0)", "exp(x)",
         "tanh(x)", "sigmoid(x)", "silu(x)", "gelu(x)", 'gelu(x, approximate="tanh")', "erf(x)", "sqrt(x)",
         "rsqrt(x)", "recip(x)", "clamp(x, min=-0.5, max=0.75)"]
BINARY = ["add(x, z)", "sub(x, z)", "mul(x, z)", "div(x, z)", "min(x, z)", "max(x, z)",
          "div(x, z, div_by_zero_mask=7.0)", "add(x, brow)", "sub(bcol, x)", "mul(x, bs)", "add(brow, bcol)"]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.parametrize("device", DEVICES)
def test_elementwise(tmp_path, device):
    rng = np.random.default_rng(1)
    # 7 x 37: partial vectors on every row; 257: one flat run with a tail; 3: shorter than a vector
    shapes = {"x": (7, 37), "z": (7, 37), "brow": (37,), "bcol": (7, 1), "bs": (1,), "u": (257,), "w": (3,),
              "big": (300, 1111)}
    inputs = {k: rng.uniform(-4, 4, s).astype(np.float32) for k, s in shapes.items()}
    special(inputs["x"])
    inputs["z"][0, :6] = [0.0, -0.0, np.nan, 2.0, -0.0, 0.0]
    inputs["x"][1] = rng.uniform(-90, 90, 37)           # exp overflow / underflow, saturated tanh
    inputs["x"][2] = rng.uniform(-1e-3, 1e-3, 37)        # small |x|: polynomial branches
    ops = UNARY + BINARY
    outs = {f"y{i}": (7, 37) for i in range(len(ops))}
    body = "".join(f"  op {o} >> y{i};\n" for i, o in enumerate(ops))
    # in place (aliased output), including the output aliasing the second operand; flat and tiny tensors
    body += "  op exp(u) >> u;\n  op mul(w, w) >> w;\n  op add(brow, z) >> z;\n  op silu(big) >> big;\n"
    # chains the fusion pass merges into one kernel: bias + activations in place, broadcasts, a dead temporary
    outs["h"] = outs["t"] = outs["f"] = (7, 37)
    body += ("  op add(x, brow) >> h;\n  op relu(h, alpha=0.1) >> h;\n  op mul(h, bcol) >> h;\n  op gelu(h) >> h;\n"
             "  op sub(z, x) >> t;\n  op exp(t) >> t;\n  op div(t, brow) >> f;\n")
    text = decls("dynamic", shapes) + decls("volatile", outs) + f"block entry {{\n{body}  return;\n}}\n"
    sim = run(tmp_path, device, text, {}, inputs, [*outs, "u", "w", "z", "big"], threads=("1", "2"))
    fused = [i for i, k in enumerate(sim.program.kernels) if k.op == "fused"]
    source = next(sim.project.glob("*_kernels.c")).read_text()
    assert len(fused) == 2 and all(f"_k{i}_fused_units" in source for i in fused)     # the vector kernels


def _request(op: str, shapes: list[tuple[int, ...]], out: tuple[int, ...], **attrs) -> KernelRequest:
    f32 = lookup("f32")
    return KernelRequest(op, "normal", tuple(TensorType(f32, s) for s in shapes), TensorType(f32, out),
                         tuple(sorted(attrs.items())), (), None, any(s != out for s in shapes))


def _compile(tmp_path: Path, device: str, req: KernelRequest, nargs: int):
    """The kernel for `req`, rendered alone by the device's renderer, built into a library with
    -Wall -Wextra -Werror, as a Python function of NumPy arrays (inputs, then the output)."""
    import cffi

    dev = devices.load(device)
    renderer = target_for(dev).renderer_class.for_kernels(dev)
    src = renderer.kernel(req, "k")
    assert "oiv" in src.definition, "not the vector kernel"
    c_file = tmp_path / "k.c"
    c_file.write_text("#include <math.h>\n#include <string.h>\n#include <immintrin.h>\n#include \"oi_hal.h\"\n"
                      f"#include \"oi_numeric.h\"\n\n{src.definition}")
    lib = tmp_path / "libk.so"
    proc = subprocess.run([shutil.which("cc") or "gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC",
                           "-shared", *dev.cflags, "-I", str(hal_dir() / "include"), str(c_file),
                           *hal_sources(), "-o", str(lib), "-lpthread", "-lm"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { void *pool; } oi_kctx;\n"
             f"int k(const oi_kctx *ctx, {', '.join(['const float *'] * nargs)}, float *out);")
    fn, ctx = ffi.dlopen(str(lib)).k, ffi.new("oi_kctx *")

    def call(*arrays):
        assert fn(ctx, *(ffi.from_buffer("float[]", a) for a in arrays)) == 0
    return call


@pytest.mark.parametrize("device", DEVICES)
def test_fused_chain(tmp_path, device):
    """A fused element-wise chain (openinfer/synth/fusion.py's request) is one vector loop."""
    x_s, b_s, c_s, out = (7, 37), (37,), (7, 1), (7, 37)
    steps = (_request("add", [x_s, b_s], out), _request("relu", [out], out, alpha=0.1, clamp_max=2.0,
                                                          clamp_min=-np.inf),
             _request("mul", [out, c_s], out), _request("gelu", [out], out, approximate="tanh"),
             _request("sub", [out, x_s], out))
    args = ((("in", 0), ("in", 1)), (("step", 0),), (("step", 1), ("in", 2)), (("step", 2),),
            (("step", 3), ("in", 0)))
    req = replace(_request("fused", [x_s, b_s, c_s], out), chain=steps, chain_args=args)
    kernel = _compile(tmp_path, device, req, 3)
    rng = np.random.default_rng(6)
    x, b, c = (rng.uniform(-3, 3, s).astype(np.float32) for s in (x_s, b_s, c_s))
    got = np.empty(out, np.float32)
    kernel(x, b, c, got)
    y = x + b
    y = np.minimum(np.where(y >= 0, y, np.float32(0.1) * y), np.float32(2.0)) * c
    want = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3))) - x
    row = compare("fused", lookup("f32"), want, got)
    assert row.ok, table([row])


# ---------------------------------------------------------------------------------------- matmul

#: name: (a shape, b shape, a constant?) — odd sizes around the microkernel (AVX2 6x16, AVX-512
#: 8x32), several K slices (K > KC) and N blocks (N > NC), GEMV shapes, batches, 1-D operands.
MATMULS = {
    "g_small": ((5, 3), (3, 17), False),
    "g_odd": ((17, 63), (63, 65), False),
    "g_edges": ((127, 257), (257, 33), False),
    "g_kslices": ((31, 1100), (1100, 47), True),
    "g_nblocks": ((29, 40), (40, 1100), True),
    "g_parallel": ((130, 300), (300, 257), True),
    "g_exact": ((28, 64), (64, 64), False),
    "g_batch_shared_b": ((3, 5, 17), (17, 40), True),
    "g_batch_both": ((2, 3, 17, 9), (3, 9, 31), False),
    "g_batch_bcast_a": ((17, 9), (4, 9, 20), False),
    "v_row": ((1, 65), (65, 129), True),
    "v_rows": ((3, 257), (257, 63), True),
    "v_1d": ((127,), (127, 3), True),
    "v_1d_batch": ((9,), (2, 9, 33), False),
    "v_wide": ((2, 1024), (1024, 4097), True),
    "v_stream": ((1, 384), (384, 200), True),     # few multiply-adds, 300 KB of B: split over the pool (along K)
    "v_ksplit": ((3, 701), (701, 100), True),     # K slices of odd length, 3 rows of A
    # narrow C held in registers over all of K (x86/renderer.py _resident_chains): a classifier head, several
    # rows with a K remainder, K slices over the pool (7001 x 12: 336 KB streamed), K below a pass
    "v_narrow": ((1, 2048), (2048, 10), True),
    "v_narrow_rows": ((4, 203), (203, 16), True),
    "v_narrow_slices": ((1, 7001), (7001, 12), True),
    "v_narrow_short": ((3, 5), (5, 20), False),
    "mv_col": ((67, 65), (65, 1), True),
    "mv_1d": ((33, 67), (67,), True),
    "mv_batch": ((2, 5, 19), (19,), False),
    "mv_big": ((4099, 513), (513,), True),
    "mv_stream": ((300, 257), (257,), True),      # as v_stream, A streamed
    "dot": ((63,), (63,), False),
    "dot_1": ((1,), (1,), False),
}
#: name: (a shape, b shape as stored, b constant?, transposes): every path with transposed operands,
#: GEMM packing from B^T (dynamic, and a prepacked constant with K slices / N blocks) and from A^T,
#: both transposed (GEMM, also for 3 rows of A), a few rows against B^T's stored rows (matvec
#: form, 1 and 3 rows, streamed over the pool, 1-D and batched a), vecmat rows of A^T (register
#: resident narrow C, K slices), A^T times a column (a vecmat with the operands swapped), and
#: transposes that change nothing in memory (a transposed single column of B).
TRANSPOSED = {
    "tb_gemm": ((17, 63), (65, 63), False, "b"),
    "tb_gemm_packed": ((31, 1100), (47, 1100), True, "b"),
    "tb_nblocks_packed": ((130, 40), (1100, 40), True, "b"),
    "ta_gemm": ((63, 17), (63, 65), False, "a"),
    "tab_gemm_batch": ((2, 3, 9, 17), (3, 31, 9), False, "ab"),
    "tab_small": ((9, 3), (20, 9), False, "ab"),
    "ta_batch_shared_b": ((3, 17, 5), (17, 40), True, "a"),
    "tb_rows": ((3, 257), (63, 257), True, "b"),
    "tb_row_stream": ((1, 384), (200, 384), True, "b"),
    "tb_rows_big": ((4, 513), (4099, 513), True, "b"),
    "tb_1d": ((127,), (3, 127), True, "b"),
    "tb_1d_batch": ((9,), (2, 33, 9), False, "b"),
    "ta_vecmat": ((257, 3), (257, 63), False, "a"),
    "ta_narrow": ((203, 4), (203, 16), True, "a"),
    "ta_ksplit": ((701, 3), (701, 100), True, "a"),
    "ta_col": ((65, 67), (65, 1), True, "a"),
    "ta_vec_batch": ((2, 19, 5), (19,), False, "a"),
    "tab_col": ((65, 67), (1, 65), True, "ab"),
    "tb_col": ((67, 65), (1, 65), True, "b"),
}


def _out_shape(a, b):
    return np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape


def check_matmuls(tmp_path: Path, device: str, build_options: list[str] | None = None) -> None:
    rng = np.random.default_rng(2)
    weights, inputs, dyn, const, outs, body, terms = {}, {}, {}, {}, {}, [], {}
    cases = {**{k: (*v, "") for k, v in MATMULS.items()}, **TRANSPOSED}
    for name, (sa, sb, constant, transposed) in cases.items():
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        # the operands as multiplied (transposes read the stored arrays with the last two dims swapped)
        am = np.swapaxes(a, -1, -2) if "a" in transposed else a
        bm = np.swapaxes(b, -1, -2) if "b" in transposed else b
        terms[name] = np.matmul(np.abs(am.astype(np.float64)), np.abs(bm.astype(np.float64)))
        if constant:
            weights[f"{name}_b"] = b
            const[f"{name}_b"] = sb
        else:
            inputs[f"{name}_b"] = b
            dyn[f"{name}_b"] = sb
        inputs[f"{name}_a"] = a
        dyn[f"{name}_a"] = sa
        outs[name] = _out_shape(am.shape, bm.shape)
        attrs = "".join(f", transpose_{x}=true" for x in transposed)
        body.append(f"  op matmul({name}_a, {name}_b{attrs}) >> {name};\n")
    # in place: the result replaces a [M, K] operand with K == N
    inputs["sq"], dyn["sq"] = rng.standard_normal((19, 19)).astype(np.float32), (19, 19)
    terms["sq"] = np.abs(inputs["sq"].astype(np.float64)) @ np.abs(inputs["sq"].astype(np.float64))
    body.append("  op matmul(sq, sq) >> sq;\n")
    text = (decls("dynamic", dyn) + decls("constant", const) + decls("volatile", outs)
            + "block entry {\n" + "".join(body) + "  return;\n}\n")
    run(tmp_path, device, text, weights, inputs, [*outs, "sq"], threads=("1", "2"), build_options=build_options,
        terms=terms)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul(tmp_path, device):
    check_matmuls(tmp_path, device)


#: matmul epilogues (x86/renderer.py `takes_epilogue`): every chain after a matmul below joins its kernel
#: except ar @ w's (a GEMM whose chain reads the output's old value). Paths: vecmat (1 and 3 rows
#: of A), the vecmat split along K at 2 threads (x3 @ w3), matvec (wv @ v), the GEMM with 3 K
#: slices (a @ wa), a batch of A rows sharing B, the parallel GEMM over a pre-packed B (ap @ wp),
#: a narrow vecmat whose sums stay in registers (xn @ wn), the matvec form of 3 rows times a
#: transposed weight (x3 @ w3t^T) and the GEMM over a pre-packed transposed weight (ap @ wpt^T).
#: Inputs of the chains: full, row (bias), col, scalar, the output itself (a residual in place).
EPILOGUES = """
dynamic {
    x: f32[1, 65]; r: f32[1, 129]; x3: f32[3, 701]; r3: f32[3, 100]; c3: f32[3, 1]; s1: f32[1];
    v: f32[257]; rv: f32[300]; a: f32[31, 300]; c31: f32[31, 47]; col31: f32[31, 1]; ab: f32[2, 17, 9];
    r17: f32[2, 17, 31]; ap: f32[130, 300]; ar: f32[40, 65]; res: f32[40, 129]; xn: f32[1, 300];
}
constant {
    w: f32[65, 129]; b: f32[129]; w3: f32[701, 100]; wv: f32[300, 257]; wa: f32[300, 47]; ba: f32[47];
    wb: f32[9, 31]; wp: f32[300, 257]; bp: f32[257]; wn: f32[300, 10]; bn: f32[10]; w3t: f32[100, 701];
    wpt: f32[257, 300];
}
volatile {
    y1: f32[1, 129]; y2: f32[1, 129]; t3: f32[3, 100]; o3: f32[3, 100]; mv: f32[300]; g: f32[31, 47];
    g2: f32[31, 47]; gb: f32[2, 17, 31]; gp: f32[130, 257]; gr: f32[40, 129]; yn: f32[1, 10]; tt: f32[3, 100];
    gpt: f32[130, 257];
}
block entry {
    op matmul(x, w) >> y1;
    op add(r, y1) >> r;
    op matmul(x, w) >> y2;
    op add(y2, b) >> y2;
    op gelu(y2) >> y2;
    op matmul(x3, w3) >> t3;
    op add(r3, t3) >> r3;
    op silu(r3) >> r3;
    op matmul(x3, w3) >> o3;
    op mul(o3, c3) >> o3;
    op add(o3, s1) >> o3;
    op matmul(wv, v) >> mv;
    op add(rv, mv) >> rv;
    op relu(rv) >> rv;
    op matmul(a, wa) >> g;
    op add(g, ba) >> g;
    op gelu(g) >> g;
    op matmul(a, wa) >> g2;
    op add(g2, c31) >> g2;
    op mul(g2, col31) >> g2;
    op matmul(ab, wb) >> gb;
    op add(gb, r17) >> gb;
    op matmul(ap, wp) >> gp;
    op add(gp, bp) >> gp;
    op relu(gp) >> gp;
    op matmul(ar, w) >> gr;
    op add(res, gr) >> res;
    op matmul(xn, wn) >> yn;
    op add(yn, bn) >> yn;
    op relu(yn) >> yn;
    op matmul(x3, w3t, transpose_b=true) >> tt;
    op mul(tt, c3) >> tt;
    op gelu(tt) >> tt;
    op matmul(ap, wpt, transpose_b=true) >> gpt;
    op add(gpt, bp) >> gpt;
    return;
}
"""
EPILOGUE_OUTPUTS = ["r", "y2", "r3", "o3", "rv", "g", "g2", "gb", "gp", "res", "yn", "tt", "gpt"]


def check_epilogues(tmp_path: Path, device: str, build_options: list[str] | None = None) -> None:
    rng = np.random.default_rng(11)
    graph = oi.graph(EPILOGUES)
    shapes = {name: tuple(int(d) for d in v.dims) for name, v in graph.vars.items()}
    weights = {n: rng.standard_normal(shapes[n]).astype(np.float32)
               for n in ("w", "b", "w3", "wv", "wa", "ba", "wb", "wp", "bp", "wn", "bn", "w3t", "wpt")}
    inputs = {n: rng.standard_normal(shapes[n]).astype(np.float32)
              for n in ("x", "r", "x3", "r3", "c3", "s1", "v", "rv", "a", "c31", "col31", "ab", "r17", "ap", "ar",
                        "res", "xn")}
    special(inputs["r"])                # NaN, infinities, signed zeros through a residual
    special(inputs["c31"])
    sim = run(tmp_path, device, EPILOGUES, weights, inputs, EPILOGUE_OUTPUTS, threads=("1", "2"),
              build_options=build_options, only_outputs=True)
    fused = sorted(s.desc.split(";")[0] for s in sim.plan.program.blocks["entry"]
                   if isinstance(s, Call) and sim.plan.program.kernels[s.kernel].epilogue)
    assert fused == sorted([f"op matmul({a},{b}) >> {o}" for a, b, o in (
        ("x", "w", "y1"), ("x", "w", "y2"), ("x3", "w3", "t3"), ("x3", "w3", "o3"), ("wv", "v", "mv"),
        ("a", "wa", "g"), ("a", "wa", "g2"), ("ab", "wb", "gb"), ("ap", "wp", "gp"), ("xn", "wn", "yn"))]
        + ["op matmul(x3,w3t) >> tt", "op matmul(ap,wpt) >> gpt"]), device


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # compare() on infinities
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_epilogues(tmp_path, device):
    check_epilogues(tmp_path, device)


def _sanitized_child(directory: str, device: str) -> int:
    """Runs in the child interpreter (libasan preloaded)."""
    os.environ["OI_CACHE_DIR"] = str(Path(directory) / "cache")
    (Path(directory) / device).mkdir()
    check_matmuls(Path(directory) / device, device, SANITIZE)
    (Path(directory) / device / "epilogues").mkdir()
    check_epilogues(Path(directory) / device / "epilogues", device, SANITIZE)
    print("sanitized matmuls: ok", flush=True)
    return 0


@pytest.mark.parametrize("device", DEVICES)
def test_matmuls_clean_under_asan_and_ubsan(tmp_path, device):
    assert "sanitized matmuls: ok" in run_sanitized(__file__, "_sanitized_child", str(tmp_path), device)


@pytest.mark.parametrize("device", DEVICES)
def test_half_gemv(tmp_path, device):
    """f16 / bf16 GEMV shapes with an f32 accumulator widen on load; without one they are portable C."""
    rng = np.random.default_rng(5)
    shapes = {"x": (1, 67), "w": (67, 129), "x3": (3, 257), "w3": (257, 40), "m": (37, 67), "v": (67,),
              "big": (300, 1030), "vb": (1030,), "xn": (2, 300), "wn": (300, 10), "w3t": (40, 257), "mt": (67, 37)}
    vol, body, inputs = [], [], {}
    for t in ("f16", "bf16"):
        for k, s in shapes.items():
            inputs[f"{k}_{t}"] = rng.uniform(-1, 1, s).astype(np.float32)
        for out, (a, b), shape, acc in (("y", ("x", "w"), (1, 129), True), ("y3", ("x3", "w3"), (3, 40), True),
                                         ("mv", ("m", "v"), (37,), True), ("mvb", ("big", "vb"), (300,), True),
                                         ("yn", ("xn", "wn"), (2, 10), True),
                                         ("seq", ("x", "w"), (1, 129), False),
                                         # transposed: rows dotted with W's stored rows; A^T times a column
                                         ("y3t", ("x3", "w3t"), (3, 40), "transpose_b"),
                                         ("mvt", ("mt", "v"), (37,), "transpose_a")):
            vol.append(f"{out}_{t}: {t}[{', '.join(map(str, shape))}];")
            attrs = (", acc=[f32]" if acc else "") + (f", {acc}=true" if isinstance(acc, str) else "")
            body.append(f"  op matmul({a}_{t}, {b}_{t}{attrs}) >> {out}_{t};\n")
    dyn = " ".join(f"{k}_{t}: {t}[{', '.join(map(str, s))}];" for t in ("f16", "bf16") for k, s in shapes.items())
    text = f"dynamic {{ {dyn} }}\nvolatile {{ {' '.join(vol)} }}\nblock entry {{\n{''.join(body)}  return;\n}}\n"
    outs = [v.split(":")[0] for v in vol]
    sim = run(tmp_path, device, text, {}, inputs, outs)
    kernels = next(sim.project.glob("*_kernels.c")).read_text()
    assert "oiv_load_f16(" in kernels and "oiv_load_bf16(" in kernels


# ---------------------------------------------------------------------------------------- reductions, rows

@pytest.mark.parametrize("device", DEVICES)
def test_reductions_softmax_norms(tmp_path, device):
    rng = np.random.default_rng(3)
    x = rng.uniform(-6, 6, (6, 5, 37)).astype(np.float32)
    x[0, 0, 3] = np.nan                                   # NaN rows
    x[1, 1, :] = -0.0
    x[1, 1, 5] = 0.0                                      # max is +0.0
    x[2, 2, :] = -0.0                                     # max is -0.0
    x[3, 0, :] = rng.uniform(-1e4, 1e4, 37)               # softmax far from 0
    r = rng.uniform(-3, 3, (65, 257)).astype(np.float32)
    shapes = {"x": (6, 5, 37), "g": (37,), "bb": (37,), "g2": (5, 37), "r": (65, 257), "gr": (257,),
              "one": (4, 1), "s1": (3,)}
    inputs = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    inputs.update(x=x, r=r)
    ops = {"sum_last": ("sum_axis(x, axes=[-1])", (6, 5)),
           "mean_keep": ("mean_axis(x, axes=[2], keepdims=true)", (6, 5, 1)),
           "max_last": ("max_axis(x, axes=[-1])", (6, 5)),
           "min_last": ("min_axis(x, axes=[2])", (6, 5)),
           "max_two": ("max_axis(x, axes=[1, 2])", (6,)),
           "min_lead": ("min_axis(x, axes=[0])", (5, 37)),
           "mean_lead": ("mean_axis(x, axes=[0])", (5, 37)),
           "sum_mid": ("sum_axis(x, axes=[1])", (6, 37)),
           "max_mid": ("max_axis(x, axes=[1])", (6, 37)),
           "sum_big": ("sum_axis(r, axes=[1])", (65,)),
           "max_one": ("max_axis(one, axes=[1])", (4,)),
           "sum_tiny": ("sum_axis(s1, axes=[0])", ()),
           "softmax": ("softmax(x)", (6, 5, 37)),
           "softmax_r": ("softmax(r, axis=1)", (65, 257)),
           "softmax_one": ("softmax(one)", (4, 1)),
           "ln": ("layer_norm(x, g, bb)", (6, 5, 37)),
           "ln_gamma": ("layer_norm(r, gr, eps=0.01)", (65, 257)),
           "ln_plain": ("layer_norm(x)", (6, 5, 37)),
           "ln_axis": ("layer_norm(x, g2, axis=1)", (6, 5, 37)),
           "rms": ("rms_norm(x, g)", (6, 5, 37)),
           "rms_plain": ("rms_norm(r)", (65, 257))}
    outs = {k: s for k, (_, s) in ops.items()}
    vol = " ".join(f"{k}: f32[{', '.join(map(str, s))}];" for k, s in outs.items())
    body = "".join(f"  op {o} >> {k};\n" for k, (o, _) in ops.items())
    body += "  op softmax(r) >> r;\n"                     # in place through scratch
    text = decls("dynamic", shapes) + f"volatile {{ {vol} }}\n" + f"block entry {{\n{body}  return;\n}}\n"
    run(tmp_path, device, text, {}, inputs, [*outs, "r"])


# ---------------------------------------------------------------------------------------- fallback, warnings

@pytest.mark.parametrize("device", DEVICES)
def test_unsupported_requests_fall_back(tmp_path, device):
    """f64, integers and softmax off the last axis take the portable C kernels."""
    rng = np.random.default_rng(4)
    inputs = {"a": rng.standard_normal((5, 7)), "b": rng.standard_normal((7, 3)),
              "i": rng.integers(-100, 100, (5, 7)).astype(np.int32),
              "x": rng.standard_normal((5, 7)).astype(np.float32)}
    text = ("dynamic { a: f64[5, 7]; b: f64[7, 3]; i: i32[5, 7]; x: f32[5, 7]; }\n"
            "volatile { c: f64[5, 3]; j: i32[5, 7]; s: f32[5, 7]; }\n"
            "block entry { op matmul(a, b) >> c; op add(i, i) >> j; op softmax(x, axis=0) >> s; return; }\n")
    sim = run(tmp_path, device, text, {}, inputs, ["c", "j", "s"])
    kernels = next(sim.project.glob("*_kernels.c")).read_text()
    assert "oiv" not in kernels


@pytest.mark.parametrize("device", DEVICES)
def test_generated_c_is_warning_free(tmp_path, device):
    """Every AVX template rendered into one file compiles cleanly with -Wall -Wextra -Werror."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    shapes = {"x": (7, 17), "b": (17, 40), "v": (17,), "w": (40, 17)}
    text = (decls("dynamic", shapes)
            + "volatile { y: f32[7, 40]; e: f32[7, 17]; s: f32[7]; m: f32[17]; n: f32[7, 17]; g: f32[40]; "
              "q: f32[40]; }\n"
              "block entry { op matmul(x, b) >> y; op gelu(x) >> e; op add(x, v) >> e; op sum_axis(x, axes=[1]) >> s; "
              "op max_axis(x, axes=[0]) >> m; op softmax(x) >> n; op layer_norm(x, v) >> n; op rms_norm(x) >> n; "
              "op matmul(w, v) >> g; op matmul(v, b) >> q; return; }\n")
    model = tmp_path / "m.oinf"
    oi.write_oinf(model, {"unused": np.zeros(1, np.float32)})
    dev = devices.load(device)
    plan = Synthesizer(dev).synthesize(oi.ModelLoader.open(model), oi.graph(text), name="warn")
    plan.emit(tmp_path / "out")
    kernels = (tmp_path / "out" / "warn_kernels.c").read_text()
    fmadd = "_mm512_fmadd_ps" if device.endswith("512") else "_mm256_fmadd_ps"
    for marker in ("_uk", "oiv_exp", "oiv_key", "_rows(", fmadd):     # every template is in the file
        assert marker in kernels
    proc = subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", *dev.cflags,
                           "-I", str(tmp_path / "out"), "-I", str(tmp_path / "out" / "hal" / "include"),
                           "-c", str(tmp_path / "out" / "warn_kernels.c"), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------- descriptor tuning

@pytest.mark.parametrize("device", DEVICES)
def test_vecmat_stream_prefetch_preference(tmp_path, device):
    """`preferences.stream_prefetch` (devices/schema.json): on by default, the vecmat that streams
    B prefetches its next rows; off, it leaves that to the hardware prefetchers; "cpu", it asks
    the HAL at run time (oi_cpu_stream_prefetch, tests/synth/test_host_cpu.py). All compute the
    same product (checked against the reference), the source differs only in the prefetches."""
    import json

    text = (decls("dynamic", {"x": (2, 700)}) + decls("constant", {"w": (700, 300)}) +
            decls("volatile", {"y": (2, 300)}) + "block entry { op matmul(x, w) >> y; return; }\n")
    rng = np.random.default_rng(7)
    weights = {"w": rng.standard_normal((700, 300), dtype=np.float32)}
    inputs = {"x": rng.standard_normal((2, 700), dtype=np.float32)}
    doc = dict(devices.load(device).doc)
    sources = {}
    for on in (True, False, "cpu"):
        doc.setdefault("preferences", {})["stream_prefetch"] = on
        arch = tmp_path / f"{device}-{on}.json"
        arch.write_text(json.dumps(doc))
        (tmp_path / str(on)).mkdir()
        sim = run(tmp_path / str(on), str(arch), text, weights, inputs, ["y"], threads=("1", "2"))
        sources[on] = (sim.project / f"{sim.program.name}_kernels.c").read_text()
    assert "_mm_prefetch((const char *)(b0 + ahead + j)" in sources[True]
    assert "_mm_prefetch((const char *)(b0 + ahead" not in sources[False]
    assert "oi_cpu_stream_prefetch()" not in sources[True] + sources[False]
    asked = sources["cpu"]
    assert "const int pf = oi_cpu_stream_prefetch();" in asked and "if (pf) {" in asked
    assert asked.count("_mm_prefetch((const char *)(b0 + ahead + j)") == sources[True].count(
        "_mm_prefetch((const char *)(b0 + ahead + j)")
