"""Lowering: BoundGraph -> Program (frames, buffers, statements, kernel requests).

What the generated code can do is narrower than what the reference can: memory is static, so
every persistent table needs `@fixed` on each index (its dense size), and auto-dim tensors (whose
shape grows at run time) are not synthesized. Such graphs fail here with a SynthesisError that
names the variable and says what to change.

Frames: the entry block runs in frame "entry"; each consumer block (started by entry's `yield`)
runs in a frame named after it, on snapshots of the yielded variables. Branch targets run in the
frame of their caller. Constants, prefix tables and persistent state are shared ("global").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..dims import DynamicDimError
from ..errors import SynthesisError
from ..ir import nodes as ir
from ..ir.bound import BoundGraph, BoundVar
from ..ir.describe import describe
from ..ops.types import TensorType
from . import program as P

_KIND_NAME = {ir.MemoryKind.DYNAMIC: "dynamic", ir.MemoryKind.VOLATILE: "volatile",
              ir.MemoryKind.CONSTANT: "constant", ir.MemoryKind.PERSISTENT: "persistent"}


def _hashable(v):
    if isinstance(v, list | tuple):
        return tuple(_hashable(x) for x in v)
    return v


def c_name(text: str) -> str:
    """A C identifier fragment from a variable or block name (already [A-Za-z0-9_])."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text)


