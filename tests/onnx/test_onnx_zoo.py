"""The nine "light" zoo models of the onnx wheel with random weights and their logits as output
(tests/onnx/zoo.py), imported and run on the reference and on the generated C of every CPU target,
compared with onnxruntime on two images: max |d| / max |y| of the logits below 1e-4.

By default the models that cost least here run (SqueezeNet, ShuffleNet, and AlexNet for its LRN);
`OI_SLOW=1` runs all nine (VGG-19's 143 M weights, ResNet-50, DenseNet-121, ...). docs/onnx.md
has each model's time and error per target. A CPU target the host cannot run is skipped, naming
what the CPU lacks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import zoo  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SLOW = os.environ.get("OI_SLOW") == "1"
#: the default selection: 20-40 s each for the reference and two C targets here (docs/onnx.md)
CHEAP = ("squeezenet", "shufflenet", "bvlc_alexnet")
TARGETS = ("reference", "x86_64-generic", "x86_64-avx2", "x86_64-avx512")
TOLERANCE = 1e-4
#: the models whose graphs hold LRN nodes (two each)
WITH_LRN = {"bvlc_alexnet", "inception_v1", "zfnet512"}


@dataclass
class Imported:
    name: str
    graph: Path
    weights: Path
    image_var: str
    logits_var: str
    images: np.ndarray          # [2, 3, 224, 224]
    expected: list[np.ndarray]  # onnxruntime's logits of each image
    ops: set[str]


@pytest.fixture(scope="module", params=zoo.MODELS if SLOW else CHEAP)
def imported(request, tmp_path_factory):
    name = request.param
    model = zoo.randomized(name)
    image_name, shape = zoo.input_name_and_shape(model)
    logits_name = model.graph.output[0].name
    images = zoo.image(np.random.default_rng(1), (2, *shape[1:]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = [session.run([logits_name], {image_name: images[i:i + 1]})[0] for i in range(2)]
    del session
    result = oi.import_onnx(model, name=name)
    graph, weights = result.write(tmp_path_factory.mktemp(name))
    ops = {line.split("(")[0].split()[-1] for line in result.text.splitlines() if line.strip().startswith("op ")}
    return Imported(name, graph, weights, result.renamed.get(image_name, image_name),
                    result.renamed.get(logits_name, logits_name), images, expected, ops)


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("sim-cache")))
        yield


def test_logits_have_a_real_spread(imported):
    """The randomized weights make logits that a wrong kernel would change: spread out, different
    for the two images by far more than the tolerance, with different top classes; the LRN models
    import with their two `lrn` ops."""
    y0, y1 = (y.reshape(-1) for y in imported.expected)
    assert min(y0.std(), y1.std()) > 0.1, (y0.std(), y1.std())
    assert np.abs(y0 - y1).max() / np.abs(y0).max() > 1000 * TOLERANCE
    assert y0.argmax() != y1.argmax()
    assert ("lrn" in imported.ops) == (imported.name in WITH_LRN), sorted(imported.ops)


@pytest.mark.parametrize("target", TARGETS)
def test_logits_match_onnxruntime(imported, target):
    model = oi.ModelLoader.open(imported.weights)
    if target == "reference":
        executor = oi.Reference(model, imported.graph).make_executor()
    else:
        executor = Simulator(model, imported.graph, arch=REPO / "devices" / f"{target}.json").make_executor()
    for k, want in enumerate(imported.expected):
        executor.insert(**{imported.image_var: imported.images[k:k + 1]})
        executor.run_step()
        got = executor.fetch(imported.logits_var)
        error = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
        assert error < TOLERANCE, f"{imported.name} on {target}, image {k}: max|d| / max|y| = {error:.3g}"
