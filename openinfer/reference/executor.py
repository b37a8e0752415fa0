"""The NumPy reference interpreter: runs a bound graph step by step; the oracle for every target.

Execution model (digest §3 with decisions.md; see docs/semantics.md):

- A step runs the `entry` block. Before it, every dynamic variable must have been inserted since
  the previous step; volatile variables and `assign` temporaries are re-initialised (model data,
  `@init`, or zeros); constants are read-only model data; persistent state lives on.
- Variables have value semantics: every name owns its array. `transfer a >> b` and cache reads
  and writes copy; `fetch` returns a copy. (The original aliased transfer's buffers.)
- `branch` calls a block as a subroutine; `return` ends the current block, leaving any loops it
  is in; in `entry` it ends the step.
- `yield a, b` in entry runs every consumer block (all blocks but entry and branch targets, by
  name) on a snapshot of the yielded variables; entry then goes on with its own values. At entry's
  `await`, every variable a consumer wrote becomes visible to entry. Binding guarantees at most one
  consumer writes each variable, so the order consumers run in does not matter.
- `barrier` and `dep` only constrain the synthesizer; here they are no-ops that leave a trace event.

A failing node raises `ExecutionError` naming the node and its source location; the step is
abandoned (state it already changed stays changed, as in the original and in generated code) and
the executor remains usable.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ..api import bind_inputs
from ..dims import Dim
from ..dtypes import Kind
from ..errors import BindError, ExecutionError, OpenInferError
from ..ir import nodes as ir
from ..ir.bind import rebind
from ..ir.bound import BoundGraph, BoundVar
from ..ir.describe import describe
from ..numerics import round_float
from ..ops.errors import OpRuntimeError, OpTypeError
from ..ops.types import TensorType
from ..trace import TraceEvent, emit_line, trace_mode
from .kernels import run_kernel
from .state import StateError, TableState, filled

_KIND = {
    ir.Assign: "Assign", ir.Op: "OpExecute", ir.CacheRead: "CacheRead", ir.CacheWrite: "CacheWrite",
    ir.CacheIncrement: "CacheIncrement", ir.CacheDecrement: "CacheDecrement", ir.CacheReset: "CacheReset",
    ir.Barrier: "Barrier", ir.Dep: "Dep", ir.Transfer: "Transfer", ir.Yield: "Yield", ir.Await: "Await",
    ir.Branch: "Branch", ir.Loop: "Loop", ir.Return: "Return",
}


class _Return(Exception):
    """Unwinds the current block (through its loops) on `return`."""


@dataclass
class _Frame:
    """The variables one thread of execution sees: entry, or one consumer block's snapshot."""

    values: dict[str, np.ndarray]
    loops: dict[str, int] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)


