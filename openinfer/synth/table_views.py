"""Cache reads and writes in place: `cache.read T[i.., ..] >> dst` copies nothing when the kernels
that read dst can read the table's entry rows where they are, and `cache.write src >> T[i..]`
copies nothing when the kernel that computes src can store it in the row instead.

A decode step reads a layer's whole key and value cache (`cache.read Kc[l, ..] >> kc`) only to
hand it to attention; the copy is a dependent stage of its own on a GPU (~4 us on an H100 or
H200, one per table and layer). Where the target can bind part of a persistent table as a kernel operand
(`Target.reads_tables_in_place`), this pass rewrites the kernels' inputs that name dst's buffer
(directly or through views: openinfer/synth/views.py runs first) to the table operand `T[i..]`
(leading indices only: the block of every row under them, which is what dst holds) and turns the
read into a marker (the node keeps its trace event). It takes a read `R` of the entry block's own
schedule (loops included) when, in the flattened schedule the memory planner uses
(openinfer/synth/memplan.py):

- the selection is scalar indices then one whole trailing slice (`T[l, ..]`, `T[2, 0..]`, `T[]`), no
  dynamic extent is set by it, and every scalar index is in range whatever runs: a literal, or a
  loop variable whose loop has literal bounds inside the table's size (the copy's run-time index
  checks have no counterpart in a binding);
- dst is a planned buffer (not observable, not an input) that no yield or await names, not
  re-initialised per step; every access of it is at R or after it, within R's loops, and every
  one after R is a kernel reading it as an input (nothing writes it, copies it or stores it);
- nothing writes or resets T from R to dst's last access, or in the whole of a loop (that R is
  not in) reading dst, and T is written nowhere else than the entry block's own schedule (a
  branch target or a consumer could run between).

Writes (`table_writes_in_place`, run first): the append of a decode step's key and value rows is
a dependent stage of its own too, after the kernel that computed the row. A write `W` of the
entry block's own schedule, `cache.write src >> T[i..]` with every index a literal, a loop
variable or a scalar variable (checked at run time as the copy was), becomes a marker, and the
kernel call `C` that last wrote src's buffer writes the row instead (its output operand becomes
`T[i..]`), when:

- src is a planned buffer that no yield or await names, of the row's dtype and size, not
  re-initialised per step; all its accesses are in W's loops, the first a full write (it carries
  nothing across iterations), none after W (nothing reads src again);
- C is the last access of src before W, a kernel (not accumulating into its output, no scratch
  copy) writing src whole: an element-wise or pair-wise in-place call (rope) reads its input
  binding before writing, so the row may be a binding of its own;
- nothing between C and W touches T or runs what the schedule does not show (branches, yields),
  so no one sees the row early;
- T's index can choose among at most MAX_ROW_CHOICES rows (a Vulkan call site keeps a
  descriptor set per row it may write).
"""

from __future__ import annotations

import math
from dataclasses import replace

from . import program as P
from .memplan import timeline
from .views import named_by_yields


def _entry_schedule(stmts, loops: tuple[P.Loop, ...] = ()):
    """(statement, enclosing loops) of a block's own schedule, loop bodies included."""
    for s in stmts:
        yield s, loops
        if isinstance(s, P.Loop):
            yield from _entry_schedule(s.body, loops + (s,))


def _static_index(e: P.IntExpr, size: int, loops: tuple[P.Loop, ...]) -> bool:
    """Whether index `e` lies in 0..size-1 on every run."""
    if isinstance(e, P.Lit):
        return isinstance(e.value, int) and 0 <= e.value < size
    if isinstance(e, P.LoopVar):
        loop = next((lp for lp in reversed(loops) if lp.var == e.name), None)
        return (loop is not None and isinstance(loop.start, P.Lit) and isinstance(loop.end, P.Lit)
                and isinstance(loop.start.value, int) and isinstance(loop.end.value, int)
                and 0 <= loop.start.value and loop.end.value <= size)
    return False


