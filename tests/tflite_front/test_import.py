"""`openinfer import model.tflite`: the committed single-op and chain models (tests/data/tflite)
import and compute, tensor by tensor, what LiteRT's reference kernels compute; names and types at
the boundary; every unsupported operator listed in one error; malformed files refused by what is
wrong with them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", minversion="2.18",
                    reason="needs the tflite flatbuffer package (pip install 'openinfer[tflite]')")
pytest.importorskip("ai_edge_litert.interpreter", reason="needs ai-edge-litert (LiteRT's interpreter)")

from tflite_builder import Op, Tensor, build_model  # noqa: E402
from tflite_oracle import DATA, litert_inputs, litert_run, mismatches  # noqa: E402

from openinfer.errors import TfliteImportError  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.tflite import import_tflite  # noqa: E402

TESTDATA = DATA / "tflite"
#: the committed models whose every operator the importer supports (int8 forms)
SUPPORTED = sorted(p.stem for p in TESTDATA.glob("*.tflite")
                   if not p.stem.endswith("_f32") and p.stem.split("_")[0] in
                   ("conv2d", "depthwise", "fully", "average", "max", "reshape", "squeeze", "softmax", "add",
                    "sub", "mul", "mean", "relu", "relu6", "quantize", "requantize", "dequantize", "tiny"))
#: models LiteRT refuses (tests/tflite_front/test_testdata.py says why): imported, not compared
LITERT_REFUSES = {"conv2d_1x1_nobias"}


def _import(name: str, tmp_path):
    result = import_tflite(TESTDATA / f"{name}.tflite")
    graph, model = result.write(tmp_path)
    return result, (TESTDATA / f"{name}.tflite").read_bytes(), Reference(model, graph)


@pytest.mark.parametrize("name", SUPPORTED)
def test_every_tensor_is_bit_exact_with_litert(name, tmp_path) -> None:
    result, data, ref = _import(name, tmp_path)
    if name in LITERT_REFUSES:
        pytest.skip(f"{name}: LiteRT refuses the model (a CONV_2D without bias)")
    ex = ref.make_executor()
    for seed in range(3):
        by_index, by_name = litert_inputs(data, seed)
        ex.insert(**{result.renamed.get(k, k): v for k, v in by_name.items()})
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index))
        assert not bad, f"{name}, input seed {seed}:\n" + "\n".join(bad)


@pytest.mark.parametrize("arch", ["x86_64-generic", "cortex-m4"])
def test_chains_compile_bit_exact(arch, tmp_path) -> None:
    """The two chains (every op kind of the MLPerf models, with odd sizes) as generated C."""
    from openinfer.sim import Simulator
    from openinfer.testing import skip_unless_runs_here

    skip_unless_runs_here(arch)
    for name in ("tiny_dscnn", "tiny_resnet"):
        result, data, ref = _import(name, tmp_path / name)
        ex = Simulator(ref.model, ref.graph, arch=arch).make_executor()
        by_index, by_name = litert_inputs(data, 3)
        ex.insert(**{result.renamed.get(k, k): v for k, v in by_name.items()})
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index))
        assert not bad, f"{name} on {arch}:\n" + "\n".join(bad)


def test_names_and_types_at_the_boundary() -> None:
    """TFLite names made identifiers, the original in the comment; int8 in, int8 out, nothing added."""
    q = {"scale": (0.05,), "zero_point": (-3,)}
    model = build_model([Tensor("serving_default_input_1:0", (1, 6), "int8", **q),
                         Tensor("StatefulPartitionedCall:0", (2, 3), "int8", **q)],
                        [Op("RESHAPE", ("serving_default_input_1:0",), ("StatefulPartitionedCall:0",),
                            {"new_shape": [2, 3]})],
                        ["serving_default_input_1:0"], ["StatefulPartitionedCall:0"])
    result = import_tflite(model)
    assert "serving_default_input_1_0: i8[1, 6];  // TFLite \"serving_default_input_1:0\"" in result.text
    assert "StatefulPartitionedCall_0: i8[2, 3];" in result.text
    assert "op reshape(serving_default_input_1_0) >> StatefulPartitionedCall_0;" in result.text
    assert "quantize" not in result.text
    assert result.renamed == {"serving_default_input_1:0": "serving_default_input_1_0",
                              "StatefulPartitionedCall:0": "StatefulPartitionedCall_0"}


def test_every_unsupported_operator_is_listed_in_one_error() -> None:
    q = {"scale": (1 / 256,), "zero_point": (-128,)}
    model = build_model([Tensor("x", (1, 5), "int8", **q), Tensor("s", (1, 5), "int8", **q),
                         Tensor("t", (1, 5), "int8", scale=(1 / 128,), zero_point=(0,)),
                         Tensor("r", (1, 5), "int8", **q)],
                        [Op("LOGISTIC", ("x",), ("s",), {}), Op("TANH", ("s",), ("t",), {}),
                         Op("RESHAPE", ("t",), ("r",), {"new_shape": [1, 5]})],
                        ["x"], ["r"])
    with pytest.raises(TfliteImportError) as err:
        import_tflite(model)
    msg = str(err.value)
    assert msg.startswith("2 operators cannot be imported: operator 0 (LOGISTIC -> `s`): not supported; "
                          "operator 1 (TANH -> `t`): not supported"), msg
    assert "--list-ops" in msg and "RESHAPE" not in msg


def test_malformed_files_are_refused_by_what_is_wrong(tmp_path) -> None:
    data = (TESTDATA / "tiny_dscnn.tflite").read_bytes()
    with pytest.raises(TfliteImportError, match=r"not a TFLite model: bytes 4-7 are b'PK"):
        import_tflite(b"PK\x03\x04" * 4)
    with pytest.raises(TfliteImportError, match="root table offset .* is past the end"):
        import_tflite(b"\xff\xff\x00\x00TFL3")
    with pytest.raises(TfliteImportError, match="malformed flatbuffer|past the end|out of range"):
        import_tflite(data[:len(data) // 3])
    missing = tmp_path / "absent.tflite"
    with pytest.raises(TfliteImportError, match="absent.tflite: cannot read"):
        import_tflite(missing)


def test_int8_conv_without_quantized_weights_names_the_operator() -> None:
    q = {"scale": (0.1,), "zero_point": (0,)}
    model = build_model([Tensor("x", (1, 3, 3, 1), "int8", **q),
                         Tensor("w", (1, 1, 1, 1), "int8", data=np.ones((1, 1, 1, 1), np.int8)),
                         Tensor("y", (1, 3, 3, 1), "int8", **q)],
                        [Op("CONV_2D", ("x", "w", None), ("y",), {"padding": "VALID", "stride_w": 1, "stride_h": 1})],
                        ["x"], ["y"])
    with pytest.raises(TfliteImportError, match=r"operator 0 \(CONV_2D -> `y`\): the weights `w` are int8 "
                                                 "without quantization parameters"):
        import_tflite(model)
