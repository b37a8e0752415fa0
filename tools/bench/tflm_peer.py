"""The TFLM + CMSIS-NN peer of the MLPerf Tiny models under QEMU: instructions per inference, flash
and RAM of TensorFlow Lite Micro's firmware for each model and core, and its outputs checked
against LiteRT's reference kernels (docs/peers.md).

    PEERS=/work/peers tools/bench/tflm/build.sh          # the ELFs, into $PEERS/tflm-build
    python tools/bench/tflm_peer.py [results.json] [--build /work/peers/tflm-build]
                                    [--cores cortex-m4 cortex-m55] [--models kws_ref_model ...]

Each ELF (tools/bench/tflm/tflm_harness.cc) runs under qemu-system-arm on its core's board (the
descriptor's toolchain.machine: mps2-an386, mps3-an547) with the counting plugin of
tools/bench/qemu_insns.py, once with 1 inference and once with 3 (the semihosting command line
gives N): the instructions of one inference are (count after 3 - count after 1) / 2, which leaves out
start-up, the interpreter's set-up (AllocateTensors) and the report; an inference is the copy of
the input into its tensor and Invoke(). Flash: the ELF's code and read-only data (.text, with the
model) plus .data's load image; the model's own bytes apart. RAM: the tensor arena in use
(arena_used_bytes()), the stack's high-water mark (startup.c paints the stack; the harness scans it
after the 3 inferences) and .data + .bss (the arena and the input pattern are in .oi_bulk, apart).
The outputs: the output tensor's bytes after the inferences, against LiteRT's interpreter with
OpResolverType.BUILTIN_REF (and BUILTIN_WITHOUT_DEFAULT_DELEGATES) on the same input (the harness's
LCG pattern, reproduced here).
A count is of instructions QEMU's TCG executed, not time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from qemu_insns import build_plugin, parse_counts  # noqa: E402

from openinfer.firmware import BOARDS  # noqa: E402  (qemu_insns put the repository on sys.path)
from openinfer.targets import devices  # noqa: E402

MODELS = ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8")
CORES = ("cortex-m4", "cortex-m55")
#: the sections of the firmware's flash image (harness.ld): code, read-only data, .data's load image
FLASH_SECTIONS = (".text", ".ARM.exidx", ".data")
RAM_SECTIONS = (".data", ".bss")
#: LiteRT's op resolvers the outputs are checked against: its reference kernels, and its optimized
#: kernels without the XNNPACK delegate. (LiteRT 2.3.0's reference FULLY_CONNECTED rounds its int8
#: requantization once; TFLM's and CMSIS-NN's round twice, as gemmlowp does: docs/peers.md.)
RESOLVERS = ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")
#: the lines of the harness's report
REPORT_KEYS = ("model_bytes", "inferences", "arena_used_bytes", "stack_used_bytes", "output")


def input_pattern(n: int) -> np.ndarray:
    """The harness's input (tflm_harness.cc fill_pattern): the top 6 bits of a 32-bit LCG, signed."""
    out = np.empty(n, np.int8)
    state = 0x0123ABCD
    for i in range(n):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        out[i] = (state >> 26) - (64 if state >> 31 else 0)
    return out


