"""The NumPy reference kernels, one function per op (or per family), keyed by op name.

A kernel takes the input arrays (unpacked representation, shapes as bound) and the op's
`Inference` (completed attributes, dtypes, mode) and returns a new array of the output dtype's
unpacked representation. Kernels are pure: in-place ops are the interpreter's copy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..registry import Inference
from . import cast, elementwise, layout, nn, reduce

Kernel = Callable[[list[np.ndarray], Inference], np.ndarray]

KERNELS: dict[str, Kernel] = {**elementwise.KERNELS, **reduce.KERNELS, **cast.KERNELS, **nn.KERNELS,
                              **layout.KERNELS}
