"""Code for an ISA the CPU lacks never runs: the descriptor check in Python (Simulator, sim), the
HAL's cpuid check in every generated create(), and OI_HOST_ISA, which makes both answer as a
smaller CPU would (the suite runs under OI_HOST_ISA=avx2 and =generic as well as natively)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.errors import DeviceError, SimulationError
from openinfer.resources import hal_dir, hal_sources
from openinfer.synthesizer import Synthesizer
from openinfer.targets import devices, isa

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 ISA checks")

GRAPH = """dynamic { x: f32[3, 40]; }
constant { w: f32[40, 24]; }
volatile { y: f32[3, 24]; }
block entry {
  op matmul(x, w) >> y;
  op relu(y) >> y;
  return;
}
"""


def _cpuinfo_features() -> set[str]:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return {f.replace("sse4_2", "sse4.2") for f in flags}


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.oinf"
    oi.write_oinf(path, {"w": np.random.default_rng(0).standard_normal((40, 24)).astype(np.float32)})
    return path


# ------------------------------------------------------------------------------ Python side

def test_host_isa_caps_what_the_host_has(monkeypatch):
    monkeypatch.delenv("OI_HOST_ISA", raising=False)
    native = devices.host_features()
    assert native == frozenset(isa.FEATURE) & _cpuinfo_features()
    monkeypatch.setenv("OI_HOST_ISA", "avx2")
    assert devices.host_features() == native - {f for f in native if f.startswith("avx512")}
    assert devices.best_host_target() == ("x86_64-avx2" if {"avx2", "fma", "f16c", "avx"} <= native
                                          else "x86_64-generic")
    assert devices.load("x86_64-avx512").missing_on_host() == ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
    monkeypatch.setenv("OI_HOST_ISA", "generic")
    assert devices.host_features() <= {"sse4.2"}
    assert devices.best_host_target() == "x86_64-generic"
    assert devices.load("x86_64-avx2").missing_on_host() == ["avx", "avx2", "fma", "f16c"]
    assert devices.load("x86_64-generic").missing_on_host() == []
    assert devices.load("lavapipe").missing_on_host() == []       # a GPU descriptor runs on any host CPU
    monkeypatch.setenv("OI_HOST_ISA", "avx-512")
    with pytest.raises(DeviceError, match="OI_HOST_ISA='avx-512': expected one of avx512, avx2, generic"):
        devices.host_features()


def test_another_architecture_is_missing_whatever_its_features(monkeypatch):
    doc = json.loads((REPO / "devices" / "x86_64-generic.json").read_text())
    doc["device"]["architecture"] = "aarch64"
    assert devices.Device(doc).missing_on_host() == ["architecture aarch64 (this machine is x86_64)"]


def test_simulator_refuses_before_building(model, tmp_path, monkeypatch):
    monkeypatch.setenv("OI_HOST_ISA", "generic")
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(SimulationError, match=r"x86_64-avx2\) on this machine: its CPU lacks avx, avx2, fma, f16c "
                                              r"\(OI_HOST_ISA=generic"):
        oi.Simulator(str(model), oi.graph(GRAPH), arch="x86_64-avx2")
    assert not (tmp_path / "cache").exists()          # nothing was generated or built


def test_sim_command_is_one_error_line(model, tmp_path, capsys, monkeypatch):
    from openinfer.cli import main

    graph = tmp_path / "g.oig"
    graph.write_text(GRAPH)
    monkeypatch.setenv("OI_HOST_ISA", "generic")
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["sim", str(graph), "--model", str(model), "--arch", "x86_64-avx512"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("openinfer: ") and "cannot run code for" in err[-1] and "avx512f" in err[-1]
    assert not any("Traceback" in line for line in err)


# ------------------------------------------------------------------------------ the HAL's cpuid

_FEATURES_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "oi_hal.h"
int main(int argc, char **argv) {
    char missing[256];
    oi_status st = oi_cpu_require(argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 0u, missing, sizeof missing);
    printf("%u %d %s\n", oi_cpu_features(), (int)st, missing);
    return 0;
}
"""


@pytest.fixture(scope="module")
def features_exe(tmp_path_factory) -> Path:
    """A program printing the HAL's view, compiled with AVX-512 flags: the check must run anyway."""
    d = tmp_path_factory.mktemp("cpu")
    (d / "main.c").write_text(_FEATURES_C)
    exe = d / "features"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-mavx2", "-mfma", "-mavx512f",
                    "-mavx512bw", "-I", str(hal_dir() / "include"), str(d / "main.c"),
                    *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    return exe


