"""The x86 wing: AVX2 and AVX-512 kernels (templates/x86/) over the portable C wing.

renderer.py   `X86Target` (registered as "x86"), `Avx2Renderer`, `Avx512Renderer` and the emitters
quantized.py  the int8 emitters (qconv2d, qlinear), registered on renderer.py's emitter table
"""

from ..base import register
from . import quantized  # noqa: F401  (registers the int8 emitters)
from .renderer import Avx2Renderer, Avx512Renderer, X86Target

register("x86")(X86Target)

__all__ = ["Avx2Renderer", "Avx512Renderer", "X86Target"]
