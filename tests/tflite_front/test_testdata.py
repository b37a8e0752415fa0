"""The TFLite test models (tests/data/tflite, written by tools/tflite_testdata.py).

The importer's and the int8 kernels' tests trust these files, so this file checks them: the
committed bytes are what the generator builds; every model runs in LiteRT's reference kernels (the
bit-exact oracle of the int8 ops) with outputs that use the int8 range rather than saturate; each
int8 model computes what its float graph computes, to within its quantization; and LiteRT's
reference kernels and TFLM's interpreter (the second oracle) agree bit for bit on every model both
run. Inputs are drawn uniformly from each input's float range and quantized with the input's
parameters, as a real input would be.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

# minversion: without the package, `import tflite` would find this folder (tests/ is on sys.path) as
# an empty namespace package; it has no __version__, so the file is skipped all the same
pytest.importorskip("tflite", minversion="2.18",
                    reason="needs the tflite flatbuffer package (pip install 'openinfer[tflite]')")
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="needs ai-edge-litert (LiteRT's interpreter)")

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "tools"))

import tflite_testdata  # noqa: E402
from tflite_builder import quantize  # noqa: E402
from tflite_quantize import run_float  # noqa: E402

NAMES = list(tflite_testdata.MODELS)

#: models LiteRT refuses: name -> (a phrase of its error message, why). Their other tests run TFLM.
LITERT_REFUSES = {
    "conv2d_1x1_nobias": ("was optional but was expected",
                          "LiteRT's CONV_2D requires a bias input (conv.cc: TF_LITE_ENSURE(has_bias))"),
}
#: models TFLM runs but computes differently from LiteRT: name -> why
TFLM_DIFFERS = {
    "relu6": "TFLM's int8 RELU6 clamps the input codes without requantizing: it assumes the output's "
             "parameters are the input's (relu6_same_params is that case, and agrees)",
}


def _content(name: str) -> bytes:
    return (tflite_testdata.DATA / f"{name}.tflite").read_bytes()


def _litert(name: str):
    """LiteRT's interpreter with the reference kernels (its tensors not yet allocated)."""
    return litert.Interpreter(model_content=_content(name),
                              experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)


def _litert_refuses(name: str) -> bool:
    """Whether `name` is one of LITERT_REFUSES, checking that LiteRT does refuse it as recorded."""
    if name not in LITERT_REFUSES:
        return False
    with pytest.raises(RuntimeError, match=LITERT_REFUSES[name][0]):
        _litert(name).allocate_tensors()
    return True


def _inputs(name: str) -> list[np.ndarray]:
    """Inputs drawn uniformly from the model's float input ranges (seeded by the name) and
    quantized with the parameters the file gives the int8 ones."""
    g = tflite_testdata.graph(name)
    shapes = {t.name: t.shape for t in g.tensors}
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = []
    for input_name, detail in zip(g.inputs, _litert(name).get_input_details(), strict=True):
        x = rng.uniform(*g.input_ranges[input_name], shapes[input_name])
        scale, zero_point = detail["quantization"]
        inputs.append(quantize(x, scale, zero_point) if detail["dtype"] == np.int8 else x.astype(np.float32))
    return inputs


