"""The GLSL kernel families' registry and what every emitter produces: each family module
registers its emitters with `@family`; `Body` is an emitter's result and `Shader` the finished
kernel. (The package imports every family module, so the registry is complete once
`openinfer.targets.vulkan.glsl` is imported.)"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ....dims import Dim
from ....synth.program import KernelRequest
from .types import KernelCtx, PushField


@dataclass
class Body:
    """What an emitter produces.

    value mode (`value` set): `functions` defines helpers and `VCT oi_value(uint i)` is built from
    `value` (statements ending in `return ...;`) for output element i; the skeleton stores it,
    packing sub-byte outputs. custom mode (`main` set): the emitter writes main()'s body itself
    for `units` invocations (`u` is the invocation index, already bounds-checked)."""

    functions: str = ""
    value: str | None = None
    vct: str = "float"
    main: str | None = None
    units: int | None = None
    doc: str = ""
    shared: str = ""                      # shared-memory declarations (workgroup kernels)
    local_size: int | None = None         # a workgroup size the kernel needs (default: ctx.caps.wg)
    groups: Grid | None = None            # explicit dispatch (workgroup kernels): see `dispatch`


#: workgroups of a dispatch: (x, y, z), or a count that depends on a dynamic size (a Dim), which
#: the host computes at run time and splits into x <= 65535 and y as `dispatch` does
Grid = tuple[int, int, int] | Dim


@dataclass(frozen=True)
class Shader:
    name: str
    source: str
    bindings: int
    push: tuple[PushField, ...]
    groups: Grid
    fallible: bool
    features: frozenset[str] = field(default_factory=frozenset)
    doc: str = ""
    local_size: int = 1

    @property
    def push_bytes(self) -> int:
        return sum(f.size for f in self.push)


Emitter = Callable[[KernelRequest, KernelCtx], Body]
_EMITTERS: dict[str, Emitter] = {}


def family(*ops: str):
    def deco(fn: Emitter) -> Emitter:
        for op in ops:
            _EMITTERS[op] = fn
        return fn
    return deco


def emitter(op: str) -> Emitter | None:
    """The emitter registered for `op`."""
    return _EMITTERS.get(op)


def dispatch(units: int, wg: int) -> Grid:
    """Workgroups for `units` invocations: x up to 65535 (the guaranteed minimum), then y. A
    dynamic count stays a Dim (the host splits it the same way when the step runs)."""
    if isinstance(units, Dim):
        return (units + (wg - 1)) // wg
    groups = max(1, -(-units // wg))
    gx = min(groups, 65535)
    return gx, -(-groups // gx), 1


class Extents:
    """The run-time extents of one shader: `str(dim)` inside `rendering(extents)` names each
    distinct dim `OI_DIM<k>`; `defines()` gives their definitions over the push constants."""

    def __init__(self) -> None:
        self.names: dict[object, tuple[str, Dim]] = {}

    def __call__(self, d: Dim) -> str:
        if d.poly not in self.names:
            self.names[d.poly] = (f"OI_DIM{len(self.names)}", d)
        return self.names[d.poly][0]

    def defines(self, sizes: tuple[str, ...]) -> str:
        if not sizes:
            return ""
        lines = ["// run-time extents: the dynamic sizes arrive as push constants (the host's NAME_set_size)"]
        lines += [f"#define sz_{n} pc.oi_sz_{n}" for n in sizes]
        for name, d in self.names.values():
            lines += [f"#define {name} {d.c()}  // {d.pretty()} (at most {int(d)})", f"#define {name}u uint({name})"]
        return "\n".join(lines)
