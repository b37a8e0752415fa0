"""The bound graph: a Graph resolved against a model, ready to run or to synthesize.

`bind()` (openinfer/ir/bind.py) produces it. Everything here is concrete: shapes are tuples of
ints, model data is named by key, each op node has its registry inference (mode, output type,
accumulation dtypes) and its attributes with values. Attribute values that depend on a variable
only known at run time are `RuntimeAttr`s; everything else is a plain Python value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import DTypeInfo
from .nodes import Graph, MemoryKind, Node, VarDecl


@dataclass(frozen=True)
class TableInfo:
    """A persistent variable indexed by `indices` (a @table and/or @auto_dim variable).

    `fixed` maps an index name to its @fixed size: for table indices the size is constant (reads
    of a full slice always have that length); for auto-dim indices it caps the growth count.
    """

    indices: tuple[str, ...]          # table indices, in declaration order (auto indices excluded)
    auto_dim: tuple[str, ...]         # auto-dim indices, one per entry dim
    fixed: dict[str, int]
    entry_shape: tuple[int, ...]      # shape of one entry (for auto_dim: the base shape)

    @property
    def is_auto_dim(self) -> bool:
        return bool(self.auto_dim)


@dataclass(frozen=True)
class BoundVar:
    """A declared variable, a prefix-table family, or an `assign` temporary."""

    name: str
    kind: MemoryKind | None            # None for `assign` temporaries
    dtype: DTypeInfo
    shape: tuple[int, ...]             # value shape (tables: shape of one entry)
    decl: VarDecl | None
    init: bool | int | float | None = None
    #: model key holding this variable's data (constant/volatile/dynamic/persistent initial value)
    model_key: str | None = None
    #: prefix tables: index values (as a tuple) -> model key
    prefix_keys: dict[tuple[int, ...], str] = field(default_factory=dict)
    table: TableInfo | None = None

    @property
    def table_is_auto_dim(self) -> bool:
        return self.table is not None and self.table.is_auto_dim

    @property
    def is_prefix_table(self) -> bool:
        return self.decl is not None and self.decl.is_prefix_table

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class RuntimeAttr:
    """An op attribute given by a scalar variable whose value is only known while running."""

    var: str
    dtype: DTypeInfo


@dataclass(frozen=True)
class OpBinding:
    """What binding learned about one `op` node."""

    spec: Any                          # openinfer.ops.registry.OpSpec
    inputs: tuple[Any, ...]            # TensorType of each input, as bound
    inference: Any                     # openinfer.ops.registry.Inference
    attrs: dict[str, Any]              # completed attributes (defaults filled; RuntimeAttr allowed)
    runtime_attrs: dict[str, RuntimeAttr]


@dataclass(frozen=True)
class BoundGraph:
    graph: Graph
    model: Any                         # openinfer.oinf Model (or None for model-less graphs)
    sizevars: dict[str, int]
    vars: dict[str, BoundVar]          # declared variables and assign temporaries
    ops: dict[int, OpBinding]          # node index -> binding, for every op node
    entry: str
    #: blocks started by the entry block's `yield` (all blocks but entry and branch targets)
    async_blocks: tuple[str, ...]
    #: node index -> the statically known loop bound values (start, end) when both are constants
    loop_bounds: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    #: dynamic sizevars -> their bounds (openinfer/dims.py); with `sizes` unset their dims are
    #: Dims (generation), else the plain values of `sizes` (a run of the reference at those sizes)
    dynamic: dict[str, int] = field(default_factory=dict)
    #: the sizevars of `sizevars` the caller fixed (what a rebinding at other sizes keeps)
    fixed: dict[str, int] = field(default_factory=dict)
    #: cache reads whose row count, known only at run time (`K[0..pos]`), sets a dynamic sizevar:
    #: node index -> ((dim of the destination, sizevar), ...)
    read_sizes: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    #: the sizevars the graph refers to (in dims, loop bounds, indices, attributes)
    used_sizevars: frozenset[str] = frozenset()

    def var(self, name: str) -> BoundVar:
        return self.vars[name]

    def nodes_of(self, block: str) -> tuple[Node, ...]:
        return self.graph.blocks[block].nodes
