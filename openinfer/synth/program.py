"""The Program: a target-neutral description of what the generated code does.

`lower()` (openinfer/synth/lower.py) builds it from a BoundGraph; passes rewrite it; the target
renderers (openinfer/targets/) turn it into source. Nothing here knows C or GLSL.

- Buffers: one per variable per frame. The entry block and each yield/await consumer run in
  their own frame (consumers work on snapshots); constants, prefix tables and persistent state
  are shared by all frames.
- Statements: the host schedule, one per graph node (a kernel call, a cache access, a loop, ...),
  each keeping the node's index for tracing and error messages.
- Kernels: deduplicated requests for compute functions, one per distinct op application
  (op, mode, types, static attributes); the target renders each one.
- The memory plan (openinfer/synth/memplan.py) assigns every arena and persistent buffer an offset.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Union

from ..dims import Dim, capacity, shape_sizevars, smallest_sizes
from ..dtypes import DTypeInfo
from ..ops.types import TensorType

# ---------------------------------------------------------------------------------------- storage

#: Where a buffer lives.
#:   weight      model data used in place from the .oinf image (constants, prefix-table entries)
#:   const       a constant without model data (its @init value), set once at create time
#:   pinned      arena memory never shared: dynamic inputs and observable volatile variables
#:   planned     arena memory shared between buffers whose lifetimes do not overlap
#:   persistent  persistent state (plain values and tables), kept across steps
#:   packed      a constant in a kernel's own layout, made once at create time (prepack.py); it
#:               lives in the persistent region, which is kept for the program's life
STORAGES = ("weight", "const", "pinned", "planned", "persistent", "packed")


@dataclass(frozen=True)
class Buffer:
    name: str                  # C identifier (unique in the program)
    var: str | None            # the graph variable it holds (None: a compiler scratch buffer)
    frame: str                 # "entry", a consumer block name, or "global" for shared storage
    dtype: DTypeInfo
    shape: tuple[int, ...]     # tables: the full dense shape (table sizes + entry shape)
    storage: str
    model_key: str | None = None
    init: bool | int | float | None = None
    #: volatile buffers re-initialised at the start of every step (first use is not a full write)
    needs_init: bool = False
    #: storage "packed": (the constant or prefix table it is made from, the kernel whose pack
    #: function makes it, that kernel's input); a prefix table's packed form is a dense table of
    #: packed entries
    packed_from: tuple[str, int, int] | None = None

    @property
    def numel(self) -> int:
        """Elements of storage: a dynamic dim counts at its bound (openinfer/dims.py)."""
        return math.prod(capacity(self.shape))

    @property
    def nbytes(self) -> int:
        return self.dtype.storage_nbytes(self.numel)

    @property
    def live_nbytes(self) -> int:
        """Bytes in use at the run-time sizes (a C expression's Dim where a size is dynamic)."""
        return self.dtype.storage_nbytes(math.prod(self.shape))


# ---------------------------------------------------------------------------------------- operands

@dataclass(frozen=True)
class Lit:
    value: int


@dataclass(frozen=True)
class LoopVar:
    name: str


@dataclass(frozen=True)
class ScalarOf:
    """The current value of a scalar variable (persistent counter, dynamic input, ...) as an int."""

    var: str


IntExpr = Union[Lit, LoopVar, ScalarOf]


@dataclass(frozen=True)
class Operand:
    """A variable as a statement reads or writes it; prefix tables carry their index values."""

    var: str
    indices: tuple[IntExpr, ...] = ()


@dataclass(frozen=True)
class Slice:
    """`start..end` of one table index; None: open (0 / the index's size); negative end: from size."""

    start: IntExpr | None
    end: IntExpr | None


Selection = Union[Lit, LoopVar, ScalarOf, Slice]

# ---------------------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class KernelRequest:
    """One compute function to generate. Equal requests share one function."""

    op: str
    mode: str                                  # normal | inplace | accumulate
    inputs: tuple[TensorType, ...]
    output: TensorType
    attrs: tuple[tuple[str, Any], ...]         # static attributes, defaults included, sorted
    runtime_attrs: tuple[tuple[str, DTypeInfo], ...]   # attributes passed at call time
    acc: tuple[DTypeInfo, ...] | None
    broadcast: bool
    #: the output buffer is one of the inputs (in-place element-wise): no `restrict` on it
    aliased: bool = False
    #: op "fused" (openinfer/synth/fusion.py): the element-wise steps, in order, and where each
    #: step's arguments come from: ("in", i) the call's input i, ("step", j) step j's result
    chain: tuple[KernelRequest, ...] = ()
    chain_args: tuple[tuple[tuple[str, int], ...], ...] = ()
    #: inputs that arrive in the target's pre-packed layout (openinfer/synth/prepack.py): the
    #: target renders the kernel for that layout and a function that packs such an input
    packed: tuple[int, ...] = ()
    #: an element-wise request ("fused") applied to every element of this op's result before it
    #: is stored, for targets that render it (openinfer/synth/fusion.py: matmul epilogues). Its
    #: input 0 is that result, its inputs 1.. are the last inputs of this request (after the op's
    #: own, `own_inputs`), and its output is this request's output. Or a rope request
    #: (`fold_rope`): the result, viewed as the rope's input 0 ([.., heads, dh]), rotated pair by
    #: pair at the position that is this request's input after the op's own; the output stays
    #: the op's
    epilogue: KernelRequest | None = None
    #: a row-normalisation request (rms_norm over the last axis) whose result is this matmul's
    #: input 0, for targets that render it (openinfer/synth/fusion.py `fold_norms`): the kernel's
    #: input 0 is the norm's input x and it normalises each row of x itself; the norm's other
    #: inputs (its gamma) are this request's last inputs, after an epilogue's
    prologue: KernelRequest | None = None
    #: inputs the kernel reads through a transposition (openinfer/synth/fusion.py
    #: `fold_transposes`): (input index, perm); that input arrives as the transpose's operand, of
    #: the shape in `inputs`' entry permuted back, and the kernel indexes it as `inputs` says
    input_perms: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: a pooling request (max_pool2d / avg_pool2d, no padding, stride = kernel) over this
    #: convolution's result, after its epilogue, for targets that render it
    #: (openinfer/synth/fusion.py `fold_pools`): the pool's input is the convolution's result
    #: (`own_output`), and this request's output is the pool's
    pool: KernelRequest | None = None

    #: What each input is to the kernel (empty: every input is the op's own). The fusion passes
    #: that add operands name them: "op" (the op's own; after `fold_norms` input 0 is the norm's
    #: x), "epilogue" (an epilogue chain's inputs after the product, in order), "rope" (a rope
    #: epilogue's position), "prologue" (a prologue's inputs after x, in order).
    roles: tuple[str, ...] = ()

    def operand_indices(self, role: str) -> tuple[int, ...]:
        """The positions of the inputs that play `role` (see `roles`), in order."""
        if not self.roles:
            return tuple(range(len(self.inputs))) if role == "op" else ()
        return tuple(i for i, r in enumerate(self.roles) if r == role)

    @property
    def own_output(self) -> TensorType:
        """The op's own result (a pool's input, where one follows)."""
        return self.pool.inputs[0] if self.pool else self.output

    @property
    def own_inputs(self) -> tuple[TensorType, ...]:
        """The op's own inputs (without an epilogue's or a prologue's)."""
        return tuple(self.inputs[i] for i in self.operand_indices("op"))

    @property
    def prologue_inputs(self) -> tuple[TensorType, ...]:
        """A prologue's inputs after x."""
        return tuple(self.inputs[i] for i in self.operand_indices("prologue"))

    @property
    def sizes(self) -> tuple[str, ...]:
        """The dynamic sizevars the kernel's extents depend on: passed as `int64_t sz_<NAME>`
        after the runtime attributes (openinfer/dims.py)."""
        names = set(shape_sizevars(*(t.shape for t in (*self.inputs, self.output))))
        for _, v in self.attrs:
            names.update(shape_sizevars(v if isinstance(v, tuple | list) else (v,)))
        for sub in (*self.chain, *(r for r in (self.epilogue, self.prologue, self.pool) if r is not None)):
            names.update(sub.sizes)
        return tuple(sorted(names))

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default


# ---------------------------------------------------------------------------------------- statements

@dataclass(frozen=True)
class Stmt:
    node: int                  # graph node index (-1 for compiler-inserted statements)
    desc: str                  # the node's description (traces, error messages)


@dataclass(frozen=True)
class Call(Stmt):
    kernel: int                # index into Program.kernels
    inputs: tuple[Operand, ...] = ()
    output: Operand | None = None
    runtime_attrs: tuple[tuple[str, str], ...] = ()   # (attribute, scalar variable)
    #: in-place ops whose kernel cannot alias: `output` is scratch, copied here afterwards
    copy_to: Operand | None = None
    #: the node of a cache.write whose table row this call's output is (openinfer/synth/
    #: table_views.py): the row index's run-time checks name that node, as the copy's did
    store_node: int | None = None

    @property
    def result(self) -> Operand:
        """The graph variable this call finally writes."""
        return self.copy_to or self.output


@dataclass(frozen=True)
class Copy(Stmt):
    dst: Operand | None = None
    src: Operand | None = None


@dataclass(frozen=True)
class TableRead(Stmt):
    var: str = ""
    select: tuple[Selection, ...] = ()
    dst: str = ""
    #: (dim of dst, dynamic sizevar) pairs the run-time row count sets (`K[0..pos] >> kc` with
    #: `kc: f32[P, D]` sets P; openinfer/ir/bind.py `_run_time_rows`)
    sets: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class TableWrite(Stmt):
    var: str = ""
    index: tuple[IntExpr, ...] = ()
    src: Operand | None = None


@dataclass(frozen=True)
class ScalarStep(Stmt):
    """cache.increment / cache.decrement: `var += amount` with the dtype's wrap/rounding."""

    var: str = ""
    amount: int = 0


@dataclass(frozen=True)
class StateReset(Stmt):
    var: str = ""
    prefix: tuple[IntExpr, ...] = ()


@dataclass(frozen=True)
class Loop(Stmt):
    var: str = ""
    start: IntExpr | None = None
    end: IntExpr | None = None
    body: tuple[Statement, ...] = ()


@dataclass(frozen=True)
class Branch(Stmt):
    cond: str | None = None
    then_block: str = ""
    else_block: str | None = None


@dataclass(frozen=True)
class Return(Stmt):
    pass


@dataclass(frozen=True)
class Yield(Stmt):
    vars: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Await(Stmt):
    vars: tuple[str, ...] = ()


@dataclass(frozen=True)
class Marker(Stmt):
    """A node with no run-time effect (assign, barrier, dep, or a reshape made a view by
    openinfer/synth/views.py): only its trace event."""

    kind: str = ""


Statement = Union[Call, Copy, TableRead, TableWrite, ScalarStep, StateReset, Loop, Branch, Return, Yield, Await,
                  Marker]


# ---------------------------------------------------------------------------------------- program

@dataclass(frozen=True)
class VarInfo:
    """A variable of the generated ABI (`<NAME>_VAR_<X>`): what `set`/`get` exchange."""

    id: int
    name: str
    kind: str                  # dynamic | volatile | constant | persistent
    dtype: DTypeInfo
    shape: tuple[int, ...]     # tables: the full dense shape
    settable: bool             # dynamic inputs
    gettable: bool             # observable after (and during) a step
    loc: str = ""              # where the graph declares it
    #: receives cache reads of run-time row counts: `shape` is its capacity, the current
    #: extent is kept at run time (`*_shape()` in the ABI)
    dynamic_shape: bool = False

    @property
    def nbytes(self) -> int:
        return self.dtype.storage_nbytes(math.prod(capacity(self.shape)))

    @property
    def live_nbytes(self) -> int:
        return self.dtype.storage_nbytes(math.prod(self.shape))


@dataclass(frozen=True)
class PrefixTable:
    """`W(l) @pattern("w.{l}")`: the model keys behind each index tuple (row-major over `sizes`)."""

    var: str
    dtype: DTypeInfo
    shape: tuple[int, ...]
    sizes: tuple[int, ...]                      # one past the largest index, per table index
    keys: tuple[str | None, ...]                # flattened; None where the model has no tensor
    pattern: str = ""


@dataclass(frozen=True)
class TableLayout:
    """A persistent @table with every index @fixed: dense storage `sizes + entry_shape`."""

    var: str
    sizes: tuple[int, ...]
    entry_shape: tuple[int, ...]
    indices: tuple[str, ...] = ()               # the index names, for error messages


@dataclass(frozen=True)
class Program:
    name: str
    blocks: dict[str, tuple[Statement, ...]]
    entry: str
    consumers: tuple[str, ...]
    buffers: dict[str, Buffer]                   # by Buffer.name
    frames: dict[str, dict[str, str]]            # frame -> var -> buffer name
    kernels: tuple[KernelRequest, ...]
    vars: tuple[VarInfo, ...]
    prefix_tables: dict[str, PrefixTable]
    tables: dict[str, TableLayout]
    sizevars: dict[str, int]
    model_path: str | None
    weight_keys: tuple[str, ...]                 # model tensors the program reads, sorted
    weight_bytes: int
    weights: dict[str, TensorType] = field(default_factory=dict)   # key -> type of the model tensor
    source_name: str | None = None
    node_locations: dict[int, str] = field(default_factory=dict)   # node index -> "file:line:col"
    #: blocks that consumers run (consumers and the branch targets they reach) and entry's
    frame_blocks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: graph nodes merged into a following call by fusion (no statement, trace event or hook)
    fused_nodes: frozenset[int] = frozenset()

    def buffer(self, frame: str, var: str) -> Buffer:
        return self.buffers[self.frames[frame][var]]


def _renumber(stmts, new_id: dict[int, int]) -> tuple[Statement, ...]:
    out = []
    for s in stmts:
        if isinstance(s, Call):
            s = replace(s, kernel=new_id[s.kernel])
        elif isinstance(s, Loop):
            s = replace(s, body=_renumber(s.body, new_id))
        out.append(s)
    return tuple(out)


def calls(blocks: dict[str, tuple[Statement, ...]]) -> Iterator[Call]:
    """Every Call of `blocks`, loop bodies included (a branch's arms are blocks of their own)."""
    def walk(stmts):
        for s in stmts:
            if isinstance(s, Call):
                yield s
            elif isinstance(s, Loop):
                yield from walk(s.body)
    for stmts in blocks.values():
        yield from walk(stmts)


def prune_kernels(blocks: dict[str, tuple[Statement, ...]], kernels) -> tuple[
        dict[str, tuple[Statement, ...]], tuple[KernelRequest, ...], dict[int, int]]:
    """Drops the kernels no call uses any more (after a pass replaced them), keeping the others'
    order (deterministic); returns the renumbered blocks, the kernels and the old -> new ids."""
    used = {c.kernel for c in calls(blocks)}
    keep = [i for i in range(len(kernels)) if i in used]
    new_id = {old: new for new, old in enumerate(keep)}
    return ({name: _renumber(stmts, new_id) for name, stmts in blocks.items()},
            tuple(kernels[i] for i in keep), new_id)


def dynamic_ranges(prog: Program) -> dict[str, tuple[int, int, str]]:
    """Each dynamic sizevar of `prog`: (smallest value, bound, the dim that sets the smallest)."""
    bounds = {k: int(v) for k, v in sorted(prog.sizevars.items()) if isinstance(v, Dim)}
    dims: list[int] = [d for v in prog.vars for d in v.shape]
    for req in prog.kernels:
        for t in (*req.inputs, req.output):
            dims.extend(t.shape)
    return {k: (lo, bounds[k], why) for k, (lo, why) in smallest_sizes(dims, bounds).items()}
