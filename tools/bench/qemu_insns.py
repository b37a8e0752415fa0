"""Guest instruction counts of the Arm kernels under QEMU: the NEON wing against the portable C,
and the microcontrollers' (instructions per multiply-add).

    python tools/bench/qemu_insns.py [results.json] [--arch aarch64-generic aarch64-neon aarch64-v82]
                                     [--cases CASE ...]
    python tools/bench/qemu_insns.py --arch cortex-m4 cortex-m55 --cases gemv_f32_1024 gemm_256
    python tools/bench/qemu_insns.py --arch aarch64-neon --cases conv_16x28x28 --by-function

No Arm hardware here, so the measure is instructions, not time: each program runs under its
descriptor's emulator (qemu-aarch64; qemu-system-arm for a microcontroller's firmware,
openinfer/firmware.py) with a tiny TCG plugin (tools/bench/qemu_insn_count.c, built with the
host's gcc) that counts the guest instructions executed (what `-icount shift=0` would make
virtual time). The count of one step is (count after 3 steps -
count after 1 step) / 2, which leaves out create() (packing, the pool) and the runner. One
thread (OI_NUM_THREADS=1). Cases: a 256^3 f32 GEMM (both operands inputs; also a @ b^T), an f32
GEMV [1, 1024] @ [1024, 1024] (also x @ W^T, W a constant [1024, 1024]: an imported Gemm's
weight), the i8 and i4 dequantizing GEMVs of the same shape (per-channel
scale), 3 x 3 pad-1 convolutions with bias (32 -> 32 channels on 14 x 14, 16 -> 32 on 28 x 28;
constant weights), a MobileNet block's 1 x 1 (64 -> 64 channels on 14 x 14) and 3 x 3 depthwise (32
channels on 28 x 28) convolutions, sdpa over 4 heads of 64 queries and keys, head dim 64, and lrn over
[1, 64, 27, 27] (5 channels, AlexNet's second layer's window). The FMA lower
bound of the GEMM, the convolutions and sdpa's two products on 128-bit NEON is their
multiply-adds / 4 FMLA instructions; a product's line also gives instructions per multiply-add.
The MLPerf Tiny int8 models (tests/data/mlperf_tiny: mlperf_kws, mlperf_vww, mlperf_ic, mlperf_ad)
are imported from their .tflite files, with random int8 inputs: instructions per inference.
`--cases` picks some. The plugin bins each translated block by its function's symbol;
`--by-function` prints a step's count per function too (those of more than 1,000 instructions).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import openinfer as oi  # noqa: E402
from openinfer.oinf.values import TensorSpec  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.targets import devices  # noqa: E402

CASES = {
    "gemm_256": ("dynamic { a: f32[256, 256]; b: f32[256, 256]; }\nvolatile { y: f32[256, 256]; }\n"
                 "block entry {\n  op matmul(a, b) >> y;\n  return;\n}\n", {}, ("a", "b")),
    "gemm_256_tb": ("dynamic { a: f32[256, 256]; b: f32[256, 256]; }\nvolatile { y: f32[256, 256]; }\n"
                    "block entry {\n  op matmul(a, b, transpose_b=true) >> y;\n  return;\n}\n", {}, ("a", "b")),
    "gemv_f32_1024": ("dynamic { x: f32[1, 1024]; }\nconstant { w: f32[1024, 1024]; }\nvolatile { y: f32[1, 1024]; }\n"
                      "block entry {\n  op matmul(x, w) >> y;\n  return;\n}\n", {"w": "f32"}, ("x",)),
    "gemv_f32_1024_wt": ("dynamic { x: f32[1, 1024]; }\nconstant { w: f32[1024, 1024]; }\n"
                         "volatile { y: f32[1, 1024]; }\n"
                         "block entry {\n  op matmul(x, w, transpose_b=true) >> y;\n  return;\n}\n", {"w": "f32"},
                         ("x",)),
    "gemv_i8_1024": ("dynamic { x: f32[1, 1024]; }\nconstant { w: i8[1024, 1024]; s: f32[1024]; }\n"
                     "volatile { y: f32[1, 1024]; }\n"
                     "block entry {\n  op dequant_matmul(x, w, s) >> y;\n  return;\n}\n", {"w": "i8", "s": "f32"},
                     ("x",)),
    "gemv_i4_1024": ("dynamic { x: f32[1, 1024]; }\nconstant { w: i4[1024, 1024]; s: f32[1024]; }\n"
                     "volatile { y: f32[1, 1024]; }\n"
                     "block entry {\n  op dequant_matmul(x, w, s) >> y;\n  return;\n}\n", {"w": "i4", "s": "f32"},
                     ("x",)),
}
for _name, _c, _o, _hw in (("conv_32x14x14", 32, 32, 14), ("conv_16x28x28", 16, 32, 28)):
    # 3 x 3, padding 1, bias, constant weights: a small CNN's convolutions
    CASES[_name] = (f"dynamic {{ x: f32[1, {_c}, {_hw}, {_hw}]; }}\n"
                    f"constant {{ w: f32[{_o}, {_c}, 3, 3]; b: f32[{_o}]; }}\n"
                    f"volatile {{ y: f32[1, {_o}, {_hw}, {_hw}]; }}\n"
                    "block entry {\n  op conv2d(x, w, b, padding=1) >> y;\n  return;\n}\n",
                    {"w": "f32", "b": "f32"}, ("x",))
for _name, _c, _k, _groups, _hw in (("conv1x1_64x14x14", 64, 1, 1, 14), ("dwconv_32x28x28", 32, 3, 32, 28)):
    # a MobileNet block's pointwise (1 x 1) and depthwise (3 x 3, padding 1, a group a channel) convolutions
    CASES[_name] = (f"dynamic {{ x: f32[1, {_c}, {_hw}, {_hw}]; }}\n"
                    f"constant {{ w: f32[{_c}, {_c // _groups}, {_k}, {_k}]; b: f32[{_c}]; }}\n"
                    f"volatile {{ y: f32[1, {_c}, {_hw}, {_hw}]; }}\n"
                    f"block entry {{\n  op conv2d(x, w, b, padding={_k // 2}, groups={_groups}) >> y;\n  return;\n}}\n",
                    {"w": "f32", "b": "f32"}, ("x",))
# attention of 4 heads, 64 queries and keys, head dim 64 (the encoder example's shape at a quarter
# of its length)
CASES["sdpa_4x64x64"] = ("dynamic { q: f32[4, 64, 64]; k: f32[4, 64, 64]; v: f32[4, 64, 64]; }\n"
                         "volatile { y: f32[4, 64, 64]; }\n"
                         "block entry {\n  op sdpa(q, k, v) >> y;\n  return;\n}\n", {}, ("q", "k", "v"))
CASES["lrn_64x27x27"] = ("dynamic { x: f32[1, 64, 27, 27]; }\nvolatile { y: f32[1, 64, 27, 27]; }\n"
                         "block entry {\n  op lrn(x, size=5) >> y;\n  return;\n}\n", {}, ("x",))
#: the MLPerf Tiny int8 models: case -> .tflite file (imported; random int8 inputs)
MLPERF = {"mlperf_kws": "kws_ref_model", "mlperf_vww": "vww_96_int8", "mlperf_ic": "pretrainedResnet_quant",
          "mlperf_ad": "ad01_int8"}
CASES.update({case: None for case in MLPERF})
#: multiply-adds of the products
MACS = {"gemm_256": 256 ** 3, "gemm_256_tb": 256 ** 3, "gemv_f32_1024": 1024 ** 2, "gemv_f32_1024_wt": 1024 ** 2,
        "gemv_i8_1024": 1024 ** 2, "gemv_i4_1024": 1024 ** 2, "sdpa_4x64x64": 2 * 4 * 64 * 64 * 64,
        "conv_32x14x14": 32 * 32 * 9 * 14 * 14, "conv_16x28x28": 16 * 32 * 9 * 28 * 28,
        "conv1x1_64x14x14": 64 * 64 * 14 * 14, "dwconv_32x28x28": 32 * 9 * 28 * 28}
#: the FMA lower bound on 128-bit NEON: a product's multiply-adds / 4 FMLA instructions
FMA_BOUND = {k: MACS[k] // 4 for k in ("sdpa_4x64x64", "gemm_256", "gemm_256_tb", "conv_32x14x14", "conv_16x28x28")}


def _weights(kinds: dict[str, str], graph, rng) -> dict:
    out = {}
    for name, kind in kinds.items():
        shape = tuple(int(d) for d in graph.vars[name].dims)
        if kind in ("i8", "i4"):
            bound = 1 << (int(kind[1:]) - 1)
            out[name] = TensorSpec(rng.integers(-bound, bound, shape).astype(np.int8), dtype=kind)
        else:
            out[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return out


def _case(case: str, tmp: Path, rng) -> tuple:
    """A case of CASES: its graph, model and inputs."""
    text, kinds, dynamic = CASES[case]
    graph = oi.graph(text)
    model_path = tmp / f"{case}.oinf"
    oi.write_oinf(model_path, _weights(kinds, graph, rng) or {"unused": np.zeros(1, np.float32)})
    inputs = {n: rng.uniform(-1, 1, tuple(int(d) for d in graph.vars[n].dims)).astype(np.float32) for n in dynamic}
    return graph, oi.ModelLoader.open(model_path), inputs


def _mlperf(case: str, tmp: Path, rng) -> tuple:
    """An MLPerf Tiny model imported from its .tflite file, its graph, model and random inputs of
    its input dtype (int8)."""
    from openinfer.tflite import import_tflite

    result = import_tflite(REPO / "tests" / "data" / "mlperf_tiny" / f"{MLPERF[case]}.tflite")
    graph_path, model_path = result.write(tmp / case)
    graph = oi.graph(graph_path.read_text())
    inputs = {}
    for name, var in graph.vars.items():
        if var.kind.value == "Dynamic":
            shape = tuple(int(d) for d in var.dims)
            inputs[name] = (rng.integers(var.dtype.lo, var.dtype.hi + 1, shape).astype(var.dtype.numpy)
                            if var.dtype.kind.value in ("signed", "unsigned")
                            else rng.uniform(-1, 1, shape).astype(np.float32))
    return graph, oi.ModelLoader.open(model_path), inputs


def _count(sim: Simulator, inputs: dict, steps: int, counts: Path) -> dict[str, int]:
    """Guest instructions of create() and `steps` steps per function (the plugin appends them when
    the runner ends)."""
    counts.write_text("")
    ex = sim.make_executor()
    for _ in range(steps):
        ex.insert(**inputs)
        ex.run_step()
    del ex
    gc.collect()
    for _ in range(600):
        per_function = parse_counts(counts.read_text())
        if per_function is not None:
            return per_function
        subprocess.run(["sleep", "0.1"], check=True)
    raise RuntimeError("no instruction count: the runner did not end")


def build_plugin(folder: Path) -> Path:
    """The counting plugin (qemu_insn_count.c) built with the host's gcc into `folder`: QEMU loads
    it with -plugin PATH, and it appends its counts to $OI_INSN_COUNT_FILE when the guest ends."""
    plugin = folder / "libinsn.so"
    source = Path(__file__).with_name("qemu_insn_count.c")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(plugin), str(source)], check=True)
    return plugin


def parse_counts(text: str) -> dict[str, int] | None:
    """The plugin's "symbol count" lines as a dict, or None while its closing "--" has not come."""
    text = text.strip()
    if not text.endswith("--"):
        return None
    return {name: int(n) for name, n in (line.rsplit(" ", 1) for line in text.splitlines()[:-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--arch", nargs="+", default=["aarch64-generic", "aarch64-neon", "aarch64-v82"])
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--by-function", action="store_true", help="a step's count per function")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="oi-insns-"))
    plugin = build_plugin(tmp)
    wrappers = tmp / "bin"                      # each descriptor's emulator, with the plugin
    wrappers.mkdir()
    for emulator in sorted({devices.load(a).toolchain.emulator for a in args.arch}):
        wrapper = wrappers / emulator
        wrapper.write_text(f'#!/bin/sh\nexec {shutil.which(emulator)} -plugin {plugin} "$@"\n')
        wrapper.chmod(0o755)
    counts = tmp / "count.txt"
    os.environ.update(PATH=f"{wrappers}:{os.environ['PATH']}", OI_INSN_COUNT_FILE=str(counts),
                      OI_NUM_THREADS="1", OI_CACHE_DIR=str(tmp / "cache"))
    rng = np.random.default_rng(0)
    results: dict[str, dict[str, int]] = {}
    for case in args.cases:
        graph, model, inputs = _mlperf(case, tmp, rng) if case in MLPERF else _case(case, tmp, rng)
        for arch in args.arch:
            sim = Simulator(model, graph, arch=arch)
            one, three = _count(sim, inputs, 1, counts), _count(sim, inputs, 3, counts)
            results.setdefault(case, {})[arch] = (sum(three.values()) - sum(one.values())) // 2
            per = {f: (three.get(f, 0) - one.get(f, 0)) // 2 for f in three}
            if args.by_function:
                print(f"{case} on {arch}, per step:")
                for f, n in sorted(per.items(), key=lambda t: -t[1]):
                    if n > 1000:
                        print(f"    {f:56} {n:>12,}")
    print(f"{'case':16} " + " ".join(f"{a:>16}" for a in args.arch) + "   (guest instructions per step)")
    for case, row in results.items():
        line = f"{case:16} " + " ".join(f"{row[a]:>16,}" for a in args.arch)
        neon = [a for a in args.arch if not devices.load(a).bare_metal]   # (a microcontroller's: per MAC)
        if case in FMA_BOUND and neon:
            line += "   FMA bound " + ", ".join(f"{a}: {row[a] / FMA_BOUND[case]:.2f}x" for a in neon)
        if case in MACS:
            line += "   per MAC " + ", ".join(f"{a}: {row[a] / MACS[case]:.2f}" for a in args.arch)
        print(line)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
