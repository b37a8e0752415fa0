"""Memory planning: lifetimes of arena buffers, then a greedy offset assignment.

Regions (their sizes become the generated header's macros):
  arena       pinned buffers (dynamic inputs, observable volatiles, @init constants) at fixed
              offsets, followed by the planned area that buffers with disjoint lifetimes share;
  persistent  persistent variables and dense tables, and constants pre-packed at create time;
  weights     model tensors used in place from the .oinf image (no offsets to plan).

Lifetimes. The entry frame's schedule is flattened into positions (branch targets inlined at each
call, both arms; loop bodies once). A buffer lives from its first to its last access. Inside a
loop, a buffer keeps its short lifetime only if every access is inside that loop and the first one
writes it completely (each iteration then starts from scratch); otherwise it lives across the
whole loop. Buffers read before written (`needs_init`) live from the start of the step. A
consumer's buffers live from the `yield` that starts it to the `await` that ends it.

Placement (the greedy-by-size heuristic of TFLite Micro's planner): buffers sorted by size,
largest first; each goes at the lowest aligned offset where it overlaps no already placed buffer
whose lifetime intersects its own. Simple, deterministic, and within a few percent of optimal on
inference graphs, whose lifetimes are mostly short chains.

Self-check (TFLite Micro's `DoAnyBuffersOverlap`, ExecuTorch's memory-plan verifier): every plan
`plan()` returns has passed `verify()`, which re-derives what must hold from the program alone:
every buffer that needs memory has a placement in its region, aligned and inside the region's
size; every access of the schedule falls inside its buffer's lifetime; and no two buffers that
are live at the same time share a byte. A bug in the lifetimes or the placement would otherwise
be two tensors silently overwriting each other in generated code.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SynthesisError
from . import program as P

ALIGN = 64


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Placement:
    buffer: str
    region: str          # arena | persistent
    offset: int
    nbytes: int
    start: int           # lifetime, in schedule positions (pinned/persistent: whole program)
    end: int


@dataclass(frozen=True)
class MemoryPlan:
    placements: dict[str, Placement]
    arena_bytes: int
    pinned_bytes: int
    persistent_bytes: int
    positions: int
    #: bytes all planned buffers would take without sharing (for the report)
    unshared_bytes: int

    def offset(self, buffer: str) -> int:
        return self.placements[buffer].offset

    def table(self) -> str:
        """The plan as a text table: one row per buffer, by region and offset."""
        rows = sorted(self.placements.values(), key=lambda p: (p.region, p.offset, p.buffer))
        width = max((len(p.buffer) for p in rows), default=6)
        lines = [f"{'buffer':<{width}}  {'region':<10}  {'offset':>10}  {'bytes':>10}  lifetime",
                 f"{'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 10}  --------"]
        for p in rows:
            life = ("unused (fused away)" if p.start == -2 else
                    "step" if p.region != "arena" or p.start < 0 else f"{p.start}..{p.end}")
            lines.append(f"{p.buffer:<{width}}  {p.region:<10}  {p.offset:>10}  {p.nbytes:>10}  {life}")
        saved = self.unshared_bytes - (self.arena_bytes - self.pinned_bytes)
        lines.append(f"arena {self.arena_bytes} bytes ({self.pinned_bytes} pinned, "
                     f"{self.arena_bytes - self.pinned_bytes} shared by planned buffers; sharing saves {saved}); "
                     f"persistent {self.persistent_bytes} bytes")
        return "\n".join(lines)

    def diagram(self, width: int = 64) -> str:
        """Planned buffers as bars: rows are buffers, columns schedule positions."""
        planned = sorted((p for p in self.placements.values() if p.region == "arena" and p.start >= 0),
                         key=lambda p: (p.offset, p.buffer))
        if not planned:
            return "(no planned buffers)"
        n = max(self.positions, 1)
        scale = max(1, -(-n // width))
        name_w = max(len(p.buffer) for p in planned)
        lines = [f"{'':<{name_w}}  {'offset':>8}  time (1 column = {scale} position(s)) ->"]
        for p in planned:
            cols = "".join("#" if p.start // scale <= c <= p.end // scale else "." for c in range(-(-n // scale)))
            lines.append(f"{p.buffer:<{name_w}}  {p.offset:>8}  {cols}")
        return "\n".join(lines)


class _Timeline:
    """Flattens the entry schedule and records (position, buffer, is_full_write) accesses."""

    def __init__(self, prog: P.Program):
        self.prog = prog
        self.pos = 0
        self.accesses: dict[str, list[tuple[int, bool, tuple[int, ...]]]] = {}
        self.loops: dict[int, tuple[int, int]] = {}
        self.consumer_spans: dict[str, list[int]] = {}
        self._open_consumers: list[tuple[str, int]] = []
        self._loop_id = 0
        #: where each statement of the walked block itself (not of inlined branch targets) is:
        #: id(statement) -> (position, enclosing loop ids)
        self.at: dict[int, tuple[int, tuple[int, ...]]] = {}

    def buf(self, frame: str, var: str) -> str | None:
        name = self.prog.frames.get(frame, {}).get(var)
        if name is None or self.prog.buffers[name].storage != "planned":
            return None
        return name

    def touch(self, frame: str, var: str, write: bool, loops: tuple[int, ...]) -> None:
        b = self.buf(frame, var)
        if b is not None:
            self.accesses.setdefault(b, []).append((self.pos, write, loops))

    def walk(self, stmts, frame: str, loops: tuple[int, ...], depth: int = 0) -> None:
        for s in stmts:
            self.pos += 1
            if depth == 0:
                self.at[id(s)] = (self.pos, loops)
            if isinstance(s, P.Loop):
                lid = self._loop_id = self._loop_id + 1
                start = self.pos
                self.walk(s.body, frame, loops + (lid,), depth)
                self.loops[lid] = (start, self.pos)
                continue
            if isinstance(s, P.Branch):
                for target in (s.then_block, s.else_block):
                    if target is not None and depth < 64:
                        self.walk(self.prog.blocks[target], frame, loops, depth + 1)
                continue
            if isinstance(s, P.Call):
                for o in s.inputs:
                    self.touch(frame, o.var, False, loops)
                for _, v in s.runtime_attrs:
                    self.touch(frame, v, False, loops)
                full = s.output.var not in {o.var for o in s.inputs}
                self.touch(frame, s.output.var, full, loops)
                if s.copy_to is not None:
                    self.touch(frame, s.copy_to.var, False, loops)
            elif isinstance(s, P.Copy):
                self.touch(frame, s.src.var, False, loops)
                self.touch(frame, s.dst.var, True, loops)
            elif isinstance(s, P.TableRead):
                for v in _scalars(s.select):        # `K[0..n] >> kc`: n is read here
                    self.touch(frame, v, False, loops)
                self.touch(frame, s.dst, True, loops)
            elif isinstance(s, P.TableWrite):
                for v in _scalars(s.index):         # `cache.write k >> K[posv]`: posv is read here
                    self.touch(frame, v, False, loops)
                self.touch(frame, s.src.var, False, loops)
            elif isinstance(s, P.Yield) and s.consumers:
                for v in s.vars:
                    self.touch(frame, v, False, loops)
                for c in s.consumers:
                    self._open_consumers.append((c, self.pos))
            elif isinstance(s, P.Await) and frame == "entry":
                self.close_consumers(loops)

    def close_consumers(self, loops: tuple[int, ...]) -> None:
        for c, start in self._open_consumers:
            for name in self.prog.frames.get(c, {}).values():
                if self.prog.buffers[name].storage == "planned":
                    acc = self.accesses.setdefault(name, [])
                    acc.append((start, False, loops))
                    acc.append((self.pos, False, loops))
            for v in self.prog.frames.get(c, {}):
                self.touch("entry", v, False, loops)
        self._open_consumers.clear()

    def lifetimes(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name, acc in self.accesses.items():
            start = min(p for p, _, _ in acc)
            end = max(p for p, _, _ in acc)
            all_loops = {lid for _, _, ls in acc for lid in ls}
            for lid in all_loops:
                lo, hi = self.loops[lid]
                inside = [a for a in acc if lid in a[2]]
                if len(inside) == len(acc) and min(inside)[1]:
                    continue   # local to one iteration: first access in the loop is a full write
                start, end = min(start, lo), max(end, hi)
            if self.prog.buffers[name].needs_init:
                start = 0
            out[name] = (start, end)
        return out


def _scalars(exprs) -> set[str]:
    """The scalar variables a table access's indices read (a volatile index must stay live, not
    share its memory with a buffer written before the access)."""
    parts = [x for e in exprs for x in ((e.start, e.end) if isinstance(e, P.Slice) else (e,))]
    return {x.var for x in parts if isinstance(x, P.ScalarOf)}


def timeline(prog: P.Program) -> _Timeline:
    """The entry schedule's buffer accesses (consumers joined at the end of the step)."""
    tl = _Timeline(prog)
    tl.walk(prog.blocks[prog.entry], "entry", ())
    tl.pos += 1
    tl.close_consumers(())     # consumers not awaited explicitly are joined at the end of the step
    return tl


