"""The conformance counts the docs state are the case list's: one number, computed here.

Each phrase below is looked for in its file (whitespace may wrap); every number in it must be the
count `generate_cases()` gives now. `OI_UPDATE_GOLDEN=1` rewrites the numbers in place.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .cases import dtype_and_mode_sample, generate_cases

REPO = Path(__file__).resolve().parents[2]

#: file -> phrases holding counts: {cases} every case, {subset} the default Vulkan selection
#: (`dtype_and_mode_sample`), {ops} the ops covered
PHRASES = {
    "docs/vulkan.md": ["the registry's conformance cases (all {ops} ops, every dtype and mode)",
                       "per kind of dtype and packing ({subset} cases, two builds)",
                       "`OI_SLOW=1` runs all {cases} cases"],
    "tests/vulkan/test_vulkan_conformance.py": ["OI_SLOW=1 every case ({cases}); default: a deterministic subset "
                                                "with each (op, input dtype) once and each (op, mode) once per "
                                                "dtype kind and packing ({subset} cases)"],
}


def counts() -> dict[str, int]:
    cases = generate_cases()
    return {"cases": len(cases), "subset": len(dtype_and_mode_sample(cases)),
            "ops": len({c.op for c in cases})}


def _pattern(phrase: str) -> tuple[re.Pattern, list[str]]:
    """A regex for `phrase` (any run of whitespace matching any other) and its fields in order."""
    fields = re.findall(r"\{(\w+)\}", phrase)
    parts = re.split(r"\{\w+\}", phrase)
    # split() drops the spaces around each field: a whitespace run goes back where the phrase had one
    pieces = []
    for i, p in enumerate(parts):
        words = r"\s+".join(re.escape(w) for w in p.split())
        lead = r"\s+" if p[:1].isspace() and i else ""
        trail = r"\s+" if p[-1:].isspace() and i < len(parts) - 1 else ""
        pieces.append(lead + words + trail)
    body = r"(\d+)".join(pieces)
    return re.compile(body), fields


def test_the_docs_state_the_current_counts() -> None:
    want = counts()
    update = os.environ.get("OI_UPDATE_GOLDEN") == "1"
    stale = []
    for rel, phrases in PHRASES.items():
        path = REPO / rel
        text = path.read_text(encoding="utf-8")
        new = text
        for phrase in phrases:
            pattern, fields = _pattern(phrase)
            found = list(pattern.finditer(new))
            assert found, f"{rel}: the phrase {phrase!r} is gone; update PHRASES with the docs"
            for m in reversed(found):
                for i in reversed(range(len(fields))):
                    if int(m.group(i + 1)) != want[fields[i]]:
                        stale.append(f"{rel}: {fields[i]} {m.group(i + 1)} (the case list has {want[fields[i]]})")
                        new = new[:m.start(i + 1)] + str(want[fields[i]]) + new[m.end(i + 1):]
        if update and new != text:
            path.write_text(new, encoding="utf-8")
    assert update or not stale, "\n".join(stale) + "\nrun with OI_UPDATE_GOLDEN=1 to rewrite them"
