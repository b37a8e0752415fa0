"""Shared fixtures: where the original tools' `.oinf` files are, and scratch directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Real files written by the original tools, copied from shared/compat/oinf (MANIFEST.json says
#: what each holds); tests/oinf/test_compat.py checks the copy still equals shared/ where it exists.
COMPAT_DIR = REPO / "tests" / "data" / "compat"
SHARED_COMPAT_DIR = REPO.parent / "shared" / "compat" / "oinf"


_CPU_TARGETS = {p.stem for p in (REPO / "devices").glob("*.json")
                if p.stem != "schema" and json.loads(p.read_text())["device"]["type"] == "cpu"}


#: The test files that take longest (measured on 2 cores), longest first. pytest-xdist hands files
#: out in collection order (`--dist loadfile`, tools/dev.sh): started first, they leave the short
#: files to fill in around them, instead of one core finishing a long file alone at the end
#: (longest-processing-time-first scheduling).
LONGEST_FIRST = ("tests/synth/test_c_conformance.py", "tests/vulkan/test_vulkan_conformance.py",
                 "tests/onnx/test_onnx_node_cases.py", "tests/sweep/test_shape_sweep.py",
                 "tests/tflite_front/test_mlperf_tiny.py", "tests/tflite_front/test_import.py",
                 "tests/synth/test_avx_qkernels.py", "tests/synth/test_neon_qkernels.py",
                 "tests/synth/test_dynamic_sizes.py", "tests/synth/test_nn_kernels.py",
                 "tests/synth/test_examples_targets.py", "tests/vulkan/test_vulkan_dynamic.py",
                 "tests/synth/test_dynamic_avx.py", "tests/synth/test_neon_kernels.py",
                 "tests/synth/test_arm_targets.py", "tests/onnx/test_onnx_zoo.py",
                 "tests/onnx/test_onnx_whole_models.py", "tests/synth/test_compiler_matrix.py")


def pytest_collection_modifyitems(config, items):
    """The longest files first (LONGEST_FIRST; the rest in collection order). Tests pick their
    targets from the host: a test parametrised on a CPU descriptor whose code this machine may not
    run (as OI_HOST_ISA caps it; for another architecture's, without its cross compiler or
    emulator) is skipped, the reason naming what is missing."""
    from openinfer.testing import missing_here

    stale = [f for f in LONGEST_FIRST if not (REPO / f).is_file()]
    assert not stale, f"tests/conftest.py LONGEST_FIRST names files that are gone: {stale}"
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))

    reasons: dict[str, str | None] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            name = Path(value).stem if isinstance(value, (str, Path)) else None
            if name not in _CPU_TARGETS:
                continue
            if name not in reasons:
                reasons[name] = missing_here(name)
            if reasons[name]:
                item.add_marker(pytest.mark.skip(reason=f"{name}: {reasons[name]}"))


@pytest.fixture(scope="session")
def compat_dir() -> Path:
    return COMPAT_DIR


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((COMPAT_DIR / "MANIFEST.json").read_text())


EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def example_models(tmp_path_factory) -> Path:
    """Every example's .oinf, written by examples/models.py into a session directory."""
    from example_modules import load_example

    mod = load_example("models")
    out = tmp_path_factory.mktemp("models")
    for name in mod.MODELS:
        mod.write_model(name, out / f"{name}.oinf", 1 if name == "quantized_linear" else 2)
    return out


@pytest.fixture(scope="session")
def example(example_models):
    """example(name) -> (opened model, parsed graph) of a bundled example."""
    import openinfer as oi

    def load(name: str):
        return oi.ModelLoader.open(example_models / f"{name}.oinf"), oi.load_graph(EXAMPLES / f"{name}.oig")

    return load
