"""The compiler a build uses is `CC`'s, as meson takes it, and builds are keyed on it: the
simulator's cache entry and `openinfer build`'s configuration change with CC, with the version
of the compiler behind it and with the build options, and stay when none of them does."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.build import build, c_compiler

GRAPH = """
dynamic { x: f32[3, 5]; }
volatile { y: f32[3, 5]; }
block entry { op relu(x) >> y; return; }
"""

needs_clang = pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed (tools/dev.sh)")


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    oi.write_oinf(tmp_path / "m.oinf", {"unused": np.zeros(1, np.float32)})
    return oi.ModelLoader.open(tmp_path / "m.oinf")


def _sim(model, **kw) -> oi.Simulator:
    sim = oi.Simulator(model, oi.graph(GRAPH), arch="x86_64-generic", **kw)
    ex = sim.make_executor()
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
    ex.insert(x=x)
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), np.maximum(x, 0))
    return sim


def _compiler_id(build_dir: Path) -> str:
    info = json.loads((build_dir / "meson-info" / "intro-compilers.json").read_text())
    return info["host"]["c"]["id"]


def _optimization(build_dir: Path) -> str:
    options = json.loads((build_dir / "meson-info" / "intro-buildoptions.json").read_text())
    return next(o["value"] for o in options if o["name"] == "optimization")


@needs_clang
def test_another_cc_builds_another_cache_entry(model, monkeypatch):
    monkeypatch.setenv("CC", "gcc")
    with_gcc = _sim(model)
    monkeypatch.setenv("CC", "clang")
    with_clang = _sim(model)
    assert with_clang.project != with_gcc.project
    assert _compiler_id(with_gcc.project / "build") == "gcc"
    assert _compiler_id(with_clang.project / "build") == "clang"
    built = with_gcc.library.stat().st_mtime_ns
    monkeypatch.setenv("CC", "gcc")
    again = _sim(model)                      # the same CC and options: the entry is reused, not rebuilt
    assert again.project == with_gcc.project and again.library.stat().st_mtime_ns == built


def test_build_options_key_the_cache_entry(model):
    o2, o3 = _sim(model, build_options=["-Doptimization=2"]), _sim(model, build_options=["-Doptimization=3"])
    assert o2.project != o3.project
    assert _optimization(o2.project / "build") == "2" and _optimization(o3.project / "build") == "3"


def _fake_gcc(folder: Path, version: str) -> Path:
    """A compiler that is gcc but says another version on its first line (meson still takes it for
    GCC: the lines after the first are gcc's own)."""
    cc = folder / "cc-under-test"
    cc.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "gcc (OpenInfer test {version}) 99.0"; '
                  'gcc --version | tail -n +2; exit 0; fi\nexec gcc "$@"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IXUSR)
    os.utime(cc, ns=(cc.stat().st_mtime_ns + 10**9, cc.stat().st_mtime_ns + 10**9))  # a new mtime: asked again
    return cc


def test_a_new_compiler_version_rebuilds(model, tmp_path, monkeypatch):
    cc = _fake_gcc(tmp_path, "1")
    monkeypatch.setenv("CC", str(cc))
    assert c_compiler().version.startswith("gcc (OpenInfer test 1)")
    first = _sim(model)
    _fake_gcc(tmp_path, "2")
    assert c_compiler().version.startswith("gcc (OpenInfer test 2)")
    second = _sim(model)
    assert second.project != first.project


@needs_clang
def test_openinfer_build_configures_afresh_for_another_cc(model, tmp_path, monkeypatch):
    from openinfer.synthesizer import Synthesizer

    Synthesizer.from_arch("x86_64-generic").synthesize(model, oi.graph(GRAPH)).emit(tmp_path / "out")
    monkeypatch.setenv("CC", "gcc")
    out = build(tmp_path / "out", options=["-Doptimization=2"])
    assert _compiler_id(out) == "gcc" and _optimization(out) == "2"
    monkeypatch.setenv("CC", "clang")
    out = build(tmp_path / "out", options=["-Doptimization=2"])
    assert _compiler_id(out) == "clang"
    linked = next(out.glob("lib*.so")).stat().st_mtime_ns
    build(tmp_path / "out", options=["-Doptimization=2"])       # nothing changed: nothing configured or linked
    assert next(out.glob("lib*.so")).stat().st_mtime_ns == linked
    out = build(tmp_path / "out", options=["-Doptimization=3"])
    assert _compiler_id(out) == "clang" and _optimization(out) == "3"
