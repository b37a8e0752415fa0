"""NAME_bind on Vulkan (tests/synth/test_bind_memory.py's checks): device memory cannot be the
caller's, so a step copies the bound inputs in at its start and the bound outputs out at its end;
what the caller sees is the CPU program's."""

from __future__ import annotations

import sys

from .conftest import REPO, VK_ARCH

TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def test_bind(tmp_path):
    from synth.test_bind_memory import check_bind

    check_bind(VK_ARCH, tmp_path)
