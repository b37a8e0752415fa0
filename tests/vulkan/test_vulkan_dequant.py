"""dequant_matmul's GEMV kernel (f32 x, N a multiple of 16 / 32, at most 8 rows) on the Vulkan
device: every weight dtype, per-channel and per-tensor scales, with and without zero points,
1 and 3 rows, 16-, 8- and 4-byte weight loads (narrower where N has few column groups), every
row loaded at once and the loop over K, against NumPy on the dequantized weights; the
conformance cases (N = 7) cover the per-element kernel."""

from __future__ import annotations

import re

import numpy as np

import openinfer as oi
from openinfer import QuantParams, TensorSpec, write_oinf
from openinfer.sim import Simulator

from .conftest import VK_ARCH

CASES = [  # (weights dtype, K, N, rows, per-channel, zero points, the doc line's load and K loop)
    ("i8", 67, 64, 1, True, False, "4-byte weight loads, 2 rows an invocation loaded at once"),   # (the 2nd: 3 of 64)
    ("u8", 300, 32, 3, True, True, "4-byte"),
    ("i8", 40, 4096, 1, False, True, "16-byte"), ("i8", 50, 768, 2, True, True, "8-byte"),
    ("i4", 129, 64, 1, True, True, "4-byte"), ("u4", 65, 96, 3, False, False, "4-byte"),
    ("i4", 300, 8192, 1, True, False, "16-byte"), ("u4", 9000, 64, 1, True, True, "4-byte weight loads, subgroup"),
]


def test_gemv_kernel_matches_numpy(tmp_path):
    rng = np.random.default_rng(11)
    tensors, decls, ops, want, inputs = {}, [], [], {}, {}
    for i, (wt, k, n, rows, channel, zp, _) in enumerate(CASES):
        info = oi.dtypes.lookup(wt)
        w = rng.integers(info.lo, info.hi + 1, (k, n)).astype(np.uint8 if wt.startswith("u") else np.int8)
        count = n if channel else 1
        scale = rng.uniform(0.01, 0.1, count).astype(np.float32)
        zps = rng.integers(info.lo // 2, info.hi // 2 + 1, count).astype(np.int32) if zp else None
        quant = (QuantParams.per_channel(1, scale, zps) if channel else
                 QuantParams.per_tensor(float(scale[0]), None if zps is None else int(zps[0])))
        tensors[f"w{i}"] = TensorSpec(w, dtype=wt, quant=quant)
        x = rng.standard_normal((rows, k)).astype(np.float32)
        inputs[f"x{i}"] = x
        decls.append(f"w{i}: {wt}[{k}, {n}]; s{i}: f32[{count}] @ref(\"w{i}#scale\");"
                     + (f" z{i}: i32[{count}] @ref(\"w{i}#zero_point\");" if zp else ""))
        ops.append(f"op dequant_matmul(x{i}, w{i}, s{i}{f', z{i}' if zp else ''}) >> y{i};")
        deq = (w.astype(np.float64) - (0 if zps is None else zps)) * scale
        want[f"y{i}"] = x.astype(np.float64) @ deq
    path = tmp_path / "q.oinf"
    write_oinf(path, tensors)
    text = ("constant { " + " ".join(decls) + " }\n"
            + "dynamic { " + " ".join(f"x{i}: f32[{c[3]}, {c[1]}];" for i, c in enumerate(CASES)) + " }\n"
            + "volatile { " + " ".join(f"y{i}: f32[{c[3]}, {c[2]}];" for i, c in enumerate(CASES)) + " }\n"
            + "block entry {\n" + "\n".join(ops) + "\nreturn;\n}\n")
    sim = Simulator(oi.ModelLoader.open(path), oi.graph(text), arch=VK_ARCH)
    lines = [src.decode().splitlines()[1] for f, src in sim.plan.files.items()
             if f.endswith(".comp") and b"dequant_matmul GEMV" in src]
    docs = {re.search(r"dequantize\((\w+\[\d+, \d+\])\)", line).group(1): line for line in lines}
    assert len(docs) == len(CASES)
    for wt, k, n, *_, how in CASES:     # each case's kernel, by its weights' shape
        assert how in docs[f"{wt}[{k}, {n}]"], docs[f"{wt}[{k}, {n}]"]
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    for name, ref in want.items():
        np.testing.assert_allclose(ex.fetch(name), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max(), err_msg=name)
    assert sim.validation_messages() == 0
