"""Shared fixtures: where the original tools' `.oinf` files are, and scratch directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Real files written by the original tools, copied from shared/compat/oinf (MANIFEST.json says
#: what each holds); tests/oinf/test_compat.py checks the copy still equals shared/ where it exists.
COMPAT_DIR = REPO / "tests" / "data" / "compat"
SHARED_COMPAT_DIR = REPO.parent / "shared" / "compat" / "oinf"


@pytest.fixture(scope="session")
def compat_dir() -> Path:
    return COMPAT_DIR


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((COMPAT_DIR / "MANIFEST.json").read_text())
