"""Transposes read through by sdpa (openinfer/synth/fusion.py `fold_transposes`): which go on the
target whose sdpa reads [Sk, heads, D] keys and values itself (Vulkan), and that the C targets
keep them. tests/vulkan/test_vulkan_transposed_inputs.py runs the graph against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synthesizer import Synthesizer

REPO = Path(__file__).resolve().parents[2]
VULKAN = REPO / "devices" / "nvidia-h200.json"

#: f1: k and v of a cache read as [T, heads, D] (4 query heads over 2 kv heads, a mask): both
#: transposes go into sdpa; n2: not (kt2 is read again after sdpa); n3: not (k3 changes between
#: the transpose and sdpa)
GRAPH = """
dynamic { q: f32[4, 1, 16]; kc: f32[12, 2, 16]; vc: f32[12, 2, 8]; vd: f32[2, 12, 8]; keep: bool[12]; }
volatile {
    kt: f32[2, 12, 16]; vt: f32[2, 12, 8]; att: f32[4, 1, 8];
    kt2: f32[2, 12, 16]; att2: f32[4, 1, 8]; s2: f32[2, 12, 16];
    k3: f32[12, 2, 16]; kt3: f32[2, 12, 16]; att3: f32[4, 1, 8];
}
block entry {
    op transpose(kc, perm=[1, 0, 2]) >> kt;      // f1
    op transpose(vc, perm=[1, 0, 2]) >> vt;
    op sdpa(q, kt, vt, keep) >> att;
    op transpose(kc, perm=[1, 0, 2]) >> kt2;     // n2
    op sdpa(q, kt2, vd, keep) >> att2;
    op add(kt2, kt2) >> s2;
    op add(kc, kc) >> k3;                        // n3
    op transpose(k3, perm=[1, 0, 2]) >> kt3;
    op add(kc, k3) >> k3;
    op sdpa(q, kt3, vd, keep) >> att3;
    return;
}
"""
OUTPUTS = {"att", "att2", "s2", "att3"}


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(9)
    feeds = {k: rng.standard_normal(s).astype(np.float32)
             for k, s in {"q": (4, 1, 16), "kc": (12, 2, 16), "vc": (12, 2, 8), "vd": (2, 12, 8)}.items()}
    feeds["keep"] = np.arange(12) < 9
    return feeds


def empty_model(tmp_path: Path) -> Path:
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    return tmp_path / "empty.oinf"


def test_transposes_fold_into_sdpa_where_the_target_reads_them(tmp_path):
    prog = Synthesizer.from_arch(VULKAN).synthesize(str(empty_model(tmp_path)), oi.graph(GRAPH),
                                                    outputs=OUTPUTS).program
    calls = [(s.desc, prog.kernels[s.kernel]) for s in prog.blocks[prog.entry] if isinstance(s, P.Call)]
    folded = [(d, k.input_perms) for d, k in calls if k.input_perms]
    assert folded == [("op transpose(vc) >> vt; op transpose(kc) >> kt; op sdpa(q,kt,vt,keep) >> att",
                       ((1, (1, 0, 2)), (2, (1, 0, 2))))]
    left = [d for d, k in calls if k.op == "transpose"]
    assert left == ["op transpose(kc) >> kt2", "op transpose(k3) >> kt3"]
    sdpa = next(s for s in prog.blocks[prog.entry] if isinstance(s, P.Call) and prog.kernels[s.kernel].input_perms)
    assert [o.var for o in sdpa.inputs] == ["q", "kc", "vc", "keep"]


def test_c_targets_keep_their_transposes(tmp_path):
    for arch in ("x86_64-generic", "x86_64-avx2"):
        prog = Synthesizer.from_arch(arch).synthesize(str(empty_model(tmp_path)), oi.graph(GRAPH),
                                                      outputs=OUTPUTS).program
        assert not any(k.input_perms for k in prog.kernels), arch
        assert sum(1 for s in prog.blocks[prog.entry] if isinstance(s, P.Call)
                   and prog.kernels[s.kernel].op == "transpose") == 4, arch
