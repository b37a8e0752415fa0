"""ONNX Mod through `openinfer import`, against NumPy's fmod and mod (the ONNX definitions) on the
reference: float remainders computed in the next wider float round once, so they are NumPy's to
the bit for quotients below 2**24, and infinite divisors give what NumPy gives."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import openinfer as oi  # noqa: E402

_TYPES = {np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
          np.int32: TensorProto.INT32, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _run_mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    t = _TYPES[a.dtype.type]
    g = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], "g",
                          [helper.make_tensor_value_info("a", t, list(a.shape)),
                           helper.make_tensor_value_info("b", t, list(b.shape))],
                          [helper.make_tensor_value_info("y", t, None)])
    result = oi.import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), name="mod")
    import tempfile

    _, path = result.write(tempfile.mkdtemp(prefix="oi-mod-"))
    ex = oi.Reference(oi.ModelLoader.open(path), result.text).make_executor()
    ex.insert(a=a, b=b)
    ex.run_step()
    return ex.fetch("y")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_is_numpys_to_the_bit(dtype, fmod):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(400) * 1000).astype(dtype)
    b = (rng.uniform(0.1, 10, 400) * rng.choice([-1, 1], 400)).astype(dtype)
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(_run_mod(a, b, fmod), want)


@pytest.mark.parametrize("fmod", [0, 1])
def test_infinite_divisors_and_zeros_are_numpys(fmod):
    a = np.asarray([3.0, -3.0, 3.0, -3.0, 0.0, np.inf, 5.0, np.nan], np.float32)
    b = np.asarray([np.inf, np.inf, -np.inf, -np.inf, 2.0, 2.0, 0.0, 2.0], np.float32)
    with np.errstate(invalid="ignore"):
        want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(_run_mod(a, b, fmod), want)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_broadcasts_and_takes_the_right_sign(dtype, fmod):
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 5), endpoint=True).astype(dtype)
    b = rng.integers(1, 9, 5).astype(dtype) * (np.asarray([1, -1, 1, -1, 1], dtype) if info.min < 0 else 1)
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(_run_mod(a, b, fmod), want)
