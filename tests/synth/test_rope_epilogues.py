"""RoPE folded into the GEMV that computed its input (openinfer/synth/fusion.py `fold_rope`):
which ropes go on the target that renders it (Vulkan's f32 and dequantizing GEMVs), which stay,
and that the C targets keep every rope. tests/vulkan/test_vulkan_rope_epilogues.py runs the same
graph against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from quantized import quantized_weight

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synthesizer import Synthesizer

REPO = Path(__file__).resolve().parents[2]
VULKAN = REPO / "devices" / "nvidia-h200.json"

#: r1: folds (f32 weights, through the reshape); r2, r3: fold into an i8 and an i4 dequantizing
#: GEMV; r4: folds, the GEMV also normalising x (its norm folded after); n6: not (the unrotated
#: s is read after the reshape); n7: not (interleaved pairs); n8: not (positions per row); n9:
#: not (the product of 16 rows: the GEMM)
GRAPH = """
dynamic { x: f32[1, 128]; p: i32; ps: i32[1]; a16: f32[16, 128]; }
constant {
    w: f32[128, 128]; w8: i8[128, 128]; s8: f32[128] @ref("w8#scale"); w4: i4[128, 128];
    s4: f32[128] @ref("w4#scale"); g: f32[128];
}
volatile {
    q: f32[1, 128]; q3: f32[1, 2, 64]; k: f32[1, 128]; k3: f32[1, 2, 64]; v: f32[1, 128]; v3: f32[1, 2, 64];
    h: f32[1, 128]; n: f32[1, 128]; n3: f32[1, 2, 64];
    s: f32[1, 128]; s3: f32[1, 2, 64]; sx: f32[1, 128]; t: f32[1, 128]; t3: f32[1, 2, 64];
    u: f32[1, 128]; u3: f32[1, 1, 2, 64]; b: f32[16, 128]; b3: f32[16, 2, 64];
}
block entry {
    op matmul(x, w) >> q;                  // r1
    op reshape(q) >> q3;
    op rope(q3, p) >> q3;
    op dequant_matmul(x, w8, s8) >> k;     // r2
    op reshape(k) >> k3;
    op rope(k3, p, theta=500000.0) >> k3;
    op dequant_matmul(x, w4, s4) >> v;     // r3
    op reshape(v) >> v3;
    op rope(v3, p) >> v3;
    op rms_norm(x, g, eps=1e-5) >> h;      // r4
    op matmul(h, w) >> n;
    op reshape(n) >> n3;
    op rope(n3, p) >> n3;
    op matmul(x, w) >> s;                  // n6
    op reshape(s) >> s3;
    op rope(s3, p) >> s3;
    op add(s, x) >> sx;
    op matmul(x, w) >> t;                  // n7
    op reshape(t) >> t3;
    op rope(t3, p, interleaved=true) >> t3;
    op matmul(x, w) >> u;                  // n8
    op reshape(u) >> u3;
    op rope(u3, ps) >> u3;
    op matmul(a16, w) >> b;                // n9
    op reshape(b) >> b3;
    op rope(b3, p) >> b3;
    return;
}
"""
OUTPUTS = {"q3", "k3", "v3", "n3", "s3", "sx", "t3", "u3", "b3"}


def model(path: Path) -> Path:
    rng = np.random.default_rng(11)
    q8 = quantized_weight(rng, "i8", 128, 128)
    q4 = quantized_weight(rng, "i4", 128, 128, scales=(0.05, 0.2))
    oi.write_oinf(path, {"w": (rng.standard_normal((128, 128)) / 8).astype(np.float32), "w8": q8, "w4": q4,
                         "g": rng.uniform(0.5, 1.5, 128).astype(np.float32)})
    return path


def inputs(step: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(12 + step)
    pos = 3 + 37 * step                     # angles well past 2 pi for the low frequencies
    return {"x": rng.standard_normal((1, 128)).astype(np.float32), "p": np.int32(pos),
            "ps": np.array([pos], np.int32), "a16": rng.standard_normal((16, 128)).astype(np.float32)}


def test_ropes_fold_where_the_gemv_renders_them(tmp_path):
    prog = Synthesizer.from_arch(VULKAN).synthesize(str(model(tmp_path / "m.oinf")), oi.graph(GRAPH),
                                                    outputs=OUTPUTS).program
    calls = [s for s in prog.blocks[prog.entry] if isinstance(s, P.Call)]
    folded = sorted(s.desc for s in calls if (e := prog.kernels[s.kernel].epilogue) is not None and e.op == "rope")
    assert folded == ["op dequant_matmul(x,w4,s4) >> v; op rope(v3,p) >> v3",
                      "op dequant_matmul(x,w8,s8) >> k; op rope(k3,p) >> k3",
                      "op matmul(x,w) >> q; op rope(q3,p) >> q3",
                      "op rms_norm(x,g) >> h; op matmul(h,w) >> n; op rope(n3,p) >> n3"], folded
    kept = sorted(s.desc for s in calls if prog.kernels[s.kernel].op == "rope")
    assert kept == ["op rope(b3,p) >> b3", "op rope(s3,p) >> s3", "op rope(t3,p) >> t3", "op rope(u3,ps) >> u3"]
    # the position is the GEMV's input after its own (x, w / x, w, scales), before a norm's gamma
    normed = next(s for s in calls if s.desc.startswith("op rms_norm"))
    assert [o.var for o in normed.inputs] == ["x", "w", "p", "g"]


def test_c_targets_keep_every_rope(tmp_path):
    prog = Synthesizer.from_arch("x86_64-generic").synthesize(str(model(tmp_path / "m.oinf")), oi.graph(GRAPH),
                                                              outputs=OUTPUTS).program
    assert sum(1 for s in prog.blocks[prog.entry]
               if isinstance(s, P.Call) and prog.kernels[s.kernel].op == "rope") == 8
