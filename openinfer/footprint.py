"""What a bare-metal program costs a microcontroller: flash and RAM, from its build.

`openinfer build` prints it for a microcontroller descriptor (openinfer/targets/isa.py
`bare_metal`). From the static library's sections (`<triple>-size -A`): code (.text*), read-only
data (.rodata*, the embedded weights' .rodata.oi_weights apart), initialized data (.data*: its
values are in flash, its space in RAM) and zeroed data (.bss*). From the generated header: the
context, arena and persistent regions `create_in()` takes, and the model data the program reads
in place (NAME_WEIGHT_BYTES: in flash, or external flash). The stack: a bound from the compiler's
per-function frames and call graph (-fstack-usage, -fcallgraph-info=su: the .su / .ci files beside
each object, which the generated meson.build asks for), the deepest chain of frames from the
entry points a firmware calls (`create_in`, `step`). A call through a pointer (the pool's
`parallel_for` calling a kernel's work function) counts as a call of the deepest function no code
calls directly; the C library's functions (memcpy, an error path's vsnprintf) are not in the
graph and count 0.

Every figure is the library's: a firmware that links it with --gc-sections keeps only the
functions it reaches, so its own image holds at most `code + rodata + data` of it.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cross import CROSS_FILE
from .errors import BuildError

#: the entry points whose stack a firmware pays: creating the program in its memory, and a step
ENTRIES = ("create_in", "step")


@dataclass(frozen=True)
class Footprint:
    code: int
    rodata: int
    data: int
    bss: int
    embedded: int          # the .oinf linked into the library (--embed-weights)
    weights: int           # model data the program reads in place
    context: int
    arena: int
    persistent: int
    stack: int

    @property
    def flash(self) -> int:
        """Code, read-only data, initial values of data, and the model image when embedded."""
        return self.code + self.rodata + self.data + self.embedded

    @property
    def ram(self) -> int:
        return self.data + self.bss + self.context + self.arena + self.persistent + self.stack

    def table(self) -> str:
        rows = [("flash", "code (.text)", self.code), ("", "read-only data (.rodata)", self.rodata),
                ("", "initial values of .data", self.data)]
        if self.embedded:
            rows.append(("", "model image (--embed-weights)", self.embedded))
        rows += [("", "total", self.flash), ("RAM", ".data + .bss", self.data + self.bss),
                 ("", "context (create_in)", self.context), ("", "arena", self.arena),
                 ("", "persistent", self.persistent), ("", "stack, worst case (create_in, step)", self.stack),
                 ("", "total", self.ram)]
        lines = [f"{a:5}  {b:36} {c:>9,} B" for a, b, c in rows]
        if not self.embedded:
            lines.append(f"       model data read in place (flash or external flash): {self.weights:,} B")
        return "\n".join(lines)


def bare_metal_footprint(project: Path, build_dir: Path) -> Footprint | None:
    """The footprint of the program built from `project` in `build_dir`, when its cross file says
    it runs on no OS (openinfer/cross.py); None for any other project."""
    cross = project / CROSS_FILE
    if not cross.exists():
        return None
    parser = configparser.ConfigParser()
    parser.read_string(cross.read_text())
    if ast.literal_eval(parser.get("host_machine", "system", fallback="''")) != "none":
        return None
    triple = ast.literal_eval(parser.get("binaries", "ar")).removesuffix("-ar")
    name = re.search(r"^project\('([^']+)'", (project / "meson.build").read_text(), re.M).group(1)
    return measure(project, build_dir, name, triple)


def measure(project: Path, build_dir: Path, name: str, triple: str) -> Footprint:
    """The footprint of program `name` built in `build_dir` (its library lib<name>.a)."""
    sections = _sections(build_dir / f"lib{name}.a", triple)

    def total(pred) -> int:
        return sum(size for sec, size in sections if pred(sec))

    regions = json.loads((project / f"{name}.json").read_text())       # the ABI manifest: NAME.h's sizes

    return Footprint(
        code=total(lambda s: s.startswith(".text")),
        rodata=total(lambda s: s.startswith(".rodata") and s != ".rodata.oi_weights"),
        data=total(lambda s: s.startswith(".data")), bss=total(lambda s: s.startswith(".bss")),
        embedded=total(lambda s: s == ".rodata.oi_weights"), weights=regions["weight_bytes"],
        context=regions["context_bytes"], arena=regions["arena_bytes"], persistent=regions["persistent_bytes"],
        stack=worst_stack(build_dir, f"oi_{name}"))


def _sections(library: Path, triple: str) -> list[tuple[str, int]]:
    try:
        out = subprocess.run([f"{triple}-size", "-A", str(library)], capture_output=True, text=True, check=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot read the sections of {library}: {exc}") from None
    rows = []
    for line in out.splitlines():
        words = line.split()
        if len(words) == 3 and words[0].startswith(".") and words[1].isdigit():
            rows.append((words[0], int(words[1])))
    return rows


_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "[^"]*?\\n[^"]*?\\n(\d+) bytes')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def worst_stack(build_dir: Path, prefix: str) -> int:
    """The deepest chain of stack frames from the program's entry points (module docstring)."""
    frames: dict[str, int] = {}
    calls: dict[str, set[str]] = {}
    for ci in build_dir.rglob("*.ci"):
        text = ci.read_text()
        frames.update((title, int(size)) for title, size in _NODE.findall(text))
        for src, dst in _EDGE.findall(text):
            calls.setdefault(src, set()).add(dst)
    called = {d for targets in calls.values() for d in targets}
    # what a pointer may call: functions of the library no code calls directly, but the API's
    indirect = [f for f in frames if f not in called and not f.startswith(prefix + "_") and not f.startswith("oi_")]
    memo: dict[str, int] = {}

    def deepest(fn: str, path: frozenset[str]) -> int:
        if fn in memo:
            return memo[fn]
        if fn in path:
            raise BuildError(f"{fn} calls itself (through {len(path)} functions): its stack has no bound")
        below = 0
        for callee in calls.get(fn, ()):
            targets = indirect if callee == "__indirect_call" else [callee]
            for t in targets:
                below = max(below, deepest(t, path | {fn}))
        memo[fn] = frames.get(fn, 0) + below
        return memo[fn]

    return max(deepest(f"{prefix}_{entry}", frozenset()) for entry in ENTRIES)
