"""Binding: resolve a parsed Graph against a model and validate it completely.

Steps, in order (each error names the node or declaration and its source location):

1. sizevars: the model's, overridden by the caller's.
2. declarations: dims to ints; data sources (`@ref` key, a same-named model tensor, `@pattern`
   prefix tables: every model key matching the pattern, each checked for dtype and shape);
   persistent table / auto-dim layout; `@fixed` names; constants must have data.
3. blocks: an `entry` block must exist; branch targets exist; the branch call graph has no cycle.
4. nodes, walked with the loop variables in scope: var references, memory-kind rules (digest
   §3.3), op typing through the registry (shapes, dtypes, modes, attributes), cache-access rules
   (§3.4), transfer, yield/await (§3.5), dep names.

The result is a BoundGraph (openinfer/ir/bound.py). Rules where we deliberately differ from the
original (decisions.md): prefix tables must resolve to model keys; duplicate names are errors;
a missing `entry` block is an error; loop variables shadow sizevars in cache indices.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..dims import Dim, DynamicDimError, capacity, pretty_shape
from ..dtypes import Kind
from ..errors import BindError, SourceLoc
from ..ops import registry
from ..ops.registry import OpTypeError, TensorType
from . import nodes as ir
from .bound import BoundGraph, BoundVar, OpBinding, RuntimeAttr, TableInfo
from .describe import describe

#: The largest size, in elements or bytes, of a variable, of all variables together, and the largest
#: sizevar: the generated C computes sizes, offsets and indices in int64_t / size_t arithmetic, and
#: an object may not exceed PTRDIFF_MAX (2^63 - 1) bytes.
MAX_SIZE = (1 << 63) - 1

_DIM_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|\d+)(?:\*([A-Za-z_][A-Za-z0-9_]*|\d+))?$")

#: dotted node kinds a `dep` may name (decisions.md)
_DEP_KINDS = {
    "cache.read": ir.CacheRead, "cache.write": ir.CacheWrite, "cache.increment": ir.CacheIncrement,
    "cache.decrement": ir.CacheDecrement, "cache.reset": ir.CacheReset, "transfer": ir.Transfer,
    "barrier": ir.Barrier, "yield": ir.Yield, "await": ir.Await, "branch": ir.Branch, "loop": ir.Loop,
    "assign": ir.Assign, "return": ir.Return,
}


def _frozen(value):
    """A hashable form of an attribute value (lists become tuples)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list | tuple) else value


def _suggest(name: str, options) -> str | None:
    close = difflib.get_close_matches(name, sorted(options), n=3, cutoff=0.6)
    return f"did you mean {', '.join(f'`{c}`' for c in close)}?" if close else None


@dataclass
class _LoopScope:
    """Loop variables visible at a node, with their static ranges (None when run-time)."""

    ranges: dict[str, range | None] = field(default_factory=dict)

    def child(self, var: str, rng: range | None) -> _LoopScope:
        return _LoopScope({**self.ranges, var: rng})


