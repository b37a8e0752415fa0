"""The Graph IR: what the DSL parser produces and every later stage consumes.

Plain frozen dataclasses mirroring the original's graph model (digest §2, §3.10) so the original's
graph JSON maps onto them one to one. Nothing here is resolved against a model yet: dims are the
DSL's strings ("B", "128", "B*D"), var references keep their index expressions. Binding
(`openinfer.ir.bind`) turns a Graph into a BoundGraph with concrete shapes.

Every node carries `index` (unique in the graph; a loop's index is greater than its body's, as
the original numbers them), `uuid` (stable: derived from the index and the node's text, so
re-parsing gives the same ids) and `loc`, the DSL source position it came from (None when the
graph came from JSON).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

from ..dtypes import DTypeInfo
from ..errors import SourceLoc


class MemoryKind(enum.Enum):
    DYNAMIC = "Dynamic"
    VOLATILE = "Volatile"
    CONSTANT = "Constant"
    PERSISTENT = "Persistent"

    @property
    def section(self) -> str:
        """The DSL section keyword."""
        return self.value.lower()


# --------------------------------------------------------------------------- values

@dataclass(frozen=True)
class InitValue:
    """An `@init(...)` literal. `value` is a bool, int or float as written; the variable's dtype
    decides how it is stored (JSON writes it as the original's ScalarValue)."""

    value: bool | int | float


@dataclass(frozen=True)
class AttrFloat:
    """f32 attribute value (only produced when resolving a model scalar; the DSL emits Double)."""

    value: float


@dataclass(frozen=True)
class AttrDouble:
    value: float


@dataclass(frozen=True)
class AttrInt:
    value: int


@dataclass(frozen=True)
class AttrUInt:
    value: int


@dataclass(frozen=True)
class AttrBool:
    value: bool


@dataclass(frozen=True)
class AttrStr:
    value: str


@dataclass(frozen=True)
class AttrIntList:
    value: tuple[int, ...]


@dataclass(frozen=True)
class AttrDimList:
    """An integer list with size-variable names among its items (`starts=[0, S]`); binding turns
    it into integers. Lists of integers alone stay AttrIntList (the original's type)."""

    value: tuple[int | str, ...]


@dataclass(frozen=True)
class AttrVar:
    """A reference to a scalar variable or model metadata, resolved at bind/run time."""

    value: str


@dataclass(frozen=True)
class AttrDType:
    value: DTypeInfo


@dataclass(frozen=True)
class AttrDTypeList:
    value: tuple[DTypeInfo, ...]


AttrValue = Union[AttrFloat, AttrDouble, AttrInt, AttrUInt, AttrBool, AttrStr, AttrIntList, AttrDimList,
                  AttrVar, AttrDType, AttrDTypeList]


@dataclass(frozen=True)
class Attr:
    name: str
    value: AttrValue


# --------------------------------------------------------------------------- references

@dataclass(frozen=True)
class VarRef:
    """`name` or `name[i, j]` as an op argument / transfer operand. Indices are int literals or
    identifiers (loop variables, sizevars); rendered as the original renders them: "W[l,0]"."""

    name: str
    indices: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        if not self.indices:
            return self.name
        return f"{self.name}[{','.join(str(i) for i in self.indices)}]"


@dataclass(frozen=True)
class CacheSingle:
    """One scalar cache index: an int literal (may be negative) or an identifier."""

    value: int | str


@dataclass(frozen=True)
class CacheSlice:
    """`start..end`, end exclusive; None means open (0 / current size)."""

    start: int | str | None = None
    end: int | str | None = None


CacheIndex = Union[CacheSingle, CacheSlice]


@dataclass(frozen=True)
class CacheAccess:
    """`A`, `A[]`, `A[i]`, `A[0..-3]`, `A[i, ..]`: `bracketed` tells `A` from `A[]`."""

    base: str
    indices: tuple[CacheIndex, ...] = ()
    bracketed: bool = False

    def __str__(self) -> str:
        """`A`, `A[]`, `A[i,0..3]`, `A[i,]` — as the original renders it (a full slice prints empty),
        so traces, node descriptions and messages all show one form."""
        if not self.bracketed:
            return self.base
        parts = []
        for ix in self.indices:
            if isinstance(ix, CacheSingle):
                parts.append(str(ix.value))
            elif ix.start is None and ix.end is None:
                parts.append("")
            else:
                parts.append(f"{'' if ix.start is None else ix.start}..{'' if ix.end is None else ix.end}")
        return f"{self.base}[{','.join(parts)}]"


# --------------------------------------------------------------------------- nodes

@dataclass(frozen=True)
class NodeBase:
    index: int
    uuid: str
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Assign(NodeBase):
    name: str = ""
    dtype: DTypeInfo | None = None
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Op(NodeBase):
    op: str = ""
    inputs: tuple[VarRef, ...] = ()
    attrs: tuple[Attr, ...] = ()
    output: str = ""

    def attr(self, name: str) -> AttrValue | None:
        for a in self.attrs:
            if a.name == name:
                return a.value
        return None


@dataclass(frozen=True)
class Branch(NodeBase):
    cond: str | None = None
    then_block: str = ""
    else_block: str | None = None


@dataclass(frozen=True)
class Barrier(NodeBase):
    pass


@dataclass(frozen=True)
class Dep(NodeBase):
    """`dep after(X) before(Y)`: X and Y name a node by its output/label, an op name or a dotted
    node kind such as `cache.write` (decisions.md)."""

    after: str = ""
    before: str = ""


@dataclass(frozen=True)
class CacheRead(NodeBase):
    src: CacheAccess = field(default_factory=lambda: CacheAccess(""))
    dst: VarRef = field(default_factory=lambda: VarRef(""))


@dataclass(frozen=True)
class CacheWrite(NodeBase):
    src: VarRef = field(default_factory=lambda: VarRef(""))
    dst: CacheAccess = field(default_factory=lambda: CacheAccess(""))


@dataclass(frozen=True)
class CacheIncrement(NodeBase):
    target: str = ""
    amount: int = 1


@dataclass(frozen=True)
class CacheDecrement(NodeBase):
    target: str = ""
    amount: int = 1


@dataclass(frozen=True)
class CacheReset(NodeBase):
    target: CacheAccess = field(default_factory=lambda: CacheAccess(""))


@dataclass(frozen=True)
class Transfer(NodeBase):
    src: VarRef = field(default_factory=lambda: VarRef(""))
    dst: VarRef = field(default_factory=lambda: VarRef(""))


@dataclass(frozen=True)
class Yield(NodeBase):
    vars: tuple[str, ...] = ()


@dataclass(frozen=True)
class Await(NodeBase):
    vars: tuple[str, ...] = ()


@dataclass(frozen=True)
class Loop(NodeBase):
    """`loop name (index in start..end) { body }`; bounds are int literals or identifiers."""

    name: str = ""
    var: str = ""
    start: int | str = 0
    end: int | str = 0
    body: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Return(NodeBase):
    pass


Node = Union[Assign, Op, Branch, Barrier, Dep, CacheRead, CacheWrite, CacheIncrement, CacheDecrement,
             CacheReset, Transfer, Yield, Await, Loop, Return]


# --------------------------------------------------------------------------- declarations, graph

@dataclass(frozen=True)
class VarDecl:
    name: str
    kind: MemoryKind
    dtype: DTypeInfo
    dims: tuple[str, ...] = ()
    init: InitValue | None = None
    ref_name: str | None = None
    pattern: str | None = None
    table_indices: tuple[str, ...] = ()
    table: bool = False
    auto_dim: tuple[str, ...] = ()
    fixed: tuple[tuple[str, int], ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)

    @property
    def is_scalar(self) -> bool:
        return not self.dims

    @property
    def is_prefix_table(self) -> bool:
        """`W(l) @pattern("w.{l}")`: one model tensor per index value (volatile/constant only)."""
        return bool(self.table_indices) and not self.table and self.kind is not MemoryKind.PERSISTENT


@dataclass(frozen=True)
class Block:
    name: str
    nodes: tuple[Node, ...] = ()
    loc: SourceLoc | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Graph:
    """Variables and blocks in declaration order; `next_index` is one past the largest node index."""

    vars: dict[str, VarDecl]
    blocks: dict[str, Block]
    next_index: int = 0
    source_name: str | None = field(default=None, compare=False)
    #: the source text lines, kept so later stages can quote the offending line in errors
    source_lines: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def line(self, loc: SourceLoc | None) -> str | None:
        if loc is None or not self.source_lines or not (1 <= loc.line <= len(self.source_lines)):
            return None
        return self.source_lines[loc.line - 1]


def walk(nodes) -> list[Node]:
    """All nodes in execution-text order, loop bodies included (each loop before its body)."""
    out: list[Node] = []
    for n in nodes:
        out.append(n)
        if isinstance(n, Loop):
            out.extend(walk(n.body))
    return out
