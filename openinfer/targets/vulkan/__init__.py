"""The Vulkan wing: GLSL compute shaders (templates/vulkan/glsl/) and a C host program on the
HAL's Vulkan part (templates/vulkan/).

renderer.py   `VulkanTarget` (registered as "vulkan") and `VulkanRenderer`, the host schedule
glsl/         one shader emitter per op family
"""

from .renderer import VulkanRenderer, VulkanTarget

__all__ = ["VulkanRenderer", "VulkanTarget"]
