"""The differential shape sweep (tests/sweep/): every op of the registry and every fused path, at
shapes that straddle every vector and tile width and selection threshold of the kernels
(tests/sweep/widths.py), built for every CPU target the host runs with every toolchain of the
compiler matrix (tests/compilers.py: GCC and Clang at -O2 and -O3), run at 1 and 3 pool threads
and compared with the NumPy reference. A failure names the case and prints the one command that
reproduces it alone.

What a run takes: tests/sweep/catalog.py `plan` (counts in docs/synthesis.md, "The shape sweep").
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from compilers import CROSS, SLOW, TOOLCHAINS  # noqa: E402

from openinfer.targets import devices  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402
from sweep.catalog import ARM_TARGETS, CPU_TARGETS, SLOW_CROSS_TARGETS, arm_plan, catalogue, key_of, plan, registry_ops  # noqa: E402
from sweep.fused import PATHS  # noqa: E402
from sweep.runner import References, run  # noqa: E402
from sweep.widths import APPLIES, WIDTHS  # noqa: E402

#: cases per program (a build); the chunks of one run build side by side, one per core
CHUNK = 250


@pytest.fixture(scope="session")
def references(tmp_path_factory):
    return References(tmp_path_factory.mktemp("sweep-ref"))


@pytest.mark.parametrize("toolchain", TOOLCHAINS, ids=lambda t: t.name)
@pytest.mark.parametrize("target", CPU_TARGETS)
def test_sweep_matches_the_reference(target, toolchain, references, tmp_path, monkeypatch):
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    _sweep(target, toolchain, plan(target, toolchain, best_host_target(), SLOW), references, tmp_path, monkeypatch)


@pytest.mark.parametrize("target", ARM_TARGETS + (SLOW_CROSS_TARGETS if SLOW else ()))
def test_arm_sweep_matches_the_reference(target, references, tmp_path, monkeypatch):
    """The Arm targets' share (catalog.py `arm_plan`), cross-built with the compiler each
    descriptor names and run under QEMU (natively on an Arm host)."""
    _sweep(target, CROSS, arm_plan(target, SLOW), references, tmp_path, monkeypatch)


def _sweep(target, toolchain, cases, references, tmp_path, monkeypatch):
    """`cases` built for `target` with `toolchain` in chunks, one per core, each compared with the
    reference; then the fused paths the target renders were taken by some kernel."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    groups = [cases[i:i + CHUNK] for i in range(0, len(cases), CHUNK)]
    with toolchain.active(), ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda g: run(g[1], target, toolchain, references, tmp_path, f"sweep{g[0]}"),
                                enumerate(groups)))
    failures = [f for fs, _ in results for f in fs]
    assert not failures, f"{len(failures)} sweep failure(s):\n" + "\n".join(map(str, failures[:25]))
    isa = devices.load(target).isa
    requests = [r for _, sim in results for r in sim.program.kernels]
    for path, (renders, taken) in PATHS.items():
        if isa in renders:
            assert any(taken(r) for r in requests), f"no kernel of {target} took the fused path {path}"


def test_every_op_and_path_straddles_its_widths():
    """Every registry op and fused path has cases, and each has one at every width -1 / +0 / +1
    that decides its family's kernels."""
    cases = catalogue()
    keys = {key_of(c) for c in cases}
    assert set(registry_ops()) <= keys, sorted(set(registry_ops()) - keys)
    assert set(PATHS) <= keys, sorted(set(PATHS) - keys)
    gaps = []
    for key in sorted(keys):
        mine = [c for c in cases if key_of(c) == key]
        covered = {w for c in mine for w in c.covers}
        family = mine[0].family
        gaps += [f"{key} ({family}): {w} {o:+d}" for w in APPLIES[family] for o in (-1, 0, 1)
                 if (w, o) not in covered and WIDTHS[w].value + o >= 1]
    assert not gaps, "widths no case straddles:\n" + "\n".join(gaps)


def test_the_docs_state_the_sweep_counts():
    """docs/synthesis.md quotes `repro.py --count` as it is now."""
    from sweep.repro import count

    docs = (TESTS.parent / "docs" / "synthesis.md").read_text()
    stated = [line.strip() for line in count().splitlines()]
    missing = [line for line in stated if line not in docs]
    assert not missing, "docs/synthesis.md, \"The shape sweep\", should quote:\n" + "\n".join(stated)