def _leading(prog: P.Program, r: P.TableRead, loops) -> tuple[P.IntExpr, ...] | None:
    """The scalar indices of a read `T[i.., whole slice]`, or None if the read is not of that form."""
    lay = prog.tables.get(r.var)
    if lay is None or r.sets or not r.select or not isinstance(r.select[-1], P.Slice):
        return None
    *lead, last = r.select
    size = lay.sizes[len(lead)]
    whole = ((last.start is None or last.start == P.Lit(0))
             and (last.end is None or (isinstance(last.end, P.Lit) and last.end.value == size)))
    if not whole or len(r.select) != len(lay.sizes):
        return None
    if not all(not isinstance(e, P.Slice) and _static_index(e, lay.sizes[k], loops) for k, e in enumerate(lead)):
        return None
    return tuple(lead)


#: the most rows a rewritten write may choose among (descriptor sets per call site on Vulkan)
MAX_ROW_CHOICES = 4096


def _touches(s, table: str) -> bool:
    """Whether statement `s` reads, writes or resets table `table`."""
    if isinstance(s, (P.TableRead, P.TableWrite, P.StateReset)):
        return s.var == table
    if isinstance(s, P.Call):
        return any(o.var == table for o in (*s.inputs, s.output))
    return False


def table_writes_in_place(prog: P.Program) -> P.Program:
    """The program with the table writes whose row its source's kernel can store turned into
    markers, that kernel writing the row (module docstring)."""
    entry = prog.frames.get("entry", {})
    schedule = list(_entry_schedule(prog.blocks[prog.entry]))
    tl = timeline(prog)
    by_pos = {tl.at[id(s)][0]: s for s, _ in schedule if id(s) in tl.at}
    named = named_by_yields(prog)
    outputs: dict[int, P.TableWrite] = {}       # id(C) -> the write it takes over
    made: set[int] = set()
    for w, _ in schedule:
        if not isinstance(w, P.TableWrite) or id(w) not in tl.at or w.src.indices:
            continue
        lay = prog.tables.get(w.var)
        bname = entry.get(w.src.var)
        if lay is None or bname is None or len(w.index) != len(lay.sizes):
            continue
        if any(isinstance(e, P.Lit) and not isinstance(e.value, int) for e in w.index):
            continue
        if math.prod(lay.sizes) > MAX_ROW_CHOICES:
            continue
        buf, table = prog.buffers[bname], prog.buffers[prog.frames["global"][w.var]]
        if (buf.storage != "planned" or buf.needs_init or buf.dtype != table.dtype
                or buf.numel != math.prod(lay.entry_shape) or any(entry.get(v) == bname for v in named)):
            continue
        pos, loops = tl.at[id(w)]
        acc = sorted(tl.accesses.get(bname, []))
        if not acc or any(ls != loops or p > pos for p, _, ls in acc) or not acc[0][1]:
            continue
        before = [p for p, _, _ in acc if p < pos]
        c = by_pos.get(max(before)) if before else None
        if (not isinstance(c, P.Call) or id(c) in outputs or entry.get(c.output.var) != bname or c.output.indices
                or c.copy_to is not None or prog.kernels[c.kernel].mode == "accumulate"):
            continue
        between = [by_pos.get(p) for p in range(tl.at[id(c)][0] + 1, pos)]
        if any(x is None or isinstance(x, (P.Branch, P.Yield, P.Await, P.Return)) or _touches(x, w.var)
               for x in between):
            continue
        outputs[id(c)] = w
        made.add(id(w))
    if not made:
        return prog
    return replace(prog, blocks={**prog.blocks, prog.entry: _redirected(prog.blocks[prog.entry], made, outputs)})


def _redirected(stmts, made: set[int], outputs: dict[int, P.TableWrite]):
    out = []
    for s in stmts:
        if id(s) in made:
            s = P.Marker(s.node, s.desc, "in kernel")
        elif id(s) in outputs:
            w = outputs[id(s)]
            s = replace(s, output=P.Operand(w.var, w.index), store_node=w.node)
        elif isinstance(s, P.Loop):
            s = replace(s, body=_redirected(s.body, made, outputs))
        out.append(s)
    return tuple(out)


