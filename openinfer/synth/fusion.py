"""Element-wise fusion: chains of element-wise calls become one kernel that keeps the
intermediate values in registers instead of memory.

Two adjacent calls P then S fuse when
- both ops are element-wise (registry `elementwise`), produce the same output shape, take no
  run-time attributes and do not copy through scratch;
- S reads P's output v, and v's value is dead after S: S overwrites v (an in-place chain such as
  `add(h, b) >> h; relu(h) >> h`), or v is read by S alone in the whole program and the host
  cannot observe it (it is planned memory, not a pinned output), or whatever runs next writes
  all of v before reading it: the next statement to touch v (in a loop body: in the rest of the
  iteration, then in both the next iteration and what follows the loop) overwrites it whole, or
  the step ends first and the host cannot observe v; a branch, yield or await counts as a read
  (a decoder layer's `o`, the result of two projections in turn);
- no `barrier` or `dep` lies between them (statements are adjacent), neither call is named by a
  `dep` of the graph, and the chain stays within the descriptor's `preferences.max_kernel_ops`.

Matmul epilogues: where the target renders them (`epilogue_ok`, e.g. the Vulkan GEMVs), a chain
of element-wise calls after a matmul / dequant_matmul P joins P's kernel as its `epilogue` under
the same conditions (S reads P's result, whose value then dies), and one more: S's output is not
one of P's own operands (the product reads all of those while results are stored). So a decode
step's `matmul(attf, wo) >> o; add(x, o) >> x` is one kernel that reads x[i] and writes the
product plus it, and the device runs one dispatch instead of two. A convolution hosts an
epilogue the same way (the AVX targets: a CNN's `conv2d(x, w, b) >> a; relu(a) >> a` applies the
ReLU to each tile of sums in registers, no second pass over the activations).

Norms folded into matmuls (`fold_norms`, where the target renders them, `prologue_ok`: the
Vulkan GEMVs and dequantizing GEMVs): `rms_norm(x, gamma) >> h` over the last axis, followed by
matmuls (or dequant_matmuls) that read h as their input 0 (a decoder layer's `h @ wq`, `h @ wk`,
`h @ wv`), becomes those matmuls reading x and normalising each row themselves (a workgroup
recomputes the row's scale: a sum over one row of x costs far less than the dispatch and the
barrier it saves). The norm goes when, in the
statements that follow it (calls only, up to the first that writes x, gamma or h):
- every read of h is such a matmul's input 0 (and nothing else of it), the target accepts the
  matmul with the norm as its prologue, and none of them writes x or gamma;
- h is dead after them (as above), is planned memory the host cannot observe, and neither the
  norm nor h is named by a `dep`.

Element-wise calls folded into matmuls (`fold_elementwise`, the same predicate, `prologue_ok`):
an element-wise call (or fused chain) whose operands all have its output's shape, whose result
only GEMV-shaped matmuls read as input 0, under the same conditions as a norm, becomes their
prologue: the kernel computes each element of x from the call's operands as it reads it. An
in-place call (`mul(g, u) >> g`) folds too: with it gone, g keeps the value the matmuls then
read. It runs before `fuse`, so that a decoder's `mul(g, u) >> g` goes into the down projection
rather than becoming the up projection's epilogue, which made the up GEMV wait for the gate GEMV.

Transposes folded into their reader (`fold_transposes`, where the target reads such operands,
`transposed_ok`: Vulkan's sdpa): `transpose(src, perm) >> dst` whose value only the next call
reading dst uses (a decode step's cache `[T, H, D] -> [H, T, D]` before sdpa) goes, and that call
reads src through the permutation (`KernelRequest.input_perms`), when dst is dead after it, is
planned memory the host cannot observe, and no statement between them writes src or dst.

RoPE folded into its matmul (`fold_rope`, where the target renders it, `rope_ok`: the Vulkan
GEMVs): `rope(x3, pos) >> x3` in place, at a scalar position with a static theta, whose x3 is
the result of a matmul with no epilogue (directly, or through `reshape(x) >> x3`), becomes that
matmul's epilogue: the kernel rotates each pair of result columns as it stores them, and the
rope kernel (a dependent stage of its own on a GPU) goes. It folds when nothing between the
matmul and the rope touches x or x3 or writes pos, and x is dead after the reshape (no one reads
the unrotated value). A decoder layer's q and k projections then store rotated rows, the k row
straight into the cache table (openinfer/synth/table_views.py).

Pools folded into their convolution (`fold_pools`, where the target renders them,
`pooled_conv_ok`: the AVX targets' tiled conv2d): `max_pool2d(a) >> p` or `avg_pool2d(a) >> p`
whose windows tile a (stride = kernel, no padding), where a is the result of the conv2d call
before it (with its epilogue: a CNN's `conv2d(x, w, b) >> a; relu(a) >> a; max_pool2d(a, kernel=2)
>> p`), becomes that convolution writing p: each of its work units computes the convolution rows
of one pooled row into its thread's workspace and pools them there, so a is never stored. It
folds when a is dead after the pool and planned memory the host cannot observe, and only calls
lie between the two, none of which touches a or p or writes the convolution's operands (the
convolution moves down to the pool's place).

The fused call keeps the last node's index (its trace event and error location); the nodes it
absorbed are listed in `Program.fused_nodes` so per-node comparison skips them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..ops import registry
from ..ops.shapes import transpose_perm
from . import program as P

#: ops whose kernels may take a prologue or a rope epilogue (where the target's predicate agrees)
_MATMULS = ("matmul", "dequant_matmul")
#: ops whose kernels may take an element-wise epilogue (where the target's predicate agrees)
_EPILOGUE_HOSTS = (*_MATMULS, "conv1d", "conv2d")
#: ops a convolution may compute after itself (where the target's predicate agrees)
_POOLS = ("max_pool2d", "avg_pool2d")


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


def _writes(s: P.Statement) -> list[str]:
    if isinstance(s, P.Call):
        return [s.output.var] + ([s.copy_to.var] if s.copy_to else [])
    if isinstance(s, P.Copy):
        return [s.dst.var]
    if isinstance(s, P.TableRead):
        return [s.dst]
    if isinstance(s, (P.ScalarStep, P.StateReset)):
        return [s.var]
    return []


def _touches(s: P.Statement, v: str) -> bool:
    """Whether s reads or writes v (branches, yields, awaits and returns count as touching
    everything: what runs after them is not in this block)."""
    if isinstance(s, (P.Branch, P.Yield, P.Await, P.Return)):
        return True
    if isinstance(s, P.Loop):
        return v in _reads(s) or any(_touches(b, v) for b in s.body)
    return v in _reads(s) or v in _writes(s)


def _roles(*, own: int, epilogue: int = 0, rope: int = 0, prologue: int = 0) -> tuple[str, ...]:
    """KernelRequest.roles of inputs laid out as the op's own, then an epilogue's (or a rope's
    position), then a prologue's."""
    return ("op",) * own + ("epilogue",) * epilogue + ("rope",) * rope + ("prologue",) * prologue


