"""Every sweep case, in a fixed order, with ids; and the share of them one run of the default
suite takes."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import cache

from openinfer.ops import all_ops

from .case import SweepCase
from .fused import PATHS, all_fused
from .ops_elementwise import elementwise, layout, reductions, rows
from .ops_nn import conv, dequant, lrn, matmul, pools, rope, sdpa
from .ops_quant import quantized


@cache
def catalogue() -> tuple[SweepCase, ...]:
    made = [*elementwise(), *reductions(), *rows(), *layout(), *matmul(), *dequant(), *conv(), *pools(), *sdpa(),
            *rope(), *lrn(), *quantized(), *all_fused()]
    counts: Counter[str] = Counter()
    out = []
    for c in made:
        key = c.ops[0] if c.path == "kernel" else c.path
        out.append(replace(c, id=f"{key}-{counts[key]}"))
        counts[key] += 1
    ids = [c.id for c in out]
    assert len(set(ids)) == len(ids)
    return tuple(out)


def by_id(case_id: str) -> SweepCase:
    for c in catalogue():
        if c.id == case_id:
            return c
    raise KeyError(f"no sweep case {case_id!r} (ids are `<op or fused path>-<n>`, e.g. conv2d-3)")


def key_of(case: SweepCase) -> str:
    """The op, or the fused path, a case is for."""
    return case.ops[0] if case.path == "kernel" else case.path


def registry_ops() -> list[str]:
    return [op.name for op in all_ops()]


def share(cases: tuple[SweepCase, ...], keep, renders: str) -> list[SweepCase]:
    """The cases `keep(case)` takes, plus the first case of every op and fused path (so every op
    and path runs in every share) and every case of the fused paths the target (`renders`: an ISA
    or "vulkan") renders, so that some case of each takes its path there."""
    seen: set[str] = set()
    out = []
    for c in cases:
        k = key_of(c)
        if k not in seen or keep(c) or (c.path in PATHS and renders in PATHS[c.path][0]):
            out.append(c)
        seen.add(k)
    return out


#: the CPU targets the sweep runs on (each where the host runs it)
CPU_TARGETS = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")


def plan(target: str, toolchain, widest: str, slow: bool) -> list[SweepCase]:
    """The cases one (target, toolchain) run takes on a host whose widest CPU target is `widest`:
    every case with GCC -O3 on that target; a quarter of them with GCC -O3 on x86_64-generic; on
    every other pair a sixteenth; each share with the first case of every op and fused path and
    every case of the fused paths the target renders (`slow`, OI_SLOW=1: every case everywhere).
    (The shares bound the default suite's time: docs/synthesis.md has the figure.)"""
    from compilers import PRIMARY, sampled

    every = catalogue()
    if slow or (toolchain == PRIMARY and target == widest):
        return list(every)
    part = 4 if toolchain == PRIMARY and target == "x86_64-generic" else 16
    return share(every, lambda c: sampled(c.id, f"{target}/{toolchain.name}", every=part),
                 target.removeprefix("x86_64-"))


#: the Arm targets the sweep samples, each with its descriptor's cross compiler (tests/compilers.py
#: `CROSS`; natively on an Arm host), run under QEMU on another host (a microcontroller's in a
#: firmware on its board: openinfer/firmware.py)
ARM_TARGETS = ("aarch64-generic", "aarch64-neon", "aarch64-v82", "armv7-generic", "cortex-m4", "cortex-m55")
#: the microcontrollers of OI_SLOW=1 only: Cortex-M cores whose kind the default run takes, and
#: RISC-V
SLOW_CROSS_TARGETS = ("cortex-m7", "cortex-m33", "riscv32-imac")


def arm_plan(target: str, slow: bool) -> list[SweepCase]:
    """The cases an Arm target takes: a deterministic sixty-fourth, the first case of every op and
    fused path, and every case of the fused paths its kernel family renders (`slow`: every case).
    Each program runs under emulation, some 10x slower to build and run than the host's."""
    from compilers import sampled

    from openinfer.targets import devices

    if slow:
        return list(catalogue())
    return share(catalogue(), lambda c: sampled(c.id, target, every=64), devices.load(target).isa)


def vulkan_plan(slow: bool) -> list[SweepCase]:
    """The cases the Vulkan run takes: a deterministic thirty-second, the first case of every op
    and fused path, and every case of the fused paths Vulkan renders (`slow`: every case)."""
    from compilers import sampled

    return list(catalogue()) if slow else share(catalogue(), lambda c: sampled(c.id, "vulkan", every=32), "vulkan")