def table_reads_in_place(prog: P.Program) -> P.Program:
    """The program with the table reads that can be views turned into markers, their readers
    reading the table (module docstring)."""
    entry = prog.frames.get("entry", {})
    schedule = list(_entry_schedule(prog.blocks[prog.entry]))
    own = {id(s) for s, _ in schedule}
    written_elsewhere = {s.var for stmts in prog.blocks.values() for s, _ in _entry_schedule(stmts)
                         if isinstance(s, (P.TableWrite, P.StateReset)) and id(s) not in own}
    tl = timeline(prog)
    by_pos = {tl.at[id(s)][0]: s for s, _ in schedule if id(s) in tl.at}
    named = named_by_yields(prog)
    rewrite: dict[str, P.Operand] = {}          # dst's buffer -> the table operand its readers take
    made: set[int] = set()
    for r, loops in schedule:
        if not isinstance(r, P.TableRead) or r.var in written_elsewhere or id(r) not in tl.at:
            continue
        lead = _leading(prog, r, loops)
        bname = entry.get(r.dst)
        if lead is None or bname is None or bname in rewrite:
            continue
        buf = prog.buffers[bname]
        table = prog.buffers[prog.frames["global"][r.var]]
        if (buf.storage != "planned" or buf.needs_init or buf.dtype != table.dtype
                or any(entry.get(v) == bname for v in named)):
            continue
        pos, at_loops = tl.at[id(r)]
        acc = tl.accesses.get(bname, [])
        if any(p < pos or ls[:len(at_loops)] != at_loops or (w and p != pos) for p, w, ls in acc):
            continue
        # dst is live from R to its last access, and through the whole of every loop R is not in
        # that reads it (a later iteration reads it again after the rest of the body ran)
        last = max(max([p] + [tl.loops[lid][1] for lid in ls[len(at_loops):]]) for p, _, ls in acc)
        if not all(_only_reads(by_pos.get(p), entry, bname, r.var) for p in range(pos + 1, last + 1)):
            continue
        rewrite[bname] = P.Operand(r.var, lead)
        made.add(id(r))
    if not made:
        return prog
    return replace(prog, blocks={**prog.blocks, prog.entry: _rewritten(prog.blocks[prog.entry], made, rewrite, entry)})


def _only_reads(s, entry: dict[str, str], bname: str, table: str) -> bool:
    """Whether statement `s` leaves both table `table` and buffer `bname` unchanged, and touches
    the buffer only as a kernel's input (None: a statement of a branch target the timeline
    inlined, not looked into)."""
    def mine(var: str) -> bool:
        return entry.get(var) == bname

    if s is None:
        return False
    if isinstance(s, (P.Marker, P.Loop, P.ScalarStep)):
        return True
    if isinstance(s, P.Call):
        return not (mine(s.output.var) or s.output.var == table or (s.copy_to is not None and mine(s.copy_to.var))
                    or any(mine(v) for _, v in s.runtime_attrs))
    if isinstance(s, (P.TableWrite, P.StateReset)):
        return s.var != table and not (isinstance(s, P.TableWrite) and mine(s.src.var))
    if isinstance(s, P.TableRead):
        return not mine(s.dst)
    if isinstance(s, P.Copy):
        return not (mine(s.src.var) or mine(s.dst.var))
    return False            # branches, yields, awaits: whatever they run is not looked into


def _rewritten(stmts, made: set[int], rewrite: dict[str, P.Operand], entry: dict[str, str]):
    out = []
    for s in stmts:
        if id(s) in made:
            s = P.Marker(s.node, s.desc, "view")
        elif isinstance(s, P.Call):
            ins = tuple(rewrite.get(entry.get(o.var, ""), o) if not o.indices else o for o in s.inputs)
            if ins != s.inputs:
                s = replace(s, inputs=ins)
        elif isinstance(s, P.Loop):
            s = replace(s, body=_rewritten(s.body, made, rewrite, entry))
        out.append(s)
    return tuple(out)