def _read_counts(prog: P.Program) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stmts in prog.blocks.values():
        for s in stmts:
            for v in _reads(s):
                counts[v] = counts.get(v, 0) + 1
    return counts


class _Fuser:
    def __init__(self, prog: P.Program, max_ops: int, dep_names: set[str],
                 epilogue_ok: Callable[[P.KernelRequest], bool] | None):
        self.p = prog
        self.max_ops = max_ops
        self.dep_names = dep_names
        self.epilogue_ok = epilogue_ok
        self.in_entry = False         # the block being fused is the entry block
        self.reads = _read_counts(prog)
        self.kernels = list(prog.kernels)
        self.kernel_ids = {k: i for i, k in enumerate(self.kernels)}
        self.fused_nodes: set[int] = set()

    def kernel_id(self, req: P.KernelRequest) -> int:
        """The index of request `req` in the program's kernels (appended if new)."""
        if req not in self.kernel_ids:
            self.kernel_ids[req] = len(self.kernels)
            self.kernels.append(req)
        return self.kernel_ids[req]

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

    def dead(self, v: str, seq, then: Callable[[str], bool]) -> bool:
        """Whether v's value is dead where `seq` starts: the first statement of seq to touch v
        writes all of it without reading it, or the step ends first and the host cannot observe
        v; `then(v)` answers for what runs after seq (a loop body: the next iteration or what
        follows the loop)."""
        for j, s in enumerate(seq):
            if isinstance(s, P.Return):
                return self.in_entry and not self.observable(v)
            bounds = [e.var for e in (s.start, s.end) if isinstance(e, P.ScalarOf)] if isinstance(s, P.Loop) else []
            if isinstance(s, P.Loop) and v not in bounds and _touches(s, v):
                # the first iteration's first touch decides; a loop that may run no iteration
                # also needs v dead after it
                runs = isinstance(s.start, P.Lit) and isinstance(s.end, P.Lit) and s.end.value > s.start.value
                return self.dead(v, s.body, lambda _: False) and (runs or self.dead(v, seq[j + 1:], then))
            if _touches(s, v):
                return (isinstance(s, P.Call) and s.output.var == v and s.copy_to is None and not s.output.indices
                        and v not in _reads(s) and self.kernels[s.kernel].mode == "normal")
        return then(v)

    def can_chain(self, prev: P.Call, cur: P.Call, chain_len: int, rest, then: Callable[[str], bool]) -> bool:
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
        return (self.reads.get(v, 0) == sum(1 for o in cur.inputs if o.var == v) and not self.observable(v)) \
            or self.dead(v, rest, then)

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
        self.fused_nodes.add(prev.node)
        return P.Call(cur.node, f"{prev.desc}; {cur.desc}", self.kernel_id(req), tuple(ext), cur.output)

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

    # ------------------------------------------------------------------ matmul epilogues
    def host(self, s, ops: tuple[str, ...]) -> bool:
        """Whether s is a call of one of `ops` whose result a kernel may post-process as it stores
        it (no run-time attributes, scratch copy or indexed output; no `dep` names it)."""
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None or s.output.indices:
            return False
        req = self.kernels[s.kernel]
        return req.op in ops and req.op not in self.dep_names and s.output.var not in self.dep_names

    def matmul_host(self, s) -> bool:
        return self.host(s, _MATMULS)

    def epilogue_host(self, s) -> bool:
        return self.epilogue_ok is not None and self.host(s, _EPILOGUE_HOSTS)

    def attach(self, host: P.Call, cur: P.Call, rest, then: Callable[[str], bool]) -> P.Call | None:
        """host with cur appended to its epilogue, or None where that is not allowed."""
        req = self.kernels[host.kernel]
        epi = req.epilogue
        steps = len(epi.chain) if epi else 0
        own = len(req.own_inputs)
        end = len(host.inputs) - len(req.prologue_inputs)      # a prologue's operands come last
        if not self.can_chain(host, cur, steps + 1, rest, then) or \
                cur.output.var in [o.var for o in (*host.inputs[:own], *host.inputs[end:])]:
            return None
        # the epilogue's operands: the product (index 0, no variable), then the extra inputs
        ext: list[P.Operand | None] = [None, *host.inputs[own:end]]
        chain = list(epi.chain) if epi else []
        args = [list(a) for a in epi.chain_args] if epi else []
        cur_steps, cur_args, cur_ext = self.steps_of(cur)
        v = host.output.var
        remap: list[tuple[str, int]] = []
        for o in cur_ext:
            if o.var == v:
                remap.append(("step", len(chain) - 1) if chain else ("in", 0))
            else:
                if o not in ext:
                    ext.append(o)
                remap.append(("in", ext.index(o)))
        offset = len(chain)
        for step_args in cur_args:
            args.append([remap[i] if kind == "in" else ("step", i + offset) for kind, i in step_args])
        chain += cur_steps
        product = epi.inputs[0] if epi else req.output
        extra = tuple(self._type_of(o) for o in ext[1:])
        new_epi = P.KernelRequest("fused", "normal", (product, *extra), cur_steps[-1].output, (), (), None, False,
                                  aliased=any(o.var == cur.output.var for o in ext[1:]),
                                  chain=tuple(chain), chain_args=tuple(tuple(a) for a in args))
        new_req = replace(req, inputs=(*req.own_inputs, *extra, *req.prologue_inputs), output=new_epi.output,
                          epilogue=new_epi, roles=_roles(own=len(req.own_inputs), epilogue=len(extra),
                                                         prologue=len(req.prologue_inputs)))
        if not self.epilogue_ok(new_req):
            return None
        self.fused_nodes.add(host.node)
        return P.Call(cur.node, f"{host.desc}; {cur.desc}", self.kernel_id(new_req),
                      (*host.inputs[:own], *ext[1:], *host.inputs[end:]), cur.output)

    def block(self, stmts, then: Callable[[str], bool]) -> tuple[P.Statement, ...]:
        """stmts fused; `then(v)`: whether v's value is dead once stmts have run (see dead)."""
        out: list[P.Statement] = []
        chain_len = 0
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, P.Loop):
                def after_body(v, body=s.body, rest=rest):       # the next iteration, or what follows
                    return self.dead(v, rest, then) and self.dead(v, body, after_body)
                out.append(replace(s, body=self.block(s.body, after_body)))
                chain_len = 0
                continue
            if out and chain_len and self.elementwise(s) and self.can_chain(out[-1], s, chain_len, rest, then):
                out[-1] = self.merge(out[-1], s)
                chain_len += 1
                continue
            if out and self.epilogue_host(out[-1]) and self.elementwise(s):
                attached = self.attach(out[-1], s, rest, then)
                if attached is not None:
                    out[-1] = attached
                    continue
            out.append(s)
            chain_len = 1 if self.elementwise(s) else 0
        return tuple(out)


