"""The microcontroller descriptors through gen, build and sim: each program cross-built on the
bare-metal HAL, linked into a firmware and run under QEMU's system emulation of the descriptor's
board (openinfer/firmware.py), each output compared with the reference.

Every example matches the reference over several steps (persistent tables, counters and yield /
await consumers carried across steps in the one firmware, which stays alive), a traced step
reports every node and bisects clean, the generated C builds clean (-Wall -Wextra -Werror) with
arm-none-eabi-gcc, and a descriptor this machine cannot run is skipped by tests/conftest.py, the
reason naming the Debian packages.

    OI_SLOW=1   every example (default: a sample of those likeliest to break), and the Cortex-M7,
                the Cortex-M33 and the RISC-V RV32IMAC too (default: the M4 and the M55)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from test_examples_targets import EXAMPLES, check_example  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.bisect import bisect  # noqa: E402
from openinfer.errors import SimulationError  # noqa: E402
from openinfer.inputs import random_inputs  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.targets import devices  # noqa: E402
from openinfer.testing import assert_matches_reference, missing_here  # noqa: E402

SLOW = os.environ.get("OI_SLOW") == "1"
REPO = HERE.parents[1]
#: the cores of the default suite (each architecture's); OI_SLOW=1 adds the others
MCU = ("cortex-m4", "cortex-m55") + (("cortex-m7", "cortex-m33", "riscv32-imac") if SLOW else ())
#: the default suite's examples: persistent tables and counters, a yield / await consumer run
#: inline on the one thread, packed i4 weights and branches
DEFAULT_EXAMPLES = ("kv_cache_decode", "streaming_pipeline", "quantized_linear", "stability_guard")


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-cache")))
        yield


def _example_runs() -> list[tuple[str, str]]:
    """(example, core): every pair with OI_SLOW=1; else the default examples shared out over the
    default cores, two each."""
    if SLOW:
        return [(name, arch) for name in EXAMPLES for arch in MCU]
    return [(name, MCU[i % len(MCU)]) for i, name in enumerate(DEFAULT_EXAMPLES)]


@pytest.mark.parametrize(("name", "arch"), _example_runs())
def test_example_matches_reference(example, name, arch):
    sim = check_example(example, name, arch)
    assert sim.library.name == f"{name}_firmware.elf"
    source = (Path(sim.project) / f"{name}.c").read_text() + (Path(sim.project) / "meson.build").read_text()
    assert "pthread" not in source and "static_library(" in source     # no OS under it


@pytest.mark.parametrize("arch", MCU)
def test_trace_and_bisect_in_the_firmware(example_models, arch):
    model = oi.ModelLoader.open(example_models / "kv_cache_decode.oinf")
    graph = oi.load_graph(REPO / "examples" / "kv_cache_decode.oig")
    sim = Simulator(model, graph, arch=arch, trace=True)
    traced, ref = sim.make_executor(), Reference(model, graph).make_executor()
    feed = random_inputs(ref.bound, 5, 0)
    traced.insert(**feed)
    ref.insert(**feed)
    events = list(traced.iterate())
    assert [e.node_index for e in events] == [e.node_index for e in ref.iterate()]
    report = bisect(sim.bound, sim, seed=1, step=2)      # fetches inside the step, node by node
    assert report.first is None and report.nodes_compared == len(events) - 1


def test_a_missing_tool_is_one_line_naming_the_packages(example_models, monkeypatch):
    doc = devices.load("cortex-m4").doc
    device = devices.Device({**doc, "toolchain": {**doc["toolchain"], "emulator": "qemu-system-none"}})
    if missing_here("cortex-m4") and "qemu-system-none" not in str(missing_here("cortex-m4")):
        pytest.skip(str(missing_here("cortex-m4")))
    with pytest.raises(SimulationError, match=r"the emulator `qemu-system-none` is not installed \(Debian: apt-get "
                                              r"install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm\)$"):
        Simulator(example_models / "mlp_regression.oinf", REPO / "examples" / "mlp_regression.oig", arch=device)


#: what a single-precision FPU runs as software: the double routines of the Arm EABI and of
#: libgcc (RISC-V's: __muldf3, __extendsfdf2), and double libm
DOUBLE_SYMBOLS = re.compile(r"^(__aeabi_d\w+|__aeabi_f2d|__aeabi_d2f|__\w*df\d|(erf|exp|expm1|log|log1p|pow|sqrt|"
                            r"sin|cos|tan|tanh|sinh|cosh|atan|atan2|asin|acos|floor|ceil|round|trunc|fmod|fma|cbrt|"
                            r"hypot)$)")


@pytest.mark.parametrize("arch", MCU if SLOW else ("cortex-m4",))
@pytest.mark.parametrize("name", ["encoder", "decoder"])
def test_flagship_models_match_and_keep_to_single_precision(tmp_path, name, arch):
    """The BERT-shaped encoder (GELU's erf) and the decoder (rope's angles) on each core: they
    match the reference, and on a single-precision FPU (the Cortex-M4F's) the library references
    no double-precision routine (each would be a software routine, tens of times slower, in the
    image)."""
    from example_modules import load_example

    module = load_example(name)
    graph, model_path = module.write(module.SIZES["test"], tmp_path)
    model = oi.ModelLoader.open(model_path)
    feeds = None
    if name == "decoder":
        feeds = [{"token": np.array([t], np.int32)} for t in (3, 17, 200, 5)]
    assert_matches_reference(model, oi.load_graph(graph), arch=arch, feeds=feeds)
    if not devices.load(arch).single_precision:
        return
    sim = Simulator(model, oi.load_graph(graph), arch=arch)
    nm = devices.load(arch).toolchain.triple + "-nm"
    lib = Path(sim.project) / "build" / f"lib{sim.program.name}.a"
    undefined = {line.split()[-1] for line in subprocess.run([nm, "-u", str(lib)], capture_output=True, text=True,
                                                             check=True).stdout.splitlines() if line.strip()}
    doubles = sorted(s for s in undefined if DOUBLE_SYMBOLS.match(s))
    assert not doubles, f"{name} on {arch} references double-precision routines: {doubles}"


def test_embedded_weights_assemble_for_a_32_bit_core(example_models, tmp_path):
    """--embed-weights on a Cortex-M4: the image in .rodata.oi_weights (a firmware's linker script
    can place it), 64-aligned, its size a little-endian uint64_t equal to the file's."""
    from openinfer.build import build
    from openinfer.writetree import write_tree

    model = example_models / "mlp_regression.oinf"
    plan = oi.Synthesizer.from_arch("cortex-m4").synthesize(oi.ModelLoader.open(model),
                                                            oi.load_graph(REPO / "examples" / "mlp_regression.oig"),
                                                            name="mlp", embed_weights=True)
    write_tree(tmp_path, plan.files)
    build(tmp_path)
    objdump = devices.load("cortex-m4").toolchain.triple + "-objdump"
    dump = subprocess.run([objdump, "-h", "-t", str(tmp_path / "build" / "libmlp.a")], capture_output=True,
                          text=True, check=True).stdout
    section = next(line.split() for line in dump.splitlines() if ".rodata.oi_weights" in line and "2**" in line)
    assert section[-1] == "2**6"                                   # 64-aligned
    size_at = next(int(line.split()[0], 16) for line in dump.splitlines()
                   if ".rodata.oi_weights" in line and line.endswith(" oi_mlp_embedded_oinf_size"))
    raw = subprocess.run([objdump, "-s", "-j", ".rodata.oi_weights", str(tmp_path / "build" / "libmlp.a")],
                         capture_output=True, text=True, check=True).stdout
    data = bytes.fromhex("".join("".join(line.split()[1:5]) for line in raw.splitlines()
                                 if line.startswith(" ") and len(line.split()) > 1))
    assert int.from_bytes(data[size_at:size_at + 8], "little") == model.stat().st_size


def test_build_prints_the_flash_and_ram_footprint(example_models, tmp_path, capsys):
    """`openinfer build` of a microcontroller program: its flash (code, read-only data) and RAM
    (context, arena, the stack's bound from the compiler's frames and call graph) as a table, the
    regions from the header, nothing position-independent (no constant table moved to RAM)."""
    from openinfer.cli import main
    from openinfer.footprint import bare_metal_footprint

    out = tmp_path / "gen"
    assert main(["gen", str(REPO / "examples" / "kv_cache_decode.oig"), "--model",
                 str(example_models / "kv_cache_decode.oinf"), "--arch", "cortex-m4", "-o", str(out), "-q"]) == 0
    assert main(["build", str(out)]) == 0
    printed = capsys.readouterr().out
    fp = bare_metal_footprint(out, out / "build")
    header = (out / "kv_cache_decode.h").read_text()
    assert f"#define OI_KV_CACHE_DECODE_CONTEXT_BYTES {fp.context}u" in header
    assert f"#define OI_KV_CACHE_DECODE_ARENA_BYTES {fp.arena}u" in header
    assert 0 < fp.stack < 4096 and fp.code > 1000 and fp.data < 64      # b_staticpic=false: tables stay in flash
    assert fp.flash == fp.code + fp.rodata + fp.data and fp.ram == fp.data + fp.bss + fp.context + fp.arena \
        + fp.persistent + fp.stack
    assert f"stack, worst case (create_in, step)  {fp.stack:>9,} B" in printed and f"{fp.ram:,} B" in printed
