"""The compiler matrix: the toolchains generated C is checked under (GCC and Clang, each at -O2
and -O3), and which of them a test run takes.

Generated C is trusted only under the compilers its users have: GCC 12.2 at -O3 -mavx2
miscompiled the conv's padding loops while -O2 and Clang did not (docs/synthesis.md, "Compilers
and optimization levels"). A program is built with a toolchain by setting `CC` (as meson takes
it) and meson's `-Doptimization`; the simulator's build cache is keyed on both.

    OI_SLOW=1   every toolchain on every case (default: a bounded sample; see `sampled`)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SLOW = os.environ.get("OI_SLOW") == "1"


@dataclass(frozen=True)
class Toolchain:
    cc: str | None   # the compiler command (CC); None: the one a cross descriptor names ("cross")
    opt: str         # meson's optimization level

    @property
    def name(self) -> str:
        return f"{self.cc or 'cross'}-O{self.opt}"

    @property
    def build_options(self) -> list[str]:
        return [f"-Doptimization={self.opt}"]

    def missing(self) -> str | None:
        """Why this toolchain cannot run here (None: it can)."""
        if self.cc is not None and shutil.which(self.cc) is None:
            return f"{self.cc} is not installed (bash tools/dev.sh installs it)"
        return None

    @contextmanager
    def active(self) -> Iterator[None]:
        """`CC` set to this compiler for a `with` block (builds started in it use it). The
        environment is the process's: enter it once, around any threads that build (entered in
        several threads at once, the saves and restores interleave and leave a `CC` behind, which
        later cross builds take for their compiler), so a second entry is an error."""
        global _active
        if _active is not None:
            raise RuntimeError(f"toolchain {_active.name} is already active: enter one around the threads")
        saved = os.environ.get("CC")
        if self.cc is None:
            os.environ.pop("CC", None)      # a host CC would be refused for a cross build
        else:
            os.environ["CC"] = self.cc
        _active = self
        try:
            yield
        finally:
            _active = None
            if saved is None:
                os.environ.pop("CC", None)
            else:
                os.environ["CC"] = saved


#: the toolchain whose `active()` block is running, if any
_active: Toolchain | None = None


TOOLCHAINS = (Toolchain("gcc", "2"), Toolchain("gcc", "3"), Toolchain("clang", "2"), Toolchain("clang", "3"))
#: the toolchain of the default suite's full runs: GCC at -O3 (meson's release level), the one
#: that miscompiled
PRIMARY = Toolchain("gcc", "3")


#: what the Arm descriptors are checked with on another host: the cross compiler each names
#: (its toolchain block), at meson's release level
CROSS = Toolchain(None, "3")


def by_name(name: str) -> Toolchain:
    for t in TOOLCHAINS:
        if t.name == name:
            return t
    raise KeyError(f"unknown toolchain {name!r}: one of {', '.join(t.name for t in TOOLCHAINS)}")


def sampled(key: str, salt: str, every: int = 4) -> bool:
    """A deterministic 1-in-`every` choice of `key` for the run `salt` (a target and toolchain),
    so each toolchain of the default suite checks a different share of the cases."""
    return zlib.crc32(f"{salt}/{key}".encode()) % every == 0


def compile_kernels_at(project, level: str) -> None:
    """Compiles the generated kernels of the built project `project` (its meson build at -O3,
    build/compile_commands.json) once more at `level` ("-O0", "-O2"), warnings as errors, writing
    nothing: code that only some optimization levels accept (register-hungry inline asm) fails here."""
    build = project / "build"
    entry = next(e for e in json.loads((build / "compile_commands.json").read_text()) if "_kernels.c" in e["file"])
    args = [a for a in shlex.split(entry["command"]) if a != "-O3"] + [level, "-o", os.devnull]
    out = args.index("-o")
    del args[out:out + 2]       # meson's object path (the last "-o" writes nowhere)
    subprocess.run(args, cwd=entry["directory"], check=True)