def _run(prog: P.Program, f: _Fuser) -> P.Program:
    """prog with every block rewritten by f's `block`, and the kernels only the absorbed calls
    used dropped."""
    blocks = {}
    for name, stmts in prog.blocks.items():
        # the entry block's end (or a return in it) ends the step: a value the host cannot
        # observe is dead there; another block returns to code this pass does not follow
        f.in_entry = name == prog.entry
        blocks[name] = f.block(stmts, lambda v, entry=f.in_entry: entry and not f.observable(v))
    if not f.fused_nodes:
        return prog
    blocks, kernels, _ = P.prune_kernels(blocks, f.kernels)
    return replace(prog, blocks=blocks, kernels=kernels, fused_nodes=prog.fused_nodes | frozenset(f.fused_nodes))


def fuse(prog: P.Program, *, max_ops: int = 8, dep_names: set[str] | None = None,
         epilogue_ok: Callable[[P.KernelRequest], bool] | None = None) -> P.Program:
    """The program with element-wise chains fused, and with matmul epilogues where `epilogue_ok`
    accepts the kernel request that would result (see the module docstring)."""
    return _run(prog, _Fuser(prog, max_ops, dep_names or set(), epilogue_ok))


# ---------------------------------------------------------------------------------------- norm prologues

class _Folder(_Fuser):
    """A pass that removes calls one at a time by folding each into the calls after it that read
    its result (`folded`, defined by each pass), where the target accepts what results (`ok`)."""

    def __init__(self, prog: P.Program, dep_names: set[str], ok: Callable[[P.KernelRequest], bool]):
        super().__init__(prog, 0, dep_names, None)
        self.ok = ok

    def block(self, stmts, then: Callable[[str], bool]) -> tuple[P.Statement, ...]:
        stmts = tuple(stmts)
        i = 0
        while i < len(stmts):
            s = stmts[i]
            if isinstance(s, P.Loop):
                def after_body(v, body=s.body, rest=stmts[i + 1:]):
                    return self.dead(v, rest, then) and self.dead(v, body, after_body)
                stmts = stmts[:i] + (replace(s, body=self.block(s.body, after_body)),) + stmts[i + 1:]
                i += 1
                continue
            folded = self.folded(stmts, i, then)
            if folded is None:
                i += 1
            else:
                stmts = folded          # the folded call is gone: stmts[i] is the next
        return stmts


