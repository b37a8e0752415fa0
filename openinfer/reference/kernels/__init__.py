"""The NumPy reference kernels, one function per op (or per family), keyed by op name in `KERNELS`;
`run_kernel` applies one to an op application the registry has typed.

A kernel takes the input arrays (unpacked representation, shapes as bound) and the op's
`Inference` (completed attributes, dtypes, mode) and returns a new array of the output dtype's
unpacked representation. Kernels are pure: in-place ops are the interpreter's copy.

The op registry (openinfer/ops) is the one list of ops and their typing rules; this package says
how the reference computes each of them. It imports the registry and never the other way round,
so the binder, the synthesizer and the emitters read the schema without loading NumPy kernels.
tests/ops/test_kernel_table.py checks that the two agree: one kernel for every registry op, none
for a name the registry does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ...ops.errors import OpRuntimeError
from ...ops.registry import Inference, OpSpec
from . import cast, detection, elementwise, layout, nn, quantized, reduce

Kernel = Callable[[list[np.ndarray], Inference], np.ndarray]

KERNELS: dict[str, Kernel] = {**elementwise.KERNELS, **reduce.KERNELS, **cast.KERNELS, **nn.KERNELS,
                              **layout.KERNELS, **quantized.KERNELS, **detection.KERNELS}


def run_kernel(spec: OpSpec, inputs: Sequence[np.ndarray], attrs: Mapping[str, object] | None,
               inference: Inference) -> np.ndarray:
    """Run `spec`'s NumPy kernel: inputs in the unpacked representation, result in the output
    dtype's unpacked representation (rounded/wrapped), a new array (kernels are pure).

    `inference` is `spec.infer(...)` for these inputs; `attrs` is `inference.attrs` (or None).
    Attributes that changed since `infer` (values of attribute variables known only at run time)
    are validated again first.
    """
    if attrs is not None and attrs is not inference.attrs and dict(attrs) != dict(inference.attrs):
        inference = spec.infer(inference.inputs, attrs, inference.out,
                               output_name_is_input=inference.mode == "inplace")
    arrays = [np.asarray(x) for x in inputs]
    if len(arrays) != len(inference.inputs):
        raise OpRuntimeError(f"{spec.name}: expected {len(inference.inputs)} inputs, got {len(arrays)}")
    for i, (x, t) in enumerate(zip(arrays, inference.inputs, strict=True)):
        if x.shape != t.shape:
            raise OpRuntimeError(f"{spec.name}: input {i} has shape {list(x.shape)}, bound as {list(t.shape)}")
    with np.errstate(all="ignore"):  # wrapping and IEEE specials are the defined semantics
        out = KERNELS[spec.name](arrays, inference)
    out = np.asarray(out)
    if out.shape != inference.out_shape or out.dtype != inference.out_dtype.np_dtype:
        raise AssertionError(f"{spec.name} kernel returned {out.dtype}{list(out.shape)}, "
                             f"expected {inference.out_dtype.np_dtype}{list(inference.out_shape)}")
    return out
