"""`openinfer gen --emit triton` without a server: the repository's layout and configuration for
each kind of graph, what model.py may import, refusals, and a second run that changes nothing."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from openinfer.errors import SynthesisError
from openinfer.triton import ServingOptions, config_text

from .conftest import EXAMPLES, REPO, emit_triton, example_model

MODEL_PY = REPO / "templates" / "triton" / "model.py"


def _manifest(vars_, sizes=()):
    return {"device": "x86-64 portable C", "sizes": [{"name": n, "min": 1, "max": m} for n, m in sizes],
            "vars": [{"id": k, "name": n, "kind": kind, "dtype": dt, "shape": list(shape), "gettable": True,
                      **({"dims": list(dims)} if dims else {})}
                     for k, (n, kind, dt, shape, dims) in enumerate(vars_)]}


def test_model_py_imports_only_numpy_ctypes_and_the_standard_library():
    tree = ast.parse(MODEL_PY.read_text())
    imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    third_party = imported - set(sys.stdlib_module_names)
    assert third_party == {"numpy", "triton_python_backend_utils"}
    assert "ctypes" in imported


def test_a_leading_dynamic_size_on_every_tensor_batches():
    m = _manifest([("x", "dynamic", "f32", (8, 5), ("B", 5)), ("y", "volatile", "i64", (8, 3, 7), ("B", 3, "S"))],
                  [("B", 8), ("S", 7)])
    text = config_text("g", m, "g.oig", ServingOptions())
    assert "max_batch_size: 8" in text and "dynamic_batching { }" in text
    assert 'name: "x" data_type: TYPE_FP32 dims: [ 5 ]' in text
    assert 'name: "y" data_type: TYPE_INT64 dims: [ 3, -1 ]' in text
    assert "sequence_batching" not in text


def test_no_common_leading_size_keeps_full_dims_without_batching():
    m = _manifest([("x", "dynamic", "f32", (8, 5), ("B", 5)), ("y", "volatile", "f32", (5,), None)], [("B", 8)])
    text = config_text("g", m, "g.oig", ServingOptions())
    assert "max_batch_size: 0" in text and "dynamic_batching" not in text
    assert 'name: "x" data_type: TYPE_FP32 dims: [ -1, 5 ]' in text


def test_state_takes_the_sequence_batcher_with_its_slots_and_idle_time():
    m = _manifest([("x", "dynamic", "f32", (8, 5), ("B", 5)), ("y", "volatile", "f32", (8, 5), ("B", 5)),
                   ("W", "persistent", "f32", (5,), None)], [("B", 8)])
    text = config_text("g", m, "g.oig", ServingOptions(sequences=6, sequence_idle_s=2.5, instances=2))
    assert "max_batch_size: 0" in text and "dynamic_batching" not in text
    assert "oldest { max_candidate_sequences: 6 }" in text and "max_sequence_idle_microseconds: 2500000" in text
    assert "instance_group [ { count: 2 kind: KIND_CPU } ]" in text
    for control in ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_CORRID"):
        assert control in text


def test_a_type_triton_cannot_carry_is_refused_by_name():
    m = _manifest([("x", "dynamic", "bf16", (4,), None), ("y", "volatile", "f32", (4,), None)])
    with pytest.raises(SynthesisError, match="`x` is bf16, which Triton cannot carry"):
        config_text("g", m, "g.oig", ServingOptions())


def test_a_second_run_changes_nothing_and_bad_options_are_refused(tmp_path):
    model = example_model(tmp_path, "mlp_regression")
    repo = tmp_path / "repo"
    emit_triton(EXAMPLES / "mlp_regression.oig", model, repo, "--dynamic", "B=16")
    files = sorted(p for p in (repo / "mlp_regression").rglob("*") if p.is_file() and "build" not in p.parts)
    stamps = {p: p.stat().st_mtime_ns for p in files}
    names = {p.relative_to(repo).as_posix() for p in files}
    assert {"mlp_regression/config.pbtxt", "mlp_regression/1/model.py", "mlp_regression/1/libmlp_regression.so",
            "mlp_regression/1/mlp_regression.json", "mlp_regression/1/mlp_regression.oinf",
            "mlp_regression/project/meson.build"} <= names
    run = subprocess.run([sys.executable, "-m", "openinfer", "gen", str(EXAMPLES / "mlp_regression.oig"), "-m",
                          str(model), "--arch", "x86_64-generic", "--dynamic", "B=16", "--emit", "triton", "-o",
                          str(repo)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0 and "(0 files changed)" in run.stdout
    assert {p: p.stat().st_mtime_ns for p in files} == stamps
    bad = subprocess.run([sys.executable, "-m", "openinfer", "gen", str(EXAMPLES / "mlp_regression.oig"), "-m",
                          str(model), "--arch", "x86_64-generic", "--emit", "triton", "-o", str(tmp_path / "r2"),
                          "--triton-sequences", "0"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode != 0 and "--triton-sequences 0: at least 1" in bad.stderr
    assert not (tmp_path / "r2").exists()
