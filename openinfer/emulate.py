"""Simulating a program built for another architecture: under QEMU user-mode emulation, in a
child process that stays alive across steps.

A CPU descriptor of another architecture than this machine's (aarch64 on x86-64) cannot be loaded
into Python. The simulator cross-builds its program as a static library (the descriptor's
`toolchain`, openinfer/cross.py), links it with a generated runner (templates/c/runner.c.j2: a
main that serves the program's calls over stdin/stdout) into a static executable, and starts it
under the descriptor's emulator. `EmulatedLink` is the simulator's end: the same `ProgramLink` as
the library loaded in-process (openinfer/link.py), so the executor's logic is shared.

The emulated CPU is QEMU's: QEMU_CPU chooses it (`QEMU_CPU=cortex-a53` lacks Armv8.2-A's dot
product); OI_HOST_ISA describes this machine, so it does not reach the emulated program.

A runner that stops answering (a kernel that never ends, a deadlocked pool) would leave the
caller blocked on its pipe for ever: each reply must arrive within OI_EMULATION_TIMEOUT seconds
(default `DEFAULT_TIMEOUT`; QEMU runs a program some 10-50x slower than the host would), else
the runner is killed and the call fails naming the variable to raise.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import struct
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import __version__
from .build import CCompiler, c_compiler
from .cross import missing_tools
from .errors import BuildError, ExecutionError, SimulationError
from .link import NodeHook, ProgramLink
from .synth.program import Program
from .targets.devices import Device
from .targets.env import render

#: Seconds a reply of the emulated runner may take (one step of a model included) unless
#: OI_EMULATION_TIMEOUT says otherwise.
DEFAULT_TIMEOUT = 600.0

#: The runner's source in the simulator's cache entry, beside the program (no meson target
#: builds it: it is linked by `Emulation.link_runner`).
RUNNER_DIR = "sim-runner"


@dataclass(frozen=True)
class Emulation:
    """How this machine builds and runs one foreign CPU descriptor's programs."""

    device: Device
    compiler: CCompiler       # CC, else the descriptor's toolchain compiler
    emulator: str             # the QEMU user-mode binary

    @classmethod
    def of(cls, device: Device) -> Emulation:
        """The emulation of `device` (a bare-metal one's is openinfer/firmware.py's subclass);
        SimulationError, one line naming the Debian packages, when a tool is missing."""
        problem = unavailable(device)
        if problem:
            raise SimulationError(problem)
        return cls(device, c_compiler(device.toolchain.compiler), device.toolchain.emulator)

    def runner_files(self, program: Program) -> dict[str, bytes]:
        """The runner's source, for the cache entry beside the program's files."""
        return {f"{RUNNER_DIR}/{program.name}_runner.c": runner_text(program.name)}

    def runner_name(self, name: str) -> str:
        """The file `link_runner` writes in the build folder."""
        return f"{name}_runner"

    def link_runner(self, project: Path, build_dir: Path, name: str) -> Path:
        """The runner linked with the program's static library (meson built it with
        default_library=static): one static executable, which QEMU runs without the target's
        dynamic loader. Compiled as strictly as the program (-Wall -Wextra -Werror)."""
        exe = build_dir / self.runner_name(name)
        sysroot = self.device.toolchain.sysroot
        argv = [*shlex.split(self.compiler.command), "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                *self.device.cflags, *([f"--sysroot={sysroot}"] if sysroot else []),
                "-I", str(project), "-I", str(project / "hal" / "include"),
                str(project / RUNNER_DIR / f"{name}_runner.c"), str(build_dir / f"lib{name}.a"),
                "-static", "-pthread", "-lm", "-o", str(exe)]
        link(argv, f"the runner of {name}")
        return exe

    def open(self, runner: Path, model_path: str | None) -> EmulatedLink:
        return EmulatedLink([self.emulator, str(runner), model_path or ""])

    def cpu_note(self) -> str:
        """Which CPU the program met: QEMU's, as QEMU_CPU chooses it."""
        cpu = os.environ.get("QEMU_CPU")
        return f" (the CPU {self.emulator} emulates: " + (f"QEMU_CPU={cpu})" if cpu else "its default)")


def link(argv: list[str], what: str) -> None:
    """Runs the compiler that links `what`; BuildError with its last lines when it fails."""
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot link {what}: {exc}") from None
    if run.returncode != 0:
        raise BuildError(f"linking {what} failed (`{shlex.join(argv)}`):\n"
                         + "\n".join((run.stdout + run.stderr).splitlines()[-30:]))


