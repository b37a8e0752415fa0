"""Reshapes as views: `reshape(src) >> dst` copies nothing when dst can live in src's buffer.

A reshape keeps the bytes, and so does a transpose that only moves axes of size 1 (a decode
step's `[1, heads, d] -> [heads, 1, d]`): "reshape" below means either. dst may share src's
buffer whenever, from the reshape on, the two values never need to differ. The pass makes dst's
variable use src's buffer (frames map both to it; the memory plan then sees one buffer with both
lifetimes) and turns the call into a marker (the node keeps its trace event). It takes a reshape
`R` of the entry block's own schedule (loops included, not branch targets or consumers) when, in
the flattened schedule the memory planner uses (openinfer/synth/memplan.py; positions within one
loop iteration):

- src and dst are planned buffers (not observable, not inputs) of more than one element, not
  re-initialised per step, and no yield or await names them;
- every access of dst is at R or after it, in R's loop (so dst holds nothing before R, in this
  iteration or the next);
- every access of src is in R's loop, the first one a full write before R (src carries nothing
  across iterations);
- src is not touched between R and dst's last access, except by that last access itself when it
  is the reshape back `reshape(dst) >> src` (which then copies the buffer onto itself and becomes
  a marker too: dst's bytes are src's new value).

These cover the reshapes of a transformer layer (projections to heads and back, the cache read
as heads, `k -> k3 -> rope -> k`). A reshape whose two sides already share a buffer becomes a
marker. Each decision sees the buffers the previous ones merged.
"""

from __future__ import annotations

from dataclasses import replace

from ..ops.shapes import transpose_perm
from . import program as P
from .memplan import timeline


def _keeps_bytes(req: P.KernelRequest) -> bool:
    """A reshape, or a transpose whose axes longer than 1 keep their order."""
    if req.op == "transpose":
        shape = req.inputs[0].shape
        moved = [a for a in transpose_perm(req.attr("perm"), len(shape)) if shape[a] != 1]
        return moved == sorted(moved)
    return req.op == "reshape"


def _reshapes(prog: P.Program, stmts) -> list[P.Call]:
    out = []
    for s in stmts:
        if isinstance(s, P.Call) and not s.runtime_attrs and _keeps_bytes(prog.kernels[s.kernel]) \
                and s.copy_to is None and not s.inputs[0].indices and not s.output.indices:
            out.append(s)
        elif isinstance(s, P.Loop):
            out += _reshapes(prog, s.body)
    return out


def named_by_yields(prog: P.Program) -> set[str]:
    """The variables a yield or await names (their buffers are shared with consumer frames)."""
    names: set[str] = set()

    def visit(stmts):
        for s in stmts:
            if isinstance(s, (P.Yield, P.Await)):
                names.update(s.vars)
            elif isinstance(s, P.Loop):
                visit(s.body)
    for stmts in prog.blocks.values():
        visit(stmts)
    return names


def _can_share(prog: P.Program, entry: dict[str, str], tl, at_pos: dict[int, P.Call], r: P.Call,
               shared_vars: set[str]) -> bool:
    """The module docstring's conditions, on `entry` (the entry frame's variable -> buffer, with
    the views decided so far) and `tl` (the accesses of those buffers)."""
    src, dst = r.inputs[0].var, r.output.var
    if src not in entry or dst not in entry or src in shared_vars or dst in shared_vars:
        return False
    sb, db = prog.buffers[entry[src]], prog.buffers[entry[dst]]
    if sb.storage != "planned" or db.storage != "planned" or sb.needs_init or db.needs_init or sb.numel <= 1:
        return False
    if id(r) not in tl.at:
        return False
    pos, loops = tl.at[id(r)]
    src_acc, dst_acc = tl.accesses.get(sb.name, []), tl.accesses.get(db.name, [])
    if any(p < pos or ls != loops for p, _, ls in dst_acc):
        return False
    first = min(src_acc)
    if any(ls != loops for _, _, ls in src_acc) or not (first[0] < pos and first[1]):
        return False
    last_dst = max(p for p, _, _ in dst_acc)
    between = sorted({p for p, _, _ in src_acc if pos < p <= last_dst})
    if not between:
        return True
    if between != [last_dst] or last_dst == pos or last_dst not in at_pos:
        return False
    back = at_pos[last_dst]
    return back.inputs[0].var == dst and back.output.var == src


def views(prog: P.Program) -> P.Program:
    """The program with the reshapes that can be views turned into markers (module docstring).
    One timeline of the schedule serves every decision: a view merges the two buffers' accesses
    (less the reshape's own, which the marker no longer makes)."""
    shared_vars = named_by_yields(prog)
    reshapes = _reshapes(prog, prog.blocks[prog.entry])
    tl = timeline(prog)
    at_pos = {tl.at[id(r)][0]: r for r in reshapes if id(r) in tl.at}
    entry = dict(prog.frames.get("entry", {}))
    made: set[int] = set()
    dropped: set[str] = set()
    for r in reshapes:
        src, dst = r.inputs[0].var, r.output.var
        same = src in entry and entry.get(src) == entry.get(dst)
        if not same and not _can_share(prog, entry, tl, at_pos, r, shared_vars):
            continue
        made.add(id(r))
        if not same:
            sb, db = entry[src], entry[dst]
            pos = tl.at[id(r)][0]
            tl.accesses[sb] = sorted(a for a in tl.accesses.pop(db, []) + tl.accesses.get(sb, []) if a[0] != pos)
            entry[dst] = sb
            dropped.add(db)
    if not made:
        return prog
    dropped -= set(entry.values())
    blocks, kernels, _ = P.prune_kernels({name: _mark(stmts, made) for name, stmts in prog.blocks.items()},
                                         prog.kernels)
    return replace(prog, frames={**prog.frames, "entry": entry}, blocks=blocks, kernels=kernels,
                   buffers={n: b for n, b in prog.buffers.items() if n not in dropped})


def _mark(stmts, made: set[int]) -> tuple[P.Statement, ...]:
    """The statements with the reshapes in `made` (by id) replaced by view markers."""
    out = []
    for s in stmts:
        if id(s) in made:
            s = P.Marker(s.node, s.desc, "view")
        elif isinstance(s, P.Loop):
            s = replace(s, body=_mark(s.body, made))
        out.append(s)
    return tuple(out)
