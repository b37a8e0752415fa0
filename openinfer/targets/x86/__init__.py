"""The x86 wing: AVX2 and AVX-512 kernels (templates/x86/) over the portable C wing.

renderer.py   `X86Target` (registered as "x86"), `Avx2Renderer`, `Avx512Renderer` and the emitters
"""

from ..base import register
from .renderer import Avx2Renderer, Avx512Renderer, X86Target

register("x86")(X86Target)

__all__ = ["Avx2Renderer", "Avx512Renderer", "X86Target"]
