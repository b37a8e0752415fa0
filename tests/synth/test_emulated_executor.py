"""The simulator's executor on a program of another architecture, running under QEMU in a child
process (openinfer/emulate.py): the same API as in this process. The program stays alive across
steps (persistent tables, scalars and sizes carry over), dynamic sizes are set and read, every
observable variable is fetched, reset() starts over, traces and the per-node observer (bisect)
work, bind() is refused with a reason; create() refuses an Armv8.2-A build on an Armv8.0 CPU; a
missing cross compiler or emulator is one line naming the Debian packages."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))
import dynamic_cases as dc  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.bisect import bisect  # noqa: E402
from openinfer.cross import is_foreign  # noqa: E402
from openinfer.emulate import unavailable  # noqa: E402
from openinfer.errors import ExecutionError, SimulationError  # noqa: E402
from openinfer.inputs import random_inputs  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.targets import devices  # noqa: E402

REPO = HERE.parents[1]
#: four threads: the HAL's pool runs under the emulator too
ARCH = "aarch64-neon"
#: on an AArch64 machine nothing is emulated (the simulator loads the library as on x86-64)
NATIVE = not is_foreign(devices.load(ARCH))
emulated = pytest.mark.skipif(NATIVE or unavailable(devices.load(ARCH)) is not None,
                              reason="aarch64 runs natively here" if NATIVE else str(unavailable(devices.load(ARCH))))


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("emulated-cache")))
        yield


@pytest.fixture(scope="module")
def kv(example_models):
    """kv_cache_decode (a persistent table, a persistent counter) built once for ARCH."""
    model = oi.ModelLoader.open(example_models / "kv_cache_decode.oinf")
    graph = oi.load_graph(REPO / "examples" / "kv_cache_decode.oig")
    return model, graph, Simulator(model, graph, arch=ARCH)


@emulated
def test_state_carries_across_steps_and_reset_starts_over(kv):
    model, graph, sim = kv
    assert sim.emulation is not None and sim.library.name == "kv_cache_decode_runner"
    ex, ref = sim.make_executor(), Reference(model, graph).make_executor()
    observable = [v.name for v in sim.program.vars if v.gettable]
    assert "t" in observable                  # a persistent variable
    for step in range(6):                     # past the table's 4 rows: it wraps as on the host
        if step == 4:
            ex.reset()
            ref.reset()
        feed = random_inputs(ref.bound, 3, step)
        for e in (ex, ref):
            e.insert(**feed)
            e.run_step()
        for name in observable:
            np.testing.assert_allclose(ex.fetch(name), ref.fetch(name), rtol=1e-6, err_msg=f"{name}, step {step}")
    assert int(ex.fetch("t")) == 2


@emulated
def test_trace_and_bisect(kv):
    model, graph, sim = kv
    traced = Simulator(model, graph, arch=ARCH, trace=True).make_executor()
    ref = Reference(model, graph).make_executor()
    feed = random_inputs(ref.bound, 5, 0)
    traced.insert(**feed)
    ref.insert(**feed)
    events = list(traced.iterate())
    assert [e.node_index for e in events] == [e.node_index for e in ref.iterate()]
    assert all(e.block_name == "entry" for e in events) and traced.trace() == events
    report = bisect(sim.bound, sim, seed=1, step=2)      # fetches inside the step, node by node
    assert report.first is None and report.nodes_compared == len(events) - 1     # all but `return`


@emulated
def test_bind_is_refused(kv):
    ex = kv[2].make_executor()
    with pytest.raises(ExecutionError, match="bind\\(\\) is not available under emulation"):
        ex.bind("q", np.zeros(16, np.float32))


@emulated
def test_dynamic_sizes(tmp_path):
    """Sizes set by the host and by the program (a read's bound), out-of-range sizes and stale
    inputs: the scenarios of tests/dynamic_cases.py, under emulation."""
    mlp = dc.write_mlp_model(tmp_path / "mlp.oinf")
    dc.mlp_batch(ARCH, mlp)
    dc.errors_and_stale_inputs(ARCH, mlp)
    dc.read_sets_size(ARCH, tmp_path)


# ------------------------------------------------------------------------------ the CPU check

@pytest.fixture(scope="module")
def v82(example_models):
    model = oi.ModelLoader.open(example_models / "mlp_regression.oinf")
    return Simulator(model, oi.load_graph(REPO / "examples" / "mlp_regression.oig"), arch="aarch64-v82")


def _create_status(sim: Simulator, cpu: str) -> int:
    """The status of create() as the runner reports it under `qemu-aarch64 -cpu CPU` (without
    OI_HOST_ISA, which caps this machine's CPU, as the simulator starts it)."""
    env = {k: v for k, v in os.environ.items() if k != "OI_HOST_ISA"}
    run = subprocess.run([sim.emulation.emulator, "-cpu", cpu, str(sim.library), str(sim.model.path)],
                         input=b"", capture_output=True, timeout=60, env=env)
    assert run.stdout[:1] == b"r", run.stderr
    return struct.unpack("<i", run.stdout[5:9])[0]


@emulated
def test_an_armv82_build_is_refused_by_an_armv80_cpu(v82, monkeypatch):
    """create() returns OI_ERR_UNSUPPORTED_CPU on a Cortex-A53 (no dot product, no f16 arithmetic)
    instead of faulting, and runs on QEMU's `max` CPU."""
    assert _create_status(v82, "cortex-a53") == 12
    assert _create_status(v82, "max") == 0
    monkeypatch.setenv("QEMU_CPU", "cortex-a53")
    with pytest.raises(SimulationError, match=r"create failed: this CPU lacks an instruction-set extension .* "
                                              r"lacks asimddp fphp asimdhp \(the CPU qemu-aarch64 emulates: "
                                              r"QEMU_CPU=cortex-a53\)"):
        v82.make_executor()
    monkeypatch.setenv("QEMU_CPU", "cortex-a76")
    ex = v82.make_executor()
    ex.insert(x=np.ones((4, 16), np.float32))
    ex.run_step()
    assert ex.fetch("y").shape == (4, 8)


# ------------------------------------------------------------------------------ missing tools

def _descriptor(**toolchain) -> devices.Device:
    doc = json.loads((REPO / "devices" / "aarch64-generic.json").read_text())
    doc["toolchain"].update(toolchain)
    return devices.Device(doc)


PACKAGES = r"\(Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user\)"


@pytest.mark.skipif(NATIVE, reason="aarch64 runs natively here: no cross tools are needed")
@pytest.mark.parametrize(("toolchain", "cc", "message"), [
    ({"compiler": "no-such-aarch64-gcc"}, None, "the cross compiler `no-such-aarch64-gcc` is not installed"),
    ({}, "no-such-cc", "the cross compiler `no-such-cc` is not installed"),       # CC replaces it
    ({"emulator": "qemu-no-such"}, None, "the emulator `qemu-no-such` is not installed"),
    # a CC left set for native builds: the host compiler is refused before meson runs it
    ({}, "gcc", r"`gcc` builds for x86_64-linux-gnu, not aarch64-linux-gnu \(CC, when set, is the compiler of "
                r"cross builds too: unset it or name a cross compiler\)"),
])
def test_a_missing_tool_is_one_line_naming_the_packages(example_models, monkeypatch, toolchain, cc, message):
    if cc is None:
        monkeypatch.delenv("CC", raising=False)
    else:
        monkeypatch.setenv("CC", cc)
    with pytest.raises(SimulationError, match=f"^cannot build and run code for AArch64 portable C .* on this "
                                              f"\\w+ machine: {message} {PACKAGES}$"):
        Simulator(example_models / "mlp_regression.oinf", REPO / "examples" / "mlp_regression.oig",
                  arch=_descriptor(**toolchain))


@pytest.mark.skipif(NATIVE, reason="aarch64 runs natively here: no cross tools are needed")
def test_the_sim_command_prints_it_as_one_line(example_models, tmp_path, capsys):
    from openinfer.cli import main

    desc = tmp_path / "arm.json"
    desc.write_text(json.dumps(_descriptor(compiler="no-such-aarch64-gcc").doc))
    assert main(["sim", str(REPO / "examples" / "mlp_regression.oig"), "--model",
                 str(example_models / "mlp_regression.oinf"), "--arch", str(desc)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("openinfer: error: cannot build and run code for")
    assert "gcc-aarch64-linux-gnu" in err[0]


def test_a_runner_that_stops_answering_is_stopped(monkeypatch):
    """A reply later than OI_EMULATION_TIMEOUT: the runner is killed and the call fails with the
    variable that sets the limit, instead of blocking for ever (here a "runner" that only sleeps)."""
    from openinfer.emulate import EmulatedLink

    monkeypatch.setenv("OI_EMULATION_TIMEOUT", "0.5")
    link = EmulatedLink(["sh", "-c", "sleep 30"])
    started = time.monotonic()
    with pytest.raises(SimulationError, match=r"did not answer within 0\.5 s and was stopped "
                                              r"\(OI_EMULATION_TIMEOUT sets the limit\)"):
        link.create()
    assert time.monotonic() - started < 10
    monkeypatch.setenv("OI_EMULATION_TIMEOUT", "soon")
    with pytest.raises(SimulationError, match="OI_EMULATION_TIMEOUT='soon': give the seconds"):
        EmulatedLink(["true"])