class _PrologueFolder(_Folder):
    """Folds a call whose result `h` only matmuls read as their input 0 into those matmuls (their
    `prologue`); each pass's `prologue_of(call, request)` says which calls fold, and as what
    request."""

    def folded(self, stmts: tuple, i: int, then: Callable[[str], bool]) -> tuple | None:
        """stmts with the call at i folded into its matmuls, or None where it does not fold."""
        s = stmts[i]
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None:
            return None
        req = self.kernels[s.kernel]
        h = s.output.var
        if (s.inputs[0].indices or s.output.indices
                or req.op in self.dep_names or h in self.dep_names or self.observable(h)):
            return None
        pro = self.prologue_of(s, req)
        if pro is None:
            return None
        kept = {o.var for o in s.inputs}          # what the matmuls read instead of h
        consumers: dict[int, P.Call] = {}
        end = len(stmts)
        for j in range(i + 1, len(stmts)):
            t = stmts[j]
            if not isinstance(t, P.Call):
                end = j
                break
            reads = [o.var for o in t.inputs] + [v for _, v in t.runtime_attrs]
            if h in reads:
                mm = self.kernels[t.kernel]
                if (mm.op not in _MATMULS or mm.prologue is not None
                        or t.inputs[0].var != h or reads.count(h) != 1 or t.inputs[0].indices
                        or t.result.var in kept):
                    return None
                roles = (mm.roles or ("op",) * len(mm.inputs)) + ("prologue",) * (len(pro.inputs) - 1)
                new_req = replace(mm, inputs=(pro.inputs[0], *mm.inputs[1:], *pro.inputs[1:]), prologue=pro,
                                  roles=roles)
                if not self.ok(new_req):
                    return None
                consumers[j] = P.Call(t.node, f"{s.desc}; {t.desc}", self.kernel_id(new_req),
                                      (s.inputs[0], *t.inputs[1:], *s.inputs[1:]), t.output, t.runtime_attrs,
                                      t.copy_to)
            if t.result.var in kept or t.result.var == h:
                end = j if h not in reads else j + 1
                break
        if not consumers or not self.dead(h, stmts[end:], then):
            return None
        self.fused_nodes.add(s.node)
        return stmts[:i] + tuple(consumers.get(j, stmts[j]) for j in range(i + 1, end)) + stmts[end:]


