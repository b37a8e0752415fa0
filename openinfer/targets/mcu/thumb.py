"""Thumb-2 encoding facts the Cortex-M wing's assembly needs."""

from __future__ import annotations


def add_immediate(value: int) -> bool:
    """Whether a Thumb-2 ADD takes `value` as an immediate: ADDW's 12 bits, or a modified
    immediate (a byte repeated as 0x00XY00XY, 0xXY00XY00, 0xXYXYXYXY, or 0x80-0xFF rotated)."""
    low, second = value & 0xFF, value >> 8 & 0xFF
    if value >= 1 << 32:
        return False
    if value <= 4095 or value in (low * 0x00010001, second * 0x01000100, low * 0x01010101):
        return True
    return any(0x80 <= ((value << r | value >> (32 - r)) & 0xFFFFFFFF) <= 0xFF for r in range(8, 32))


def add(reg: str, value: int) -> str | None:
    """`reg` += `value` (bytes, 0 <= value) as one instruction with an immediate (ADDW for 12 bits,
    ADD for a modified immediate), "" when value is 0, None when neither encodes it."""
    if value == 0:
        return ""
    if value <= 4095:
        return f"addw {reg}, {reg}, #{value}"
    return f"add {reg}, {reg}, #{value}" if add_immediate(value) else None
