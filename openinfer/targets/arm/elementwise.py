"""The element-wise table (openinfer/targets/elementwise.py) in NEON intrinsics over float32x4_t.

`NeonLang` is the x86 wing's `VectorLang` (openinfer/targets/x86/elementwise.py) with NEON's
spelling of the primitives that are intrinsics; the rest are the prelude's helpers, which
templates/arm/prelude.c.j2 defines under the x86 prelude's names (oiv_neg, oiv_abs, oiv_ieee_min,
oiv_select, oiv_exp ...), so the vector deltas (relu, silu, gelu, fma) and the table's formulas
render unchanged. NEON's intrinsics carry no common prefix: the `pre` field is unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...synth.program import KernelRequest
from ..elementwise import NotExpressible
from ..x86.elementwise import VectorLang, VectorStep, vector_step

_ARITH = {"+": "vaddq_f32", "-": "vsubq_f32", "*": "vmulq_f32", "/": "vdivq_f32"}
#: the comparisons the vector formulas make, ordered (false on NaN) as C's: all-ones lanes
_PREDICATES = {"==": "vceqq_f32", ">=": "vcgeq_f32"}


@dataclass(frozen=True)
class NeonLang(VectorLang):
    """The table's primitives in AArch64 Advanced SIMD, f32 (four lanes). Armv8.1-M's MVE spells
    most of them the same: its `MveLang` (openinfer/targets/mcu/helium_elementwise.py) subclasses
    this one and replaces the tables below."""

    #: the intrinsic of each arithmetic operator, of each ordered comparison, of the square root
    ARITH: ClassVar[dict[str, str]] = _ARITH
    PREDICATES: ClassVar[dict[str, str]] = _PREDICATES
    SQRT: ClassVar[str] = "vsqrtq_f32"

    def set1(self, text: str) -> str:
        return f"vdupq_n_f32({text})"

    def arith(self, sym: str, a: str, b: str) -> str:
        return f"{self.ARITH[sym]}({a}, {b})"

    def fmadd(self, a: str, b: str, c: str) -> str:
        return f"vfmaq_f32({c}, {a}, {b})"

    def call(self, fn: str, *args: str) -> str:
        if fn == "sqrt":
            return f"{self.SQRT}({args[0]})"
        return super().call(fn, *args)

    def compare(self, sym: str, a: str, b: str) -> str:
        if sym not in self.PREDICATES:
            raise NotExpressible(f"the comparison {sym}")
        return f"{self.PREDICATES[sym]}({a}, {b})"


def neon_step(req: KernelRequest, j: int, args: list[str]) -> VectorStep | None:
    """Element-wise op `req` (f32) as step j of a NEON chain; None if it has no vector form."""
    return vector_step("", req, j, args, lang=NeonLang)