class _NormFolder(_PrologueFolder):
    def prologue_of(self, s: P.Call, req: P.KernelRequest) -> P.KernelRequest | None:
        if req.op != "rms_norm" or req.mode != "normal" or req.attr("axis") != len(req.output.shape) - 1 \
                or s.output.var in [o.var for o in s.inputs]:
            return None
        return req


class _ElementwiseFolder(_PrologueFolder):
    def prologue_of(self, s: P.Call, req: P.KernelRequest) -> P.KernelRequest | None:
        # every operand read at the element x is read at (no broadcast); an in-place call is
        # fine: with the call gone its output keeps the old value the matmuls then read
        if not self.elementwise(s) or any(t.shape != req.output.shape for t in req.inputs):
            return None
        if req.op == "fused":
            return req
        return P.KernelRequest("fused", "normal", req.inputs, req.output, (), (), None, False,
                               chain=(req,), chain_args=(tuple(("in", n) for n in range(len(req.inputs))),))


def fold_norms(prog: P.Program, prologue_ok: Callable[[P.KernelRequest], bool], *,
               dep_names: set[str] | None = None) -> P.Program:
    """The program with row norms folded into the matmuls that consume them, where `prologue_ok`
    accepts the resulting request (see the module docstring)."""
    return _run(prog, _NormFolder(prog, dep_names or set(), prologue_ok))