@cache
def _physical_memory() -> int:
    """Bytes of RAM (unbounded where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_sizes(sizes: Mapping[str, int], dynamic) -> None:
    """set_sizes' arguments, for either engine: names among `dynamic`'s, values integers (each
    engine then checks its range: the rebinding here, NAME_set_size in the library)."""
    if not dynamic:
        raise ExecutionError("set_sizes: there are no dynamic sizevars (give them with dynamic={...} "
                             "or --dynamic NAME=BOUND)")
    unknown = sorted(set(sizes) - set(dynamic))
    if unknown:
        raise ExecutionError(f"set_sizes: {', '.join(unknown)} not dynamic (dynamic: {', '.join(dynamic)})")
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ExecutionError(f"set_sizes: {name}={value!r} is not a size")


class ReferenceExecutor:
    """Runs steps of a bound graph. Same methods as the compiled simulator's executor."""

    def __init__(self, bound: BoundGraph, *, trace: bool | str | None = None):
        #: a graph with dynamic sizevars runs at plain sizes: their bounds until set_sizes
        self._sizes = {k: int(bound.sizevars[k]) for k in bound.dynamic}
        if any(isinstance(v, Dim) for v in bound.sizevars.values()):
            bound = rebind(bound, self._sizes)
        self.bound = bound
        self.model = bound.model
        env = trace_mode()
        self._trace_mode = env if trace is None else ("full" if trace == "full" else ("1" if trace else None))
        self._print = env is not None
        self._events: list[TraceEvent] = []
        self._descs: dict[int, str] = {}     # node descriptions, formatted once
        self._step = 0
        self._constants: dict[str, np.ndarray] = {}
        self._inserted: dict[str, np.ndarray] = {}
        self._persistent: dict[str, np.ndarray] = {}
        self._tables: dict[str, TableState] = {}
        self._entry = _Frame({})
        self._pending: list[_Frame] = []      # consumer frames started by a yield, not yet awaited
        self.reset()

    # ------------------------------------------------------------------ public API
    def insert(self, name: str | None = None, value=None, /, **values) -> None:
        """Set dynamic inputs for the next step: `insert(x=arr)` or `insert("x", arr)`."""
        if name is not None:
            values = {name: value, **values}
        for var_name, v in values.items():
            var = self.bound.vars.get(var_name)
            if var is None or var.kind is not ir.MemoryKind.DYNAMIC:
                what = "not declared" if var is None else f"{var.kind.section if var.kind else 'a temporary'}"
                raise ExecutionError(f"cannot insert `{var_name}`: it is {what}; only dynamic variables are inputs")
            self._inserted[var_name] = coerce(var, v)
            self._entry.values[var_name] = self._inserted[var_name].copy()

    def set_sizes(self, **sizes: int) -> None:
        """Run the next steps with dynamic sizevars at these values (`set_sizes(S=17)`), each
        between 1 and its bound; the others keep theirs. Inputs must be inserted again at the new
        shapes; persistent state (static shapes) is kept."""
        check_sizes(sizes, self._sizes)
        call = f"set_sizes({', '.join(f'{k}={v}' for k, v in sizes.items())})"
        if self._rebind({k: int(v) for k, v in sizes.items()}, lambda exc: ExecutionError(f"{call}: {exc}")):
            self._inserted.clear()

    def sizes(self) -> dict[str, int]:
        """The current values of the dynamic sizevars."""
        return dict(self._sizes)

    def run_step(self) -> None:
        for _ in self.iterate():
            pass

    def iterate(self) -> Iterator[TraceEvent]:
        """Run one step node by node, yielding each node's trace event as it completes.

        `fetch` works between events (it sees the values as they are at that point).
        """
        self._begin_step()
        try:
            try:
                yield from self._run_block(self.bound.entry, self._entry)
            except _Return:
                pass
            if self._pending:
                self._merge_consumers()
        finally:
            self._inserted.clear()
            self._pending.clear()
            self._step += 1

    def fetch(self, name: str) -> np.ndarray:
        """A copy of `name`'s current value (any variable, including persistent ones)."""
        var = self.bound.vars.get(name)
        if var is None:
            raise ExecutionError(f"cannot fetch `{name}`: no such variable")
        if var.kind is ir.MemoryKind.PERSISTENT:
            if var.table is not None:
                t = self._tables[name]
                return t.read(t.select([], write=False))
            return self._persistent[name].copy()
        if name in self._entry.values:
            return self._entry.values[name].copy()
        if var.kind is ir.MemoryKind.CONSTANT:
            return self._constant(var).copy()
        raise ExecutionError(f"cannot fetch `{name}`: it has no value yet (run a step first)")

    def trace(self) -> list[TraceEvent]:
        """Trace events of every step run so far (tracing must be on: trace=True or OPENINFER_TRACE)."""
        return list(self._events)

    def reset(self) -> None:
        """Clear all persistent state back to its initial values (the generated `*_reset`)."""
        self._persistent.clear()
        self._tables.clear()
        for var in self.bound.vars.values():
            if var.kind is not ir.MemoryKind.PERSISTENT:
                continue
            if var.table is not None:
                try:
                    self._tables[var.name] = TableState.new(var)
                except MemoryError as exc:
                    raise self._out_of_memory(var, exc) from None
            else:
                self._persistent[var.name] = self._initial(var)

    # ------------------------------------------------------------------ values
    def _initial(self, var: BoundVar) -> np.ndarray:
        if var.model_key is not None:
            arr = np.array(self.model.tensor(var.model_key), dtype=var.dtype.np_dtype, copy=True)
            # a dynamic first dim below its bound: the first rows (the binder checked the rest)
            return arr if arr.shape == var.shape else np.ascontiguousarray(arr[:var.shape[0]])
        # Refused before allocating when it exceeds the machine's memory: where the kernel
        # overcommits, a huge zeroed allocation succeeds and the process is killed on first touch.
        nbytes = var.numel * var.dtype.np_dtype.itemsize
        if nbytes > _physical_memory():
            raise self._out_of_memory(var, MemoryError(f"{nbytes} bytes; this machine has {_physical_memory()}"))
        try:
            return filled(var.dtype, var.shape, var.init)
        except MemoryError as exc:
            raise self._out_of_memory(var, exc) from None

    def _out_of_memory(self, var: BoundVar, exc: MemoryError) -> ExecutionError:
        loc = var.decl.loc if var.decl is not None else None
        return ExecutionError(f"`{var.name}` ({var.dtype.name}{list(var.shape)}) does not fit in memory: {exc}", loc,
                              source_line=self.bound.graph.line(loc))

    def _constant(self, var: BoundVar) -> np.ndarray:
        arr = self._constants.get(var.name)
        if arr is None:
            arr = self._initial(var)
            arr.flags.writeable = False
            self._constants[var.name] = arr
        return arr

    def _begin_step(self) -> None:
        missing = [v for v in self.bound.vars.values()
                   if v.kind is ir.MemoryKind.DYNAMIC and v.name not in self._inserted]
        if missing:
            var = missing[0]
            names = ", ".join(f"`{v.name}`" for v in missing)
            raise ExecutionError(f"dynamic variable{'s' if len(missing) > 1 else ''} {names} not set before this "
                                 f"step", var.decl.loc if var.decl else None,
                                 source_line=self.bound.graph.line(var.decl.loc if var.decl else None),
                                 hint="call insert(...) with every dynamic input before each step")
        self._entry = _Frame(self._fresh_values(dict(self._inserted)))

    def _fresh_values(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for var in self.bound.vars.values():
            if var.kind is ir.MemoryKind.VOLATILE and not var.is_prefix_table:
                values[var.name] = self._initial(var)
            elif var.kind is None:
                values[var.name] = self._initial(var)
            elif var.kind is ir.MemoryKind.DYNAMIC and var.name in values:
                values[var.name] = values[var.name].copy()
        return values

    def _read(self, ref: ir.VarRef, frame: _Frame, node) -> np.ndarray:
        var = self.bound.vars[ref.name]
        if var.is_prefix_table:
            index = tuple(self._index(i, frame, node) for i in ref.indices)
            key = var.prefix_keys.get(index)
            if key is None:
                raise StateError(f"`{ref}` resolves to index {index}, which has no model tensor for prefix table "
                                 f"`{var.name}` (pattern \"{var.decl.pattern}\")")
            arr = self._constants.get(f"{var.name}{list(index)}")
            if arr is None:
                arr = np.array(self.model.tensor(key), dtype=var.dtype.np_dtype, copy=True)
                arr.flags.writeable = False
                self._constants[f"{var.name}{list(index)}"] = arr
            return arr
        if var.kind is ir.MemoryKind.CONSTANT:
            return self._constant(var)
        if var.kind is ir.MemoryKind.PERSISTENT:
            return self._persistent[var.name]
        value = frame.values.get(var.name)
        if value is None:
            raise StateError(f"`{var.name}` has no value in block context")
        return value

    def _write(self, name: str, value: np.ndarray, frame: _Frame) -> None:
        frame.values[name] = value
        frame.written.add(name)

    def _index(self, v: int | str, frame: _Frame, node) -> int:
        """A scalar index: literal, loop variable, sizevar, or persistent integer scalar."""
        if isinstance(v, int):
            return v
        if v in frame.loops:
            return frame.loops[v]
        if v in self.bound.sizevars:
            return self.bound.sizevars[v]
        if v in self._persistent:
            return int(self._persistent[v].reshape(()).item())
        value = frame.values.get(v)
        if value is not None and value.size == 1:
            return int(value.reshape(()).item())
        raise StateError(f"unknown index `{v}`")

    def _scalar(self, name: str, frame: _Frame):
        var = self.bound.vars[name]
        if var.kind is ir.MemoryKind.PERSISTENT:
            return self._persistent[name].reshape(()).item()
        if var.kind is ir.MemoryKind.CONSTANT:
            return self._constant(var).reshape(()).item()
        return frame.values[name].reshape(()).item()

    # ------------------------------------------------------------------ blocks
    def _run_block(self, name: str, frame: _Frame) -> Iterator[TraceEvent]:
        yield from self._run_nodes(name, self.bound.graph.blocks[name].nodes, frame)

    def _run_nodes(self, block: str, nodes, frame: _Frame) -> Iterator[TraceEvent]:
        for node in nodes:
            yield from self._run_node(block, node, frame)

    def _event(self, block: str, node, start: int, params=(), output=(), frame: _Frame | None = None) -> TraceEvent:
        end = time.perf_counter_ns()
        values = {}
        if self._trace_mode == "full" and frame is not None:
            values = {o: _summary(frame.values[o]) for o in output if o in frame.values}
        desc = self._descs.get(node.index)
        if desc is None:
            desc = self._descs[node.index] = describe(node)
        event = TraceEvent(_KIND[type(node)], node.index, node.uuid, block, desc,
                           node.op if isinstance(node, ir.Op) else None, tuple(params), tuple(output),
                           start, end - start, self._step, values)
        if self._trace_mode:
            self._events.append(event)
            if self._print:
                emit_line(event)
        return event

    def _fail(self, node, block: str, exc: Exception) -> ExecutionError:
        return ExecutionError(f"in `{describe(node)}` (block `{block}`, step {self._step}): {exc}", node.loc,
                              source_line=self.bound.graph.line(node.loc))

    def _run_node(self, block: str, node, frame: _Frame) -> Iterator[TraceEvent]:
        start = time.perf_counter_ns()
        if isinstance(node, ir.Loop):
            try:
                lo, hi = (self._bound_value(b, frame) for b in (node.start, node.end))
            except (StateError, KeyError) as exc:
                raise self._fail(node, block, exc) from None
            yield self._event(block, node, start, (str(node.start), str(node.end)))
            try:
                for i in range(lo, hi):
                    frame.loops[node.var] = i
                    yield from self._run_nodes(block, node.body, frame)
            finally:
                frame.loops.pop(node.var, None)
            return
        if isinstance(node, ir.Branch):
            target = node.then_block
            if node.cond is not None:
                target = node.then_block if self._scalar(node.cond, frame) else node.else_block
            yield self._event(block, node, start, (node.cond,) if node.cond else (), (target,))
            try:
                yield from self._run_block(target, frame)
            except _Return:
                pass
            return
        if isinstance(node, ir.Return):
            yield self._event(block, node, start)
            raise _Return()
        if isinstance(node, ir.Yield) and block == self.bound.entry:
            yield from self._start_consumers(node, frame)
            yield self._event(block, node, start, tuple(node.vars), ())
            return
        try:
            params, output = self._execute(block, node, frame)
        except (StateError, OpRuntimeError, OpTypeError, ValueError, FloatingPointError, MemoryError) as exc:
            raise self._fail(node, block, exc) from None
        except OpenInferError:
            raise
        yield self._event(block, node, start, params, output, frame)

    def _bound_value(self, b: int | str, frame: _Frame) -> int:
        if isinstance(b, int):
            return b
        if b in self.bound.sizevars:
            return self.bound.sizevars[b]
        return int(self._scalar(b, frame))

    # ------------------------------------------------------------------ nodes
    def _execute(self, block: str, node, frame: _Frame) -> tuple[tuple, tuple]:
        """Run a non-control-flow node; returns (params, output) names for its trace event."""
        if isinstance(node, ir.Op):
            return self._op(node, frame)
        if isinstance(node, ir.CacheRead):
            value = self._cache_read(node.src, frame, node)
            sets = self.bound.read_sizes.get(node.index)
            if sets:
                self._sizes_from_read({name: value.shape[k] for k, name in sets})
            dst = self.bound.vars[node.dst.name]
            if dst.table is None and not self.bound.vars[node.src.base].table_is_auto_dim:
                _check_capacity(value.shape, dst)
            self._write(node.dst.name, value, frame)
            return (str(node.src),), (node.dst.name,)
        if isinstance(node, ir.CacheWrite):
            self._cache_write(node, frame)
            return (str(node.src),), (str(node.dst),)
        if isinstance(node, (ir.CacheIncrement, ir.CacheDecrement)):
            amount = node.amount if isinstance(node, ir.CacheIncrement) else -node.amount
            var = self.bound.vars[node.target]
            self._persistent[var.name] = _add_scalar(self._persistent[var.name], amount, var)
            return (str(node.amount),), (node.target,)
        if isinstance(node, ir.CacheReset):
            self._cache_reset(node.target, frame, node)
            return (), (str(node.target),)
        if isinstance(node, ir.Transfer):
            self._write(node.dst.name, np.array(self._read(node.src, frame, node), copy=True), frame)
            return (str(node.src),), (str(node.dst),)
        if isinstance(node, ir.Yield):     # a consumer's closing yield: its values wait for await
            return tuple(node.vars), ()
        if isinstance(node, ir.Await):
            if block == self.bound.entry:
                self._merge_consumers()
            return (), tuple(node.vars)
        if isinstance(node, ir.Assign):
            return (), (node.name,)
        return (), ()      # Barrier, Dep: ordering constraints for the synthesizer only

    def _sizes_from_read(self, rows: dict[str, int]) -> None:
        """A cache read whose run-time row count sets dynamic sizes (`K[0..pos] >> kc` with kc:
        [P, D]): the graph is bound again at them, and the nodes after the read run at the new
        sizes (values already computed keep theirs; inputs cannot depend on such a size)."""
        self._rebind(rows, lambda exc: StateError(
            f"the rows read set {', '.join(f'{k} = {v}' for k, v in rows.items())}: {exc}"))

    def _rebind(self, sizes: dict[str, int], error) -> bool:
        """Bind the graph again with these dynamic sizes changed (`error(exc)`: what a size the
        graph cannot take raises); the values derived from the old binding go. False if nothing
        changed."""
        want = {**self._sizes, **sizes}
        if want == self._sizes:
            return False
        try:
            self.bound = rebind(self.bound, want)
        except BindError as exc:
            raise error(exc) from None
        self._sizes = want
        self._constants.clear()
        self._descs.clear()
        return True

    def _op(self, node: ir.Op, frame: _Frame) -> tuple[tuple, tuple]:
        binding = self.bound.ops[node.index]
        inputs = [self._read(ref, frame, node) for ref in node.inputs]
        if binding.spec.category == "mutation" and inputs[0].shape != tuple(binding.inputs[0].shape):
            # fill / arange read only x's shape: a variable first written after a read set a size
            # (a mask counted over the cached keys) takes the size now, not the one it held before
            inputs[0] = np.zeros(binding.inputs[0].shape, inputs[0].dtype)
        inference = binding.inference
        attrs = inference.attrs       # the very object: run_kernel skips re-validating it
        if binding.runtime_attrs:
            attrs = dict(binding.attrs)
            for name, rt in binding.runtime_attrs.items():
                attrs[name] = self._scalar(rt.var, frame)
        if any(a.shape != t.shape for a, t in zip(inputs, binding.inputs, strict=True)):
            # an input took a run-time shape (a growing cache read): type the op for what it got
            types = [TensorType(t.dtype, a.shape) for t, a in zip(binding.inputs, inputs, strict=True)]
            in_place = any(r.name == node.output for r in node.inputs)
            declared = binding.inference.out
            try:   # the declared output still decides the op's form (is_finite, reshape) where it fits
                inference = binding.spec.infer(types, dict(binding.inference.attrs), declared,
                                               output_name_is_input=in_place)
            except OpTypeError:
                inference = binding.spec.infer(types, dict(binding.inference.attrs), None,
                                               output_name_is_input=in_place)
        result = run_kernel(binding.spec, inputs, attrs, inference)
        self._write(node.output, np.asarray(result), frame)
        return tuple(str(r) for r in node.inputs), (node.output,)

    # ------------------------------------------------------------------ cache
    def _access_values(self, acc: ir.CacheAccess, frame: _Frame, node) -> list:
        out: list = []
        for ix in acc.indices:
            if isinstance(ix, ir.CacheSingle):
                out.append(self._index(ix.value, frame, node))
            else:
                start = None if ix.start is None else self._index(ix.start, frame, node)
                end = None if ix.end is None else self._index(ix.end, frame, node)
                out.append((start, end))
        return out

    def _cache_read(self, acc: ir.CacheAccess, frame: _Frame, node) -> np.ndarray:
        var = self.bound.vars[acc.base]
        if var.table is None:
            return self._persistent[var.name].copy()
        table = self._tables[var.name]
        return table.read(table.select(self._access_values(acc, frame, node), write=False))

    def _cache_write(self, node: ir.CacheWrite, frame: _Frame) -> None:
        var = self.bound.vars[node.dst.base]
        value = self._read(node.src, frame, node)
        if var.table is None:
            if value.shape != var.shape:
                raise StateError(f"cache.write of shape {list(value.shape)} into `{var.name}` of shape "
                                 f"{list(var.shape)}")
            self._persistent[var.name] = np.array(value, copy=True)
            return
        table = self._tables[var.name]
        table.write(table.select(self._access_values(node.dst, frame, node), write=True), value)

    def _cache_reset(self, acc: ir.CacheAccess, frame: _Frame, node) -> None:
        var = self.bound.vars[acc.base]
        if var.table is None:
            self._persistent[var.name] = self._initial(var)
            return
        prefix = [v for v in self._access_values(acc, frame, node) if not isinstance(v, tuple)]
        self._tables[var.name].reset(prefix)

    # ------------------------------------------------------------------ yield / await
    def _start_consumers(self, node: ir.Yield, frame: _Frame) -> Iterator[TraceEvent]:
        """Run each consumer on a snapshot of the yielded variables (see the module docstring)."""
        for name in self.bound.async_blocks:
            values = self._fresh_values({})
            # the snapshot goes over the fresh values: a yielded volatile or temporary keeps entry's value
            values.update({v: np.array(frame.values[v], copy=True) for v in node.vars if v in frame.values})
            consumer = _Frame(values)
            try:
                yield from self._run_block(name, consumer)
            except _Return:
                pass
            self._pending.append(consumer)

    def _merge_consumers(self) -> None:
        for consumer in self._pending:
            for v in consumer.written:
                if v in consumer.values:
                    self._entry.values[v] = consumer.values[v]
                    self._entry.written.add(v)
        self._pending.clear()


def _check_capacity(shape: tuple[int, ...], dst: BoundVar) -> None:
    """A cache read may select fewer rows than its destination declares (a window that shrinks
    at the end of a table), never more: the declared shape is the destination's capacity."""
    if len(shape) != len(dst.shape) or any(a > b for a, b in zip(shape, dst.shape, strict=True)):
        raise StateError(f"the read has shape {list(shape)}, which does not fit `{dst.name}` "
                         f"(declared {list(dst.shape)})")


def check_form(var: BoundVar, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """What `coerce` checks before it looks at any value: the shape (one element for a scalar
    variable) and a dtype of numbers or bools. An inputs file checks each array's header with it
    before reading the array."""
    if shape != var.shape and not (not var.shape and math.prod(shape) == 1):
        raise ExecutionError(f"`{var.name}` expects shape {list(var.shape)}, got {list(shape)}")
    if dtype.kind not in "biuf":
        raise ExecutionError(f"`{var.name}` is {var.dtype.name}; cannot take values of dtype {dtype}")


def coerce(var: BoundVar, value) -> np.ndarray:
    """A user-supplied value as `var`'s unpacked representation, checked for shape and range.

    Only values that convert exactly are taken: integers from integers and integral floats in the
    dtype's range, bools from bools and 0 / 1, floats from numbers (rounded to the dtype, but a
    finite value beyond its range is refused, not made infinite). Strings, objects, ragged lists,
    2.5 for an integer, 2 or "False" for a bool are errors naming the variable."""
    dt = var.dtype
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:          # a ragged list, an object NumPy cannot hold
        raise ExecutionError(f"`{var.name}` is {dt.name}{list(var.shape)}; the value is not an array ({exc})") from None
    check_form(var, arr.shape, arr.dtype)
    if arr.shape != var.shape:      # one element for a scalar
        arr = arr.reshape(())
    if dt.is_float:
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.array(round_float(arr.astype(np.float64 if dt.name == "f64" else np.float32), dt), copy=True)
        overflow = np.isinf(out) & ~np.isinf(arr) if arr.dtype.kind == "f" else np.isinf(out)
        if overflow.any():
            raise ExecutionError(f"`{var.name}` is {dt.name}; {arr[overflow].flat[0].item()!r} is beyond its range")
        return out
    if dt.kind is Kind.BOOL:
        bad = ~np.isin(arr, (0, 1)) if arr.dtype.kind != "b" else np.zeros(arr.shape, bool)
        if bad.any():
            raise ExecutionError(f"`{var.name}` is bool; {arr[bad].flat[0].item()!r} is not True/False (or 1/0)")
        return arr.astype(np.bool_)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (np.trunc(arr) != arr)
        if bad.any():
            raise ExecutionError(f"`{var.name}` is {dt.name}; {arr[bad].flat[0].item()!r} is not an integer")
    lo, hi = (arr.min().item(), arr.max().item()) if arr.size else (0, 0)     # Python numbers: exact compares
    if lo < dt.lo or hi > dt.hi:
        raise ExecutionError(f"`{var.name}` is {dt.name} ({dt.lo}..{dt.hi}); values {lo}..{hi} are out of range")
    return arr.astype(dt.np_dtype)


def _add_scalar(value: np.ndarray, amount: int, var: BoundVar) -> np.ndarray:
    dt = var.dtype
    if dt.is_float:
        wide = np.float64 if dt.name == "f64" else np.float32
        return np.asarray(round_float(value.astype(wide) + wide(amount), dt))
    span = 1 << dt.bits       # integers wrap two's-complement within their width
    return np.array((int(value.item()) + amount - dt.lo) % span + dt.lo, dtype=dt.np_dtype)


def _summary(a: np.ndarray) -> str:
    flat = a.reshape(-1)
    head = np.array2string(flat[:8], precision=6, separator=", ", threshold=16)
    return f"{a.dtype}{list(a.shape)} {head}{' ...' if flat.size > 8 else ''}"


class Reference:
    """The NumPy oracle for `graph` on `model`: `Reference(model, graph).make_executor()`.

    `model` is an opened model (`ModelLoader.open`) or a path; `graph` a Graph, DSL text, or a
    path to a `.oig`/`.json`/`.rs` file. `sizevars` override the model's; `dynamic` ({"S": 512})
    makes sizevars settable per run with `executor.set_sizes(S=17)`, as the generated code's are.
    """

    def __init__(self, model, graph, *, sizevars: Mapping[str, int] | None = None,
                 dynamic: Mapping[str, int] | None = None, trace: bool | str | None = None):
        self.model, self.graph, self.bound = bind_inputs(model, graph, sizevars, dynamic)
        self._trace = trace

    def make_executor(self) -> ReferenceExecutor:
        return ReferenceExecutor(self.bound, trace=self._trace)