class _Binder:
    def __init__(self, graph: ir.Graph, model, sizevar_overrides: Mapping[str, int] | None,
                 dynamic: Mapping[str, int] | None, at: Mapping[str, int] | None = None):
        self.g = graph
        self.model = model
        self.sizevars: dict[str, int] = dict(model.sizevars) if model is not None else {}
        for k, v in (sizevar_overrides or {}).items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise BindError(f"sizevar override {k}={v!r} must be a non-negative integer")
            self.sizevars[k] = v
        self.fixed = dict(sizevar_overrides or {})
        if model is not None:
            check_fixed(model, sizevar_overrides, dynamic)
        self.dynamic = dynamic_bounds(model, sizevar_overrides, dynamic)
        self.read_sizes: dict[int, tuple[tuple[int, str], ...]] = {}
        for k, bound in self.dynamic.items():
            if at is None:
                self.sizevars[k] = Dim.var(k, bound)
                continue
            value = at.get(k, bound)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bound:
                raise BindError(f"dynamic sizevar {k} = {value!r} is outside 1..{bound}")
            self.sizevars[k] = value
        unknown = sorted(set(at or {}) - set(self.dynamic))
        if unknown:
            what = "is not a dynamic sizevar" if len(unknown) == 1 else "are not dynamic sizevars"
            raise BindError(f"{', '.join(unknown)} {what}"
                            + (f" (dynamic: {', '.join(self.dynamic)})" if self.dynamic else " (the graph has none)"))
        self.at = dict(at) if at is not None else None
        self.vars: dict[str, BoundVar] = {}
        self.ops: dict[int, OpBinding] = {}
        self.loop_bounds: dict[int, tuple[int | None, int | None]] = {}
        self._inferred: dict[tuple, object] = {}
        self._keys: dict[str, None] | None = None
        self._total_bytes = 0
        self.used_sizevars: set[str] = set()

    # ------------------------------------------------------------------ errors
    def error(self, message: str, loc: SourceLoc | None, hint: str | None = None, length: int = 1) -> BindError:
        return BindError(message, loc, source_line=self.g.line(loc), hint=hint, length=length)

    def node_error(self, node, message: str, hint: str | None = None) -> BindError:
        return self.error(f"in `{describe(node)}`: {message}", node.loc, hint)

    # ------------------------------------------------------------------ model access
    def _model_keys(self) -> dict[str, None]:
        """The model's tensor names, then its quant keys (`W#scale`, `W#zero_point`), in order."""
        if self._keys is None:
            self._keys = {} if self.model is None else dict.fromkeys([*self.model.tensor_names,
                                                                      *self.model.quant_keys])
        return self._keys

    def _model_tensor(self, key: str):
        """(dtype, shape, has_data) of a model tensor or quant key, or None."""
        if key not in self._model_keys():
            return None
        info = self.model.info(key)
        return info.dtype, tuple(info.shape), info.has_data

    def _model_meta(self, key: str):
        if self.model is None or key not in self.model.metadata:
            return None
        return self.model.metadata[key]

    # ------------------------------------------------------------------ dims
    def sizevar(self, name: str, loc: SourceLoc | None) -> int:
        self.used_sizevars.add(name)
        value = self.sizevars[name]
        if value > MAX_SIZE:
            raise self.error(f"sizevar `{name}` = {value} is too large: sizes are at most 2^63 - 1", loc)
        return value

    def dims(self, dims: tuple[str, ...], loc: SourceLoc | None, dtype, count: int = 1) -> tuple[int, ...]:
        """The shape `dims` spell, checked to fit the generated code's sizes for `count` values of
        `dtype` (a table's entries: @fixed sizes); their bytes count towards the whole graph's."""
        out = []
        for d in dims:
            m = _DIM_RE.match(d)
            if not m:
                raise self.error(f"invalid dimension expression `{d}`", loc)
            value = 1
            for atom in (a for a in m.groups() if a is not None):
                if atom.isdigit():
                    value *= int(atom)
                elif atom in self.sizevars:
                    value *= self.sizevar(atom, loc)
                else:
                    raise self.error(f"unknown size variable `{atom}` in dimension `{d}`", loc,
                                     _suggest(atom, self.sizevars) or self._sizevar_hint())
            out.append(value)
        numel = count
        for value in out:
            numel *= capacity(value)        # a dynamic dim's bound: the memory is planned for it
        nbytes = dtype.storage_nbytes(numel)
        if nbytes > MAX_SIZE:
            shape = pretty_shape(out) + (f" (at most {list(capacity(tuple(out)))})" if any(
                isinstance(d, Dim) for d in out) else "")
            raise self.error(f"{dtype.name}{shape}{f' x {count}' if count != 1 else ''} is {nbytes} bytes, more than "
                             "the generated code can address (2^63 - 1)", loc)
        self._total_bytes += nbytes
        if self._total_bytes > MAX_SIZE:
            raise self.error(f"the graph's variables hold more than 2^63 - 1 bytes together ({self._total_bytes} "
                             "with this one)", loc)
        return tuple(out)

    def _sizevar_hint(self) -> str:
        if not self.sizevars:
            return "the model defines no sizevars; pass one with --sizevar NAME=VALUE"
        return "known sizevars: " + ", ".join(f"{k}={v}" for k, v in sorted(self.sizevars.items()))

    # ------------------------------------------------------------------ declarations
    def bind_decls(self) -> None:
        for decl in self.g.vars.values():
            self.vars[decl.name] = self.bind_decl(decl)

    def bind_decl(self, d: ir.VarDecl) -> BoundVar:
        shape = self.dims(d.dims, d.loc, d.dtype, _fixed_count(d))
        init = d.init.value if d.init is not None else None
        if d.kind is ir.MemoryKind.PERSISTENT:
            return self._bind_persistent(d, shape, init)
        if d.table or d.auto_dim:
            raise self.error(f"`{d.name}`: @table and @auto_dim are only allowed on persistent variables", d.loc,
                             "move the declaration into the `persistent { ... }` section")
        if d.table_indices:
            return self._bind_prefix_table(d, shape, init)
        if d.pattern is not None:
            raise self.error(f"`{d.name}`: @pattern needs table indices, e.g. `{d.name}(l): ...`", d.loc)
        key = self._data_key(d, shape)
        if d.kind is ir.MemoryKind.CONSTANT and key is None and init is None:
            meta = self._model_meta(d.name)
            if meta is not None and not shape and isinstance(meta, (bool, int, float)):
                init = meta
            else:
                raise self.error(
                    f"constant `{d.name}` has no data: the model has no tensor `{d.name}` and it has no @init",
                    d.loc, _suggest(d.name, self.model.tensor_names) if self.model is not None else None)
        return BoundVar(d.name, d.kind, d.dtype, shape, d, init=init, model_key=key)

    def _data_key(self, d: ir.VarDecl, shape: tuple[int, ...]) -> str | None:
        """The model key holding `d`'s data: @ref, else a same-named tensor; checked for type."""
        key = d.ref_name if d.ref_name is not None else d.name
        found = self._model_tensor(key)
        if found is None:
            if d.ref_name is not None:
                raise self.error(f"`{d.name}`: @ref(\"{key}\") names no tensor of the model", d.loc,
                                 _suggest(key, self._model_keys()))
            return None
        dtype, mshape, has_data = found
        if dtype is d.dtype and d.dims and _atoms(d.dims[0]) and len(mshape) == len(shape) \
                and mshape[1:] == capacity(shape)[1:] and mshape[0] > capacity(shape)[0] \
                and not any(isinstance(x, Dim) for x in shape[1:]):
            # a first dim written with a sizevar: its first rows of the model's data (a position
            # table of 512 rows declared `pos: f32[S, D]`, read at S = 16, or at run-time sizes)
            return key if has_data else None
        if dtype is not d.dtype or mshape != capacity(shape):
            raise self.error(
                f"`{d.name}` is declared {d.dtype.name}{pretty_shape(shape)}"
                + (f" (at most {list(capacity(shape))})" if shape != capacity(shape) else "")
                + f" but model tensor `{key}` is {dtype.name}{list(mshape)}", d.loc)
        if any(isinstance(x, Dim) for x in shape[1:]):
            # at run time the tensor is dense at its run-time shape: the model's data (stored at
            # the bound) is that only when rows are cut from the end
            raise self.error(f"`{d.name}` {d.dtype.name}{pretty_shape(shape)} holds model data but has a dynamic "
                             "size after its first dim", d.loc,
                             "only the first dim of a model tensor may be dynamic (its first rows are used)")
        return key if has_data else None

    def _bind_prefix_table(self, d: ir.VarDecl, shape, init) -> BoundVar:
        if d.kind not in (ir.MemoryKind.CONSTANT, ir.MemoryKind.VOLATILE):
            raise self.error(f"prefix table `{d.name}` must be constant or volatile", d.loc)
        if d.pattern is None:
            raise self.error(f"prefix table `{d.name}` needs @pattern(\"...\") naming its model keys", d.loc,
                             f"e.g. @pattern(\"{d.name}.{{{d.table_indices[0]}}}\")")
        placeholders = re.findall(r"\{([^{}]*)\}", d.pattern)
        if sorted(placeholders) != sorted(d.table_indices) or len(set(placeholders)) != len(placeholders):
            raise self.error(
                f"@pattern(\"{d.pattern}\") must use each index of `{d.name}` "
                f"({', '.join(d.table_indices)}) exactly once as {{name}}", d.loc)
        regex = "^"
        for piece in re.split(r"(\{[^{}]*\})", d.pattern):
            if piece.startswith("{") and piece.endswith("}"):
                regex += f"(?P<{piece[1:-1]}>0|[1-9][0-9]*)"
            else:
                regex += re.escape(piece)
        regex += "$"
        keys: dict[tuple[int, ...], str] = {}
        for name in self._model_keys():
            m = re.match(regex, name)
            if not m:
                continue
            dtype, mshape, has_data = self._model_tensor(name)
            if dtype is not d.dtype or mshape != shape:
                raise self.error(f"prefix table `{d.name}` is declared {d.dtype.name}{list(shape)} but model "
                                 f"tensor `{name}` is {dtype.name}{list(mshape)}", d.loc)
            if not has_data and d.kind is ir.MemoryKind.CONSTANT:
                raise self.error(f"model tensor `{name}` of prefix table `{d.name}` has no data", d.loc)
            keys[tuple(int(m.group(i)) for i in d.table_indices)] = name
        if not keys:
            raise self.error(f"@pattern(\"{d.pattern}\") of `{d.name}` matches no tensor of the model", d.loc)
        return BoundVar(d.name, d.kind, d.dtype, shape, d, init=init, prefix_keys=keys)

    def _bind_persistent(self, d: ir.VarDecl, shape, init) -> BoundVar:
        if shape != capacity(shape):
            raise self.error(f"persistent `{d.name}` {d.dtype.name}{pretty_shape(shape)} has a dynamic size; "
                             "persistent state outlives a step, so its shape is static", d.loc,
                             "size it with static sizevars (a bound), and read the rows a step needs")
        if d.pattern is not None:
            raise self.error(f"persistent `{d.name}` cannot have @pattern (prefix tables are constant/volatile)", d.loc)
        if d.table_indices and not (d.table or d.auto_dim):
            raise self.error(f"persistent `{d.name}` has indices but neither @table nor @auto_dim", d.loc,
                             "add @table for a table of entries, or @auto_dim(...) for a growing tensor")
        table = None
        if d.table or d.auto_dim:
            if d.table and not d.table_indices and not d.auto_dim:
                raise self.error(f"@table `{d.name}` needs at least one index, e.g. `{d.name}(i): ...`", d.loc)
            for a in d.auto_dim:
                if a not in d.table_indices:
                    raise self.error(f"@auto_dim index `{a}` is not an index of `{d.name}`", d.loc)
            if d.auto_dim and len(d.auto_dim) != len(shape):
                raise self.error(f"auto_dim requires {len(shape)} dims: `{d.name}` has {len(shape)} dims but "
                                 f"{len(d.auto_dim)} auto-dim indices", d.loc)
            if d.dtype.is_packed:
                raise self.error(f"persistent table `{d.name}` cannot hold packed dtype {d.dtype.name}", d.loc)
            fixed = dict(d.fixed)
            for name in fixed:
                if name not in d.table_indices:
                    raise self.error(f"@fixed names `{name}`, which is not an index of `{d.name}`", d.loc)
            table = TableInfo(tuple(i for i in d.table_indices if i not in d.auto_dim), tuple(d.auto_dim),
                              fixed, shape)
        elif d.fixed:
            raise self.error(f"@fixed on `{d.name}` needs @table or @auto_dim", d.loc)
        key = self._data_key(d, shape) if table is None else None
        return BoundVar(d.name, d.kind, d.dtype, shape, d, init=init, model_key=key, table=table)

    # ------------------------------------------------------------------ temps
    def collect_temps(self) -> None:
        for block in self.g.blocks.values():
            for node in ir.walk(block.nodes):
                if not isinstance(node, ir.Assign):
                    continue
                if node.name in self.g.vars:
                    raise self.node_error(node, f"`{node.name}` is already declared in a memory section",
                                          "pick another name for the temporary")
                if node.name in self.vars:
                    raise self.node_error(node, f"temporary `{node.name}` is assigned twice (temps are graph-wide)")
                shape = self.dims(node.dims, node.loc, node.dtype)
                self.vars[node.name] = BoundVar(node.name, None, node.dtype, shape, None)

    # ------------------------------------------------------------------ blocks
    def check_blocks(self) -> tuple[str, tuple[str, ...]]:
        if "entry" not in self.g.blocks:
            names = ", ".join(self.g.blocks) or "none"
            raise self.error(f"the graph has no `entry` block (blocks: {names})", None,
                             "execution starts at `block entry { ... }`")
        targets: dict[str, set[str]] = {b: set() for b in self.g.blocks}
        for bname, block in self.g.blocks.items():
            for node in ir.walk(block.nodes):
                if isinstance(node, ir.Branch):
                    for t in (node.then_block, node.else_block):
                        if t is None:
                            continue
                        if t not in self.g.blocks:
                            raise self.node_error(node, f"branch target block `{t}` does not exist",
                                                  _suggest(t, self.g.blocks))
                        if t == "entry":
                            raise self.node_error(node, "cannot branch to `entry`")
                        targets[bname].add(t)
        self._check_acyclic(targets)
        called = set().union(*targets.values()) if targets else set()
        async_blocks = tuple(sorted(b for b in self.g.blocks if b != "entry" and b not in called))
        return "entry", async_blocks

    def _check_acyclic(self, calls: dict[str, set[str]]) -> None:
        state: dict[str, int] = {}

        def visit(b: str, path: list[str]) -> None:
            state[b] = 1
            for t in sorted(calls[b]):
                if state.get(t) == 1:
                    cycle = " -> ".join(path[path.index(t):] + [t]) if t in path else f"{b} -> {t}"
                    raise self.error(f"branches form a cycle ({cycle}); blocks are called as subroutines and "
                                     "may not recurse", self.g.blocks[b].loc)
                if t not in state:
                    visit(t, path + [t])
            state[b] = 2

        for b in sorted(calls):
            if b not in state:
                visit(b, [b])

    # ------------------------------------------------------------------ references
    def value_type(self, ref: ir.VarRef, node, scope: _LoopScope) -> tuple[BoundVar, TensorType]:
        """The variable an op/transfer operand names, checking prefix-table indexing."""
        var = self.vars.get(ref.name)
        if var is None:
            raise self.node_error(node, f"unknown variable `{ref.name}`", _suggest(ref.name, self.vars))
        if var.is_prefix_table:
            if len(ref.indices) != len(var.decl.table_indices):
                raise self.node_error(node, f"prefix table `{ref.name}` takes {len(var.decl.table_indices)} "
                                            f"index(es), got `{ref}`",
                                      f"write `{ref.name}[{', '.join(var.decl.table_indices)}]`")
            self._check_prefix_indices(var, ref, node, scope)
        elif ref.indices:
            raise self.node_error(node, f"`{ref.name}` is not a prefix table and cannot be indexed",
                                  "only @pattern tables take indices in op arguments; "
                                  "use cache.read for persistent tables")
        return var, TensorType(var.dtype, var.shape)

    def _check_prefix_indices(self, var: BoundVar, ref: ir.VarRef, node, scope: _LoopScope) -> None:
        choices: list[list[int] | None] = []
        for ix in ref.indices:
            if isinstance(ix, int):
                choices.append([ix])
            elif ix in scope.ranges:
                rng = scope.ranges[ix]
                choices.append(list(rng) if rng is not None else None)
            elif ix in self.sizevars:
                choices.append([self.sizevar(ix, node.loc)])
            else:
                raise self.node_error(node, f"index `{ix}` of `{ref}` is neither a loop variable, a sizevar nor a "
                                            "literal", _suggest(str(ix), list(scope.ranges) + list(self.sizevars)))
        if any(c is None for c in choices):
            return  # a run-time loop bound: checked when the index is known (execution)
        for combo in itertools.product(*choices):
            if combo not in var.prefix_keys:
                pattern = var.decl.pattern
                key = pattern
                for name, value in zip(var.decl.table_indices, combo, strict=True):
                    key = key.replace("{" + name + "}", str(value))
                raise self.node_error(node, f"`{ref}` needs model tensor `{key}` (index "
                                            f"{', '.join(map(str, combo))}), which the model does not have")

    def scalar_var(self, name: str, node, what: str) -> BoundVar:
        var = self.vars.get(name)
        if var is None:
            raise self.node_error(node, f"{what} `{name}` is not a declared variable", _suggest(name, self.vars))
        if var.shape:
            raise self.node_error(node, f"{what} `{name}` must be a scalar, but it has shape {list(var.shape)}")
        if var.dtype.is_packed or var.dtype.kind in (Kind.BITSET,):
            raise self.node_error(node, f"{what} `{name}` cannot have dtype {var.dtype.name}")
        return var

    # ------------------------------------------------------------------ nodes
    def bind_nodes(self, block: ir.Block, nodes, scope: _LoopScope) -> None:
        for node in nodes:
            self.bind_node(block, node, scope)

    def bind_node(self, block: ir.Block, node, scope: _LoopScope) -> None:
        if isinstance(node, ir.Op):
            self.bind_op(node, scope)
        elif isinstance(node, ir.Loop):
            self.bind_loop(block, node, scope)
        elif isinstance(node, ir.Branch):
            if node.cond is not None:
                self.scalar_var(node.cond, node, "branch condition")
        elif isinstance(node, (ir.CacheRead, ir.CacheWrite, ir.CacheReset, ir.CacheIncrement, ir.CacheDecrement)):
            self.bind_cache(node, scope)
        elif isinstance(node, ir.Transfer):
            src, st = self.value_type(node.src, node, scope)
            dst, dt = self.value_type(node.dst, node, scope)
            self._check_writable(dst, node, "transfer destination")
            if src.kind is ir.MemoryKind.PERSISTENT:
                raise self.node_error(node, f"persistent `{src.name}` cannot be transferred; use cache.read")
            if st != dt:
                raise self.node_error(node, f"transfer needs equal types: `{node.src}` is {st} and "
                                            f"`{node.dst}` is {dt}")
        elif isinstance(node, (ir.Yield, ir.Await)):
            for v in node.vars:
                if v not in self.vars:
                    raise self.node_error(node, f"unknown variable `{v}`", _suggest(v, self.vars))
                if isinstance(node, ir.Await) and self.vars[v].kind is ir.MemoryKind.CONSTANT:
                    raise self.node_error(node, f"constant `{v}` cannot be awaited (consumers may not write it)")
        # Assign, Barrier, Return: nothing to resolve here; Dep is checked once all nodes are known

    def _check_writable(self, var: BoundVar, node, what: str) -> None:
        if var.kind is ir.MemoryKind.CONSTANT:
            raise self.node_error(node, f"constant `{var.name}` cannot be the {what}",
                                  "constants are read-only; declare it volatile to compute into it")
        if var.kind is ir.MemoryKind.PERSISTENT:
            raise self.node_error(node, f"persistent `{var.name}` cannot be the {what}",
                                  f"compute into a volatile variable, then `cache.write v >> {var.name}`")
        if var.is_prefix_table:
            raise self.node_error(node, f"prefix table `{var.name}` cannot be the {what}")

    def bind_loop(self, block: ir.Block, node: ir.Loop, scope: _LoopScope) -> None:
        if node.var in scope.ranges:
            raise self.node_error(node, f"loop variable `{node.var}` shadows an enclosing loop's variable")
        bounds = [self._loop_bound(b, node) for b in (node.start, node.end)]
        self.loop_bounds[node.index] = (bounds[0], bounds[1])
        static = None not in bounds and not any(isinstance(b, Dim) for b in bounds)
        rng = range(bounds[0], bounds[1]) if static else None
        self.bind_nodes(block, node.body, scope.child(node.var, rng))

    def _loop_bound(self, b: int | str, node) -> int | None:
        if isinstance(b, int):
            return b
        if b in self.sizevars:
            return self.sizevar(b, node.loc)     # a dynamic one: a Dim, the loop's range is run time
        var = self.vars.get(b)
        if var is None:
            raise self.node_error(node, f"loop bound `{b}` is neither a sizevar nor a variable",
                                  _suggest(b, list(self.sizevars) + list(self.vars)))
        self.scalar_var(b, node, "loop bound")
        if not var.dtype.is_int:
            raise self.node_error(node, f"loop bound `{b}` must have an integer dtype, not {var.dtype.name}")
        if var.kind is ir.MemoryKind.CONSTANT and var.model_key is None and var.init is not None:
            return int(var.init)
        return None

    # ------------------------------------------------------------------ ops
    def bind_op(self, node: ir.Op, scope: _LoopScope) -> None:
        try:
            spec = registry.get(node.op)
        except OpTypeError as exc:
            raise self.node_error(node, str(exc), exc.hint) from None
        in_types = []
        for ref in node.inputs:
            var, t = self.value_type(ref, node, scope)
            if var.kind is ir.MemoryKind.PERSISTENT:
                raise self.node_error(node, f"persistent `{var.name}` cannot be an op input",
                                      f"read it first: `cache.read {var.name} >> some_volatile;`")
            in_types.append(t)
        out = self.vars.get(node.output)
        if out is None:
            raise self.node_error(node, f"unknown output variable `{node.output}`",
                                  _suggest(node.output, self.vars) or
                                  f"declare it (e.g. in `volatile {{ {node.output}: f32[...]; }}`) or `assign` it")
        self._check_writable(out, node, "output of an op")
        attrs, runtime = self._attrs(node)
        in_place = any(r.name == node.output for r in node.inputs)
        out_type = TensorType(out.dtype, out.shape)
        # `infer` is pure: identical applications (every layer of a deep model) are typed once
        key = (spec.name, tuple(in_types), tuple(sorted((k, _frozen(v)) for k, v in attrs.items())), out_type,
               in_place)
        inference = self._inferred.get(key)
        if inference is None:
            try:
                inference = spec.infer(in_types, attrs, out_type, output_name_is_input=in_place)
            except OpTypeError as exc:
                raise self.node_error(node, str(exc), exc.hint) from None
            except DynamicDimError as exc:
                raise self.node_error(node, str(exc), "generated code decides this once, for every run-time "
                                      "size: make the size static (--sizevar) or the op independent of it") from None
            self._inferred[key] = inference
        completed = dict(inference.attrs)
        completed.update(runtime)
        self.ops[node.index] = OpBinding(spec, tuple(in_types), inference, completed, runtime)

    def _attrs(self, node: ir.Op) -> tuple[dict, dict[str, RuntimeAttr]]:
        static: dict[str, object] = {}
        runtime: dict[str, RuntimeAttr] = {}
        for a in node.attrs:
            v = a.value
            if isinstance(v, ir.AttrVar):
                value = self._attr_var(v.value, node)
                if isinstance(value, RuntimeAttr):
                    runtime[a.name] = value
                    # a placeholder of the right kind lets the registry check the attribute
                    value = 0.0 if value.dtype.is_float else (False if value.dtype.kind is Kind.BOOL else 0)
                static[a.name] = value
            elif isinstance(v, ir.AttrIntList):
                static[a.name] = list(v.value)
            elif isinstance(v, ir.AttrDimList):
                static[a.name] = [x if isinstance(x, int) else self._list_size(x, a.name, node) for x in v.value]
            elif isinstance(v, ir.AttrDTypeList):
                static[a.name] = tuple(v.value)
            elif isinstance(v, ir.AttrDType) and a.name == "acc":
                static[a.name] = (v.value,)   # `acc=i32` is the one-element list `acc=[i32]`
            else:
                static[a.name] = v.value
        return static, runtime

    def _list_size(self, name: str, attr: str, node) -> int:
        """A size variable's value inside an integer list (`starts=[0, S]`): static once bound."""
        if name in self.sizevars:
            return self.sizevar(name, node.loc)
        var = self.vars.get(name)
        hint = (f"`{name}` is a variable, read at run time: a window at a run-time start is "
                "`op dynamic_slice(x, start, sizes=[...], axes=[...])`" if var is not None and not var.shape
                else _suggest(name, self.sizevars))
        raise self.node_error(node, f"`{attr}`: `{name}` is not a size variable", hint)

    def _attr_var(self, name: str, node):
        meta = self._model_meta(name)
        if meta is not None:
            if isinstance(meta, (bool, int, float, str)):
                return meta
            raise self.node_error(node, f"model metadata `{name}` is not a scalar or string")
        var = self.vars.get(name)
        if var is not None:
            self.scalar_var(name, node, "attribute variable")
            if var.kind is ir.MemoryKind.CONSTANT and var.model_key is not None:
                return self.model.tensor(var.model_key).reshape(()).item()
            if var.kind is ir.MemoryKind.CONSTANT and var.init is not None:
                return var.init
            return RuntimeAttr(name, var.dtype)
        if name in self.sizevars:
            return self.sizevar(name, node.loc)
        raise self.node_error(node, f"attribute value `{name}` is not a variable, sizevar or model metadata key",
                              _suggest(name, list(self.vars) + list(self.sizevars)))

    # ------------------------------------------------------------------ cache
    def _cache_target(self, base: str, node) -> BoundVar:
        var = self.vars.get(base)
        if var is None:
            raise self.node_error(node, f"unknown variable `{base}`", _suggest(base, self.vars))
        if var.kind is not ir.MemoryKind.PERSISTENT:
            raise self.node_error(node, f"`{base}` is {var.kind.section if var.kind else 'a temporary'}; cache "
                                        "operations work on persistent variables only")
        return var

    def _index_value(self, v: int | str, node, scope: _LoopScope, *, allow_negative: bool) -> int | None:
        """A cache index: int literal, loop variable, sizevar or integer scalar variable (None: run time).

        Loop variables shadow sizevars (the original looked sizevars up first, which made a loop
        variable named like a sizevar silently constant)."""
        if isinstance(v, int):
            if v < 0 and not allow_negative:
                raise self.node_error(node, f"cache index {v} is negative")
            return v
        if v in scope.ranges:
            return None
        if v in self.sizevars:
            return self.sizevar(v, node.loc)     # a dynamic one: a Dim, checked at run time
        var = self.vars.get(v)
        if var is not None and not var.shape and var.table is None and not var.is_prefix_table:
            if not var.dtype.is_int:
                raise self.node_error(node, f"cache index `{v}` must have an integer dtype, not {var.dtype.name}")
            return None
        raise self.node_error(node, f"unknown cache index `{v}`",
                              "an index is an integer, a loop variable, a sizevar or an integer scalar variable")

    def _access_shape(self, var: BoundVar, acc: ir.CacheAccess, node, scope: _LoopScope, *,
                      write: bool) -> tuple[int | None, ...] | None:
        """Shape of what `acc` selects, None for a dim whose length is only known at run time (a
        slice bound that is a variable); None for a growing (auto_dim) table. Checks index rules."""
        if var.table is None:
            if acc.bracketed:
                raise self.node_error(node, f"`{var.name}` is not a table and does not support indexed access",
                                      f"use `{var.name}` without brackets, or declare it with @table")
            return var.shape
        t = var.table
        n_idx = len(t.indices) + len(t.auto_dim)
        if len(acc.indices) > n_idx:
            raise self.node_error(node, f"`{acc}` has {len(acc.indices)} indices but `{var.name}` has {n_idx}")
        lengths: list[int | None] = []
        static = True
        for pos, ix in enumerate(acc.indices):
            is_auto = pos >= len(t.indices)
            if isinstance(ix, ir.CacheSingle):
                self._index_value(ix.value, node, scope, allow_negative=False)
                continue
            if write:
                raise self.node_error(node, f"cache.write needs scalar indices, got a slice in `{acc}`")
            if is_auto:
                raise self.node_error(node, f"slices are not allowed on auto_dim variable `{var.name}`")
            name = t.indices[pos]
            start = 0 if ix.start is None else self._index_value(ix.start, node, scope, allow_negative=False)
            end = ix.end
            size = t.fixed.get(name)
            if end is None:
                end_v = size
            else:
                end_v = self._index_value(end, node, scope, allow_negative=True)
                if end_v is not None and end_v < 0:
                    end_v = None if size is None else size + end_v
            if start is None or end_v is None:
                static = False
                lengths.append(None)
            else:
                if _before(end_v, start):
                    raise self.node_error(node, f"slice end {end_v!r} is before its start {start!r} in `{acc}`")
                if size is not None and capacity(end_v) > size:
                    at_most = f" (at most {int(end_v)})" if isinstance(end_v, Dim) else ""
                    raise self.node_error(node, f"slice `{acc}` ends at {end_v!r}{at_most}, past the fixed size "
                                                f"{size} of `{name}`")
                lengths.append(end_v - start)
        # missing trailing table indices are full slices
        for name in t.indices[len(acc.indices):]:
            if write:
                raise self.node_error(node, f"cache.write to `{acc}` must give every index of `{var.name}` "
                                            f"({', '.join(t.indices + t.auto_dim)})")
            size = t.fixed.get(name)
            lengths.append(size)
            static = static and size is not None
        if t.is_auto_dim:
            return None  # grows at run time
        if not static:
            return tuple(lengths) + t.entry_shape
        return tuple(n for n in lengths if n is not None) + t.entry_shape

    def bind_cache(self, node, scope: _LoopScope) -> None:
        if isinstance(node, (ir.CacheIncrement, ir.CacheDecrement)):
            var = self._cache_target(node.target, node)
            if var.shape or var.table is not None:
                raise self.node_error(node, f"`{var.name}` must be a scalar to be incremented/decremented")
            if var.dtype.is_packed or var.dtype.kind in (Kind.BOOL, Kind.BITSET):
                raise self.node_error(node, f"cannot increment/decrement a {var.dtype.name} variable")
            return
        if isinstance(node, ir.CacheReset):
            var = self._cache_target(node.target.base, node)
            seen_slice = False
            for ix in node.target.indices:
                if isinstance(ix, ir.CacheSlice):
                    if ix.start is not None or ix.end is not None:
                        raise self.node_error(node, "cache.reset takes scalar prefix indices then full slices `..`")
                    seen_slice = True
                else:
                    if seen_slice:
                        raise self.node_error(node, "cache.reset: scalar indices must come before `..`")
                    self._index_value(ix.value, node, scope, allow_negative=False)
            if node.target.bracketed and var.table is None:
                raise self.node_error(node, f"`{var.name}` is not a table and does not support indexed access")
            return
        if isinstance(node, ir.CacheRead):
            var = self._cache_target(node.src.base, node)
            dst, dt = self.value_type(node.dst, node, scope)
            self._check_writable(dst, node, "destination of cache.read")
            shape = self._access_shape(var, node.src, node, scope, write=False)
            if var.dtype is not dst.dtype:
                raise self.node_error(node, f"cache.read from {var.dtype.name} `{var.name}` into {dst.dtype.name} "
                                            f"`{dst.name}`: dtypes must match")
            if shape is not None and None in shape:
                self._run_time_rows(node, dst, shape)
            elif shape is not None and shape != dst.shape:
                raise self.node_error(node, f"`{node.src}` reads shape {list(shape)} but `{dst.name}` is "
                                            f"declared {list(dst.shape)}")
            return
        # CacheWrite
        var = self._cache_target(node.dst.base, node)
        src, st = self.value_type(node.src, node, scope)
        if src.kind is ir.MemoryKind.PERSISTENT:
            raise self.node_error(node, f"persistent `{src.name}` cannot be the source of cache.write")
        self._access_shape(var, node.dst, node, scope, write=True)
        if var.dtype is not src.dtype:
            raise self.node_error(node, f"cache.write of {src.dtype.name} `{src.name}` into {var.dtype.name} "
                                        f"`{var.name}`: dtypes must match")
        if var.table is None or not var.table.is_auto_dim:
            expect = var.shape if var.table is None else var.table.entry_shape
            if src.shape != expect:
                raise self.node_error(node, f"`{src.name}` has shape {list(src.shape)} but `{node.dst}` holds "
                                            f"{list(expect)}")

    def _run_time_rows(self, node: ir.CacheRead, dst: BoundVar, shape: tuple[int | None, ...]) -> None:
        """A read whose row count is known only at run time (`cache.read K[l, 0..pos] >> kc;`).

        Where the destination declares that dim as a dynamic sizevar (`kc: f32[P, 1, D]`), the
        read sets the size: P takes the rows read, and every kernel after it runs at that size, so
        attention over a KV table costs what the rows in use cost. Otherwise the destination keeps
        its declared shape as a capacity and records the rows it holds (nothing may compute with it)."""
        dims = dst.decl.dims if dst.decl is not None else ()
        named = [dims[k] if k < len(dims) else "" for k, n in enumerate(shape) if n is None]
        sets = tuple((k, dims[k]) for k, n in enumerate(shape) if n is None and k < len(dims)
                     and dims[k] in self.dynamic)
        if not sets:
            dynamic = sorted({a for d in named for a in _atoms(d)} & set(self.dynamic))
            if dynamic:
                raise self.node_error(node, f"`{dst.name}`'s dims {named} mention the dynamic size "
                                            f"{', '.join(dynamic)}, but a run-time row count sets a size only "
                                            "where the dim is that size itself",
                                      f"declare the dim as {dynamic[0]} (e.g. `{dst.name}: "
                                      f"{dst.dtype.name}[{dynamic[0]}, ...]`)")
            return
        where = f"`{node.src}` >> `{dst.name}`"
        if len(sets) != len(named):
            raise self.node_error(node, f"{where}: every run-time extent of the read must be a dynamic size "
                                        f"of `{dst.name}` (its dims {named} there)")
        if len(shape) != len(dst.shape) or any(n is not None and n != d for n, d in zip(shape, dst.shape,
                                                                                      strict=True)):
            raise self.node_error(node, f"`{node.src}` reads shape "
                                        f"{['?' if n is None else n for n in shape]} but `{dst.name}` is declared "
                                        f"{list(dst.shape)}")
        for _, name in sets:
            for v in self.vars.values():
                if v.kind is ir.MemoryKind.DYNAMIC and v.decl is not None and \
                        any(name in _atoms(d) for d in v.decl.dims):
                    raise self.node_error(node, f"{where} sets the dynamic size {name} while a step runs, but the "
                                                f"input `{v.name}` is shaped by it (inputs are set before a step)",
                                          f"give `{v.name}` its own dynamic size")
        self.read_sizes[node.index] = sets

    # ------------------------------------------------------------------ yield / await / dep
    def check_async(self, entry: str, async_blocks: tuple[str, ...]) -> None:
        entry_nodes = self.g.blocks[entry].nodes
        pending = None
        for node in entry_nodes:
            if isinstance(node, ir.Yield):
                if pending is not None:
                    raise self.node_error(node, "await required before next yield",
                                          f"add `await {', '.join(pending.vars)};` before this yield")
                pending = node
            elif isinstance(node, ir.Await):
                pending = None
        entry_yielded = {v for n in ir.walk(entry_nodes) if isinstance(n, ir.Yield) for v in n.vars}
        mutators: dict[str, str] = {}
        for name in async_blocks:
            block = self.g.blocks[name]
            flat = ir.walk(block.nodes)
            yields = [n for n in flat if isinstance(n, ir.Yield)]
            awaited = {v for n in flat if isinstance(n, ir.Await) for v in n.vars}
            for y in yields:
                if y is not block.nodes[-1]:
                    raise self.node_error(y, f"in consumer block `{name}`, `yield` must be the last node")
            yielded = {v for y in yields for v in y.vars}
            missing = sorted(awaited - yielded)
            if missing:
                raise self.error(f"consumer block `{name}` awaits {', '.join(missing)} but does not yield "
                                 f"{'it' if len(missing) == 1 else 'them'} back", block.loc,
                                 f"end the block with `yield {', '.join(sorted(awaited))};`")
            not_yielded = sorted(awaited - entry_yielded)
            if not_yielded:
                raise self.error(f"consumer block `{name}` awaits {', '.join(not_yielded)}, which `entry` never "
                                 "yields", block.loc)
            # every write of a consumer becomes visible to entry at its await: one writer per variable
            for v in sorted(self._written_vars(flat)):
                if v in mutators:
                    raise self.error(f"blocks `{mutators[v]}` and `{name}` both modify `{v}`; at most one consumer "
                                     "may mutate a variable", block.loc)
                mutators[v] = name

    @staticmethod
    def _written_vars(flat) -> set[str]:
        out = set()
        for n in flat:
            if isinstance(n, ir.Op):
                out.add(n.output)
            elif isinstance(n, ir.CacheRead):
                out.add(n.dst.name)
            elif isinstance(n, ir.Transfer):
                out.add(n.dst.name)
        return out

    def check_deps(self) -> None:
        all_nodes = [n for b in self.g.blocks.values() for n in ir.walk(b.nodes)]
        labels: set[str] = set()
        for n in all_nodes:
            if isinstance(n, ir.Op):
                labels.update((n.output, n.op))
        for n in all_nodes:
            if not isinstance(n, ir.Dep):
                continue
            for which in (n.after, n.before):
                if which in labels or which in _DEP_KINDS:
                    continue
                raise self.node_error(n, f"`{which}` names no node: use an op output, an op name or a node kind "
                                         f"such as `cache.write`", _suggest(which, labels | set(_DEP_KINDS)))

    # ------------------------------------------------------------------ driver
    def run(self) -> BoundGraph:
        self.bind_decls()
        self.collect_temps()
        entry, async_blocks = self.check_blocks()
        for block in self.g.blocks.values():
            self.bind_nodes(block, block.nodes, _LoopScope())
        self.check_async(entry, async_blocks)
        self.check_deps()
        return BoundGraph(self.g, self.model, dict(self.sizevars), self.vars, self.ops, entry, async_blocks,
                          self.loop_bounds, dict(self.dynamic), self.fixed, self.read_sizes,
                          frozenset(self.used_sizevars))