def plan(prog: P.Program) -> MemoryPlan:
    tl = timeline(prog)
    life = tl.lifetimes()
    placements: dict[str, Placement] = {}

    pinned_off = 0
    for b in sorted(prog.buffers.values(), key=lambda b: b.name):
        if b.storage in ("pinned", "const"):
            placements[b.name] = Placement(b.name, "arena", pinned_off, b.nbytes, -1, -1)
            pinned_off += align(b.nbytes)
    persist_off = 0
    for b in sorted(prog.buffers.values(), key=lambda b: b.name):
        if b.storage in ("persistent", "packed"):
            placements[b.name] = Placement(b.name, "persistent", persist_off, b.nbytes, -1, -1)
            persist_off += align(b.nbytes)

    planned = [b for b in prog.buffers.values() if b.storage == "planned"]
    untouched = [b for b in planned if b.name not in life]
    for b in untouched:  # fusion kept these values in registers: a home that overlaps nothing live
        placements[b.name] = Placement(b.name, "arena", pinned_off, b.nbytes, -2, -2)
    planned = [b for b in planned if b.name in life]
    order = sorted(planned, key=lambda b: (-b.nbytes, life[b.name][0], b.name))
    placed: list[Placement] = []
    peak = 0
    for b in order:
        start, end = life[b.name]
        busy = sorted((p.offset - pinned_off, p.offset - pinned_off + align(p.nbytes))
                      for p in placed if p.start <= end and start <= p.end)
        offset = 0
        for lo, hi in busy:
            if offset + align(b.nbytes) <= lo:
                break
            offset = max(offset, hi)
        p = Placement(b.name, "arena", pinned_off + offset, b.nbytes, start, end)
        placed.append(p)
        placements[b.name] = p
        peak = max(peak, offset + align(b.nbytes))
    unshared = sum(align(b.nbytes) for b in planned)
    result = MemoryPlan(placements, pinned_off + peak, pinned_off, persist_off, tl.pos, unshared)
    verify(result, prog, tl)
    return result


