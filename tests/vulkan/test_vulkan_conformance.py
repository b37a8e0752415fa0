"""The op conformance cases (tests/conformance/cases.py) through the generated GLSL kernels on
lavapipe, with the validation layer on.

As tests/synth/test_c_conformance.py does for the C targets: each case becomes one `Op` node of
a graph built directly in the Graph IR, cases are grouped into a few graphs ("chunks", one build
each, built once per session) and each test checks one op's cases against the oracle with the
cases' own tolerances. Every op of the registry and every dtype / mode lavapipe supports (all of
them: it has 8/16-bit storage, int64 and fp64) is covered.

With OI_VK_ARCH naming a device without `features.denorm_preserve_fp32` (NVIDIA's), an element
also matches when it equals the result with f32 subnormals flushed to zero: Vulkan lets such a
device flush them (lavapipe does not, and on lavapipe no case may need that allowance).

    OI_SLOW=1              every case (7029); default: a deterministic subset with each
                           (op, input dtype) once and each (op, mode) once per dtype
                           kind and packing (1376 cases)
    OI_VK_CONF_CHUNK=N     cases per chunk (default 640: the default subset in two builds)
    OI_VK_CACHE=DIR        keep builds in DIR between sessions
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conformance.cases import ConformanceCase, assert_matches, dtype_and_mode_sample, flushing_expected, generate_cases  # noqa: E402
from conformance.oracle import expected  # noqa: E402
from synth.test_c_conformance import case_graph, chunks, empty_model, output_var  # noqa: E402

from .conftest import ON_LAVAPIPE, VK_ARCH  # noqa: E402

SLOW = os.environ.get("OI_SLOW") == "1"
CHUNK = int(os.environ.get("OI_VK_CONF_CHUNK", "640"))
CASES = generate_cases()
OPS = list(dict.fromkeys(c.op for c in CASES))


SELECTED = CASES if SLOW else dtype_and_mode_sample(CASES)
MAY_FLUSH = not json.loads(VK_ARCH.read_text()).get("features", {}).get("denorm_preserve_fp32", False)


def run_chunk(cases: list[ConformanceCase], name: str) -> tuple[dict, int | None]:
    """Build `cases` as one Vulkan program, run one step: (case id -> output or error, validation messages)."""
    from openinfer.sim import Simulator

    try:
        sim = Simulator(empty_model(), case_graph(cases, name), arch=VK_ARCH, sizevars={})
        ex = sim.make_executor()
        for k, case in enumerate(cases):
            ex.insert(**{f"c{k}_x{j}": x for j, x in enumerate(case.inputs)})
        ex.run_step()
        return {case.id: ex.fetch(output_var(k, case)) for k, case in enumerate(cases)}, sim.validation_messages()
    except Exception as exc:  # noqa: BLE001  (reported per case by the tests)
        return {case.id: exc for case in cases}, None


class _Results:
    def __init__(self):
        self.results: dict[str, np.ndarray | BaseException] | None = None
        self.messages: list[int | None] = []
        self.flushed: list[str] = []          # cases that matched only with f32 subnormals flushed
        self.seconds = 0.0

    def get(self) -> dict:
        if self.results is None:
            start = time.monotonic()
            merged: dict = {}
            for i, group in enumerate(chunks(SELECTED, CHUNK)):
                res, msgs = run_chunk(group, f"vkconf_{i}")
                merged.update(res)
                self.messages.append(msgs)
            self.results = merged
            self.seconds = time.monotonic() - start
        return self.results


@pytest.fixture(scope="session")
def vk_results() -> _Results:
    return _Results()


@pytest.mark.parametrize("op", OPS)
def test_glsl_kernels_match_oracle(op: str, vk_results: _Results) -> None:
    results = vk_results.get()
    cases = [c for c in SELECTED if c.op == op]
    failures = []
    for case in cases:
        got = results[case.id]
        if isinstance(got, BaseException):
            failures.append(f"{case.id}: {type(got).__name__}: {got}")
            continue
        try:
            assert_matches(case, got, expected(case))
        except AssertionError as exc:
            try:
                if not MAY_FLUSH:
                    raise
                assert_matches(case, got, expected(case), flushing_expected(case, expected))
                vk_results.flushed.append(case.id)
            except AssertionError:
                failures.append(str(exc))
    assert not failures, (f"{len(failures)} of {len(cases)} {op} cases fail on {VK_ARCH.stem}:\n"
                          + "\n".join(failures[:25]))
    assert not (ON_LAVAPIPE and vk_results.flushed), f"lavapipe flushed subnormals: {vk_results.flushed}"


def test_conformance_runs_without_validation_messages(vk_results: _Results) -> None:
    vk_results.get()
    print(f"\n{len(SELECTED)} cases on {VK_ARCH.stem} in {vk_results.seconds:.0f} s; "
          f"{len(vk_results.flushed)} matched only with f32 subnormals flushed: {vk_results.flushed}")
    assert vk_results.messages and all(m == 0 for m in vk_results.messages), vk_results.messages


def test_every_registry_op_is_covered() -> None:
    from openinfer.ops import all_ops

    assert {op.name for op in all_ops()} == set(OPS) == {c.op for c in SELECTED}
