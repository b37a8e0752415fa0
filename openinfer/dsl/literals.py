"""`@init(...)` type rules: which literal suits which dtype, and the value it is stored as.

The original checked these while expanding the macro, i.e. at compile time, so they are parse
errors here too. The stored value is already rounded to what the dtype can hold (f32, f16, bf16,
f8) and integers written for bool become bools, exactly as the original's `ScalarValue` holds
them; that keeps Graph -> JSON -> Graph lossless.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DTypeInfo, Kind
from ..numerics import round_float

FLOAT_NAMES = "f8, bf16, f16, f32, f64"


class InitRuleError(Exception):
    """A literal that does not suit the dtype; the parser turns it into a located DslError."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


def init_value(literal: bool | int | float, dtype: DTypeInfo) -> bool | int | float:
    """The value `@init(literal)` stores for a variable of `dtype` (raises InitRuleError)."""
    if isinstance(literal, bool):
        if dtype.kind is not Kind.BOOL:
            raise InitRuleError(f"bool init requires bool dtype, not {dtype.name}", _literal_hint(dtype))
        return literal
    if isinstance(literal, float):
        if not dtype.is_float:
            raise InitRuleError(f"float init requires a float dtype ({FLOAT_NAMES}), not {dtype.name}",
                                _literal_hint(dtype))
        with np.errstate(over="ignore"):   # too large for the dtype: infinity, as Rust's `as` gives
            return float(round_float(literal, dtype))
    if dtype.is_float:
        raise InitRuleError(f"integer init requires an integer, bool or bitset dtype, not {dtype.name}",
                            f"write a float literal for {dtype.name}: @init({literal}.0)")
    if dtype.name == "t1" and literal not in (-1, 1):
        raise InitRuleError("t1 init must be -1 or 1")
    if dtype.kind is Kind.BOOL:
        if literal not in (0, 1):
            raise InitRuleError("bool init must be 0 or 1", "or write @init(true) / @init(false)")
        return bool(literal)
    if not dtype.lo <= literal <= dtype.hi:
        raise InitRuleError(f"{dtype.name} init out of range: {literal} is not in {dtype.lo}..={dtype.hi}")
    return literal


def _literal_hint(dtype: DTypeInfo) -> str:
    if dtype.is_float:
        return f"write a float literal for {dtype.name}, e.g. @init(0.0)"
    if dtype.kind is Kind.BOOL:
        return "write @init(true) or @init(false)"
    return f"write an integer literal for {dtype.name}, e.g. @init(0)"