def fold_elementwise(prog: P.Program, prologue_ok: Callable[[P.KernelRequest], bool], *,
                     dep_names: set[str] | None = None) -> P.Program:
    """The program with element-wise calls folded into the matmuls that consume them, where
    `prologue_ok` accepts the resulting request (see the module docstring). Runs before `fuse`:
    a call folded here is not left as the epilogue of the matmul before it."""
    return _run(prog, _ElementwiseFolder(prog, dep_names or set(), prologue_ok))


# ---------------------------------------------------------------------------------------- transposed operands

class _TransposeFolder(_Folder):
    def folded(self, stmts: tuple, i: int, then: Callable[[str], bool]) -> tuple | None:
        """stmts with the transpose at i read through by the next call that reads its result, or
        None where it does not fold."""
        s = stmts[i]
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None:
            return None
        tr = self.kernels[s.kernel]
        src, dst = s.inputs[0], s.output
        if (tr.op != "transpose" or tr.mode != "normal" or src.indices or dst.indices or src.var == dst.var
                or tr.op in self.dep_names or dst.var in self.dep_names or self.observable(dst.var)):
            return None
        for j in range(i + 1, len(stmts)):
            t = stmts[j]
            if not isinstance(t, P.Call):
                return None
            reads = [o.var for o in t.inputs] + [v for _, v in t.runtime_attrs]
            if dst.var in reads:
                req = self.kernels[t.kernel]
                slots = [n for n, o in enumerate(t.inputs) if o.var == dst.var]
                if len(slots) != 1 or t.result.var in (src.var, dst.var) or req.op == "fused" or req.epilogue \
                        or req.prologue or any(n == slots[0] for n, _ in req.input_perms) \
                        or not self.dead(dst.var, stmts[j + 1:], then):
                    return None
                n = slots[0]
                perm = tuple(transpose_perm(tr.attr("perm"), len(tr.output.shape)))
                new_req = replace(req, inputs=req.inputs[:n] + (tr.output,) + req.inputs[n + 1:],
                                  input_perms=tuple(sorted((*req.input_perms, (n, perm)))))
                if not self.ok(new_req):
                    return None
                call = P.Call(t.node, f"{s.desc}; {t.desc}", self.kernel_id(new_req),
                              t.inputs[:n] + (src,) + t.inputs[n + 1:], t.output, t.runtime_attrs, t.copy_to)
                self.fused_nodes.add(s.node)
                return stmts[:i] + stmts[i + 1:j] + (call,) + stmts[j + 1:]
            if t.result.var in (src.var, dst.var):
                return None
        return None


def fold_transposes(prog: P.Program, transposed_ok: Callable[[P.KernelRequest], bool], *,
                    dep_names: set[str] | None = None) -> P.Program:
    """The program with transposes read through by the call after them, where `transposed_ok`
    accepts the resulting request (see the module docstring)."""
    return _run(prog, _TransposeFolder(prog, dep_names or set(), transposed_ok))


# ---------------------------------------------------------------------------------------- pooled convolutions

class _PoolFolder(_Folder):
    def folded(self, stmts: tuple, i: int, then: Callable[[str], bool]) -> tuple | None:
        """stmts with the pool at i computed by the convolution that computed its input, or None
        where it does not fold (module docstring)."""
        s = stmts[i]
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None:
            return None
        pool = self.kernels[s.kernel]
        a, p = s.inputs[0], s.output
        if (pool.op not in _POOLS or pool.mode != "normal" or a.indices or p.indices or a.var == p.var
                or pool.op in self.dep_names or p.var in self.dep_names or self.observable(a.var)):
            return None
        j = next((j for j in range(i - 1, -1, -1) if _touches(stmts[j], a.var)), None)
        if j is None or not self.host(stmts[j], ("conv2d",)):
            return None
        host, between = stmts[j], stmts[j + 1:i]
        conv = self.kernels[host.kernel]
        operands = {o.var for o in host.inputs}
        if (host.output.var != a.var or conv.pool is not None or a.var in operands or p.var in operands
                or any(not isinstance(t, P.Call) or _touches(t, p.var) or operands & set(_writes(t)) for t in between)
                or not self.dead(a.var, stmts[i + 1:], then)):
            return None
        new_req = replace(conv, output=pool.output, pool=pool)
        if not self.ok(new_req):
            return None
        call = P.Call(s.node, f"{host.desc}; {s.desc}", self.kernel_id(new_req), host.inputs, p)
        self.fused_nodes.add(host.node)
        return stmts[:j] + between + (call,) + stmts[i + 1:]


