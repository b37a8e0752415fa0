"""The register-tiled f32 / f64 kernels of the nn family (openinfer/targets/c/kernels/nn.py:
templates/c/ops/conv_tiled, sdpa_tiled, softmax_rows, norm_rows, pool) against the NumPy reference.

The conformance cases' shapes are small; these reach what they miss: conv tiles with output-channel
and column tails, strides (the phase-split padded copy), dilation, groups, asymmetric padding, the
unpadded direct path and conv1d; pooling borders and interiors with NaN / signed zeros / inf;
sdpa from 4 query rows (bool masks of every broadcast form, additive masks, causal with fewer or
more queries than keys, grouped kv heads, rows with no key, NaN and +inf scores, key and value
tails); softmax / log_softmax / layer_norm / rms_norm rows longer and shorter than a vector, in
place, with NaN and infinite rows; convolutions with element-wise chains after them, which the
AVX targets apply in the conv's kernel (each shape of tile, one- and two-step chains, exp-based
steps); convolutions followed by a pool of their result, which the AVX targets compute in
the conv's kernel (serial, row bands, the channel-block order, unpadded, f64, and the pools that
stay kernels of their own). Each graph runs on every x86-64 target with 1 and 2 pool threads (the large cases take the
pool), and once more built with AddressSanitizer + UBSan.
"""

from __future__ import annotations

import os
from pathlib import Path

import dynamic_cases as dc
import numpy as np
import pytest
from sanitized import SANITIZE, run_sanitized

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.dtypes import lookup
from openinfer.ops import TensorType, get
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices
from openinfer.targets.c import CRenderer
from openinfer.targets.devices import best_host_target

#: the portable C kernels, as emitted for x86_64-generic
PORTABLE = CRenderer.for_kernels(devices.load("x86_64-generic"))

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEVICES = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return repr(v)


def _conv_cases(t: str, rng) -> list[tuple]:
    def v(*shape, scale=1.0):
        return rng.normal(0, scale, shape).astype(t)
    special_x = v(1, 3, 9, 10)
    special_x[0, 1, 4, 5] = np.nan
    special_w = v(4, 3, 3, 3)
    special_w[2, 0, 0, 0] = np.inf           # times a padding zero: NaN on the border, as the reference
    return [
        ("conv2d", [v(2, 6, 9, 11), v(10, 3, 3, 3), v(10)],
         {"groups": 2, "stride": [1, 2], "padding": [1, 0, 2, 1], "dilation": [1, 2]}),
        ("conv2d", [v(1, 5, 20, 37), v(19, 5, 3, 3), v(19)], {"padding": 1}),            # OC and column tails
        ("conv2d", [v(1, 4, 8, 8), v(6, 4, 1, 1)], {}),                                    # direct (unpadded)
        ("conv2d", [v(1, 4, 9, 12), v(5, 4, 2, 3), v(5)], {"dilation": [2, 1]}),           # direct, dilated
        ("conv2d", [v(1, 3, 12, 13), v(8, 3, 5, 5)], {"stride": 2, "padding": 2}),         # two phases
        ("conv2d", [v(1, 2, 11, 16), v(3, 2, 3, 3)], {"stride": 3, "padding": [0, 2, 1, 0]}),
        ("conv2d", [v(1, 16, 40, 40), v(32, 16, 3, 3), v(32)], {"padding": 1}),           # the pool's share
        # in row bands, each claim padding its own rows (one claim spans both images), strided
        ("conv2d", [v(2, 8, 30, 31), v(12, 4, 3, 3), v(12)],
         {"groups": 2, "stride": [2, 1], "padding": [1, 1, 2, 0], "dilation": [1, 2]}),
        ("conv2d", [v(1, 16, 48, 47), v(24, 16, 1, 1), v(24)], {}),                       # in row bands, unpadded
        ("conv2d", [special_x, special_w, v(4)], {"padding": 1}),
        ("conv1d", [v(2, 6, 30), v(8, 3, 4), v(8)], {"groups": 2, "stride": 3, "padding": [2, 1], "dilation": 2}),
        ("conv1d", [v(1, 8, 4), v(16, 8, 4), v(16)], {}),                                 # one output column
        ("conv1d", [v(3, 5, 70), v(7, 5, 3)], {"padding": 1}),
    ]


