"""Persistent state of the reference executor: plain persistent values, tables and auto-dim tensors.

Semantics (digest §3.4 with decisions.md):

- A plain persistent variable holds one value of its declared shape; `cache.reset` restores its
  initial value (model data, `@init`, or zeros).
- A table `A(i, j): T[E] @table` is a sparse map from an index tuple to an entry of shape E. Each
  index has a size: the `@fixed` value (constant), else one past the largest scalar index used so
  far. A scalar index at or past a fixed size is an error. Slices `a..b` are end-exclusive; a
  missing start is 0, a missing end is the size, a negative end counts back from the size; slices
  never grow a table. Unwritten entries read as the initial value (or zeros).
  The shape of a read is the lengths of the sliced indices followed by E (scalar indices vanish).
- An auto-dim tensor `M(r, c): T[D, H] @auto_dim(r, c)` has shape `[D + count_r, H + count_c]`.
  Accessing `M[r, c]` raises the counts to at least (r, c) (capped by `@fixed`), keeping existing
  data in the top-left corner and filling new cells with the initial value; a read returns the
  whole tensor. A variable can be a table whose entries are auto-dim tensors (table indices first).

Errors are raised as `StateError(message)`; the executor adds the node and its location.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DTypeInfo
from ..ir.bound import BoundVar


class StateError(Exception):
    """A persistent-state access that is out of bounds or otherwise invalid at run time."""


def filled(dtype: DTypeInfo, shape: tuple[int, ...], init) -> np.ndarray:
    """A fresh array of `shape` holding `init` (or zeros), in `dtype`'s unpacked representation."""
    return np.full(shape, 0 if init is None else init, dtype=dtype.np_dtype)


@dataclass
class Selection:
    """A resolved table index: a scalar position or a `start..end` range."""

    start: int
    stop: int | None = None           # None: a scalar index

    @property
    def is_scalar(self) -> bool:
        return self.stop is None


