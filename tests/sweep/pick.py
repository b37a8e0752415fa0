"""The sweep's fixed seed and the pools its shapes draw their free extents from."""

from __future__ import annotations

import zlib

import numpy as np

#: changing it redraws every free extent of the sweep (the widths it straddles stay)
SEED = 20261128
#: small extents: 1, primes and odd sizes
SMALL = (1, 2, 3, 5, 7, 11, 13)
PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


class Picker:
    """Free extents for one family's cases, drawn from the fixed seed (deterministic per family,
    so adding a family leaves the others' shapes as they were)."""

    def __init__(self, family: str):
        self.rng = np.random.default_rng(zlib.crc32(f"{SEED}/{family}".encode()))

    def small(self) -> int:
        return int(self.rng.choice(SMALL))

    def prime(self) -> int:
        return int(self.rng.choice(PRIMES))

    def one_of(self, items):
        return items[int(self.rng.integers(len(items)))]

    def flip(self) -> bool:
        return bool(self.rng.integers(2))