def _pool_cases(t: str, rng) -> list[tuple]:
    x = rng.normal(0, 1, (2, 3, 11, 13)).astype(t)
    x[0, 0, 0, :8] = [np.nan, 0.0, -0.0, 0.0, -0.0, -0.0, np.inf, -np.inf]
    x[0, 1, 5, 5] = np.nan
    x[1, 2, 3:5, 3:5] = -0.0
    big = rng.normal(0, 1, (1, 16, 32, 32)).astype(t)
    # rows of at least a vector of inside windows (the AVX kernels' vector loop), specials included
    wide = rng.normal(0, 1, (1, 2, 7, 41)).astype(t)
    wide[0, 0, 2, :12] = [np.nan, 0.0, -0.0, 0.0, -0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -0.0, 0.0]
    wide[0, 1, 3:5, 10:20] = -0.0
    wide[0, 1, 6, 40] = np.nan
    out = []
    for op in ("max_pool2d", "avg_pool2d"):
        out += [(op, [x], {"kernel": 2}), (op, [x], {"kernel": [3, 2], "stride": [2, 1], "padding": 1}),
                (op, [x], {"kernel": 3, "stride": 1, "padding": [1, 0, 0, 1]}), (op, [big], {"kernel": 2}),
                (op, [wide], {"kernel": 2}), (op, [wide], {"kernel": 3, "stride": 2, "padding": 1}),
                (op, [wide], {"kernel": [2, 3], "stride": 1})]
    out.append(("avg_pool2d", [x], {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": True}))
    return out


def _sdpa_cases(t: str, rng) -> list[tuple]:
    def v(*shape):
        return rng.normal(0, 1, shape).astype(t)
    keep = rng.random((2, 9, 33)) < 0.6
    keep[1, 3] = False                               # a query with no key: zeros
    keep_row = np.arange(128) < 112                  # the encoder's padding mask
    nan_q, inf_k = v(2, 6, 8), v(2, 21, 8)
    nan_q[0, 2, 3] = np.nan                          # that row: NaN
    inf_k[1, 4, 0] = np.inf                          # +inf scores where q[..., 0] > 0: NaN rows
    return [
        ("sdpa", [v(4, 128, 64), v(4, 128, 64), v(4, 128, 64), keep_row], {}),                 # the pool's share
        ("sdpa", [v(2, 3, 37, 20), v(2, 3, 45, 20), v(2, 3, 45, 13)], {"causal": True, "scale": 0.3}),
        ("sdpa", [v(1, 4, 10, 16), v(1, 2, 6, 16), v(1, 2, 6, 16)], {"causal": True}),          # gqa, sq > sk
        ("sdpa", [v(2, 9, 8), v(2, 33, 8), v(2, 33, 70), keep], {}),
        ("sdpa", [v(3, 6, 24), v(3, 40, 24), v(3, 40, 5), v(1, 6, 40)], {}),                    # additive mask
        ("sdpa", [v(5, 7), v(11, 7), v(11, 3)], {"scale": 2.0}),                                 # no batch
        ("sdpa", [nan_q, inf_k, v(2, 21, 9)], {}),
        ("sdpa", [v(2, 4, 8), v(2, 300, 8), v(2, 300, 16), rng.random((4, 300)) < 0.1], {}),
    ]


def _row_cases(t: str, rng) -> list[tuple]:
    x = rng.normal(0, 3, (6, 37)).astype(t)
    x[1] = -np.inf                                   # softmax: NaN row
    x[2, 5] = np.nan
    x[3, 7] = np.inf
    x[4, :36] = -np.inf                              # one finite element
    long = rng.normal(0, 3, (5, 300)).astype(t)
    g, b = rng.normal(1, 0.1, 37).astype(t), rng.normal(0, 0.1, 37).astype(t)
    y = rng.normal(2, 3, (6, 37)).astype(t)
    y[2, 5] = np.nan
    big = rng.normal(0, 1, (512, 256)).astype(t)     # the pool's share
    out = []
    for op in ("softmax", "log_softmax"):
        out += [(op, [x], {}), (op, [long], {}), (op, [big], {}), (op, [x[:, :5]], {})]
    out += [("layer_norm", [y, g, b], {"eps": 1e-5}), ("layer_norm", [y], {}), ("layer_norm", [long], {"axis": 0}),
            ("rms_norm", [y, g], {}), ("rms_norm", [long], {}), ("layer_norm", [big], {"eps": 1e-12}),
            ("rms_norm", [y[:, :3], g[:3]], {})]
    return out


def cases() -> list[tuple[str, tuple]]:
    out = []
    for t in ("float32", "float64"):
        rng = np.random.default_rng(11)
        for fam, make in (("conv", _conv_cases), ("pool", _pool_cases), ("sdpa", _sdpa_cases), ("rows", _row_cases)):
            for k, c in enumerate(make(t, rng)):
                out.append((f"{fam}{k}_{'f32' if t == 'float32' else 'f64'}", c))
    return out


def graph_text(all_cases) -> tuple[str, dict[str, np.ndarray], list[str]]:
    """One program holding every case: inputs dynamic, outputs volatile; in-place copies of a few
    row kernels (the output aliasing the input)."""
    dyn, vol, body, inputs, outs = [], [], [], {}, []
    for name, (op, ins, attrs) in all_cases:
        names, types = [], []
        for j, x in enumerate(ins):
            dt = "bool" if x.dtype == np.bool_ else ("f32" if x.dtype == np.float32 else "f64")
            n = f"{name}_x{j}"
            dyn.append(f"{n}: {dt}[{', '.join(map(str, x.shape))}];")
            inputs[n] = x
            names.append(n)
            types.append(TensorType(lookup(dt), x.shape))
        inf = get(op).infer(types, dict(attrs))
        vol.append(f"{name}: {inf.out_dtype.name}[{', '.join(map(str, inf.out_shape))}];")
        args = ", ".join(names + [f"{a}={_fmt(v)}" for a, v in attrs.items()])
        body.append(f"op {op}({args}) >> {name};")
        outs.append(name)
        if op in ("log_softmax", "layer_norm") and len(ins) == 1 and "axis" not in attrs:   # in place
            body.append(f"op {op}({names[0]}) >> {names[0]};")
            outs.append(names[0])
    return program_text(dyn, vol, body), inputs, outs


def program_text(dyn: list[str], vol: list[str], body: list[str]) -> str:
    """A program of dynamic inputs `dyn`, volatile outputs `vol` and the statements `body`."""
    return ("dynamic {\n  " + "\n  ".join(dyn) + "\n}\nvolatile {\n  " + "\n  ".join(vol) + "\n}\n"
            "block entry {\n  " + "\n  ".join(body) + "\n  return;\n}\n")


def check(tmp_path: Path, device: str, threads=("1", "2"), build_options=None) -> Simulator:
    return run_and_compare(tmp_path / "model.oinf", device, *graph_text(cases()), threads, build_options)


def run_and_compare(model: Path, device: str, text: str, inputs: dict[str, np.ndarray], outs: list[str],
                    threads=("1", "2"), build_options=None, outputs: set[str] | None = None) -> Simulator:
    """The program `text` built for `device`, run at each pool thread count: every output in
    `outs` must equal the reference's. `outputs`: the variables the host reads (default: all)."""
    oi.write_oinf(model, {"unused": np.zeros(1, np.float32)})
    m = oi.ModelLoader.open(model)
    graph = oi.graph(text)
    ref = Reference(m, graph).make_executor()
    ref.insert(**inputs)
    with np.errstate(all="ignore"):
        ref.run_step()
    sim = Simulator(m, graph, arch=REPO / "devices" / f"{device}.json", build_options=build_options, outputs=outputs)
    for n_threads in threads:
        saved = os.environ.get("OI_NUM_THREADS")
        os.environ["OI_NUM_THREADS"] = n_threads      # read when the model is created
        try:
            ex = sim.make_executor()
        finally:
            if saved is None:
                os.environ.pop("OI_NUM_THREADS", None)
            else:
                os.environ["OI_NUM_THREADS"] = saved
        ex.insert(**inputs)
        ex.run_step()
        with np.errstate(all="ignore"):
            rows = [compare(n, sim.vars[n].dtype, ref.fetch(n), ex.fetch(n)) for n in outs]
        assert all(r.ok for r in rows), f"{device} threads={n_threads}\n" + table([r for r in rows if not r.ok])
    return sim


@pytest.fixture(autouse=True)
def sim_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("device", DEVICES)
def test_tiled_nn_kernels_match_reference(tmp_path, device):
    sim = check(tmp_path, device)
    if device != "x86_64-generic":      # f32 pools with a vector of inside windows per row: vector loops
        kernels = next(sim.project.glob("*_kernels.c")).read_text()
        assert kernels.count("ov + OIV_LANES <=") == (12 if device == "x86_64-avx2" else 8), device
        # f32 convs with a vector of output columns: the intrinsics tile (templates/x86/conv_tile.j2)
        assert ("_mm256_set1_ps(wr[" if device == "x86_64-avx2" else "_mm512_set1_ps(wr[") in kernels, device
        # f32 sdpa on AVX2: the intrinsics scores and output tiles (templates/c/ops/sdpa_vector_tile.j2),
        # whose sums must equal the portable tile's
        tiles = kernels.count("_mm256_set1_ps(qr[") + kernels.count("_mm256_set1_ps(sc[")
        assert (tiles > 0) == (device == "x86_64-avx2"), device


def test_tiled_kernels_selected():
    """f32 / f64 requests take the tiled kernels; narrow floats and decoding sdpa keep the
    sequential ones (their sums round in the reference's order)."""
    from openinfer.synth.program import KernelRequest
    from openinfer.targets.c.kernels import emit_kernel

    def source(op, shapes, out, dtype="f32", **attrs):
        t = lookup(dtype)
        types = tuple(TensorType(t, s) for s in shapes)
        inf = get(op).infer(list(types), attrs)
        req = KernelRequest(op, "normal", types, TensorType(t, out), tuple(sorted(inf.attrs.items())), (), None,
                            False)
        return emit_kernel(req, "k", PORTABLE).definition

    assert "k_units" in source("conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], (1, 4, 6, 6))
    assert "k_units" not in source("conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], (1, 4, 6, 6), "f16")
    assert "k_units" in source("sdpa", [(2, 8, 4), (2, 8, 4), (2, 8, 4)], (2, 8, 4), "f64")
    assert "k_units" not in source("sdpa", [(2, 1, 4), (2, 8, 4), (2, 8, 4)], (2, 1, 4))
    assert "k_rows" in source("softmax", [(3, 9)], (3, 9))
    assert "k_rows" not in source("softmax", [(3, 9)], (3, 9), "bf16")
    assert "k_rows" in source("layer_norm", [(3, 9)], (3, 9))
    # a parallel conv with small weights claims row bands, each padding its own rows; one with
    # large weights (64 KiB) keeps the channel-block order and one padded copy; a small conv is serial
    band = source("conv2d", [(1, 16, 40, 40), (32, 16, 3, 3)], (1, 32, 40, 40), padding=1)
    assert "k_pad(xp, g->in, nb" in band and "oi_pool_parallel_for" in band
    blocks = source("conv2d", [(1, 64, 40, 40), (32, 64, 3, 3)], (1, 32, 40, 40), padding=1)
    assert "k_pad(xp, g->in" not in blocks and "k_pad(xp, in0, nb, 0, 41)" in blocks
    assert "oi_pool_parallel_for" in blocks
    assert "oi_pool_parallel_for" not in source("conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], (1, 4, 6, 6))
    direct = source("conv2d", [(1, 16, 48, 47), (24, 16, 1, 1)], (1, 24, 48, 47))
    assert "output row r, output-channel block ob" in direct and "k_pad" not in direct
    # a pool after it (openinfer/synth/fusion.py `fold_pools`): units of pooled rows, in either order
    from dataclasses import replace

    def pooled(shapes, out, pool_out, **attrs):
        t = lookup("f32")
        types = tuple(TensorType(t, s) for s in shapes)
        conv = KernelRequest("conv2d", "normal", types, TensorType(t, out),
                             tuple(sorted(get("conv2d").infer(list(types), attrs).attrs.items())), (), None, False)
        inf = get("max_pool2d").infer([TensorType(t, out)], {"kernel": 2})
        pool = KernelRequest("max_pool2d", "normal", (TensorType(t, out),), TensorType(t, pool_out),
                             tuple(sorted(inf.attrs.items())), (), None, False)
        return emit_kernel(replace(conv, output=pool.output, pool=pool), "k", PORTABLE).definition

    band = pooled([(1, 16, 40, 40), (32, 16, 3, 3)], (1, 32, 40, 40), (1, 32, 20, 20), padding=1)
    assert "pooled output row r, output-channel block ob" in band and "k_pad(xp, g->in, nb" in band
    assert "static oi_status k_pool(" in band and "oi_pool_parallel_for" in band
    blocks = pooled([(1, 64, 40, 40), (32, 64, 3, 3)], (1, 32, 40, 40), (1, 32, 20, 20), padding=1)
    assert "output-channel block ob (over all groups), pooled output row r" in blocks
    assert "k_pad(xp, in0, nb, 0, 41)" in blocks and "k_pool(g->ctx" in blocks


# --------------------------------------------------------------------------- conv epilogues

def _epilogue_program(rng) -> tuple[str, dict[str, np.ndarray], dict[str, tuple[str, ...]]]:
    """Convolutions each followed by element-wise calls on their result, in one program: its
    text, inputs, and per output the ops the AVX targets fuse into its conv (none where a call
    reads a second operand)."""
    def v(*shape):
        return rng.normal(0, 1, shape).astype(np.float32)
    x0 = v(1, 5, 20, 37)
    x0[0, 2, 7, 9] = np.nan
    cases = [   # (output, conv, inputs, attrs, the calls after it as (op, attrs), the ops that fuse)
        # vector tiles, an output-channel tail and a column remainder (37 = 2 x 16 + 5, 16 + 5 on AVX-512)
        ("c0", "conv2d", [x0, v(19, 5, 3, 3), v(19)], {"padding": 1}, [("relu", {})], ("relu",)),
        # 6 x 7 outputs: no whole vector of columns (the portable tile, a partial vector)
        ("c1", "conv2d", [v(1, 3, 12, 13), v(8, 3, 5, 5)], {"stride": 2, "padding": 2},
         [("relu", {"alpha": 0.125, "clamp_max": 0.5})], ("relu",)),
        # conv1d without bias; two steps, one of them exp-based
        ("c2", "conv1d", [v(3, 5, 70), v(7, 5, 3)], {"padding": 1},
         [("silu", {}), ("clamp", {"min": -0.2, "max": 1.5})], ("silu", "clamp")),
        # large enough for the pool's share
        ("c3", "conv2d", [v(1, 16, 40, 40), v(32, 16, 3, 3), v(32)], {"padding": 1}, [("gelu", {})], ("gelu",)),
        # a second operand (a residual): a kernel of its own
        ("c4", "conv2d", [v(1, 4, 9, 12), v(4, 4, 3, 3), v(4)], {"padding": 1}, [("add", {})], ()),
    ]
    vol, body, inputs, fused = [], [], {}, {}
    for out, op, ins, attrs, after, chain in cases:
        names = [f"{out}_x{j}" for j in range(len(ins))]
        inputs.update(zip(names, ins, strict=True))
        inf = get(op).infer([TensorType(lookup("f32"), x.shape) for x in ins], dict(attrs))
        vol.append(f"{out}: f32[{', '.join(map(str, inf.out_shape))}];")
        body.append(f"op {op}({', '.join(names + [f'{a}={_fmt(x)}' for a, x in attrs.items()])}) >> {out};")
        for step, step_attrs in after:
            operands = [out] + ([f"{out}_r"] if step == "add" else [])
            if step == "add":
                inputs[f"{out}_r"] = v(*inf.out_shape)
            body.append(f"op {step}({', '.join(operands + [f'{a}={_fmt(x)}' for a, x in step_attrs.items()])})"
                        f" >> {out};")
        fused[out] = chain
    dyn = [f"{n}: f32[{', '.join(map(str, x.shape))}];" for n, x in inputs.items()]
    return program_text(dyn, vol, body), inputs, fused


def check_epilogues(tmp_path: Path, device: str, build_options=None) -> None:
    """On the AVX targets a conv's element-wise chain runs in its kernel, on each tile before the
    store (templates/c/ops/conv_tiled.c.j2 `epi`); every target's outputs equal the reference's,
    at 1 and 2 pool threads."""
    text, inputs, fused = _epilogue_program(np.random.default_rng(5))
    sim = run_and_compare(tmp_path / "epilogues.oinf", device, text, inputs, list(fused), build_options=build_options)
    chains = sorted(tuple(step.op for step in r.epilogue.chain) for r in sim.program.kernels
                    if r.op in ("conv1d", "conv2d") and r.epilogue)
    assert chains == ([] if device == "x86_64-generic" else sorted(c for c in fused.values() if c)), device


@pytest.mark.parametrize("device", DEVICES)
def test_conv_epilogues_match_reference(tmp_path, device):
    check_epilogues(tmp_path, device)


# --------------------------------------------------------------------------- pooled convolutions

def _pooled_program(rng) -> tuple[str, dict[str, np.ndarray], dict[str, str | None]]:
    """Convolutions each followed by a pool of their result, in one program: its text, inputs,
    and per pooled output the pool the AVX targets compute in its conv's kernel (None: a kernel
    of its own)."""
    def v(*shape, dtype=np.float32):
        return rng.normal(0, 1, shape).astype(dtype)
    x0 = v(1, 5, 20, 37)
    x0[0, 2, 7, 9] = np.nan          # NaN through the ReLU and the maximum
    x0[0, 1, 3, 4:8] = -np.inf
    cases = [   # (output, conv inputs, conv attrs, relu after it, pool, pool attrs, fused)
        # an output-channel tail (19 = 4 x 4 + 3 on AVX2, 16 + 3 on AVX-512), 37 columns: 18 pooled,
        # the last conv column unused; serial
        ("p0", [x0, v(19, 5, 3, 3), v(19)], {"padding": 1}, True, "max_pool2d", {"kernel": 2}, "max_pool2d"),
        # stride 2, a 3 x 3 average of 10 x 10 conv rows (the last row and column unused), no bias
        ("p1", [v(1, 3, 21, 21), v(8, 3, 3, 3)], {"stride": 2, "padding": 1}, False, "avg_pool2d", {"kernel": 3},
         "avg_pool2d"),
        # parallel, small weights (row bands padding their own rows), two images: claims cross
        # the image boundary
        ("p2", [v(2, 16, 40, 40), v(32, 16, 3, 3), v(32)], {"padding": 1}, True, "max_pool2d", {"kernel": 2},
         "max_pool2d"),
        # parallel, 72 KiB of weights (the channel-block order and one padded copy), grouped
        ("p3", [v(1, 64, 24, 24), v(64, 32, 3, 3), v(64)], {"padding": 1, "groups": 2}, True, "avg_pool2d",
         {"kernel": 2}, "avg_pool2d"),
        # unpadded (the direct path), a 2 x 3 window
        ("p4", [v(1, 6, 14, 20), v(10, 6, 3, 3), v(10)], {}, True, "max_pool2d", {"kernel": [2, 3]}, "max_pool2d"),
        # f64, no epilogue
        ("p5", [v(1, 4, 12, 12, dtype=np.float64), v(6, 4, 3, 3, dtype=np.float64)], {"padding": 1}, False,
         "max_pool2d", {"kernel": 2}, "max_pool2d"),
        # overlapping windows, and a padded pool: kernels of their own
        ("p6", [v(1, 4, 12, 12), v(6, 4, 3, 3)], {"padding": 1}, True, "max_pool2d", {"kernel": 3, "stride": 2},
         None),
        ("p7", [v(1, 4, 12, 12), v(6, 4, 3, 3)], {"padding": 1}, True, "avg_pool2d", {"kernel": 2, "padding": 1},
         None),
    ]
    vol, body, inputs, fused = [], [], {}, {}
    for out, ins, attrs, relu, pool, pool_attrs, how in cases:
        names = [f"{out}_x{j}" for j in range(len(ins))]
        inputs.update(zip(names, ins, strict=True))
        dt = lookup("f64" if ins[0].dtype == np.float64 else "f32")
        conv = get("conv2d").infer([TensorType(dt, x.shape) for x in ins], dict(attrs))
        pooled = get(pool).infer([TensorType(dt, conv.out_shape)], dict(pool_attrs))
        vol.append(f"{out}_c: {dt.name}[{', '.join(map(str, conv.out_shape))}];")
        vol.append(f"{out}: {dt.name}[{', '.join(map(str, pooled.out_shape))}];")
        body.append(f"op conv2d({', '.join(names + [f'{a}={_fmt(x)}' for a, x in attrs.items()])}) >> {out}_c;")
        if relu:
            body.append(f"op relu({out}_c) >> {out}_c;")
        body.append(f"op {pool}({out}_c, {', '.join(f'{a}={_fmt(x)}' for a, x in pool_attrs.items())}) >> {out};")
        fused[out] = how
    # a conv result the host reads as well: stored, and pooled by a kernel of its own
    inputs["p8_x0"], inputs["p8_x1"] = v(1, 4, 12, 12), v(6, 4, 3, 3)
    vol += ["p8_c: f32[1, 6, 12, 12];", "p8: f32[1, 6, 6, 6];"]
    body += ["op conv2d(p8_x0, p8_x1, padding=1) >> p8_c;", "op max_pool2d(p8_c, kernel=2) >> p8;"]
    fused["p8"] = None
    dyn = [f"{n}: {'f64' if x.dtype == np.float64 else 'f32'}[{', '.join(map(str, x.shape))}];"
           for n, x in inputs.items()]
    return program_text(dyn, vol, body), inputs, fused


def check_pooled(tmp_path: Path, device: str, build_options=None) -> None:
    """On the AVX targets a conv followed by a pool whose windows tile its result computes the
    pooled rows itself (templates/c/ops/conv_tiled.c.j2 `pool`); every target's outputs equal the
    reference's, at 1 and 2 pool threads."""
    text, inputs, fused = _pooled_program(np.random.default_rng(11))
    outs = [*fused, "p8_c"]
    sim = run_and_compare(tmp_path / "pooled.oinf", device, text, inputs, outs, build_options=build_options,
                          outputs=set(outs))
    pools = sorted((r.output.shape, r.pool.op) for r in sim.program.kernels if r.op == "conv2d" and r.pool)
    want = sorted((sim.vars[out].shape, how) for out, how in fused.items() if how)
    assert pools == ([] if device == "x86_64-generic" else want), device


@pytest.mark.parametrize("device", DEVICES)
def test_pooled_convs_match_reference(tmp_path, device):
    check_pooled(tmp_path, device)


@pytest.mark.parametrize("isa", ("avx2", "avx512"))
def test_pooled_convs_over_a_dynamic_batch_fold(tmp_path, isa):
    """The dynamic-batch case that tests/synth/test_dynamic_sizes.py runs against the reference
    (conv-batch-pooled) has both pools computed by their convolutions (only generated here)."""
    case = next(c for c in dc.CASES if c.id == "conv-batch-pooled")
    plan = Synthesizer.from_arch(f"x86_64-{isa}").synthesize(case.write_model(tmp_path / "m.oinf"), case.graph,
                                                             dynamic={"T": case.bound}, outputs=set(case.outputs))
    assert sorted(r.pool.op for r in plan.program.kernels if r.pool) == ["avg_pool2d", "max_pool2d"]


# --------------------------------------------------------------------------- sanitizers

def _sanitizer_child(tmp: str) -> int:
    """Runs in the child interpreter (libasan preloaded)."""
    os.environ["OI_CACHE_DIR"] = str(Path(tmp) / "cache")
    for device in dict.fromkeys(("x86_64-generic", best_host_target())):   # the widest this CPU runs
        check(Path(tmp), device, threads=("1", "2"), build_options=SANITIZE)
        check_epilogues(Path(tmp), device, build_options=SANITIZE)
        check_pooled(Path(tmp), device, build_options=SANITIZE)
    print("sanitized nn kernels: ok", flush=True)
    return 0


def test_tiled_nn_kernels_clean_under_asan_and_ubsan(tmp_path):
    run_sanitized(__file__, "_sanitizer_child", str(tmp_path))