def runner_text(name: str, *, baremetal: bool = False, io_bytes: int = 0) -> bytes:
    """templates/c/runner.c.j2 for program `name` (bare metal: static buffers of `io_bytes`)."""
    return render("c/runner.c.j2", name=name, prefix=f"oi_{name}", macro=f"OI_{name.upper()}",
                  version=__version__, baremetal=baremetal, io_bytes=io_bytes).encode()


def unavailable(device: Device) -> str | None:
    """Why this machine cannot cross-build and emulate `device`'s programs (one line), or None."""
    if device.toolchain is None:
        return (f"cannot run code for {device.name} on this machine: it is for {device.architecture}, and the "
                "descriptor names no `toolchain` to cross-build it and emulate it with")
    return missing_tools(device, c_compiler(device.toolchain.compiler).command, emulator=True)


def _timeout() -> float:
    """OI_EMULATION_TIMEOUT in seconds, else DEFAULT_TIMEOUT; SimulationError for a bad value."""
    text = os.environ.get("OI_EMULATION_TIMEOUT")
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SimulationError(f"OI_EMULATION_TIMEOUT={text!r}: give the seconds a reply may take (a number > 0)")
    return value


def _environment() -> dict[str, str]:
    """The emulated program's environment: this one without OI_HOST_ISA (it caps this machine's
    CPU, not the emulated one)."""
    return {k: v for k, v in os.environ.items() if k != "OI_HOST_ISA"}


