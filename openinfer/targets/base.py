"""The declared target interface, and the registry from a device descriptor to its target.

A target is one wing of openinfer/targets/ (`c/` portable C, `x86/` AVX2 and AVX-512, `vulkan/`
GLSL + a Vulkan host): it answers the questions the synthesizer's passes ask about what its
kernels can absorb, and renders a lowered, planned program into files. One `Target` is made per
synthesis from the descriptor (`target_for`); every question has a "no" default here, so a wing
overrides only what its kernels do, and the synthesizer calls every hook on every target.

The wing that renders a descriptor is a fact of the ISA table (openinfer/targets/isa.py
`Family.wing`) for CPUs, and the descriptor's `device.api` for GPUs. A wing's package registers
its Target class with `@register("<wing>")` when it is imported; `target_for` imports it by
that name, so adding a wing adds no import anywhere else.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SynthesisError
from ..resources import HAL_SOURCES, hal_dir
from ..synth import program as P
from ..synth.memplan import MemoryPlan
from .devices import Device

#: The version of a generated program's ABI (the functions and structs NAME.h declares): written
#: into NAME.h as NAME_ABI_VERSION and into NAME.json as abi_version, and checked by the
#: simulator's loader. Change it whenever a generated header's declarations change meaning.
PROGRAM_ABI_VERSION = 2


@dataclass(frozen=True)
class RenderedProgram:
    """What a target renders for one program."""

    #: the program's files (sources, meson.build, shaders), by relative path
    files: dict[str, str]
    #: NAME_CONTEXT_BYTES, the context object create_in() takes: NAME.json records it too, for a
    #: loader that provides the memory itself (the Triton backend, openinfer/triton.py)
    context_bytes: int


class Target(ABC):
    """What one wing does with one device descriptor."""

    def __init__(self, device: Device):
        self.device = device

    @property
    @abstractmethod
    def label(self) -> str:
        """The target's name in manifests and listings: "c/<kernel family>" or the GPU API."""

    # ---------------------------------------------------------------- what the passes may fold
    def fuses_elementwise(self) -> bool:
        """Whether element-wise chains may become one `fused` kernel (openinfer/synth/fusion.py)."""
        return False

    def takes_prologue(self, req: P.KernelRequest) -> bool:
        """Whether this matmul kernel may normalise or transform its input rows itself
        (`fold_elementwise`, `fold_norms`)."""
        return False

    def takes_epilogue(self, req: P.KernelRequest) -> bool:
        """Whether this kernel may apply an element-wise chain to its result as it stores it (`fuse`)."""
        return False

    def takes_rope_epilogue(self, req: P.KernelRequest) -> bool:
        """Whether this matmul kernel may rotate its result (a rope) as it stores it (`fold_rope`)."""
        return False

    def pools_own_result(self, req: P.KernelRequest) -> bool:
        """Whether this convolution may pool its own result (`fold_pools`)."""
        return False

    def reads_transposed(self, req: P.KernelRequest) -> bool:
        """Whether this kernel may read an operand through a transpose (`fold_transposes`)."""
        return False

    def reads_tables_in_place(self) -> bool:
        """Whether kernels may read and write a persistent table's rows where they are
        (openinfer/synth/table_views.py) instead of through copies."""
        return False

    def packed_inputs(self, req: P.KernelRequest) -> dict[int, int]:
        """Inputs of this kernel that a constant may arrive in pre-packed (openinfer/synth/prepack.py):
        input index -> elements of the packed layout."""
        return {}

    # ---------------------------------------------------------------- rendering
    @abstractmethod
    def render(self, prog: P.Program, mem: MemoryPlan, *, embed_weights: bool) -> RenderedProgram:
        """The program's files and the size of its context object."""

    def hal_sources(self) -> list[Path]:
        """The HAL files a program of this target compiles: the CPU HAL's headers and its
        platform's sources (an OS's, or none: `Device.hal_platform`; a wing adds its own)."""
        hal = hal_dir()
        headers = [p for p in sorted((hal / "include").glob("*.h")) if "vulkan" not in p.name]
        return headers + [hal / s for s in HAL_SOURCES[self.device.hal_platform]]

    def source_names(self, name: str) -> tuple[str, ...]:
        """The files of program `name` another build compiles (`gen --emit sources`)."""
        return (f"{name}.h", f"{name}.c", f"{name}_kernels.h", f"{name}_kernels.c")


_WINGS: dict[str, type[Target]] = {}


def register(wing: str):
    """Class decorator: `cls` is the Target of openinfer/targets/<wing>/."""
    def deco(cls: type[Target]) -> type[Target]:
        _WINGS[wing] = cls
        return cls
    return deco


def wing_of(device: Device) -> str:
    """The name of the wing that renders `device`."""
    return device.family.wing if device.is_cpu else device.doc["device"]["api"]


def target_for(device: Device) -> Target:
    """The target for a validated descriptor."""
    wing = wing_of(device)
    if wing not in _WINGS:
        try:
            importlib.import_module(f"{__package__}.{wing}")
        except ModuleNotFoundError as exc:
            raise SynthesisError(f"{device.name}: no target wing openinfer/targets/{wing}/") from exc
    return _WINGS[wing](device)


class EmitterTable:
    """A vector wing's kernels by op: `@table.emitter("matmul")` registers a function
    (renderer, request, kernel name) -> C source, or None when it cannot render that request (the
    renderer then falls back to the portable kernels). One per wing (x86, arm)."""

    def __init__(self) -> None:
        self._by_op: dict[str, Callable] = {}

    def emitter(self, *ops: str):
        def deco(fn: Callable) -> Callable:
            for op in ops:
                self._by_op[op] = fn
            return fn
        return deco

    def get(self, op: str) -> Callable | None:
        return self._by_op.get(op)
