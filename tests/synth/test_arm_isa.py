"""Arm in the ISA table, the HAL and the project files: the HAL reads the CPU's features from
Linux's HWCAP on AArch64 (checked under QEMU's CPU models) and caps them by OI_HOST_ISA; an Arm
machine's /proc/cpuinfo picks the Arm descriptors (simulated here: an x86-64 machine answers as one
when told to); `openinfer gen` writes a meson cross file exactly for a descriptor of another
architecture, and `openinfer build` takes CC over its compiler."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.cross import CROSS_FILE, cross_file_text
from openinfer.emulate import unavailable
from openinfer.errors import DeviceError
from openinfer.resources import hal_dir, hal_sources
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices, isa

REPO = Path(__file__).resolve().parents[2]

GRAPH = """dynamic { x: f32[3, 8]; }
constant { w: f32[8, 4]; }
volatile { y: f32[3, 4]; }
block entry { op matmul(x, w) >> y; op relu(y) >> y; return; }
"""

#: /proc/cpuinfo of a Cortex-A76 (Armv8.2-A: dot product, f16 arithmetic) and of a Cortex-A53
A76 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU part\t: 0xd0b
"""
A53 = A76.replace("atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp", "cpuid").replace("0xd0b", "0xd03")
V82 = frozenset({"asimd", "asimddp", "fphp", "asimdhp"})


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "m.oinf"
    oi.write_oinf(path, {"w": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)})
    return path


@pytest.fixture
def arm_host(monkeypatch):
    """This machine answers as an Arm one: arm_host(machine, cpuinfo)."""
    monkeypatch.delenv("OI_HOST_ISA", raising=False)

    def become(machine: str, cpuinfo: str = "") -> None:
        monkeypatch.setattr(platform, "machine", lambda: machine)
        monkeypatch.setattr(devices, "_cpuinfo", lambda: cpuinfo)
    return become


# ------------------------------------------------------------------------------ the table

def test_architectures_name_their_portable_descriptors():
    for arch in isa.ARCHITECTURES:
        dev = devices.load(arch.portable)
        # (Armv7E-M's and Armv8-M's scalar kernels and Armv8.1-M's Helium ones are families of
        # their own: the Cortex-M wing's)
        mcu = {"armv7e-m": "cortex-m", "armv8-m": "cortex-m-v8m", "armv8.1-m": "helium"}
        assert dev.architecture == arch.name and dev.isa == mcu.get(arch.name, "generic")
        assert dev.bare_metal == arch.bare_metal == (not arch.machines)     # a microcontroller is never a host
        if arch.machines:
            assert isa.architecture_of_machine(arch.machines[0]) == arch.name
    assert {f.architecture for f in isa.FAMILIES} <= {isa.ANY, *isa.ARCHITECTURE}
    for name in ("aarch64-generic", "aarch64-neon", "aarch64-v82", "armv7-generic"):
        dev = devices.load(name)
        assert dev.toolchain is not None and dev.toolchain.emulator.startswith("qemu-")
        assert "qemu-user" in dev.toolchain.packages
    assert devices.load("aarch64-neon").isa == "neon" and devices.load("aarch64-v82").isa == "v82"
    assert devices.load("aarch64-v82").cpu_feature_macros == ("OI_CPU_ASIMD", "OI_CPU_ASIMDDP", "OI_CPU_FPHP",
                                                              "OI_CPU_ASIMDHP")


def test_a_toolchain_is_a_cpu_field():
    doc = json.loads((REPO / "devices" / "lavapipe.json").read_text())
    doc["toolchain"] = {"triple": "x", "compiler": "x-gcc", "emulator": "qemu-x"}
    with pytest.raises(DeviceError, match="toolchain: not a field of a gpu device"):
        devices.validate(doc)
    doc = json.loads((REPO / "devices" / "aarch64-neon.json").read_text())
    del doc["toolchain"]["emulator"]
    with pytest.raises(DeviceError, match="toolchain.emulator: required field is missing"):
        devices.validate(doc)