def _fixed_count(d: ir.VarDecl) -> int:
    """How many entries of its shape a persistent table holds at most: the product of its @fixed
    sizes (1 for any other variable, and for indices without one: those tables grow at run time)."""
    count = 1
    for _, size in d.fixed:
        count *= size
    return count


def dynamic_bounds(model, sizevars: Mapping[str, int] | None, dynamic: Mapping[str, int] | None) -> dict[str, int]:
    """The dynamic sizevars and their bounds: the model's metadata (`dynamic.S = 512`), then the
    caller's `dynamic` (`--dynamic S=512`). A sizevar also given a fixed value (`--sizevar S=8`) is
    static: the caller's fixed value wins over the model's bound."""
    bounds: dict[str, int] = {}
    meta = getattr(model, "metadata", None) or {}
    for key, value in meta.items():
        if key.startswith(DYNAMIC_META) and key[len(DYNAMIC_META):] not in (sizevars or {}):
            bounds[key[len(DYNAMIC_META):]] = value
    for k, v in (dynamic or {}).items():
        if k in (sizevars or {}):
            raise BindError(f"sizevar `{k}` is given both a fixed value ({sizevars[k]}) and a dynamic bound ({v})")
        bounds[k] = v
    for k, v in bounds.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise BindError(f"dynamic sizevar name {k!r} is not an identifier")
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SIZE:
            raise BindError(f"dynamic sizevar {k}={v!r}: the bound must be an integer from 1 to 2^63 - 1")
    return dict(sorted(bounds.items()))


