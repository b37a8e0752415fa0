"""docs/ops.md is generated from the registry and must not drift from it."""

from __future__ import annotations

from openinfer.ops import all_ops
from openinfer.ops.doc import DEFAULT_PATH, render


def test_committed_ops_md_is_current() -> None:
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(), "run `python -m openinfer.ops.doc`"


def test_every_op_is_documented() -> None:
    text = render()
    for op in all_ops():
        assert f"\n### {op.name}\n" in text
