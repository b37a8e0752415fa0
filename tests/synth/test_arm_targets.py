"""The ARM descriptors through gen, build and sim: natively on an ARM machine, else cross-built and
run under QEMU (openinfer/emulate.py), each output compared with the reference.

The generated C builds clean (-Wall -Wextra -Werror) with the cross compilers, every example
matches the reference on each descriptor, and a sample of the C conformance cases passes on the
portable aarch64 and armv7 code (32-bit `size_t` and `long` on armv7). A descriptor this machine
cannot run (no cross compiler, no QEMU) is skipped by tests/conftest.py, the reason naming the
Debian packages.

    OI_SLOW=1   every example on every ARM descriptor (default: one example each), and a larger
                conformance sample (default: every op and mode once)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from conformance.cases import assert_matches  # noqa: E402
from conformance.oracle import expected  # noqa: E402
from test_c_conformance import CASES, chunks, run_chunk  # noqa: E402
from test_examples_targets import EXAMPLES, check_example  # noqa: E402

SLOW = os.environ.get("OI_SLOW") == "1"
ARM = ("aarch64-generic", "aarch64-neon", "aarch64-v82", "armv7-generic")


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("arm-cache")))
        yield


#: the default suite's runs: one example per descriptor, for what each is likeliest to break
#: (32-bit sizes and packed integers on armv7, persistent tables and branches on aarch64)
DEFAULT_RUNS = (("cache_window_slice", "aarch64-generic"), ("kv_cache_decode", "aarch64-neon"),
                ("stability_guard", "aarch64-v82"), ("quantized_linear", "armv7-generic"))


def _runs() -> list[tuple[str, str]]:
    """(example, descriptor): every pair with OI_SLOW=1, else DEFAULT_RUNS."""
    return [(name, arch) for name in EXAMPLES for arch in ARM] if SLOW else list(DEFAULT_RUNS)


@pytest.mark.parametrize(("name", "arch"), _runs())
def test_example_matches_reference(example, name, arch):
    sim = check_example(example, name, arch)
    # the Arm descriptors map the weights (preferences.weights_memory): pages a board can drop
    assert "return oi_oinf_map(path, file);" in (Path(sim.project) / f"{name}.c").read_text()


def conformance_sample(arch: str) -> list:
    """Every op and mode once: the first case of each on aarch64, the last on armv7, so that the
    two take other dtypes (and on the 32-bit microcontrollers); OI_SLOW=1: every case."""
    if SLOW:
        return CASES
    by_key: dict[tuple, object] = {}
    for case in CASES:
        key = (case.op, case.mode)
        if not arch.startswith("aarch64") or key not in by_key:
            by_key[key] = case
    return list(by_key.values())


@pytest.mark.parametrize("arch", ["aarch64-generic", "armv7-generic", "cortex-m4", "cortex-m55"]
                         + (["cortex-m7", "cortex-m33", "riscv32-imac"] if SLOW else []))
def test_conformance_sample(arch):
    cases = conformance_sample(arch)
    results: dict = {}
    for i, group in enumerate(chunks(cases)):
        results.update(run_chunk(group, f"arm_conf_{i}", arch))
    failures = []
    for case in cases:
        got = results[case.id]
        if isinstance(got, BaseException):
            failures.append(f"{case.id} did not run: {type(got).__name__}: {got}")
            continue
        try:
            assert_matches(case, got, expected(case))
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, f"{len(failures)} of {len(cases)} cases fail on {arch}:\n" + "\n".join(failures[:25])
