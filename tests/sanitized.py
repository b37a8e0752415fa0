"""Sanitized runs: a test's check runs in a child interpreter with gcc's AddressSanitizer runtime
preloaded (a library built with -fsanitize=address,undefined cannot be loaded into a Python that
lacks it), and any ASan or UBSan report fails the test. The child builds with gcc whatever `CC`
the suite runs under: the preloaded runtime must be the one the library was compiled against
(the compiler matrix, tests/synth/test_compiler_matrix.py, covers Clang's code unsanitized)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
#: meson options of a sanitized build (-O0: large host schedules compile several times faster)
SANITIZE = ["-Db_sanitize=address,undefined", "-Db_lundef=false", "-Doptimization=0"]


def libasan() -> str | None:
    try:
        path = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return path if path and os.path.isabs(path) and os.path.exists(path) else None


def run_sanitized(test_file: str, function: str, *args: str, timeout: int = 900) -> str:
    """Calls `function(*args)` of the test module `test_file` in the child; it returns an exit
    status. Returns the child's output; skips without gcc's libasan. (The child inherits
    OI_HOST_ISA: the caller picks targets this machine may run.)"""
    lib = libasan()
    if lib is None:
        pytest.skip("gcc's libasan.so not found")
    here = Path(test_file).resolve()
    # the repository first, then whatever path the caller's packages came from (a --target install)
    path = [str(REPO), str(TESTS), str(here.parent)]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, CC="gcc", LD_PRELOAD=lib, PYTHONPATH=os.pathsep.join(path),
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1", UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    code = f"import sys; from {here.stem} import {function}; sys.exit({function}(*{list(args)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO))
    report = (proc.stdout[-6000:] + "\n" + proc.stderr[-6000:]).strip()
    assert proc.returncode == 0, report
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, report
    return proc.stdout