class _Lowerer:
    def __init__(self, bound: BoundGraph, name: str, outputs: set[str] | None):
        self.b = bound
        self.name = name
        self.outputs = outputs
        self.kernels: list[P.KernelRequest] = []
        self.kernel_ids: dict[P.KernelRequest, int] = {}
        self.buffers: dict[str, P.Buffer] = {}
        self.frames: dict[str, dict[str, str]] = {}
        self.scratch_count = 0

    # ------------------------------------------------------------------ checks
    def check_synthesizable(self) -> None:
        for var in self.b.vars.values():
            t = var.table
            if t is None:
                continue
            loc = var.decl.loc if var.decl else None
            if t.is_auto_dim:
                raise SynthesisError(f"{loc}: `{var.name}` is an @auto_dim tensor; its shape grows at run time, which "
                                     "generated code (static memory) does not support — declare a @table with "
                                     "@fixed sizes instead, or run it with the reference")
            missing = [i for i in t.indices if i not in t.fixed]
            if missing:
                raise SynthesisError(f"{loc}: table `{var.name}` needs @fixed({missing[0]}=N) on every index to be "
                                     f"synthesized (generated code has static memory); index `{missing[0]}` has no "
                                     "fixed size")

    # ------------------------------------------------------------------ frames and blocks
    def reachable(self, start: str) -> tuple[str, ...]:
        seen: list[str] = []
        todo = [start]
        while todo:
            b = todo.pop(0)
            if b in seen:
                continue
            seen.append(b)
            for n in ir.walk(self.b.graph.blocks[b].nodes):
                if isinstance(n, ir.Branch):
                    todo.extend(t for t in (n.then_block, n.else_block) if t is not None)
        return tuple(seen)

    def accessed(self, blocks) -> set[str]:
        names: set[str] = set()
        for b in blocks:
            for n in ir.walk(self.b.graph.blocks[b].nodes):
                names.update(_vars_of(n))
        return names

    # ------------------------------------------------------------------ buffers
    def add_buffer(self, buf: P.Buffer) -> P.Buffer:
        self.buffers[buf.name] = buf
        self.frames.setdefault(buf.frame, {})
        if buf.var is not None:
            self.frames[buf.frame][buf.var] = buf.name
        return buf

    def global_buffers(self) -> tuple[dict[str, P.PrefixTable], dict[str, P.TableLayout], set[str]]:
        prefix: dict[str, P.PrefixTable] = {}
        tables: dict[str, P.TableLayout] = {}
        keys: set[str] = set()
        for var in self.b.vars.values():
            if var.kind is ir.MemoryKind.PERSISTENT:
                if var.table is not None:
                    sizes = tuple(var.table.fixed[i] for i in var.table.indices)
                    tables[var.name] = P.TableLayout(var.name, sizes, var.table.entry_shape, var.table.indices)
                    shape = sizes + var.table.entry_shape
                else:
                    shape = var.shape
                    if var.model_key:
                        keys.add(var.model_key)
                self.add_buffer(P.Buffer(f"s_{c_name(var.name)}", var.name, "global", var.dtype, shape, "persistent",
                                         var.model_key, var.init))
            elif var.is_prefix_table:
                n_idx = len(var.decl.table_indices)
                sizes = tuple(max(k[i] for k in var.prefix_keys) + 1 for i in range(n_idx))
                flat: list[str | None] = []
                for idx in _row_major(sizes):
                    flat.append(var.prefix_keys.get(idx))
                keys.update(k for k in flat if k)
                prefix[var.name] = P.PrefixTable(var.name, var.dtype, var.shape, sizes, tuple(flat), var.decl.pattern)
            elif var.kind is ir.MemoryKind.CONSTANT:
                storage = "weight" if var.model_key else "const"
                if var.model_key:
                    keys.add(var.model_key)
                self.add_buffer(P.Buffer(f"c_{c_name(var.name)}", var.name, "global", var.dtype, var.shape, storage,
                                         var.model_key, var.init))
        return prefix, tables, keys

    def frame_buffers(self, frame: str, blocks, entry: bool) -> set[str]:
        used = self.accessed(blocks)
        keys: set[str] = set()
        for var in self.b.vars.values():
            if var.kind in (ir.MemoryKind.CONSTANT, ir.MemoryKind.PERSISTENT) or var.is_prefix_table:
                continue
            if not entry and var.name not in used:
                continue
            if entry and var.kind is None and var.name not in used:
                continue
            if entry and var.kind is ir.MemoryKind.DYNAMIC:
                storage = "pinned"
            elif entry and var.kind is ir.MemoryKind.VOLATILE and self.observable(var):
                storage = "pinned"
            else:
                storage = "planned"
            if var.model_key:
                keys.add(var.model_key)
            self.add_buffer(P.Buffer(f"{c_name(frame)}__{c_name(var.name)}", var.name, frame, var.dtype, var.shape,
                                     storage, var.model_key, var.init))
        return keys

    def observable(self, var: BoundVar) -> bool:
        return self.outputs is None or var.name in self.outputs

    # ------------------------------------------------------------------ statements
    def index_expr(self, v: int | str, loops: set[str]) -> P.IntExpr:
        if isinstance(v, int):
            return P.Lit(v)
        if v in loops:
            return P.LoopVar(v)
        if v in self.b.sizevars:
            return P.Lit(self.b.sizevars[v])
        return P.ScalarOf(v)

    def operand(self, ref: ir.VarRef, loops: set[str]) -> P.Operand:
        return P.Operand(ref.name, tuple(self.index_expr(i, loops) for i in ref.indices))

    def kernel(self, req: P.KernelRequest) -> int:
        if req not in self.kernel_ids:
            self.kernel_ids[req] = len(self.kernels)
            self.kernels.append(req)
        return self.kernel_ids[req]

    def scratch(self, frame: str, var: BoundVar) -> str:
        self.scratch_count += 1
        buf = P.Buffer(f"{c_name(frame)}__scratch{self.scratch_count}", None, frame, var.dtype, var.shape, "planned")
        self.add_buffer(buf)
        return buf.name

    def lower_nodes(self, nodes, frames: tuple[str, ...], loops: set[str]) -> tuple[P.Statement, ...]:
        out: list[P.Statement] = []
        for n in nodes:
            out.extend(self.lower_node(n, frames, loops))
        return tuple(out)

    def lower_node(self, n, frames: tuple[str, ...], loops: set[str]) -> list[P.Statement]:
        d = describe(n)
        if isinstance(n, ir.Op):
            return self.lower_op(n, d, frames, loops)
        if isinstance(n, ir.Loop):
            body = self.lower_nodes(n.body, frames, loops | {n.var})
            return [P.Loop(n.index, d, n.var, self.index_expr(n.start, loops), self.index_expr(n.end, loops), body)]
        if isinstance(n, ir.Branch):
            return [P.Branch(n.index, d, n.cond, n.then_block, n.else_block)]
        if isinstance(n, ir.Return):
            return [P.Return(n.index, d)]
        if isinstance(n, ir.Transfer):
            return [P.Copy(n.index, d, self.operand(n.dst, loops), self.operand(n.src, loops))]
        if isinstance(n, ir.CacheRead):
            var = self.b.vars[n.src.base]
            if var.table is None:
                return [P.Copy(n.index, d, P.Operand(n.dst.name), P.Operand(var.name))]
            sel = self.selection(var, n.src, loops)
            return [P.TableRead(n.index, d, var.name, sel, n.dst.name, self.b.read_sizes.get(n.index, ()))]
        if isinstance(n, ir.CacheWrite):
            var = self.b.vars[n.dst.base]
            if var.table is None:
                return [P.Copy(n.index, d, P.Operand(var.name), self.operand(n.src, loops))]
            idx = tuple(self.index_expr(ix.value, loops) for ix in n.dst.indices)
            return [P.TableWrite(n.index, d, var.name, idx, self.operand(n.src, loops))]
        if isinstance(n, (ir.CacheIncrement, ir.CacheDecrement)):
            amount = n.amount if isinstance(n, ir.CacheIncrement) else -n.amount
            return [P.ScalarStep(n.index, d, n.target, amount)]
        if isinstance(n, ir.CacheReset):
            prefix = tuple(self.index_expr(ix.value, loops) for ix in n.target.indices
                           if isinstance(ix, ir.CacheSingle))
            return [P.StateReset(n.index, d, n.target.base, prefix)]
        if isinstance(n, ir.Yield):
            consumers = self.b.async_blocks if "entry" in frames else ()
            return [P.Yield(n.index, d, tuple(n.vars), consumers)]
        if isinstance(n, ir.Await):
            return [P.Await(n.index, d, tuple(n.vars))]
        kind = {ir.Assign: "assign", ir.Barrier: "barrier", ir.Dep: "dep"}[type(n)]
        return [P.Marker(n.index, d, kind)]

    def selection(self, var: BoundVar, acc: ir.CacheAccess, loops: set[str]) -> tuple[P.Selection, ...]:
        out: list[P.Selection] = []
        for ix in acc.indices:
            if isinstance(ix, ir.CacheSingle):
                out.append(self.index_expr(ix.value, loops))
            else:
                out.append(P.Slice(None if ix.start is None else self.index_expr(ix.start, loops),
                                   None if ix.end is None else self.index_expr(ix.end, loops)))
        out.extend(P.Slice(None, None) for _ in var.table.indices[len(acc.indices):])
        return tuple(out)

    def lower_op(self, n: ir.Op, d: str, frames: tuple[str, ...], loops: set[str]) -> list[P.Statement]:
        binding = self.b.ops[n.index]
        inf = binding.inference
        runtime = binding.runtime_attrs
        static = tuple(sorted((k, _hashable(v)) for k, v in inf.attrs.items() if k not in runtime))
        # element-wise kernels, and those of ops whose kernels read a pair before writing it (rope),
        # run on one buffer; any other in-place call computes into scratch and copies back
        aliased = inf.mode == "inplace" and (binding.spec.elementwise or binding.spec.in_place_kernels)
        req = P.KernelRequest(n.op, inf.mode, tuple(binding.inputs), inf.out, static,
                              tuple(sorted((k, rt.dtype) for k, rt in runtime.items())), inf.acc, inf.broadcast,
                              aliased)
        k = self.kernel(req)
        inputs = tuple(self.operand(r, loops) for r in n.inputs)
        rt = tuple(sorted((k_, rt_.var) for k_, rt_ in runtime.items()))
        if inf.mode == "inplace" and not aliased:
            # The kernel reads its inputs while writing: compute into scratch, then copy over.
            out_var = self.b.vars[n.output]
            for frame in frames:
                self.frames[frame][f"#scratch{n.index}"] = self.scratch(frame, out_var)
            return [P.Call(n.index, d, k, inputs, P.Operand(f"#scratch{n.index}"), rt, P.Operand(n.output))]
        return [P.Call(n.index, d, k, inputs, P.Operand(n.output), rt)]

    # ------------------------------------------------------------------ driver
    def run(self) -> P.Program:
        self.check_synthesizable()
        prefix, tables, keys = self.global_buffers()
        entry_blocks = self.reachable(self.b.entry)
        frame_blocks = {"entry": entry_blocks}
        keys |= self.frame_buffers("entry", entry_blocks, entry=True)
        for c in self.b.async_blocks:
            frame_blocks[c] = self.reachable(c)
            keys |= self.frame_buffers(c, frame_blocks[c], entry=False)
        # Blocks are lowered once; each frame that runs a block must have scratch for it.
        runs_in: dict[str, list[str]] = {}
        for frame, blocks in frame_blocks.items():
            for b in blocks:
                runs_in.setdefault(b, []).append(frame)
        blocks = {name: self.lower_nodes(self.b.graph.blocks[name].nodes, tuple(runs_in.get(name, ["entry"])), set())
                  for name in self.b.graph.blocks if name in runs_in}
        mark_init(self.buffers, blocks, frame_blocks, self.b)
        self.dynamic = dynamic_shape_vars(blocks, frame_blocks, self.b)
        vars_ = self.var_infos()
        weights = {}
        for k in sorted(keys):
            info = self.b.model.info(k)
            weights[k] = TensorType(info.dtype, tuple(info.shape))
        weight_bytes = sum(t.dtype.storage_nbytes(t.numel) for t in weights.values())
        locs = {n.index: _loc(n.loc) for blk in self.b.graph.blocks.values() for n in ir.walk(blk.nodes) if n.loc}
        model_path = getattr(self.b.model, "path", None)
        return P.Program(self.name, blocks, self.b.entry, self.b.async_blocks, dict(self.buffers),
                         self.frames, tuple(self.kernels), vars_, prefix, tables, dict(self.b.sizevars),
                         str(model_path) if model_path else None, tuple(sorted(keys)), weight_bytes, weights,
                         Path(self.b.graph.source_name).name if self.b.graph.source_name else None, locs,
                         frame_blocks)

    def var_infos(self) -> tuple[P.VarInfo, ...]:
        out = []
        for var in self.b.vars.values():
            if var.kind is None or var.is_prefix_table:
                continue
            if var.kind is ir.MemoryKind.PERSISTENT:
                buf = self.buffers[f"s_{c_name(var.name)}"]
                shape = buf.shape
                gettable = True
            elif var.kind is ir.MemoryKind.CONSTANT:
                shape, gettable = var.shape, True
            else:
                shape = var.shape
                gettable = var.kind is ir.MemoryKind.DYNAMIC or self.observable(var)
            out.append(P.VarInfo(len(out), var.name, _KIND_NAME[var.kind], var.dtype, shape,
                                 var.kind is ir.MemoryKind.DYNAMIC, gettable,
                                 _loc(var.decl.loc) if var.decl and var.decl.loc else var.name,
                                 var.name in self.dynamic))
        return tuple(out)