#: model metadata key prefix naming a dynamic sizevar's bound (`dynamic.S` = 512)
DYNAMIC_META = "dynamic."
#: model metadata key prefix naming a sizevar whose value the model was made for and nothing
#: else (`fixed.seq` = "`rope_cos`": an importer folded a value computed from it), with what fixed it
FIXED_META = "fixed."


def check_fixed(model, sizevars: Mapping[str, int] | None, dynamic: Mapping[str, int] | None) -> None:
    """Refuses to move a sizevar the model fixes (FIXED_META): another value, or a dynamic one,
    would run with values computed for the model's own."""
    meta = getattr(model, "metadata", None) or {}
    for key, why in meta.items():
        if not key.startswith(FIXED_META):
            continue
        name = key[len(FIXED_META):]
        value = model.sizevars.get(name)
        moved = (f"--dynamic {name}={dynamic[name]}" if name in (dynamic or {}) else
                 f"--sizevar {name}={sizevars[name]}" if (sizevars or {}).get(name, value) != value else None)
        if moved is not None:
            raise BindError(f"{moved}: the model fixes `{name}` at {value} ({why} was computed for that size when "
                            f"it was made): import it again at the size you need")


def _before(end, start) -> bool:
    """A slice end surely before its start (a dynamic bound: for some run-time value; the generated
    code checks each read at run time as well)."""
    try:
        return end < start
    except DynamicDimError:
        return False


def _atoms(dim: str) -> set[str]:
    m = _DIM_RE.match(dim)
    return {a for a in m.groups() if a is not None and not a.isdigit()} if m else set()


def bind(graph: ir.Graph, model=None, sizevars: Mapping[str, int] | None = None,
         dynamic: Mapping[str, int] | None = None, at: Mapping[str, int] | None = None) -> BoundGraph:
    """Resolve and validate `graph` against `model` (an opened `.oinf`, or None).

    `sizevars` override (or supply, without a model) size variables; `dynamic` makes sizevars
    dynamic with these bounds (their dims become Dims, openinfer/dims.py). `at` binds a dynamic
    graph at run-time values of its dynamic sizevars instead, as plain ints (the reference runs
    that binding; a model tensor whose first dim is dynamic gives its first rows). Raises BindError.
    """
    return _Binder(graph, model, sizevars, dynamic, at).run()


def rebind(bound: BoundGraph, sizes: Mapping[str, int]) -> BoundGraph:
    """`bound`'s graph bound again with its dynamic sizevars at `sizes` (others at their bounds)."""
    return bind(bound.graph, bound.model, bound.fixed, bound.dynamic, dict(sizes))
