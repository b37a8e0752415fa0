"""Drives meson and ninja over a generated project (argv lists, no shell; bounded by timeouts).

meson and ninja come from PyPI (dependencies of this package); the ones next to the running
Python are preferred, so a virtual environment's versions are used.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .cross import CROSS_FILE, cross_file_compiler, override_file_text
from .errors import BuildError
from .outdir import folder_lock

_ERROR_LINE = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$")


def tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"`{name}` not found: install it (pip install {name})")
    return found


@dataclass(frozen=True)
class CCompiler:
    """The C compiler a build will use, resolved as meson resolves it: the `CC` environment
    variable (a command line: `ccache gcc`, `clang -m32`), else the first of `cc`, `gcc`, `clang`
    on PATH. A build directory and a simulator cache entry are keyed on it, so switching `CC`, or
    upgrading the compiler behind it, rebuilds instead of reusing objects another compiler made."""

    command: str        # as given (CC) or found
    path: str           # the executable, symbolic links resolved ("" when none was found)
    version: str        # the first line of `--version`

    def key(self) -> str:
        return f"{self.command}\0{self.path}\0{self.version}"


def c_compiler(default: str | None = None) -> CCompiler:
    """The compiler of a build: CC, else `default` (a cross build's: the descriptor's toolchain
    compiler, openinfer/cross.py), else the first of cc, gcc, clang on PATH."""
    cc = os.environ.get("CC", "").strip() or (default or "")
    words = shlex.split(cc) if cc else []
    if not words:
        found = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
        if found is None:
            return CCompiler("", "", "")
        words = [found]
    exe = shutil.which(words[0]) or words[0]
    path = os.path.realpath(exe) if os.path.exists(exe) else ""
    return CCompiler(" ".join(words), path, _version(tuple(words), path, _mtime(path)))


def _mtime(path: str) -> int:
    return os.stat(path).st_mtime_ns if path else 0


@cache
def _version(words: tuple[str, ...], path: str, mtime: int) -> str:
    """`CC --version`'s first line (asked once per executable and modification time)."""
    del path, mtime      # the cache key: a reinstalled compiler is asked again
    try:
        out = subprocess.run([*words, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.splitlines()[0].strip() if out.strip() else ""


def _run(argv: list[str], cwd: Path, timeout: float, progress: Callable[[str], None] | None) -> str:
    env = dict(os.environ)
    env.setdefault("NINJA_STATUS", "[%f/%t] ")
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    except OSError as exc:
        raise BuildError(f"cannot run {argv[0]}: {exc}") from None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if progress is not None and line.startswith("["):
            progress(line.rstrip())
        if time.monotonic() > deadline:
            proc.kill()
            raise BuildError(f"{Path(argv[0]).name} took longer than {timeout:.0f} s; output so far:\n"
                             + "".join(lines[-40:]))
    proc.wait()
    out = "".join(lines)
    if proc.returncode != 0:
        raise BuildError(_summarize(argv, out))
    return out


def _summarize(argv: list[str], out: str) -> str:
    """A readable failure: compiler errors first (file:line:col: message), then the log's tail."""
    errors = [m for m in (_ERROR_LINE.match(line) for line in out.splitlines()) if m]
    head = f"`{' '.join(Path(a).name if i == 0 else a for i, a in enumerate(argv))}` failed"
    if errors:
        listed = "\n".join(f"  {m['file']}:{m['line']}:{m['col']}: {m['msg']}" for m in errors[:20])
        tail = "\n".join(out.splitlines()[-30:])
        return f"{head}; compiler errors:\n{listed}\n--- last lines of the log ---\n{tail}"
    return f"{head}:\n" + "\n".join(out.splitlines()[-40:])


def project_compiler(project: Path) -> CCompiler:
    """The compiler `build` uses for `project`: CC, else its cross file's (a project generated for
    another architecture), else the native one."""
    cross = Path(project) / CROSS_FILE
    return c_compiler(cross_file_compiler(cross) if cross.exists() else None)


def build(project: Path, build_dir: Path | None = None, *, options: list[str] | None = None,
          progress: Callable[[str], None] | None = None, timeout: float = 1800.0) -> Path:
    """`meson setup` (once per compiler and options) then `ninja`; returns the build directory.
    Raises BuildError. The compiler is `CC`'s, as meson takes it (`c_compiler`); a project with a
    cross file (openinfer/cross.py) is configured with it, and CC then replaces its compiler."""
    project = Path(project).resolve()
    if not (project / "meson.build").exists():
        raise BuildError(f"{project} has no meson.build (generate it with `openinfer gen` first)")
    build_dir = Path(build_dir).resolve() if build_dir else project / "build"
    cross = project / CROSS_FILE
    cross_text = cross.read_text() if cross.exists() else ""
    # meson keeps the compiler it found at setup: another CC, other options or another cross file
    # configure afresh
    wanted = "\n".join([project_compiler(project).key(), *(options or []), cross_text])
    stamp = build_dir / ".openinfer-options"
    # one build of a project at a time (meson refuses a second process in its build directory)
    with folder_lock(project):
        configured = (build_dir / "build.ninja").exists() and stamp.exists() and stamp.read_text() == wanted
        if not configured:
            if os.path.lexists(build_dir):
                _remove_build_dir(build_dir)
            setup = [tool("meson"), "setup", str(build_dir), str(project), *(options or [])]
            if cross_text:
                setup += ["--cross-file", str(cross)]
                cc = os.environ.get("CC", "").strip()
                if cc:   # meson reads CC for the build machine only in a cross build: a second file
                    build_dir.mkdir(parents=True)
                    override = build_dir / "openinfer-cc-cross.ini"
                    override.write_text(override_file_text(cc))
                    setup += ["--cross-file", str(override)]
            _run(setup, project, timeout, progress)
            stamp.write_text(wanted)
        _run([tool("ninja"), "-C", str(build_dir)], project, timeout, progress)
    return build_dir


def _remove_build_dir(build_dir: Path) -> None:
    """Remove a build directory before configuring it afresh: only one meson made (it has
    meson-private/) or an empty one, never a link or a folder of someone else's files."""
    if build_dir.is_symlink() or not build_dir.is_dir():
        raise BuildError(f"{build_dir} is not a directory (a file or a symbolic link): remove it or "
                         "choose another build directory")
    if any(build_dir.iterdir()) and not (build_dir / "meson-private").is_dir():
        raise BuildError(f"{build_dir} is not a meson build directory, and configuring would delete what it "
                         "holds: remove it or choose another build directory")
    shutil.rmtree(build_dir)


def library_path(build_dir: Path, name: str) -> Path:
    for candidate in (f"lib{name}.so", f"lib{name}.dylib", f"{name}.dll"):
        p = Path(build_dir) / candidate
        if p.exists():
            return p
    raise BuildError(f"no shared library lib{name}.so in {build_dir}")
