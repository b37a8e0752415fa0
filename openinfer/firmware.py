"""Simulating a bare-metal program: inside a firmware, on a board QEMU's system emulator models.

A microcontroller descriptor (an architecture with no OS: openinfer/targets/isa.py) builds its
program as a static library on the bare-metal HAL. To run it here, the simulator links that
library with the runner (templates/c/runner.c.j2, its bare-metal variant: create_in() on static
memory, no heap) and start-up code of its own (templates/c/firmware_startup.c.j2: reset, FPU,
semihosting) into a firmware laid out for the board (templates/c/firmware.ld.j2, from `BOARDS`),
and starts it under the descriptor's `toolchain.emulator` on `toolchain.machine`. The runner's
frames travel over two named pipes in a private folder, which the firmware opens through Arm
semihosting, and it reads the model file from there into the board's bulk memory at start. The
same `EmulatedLink` as for Linux programs under QEMU's user mode (openinfer/emulate.py) is the
simulator's end, so the executor is unchanged: the firmware stays alive across steps.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .emulate import RUNNER_DIR, EmulatedLink, Emulation, link, runner_text
from .errors import SimulationError
from .synth.program import Program
from .targets.env import render


@dataclass(frozen=True)
class Region:
    origin: int
    length: int


@dataclass(frozen=True)
class Board:
    """A board QEMU emulates, as the firmware's linker script needs it."""

    machine: str        # QEMU's -M
    doc: str
    code: Region        # the entry (Arm: the vector table the core reads at reset), code, read-only data
    ram: Region         # data, bss, stack
    bulk: Region        # the runner's regions for the program, then the model image read at start
    qemu: tuple[str, ...] = ()      # the board's own QEMU arguments


_M = 1 << 20

#: The boards of the bundled microcontroller descriptors (QEMU's hw/arm/mps2.c and mps2-tz.c give
#: their memory maps; every region here is RAM to QEMU, whatever the real board has there).
BOARDS: dict[str, Board] = {b.machine: b for b in (
    Board("mps2-an386", "Arm MPS2 with the AN386 image: a Cortex-M4",
          Region(0x00000000, 4 * _M), Region(0x20000000, 4 * _M), Region(0x21000000, 16 * _M)),
    Board("mps2-an500", "Arm MPS2 with the AN500 image: a Cortex-M7",
          Region(0x00000000, 4 * _M), Region(0x20000000, 4 * _M), Region(0x60000000, 16 * _M)),
    # the SSE-200 subsystem, in the secure state the core resets in: its secure aliases (code where
    # the secure vector table is at reset, SSRAM2/3, PSRAM)
    Board("mps2-an505", "Arm MPS2 with the AN505 image: a Cortex-M33 on the SSE-200",
          Region(0x10000000, 4 * _M), Region(0x38000000, 4 * _M), Region(0x80000000, 16 * _M)),
    # RISC-V: QEMU's virt board, its RAM at 0x80000000, started at the firmware's entry with no
    # boot firmware (-bios none)
    Board("virt", "QEMU's RISC-V virt board", Region(0x80000000, 4 * _M), Region(0x80400000, 4 * _M),
          Region(0x80800000, 64 * _M), ("-bios", "none")),
    # the SSE-300 subsystem: code in the ITCM, data in the internal SRAM, the image in the DDR
    Board("mps3-an547", "Arm MPS3 with the AN547 image: a Cortex-M55 on the SSE-300",
          Region(0x00000000, _M // 2), Region(0x21000000, 2 * _M), Region(0x60000000, 64 * _M)),
)}


class FirmwareEmulation(Emulation):
    """How this machine builds and runs one bare-metal descriptor's programs."""

    @property
    def board(self) -> Board:
        machine = self.device.toolchain.machine
        if machine not in BOARDS:
            raise SimulationError(f"{self.device.name}: no firmware layout for QEMU machine {machine!r} "
                                  f"(openinfer/firmware.py knows {', '.join(BOARDS)})")
        return BOARDS[machine]

    def runner_files(self, program: Program) -> dict[str, bytes]:
        """The runner, start-up code and linker script, beside the program's files."""
        name = program.name
        io_bytes = max([v.nbytes for v in program.vars] + [64])
        # code compiled for the hard-float ABI (and Helium, which shares the FPU's registers) needs
        # the FPU turned on at reset
        fpu = any(f in ("-mfloat-abi=hard", "-mfloat-abi=softfp") for f in self.device.cflags)
        ctx = {"board": self.board, "version": __version__,
               "isa": "riscv" if self.device.architecture.startswith("riscv") else "arm"}
        return {f"{RUNNER_DIR}/{name}_runner.c": runner_text(name, baremetal=True, io_bytes=-(-io_bytes // 8) * 8),
                f"{RUNNER_DIR}/firmware_startup.c": render("c/firmware_startup.c.j2", fpu=fpu, **ctx).encode(),
                f"{RUNNER_DIR}/firmware.ld": render("c/firmware.ld.j2", **ctx).encode()}

    def runner_name(self, name: str) -> str:
        return f"{name}_firmware.elf"

    def link_runner(self, project: Path, build_dir: Path, name: str) -> Path:
        """The firmware: runner, start-up code and the program's static library, laid out for the
        board, with the C library the descriptor's spec files pick (memcpy, the float libm)."""
        exe = build_dir / self.runner_name(name)
        runner = project / RUNNER_DIR
        argv = [*shlex.split(self.compiler.command), "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                *self.device.cflags, "-I", str(project), "-I", str(project / "hal" / "include"),
                "-nostartfiles", "-T", str(runner / "firmware.ld"),
                *(f"--specs={spec}" for spec in self.device.toolchain.specs),
                # RISC-V: no small-data accesses relaxed to the global pointer, which start-up leaves unset
                *(["-Wl,--no-relax"] if self.device.architecture.startswith("riscv") else []),
                str(runner / "firmware_startup.c"), str(runner / f"{name}_runner.c"), str(build_dir / f"lib{name}.a"),
                "-lm", "-o", str(exe)]
        link(argv, f"the firmware of {name}")
        return exe

    def open(self, runner: Path, model_path: str | None) -> EmulatedLink:
        """The firmware started under QEMU, its pipes and model in a private folder (QEMU's
        working folder: the firmware names them relative to it)."""
        folder = Path(tempfile.mkdtemp(prefix="oi-firmware-"))
        for pipe in ("requests", "replies"):
            os.mkfifo(folder / pipe)
        model = "-"
        if model_path:
            model = "model.oinf"
            os.symlink(os.path.abspath(model_path), folder / model)
        argv = [self.emulator, "-M", self.board.machine, *self.board.qemu, "-nographic", "-monitor", "none",
                "-serial", "none",
                "-semihosting-config", "enable=on,target=native", "-kernel", str(runner),
                "-append", f"requests replies {model}"]
        return EmulatedLink(argv, cwd=folder, pipes=(folder / "requests", folder / "replies"),
                            cleanup=lambda: shutil.rmtree(folder, ignore_errors=True))

    def cpu_note(self) -> str:
        return f" (the {self.board.machine} board {self.emulator} emulates)"
