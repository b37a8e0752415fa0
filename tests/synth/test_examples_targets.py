"""Every example on every CPU target: generated, built, loaded and compared with the reference
for several steps (the CLI's `openinfer sim` loop, in-process). Built with the project's own
options and the environment's CC, and under the compiler matrix (tests/compilers.py): in the
default suite each (example, target) pair with one toolchain of the matrix, in turn; with
OI_SLOW=1 with every toolchain."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compilers import PRIMARY, SLOW, TOOLCHAINS  # noqa: E402

from openinfer.compare import compare, table
from openinfer.inputs import outputs_of, random_inputs
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator

EXAMPLES = ("mlp_regression", "residual_mlp_stack", "linear_attention", "moe_routing", "streaming_pipeline",
            "kv_cache_decode", "online_weight_update", "quantized_linear", "stability_guard", "cache_window_slice",
            "accumulation_demo")
TARGETS = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")
STEPS = {"cache_window_slice": 6, "kv_cache_decode": 4}


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("sim-cache")))


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _matrix() -> list[tuple[str, str, object]]:
    """(example, target, toolchain) runs under the matrix: all, or per pair one toolchain other
    than the project's own (GCC -O3, which test_example_matches_reference builds), in turn."""
    others = [t for t in TOOLCHAINS if t != PRIMARY]
    runs = []
    for name in EXAMPLES:
        for target in TARGETS:
            turn = others[zlib.crc32(f"{name}/{target}".encode()) % len(others)]
            runs += [(name, target, t) for t in TOOLCHAINS if SLOW or t == turn]
    return runs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_matches_reference(example, name, target):
    check_example(example, name, target)


@pytest.mark.parametrize(("name", "target", "toolchain"), _matrix(),
                         ids=lambda v: getattr(v, "name", v))
def test_example_under_the_compiler_matrix(example, name, target, toolchain):
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    with toolchain.active():
        check_example(example, name, target, toolchain.build_options)


def check_example(example, name, target, build_options=None) -> Simulator:
    """Example `name` built for `target`, stepped beside the reference (fresh inputs each step;
    a NaN into stability_guard's `bad` branch), every output compared; returns the Simulator."""
    model, graph = example(name)
    ref = Reference(model, graph)
    ex_ref = ref.make_executor()
    sim = Simulator(model, graph, arch=target, build_options=build_options)
    ex_sim = sim.make_executor()
    names = outputs_of(ref.bound)
    for step in range(STEPS.get(name, 3)):
        inputs = random_inputs(ref.bound, 11, step)
        if name == "stability_guard" and step == 1:
            inputs["x"] = inputs["x"].copy()
            inputs["x"][1, 2] = np.nan          # the `bad` branch
        for ex in (ex_ref, ex_sim):
            ex.insert(**inputs)
            ex.run_step()
        rows = [compare(n, ref.bound.vars[n].dtype, ex_ref.fetch(n), ex_sim.fetch(n)) for n in names]
        assert all(r.ok for r in rows), f"{name} on {target}, step {step}:\n{table(rows)}"
    return sim
