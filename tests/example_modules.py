"""The scripts of examples/ as modules, for the tests that build their graphs and models."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """examples/<name>.py, loaded once per session. It is registered in sys.modules before it
    runs: dataclasses look their module up while a class is built."""
    key = f"openinfer_example_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


#: The CPU targets the flagship models (tests/flagship/) are checked on: each vector wing, and
#: the portable kernels. Each runs where the host may run it (tests/conftest.py skips the rest
#: with the reason); the Arm ones cross-built and run under QEMU on an x86 host (Armv8.2-A, whose
#: kernels differ from Armv8.0's in the dequantizing GEMV alone, with OI_SLOW=1).
FLAGSHIP_TARGETS = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512", "aarch64-neon") + (
    ("aarch64-v82",) if os.environ.get("OI_SLOW") == "1" else ())
