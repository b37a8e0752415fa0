"""Golden outputs through openinfer.testing (the helper users' suites use): each example's compiled
outputs over three steps are stored in tests/golden/outputs/<name>.oinf and compared within
tolerance; `pytest --update-golden` (or OI_UPDATE_GOLDEN=1) rewrites them."""

from __future__ import annotations

from pathlib import Path

import pytest

from openinfer.inputs import outputs_of, random_inputs
from openinfer.sim import Simulator
from openinfer.targets.devices import best_host_target
from openinfer.testing import assert_golden, assert_matches_reference

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "outputs"


@pytest.fixture(autouse=True)
def sim_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))


@pytest.mark.parametrize("name", ["mlp_regression", "residual_mlp_stack", "kv_cache_decode"])
def test_compiled_outputs_match_golden(example, name, golden_update):
    model, graph = example(name)
    sim = Simulator(model, graph, arch=best_host_target())   # golden values hold on every target
    ex = sim.make_executor()
    outputs = {}
    for step in range(3):
        ex.insert(**random_inputs(sim.bound, 0, step))
        ex.run_step()
        for var in outputs_of(sim.bound):
            outputs[f"step{step}.{var}"] = ex.fetch(var)
    assert_golden(outputs, GOLDEN / f"{name}.oinf", update=golden_update)


def test_golden_mismatch_is_reported(tmp_path):
    import numpy as np

    path = tmp_path / "g.oinf"
    assert_golden({"y": np.array([1.0, 2.0], np.float32)}, path, update=True)
    assert_golden({"y": np.array([1.0, 2.0000001], np.float32)}, path, update=False)
    with pytest.raises(AssertionError, match="FAIL"):
        assert_golden({"y": np.array([1.0, 2.5], np.float32)}, path, update=False)
    with pytest.raises(AssertionError, match="does not exist"):
        assert_golden({"y": np.zeros(2, np.float32)}, tmp_path / "missing.oinf", update=False)
    before = path.read_bytes()
    assert_golden({"y": np.array([1.0, 2.0], np.float32)}, path, update=True)
    assert path.read_bytes() == before          # deterministic: an update that changes nothing


def test_assert_matches_reference(example):
    model, graph = example("moe_routing")
    assert_matches_reference(model, graph, arch="x86_64-generic", steps=2)
