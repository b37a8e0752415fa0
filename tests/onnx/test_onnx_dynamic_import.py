"""Symbolic sizes kept through import (issue 42): a model exported with symbolic batch and
sequence dims, imported once, runs at several sizes from one `--dynamic` build and matches
onnxruntime at each; its weights (the `.oinf`) do not depend on the sizes it was imported at.

The committed exports (tools/export_onnx_models.py: random weights) carry the shape computations
exporters write (Shape/Gather/Concat into Reshape, `view(batch, -1)`, position ids from a Range,
token-type ids from ConstantOfShape, the padding mask as a GatherND over an index grid): each
must become a size expression or a constant that holds for every size, not the import's literal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import openinfer as oi  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "onnx"
#: model -> (output, the --dynamic bounds, the sizes run from one build: 1, primes, the bound)
MODELS = {
    "bert": ("last_hidden_state", {"batch": 4, "seq": 24}, [{"batch": 1, "seq": 1}, {"batch": 3, "seq": 7},
                                                          {"batch": 4, "seq": 24}, {"batch": 2, "seq": 13}]),
    "gpt2": ("logits", {"batch": 3, "seq": 20}, [{"batch": 1, "seq": 1}, {"batch": 3, "seq": 11},
                                                {"batch": 2, "seq": 20}]),
    "resnet": ("logits", {"batch": 5}, [{"batch": 1}, {"batch": 3}, {"batch": 5}]),
}
TARGETS = sorted({"x86_64-generic", best_host_target()})


def _import_sizes(name: str) -> dict[str, int]:
    data = np.load(DATA / f"{name}.npz")
    return {k[8:]: int(data[k]) for k in data.files if k.startswith("sizevar/")}


def _inputs(name: str, sizes: dict[str, int], rng) -> dict[str, np.ndarray]:
    """Random inputs at `sizes`: token ids below the exported ones' largest, a padding mask with
    each row's tail masked, images in [-1, 1)."""
    data = np.load(DATA / f"{name}.npz")
    feed = {}
    for key in (k for k in data.files if k.startswith("in/")):
        ref = data[key]
        if key == "in/input_ids":
            feed["input_ids"] = rng.integers(0, int(ref.max()) + 1, (sizes["batch"], sizes["seq"])).astype(ref.dtype)
        elif key == "in/attention_mask":
            mask = np.ones((sizes["batch"], sizes["seq"]), ref.dtype)
            for row in range(1, sizes["batch"]):
                mask[row, sizes["seq"] - rng.integers(0, sizes["seq"]):] = 0
            feed["attention_mask"] = mask
        else:
            feed[key[3:]] = rng.uniform(-1, 1, (sizes["batch"], *ref.shape[1:])).astype(ref.dtype)
    return feed


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request, tmp_path_factory):
    name = request.param
    model = oi.import_onnx(DATA / f"{name}.onnx", sizevars=_import_sizes(name))
    graph, oinf = model.write(tmp_path_factory.mktemp(name))
    return name, model, graph, oinf


def test_weights_and_graph_do_not_depend_on_the_import_sizes(imported):
    name, model, *_ = imported
    other = oi.import_onnx(DATA / f"{name}.onnx", sizevars={k: v + 3 for k, v in _import_sizes(name).items()})
    assert "// Fixed at import" not in model.text
    assert sorted(other.tensors) == sorted(model.tensors)
    for key, tensor in model.tensors.items():
        np.testing.assert_array_equal(other.tensors[key], tensor, err_msg=key)
    body = [line for line in model.text.splitlines() if not line.startswith("// Sizevars")]
    assert [line for line in other.text.splitlines() if not line.startswith("// Sizevars")] == body


@pytest.mark.parametrize("arch", [None, *TARGETS])
def test_one_dynamic_build_matches_onnxruntime_at_every_size(imported, arch, tmp_path_factory, monkeypatch):
    """arch None: the reference interpreter bound at each size."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    name, model, graph, oinf = imported
    output, bounds, runs = MODELS[name]
    session = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    loader, g = oi.ModelLoader.open(oinf), oi.load_graph(graph)
    if arch is None:
        executor = oi.Reference(loader, g, dynamic=bounds).make_executor()
    else:
        executor = oi.Simulator(loader, g, arch=arch, dynamic=bounds).make_executor()
    rng = np.random.default_rng(42)
    for sizes in runs:
        feed = _inputs(name, sizes, rng)
        expected = session.run([output], feed)[0]
        executor.set_sizes(**sizes)
        executor.insert(**{model.renamed.get(k, k): v for k, v in feed.items()})
        executor.run_step()
        got = executor.fetch(model.renamed.get(output, output))
        assert got.shape == expected.shape, sizes
        np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-4, err_msg=str(sizes))


def test_a_constant_computed_for_the_import_sizes_fixes_them():
    """LLaMA's rotary tables are cos/sin of positions times frequencies, folded at import for the
    import's sequence length: the header says that `seq` is fixed (batch stays dynamic)."""
    model = oi.import_onnx(DATA / "llama.onnx", sizevars=_import_sizes("llama"))
    fixed = [line for line in model.text.splitlines() if line.startswith("// Fixed at import")]
    assert len(fixed) == 1 and "seq (" in fixed[0] and "batch" not in fixed[0]


def test_a_size_the_import_fixed_cannot_be_moved(tmp_path):
    """LLaMA's rotary tables are folded for the import's `seq`: the .oinf says so (`fixed.seq`) and
    binding it at another size, or dynamic, is refused rather than run with the wrong tables."""
    from openinfer.api import bind_inputs
    from openinfer.errors import BindError

    model = oi.import_onnx(DATA / "llama.onnx", sizevars={"batch": 2, "seq": 8})
    graph, oinf = model.write(tmp_path)
    assert "fixed.seq" in model.metadata and "// Fixed at import" in model.text
    bind_inputs(str(oinf), graph, {"seq": 8}, {"batch": 3})        # its own size, and batch free
    for sizevars, dynamic, flag in (({}, {"seq": 16}, "--dynamic seq=16"), ({"seq": 9}, None, "--sizevar seq=9")):
        with pytest.raises(BindError, match=f"{flag}: the model fixes `seq` at 8 .*import it again"):
            bind_inputs(str(oinf), graph, sizevars, dynamic)
