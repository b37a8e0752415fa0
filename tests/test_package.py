"""`pip install .` gives a working `openinfer` whose templates/, hal/ and devices/ live inside the
installed package (no source tree needed)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.environ.get("OI_SKIP_PACKAGE_TEST") == "1", reason="OI_SKIP_PACKAGE_TEST=1")
def test_wheel_install_is_self_contained(tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(REPO)], check=True, cwd=tmp_path)
    pkg = target / "openinfer"
    for rel in ("templates/c/model.c.j2", "templates/c/meson.build.j2", "hal/include/oi_hal.h",
                "hal/src/oi_hal_core.c", "hal/src/oi_hal.c", "hal/src/oi_hal_baremetal.c", "devices/schema.json",
                "devices/ada_mock.json", "ops/ops.yaml",
                "reference/kernels/elementwise.py", "targets/c/kernels/elementwise.py"):
        assert (pkg / rel).is_file(), f"{rel} missing from the installed package"
    env = dict(os.environ, PYTHONPATH=str(target))
    probe = subprocess.run([sys.executable, "-c", "import openinfer.resources as r; print(r.templates_dir()); "
                            "print(r.hal_dir()); print(r.devices_dir())"], capture_output=True, text=True, check=True,
                           cwd=tmp_path, env=env)
    for line in probe.stdout.split():
        assert line.startswith(str(pkg)), f"resource resolved outside the installed package: {line}"
    script = target / "bin" / "openinfer"
    out = subprocess.run([sys.executable, str(script), "devices", "list"], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env=env).stdout
    assert "x86_64-avx512" in out


def test_every_package_of_the_source_tree_is_installed():
    """tool.setuptools.packages lists every folder of openinfer/ with an __init__.py (a new target
    wing left out installs without its code: `openinfer devices list` then fails on its descriptors)."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "openinfer").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
