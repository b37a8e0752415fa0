"""The ONNX backend node tests shipped inside the `onnx` package, through `openinfer import`.

Every case whose ops the importer supports is imported and run on the reference, compared with
the case's expected outputs at its own tolerances; a few passing cases that together use every
DSL op (and `branch`, `loop`) the imported graphs use also run through the generated C for the
host's best CPU target (`OI_SLOW=1`: every passing case, on x86_64-generic too). The models of the package's
pytorch-converted and pytorch-operator data folders whose ops are supported run on the reference
the same way. A case the importer
refuses must be refused with its one-line error, and the per-op table in docs/onnx.md must be the
one this run produces (`python tools/onnx_node_table.py` rewrites it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from openinfer.onnx import node_tests as nt  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "onnx.md"
SLOW = os.environ.get("OI_SLOW") == "1"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    os.environ.setdefault("OI_CACHE_DIR", str(tmp_path_factory.mktemp("sim-cache")))
    return nt.run_all(every_c=SLOW)


def test_supported_cases_pass_on_the_reference(run):
    assert len(run.results) >= 150
    failed = {r.name: r.detail for r in run.results if r.outcome == nt.FAILED}
    assert set(failed) == set(nt.EXPLAINED_FAILURES), failed      # every failure explained, none stale
    assert sum(r.outcome == nt.PASSED for r in run.results) >= 130


def test_refusals_are_one_clear_line_naming_the_node(run):
    refused = [r for r in run.results + [r for mine in run.folder_results.values() for r in mine]
               if r.outcome == nt.REFUSED]
    assert refused
    for r in refused:
        detail = re.sub(r"^\d+ nodes cannot be imported: (?=node )", "", r.detail)     # several, on one line
        assert detail.startswith(("node ", "graph input ", "initializer ")), r
        if detail.startswith("node "):
            assert any(f"({op})" in detail for op in r.ops), r


def test_generated_c_matches_the_expected_outputs(run):
    assert len(run.c_results) == (2 if SLOW and best_host_target() != "x86_64-generic" else 1)
    for ran in run.c_results.values():
        assert set().union(*(r.dsl_ops for r in ran.values())) == \
            set().union(*(r.dsl_ops for r in run.results if r.outcome == nt.PASSED))
        assert {"conv2d", "max_pool2d", "avg_pool2d", "matmul", "softmax", "clamp", "mean_axis"} <= \
            set().union(*(r.dsl_ops for r in ran.values()))
    failed = [f"{arch}: {r.name}: {r.detail}" for arch, ran in run.c_results.items() for r in ran.values()
              if r.outcome != nt.PASSED]
    assert failed == []


def test_pytorch_folder_models_pass_on_the_reference(run):
    assert [len(run.folder_cases[k]) for k in nt.FOLDER_KINDS] == [82, 35]
    assert sum(len(v) for v in run.folder_results.values()) >= 100
    failed = [f"{r.name}: {r.detail}" for mine in run.folder_results.values() for r in mine
              if r.outcome == nt.FAILED]
    assert failed == []


@pytest.mark.skipif(SLOW, reason="the docs table is written from the default run")
def test_docs_tables_are_this_run(run):
    stale = "docs/onnx.md is stale: run `python tools/onnx_node_table.py`"
    assert nt.table_in(DOC) == nt.tabulate(run.results, len(run.cases), run.c_results), stale
    assert nt.table_in(DOC, "folder-table") == nt.tabulate_folders(
        run.folder_results, {k: len(v) for k, v in run.folder_cases.items()}), stale