def _loc(loc) -> str:
    """file:line:col with the file's name only: generated code embeds no absolute paths."""
    return f"{Path(loc.file).name}:{loc.line}:{loc.col}"


def _row_major(sizes: tuple[int, ...]):
    if not sizes:
        yield ()
        return
    for i in range(sizes[0]):
        for rest in _row_major(sizes[1:]):
            yield (i,) + rest


def _vars_of(n) -> set[str]:
    """Variables a node reads or writes (frame-local candidates)."""
    if isinstance(n, ir.Op):
        return {r.name for r in n.inputs} | {n.output} | {a.value.value for a in n.attrs
                                                             if isinstance(a.value, ir.AttrVar)}
    if isinstance(n, ir.CacheRead):
        return {n.dst.name} | _index_names(n.src)
    if isinstance(n, ir.CacheWrite):
        return {n.src.name} | _index_names(n.dst)
    if isinstance(n, ir.CacheReset):
        return _index_names(n.target)
    if isinstance(n, ir.Transfer):
        return {n.src.name, n.dst.name}
    if isinstance(n, (ir.Yield, ir.Await)):
        return set(n.vars)
    if isinstance(n, ir.Branch):
        return {n.cond} if n.cond else set()
    if isinstance(n, ir.Loop):
        return {b for b in (n.start, n.end) if isinstance(b, str)}
    if isinstance(n, ir.Assign):
        return {n.name}
    return set()