def _run_litert(name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interpreter = _litert(name)
    interpreter.allocate_tensors()
    for x, detail in zip(inputs, interpreter.get_input_details(), strict=True):
        interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _run_tflm(name: str, inputs: list[np.ndarray], capfd) -> list[np.ndarray]:
    """TFLM's interpreter on the model, or a skip (its reason printed) where TFLM has no kernel
    for an op. TFLM raises one error for every failure and says which on stderr, hence capfd."""
    from tflite_micro.python.tflite_micro import runtime

    try:
        interpreter = runtime.Interpreter.from_bytes(_content(name), arena_size=1 << 20)
        for i, x in enumerate(inputs):
            interpreter.set_input(x, i)
        interpreter.invoke()
    except RuntimeError:
        refusal = [line for line in capfd.readouterr().err.splitlines() if "Didn't find op" in line]
        if refusal:
            print(f"TFLM refuses {name}: {refusal[0]}")
            pytest.skip(f"TFLM refuses {name}: {refusal[0]}")
        raise
    return [interpreter.get_output(i) for i in range(len(tflite_testdata.graph(name).outputs))]


def _run(name: str, inputs: list[np.ndarray], capfd) -> list[np.ndarray]:
    """LiteRT's reference kernels' outputs; TFLM's for a model LiteRT refuses (LITERT_REFUSES)."""
    return _run_tflm(name, inputs, capfd) if _litert_refuses(name) else _run_litert(name, inputs)


def test_the_folder_holds_the_generated_models():
    committed = sorted(p.stem for p in tflite_testdata.DATA.glob("*.tflite"))
    assert committed == sorted(NAMES), "run tools/tflite_testdata.py"


@pytest.mark.parametrize("name", NAMES)
def test_committed_bytes_are_rebuilt(name):
    """tools/tflite_testdata.py --check for one model: the generator is deterministic and the
    committed file is its output."""
    assert _content(name) == tflite_testdata.build(name), f"{name}.tflite differs: run tools/tflite_testdata.py"


@pytest.mark.parametrize("name", NAMES)
def test_runs_without_saturating(name, capfd):
    """The declared output shapes and types are LiteRT's (TFLM's where LiteRT refuses the model),
    and fewer than half of each int8 output's codes sit at -128 or 127 (the quantization
    parameters fit the values)."""
    g = tflite_testdata.graph(name)
    shapes = {t.name: (t.shape, t.dtype) for t in g.tensors}
    for out, y in zip(g.outputs, _run(name, _inputs(name), capfd), strict=True):
        assert (y.shape, y.dtype.name) == shapes[out]
        if y.dtype == np.int8:
            saturated = np.mean((y == -128) | (y == 127))
            assert saturated < 0.5, f"{out}: {saturated:.0%} of the codes saturate"
        else:
            assert np.isfinite(y).all()


@pytest.mark.parametrize("name", [n for n in NAMES if tflite_testdata.graph(n).source is not None])
def test_int8_model_computes_its_float_graph(name, capfd):
    """Dequantized, an int8 model's output is its float graph's (run in LiteRT on the values the
    int8 inputs represent) to within two output steps, half a step on average: the weights, bias
    scales and activation parameters of the file are consistent, not just runnable. (Each op
    rounds once to its output, half a step; input and weight rounding add less than one step
    through the sums of these sizes: the largest error measured is 1.1 steps.)"""
    g = tflite_testdata.graph(name)
    tensors = {t.name: t for t in g.tensors}
    inputs = _inputs(name)
    float_inputs = {n: (x.astype(np.float64) - tensors[n].zero_point[0]) * tensors[n].scale[0]
                    for n, x in zip(g.inputs, inputs, strict=True)}
    expected = run_float(g.source, [float_inputs])[0]
    for out, y in zip(g.outputs, _run(name, inputs, capfd), strict=True):
        t = tensors[out]
        lo, hi = (np.array([-128, 127]) - t.zero_point[0]) * t.scale[0]
        want = np.clip(expected[out], lo, hi)  # the int8 range's ends are the model's limits
        error = np.abs((y.astype(np.float64) - t.zero_point[0]) * t.scale[0] - want) / t.scale[0]
        print(f"{name}: error in output steps: max {error.max():.2f}, mean {error.mean():.2f}")
        assert error.max() <= 2 and error.mean() <= 0.5


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=TFLM_DIFFERS[n]))
                                  if n in TFLM_DIFFERS else n for n in NAMES])
def test_litert_and_tflm_agree_bit_for_bit(name, capfd):
    pytest.importorskip("tflite_micro", reason="needs tflite-micro (TFLM's Python interpreter)")
    if _litert_refuses(name):
        print(f"LiteRT refuses {name}: {LITERT_REFUSES[name][1]}")
        pytest.skip(f"LiteRT refuses {name}: {LITERT_REFUSES[name][1]}")
    inputs = _inputs(name)
    for expected, got in zip(_run_litert(name, inputs), _run_tflm(name, inputs, capfd), strict=True):
        assert expected.dtype == got.dtype and expected.shape == got.shape
        assert np.array_equal(expected, got), f"{np.count_nonzero(expected != got)} of {expected.size} differ"
