"""Suggestions for error hints: "did you mean ...?" and the vocabulary they are drawn from."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..dtypes import ALIASES, DSL_DTYPES

SECTIONS = ("dynamic", "volatile", "constant", "persistent")
ATTRIBUTES = ("init", "ref", "pattern", "table", "auto_dim", "fixed")
CACHE_OPS = ("read", "write", "increment", "decrement", "reset")
NODE_WORDS = ("assign", "op", "cache", "branch", "barrier", "dep", "loop", "yield", "await", "transfer", "return")
DTYPE_NAMES = tuple(d.name for d in DSL_DTYPES) + tuple(ALIASES)

#: Spellings from the original's old documentation that never parsed, and what replaced them.
OLD_FORMS = {
    "constants": "did you mean `constant`?",
    "reference": "did you mean @ref? (`@reference` was renamed `@ref`)",
    "flat": "`@flat` is not an attribute; a variable without attributes is stored flat",
}


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """'did you mean `x`?' for the closest candidate, or None when nothing is close."""
    if word in OLD_FORMS:
        return OLD_FORMS[word]
    close = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    if not close:
        return None
    if len(close) == 1:
        return f"did you mean `{close[0]}`?"
    return "did you mean " + ", ".join(f"`{c}`" for c in close[:-1]) + f" or `{close[-1]}`?"


def dtype_hint(word: str) -> str:
    return did_you_mean(word, DTYPE_NAMES) or "supported dtypes: " + " ".join(d.name for d in DSL_DTYPES)
