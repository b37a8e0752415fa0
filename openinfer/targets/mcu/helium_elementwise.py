"""The element-wise table (openinfer/targets/elementwise.py) in Helium (MVE) intrinsics over
float32x4_t.

`MveLang` is the x86 wing's `VectorLang` (openinfer/targets/x86/elementwise.py) with MVE's
spelling of the primitives that are intrinsics, as the NEON wing's `NeonLang`; the rest are the
prelude's helpers (templates/mcu/helium_prelude.c.j2) under the x86 prelude's names, so the vector
deltas (relu, silu, gelu, fma) and the table's formulas render unchanged. Where MVE differs:

- a comparison gives a lane predicate (mve_pred16_t), which `oiv_select` (VPSEL) takes;
- MVE has no vector divide and no vector square root: `oiv_div` and `oiv_sqrt` compute the four
  lanes with the FPU's VDIV / VSQRT (correctly rounded, as the reference), so chains with a
  division (div, recip, rsqrt, sigmoid, silu, tanh and erf inside gelu) still run as one kernel;
- its maximum and minimum (VMAXNM / VMINNM) return the number when one operand is NaN, so the
  prelude's IEEE 754-2019 maximum / minimum put NaN back in those lanes;
- it rounds to integral values natively (VRINTM / P / Z / A): floor, ceil, trunc and round
  (half away from zero) have vector kernels here, which the x86 and NEON chains leave to the
  portable kernel;
- its floating point flushes subnormal inputs and results to zero (MVE computes with the Standard
  FPSCR value, as AArch32 Advanced SIMD; the scalar FPU does not, by default). Results move by less
  than the smallest normal, within every op's absolute tolerance, except where a subnormal input
  decides a branch: the zero test of div and recip (`oiv_is_zero` reads the bits: a subnormal
  divisor divides, as in the reference) and floor / ceil of a subnormal (-1 and 1:
  `oiv_floor`, `oiv_ceil`).

Not covered (the portable kernel): log and pow (no vector log yet), comparisons and
classifications (their results are bool / int), sign, and every non-f32 request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...synth.program import KernelRequest
from ..arm.elementwise import NeonLang
from ..x86.elementwise import VectorStep, vector_step

_ARITH = {"+": "vaddq_f32", "-": "vsubq_f32", "*": "vmulq_f32", "/": "oiv_div"}
#: the comparisons the vector formulas make, ordered (false on NaN) as C's: a lane predicate
_PREDICATES = {"==": "vcmpeqq_f32", ">=": "vcmpgeq_f32"}
#: rounding to an integral value, exact (VRINT): floor, ceil (the prelude's, for subnormals), trunc, and
#: C's round (half away from zero)
_ROUNDING = {"floor": "oiv_floor", "ceil": "oiv_ceil", "trunc": "vrndq_f32", "round": "vrndaq_f32"}


@dataclass(frozen=True)
class MveLang(NeonLang):
    """The table's primitives in Armv8.1-M MVE, f32 (four lanes): NEON's spellings (arm_mve.h
    shares vdupq_n_f32, vaddq_f32, vfmaq_f32, ...) but for division, square root, the
    comparisons' predicates, rounding and the zero test."""

    ARITH: ClassVar[dict[str, str]] = _ARITH
    PREDICATES: ClassVar[dict[str, str]] = _PREDICATES
    SQRT: ClassVar[str] = "oiv_sqrt"

    def call(self, fn: str, *args: str) -> str:
        if fn in _ROUNDING:
            return f"{_ROUNDING[fn]}({args[0]})"
        return super().call(fn, *args)

    def compare_zero(self, sym: str, x: str) -> str:
        # (VCMP would flush a subnormal x to zero)
        return f"oiv_is_zero({x})" if sym == "==" else super().compare_zero(sym, x)


def mve_step(req: KernelRequest, j: int, args: list[str]) -> VectorStep | None:
    """Element-wise op `req` (f32) as step j of an MVE chain; None if it has no vector form."""
    return vector_step("", req, j, args, lang=MveLang)