def _index_names(acc: ir.CacheAccess) -> set[str]:
    out = set()
    for ix in acc.indices:
        for v in ((ix.value,) if isinstance(ix, ir.CacheSingle) else (ix.start, ix.end)):
            if isinstance(v, str):
                out.add(v)
    return out


def mark_init(buffers: dict[str, P.Buffer], blocks, frame_blocks, bound: BoundGraph) -> None:
    """Set `needs_init` on frame buffers whose value may be read before this step writes it.

    Walks each frame's schedule in order (branch targets inlined) tracking variables that are
    *definitely* fully written; a read of anything else needs the buffer initialised at the start
    of the step (volatile: model data / @init / zeros; temporaries: zeros). Writes inside a
    conditional branch or a loop that may not run do not count. Observable (pinned) volatile
    buffers also need init when the step may not write them, since the host can fetch them.
    """
    for frame in frame_blocks:
        written: set[str] = set()
        read_first: set[str] = set()
        _visit_io(blocks, blocks[frame if frame != "entry" else bound.entry], True, written, read_first)
        names = buffers_by_var(buffers, frame)
        for var, bname in names.items():
            buf = buffers[bname]
            if buf.storage not in ("pinned", "planned") or buf.var is None:
                continue
            kind = bound.vars[var].kind
            if kind is ir.MemoryKind.DYNAMIC:
                continue
            need = var in read_first or (buf.storage == "pinned" and var not in written)
            if frame != "entry":
                need = True   # consumers start from fresh values (the snapshot overwrites yielded ones)
            if need:
                buffers[bname] = replace(buf, needs_init=True)