def fold_pools(prog: P.Program, pooled_conv_ok: Callable[[P.KernelRequest], bool], *,
               dep_names: set[str] | None = None) -> P.Program:
    """The program with pools computed by the convolutions before them, where `pooled_conv_ok`
    accepts the resulting request (see the module docstring)."""
    return _run(prog, _PoolFolder(prog, dep_names or set(), pooled_conv_ok))


# ---------------------------------------------------------------------------------------- rope epilogues

class _RopeFolder(_Folder):
    def folded(self, stmts: tuple, i: int, then: Callable[[str], bool]) -> tuple | None:
        """stmts with the rope at i applied by the matmul that computed its input, or None where
        it does not fold (module docstring)."""
        s = stmts[i]
        if not isinstance(s, P.Call) or s.runtime_attrs or s.copy_to is not None:
            return None
        rope = self.kernels[s.kernel]
        x, pos = s.inputs[0], s.inputs[1] if len(s.inputs) > 1 else None
        if (rope.op != "rope" or pos is None or x != s.output or x.indices or pos.indices or rope.inputs[1].shape
                or rope.op in self.dep_names or x.var in self.dep_names):
            return None

        def last_touch(var: str, before: int) -> int | None:
            return next((j for j in range(before - 1, -1, -1) if _touches(stmts[j], var)), None)

        j = last_touch(x.var, i)
        if j is None:
            return None
        src = stmts[j]
        if (isinstance(src, P.Call) and self.kernels[src.kernel].op == "reshape" and src.output == x
                and not src.runtime_attrs and src.copy_to is None and not src.inputs[0].indices
                and src.inputs[0].var != x.var):
            y = src.inputs[0].var
            if not self.dead(y, stmts[j + 1:], then) or self.observable(y):
                return None
            j = last_touch(y, j)
            if j is None:
                return None
        else:
            y = x.var
        host = stmts[j]
        if not self.matmul_host(host) or host.output.var != y or y in [o.var for o in host.inputs]:
            return None
        mm = self.kernels[host.kernel]
        if mm.epilogue is not None or mm.output.dtype != rope.output.dtype or \
                any(pos.var in _writes(t) for t in stmts[j + 1:i]):
            return None
        new_req = replace(mm, inputs=(*mm.own_inputs, rope.inputs[1], *mm.prologue_inputs), epilogue=rope,
                          roles=_roles(own=len(mm.own_inputs), rope=1, prologue=len(mm.prologue_inputs)))
        if not self.ok(new_req):
            return None
        own = len(mm.own_inputs)
        call = P.Call(s.node, f"{host.desc}; {s.desc}", self.kernel_id(new_req),
                      (*host.inputs[:own], pos, *host.inputs[own:]), host.output)
        self.fused_nodes.add(host.node)
        return stmts[:j] + (call,) + stmts[j + 1:i] + stmts[i + 1:]


def fold_rope(prog: P.Program, rope_ok: Callable[[P.KernelRequest], bool], *,
              dep_names: set[str] | None = None) -> P.Program:
    """The program with in-place ropes applied by the matmuls that computed their input, where
    `rope_ok` accepts the resulting request (see the module docstring)."""
    return _run(prog, _RopeFolder(prog, dep_names or set(), rope_ok))