def litert_output(model: Path, resolver: str) -> bytes:
    """The model's output on the harness's input, by LiteRT's interpreter with the op resolver
    `resolver` (an OpResolverType's name)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType[resolver])
    interpreter.allocate_tensors()
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    interpreter.set_tensor(inp["index"], input_pattern(int(np.prod(inp["shape"]))).reshape(inp["shape"]))
    interpreter.invoke()
    return interpreter.get_tensor(out["index"]).tobytes()


def sections(elf: Path) -> dict[str, int]:
    """Section sizes (arm-none-eabi-size -A)."""
    text = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], check=True, capture_output=True, text=True).stdout
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0].startswith(".") and words[1].isdigit():
            out[words[0]] = int(words[1])
    return out


def run(elf: Path, machine: str, plugin: Path, inferences: int, folder: Path) -> tuple[dict[str, str], dict[str, int]]:
    """The firmware's report (its "key value" lines) and the guest instructions it executed, per
    function."""
    counts = folder / "count.txt"
    counts.write_text("")
    argv = ["qemu-system-arm", "-plugin", str(plugin), "-M", machine, *BOARDS[machine].qemu, "-nographic",
            "-monitor", "none", "-serial", "none", "-semihosting-config", "enable=on,target=native",
            "-kernel", str(elf), "-append", str(inferences)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "OI_INSN_COUNT_FILE": str(counts)})
    if done.returncode != 0:
        raise RuntimeError(f"{elf} ({inferences} inferences) ended with status {done.returncode}: {done.stderr}")
    per_function = parse_counts(counts.read_text())
    if per_function is None:
        raise RuntimeError(f"{elf}: no instruction count")
    # QEMU 7.2 writes semihosting's SYS_WRITE0 to its stderr (no chardev given)
    report = dict(line.split(" ", 1) for line in done.stderr.splitlines() if line.split(" ", 1)[0] in REPORT_KEYS)
    if set(report) != set(REPORT_KEYS):
        raise RuntimeError(f"{elf}: an incomplete report: {done.stderr}")
    return report, per_function


def measure(elf: Path, model: Path, core: str, plugin: Path, folder: Path) -> dict:
    machine = devices.load(core).toolchain.machine
    one, functions1 = run(elf, machine, plugin, 1, folder)
    three, functions3 = run(elf, machine, plugin, 3, folder)
    count1, count3 = sum(functions1.values()), sum(functions3.values())
    per_function = {f: (n - functions1.get(f, 0)) // 2 for f, n in functions3.items()}
    top = dict(sorted(((f, n) for f, n in per_function.items() if n > 0), key=lambda t: -t[1])[:12])
    size = sections(elf)
    output = bytes.fromhex(three["output"])
    reference = {resolver: litert_output(model, resolver) for resolver in RESOLVERS}
    if bytes.fromhex(one["output"]) != output:
        raise RuntimeError(f"{elf}: the outputs of the runs with 1 and 3 inferences differ")
    model_bytes = int(three["model_bytes"])
    if model_bytes != model.stat().st_size:
        raise RuntimeError(f"{elf}: embeds {model_bytes} bytes, {model} has {model.stat().st_size}")
    checks = {}
    for resolver, expected in reference.items():
        diff = np.abs(np.frombuffer(output, np.int8).astype(int) - np.frombuffer(expected, np.int8).astype(int))
        checks[resolver] = {"output": expected.hex(), "bit_exact": output == expected,
                            "differing_bytes": int(np.count_nonzero(diff)), "max_abs_diff": int(diff.max())}
    arena, stack = int(three["arena_used_bytes"]), int(three["stack_used_bytes"])
    data_bss = sum(size.get(s, 0) for s in RAM_SECTIONS)
    return {"machine": machine, "instructions_per_inference": (count3 - count1) // 2,
            "instructions_1": count1, "instructions_3": count3, "top_functions_per_inference": top,
            "flash_bytes": sum(size.get(s, 0) for s in FLASH_SECTIONS), "model_bytes": model_bytes,
            "code_bytes": sum(size.get(s, 0) for s in FLASH_SECTIONS) - model_bytes,
            "arena_used_bytes": arena, "stack_used_bytes": stack, "data_bss_bytes": data_bss,
            "ram_bytes": arena + stack + data_bss, "sections": size,
            "output": output.hex(), "litert": checks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--build", type=Path, default=Path(os.environ.get("PEERS", "/work/peers")) / "tflm-build")
    ap.add_argument("--models-dir", type=Path, default=Path("/work/mlperf"))
    ap.add_argument("--cores", nargs="+", choices=CORES, default=list(CORES))
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    args = ap.parse_args()
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="oi-tflm-") as tmp:
        folder = Path(tmp)
        plugin = build_plugin(folder)
        for model in args.models:
            for core in args.cores:
                row = measure(args.build / core / f"{model}.elf", args.models_dir / f"{model}.tflite", core, plugin,
                              folder)
                results.setdefault(model, {})[core] = row
                vs = "; ".join(f"{r}: " + ("bit-exact" if c["bit_exact"] else
                                           f"{c['differing_bytes']} of {len(row['output']) // 2} bytes differ, "
                                           f"max |diff| {c['max_abs_diff']}") for r, c in row["litert"].items())
                print(f"{model:24} {core:10} {row['instructions_per_inference']:>12,} instr/inference  "
                      f"flash {row['flash_bytes']:>7,} (model {row['model_bytes']:>7,})  RAM {row['ram_bytes']:>7,} "
                      f"(arena {row['arena_used_bytes']:>7,} + stack {row['stack_used_bytes']:>5,} + data/bss "
                      f"{row['data_bss_bytes']:>5,})  output vs LiteRT {vs}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
