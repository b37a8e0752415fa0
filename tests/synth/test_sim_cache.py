"""`openinfer cache info` and `openinfer cache clean [--older-than DAYS]`: the simulator's build
cache, which nothing else prunes, shown and pruned by last use; only its entries are removed."""

from __future__ import annotations

import os
import time

import pytest

from openinfer.cli import main
from openinfer.sim import Simulator

GRAPH = "dynamic { x: f32[4]; }\nvolatile { y: f32[4]; }\nblock entry {\n    op add(x, x) >> y;\n    return;\n}\n"
DAY = 86400


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("OI_CACHE_DIR", str(root))
    return root


def _age(path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_info_lists_entries_and_clean_prunes_by_last_use(cache, tmp_path, capsys):
    sim = Simulator(None, GRAPH, arch="x86_64-generic")
    entry = sim.project
    assert entry.parent == cache
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cache: {cache} (OI_CACHE_DIR)\n") and entry.name in out
    assert "\n1 entries, " in out
    # things in the folder that are not entries are shown, never removed: a file, a folder named
    # like an entry without a build's listing, a link named like one to a folder elsewhere
    (cache / "notes.txt").write_text("mine\n")
    (cache / "g-0123456789abcdef").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep\n")
    os.symlink(outside, cache / "h-fedcba9876543210")
    for path in (cache / "g-0123456789abcdef", entry):
        _age(path, 40)

    assert main(["cache", "clean", "--older-than", "50"]) == 0
    assert capsys.readouterr().out == f"removed 0 entries (0.0 MB) from {cache}\n"
    assert entry.is_dir()
    Simulator(None, GRAPH, arch="x86_64-generic")           # a use: the entry is fresh again
    assert main(["cache", "clean", "--older-than", "30"]) == 0
    assert capsys.readouterr().out.startswith("removed 0 entries")
    _age(entry, 40)
    assert main(["cache", "clean", "--older-than", "30"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 entries (")
    assert not entry.exists()
    assert sorted(p.name for p in cache.iterdir()) == ["g-0123456789abcdef", "h-fedcba9876543210", "notes.txt"]
    assert (outside / "keep").read_text() == "keep\n"
    assert main(["cache", "info"]) == 0
    assert "0 entries, 0.0 MB; 3 other item(s) there, not entries (never removed)" in capsys.readouterr().out

    rebuilt = Simulator(None, GRAPH, arch="x86_64-generic")  # the next simulator builds it again
    assert rebuilt.project == entry and rebuilt.library.exists()
    assert main(["cache", "clean"]) == 0                    # every entry, whatever its age
    assert not entry.exists() and (cache / "notes.txt").exists()


def test_clean_refuses_a_negative_age(cache, capsys):
    assert main(["cache", "clean", "--older-than", "-1"]) == 1
    assert capsys.readouterr().err == "openinfer: error: --older-than -1.0: a number of days >= 0\n"


def test_info_on_a_cache_not_created_yet(cache, capsys):
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out == f"cache: {cache} (OI_CACHE_DIR) (not created yet)\n0 entries, 0.0 MB\n"
    assert not cache.exists()
