"""docs/bring-your-model.md runs as written: every `sh` block, in order, from a folder that looks
like the root of a set-up clone (the repository's `tests/` and `devices/`, and a `.venv/bin` whose
`python` and `openinfer` are this interpreter and this checkout), so the guide's `build/byom/`
lands in a temporary folder. The last block compares the compiled program and the reference with
onnxruntime and fails beyond its tolerance."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "bring-your-model.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.S | re.M)


def _clone_root(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    root.mkdir()
    for name in ("tests", "devices"):
        (root / name).symlink_to(REPO / name)
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    # wrappers, not links: a link to a venv's python leaves the venv (its pyvenv.cfg is beside the link)
    for name, args in (("python", ""), ("openinfer", " -m openinfer")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        script.chmod(0o755)
    return root


def test_the_export_snippet_is_python():
    (snippet,) = _blocks("python")
    compile(snippet, "bring-your-model export", "exec")
    assert "torch.onnx.export" in snippet


@pytest.mark.skipif(shutil.which("cc") is None, reason="the guide compiles a C program with `cc`")
def test_the_guide_runs_verbatim(tmp_path):
    blocks = _blocks("sh")
    assert len(blocks) >= 5
    root = _clone_root(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "OI_CACHE_DIR": str(tmp_path / "cache")}
    outputs = []
    for block in blocks:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, \
            f"guide block failed:\n{block}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        outputs.append(done.stdout)
    byom = root / "build" / "byom"
    assert {"bert.oig", "bert.oinf", "in.npz", "reference.npz", "hidden.f32"} <= {p.name for p in byom.iterdir()}
    graph = (byom / "bert.oig").read_text()
    # the excerpt the guide shows is what the import printed (each op line up to its comment)
    excerpt = re.search(r"^```\n(    // \d+ layers .*?)^```$", GUIDE.read_text(encoding="utf-8"), re.S | re.M)[1]
    shown = [line.split("  //")[0].strip() if " op " in f" {line}" else line.strip()
             for line in excerpt.splitlines() if line.strip() != "..."]
    assert shown and all(line in graph for line in shown), shown
    # the comparison block's own report: both engines within 2e-5 of onnxruntime
    errors = [float(x) for x in re.findall(r"max abs error (\S+)", outputs[-1])]
    assert len(errors) == 2 and max(errors) <= 2e-5
