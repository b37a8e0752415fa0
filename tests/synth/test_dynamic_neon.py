"""Dynamic sizes on the NEON wing (openinfer/targets/arm/renderer.py): requests whose extents
depend on a run-time size take the NEON kernels, not the portable fallback (a regression there is
only slower, so the numbers alone would not show it), and give the reference's results at every
size, cross-built and run under qemu-aarch64 (openinfer/emulate.py), as
tests/synth/test_neon_kernels.py runs the static ones.

One graph holds every vector path with run-time extents (what tests/dynamic_cases.py spreads over
cases, one build each, here one build per descriptor): T (bound 40) is a row count, a row length, a
reduced or inner extent, a GEMM's M, N or K (also with transposed operands: A^T's row stride), a
GEMV's N or K, a matvec's rows, a pooled or normalized (lrn) plane or batch; R (bound 4) is the
run-time rows of the vecmat and the dequantizing GEMVs (a kernel per row count; x @ W^T's rows, the
matvec's vectors). The sizes straddle the vector (4), the GEMM tile (8 x 12), the vecmat's block
(16 columns) and the bound. Each output is checked to be written by the NEON kernel of its path,
found by its template's functions in <name>_kernels.c (as tests/synth/test_dynamic_avx.py does);
the Simulator's build is -Wall -Wextra -Werror.

    OI_SLOW=1   also the Armv8.2-A descriptor (the dequantizing GEMVs' SDOT path over run-time rows)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from test_dynamic_avx import definitions  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.oinf.values import TensorSpec  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.synth.program import Call  # noqa: E402

DEVICES = ("aarch64-neon", "aarch64-v82") if os.environ.get("OI_SLOW") == "1" else ("aarch64-neon",)

GRAPH = """
dynamic { x: f32[3, T]; r: f32[T]; c: f32[3, 1]; s: f32[T, T]; big: f32[3, T*512]; g: f32[T]; b: f32[T];
          xr: f32[T, 8]; x3: f32[2, T, 5]; q: f32[T, 8]; k: f32[T, 8]; v: f32[T, 32]; xs: f32[T, 2, 8];
          xp: f32[2, 8]; p1: f32[1, T]; a: f32[8, T]; t: f32[T]; u: f32[8];
          xm: f32[R, 65]; xb: f32[2, R, 8]; xk: f32[R, T]; xd: f32[R, 65];
          pw: f32[1, 2, 5, T]; ph: f32[1, 2, T, 40]; pb: f32[T, 3, 6, 40]; at: f32[T, 3]; }
constant { gr: f32[8]; w: f32[8, 16]; bw: f32[16]; wm: f32[65, 37]; bm: f32[37]; w3: f32[2, 8, 16];
           w8: i8[65, 70]; s8: f32[70]; z8: i32[70]; w4: u4[65, 64]; s4: f32[1]; b4: f32[64]; wt: f32[37, 65]; }
volatile { y: f32[3, T]; z: f32[3, T]; e: f32[3, T*512]; sm: f32[3, T]; ln: f32[3, T]; rn: f32[T, 8];
           s0: f32[T, 5]; m1: f32[2, 5]; mx1: f32[2, 5]; mn2: f32[2, T]; s12: f32[2]; mr: f32[3];
           kt: f32[8, T]; sc: f32[T, T]; o: f32[T, 32]; yw: f32[T, 16]; ys: f32[T, 2, 16];
           y2: f32[2, T]; o1: f32[1, 32]; av: f32[8]; mv: f32[T];
           ym: f32[R, 37]; yb: f32[2, R, 16]; yk: f32[R, 32]; y8: f32[R, 70]; y4: f32[R, 64];
           m1p: f32[1, 2, 5, T]; a1p: f32[1, 2, 5, T]; mhp: f32[1, 2, T, 40]; ahp: f32[1, 2, T, 20];
           abp: f32[T, 3, 3, 20]; sct: f32[T, T]; gat: f32[T, 16]; ymt: f32[R, 37]; y2t: f32[2, T];
           yat: f32[3, 32]; yac: f32[3]; lp: f32[1, 2, 5, T]; lb: f32[T, 3, 6, 40]; }