@pytest.mark.parametrize("cap", ["", "avx512", "avx2", "generic", "bogus"])
def test_hal_cpuid_agrees_with_the_kernel(features_exe, cap, monkeypatch):
    """cpuid + XCR0 in the HAL and /proc/cpuinfo in Python name the same features, under each cap
    (an unknown cap is the HAL's safe side, generic)."""
    env = dict(os.environ, OI_HOST_ISA=cap)
    bits = devices.hal_cpu_bits()
    every = sum(bits.values())
    out = subprocess.run([str(features_exe), str(every)], env=env, capture_output=True, text=True,
                         check=True).stdout.split(" ", 2)
    have = {f.name for f in isa.FEATURES if int(out[0]) & bits[f.hal_bit]}
    monkeypatch.setenv("OI_HOST_ISA", cap if cap != "bogus" else "generic")
    assert have == set(devices.host_features())
    missing = out[2].split()
    assert set(missing) == set(isa.FEATURE) - have
    assert int(out[1]) == (12 if missing else 0)          # OI_ERR_UNSUPPORTED_CPU


_PREFETCH_C = r"""
#include <stdio.h>
#include "oi_hal.h"
int main(void) {
    int first = oi_cpu_stream_prefetch();
    printf("%d %d\n", first, oi_cpu_stream_prefetch());
    return 0;
}
"""


@pytest.mark.parametrize("cap", ["", "avx2", "generic"])
@pytest.mark.parametrize("override", [None, "0", "1", "yes"])
def test_hal_stream_prefetch_policy(tmp_path, cap, override, monkeypatch):
    """oi_cpu_stream_prefetch (the `stream_prefetch: "cpu"` kernels ask it): on for an AMD CPU with
    AVX-512F as OI_HOST_ISA caps it, off for any other; OI_STREAM_PREFETCH=0/1 decides instead
    (another value is ignored); the same answer on every call. Expected from /proc/cpuinfo."""
    (tmp_path / "main.c").write_text(_PREFETCH_C)
    exe = tmp_path / "prefetch"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(hal_dir() / "include"),
                    str(tmp_path / "main.c"), *hal_sources(), "-pthread", "-o", str(exe)],
                   check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OI_HOST_ISA", "OI_STREAM_PREFETCH")}
    env.update({"OI_HOST_ISA": cap} if cap else {})
    env.update({"OI_STREAM_PREFETCH": override} if override else {})
    got = subprocess.run([str(exe)], env=env, capture_output=True, text=True, check=True).stdout.split()
    monkeypatch.setenv("OI_HOST_ISA", cap or "avx512")
    amd = "AuthenticAMD" in Path("/proc/cpuinfo").read_text()
    want = int(override) if override in ("0", "1") else int(amd and "avx512f" in devices.host_features())
    assert got == [str(want)] * 2


_CREATE = """
import cffi, sys
ffi = cffi.FFI()
ffi.cdef("int oi_g_create(const char *, void **); void oi_g_destroy(void *); const char *oi_status_str(int);"
         "int oi_cpu_require(uint32_t, char *, size_t);")
lib = ffi.dlopen(sys.argv[1])
out = ffi.new("void **")
st = lib.oi_g_create(sys.argv[2].encode(), out)
buf = ffi.new("char[]", 128)
lib.oi_cpu_require(int(sys.argv[3]), buf, 128)
print(st, ffi.string(lib.oi_status_str(st)).decode(), "|", ffi.string(buf).decode())
if st == 0:
    lib.oi_g_destroy(out[0])
"""


def test_create_refuses_a_cpu_without_the_kernels_isa(model, tmp_path):
    """A library built for AVX-512 (or AVX2) returns OI_ERR_UNSUPPORTED_CPU from create() where
    the CPU (as OI_HOST_ISA caps it) lacks that ISA, instead of dying with SIGILL; and creates
    where it has it. The process loading the library is never asked to run a wider kernel."""
    from openinfer.build import build, library_path

    results = {}
    for arch in ("x86_64-avx512", "x86_64-avx2"):
        plan = Synthesizer.from_arch(arch).synthesize(str(model), oi.graph(GRAPH), name="g")
        plan.emit(tmp_path / arch)
        build(tmp_path / arch)
        lib = library_path(tmp_path / arch / "build", "g")
        mask = devices.load(arch).cpu_feature_mask
        for cap in ("", "avx2", "generic"):
            run = subprocess.run([sys.executable, "-c", _CREATE, str(lib), str(model), str(mask)],
                                 env=dict(os.environ, OI_HOST_ISA=cap), capture_output=True, text=True, timeout=60)
            assert run.returncode == 0, run.stderr            # no SIGILL, whatever the CPU
            status, rest = run.stdout.split(" ", 1)
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("OI_HOST_ISA", cap)
                missing = devices.load(arch).missing_on_host()
            results[arch, cap] = status
            if missing:
                assert status == "12" and "lacks an instruction-set extension" in rest
                assert rest.split("|")[1].split() == missing
            else:
                assert status == "0", rest
    assert results["x86_64-avx512", "generic"] == results["x86_64-avx2", "generic"] == "12"
    assert results["x86_64-avx512", "avx2"] == "12"
