"""The shape sweep (tests/sweep/) on the Vulkan target: lavapipe with the validation layer on,
every output against the NumPy reference, and the fused paths only Vulkan renders (norms and
element-wise calls folded into GEMVs, RoPE into its GEMV, transposes into sdpa) taken.

    OI_SLOW=1   every case (default: tests/sweep/catalog.py `vulkan_plan`)
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from compilers import PRIMARY, SLOW  # noqa: E402
from sweep.catalog import vulkan_plan  # noqa: E402
from sweep.fused import PATHS  # noqa: E402
from sweep.runner import References, run  # noqa: E402

from .conftest import VK_ARCH  # noqa: E402

CHUNK = 400


def test_sweep_matches_the_reference_on_vulkan(tmp_path):
    cases = vulkan_plan(SLOW)
    refs, failures, requests = References(tmp_path), [], []
    for i in range(0, len(cases), CHUNK):
        with PRIMARY.active():
            fs, sim = run(cases[i:i + CHUNK], VK_ARCH.stem, PRIMARY, refs, tmp_path, f"vk_sweep{i}")
        assert sim.validation_messages() == 0, "the validation layer reported messages (see stderr)"
        failures += fs
        requests += list(sim.program.kernels)
    assert not failures, f"{len(failures)} sweep failure(s):\n" + "\n".join(map(str, failures[:25]))
    for path, (renders, taken) in PATHS.items():
        if "vulkan" in renders:
            assert any(taken(r) for r in requests), f"no kernel took the fused path {path}"
