"""Every generated conformance case: the op's reference kernel against the independent oracle."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from openinfer.ops import all_ops

from .cases import ConformanceCase, assert_matches, flushing_expected, generate_cases
from .oracle import expected

CASES = generate_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reference_matches_oracle(case: ConformanceCase) -> None:
    assert_matches(case, case.run_reference(), expected(case))


def test_case_ids_are_unique() -> None:
    dup = [i for i, n in Counter(c.id for c in CASES).items() if n > 1]
    assert not dup, dup


def test_every_op_dtype_mode_is_covered() -> None:
    covered = {(c.op, c.input_dtypes[0].name, c.mode) for c in CASES}
    missing = []
    for op in all_ops():
        for t in op.dtypes:
            if (op.name, t.name, "normal") not in covered:
                missing.append((op.name, t.name, "normal"))
            # In place is only possible where the result has input 0's dtype (sign -> i8 needs i8).
            inplace_possible = op.output.kind == "same" or (op.output.kind == "fixed" and op.output.dtype == t)
            if op.inplace and inplace_possible and (op.name, t.name, "inplace") not in covered:
                missing.append((op.name, t.name, "inplace"))
        for src in op.acc_pairs:
            if (op.name, src, "accumulate") not in covered:
                missing.append((op.name, src, "accumulate"))
    assert not missing, missing


def test_acc_pairs_are_all_exercised() -> None:
    seen = set()
    for c in CASES:
        if c.mode == "accumulate":
            acc = c.attrs["acc"]
            last = acc[-1] if isinstance(acc, list | tuple) else acc
            seen.add((c.op, c.input_dtypes[0].name, last.name))
    want = {(op.name, src, a.name) for op in all_ops() for src, accs in op.acc_pairs.items() for a in accs}
    assert want <= seen, sorted(want - seen)


def test_completed_attrs_reinfer_to_the_same_result() -> None:
    """Feeding Inference.attrs back to infer is a fixed point (the interpreter relies on it)."""
    for c in CASES:
        inf = c.infer()
        again = c.spec.infer(c.input_types, dict(inf.attrs), c.output, output_name_is_input=c.mode == "inplace")
        assert again == inf, c.id


def test_flush_allowance_accepts_only_the_flushed_result() -> None:
    """The allowance for GPUs that flush f32 subnormals (tests/vulkan) accepts the exact result
    and the flushed one, and nothing else."""
    case = next(c for c in generate_cases() if c.id == "sign/f32/normal/edges")
    exact = expected(case)
    flushed = flushing_expected(case, expected)
    tiny = np.finfo(np.float32).tiny
    sub = (case.inputs[0] != 0) & (np.abs(case.inputs[0]) < tiny)
    assert sub.any() and np.all(exact[sub] != 0) and np.all(flushed[sub] == 0)
    assert_matches(case, exact, exact, flushed)
    assert_matches(case, flushed, exact, flushed)
    with pytest.raises(AssertionError):
        assert_matches(case, flushed, exact)          # strict: the flushed result is wrong
    wrong = flushed.copy()
    wrong[sub] = 5
    with pytest.raises(AssertionError, match="differ"):
        assert_matches(case, wrong, exact, flushed)