#: the region each storage class lives in (weights are read in place from the model image)
_REGIONS = {"pinned": "arena", "const": "arena", "planned": "arena", "persistent": "persistent", "packed": "persistent"}


def verify(mp: MemoryPlan, prog: P.Program, tl: _Timeline | None = None) -> None:
    """Raise SynthesisError (an internal error: a bug in this module) where `mp` could make two
    buffers of `prog` overwrite each other; see the module docstring."""
    def fail(what: str) -> None:
        raise SynthesisError(f"internal: memory plan of {prog.name!r} fails its self-check: {what}")

    sizes = {"arena": mp.arena_bytes, "persistent": mp.persistent_bytes}
    for b in prog.buffers.values():
        region = _REGIONS.get(b.storage)
        if region is None:
            continue
        p = mp.placements.get(b.name)
        if p is None:
            fail(f"buffer {b.name} ({b.storage}) has no placement")
        # a buffer fusion left untouched (start -2) is never accessed: its home need only start
        # inside the region (its pointer is formed, never dereferenced)
        used = p.nbytes if p.start != -2 else 0
        if p.region != region or p.offset % ALIGN or p.nbytes != b.nbytes or p.offset + used > sizes[region]:
            fail(f"buffer {b.name} is placed at {p.region}+{p.offset} ({p.nbytes} bytes), outside its "
                 f"{region} region of {sizes[region]} bytes, unaligned or of the wrong size ({b.nbytes})")
    tl = tl or timeline(prog)
    for name, accesses in tl.accesses.items():
        p = mp.placements[name]
        for pos, _, _ in accesses:
            if not p.start <= pos <= p.end:
                fail(f"buffer {name} is accessed at position {pos}, outside its lifetime {p.start}..{p.end}")

    def always(p: Placement) -> bool:
        return p.start == -1                    # pinned / persistent: live for the whole program

    for region in sizes:
        # by offset: a buffer can only overlap those that start before it ends
        live = sorted((p for p in mp.placements.values() if p.region == region and p.start != -2 and p.nbytes),
                      key=lambda p: (p.offset, p.buffer))
        for i, a in enumerate(live):
            for b in live[i + 1:]:
                if b.offset >= a.offset + a.nbytes:
                    break
                if always(a) or always(b) or (a.start <= b.end and b.start <= a.end):
                    fail(f"buffers {a.buffer} ({region}+{a.offset}, {a.nbytes} bytes, {a.start}..{a.end}) and "
                         f"{b.buffer} ({region}+{b.offset}, {b.nbytes} bytes, {b.start}..{b.end}) overlap while "
                         "both are live")