def dynamic_shape_vars(blocks, frame_blocks, bound: BoundGraph) -> set[str]:
    """Variables that receive a table read whose row count is only known at run time.

    Generated code keeps their current extent beside the buffer (sized for the declared shape,
    the capacity). Nothing may compute with them afterwards: kernels have static shapes.
    """
    dynamic: set[str] = set()
    readers: dict[str, str] = {}

    def visit(stmts, frame):
        for s in stmts:
            if isinstance(s, P.TableRead) and not s.sets:
                if any(isinstance(sel, P.Slice) and any(b is not None and not isinstance(b, P.Lit)
                                                        for b in (sel.start, sel.end)) for sel in s.select):
                    if frame != "entry":
                        raise SynthesisError(f"`{s.desc}` in a consumer block reads a run-time number of rows; "
                                             "generated code supports that only in the entry block's frame")
                    dynamic.add(s.dst)
            reads, _ = _stmt_io(s)
            if isinstance(s, P.Copy):
                reads = {s.src.var}
            for r in reads:
                readers.setdefault(r, s.desc)
            if isinstance(s, P.Loop):
                visit(s.body, frame)

    for frame, names in frame_blocks.items():
        for b in names:
            visit(blocks[b], frame)
    for var in sorted(dynamic):
        if var in readers:
            decl = bound.vars[var].decl
            raise SynthesisError(f"{decl.loc if decl else var}: `{var}` receives a run-time number of rows from a "
                                 f"cache read and is then used by `{readers[var]}`; generated kernels need static "
                                 "shapes — read a fixed-size slice (literal or sizevar bounds) instead")
    return dynamic


def _visit_io(blocks, stmts, definite: bool, written: set[str], read_first: set[str]) -> None:
    """Walk statements in order: collect variables read before a definite full write."""
    for s in stmts:
        reads, writes = _stmt_io(s)
        read_first.update(r for r in reads if r not in written)
        if definite:
            written.update(writes)
        if isinstance(s, P.Loop):
            runs = isinstance(s.start, P.Lit) and isinstance(s.end, P.Lit) and _surely_less(s.start.value, s.end.value)
            _visit_io(blocks, s.body, definite and runs, written, read_first)
        elif isinstance(s, P.Branch):
            _visit_io(blocks, blocks.get(s.then_block, ()), definite and s.cond is None, written, read_first)
            if s.else_block:
                _visit_io(blocks, blocks.get(s.else_block, ()), False, written, read_first)


def _surely_less(a, b) -> bool:
    """a < b for every run-time value of a dynamic size in them (False when that depends on it)."""
    try:
        return a < b
    except DynamicDimError:
        return False


def buffers_by_var(buffers: dict[str, P.Buffer], frame: str) -> dict[str, str]:
    return {b.var: b.name for b in buffers.values() if b.frame == frame and b.var is not None}


def _stmt_io(s) -> tuple[set[str], set[str]]:
    """(variables read, variables fully written) by one statement (not descending into loops)."""
    if isinstance(s, P.Call):
        reads = {o.var for o in s.inputs} | {v for _, v in s.runtime_attrs}
        return reads, ({s.result.var} if s.result.var not in reads else set())
    if isinstance(s, P.Copy):
        return {s.src.var} | _expr_vars(s.src.indices), {s.dst.var}
    if isinstance(s, P.TableRead):
        return _sel_vars(s.select), {s.dst}
    if isinstance(s, P.TableWrite):
        return {s.src.var} | _expr_vars(s.index), set()
    if isinstance(s, P.Branch):
        return ({s.cond} if s.cond else set()), set()
    if isinstance(s, P.Loop):
        return _expr_vars((s.start, s.end)), set()
    if isinstance(s, P.Yield):
        return set(s.vars), set()
    if isinstance(s, P.StateReset):
        return _expr_vars(s.prefix), set()
    return set(), set()


def _expr_vars(exprs) -> set[str]:
    return {e.var for e in exprs if isinstance(e, P.ScalarOf)}


def _sel_vars(sel) -> set[str]:
    out = set()
    for s in sel:
        if isinstance(s, P.Slice):
            out |= _expr_vars(x for x in (s.start, s.end) if x is not None)
        else:
            out |= _expr_vars((s,))
    return out


def lower(bound: BoundGraph, *, name: str, outputs: set[str] | None = None) -> P.Program:
    """Build the Program for `bound`; `outputs` limits which volatile variables stay observable
    (None: all of them), letting the planner reuse the memory of the others."""
    return _Lowerer(bound, name, outputs).run()
