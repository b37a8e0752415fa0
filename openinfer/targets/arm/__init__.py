"""The NEON wing: AArch64 Advanced SIMD kernels (templates/arm/) over the portable C wing.

renderer.py      `NeonTarget` (registered as "arm"), `NeonRenderer`, `V82Renderer` and the emitters
elementwise.py   the element-wise table in NEON intrinsics (`NeonLang`)
conv.py          the convolution's geometry and tiles (templates/arm/conv.c.j2)
"""

from ..base import register
from .renderer import NeonRenderer, NeonTarget, V82Renderer

register("arm")(NeonTarget)

__all__ = ["NeonRenderer", "NeonTarget", "V82Renderer"]
