"""Golden-file comparison for the DSL tests: `OI_UPDATE_GOLDEN=1` rewrites, otherwise compare.

(A plain module rather than a conftest.py fixture: other test folders import the top-level
tests/conftest.py as `conftest`, which a second conftest.py on sys.path would shadow.)
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden(relative: str, text: str) -> None:
    """Compare `text` with tests/dsl/golden/<relative> (or write it when updating)."""
    path = GOLDEN / relative
    if os.environ.get("OI_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with OI_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{relative} differs from its golden file"