@dataclass
class TableState:
    var: BoundVar
    sizes: list[int]
    entries: dict[tuple[int, ...], np.ndarray] = field(default_factory=dict)
    counts: list[int] = field(default_factory=list)     # auto-dim growth counts

    @classmethod
    def new(cls, var: BoundVar) -> TableState:
        t = var.table
        sizes = [t.fixed.get(i, 0) for i in t.indices]
        return cls(var, sizes, {}, [0] * len(t.auto_dim))

    # ---------------------------------------------------------------- shapes
    @property
    def entry_shape(self) -> tuple[int, ...]:
        base = self.var.table.entry_shape
        if not self.var.table.is_auto_dim:
            return base
        return tuple(b + c for b, c in zip(base, self.counts, strict=True))

    def fresh_entry(self) -> np.ndarray:
        return filled(self.var.dtype, self.entry_shape, self.var.init)

    # ---------------------------------------------------------------- index resolution
    def _check_scalar(self, pos: int, value: int) -> None:
        name = self.var.table.indices[pos]
        if value < 0:
            raise StateError(f"cache table {self.var.name} index {name}={value} is negative")
        fixed = self.var.table.fixed.get(name)
        if fixed is not None and value >= fixed:
            raise StateError(f"cache table {self.var.name} index {value} exceeds fixed size {fixed} "
                             f"(index `{name}` holds 0..{fixed - 1})")

    def _resolve_slice(self, pos: int, start: int | None, end: int | None) -> Selection:
        name = self.var.table.indices[pos]
        size = self.sizes[pos]
        s = 0 if start is None else start
        if s < 0:
            raise StateError(f"slice start {s} of `{self.var.name}` index `{name}` is negative")
        if end is None:
            e = size
        elif end < 0:
            if -end > size:
                raise StateError(f"slice end {end} of `{self.var.name}` index `{name}` reaches before 0 "
                                 f"(current size {size})")
            e = size + end
        else:
            e = end
        if e > size:
            raise StateError(f"slice {s}..{e} of `{self.var.name}` index `{name}` is past its current size "
                             f"{size} (slices never grow a table)")
        if e < s:
            raise StateError(f"slice end {e} is before its start {s} for `{self.var.name}` index `{name}`")
        return Selection(s, e)

    def _grow_auto(self, counts: list[int]) -> None:
        t = self.var.table
        new = list(self.counts)
        for k, (name, want) in enumerate(zip(t.auto_dim, counts, strict=True)):
            if want < 0:
                raise StateError(f"auto_dim {self.var.name} count {want} for `{name}` is negative")
            cap = t.fixed.get(name)
            if cap is not None and want > cap:
                raise StateError(f"auto_dim {self.var.name} exceeds fixed max {cap} for {k}")
            new[k] = max(new[k], want)
        if new == self.counts:
            return
        old_shape = self.entry_shape
        self.counts = new
        for key, entry in self.entries.items():
            grown = self.fresh_entry()
            grown[tuple(slice(0, n) for n in old_shape)] = entry
            self.entries[key] = grown

    def select(self, values: list[int | tuple[int | None, int | None]], *, write: bool) -> list[Selection]:
        """Resolve access indices (ints or (start, end) pairs) to selections; grows on scalars."""
        t = self.var.table
        n_tab = len(t.indices)
        tab_values, auto_values = values[:n_tab], values[n_tab:]
        if t.is_auto_dim and auto_values:
            if len(auto_values) != len(t.auto_dim) or not all(isinstance(v, int) for v in auto_values):
                raise StateError(f"auto_dim {self.var.name} needs {len(t.auto_dim)} scalar indices")
            self._grow_auto(list(auto_values))
        sels: list[Selection] = []
        for pos in range(n_tab):
            v = tab_values[pos] if pos < len(tab_values) else (None, None)
            if isinstance(v, tuple):
                if write:
                    raise StateError(f"cache.write to `{self.var.name}` needs scalar indices")
                sels.append(self._resolve_slice(pos, *v))
            else:
                self._check_scalar(pos, v)
                sels.append(Selection(v))
        for pos, sel in enumerate(sels):   # scalar accesses (read or write) grow sizes
            if sel.is_scalar and sel.start + 1 > self.sizes[pos]:
                self.sizes[pos] = sel.start + 1
        return sels

    # ---------------------------------------------------------------- access
    def read(self, sels: list[Selection]) -> np.ndarray:
        ranges = [range(s.start, s.start + 1) if s.is_scalar else range(s.start, s.stop) for s in sels]
        out_lead = tuple(len(r) for s, r in zip(sels, ranges, strict=True) if not s.is_scalar)
        out = np.empty(out_lead + self.entry_shape, dtype=self.var.dtype.np_dtype)
        flat = out.reshape((-1,) + self.entry_shape)
        for n, key in enumerate(np.ndindex(*[len(r) for r in ranges])):
            index = tuple(r[k] for r, k in zip(ranges, key, strict=True))
            entry = self.entries.get(index)
            if entry is None:   # unwritten entries read as init/zeros and are materialised
                entry = self.entries[index] = self.fresh_entry()
            flat[n] = entry
        return out

    def write(self, sels: list[Selection], value: np.ndarray) -> None:
        if value.shape != self.entry_shape:
            raise StateError(f"cache.write of shape {list(value.shape)} into `{self.var.name}` whose entries "
                             f"have shape {list(self.entry_shape)}")
        self.entries[tuple(s.start for s in sels)] = np.array(value, dtype=self.var.dtype.np_dtype, copy=True)

    def reset(self, prefix: list[int]) -> None:
        t = self.var.table
        if not prefix:
            self.entries.clear()
            self.sizes = [t.fixed.get(i, 0) for i in t.indices]
            self.counts = [0] * len(t.auto_dim)
            return
        for key in [k for k in self.entries if list(k[:len(prefix)]) == prefix]:
            del self.entries[key]
        for pos, name in enumerate(t.indices):
            fixed = t.fixed.get(name)
            self.sizes[pos] = fixed if fixed is not None else (
                max((k[pos] for k in self.entries), default=-1) + 1)