# ------------------------------------------------------------------------------ an Arm host

def test_an_armv82_host_picks_the_v82_descriptor(arm_host, monkeypatch):
    arm_host("aarch64", A76)
    assert devices.host_architecture() == "aarch64"
    assert devices.host_features() == V82
    assert devices.best_host_target() == "aarch64-v82"
    assert devices.load("aarch64-v82").missing_on_host() == []
    assert devices.load("x86_64-generic").missing_on_host() == ["architecture x86_64 (this machine is aarch64)"]
    monkeypatch.setenv("OI_HOST_ISA", "neon")
    assert devices.host_features() == {"asimd"}
    assert devices.best_host_target() == "aarch64-neon"
    monkeypatch.setenv("OI_HOST_ISA", "generic")
    assert devices.best_host_target() == "aarch64-generic"
    monkeypatch.setenv("OI_HOST_ISA", "avx2")           # another architecture's family means nothing here
    with pytest.raises(DeviceError, match="OI_HOST_ISA='avx2': expected one of v82, neon, generic"):
        devices.host_features()


def test_an_armv80_host_lacks_the_v82_features(arm_host):
    arm_host("aarch64", A53)
    assert devices.load("aarch64-v82").missing_on_host() == ["asimddp", "fphp", "asimdhp"]
    assert devices.best_host_target() == "aarch64-neon"


def test_a_32_bit_arm_host_runs_portable_c(arm_host):
    arm_host("armv7l", "Features\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt\n")
    assert devices.host_architecture() == "armv7"
    assert devices.host_features() == frozenset()
    assert devices.best_host_target() == "armv7-generic"


def test_probe_describes_an_arm_host(arm_host, capsys):
    from openinfer.cli import main

    arm_host("aarch64", A76)
    assert main(["devices", "probe"]) == 0
    doc = json.loads(capsys.readouterr().out.split("# Vulkan device")[0])
    assert doc["device"]["architecture"] == "aarch64"
    assert doc["isa"] == {"features": ["asimd", "asimddp", "fphp", "asimdhp"], "vector_bits": 128}
    assert devices.Device(doc).isa == "v82"


# ------------------------------------------------------------------------------ cross files

def test_gen_writes_a_cross_file_for_another_architecture_only(model, tmp_path, arm_host):
    plans = {arch: Synthesizer.from_arch(arch).synthesize(model, oi.graph(GRAPH), name="g")
             for arch in ("x86_64-generic", "aarch64-neon", "armv7-generic")}
    assert CROSS_FILE not in plans["x86_64-generic"].files
    neon = plans["aarch64-neon"].files[CROSS_FILE].decode()
    assert "c = ['aarch64-linux-gnu-gcc']" in neon and "cpu_family = 'aarch64'" in neon
    assert "cpu_family = 'arm'" in plans["armv7-generic"].files[CROSS_FILE].decode()
    out = tmp_path / "out"
    assert CROSS_FILE in {p.name for p in plans["aarch64-neon"].emit(out)}
    again = Synthesizer.from_arch("aarch64-neon").synthesize(model, oi.graph(GRAPH), name="g")
    assert again.emit(out) == []                       # deterministic: nothing rewritten
    arm_host("aarch64", A76)                           # generated on an Arm machine: native, none
    assert CROSS_FILE not in Synthesizer.from_arch("aarch64-neon").synthesize(model, oi.graph(GRAPH)).files


def test_a_sysroot_reaches_the_compiler():
    doc = json.loads((REPO / "devices" / "aarch64-generic.json").read_text())
    doc["toolchain"]["sysroot"] = "/opt/sysroots/aarch64"
    text = cross_file_text(devices.Device(doc))
    assert "sys_root = '/opt/sysroots/aarch64'" in text and "c_args = ['--sysroot=/opt/sysroots/aarch64']" in text


