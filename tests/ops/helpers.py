"""Run one op through infer + its reference kernel with little ceremony."""

from __future__ import annotations

import numpy as np

from openinfer import dtypes as dt
from openinfer.ops import Inference, TensorType, get
from openinfer.reference.kernels import run_kernel


def tt(dtype: str, shape=()) -> TensorType:
    return TensorType(dt.lookup(dtype), tuple(shape))


def run(op: str, *inputs: tuple[str, object], out: str | TensorType | None = None, inplace: bool = False,
        **attrs) -> np.ndarray:
    """`run("add", ("i8", [1, 2]), ("i8", [3, 4]))`: inputs as (dtype name, values)."""
    arrays, types = [], []
    for name, values in inputs:
        d = dt.lookup(name)
        a = np.array(values, dtype=object if d.is_int and not d.is_packed else None)
        a = a.astype(d.np_dtype) if a.dtype != object else np.array(a.tolist(), dtype=d.np_dtype)
        arrays.append(a)
        types.append(TensorType(d, a.shape))
    spec = get(op)
    declared = None
    if isinstance(out, TensorType):
        declared = out
    elif out is not None:
        declared = TensorType(dt.lookup(out), spec.infer(types, attrs).out_shape)
    inf: Inference = spec.infer(types, attrs, declared, output_name_is_input=inplace)
    return run_kernel(spec, arrays, inf.attrs, inf)


def f_bits(x: np.ndarray) -> list[int]:
    """Bit patterns of float results (for exact comparisons incl. -0.0 and NaN)."""
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize]).reshape(-1).tolist()
