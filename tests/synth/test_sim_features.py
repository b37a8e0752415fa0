"""Simulator features: divergence bisection names the wrong node, embedded weights, the sim CLI's
exit status, device probing."""

from __future__ import annotations

import json

import numpy as np
import pytest

import openinfer as oi
from openinfer.bisect import bisect
from openinfer.cli import main
from openinfer.reference.executor import Reference
from openinfer.resources import hal_sources
from openinfer.sim import Simulator
from openinfer.targets.c.renderer import CRenderer


@pytest.fixture(autouse=True)
def sim_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))


def test_bisect_reports_the_first_diverging_node(example, monkeypatch):
    """Break one kernel (relu's clamp) in the generated C: the report names that node and its line."""
    original = CRenderer.kernel

    def broken(self, req, name):
        src = original(self, req, name)
        if req.op != "relu" and not any(step.op == "relu" for step in req.chain):   # alone, or fused
            return src
        return type(src)(src.name, src.prototype, src.definition.replace("return OI_OK;", "out[0] += 1.0f;\n    return OI_OK;"))

    monkeypatch.setattr(CRenderer, "kernel", broken)
    model, graph = example("mlp_regression")
    sim = Simulator(model, graph, arch="x86_64-generic")
    report = bisect(Reference(model, graph).bound, sim, seed=0, step=0)
    assert report.first is not None
    assert report.first.desc.startswith("op relu(h")
    assert report.first.location.endswith("mlp_regression.oig:23:5")
    assert "FAIL" in report.text()


def test_sim_cli_exit_status_and_report(example_models, capsys):
    from pathlib import Path

    graph = str(Path(__file__).resolve().parents[2] / "examples" / "kv_cache_decode.oig")
    assert main(["sim", graph, "--model", str(example_models / "kv_cache_decode.oinf"), "--arch", "x86_64-generic",
                 "--steps", "3", "--bisect"]) == 0
    out = capsys.readouterr().out
    assert out.count("k_hist") >= 3 and "all 1 output(s) match" in out and "bisect: step 2" in out


def test_embedded_weights_need_no_model_file(tmp_path, example):
    import subprocess

    model, graph = example("mlp_regression")
    plan = oi.Synthesizer.from_arch("x86_64-generic").synthesize(model, graph, name="mlp", embed_weights=True)
    plan.emit(tmp_path / "mlp")
    (tmp_path / "mlp" / "main.c").write_text(r"""
#include <stdio.h>
#include "mlp.h"
int main(void) {
    oi_mlp *m = NULL;
    if (oi_mlp_create(NULL, &m) != OI_OK) return 1;           /* NULL: the embedded .oinf */
    float x[64], y[32];
    for (int i = 0; i < 64; ++i) x[i] = (float)(i % 7) / 7.0f;
    if (oi_mlp_set(m, OI_MLP_VAR_x, x, sizeof x) || oi_mlp_step(m) || oi_mlp_get(m, OI_MLP_VAR_y, y, sizeof y)) return 2;
    for (int i = 0; i < 32; ++i) printf("%.7g\n", y[i]);
    oi_mlp_destroy(m);
    return 0;
}
""")
    out = tmp_path / "mlp"
    exe = tmp_path / "app"
    subprocess.run(["cc", "-std=c11", "-O1", "-I", str(out), "-I", str(out / "hal" / "include"), str(out / "main.c"),
                    str(out / "mlp.c"), str(out / "mlp_kernels.c"), *hal_sources(root=out),
                    str(out / "mlp_weights.S"), "-lm", "-pthread", "-o", str(exe)], check=True, cwd=out)
    y = np.array([float(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                                                   cwd=tmp_path).stdout.split()], np.float32).reshape(4, 8)
    ex = Reference(model, graph).make_executor()
    ex.insert(x=(np.arange(64) % 7 / np.float32(7.0)).astype(np.float32).reshape(4, 16))
    ex.run_step()
    np.testing.assert_allclose(y, ex.fetch("y"), rtol=1e-5, atol=1e-6)


def test_devices_probe_writes_a_valid_descriptor(tmp_path, capsys):
    from openinfer.targets.devices import load

    out = tmp_path / "me.json"
    assert main(["devices", "probe", "--out", str(out)]) == 0
    dev = load(out)
    assert dev.is_cpu and dev.threads >= 1
    doc = json.loads(out.read_text())
    assert doc["isa"]["vector_bits"] in (128, 256, 512)