def test_the_cross_file_command(capsys):
    from openinfer.cli import main

    assert main(["devices", "cross-file", "armv7-generic"]) == 0
    assert capsys.readouterr().out == cross_file_text(devices.load("armv7-generic"))
    assert main(["devices", "cross-file", "x86_64-avx2"]) == 1
    assert "has no `toolchain`" in capsys.readouterr().err


def _elf_machine(path: Path) -> int:
    """e_machine of an ELF file (0xB7 AArch64, 0x28 Arm, 0x3E x86-64)."""
    return int.from_bytes(path.read_bytes()[18:20], "little")


def test_build_takes_cc_over_the_descriptors_compiler(model, tmp_path, monkeypatch):
    """CC replaces the cross file's compiler (a second cross file at meson setup)."""
    problem = unavailable(devices.load("aarch64-generic"))
    if problem:
        pytest.skip(problem)
    from openinfer.build import build

    log = tmp_path / "cc.log"
    wrapper = tmp_path / "my-cc"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec aarch64-linux-gnu-gcc "$@"\n')
    wrapper.chmod(0o755)
    project = tmp_path / "g"
    Synthesizer.from_arch("aarch64-generic").synthesize(model, oi.graph(GRAPH), name="g").emit(project)
    monkeypatch.setenv("CC", str(wrapper))
    out = build(project)
    assert log.exists() and "oi_hal.c" in log.read_text()
    assert _elf_machine(out / "libg.so") == 0xB7


# ------------------------------------------------------------------------------ the HAL under QEMU

_FEATURES_C = r"""
#include <stdio.h>
#include "oi_hal.h"
int main(void) {
    char missing[256];
    oi_status st = oi_cpu_require(OI_CPU_ASIMD | OI_CPU_ASIMDDP | OI_CPU_FPHP | OI_CPU_ASIMDHP, missing,
                                  sizeof missing);
    printf("%u %d %s\n", oi_cpu_features(), (int)st, missing);
    return 0;
}
"""


@pytest.fixture(scope="module")
def aarch64_features(tmp_path_factory) -> Path:
    """The HAL's view on AArch64, compiled for Armv8.2-A: the check must run on an Armv8.0 CPU."""
    problem = unavailable(devices.load("aarch64-v82"))
    if problem:
        pytest.skip(problem)
    d = tmp_path_factory.mktemp("arm-cpu")
    (d / "main.c").write_text(_FEATURES_C)
    exe = d / "features"
    subprocess.run(["aarch64-linux-gnu-gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-march=armv8.2-a+fp16+dotprod", "-static", "-I", str(hal_dir() / "include"), str(d / "main.c"),
                    *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    return exe


@pytest.mark.parametrize(("cpu", "cap", "want"), [
    ("cortex-a53", "", {"asimd"}),
    ("cortex-a72", "", {"asimd"}),
    ("cortex-a76", "", V82),
    ("max", "", V82),
    ("max", "v82", V82),
    ("max", "neon", {"asimd"}),
    ("max", "generic", set()),
    ("max", "bogus", set()),            # an unknown cap is the safe side
])
def test_hal_reads_hwcap(aarch64_features, cpu, cap, want):
    env = dict(os.environ, OI_HOST_ISA=cap)
    out = subprocess.run([devices.load("aarch64-v82").toolchain.emulator, "-cpu", cpu, str(aarch64_features)],
                         env=env, capture_output=True, text=True, check=True).stdout.split(" ", 2)
    bits = devices.hal_cpu_bits()
    assert {f.name for f in isa.FEATURES if int(out[0]) & bits[f.hal_bit]} == want
    assert out[2].split() == [f for f in ("asimd", "asimddp", "fphp", "asimdhp") if f not in want]
    assert int(out[1]) == (12 if want != V82 else 0)         # OI_ERR_UNSUPPORTED_CPU
