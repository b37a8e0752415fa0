"""Element-wise fusion: chains of element-wise calls become one kernel that keeps the
intermediate values in registers instead of memory.

Two adjacent calls P then S fuse when
- both ops are element-wise (registry `elementwise`), produce the same output shape, take no
  run-time attributes and do not copy through scratch;
- S reads P's output v, and v's value is dead after S: S overwrites v (an in-place chain such as
  `add(h, b) >> h; relu(h) >> h`), or v is read by S alone in the whole program and the host
  cannot observe it (it is planned memory, not a pinned output);
- no `barrier` or `dep` lies between them (statements are adjacent), neither call is named by a
  `dep` of the graph, and the chain stays within the descriptor's `preferences.max_kernel_ops`.

The fused call keeps the last node's index (its trace event and error location); the nodes it
absorbed are listed in `Program.fused_nodes` so per-node comparison skips them.
"""

from __future__ import annotations

from dataclasses import replace

from ..ops import registry
from . import program as P


def _reads(s: P.Statement) -> list[str]:
    if isinstance(s, P.Call):
        return [o.var for o in s.inputs] + [v for _, v in s.runtime_attrs]
    if isinstance(s, P.Copy):
        return [s.src.var] + [e.var for e in s.src.indices if isinstance(e, P.ScalarOf)]
    if isinstance(s, P.TableWrite):
        return [s.src.var]
    if isinstance(s, P.Branch):
        return [s.cond] if s.cond else []
    if isinstance(s, P.Yield):
        return list(s.vars)
    if isinstance(s, P.Loop):
        out = [e.var for e in (s.start, s.end) if isinstance(e, P.ScalarOf)]
        for b in s.body:
            out += _reads(b)
        return out
    return []


def _read_counts(prog: P.Program) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stmts in prog.blocks.values():
        for s in stmts:
            for v in _reads(s):
                counts[v] = counts.get(v, 0) + 1
    return counts


class _Fuser:
    def __init__(self, prog: P.Program, max_ops: int, dep_names: set[str]):
        self.p = prog
        self.max_ops = max_ops
        self.dep_names = dep_names
        self.reads = _read_counts(prog)
        self.kernels = list(prog.kernels)
        self.kernel_ids = {k: i for i, k in enumerate(self.kernels)}
        self.fused_nodes: set[int] = set()

    def elementwise(self, s) -> bool:
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None or s.output.indices:
            return False
        req = self.kernels[s.kernel]
        if req.op == "fused":
            return True
        spec = registry.get(req.op)
        if not spec.elementwise or req.op in self.dep_names or s.output.var in self.dep_names:
            return False
        # is_finite with a scalar output reduces: not element-wise in that form
        return all(t.shape == req.output.shape or len(t.shape) <= len(req.output.shape) for t in req.inputs) and \
            not (req.op == "is_finite" and req.output.shape != req.inputs[0].shape)

    def observable(self, var: str) -> bool:
        for names in self.p.frames.values():
            name = names.get(var)
            if name is not None and self.p.buffers[name].storage != "planned":
                return True
        return var in self.p.prefix_tables

    def can_chain(self, prev: P.Call, cur: P.Call, chain_len: int) -> bool:
        if chain_len >= self.max_ops:
            return False
        v = prev.output.var
        if v not in [o.var for o in cur.inputs]:
            return False
        prev_req, cur_req = self.kernels[prev.kernel], self.kernels[cur.kernel]
        if prev_req.output.shape != cur_req.output.shape:
            return False
        if cur.output.var == v:
            return True
        return self.reads.get(v, 0) == sum(1 for o in cur.inputs if o.var == v) and not self.observable(v)

    def steps_of(self, s: P.Call) -> tuple[list[P.KernelRequest], list[list[tuple[str, int]]], list[P.Operand]]:
        """(step requests, per-step argument sources, external operands) of a call or fused call."""
        req = self.kernels[s.kernel]
        if req.op == "fused":
            return list(req.chain), [list(a) for a in req.chain_args], list(s.inputs)
        return [req], [[("in", i) for i in range(len(s.inputs))]], list(s.inputs)

    def merge(self, prev: P.Call, cur: P.Call) -> P.Call:
        steps, args, ext = self.steps_of(prev)
        last = len(steps) - 1
        cur_steps, cur_args, cur_ext = self.steps_of(cur)
        v = prev.output.var
        remap: list[tuple[str, int]] = []
        for o in cur_ext:
            if o.var == v:
                remap.append(("step", last))
            else:
                if o not in ext:
                    ext.append(o)
                remap.append(("in", ext.index(o)))
        for step_args in cur_args:
            new = []
            for kind, i in step_args:
                if kind == "in":
                    new.append(remap[i])
                else:
                    new.append(("step", i + len(steps)))
            args.append(new)
        steps += cur_steps
        out = cur_steps[-1].output
        req = P.KernelRequest("fused", "normal", tuple(self._type_of(o) for o in ext), out, (), (), None, False,
                              aliased=any(o.var == cur.output.var for o in ext),
                              chain=tuple(steps), chain_args=tuple(tuple(a) for a in args))
        if req not in self.kernel_ids:
            self.kernel_ids[req] = len(self.kernels)
            self.kernels.append(req)
        self.fused_nodes.add(prev.node)
        return P.Call(cur.node, f"{prev.desc}; {cur.desc}", self.kernel_ids[req], tuple(ext), cur.output)

    def _type_of(self, o: P.Operand):
        from ..ops.types import TensorType

        if o.var in self.p.prefix_tables:
            pt = self.p.prefix_tables[o.var]
            return TensorType(pt.dtype, pt.shape)
        for names in self.p.frames.values():
            if o.var in names:
                b = self.p.buffers[names[o.var]]
                return TensorType(b.dtype, b.shape)
        raise KeyError(o.var)

    def block(self, stmts) -> tuple[P.Statement, ...]:
        out: list[P.Statement] = []
        chain_len = 0
        for s in stmts:
            if isinstance(s, P.Loop):
                out.append(replace(s, body=self.block(s.body)))
                chain_len = 0
                continue
            if out and chain_len and self.elementwise(s) and self.can_chain(out[-1], s, chain_len):
                out[-1] = self.merge(out[-1], s)
                chain_len += 1
                continue
            out.append(s)
            chain_len = 1 if self.elementwise(s) else 0
        return tuple(out)


def fuse(prog: P.Program, *, max_ops: int = 8, dep_names: set[str] | None = None) -> P.Program:
    """The program with element-wise chains fused (see the module docstring)."""
    f = _Fuser(prog, max_ops, dep_names or set())
    blocks = {name: f.block(stmts) for name, stmts in prog.blocks.items()}
    if not f.fused_nodes:
        return prog
    # drop the kernels only the fused-away calls used
    blocks, kernels, _ = P.prune_kernels(blocks, f.kernels)
    return replace(prog, blocks=blocks, kernels=kernels, fused_nodes=frozenset(f.fused_nodes))
