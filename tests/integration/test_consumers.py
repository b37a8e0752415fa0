"""OpenInfer inside users' builds, for real: the meson subproject consumer and the Makefile
consumer build, rebuild nothing when nothing changed, regenerate when the graph or the device
descriptor changes, and their programs print what the reference computes; cross-built for AArch64,
they print it under QEMU (the meson consumer's cross build with OI_SLOW=1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from openinfer.cross import is_foreign
from openinfer.emulate import unavailable
from openinfer.reference.executor import Reference
from openinfer.targets.devices import best_host_target
from openinfer.targets.devices import load as load_device

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def env() -> dict:
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def sh(argv, cwd, **extra_env) -> str:
    """Run `argv` in `cwd` with `extra_env` (a None value removes the variable)."""
    merged = {k: v for k, v in dict(env(), **extra_env).items() if v is not None}
    run = subprocess.run(argv, cwd=cwd, env=merged, capture_output=True, text=True)
    assert run.returncode == 0, f"{argv} failed:\n{run.stdout}\n{run.stderr}"
    return run.stdout + run.stderr


def expected_rows(example) -> list[list[float]]:
    """What main.c prints: y[0, :] for its four deterministic input batches, from the reference."""
    model, graph = example("mlp_regression")
    ex = Reference(model, graph).make_executor()
    rows = []
    for step in range(4):
        i = np.arange(64)
        x = (((i * 37 + step * 11) % 23 - 11).astype(np.float32) / np.float32(11.0)).reshape(4, 16)
        ex.insert(x=x)
        ex.run_step()
        rows.append(ex.fetch("y")[0].tolist())
    return rows


def check_output(text: str, rows) -> None:
    got = [[float(v) for v in line.split("=")[1].split()] for line in text.splitlines() if line.startswith("step")]
    np.testing.assert_allclose(np.array(got), np.array(rows), rtol=1e-4, atol=1e-5)


def touch(path: Path, newer_than: Path) -> None:
    """Make `path` newer than everything under `newer_than` (but not in the future: file system
    timestamps can be coarser than the time between two builds)."""
    latest = max(p.stat().st_mtime_ns for p in newer_than.rglob("*") if p.is_file())
    stamp = latest + 1_000_000
    while time.time_ns() <= stamp:
        time.sleep(0.005)
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def workspace(tmp_path):
    """A copy of examples/ with the consumer's subproject linked to this checkout."""
    ws = tmp_path / "examples"
    ws.mkdir()
    shutil.copy(REPO / "examples" / "mlp_regression.oig", ws)
    for name in ("meson-consumer", "make-consumer", "mcu-firmware"):
        shutil.copytree(REPO / "examples" / name, ws / name, symlinks=True)
    link = ws / "meson-consumer" / "subprojects" / "openinfer"
    link.unlink()
    link.symlink_to(REPO, target_is_directory=True)
    return ws


