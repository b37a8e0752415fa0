"""The ONNX backend node tests shipped inside the `onnx` package, through `openinfer import`.

Every case whose ops the importer supports is imported and run on the reference, compared with
the case's expected outputs at its own tolerances; a few passing cases that together use every
DSL op the imported graphs use also run through the generated C (x86_64-generic; `OI_SLOW=1`:
every passing case). A case the importer
refuses must be refused with its one-line error, and the per-op table in docs/onnx.md must be the
one this run produces (`python tools/onnx_node_table.py` rewrites it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("onnx")

import openinfer as oi  # noqa: E402
from openinfer.onnx import node_tests as nt  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "onnx.md"
SLOW = os.environ.get("OI_SLOW") == "1"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cases = nt.collect_cases()
    supported = nt.supported_cases(cases)
    results = [nt.run_case(c) for c in supported]
    os.environ.setdefault("OI_CACHE_DIR", str(tmp_path_factory.mktemp("sim-cache")))
    c_cases = nt.c_subset(supported, results, every=SLOW)
    c_results = {c.name: nt.run_case(c, generated_c) for c in c_cases}
    return cases, results, c_results


def generated_c(model, graph):
    return oi.Simulator(model, graph, arch="x86_64-generic").make_executor()


def test_supported_cases_pass_on_the_reference(run):
    _, results, _ = run
    assert len(results) >= 150
    failed = [f"{r.name}: {r.detail}" for r in results if r.outcome == nt.FAILED]
    assert failed == []
    assert sum(r.outcome == nt.PASSED for r in results) >= 130


def test_refusals_are_one_clear_line_naming_the_node(run):
    _, results, _ = run
    refused = [r for r in results if r.outcome == nt.REFUSED]
    assert refused
    for r in refused:
        assert r.detail.startswith(("node ", "graph input ", "initializer ")), r
        if r.detail.startswith("node "):
            assert f"({r.ops[0]})" in r.detail or any(f"({op})" in r.detail for op in r.ops), r


def test_generated_c_matches_the_expected_outputs(run):
    _, results, c_results = run
    ran = set().union(*(r.dsl_ops for r in c_results.values()))
    assert ran == set().union(*(r.dsl_ops for r in results if r.outcome == nt.PASSED))
    assert {"conv2d", "max_pool2d", "avg_pool2d", "matmul", "softmax", "clamp", "mean_axis"} <= ran
    failed = [f"{r.name}: {r.detail}" for r in c_results.values() if r.outcome != nt.PASSED]
    assert failed == []


@pytest.mark.skipif(SLOW, reason="the docs table is written from the default run")
def test_docs_table_is_this_run(run):
    cases, results, c_results = run
    text = DOC.read_text()
    start = text.index("<!-- node-table:start -->\n") + len("<!-- node-table:start -->\n")
    assert text[start:text.index("<!-- node-table:end -->")] == nt.tabulate(results, len(cases), c_results), \
        "docs/onnx.md is stale: run `python tools/onnx_node_table.py`"
