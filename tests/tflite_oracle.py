"""LiteRT's reference kernels as the oracle of imported TFLite models: every tensor of a run, by
TFLite tensor name, and inputs drawn in the float domain and quantized with the input's parameters
(full-range int8 would saturate most outputs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


def float_domain_input(detail: dict, rng: np.random.Generator) -> np.ndarray:
    """An input for LiteRT's input `detail`: normal values spanning about a third of the int8 range
    in real terms, quantized with the input's scale and zero point (a float input: the values)."""
    shape, dtype = tuple(detail["shape"]), detail["dtype"]
    scale, zero = detail["quantization"]
    if dtype == np.float32:
        return rng.normal(0.0, 1.0, shape).astype(np.float32)
    real = rng.normal(0.0, 42.0 * scale, shape)
    return np.clip(np.round(real / scale) + zero, -128, 127).astype(dtype)


def litert_run(model: bytes, inputs: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of one run of LiteRT's reference kernels (BUILTIN_REF), by TFLite name."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for index, value in inputs.items():
        it.set_tensor(index, value)
    it.invoke()
    out = {}
    for d in it.get_tensor_details():
        try:
            out[d["name"]] = it.get_tensor(d["index"])
        except ValueError:          # a tensor without data (an optional input left out)
            continue
    return out


def litert_inputs(model: bytes, seed: int) -> tuple[dict[int, np.ndarray], dict[str, np.ndarray]]:
    """Inputs for `model` (by LiteRT index, and by TFLite name) from `seed`."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    rng = np.random.default_rng(seed)
    by_index, by_name = {}, {}
    for d in it.get_input_details():
        x = float_domain_input(d, rng)
        by_index[d["index"]], by_name[d["name"]] = x, x
    return by_index, by_name


def computed_tensors(model: bytes) -> list[str]:
    """The TFLite names of the tensors the model's operators compute, in operator order."""
    from openinfer.tflite.model import read_model

    m = read_model(model, "<model>")
    return [m.tensors[o].name for op in m.operators for o in op.outputs]


def feed(imported, inputs_by_name: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs by TFLite name as the imported graph's variables."""
    return {imported.renamed.get(k, k): v for k, v in inputs_by_name.items()}


def mismatches(imported, model: bytes, executor, litert: dict[str, np.ndarray],
               tolerance: tuple[float, float] | None = None) -> list[str]:
    """The computed tensors whose values differ between `executor` (reference or simulator, run
    already) and LiteRT's run, as lines naming the tensor: bit for bit, or within `tolerance`
    (rtol, atol) for float models."""
    bad = []
    for name in computed_tensors(model):
        var = imported.renamed.get(name, name)
        want, got = litert[name], executor.fetch(var)
        if want.shape != got.shape or want.dtype != got.dtype:
            bad.append(f"{var}: {got.dtype}{list(got.shape)}, LiteRT {want.dtype}{list(want.shape)}")
        elif tolerance is None and np.any(want != got):
            bad.append(f"{var}: {int(np.count_nonzero(want != got))} of {want.size} elements differ")
        elif tolerance is not None and not np.allclose(got, want, *tolerance):
            bad.append(f"{var}: largest difference {float(np.max(np.abs(got - want))):.3g}")
    return bad