block entry {
    op add(x, r) >> y;
    op gelu(y) >> y;
    op mul(x, c) >> z;
    op relu(s, alpha=0.25) >> s;
    op sigmoid(big) >> e;
    op softmax(x) >> sm;
    op layer_norm(x, g, b, eps=1e-5) >> ln;
    op rms_norm(xr, gr, eps=1e-5) >> rn;
    op sum_axis(x3, axes=[0]) >> s0;
    op mean_axis(x3, axes=[1]) >> m1;
    op max_axis(x3, axes=[1]) >> mx1;
    op min_axis(x3, axes=[2]) >> mn2;
    op sum_axis(x3, axes=[1, 2]) >> s12;
    op mean_axis(x, axes=[1]) >> mr;
    op transpose(k, perm=[1, 0]) >> kt;
    op matmul(q, kt) >> sc;
    op matmul(sc, v) >> o;
    op matmul(xr, w) >> yw;
    op add(yw, bw) >> yw;
    op relu(yw, alpha=0.0) >> yw;
    op matmul(xs, w) >> ys;
    op matmul(xp, kt) >> y2;
    op matmul(p1, v) >> o1;
    op matmul(a, t) >> av;
    op matmul(xr, u) >> mv;
    op matmul(xm, wm) >> ym;
    op add(ym, bm) >> ym;
    op gelu(ym) >> ym;
    op matmul(xb, w3) >> yb;
    op matmul(xk, v) >> yk;
    op dequant_matmul(xd, w8, s8, z8) >> y8;
    op dequant_matmul(xd, w4, s4) >> y4;
    op add(y4, b4) >> y4;
    op relu(y4, alpha=0.0) >> y4;
    op max_pool2d(pw, kernel=3, stride=1, padding=1) >> m1p;
    op avg_pool2d(pw, kernel=3, stride=1, padding=1) >> a1p;
    op max_pool2d(ph, kernel=3, stride=1, padding=1) >> mhp;
    op avg_pool2d(ph, kernel=[3, 2], stride=[1, 2], padding=[1, 0]) >> ahp;
    op avg_pool2d(pb, kernel=2, stride=2) >> abp;
    op matmul(q, k, transpose_b=true) >> sct;
    op matmul(a, w, transpose_a=true) >> gat;
    op matmul(xm, wt, transpose_b=true) >> ymt;
    op matmul(xp, k, transpose_b=true) >> y2t;
    op matmul(at, v, transpose_a=true) >> yat;
    op matmul(at, t, transpose_a=true) >> yac;
    op lrn(pw, size=3, alpha=1.0) >> lp;
    op lrn(pb, size=5, alpha=2.0, beta=0.5) >> lb;
    return;
}
"""

#: what the NEON kernel of each path has and no portable kernel does (none uses the vector type
#: `oiv`): its helper functions, the pool's vector loop
PATHS = {
    "gemm": ("{name}_items(", "{name}_pack_a("),
    "vecmat": ("{name}_units",),
    "matvec": ("{name}_rows(", "{name}_units("),
    "dequant": ("{name}_f32",),
    "rows": ("{name}_rows(",),          # softmax, the norms, the reductions
    "elementwise": ("{name}_units(",),
    "pool": ("ov + OIV_LANES <=",),
    "lrn": ("oiv_log(d)",),
}

#: output -> the path of the kernel that writes it (of each, in order, where several do)
VECTOR = {
    "y": "elementwise", "z": "elementwise", "s": "elementwise", "e": "elementwise",
    "sm": "rows", "ln": "rows", "rn": "rows", "s0": "rows", "m1": "rows", "mx1": "rows", "mn2": "rows",
    "s12": "rows", "mr": "rows",
    "sc": "gemm", "o": "gemm", "yw": "gemm", "ys": "gemm",
    "y2": "vecmat", "o1": "vecmat", "ym": "vecmat", "yb": "vecmat", "yk": "vecmat",
    "av": "matvec", "mv": "matvec",
    "y8": "dequant", "y4": "dequant",
    "m1p": "pool", "a1p": "pool", "mhp": "pool", "ahp": "pool", "abp": "pool",
    "sct": "gemm", "gat": "gemm", "ymt": "matvec", "y2t": "matvec", "yat": "vecmat", "yac": "vecmat",
    "lp": "lrn", "lb": "lrn",
}

#: (T, R) of each step: T around the vector (3-5), the GEMM tile's rows and columns (7-9,
#: 11-13), the vecmat block (15-17) and the bound (39, 40); R over every row count
SIZES = [(1, 1), (4, 2), (3, 3), (5, 4), (8, 1), (7, 2), (9, 3), (12, 4), (11, 1), (13, 2), (16, 3), (17, 4),
         (15, 1), (40, 4), (39, 3), (2, 1)]

TENSORS = {"gr": (8,), "w": (8, 16), "bw": (16,), "wm": (65, 37), "bm": (37,), "w3": (2, 8, 16), "s8": (70,),
           "s4": (1,), "b4": (64,), "wt": (37, 65)}


def write_model(path: Path) -> Path:
    rng = np.random.default_rng(11)
    tensors = {name: (rng.standard_normal(shape) * 0.5).astype(np.float32) for name, shape in TENSORS.items()}
    tensors["w8"] = TensorSpec(rng.integers(-128, 128, (65, 70)).astype(np.int8), dtype="i8")
    tensors["z8"] = rng.integers(-64, 64, (70,)).astype(np.int32)
    tensors["w4"] = TensorSpec(rng.integers(0, 16, (65, 64)).astype(np.uint8), dtype="u4")
    oi.write_oinf(path, tensors=tensors, sizevars={"T": 1, "R": 1})
    return path


def check_vector_kernels(sim: Simulator) -> None:
    """Each output of VECTOR is written by the NEON kernel of its path, over run-time extents."""
    prog = sim.plan.program
    names = [f"{prog.name}_k{i}_{k.op}" for i, k in enumerate(prog.kernels)]
    source = next(text.decode() for f, text in sim.plan.files.items() if f.endswith("_kernels.c"))
    texts = definitions(source, [f"oi_{n}" for n in names])
    writers: dict[str, list[int]] = {}
    for stmt in prog.blocks[prog.entry]:
        if isinstance(stmt, Call):
            writers.setdefault(stmt.result.var, []).append(stmt.kernel)
    for var, paths in VECTOR.items():
        paths = (paths,) if isinstance(paths, str) else paths
        assert len(writers[var]) == len(paths), var
        for i, path in zip(writers[var], paths, strict=True):
            name = f"oi_{names[i]}"
            text = texts[name]
            assert prog.kernels[i].sizes, f"{var}: {name} has static extents"
            assert "oiv" in text, f"{var}: {name} is the portable kernel"
            assert all(m.format(name=name) in text for m in PATHS[path]), f"{var}: {name} is not the {path}"
            if path == "vecmat":
                assert f"{name}_rows(" not in text, f"{var}: {name} is a matvec"


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_sizes_take_the_neon_kernels(tmp_path, monkeypatch, device):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    model = write_model(tmp_path / "m.oinf")
    bounds = {"T": 40, "R": 4}
    sim = Simulator(oi.ModelLoader.open(model), oi.graph(GRAPH), arch=device, dynamic=bounds)
    check_vector_kernels(sim)
    ex = sim.make_executor()
    ref = Reference(model, GRAPH, dynamic=bounds).make_executor()
    rng = np.random.default_rng(7)
    for t, r in SIZES:
        ex.set_sizes(T=t, R=r)
        ref.set_sizes(T=t, R=r)
        feed = {name: rng.standard_normal(tuple(int(d) for d in var.shape)).astype(np.float32)
                for name, var in ref.bound.vars.items() if var.kind.name == "DYNAMIC"}
        ex.insert(**feed)
        ref.insert(**feed)
        ex.run_step()
        ref.run_step()
        for out in VECTOR:
            want, got = ref.fetch(out), ex.fetch(out)
            assert got.shape == want.shape, (out, t, r)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 if out in ("y8", "y4") else 1e-4,
                                       err_msg=f"{out} at T={t}, R={r}")