class EmulatedLink(ProgramLink):
    """The runner under QEMU: each call a request frame on its stdin and a reply on its stdout
    (the protocol is templates/c/runner.c.j2's)."""

    def __init__(self, argv: list[str], *, cwd: Path | None = None, pipes: tuple[Path, Path] | None = None,
                 cleanup: Callable[[], None] | None = None):
        """`argv` started in `cwd`; the frames on its stdin and stdout, or (`pipes`: a firmware's)
        on two named pipes, requests and replies; `cleanup` runs once it has ended."""
        self._argv = argv
        self._stderr = tempfile.TemporaryFile()
        self._timeout = _timeout()
        std = subprocess.DEVNULL if pipes else subprocess.PIPE
        try:
            # unbuffered: each read waits on the pipe itself, so select() sees what is left
            self._proc = subprocess.Popen(argv, stdin=std, stdout=std, stderr=self._stderr, env=_environment(),
                                          bufsize=0, cwd=cwd)
        except OSError as exc:
            if cleanup:
                cleanup()
            raise SimulationError(f"cannot start {argv[0]}: {exc}") from None
        if pipes:
            # read-write: opening never waits for the other end (which may never come), and the
            # reply pipe never reports its end, so a firmware that dies is seen by poll() instead
            self._out = os.fdopen(os.open(pipes[0], os.O_RDWR), "wb", buffering=0)
            self._in = os.fdopen(os.open(pipes[1], os.O_RDWR), "rb", buffering=0)
        else:
            self._out, self._in = self._proc.stdin, self._proc.stdout
        # the runner ends when its input does: at the latest when this link is collected
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._out, self._in, self._stderr, cleanup)
        self._status_text = ""      # create()'s, and the CPU features it found missing
        self._missing = ""
        self._created = False

    # ------------------------------------------------------------------ framing
    def _send(self, kind: bytes, payload: bytes = b"") -> None:
        frame = memoryview(kind + struct.pack("<I", len(payload)) + payload)
        try:
            while frame:        # (unbuffered: a write may take part of a large frame)
                frame = frame[self._out.write(frame):]
        except (BrokenPipeError, ValueError):
            raise self._died() from None

    def _receive(self) -> tuple[bytes, bytes]:
        deadline = time.monotonic() + self._timeout
        head = self._read(5, deadline)
        (n,) = struct.unpack("<I", head[1:])
        return head[:1], self._read(n, deadline)

    def _read(self, n: int, deadline: float) -> bytes:
        """Exactly n bytes of the runner's output, by `deadline` (else it is killed)."""
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            # in slices: a firmware's reply pipe never ends, so its death shows in poll() only
            ready, _, _ = select.select([self._in], [], [], min(max(left, 0.0), 0.5))
            if not ready:
                # ended: what it wrote before it did is still in the pipe (a last reply)
                if self._proc.poll() is not None and not select.select([self._in], [], [], 0)[0]:
                    raise self._died()
                if self._proc.poll() is not None:
                    continue
                if left > 0:
                    continue
                self._proc.kill()
                raise SimulationError(f"the emulated program ({shlex.join(self._argv)}) did not answer within "
                                      f"{self._timeout:g} s and was stopped (OI_EMULATION_TIMEOUT sets the limit)")
            chunk = self._in.read(n - len(out))
            if not chunk:
                raise self._died()
            out += chunk
        return bytes(out)

    def _call(self, kind: bytes, payload: bytes = b"") -> tuple[int, bytes]:
        """One request and its reply: (status, data)."""
        self._send(kind, payload)
        got, reply = self._receive()
        if got != b"r":
            raise SimulationError(f"{self._argv[1]}: the runner answered a {kind!r} request with {got!r}")
        return struct.unpack("<i", reply[:4])[0], reply[4:]

    def _died(self) -> SimulationError:
        """The error for a runner that stopped answering: how it ended and what it printed."""
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        how = (f"exit status {code}" if code >= 0 else
               f"signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}")
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-10:]
        return SimulationError(f"the emulated program ({shlex.join(self._argv)}) ended: {how}"
                               + ("; it printed:\n" + "\n".join(tail) if tail else ""))

    # ------------------------------------------------------------------ ProgramLink
    def create(self) -> int:
        got, reply = self._receive()
        if got != b"r":
            raise SimulationError(f"{self._argv[1]}: the runner began with {got!r}, not create()'s reply")
        status = struct.unpack("<i", reply[:4])[0]
        self._status_text, _, self._missing = reply[4:].decode(errors="replace").partition("\0")
        self._created = status == 0     # else the runner is leaving: its reply said everything
        return status

    def missing_cpu_features(self, mask: int) -> str:
        del mask        # the runner asked for its program's own mask: the same one
        return self._missing

    def status_text(self, status: int) -> str:
        if not self._created:
            return self._status_text
        return self._call(b"t", struct.pack("<I", status))[1].decode(errors="replace")

    def error(self) -> str:
        return self._call(b"e")[1].decode(errors="replace")

    def set(self, var: int, data: np.ndarray) -> int:
        return self._call(b"s", struct.pack("<I", var) + data.tobytes())[0]

    def get(self, var: int, out: np.ndarray) -> int:
        status, data = self._call(b"g", struct.pack("<IQ", var, out.nbytes))
        if status == 0:
            out.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8)
        return status

    def shape(self, var: int, ndim: int) -> tuple[int, tuple[int, ...]]:
        status, data = self._call(b"h", struct.pack("<II", var, ndim))
        return status, struct.unpack(f"<{ndim}Q", data)

    def set_size(self, size: int, value: int) -> int:
        return self._call(b"z", struct.pack("<IQ", size, value))[0]

    def get_size(self, size: int) -> int:
        return struct.unpack("<Q", self._call(b"q", struct.pack("<I", size))[1])[0]

    def reset(self) -> int:
        return self._call(b"x")[0]

    def bind(self, var: int, array: np.ndarray | None) -> int:
        raise ExecutionError("bind() is not available under emulation: the program runs in another process "
                             f"({self._argv[0]}), which cannot reach this process's arrays; insert() and fetch() "
                             "copy instead")

    def step(self, on_node: NodeHook | None) -> int:
        self._send(b"r", bytes([on_node is not None]))
        failed: BaseException | None = None
        while True:
            kind, payload = self._receive()
            if kind == b"r":
                if failed is not None:      # raised once the runner has finished the step
                    raise failed
                return struct.unpack("<i", payload[:4])[0]
            if kind != b"n":
                raise SimulationError(f"{self._argv[1]}: unexpected {kind!r} frame during a step")
            index, duration = struct.unpack("<iQ", payload[:12])
            if failed is None:
                try:
                    on_node(index, payload[12:].decode(errors="replace"), duration)
                except BaseException as exc:    # noqa: BLE001  (the step must still be finished)
                    failed = exc
            self._send(b"k")


def _stop(proc: subprocess.Popen, out, inp, stderr, cleanup: Callable[[], None] | None) -> None:
    """End the runner: close its input (it destroys its program and exits), kill it if it hangs."""
    try:
        out.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    inp.close()
    stderr.close()
    if cleanup:
        cleanup()