def test_device_errors_name_the_field(tmp_path):
    from openinfer.errors import DeviceError
    from openinfer.targets.devices import load

    bad: dict = {}
    path = tmp_path / "bad.json"
    for doc, fragment in (
        (bad, "device: required field is missing"),
        ({"device": {"type": "cpu", "api": "c", "name": "x"}, "isa": {"features": ["avx9"], "vector_bits": 256}},
         "isa.features[0]"),
        ({"device": {"type": "cpu", "api": "c", "name": "x"}, "isa": {"features": [], "vector_bits": 256},
          "thread": 2}, "thread: unknown field (did you mean `threads`?)"),
        ({"device": {"type": "gpu", "api": "vulkan", "name": "x"}}, "limits: required field is missing"),
    ):
        path.write_text(json.dumps(doc))
        with pytest.raises(DeviceError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                           .replace("]", r"\]").replace("?", r"\?")):
            load(path)


INPUTS_GRAPH = """
dynamic { flag: bool; n: i32; u: u8[2]; h: f16[2]; }
volatile { y: f16[2]; m: i32; }
block entry {
    op add(h, h) >> y;
    op add(n, n) >> m;
    return;
}
"""

#: (variable, value, phrase of the error): values that do not convert exactly are refused
REFUSED_INPUTS = [
    ("flag", "False", "cannot take values of dtype"), ("flag", "no", "cannot take values of dtype"),
    ("flag", float("nan"), "nan is not True/False"), ("flag", 0.5, "0.5 is not True/False"),
    ("flag", 2, "2 is not True/False"), ("flag", np.array([1, 0, 3])[2:], "3 is not True/False"),
    ("n", 2.5, "2.5 is not an integer"), ("n", float("inf"), "inf is not an integer"),
    ("n", 2 ** 31, "out of range"), ("n", -2 ** 31 - 1, "out of range"), ("n", "3", "cannot take values of dtype"),
    ("u", [1, 256], "out of range"), ("u", [-1, 0], "out of range"), ("u", [1.0, 0.5], "0.5 is not an integer"),
    ("u", [[1], [2, 3]], "not an array"), ("h", [1e10, 1.0], "10000000000.0 is beyond its range"),
    ("h", [70000, 1], "70000 is beyond its range"), ("h", ["1", "2"], "cannot take values of dtype"),
    ("h", [object(), 1], "cannot take values of dtype"),
]

#: exact conversions, taken: (variable, value, what the step sees)
ACCEPTED_INPUTS = [
    ("flag", True, True), ("flag", np.bool_(False), False), ("flag", 0, False), ("flag", 1, True),
    ("flag", 1.0, True), ("flag", np.array(True), True), ("n", 7.0, 7), ("n", True, 1), ("n", np.int64(-5), -5),
    ("u", [255.0, 0], [255, 0]), ("h", [np.inf, -0.5], [np.inf, -0.5]), ("h", [65504, 1], [65504, 1]),
]


def _engines():
    ref = Reference(None, INPUTS_GRAPH).make_executor()
    sim = Simulator(None, INPUTS_GRAPH, arch="x86_64-generic").make_executor()
    return {"reference": ref, "simulator": sim}


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
        yield _engines()


@pytest.mark.parametrize("engine", ["reference", "simulator"])
def test_inputs_that_do_not_convert_exactly_are_refused_with_the_variable_name(engines, engine):
    ex = engines[engine]
    for name, value, phrase in REFUSED_INPUTS:
        with pytest.raises(oi.ExecutionError) as info:
            ex.insert(**{name: value})
        assert f"`{name}`" in str(info.value) and phrase in str(info.value), (name, value, str(info.value))


@pytest.mark.parametrize("engine", ["reference", "simulator"])
def test_inputs_that_convert_exactly_are_taken(engines, engine):
    ex = engines[engine]
    base = {"flag": False, "n": 0, "u": [0, 0], "h": [0.0, 0.0]}
    for name, value, seen in ACCEPTED_INPUTS:
        ex.insert(**{**base, name: value})
        ex.run_step()
        if name == "n":
            assert ex.fetch("m") == 2 * seen
        elif name == "h":
            with np.errstate(over="ignore"):            # 65504 + 65504 is inf in f16
                np.testing.assert_array_equal(ex.fetch("y"), 2 * np.asarray(seen, np.float16))
        else:
            np.testing.assert_array_equal(ex.fetch(name), seen)


def test_fetch_before_the_first_step_raises_in_both_engines(tmp_path):
    engines = _engines()
    for engine, ex in engines.items():
        for name in ("y", "m", "n"):
            with pytest.raises(oi.ExecutionError, match=f"cannot fetch `{name}`: it has no value yet"):
                ex.fetch(name)
        ex.insert(n=3)                  # an input set before the first step is its value
        assert ex.fetch("n") == 3, engine
        ex.insert(flag=True, u=[1, 2], h=[1.0, 2.0])
        ex.run_step()
        assert ex.fetch("m") == 6, engine