def test_meson_subproject_consumer(workspace, example_models, example):
    proj = workspace / "meson-consumer"
    model = example_models / "mlp_regression.oinf"
    vulkan = shutil.which("glslc") is not None and Path("/usr/include/vulkan/vulkan.h").exists()
    arch = REPO / "devices" / f"{best_host_target()}.json"     # the examples' default is AVX2
    sh(["meson", "setup", "build", f"-Dmodel={model}", f"-Darch={arch}",
        f"-Dvulkan={'enabled' if vulkan else 'disabled'}"], proj)
    first = sh(["ninja", "-C", "build"], proj)
    assert "Generating mlp_regression" in first
    check_output(sh([str(proj / "build" / "mlp_demo"), str(model)], proj), expected_rows(example))
    if vulkan:   # the same main.c on a Vulkan device (lavapipe here), validation layer on
        run = subprocess.run([str(proj / "build" / "vulkan" / "mlp_demo_vulkan"), str(model)], cwd=proj,
                             env=dict(env(), OI_VK_VALIDATION="1"), capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "[vulkan validation]" not in run.stderr
        check_output(run.stdout, expected_rows(example))

    assert "no work to do" in sh(["ninja", "-C", "build"], proj)

    touch(workspace / "mlp_regression.oig", proj / "build")
    after_touch = sh(["ninja", "-C", "build"], proj)
    assert "Generating mlp_regression" in after_touch
    assert "oi_hal.c" not in after_touch              # the HAL is not the model's: it is not rebuilt
    assert "no work to do" in sh(["ninja", "-C", "build"], proj)

    device = workspace / "device.json"
    shutil.copy(arch, device)
    sh(["meson", "configure", "build", f"-Darch={device}"], proj)
    assert "Generating mlp_regression" in sh(["ninja", "-C", "build"], proj)
    device.write_text(device.read_text().replace('"threads": 2', '"threads": 1'))
    assert "Generating mlp_regression" in sh(["ninja", "-C", "build"], proj)
    check_output(sh([str(proj / "build" / "mlp_demo"), str(model)], proj), expected_rows(example))


def test_makefile_consumer(workspace, example_models, example):
    proj = workspace / "make-consumer"
    model = example_models / "mlp_regression.oinf"
    # OUT named too: the Makefile's `OUT ?= build` would take an OUT from the environment
    make = ["make", f"MODEL={model}", "OPENINFER=openinfer", f"ARCH={best_host_target()}", "OUT=build"]
    first = sh(make, proj)
    assert "openinfer gen" in first
    check_output(sh([str(proj / "build" / "mlp_demo"), str(model)], proj), expected_rows(example))
    assert "is up to date" in sh(make, proj)
    touch(workspace / "mlp_regression.oig", proj / "build")
    assert "openinfer gen" in sh(make, proj)
    assert "is up to date" in sh(make, proj)
    # the depfile lists the device descriptor and the templates: changing a template regenerates
    dep = (proj / "build" / "mlp_regression.d").read_text()
    assert f"{best_host_target()}.json" in dep and "model.c.j2" in dep and "oi_hal.c" in dep


def _cross_problem() -> str | None:
    """Why the consumers cannot be cross-built for AArch64 and run under QEMU here, or None."""
    device = load_device("aarch64-neon")
    return "this machine builds AArch64 natively" if not is_foreign(device) else unavailable(device)


def test_makefile_consumer_cross_builds_for_aarch64(workspace, example_models, example):
    """The documented `CC=aarch64-linux-gnu-gcc LDFLAGS=-static make ... ARCH=aarch64-neon`, run
    under QEMU."""
    problem = _cross_problem()
    if problem:
        pytest.skip(problem)
    proj = workspace / "make-consumer"
    model = example_models / "mlp_regression.oinf"
    sh(["make", f"MODEL={model}", "OPENINFER=openinfer", "ARCH=aarch64-neon", "OUT=build"], proj,
       CC="aarch64-linux-gnu-gcc", LDFLAGS="-static")
    emulator = load_device("aarch64-neon").toolchain.emulator
    # OI_HOST_ISA caps this machine's features, not the emulated CPU's (the simulator leaves it out too)
    check_output(sh([emulator, str(proj / "build" / "mlp_demo"), str(model)], proj, OI_HOST_ISA=None),
                 expected_rows(example))


@pytest.mark.skipif(os.environ.get("OI_SLOW") != "1", reason="OI_SLOW=1: the Makefile consumer's cross build "
                    "covers the default suite")
def test_meson_subproject_consumer_cross_builds_for_aarch64(workspace, example_models, example):
    """The meson consumer configured with the cross file `openinfer devices cross-file` prints
    (linked statically, so that QEMU needs no target libraries)."""
    problem = _cross_problem()
    if problem:
        pytest.skip(problem)
    proj = workspace / "meson-consumer"
    model = example_models / "mlp_regression.oinf"
    sh(["openinfer", "devices", "cross-file", "aarch64-neon", "-o", "aarch64.ini"], proj)
    sh(["meson", "setup", "build-arm", "--cross-file", "aarch64.ini", f"-Dmodel={model}",
        f"-Darch={REPO / 'devices' / 'aarch64-neon.json'}", "-Dvulkan=disabled", "-Dc_link_args=-static"], proj)
    sh(["ninja", "-C", "build-arm"], proj)
    emulator = load_device("aarch64-neon").toolchain.emulator
    check_output(sh([emulator, str(proj / "build-arm" / "mlp_demo"), str(model)], proj, OI_HOST_ISA=None),
                 expected_rows(example))


def test_configuring_the_example_in_place_leaves_the_checkout_clean(tmp_path, example_models):
    """`meson setup` of examples/meson-consumer where it stands (the build directory elsewhere)
    writes meson's lock into its subprojects/: `git status` of the checkout must not change."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    proj = REPO / "examples" / "meson-consumer"
    lock = proj / "subprojects" / ".wraplock"
    had_lock = lock.exists()

    def status() -> str:
        return sh(["git", "status", "--porcelain", "--untracked-files=all", "--", "examples"], REPO)

    before = status()
    try:
        sh(["meson", "setup", str(tmp_path / "build"), f"-Dmodel={example_models / 'mlp_regression.oinf'}",
            "-Dvulkan=disabled"], proj)
        assert status() == before
    finally:
        if not had_lock:
            lock.unlink(missing_ok=True)


def test_microcontroller_firmware_example(workspace, example_models, example):
    """examples/mcu-firmware: the model synthesized for a Cortex-M4 with its weights embedded,
    linked into a firmware with the example's start-up code and linker script, booted under QEMU:
    it prints the rows the host consumers print."""
    problem = unavailable(load_device("cortex-m4"))
    if problem:
        pytest.skip(problem)
    proj = workspace / "mcu-firmware"
    model = example_models / "mlp_regression.oinf"
    make = ["make", f"MODEL={model}", "OPENINFER=openinfer", "OUT=build"]
    assert "openinfer gen" in sh(make, proj)
    check_output(sh([*make, "run"], proj), expected_rows(example))
    assert "is up to date" in sh(make, proj)
