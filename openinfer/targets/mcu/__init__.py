"""The Cortex-M wing: Armv7E-M (Cortex-M4F, M7) and Armv8-M Mainline (Cortex-M33) scalar-FPU and
DSP-extension kernels over the portable C wing.

renderer.py      `CortexMTarget` (registered as "mcu"), `CortexMRenderer` and its emitters
"""

from ..base import register
from .renderer import CortexMRenderer, CortexMTarget

register("mcu")(CortexMTarget)

__all__ = ["CortexMRenderer", "CortexMTarget"]
