"""The Cortex-M wing: Armv7E-M (Cortex-M4F, M7) and Armv8-M Mainline (Cortex-M33) scalar-FPU and
DSP-extension kernels, and Armv8.1-M (Cortex-M55) Helium kernels, over the portable C wing.

renderer.py      `CortexMTarget` (registered as "mcu"), `CortexMRenderer` and its emitters
fpu_conv.py      the scalar-FPU convolution's tiles and their assembly
thumb.py         Thumb-2 encoding facts (ADD immediates)
helium.py        `HeliumRenderer` and its emitters (templates/mcu/helium_*.c.j2)
helium_elementwise.py   the element-wise table in MVE intrinsics (`MveLang`)
helium_conv.py   the Helium convolution's tiles and predicates
mve.py           the tiles' shapes in MVE's registers
"""

from ..base import register
from .helium import HeliumRenderer
from .renderer import CortexMRenderer, CortexMTarget

register("mcu")(CortexMTarget)

__all__ = ["CortexMRenderer", "CortexMTarget", "HeliumRenderer"]
