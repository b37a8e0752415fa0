"""The portable C wing: C11 kernels and host program on the CPU HAL, for any CPU.

renderer.py   `CTarget` (registered as "c") and `CRenderer`, the host schedule and the ABI header
kernels/      one kernel emitter per op family (templates/c/ops/)
"""

from ..base import register
from .renderer import CRenderer, CTarget

register("c")(CTarget)

__all__ = ["CRenderer", "CTarget"]
