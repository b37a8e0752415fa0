"""The static type of an op operand: dtype plus concrete shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..dims import Dim, pretty_shape
from ..dtypes import DTypeInfo


@dataclass(frozen=True)
class TensorType:
    dtype: DTypeInfo
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        # Callers pass lists or NumPy ints; normalise so equality and hashing behave (a dynamic
        # dim, openinfer/dims.py, stays one: it is an int carrying its run-time expression).
        object.__setattr__(self, "shape", tuple(d if isinstance(d, Dim) else int(d) for d in self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.name}{pretty_shape(self.shape)}"
