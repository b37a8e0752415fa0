"""Fixtures of the Vulkan tests: they run on Mesa's lavapipe (devices/lavapipe.json) with the
Khronos validation layer on (OI_VK_VALIDATION=1) and fail on any validation message.

Skipped when glslc, a lavapipe device or the validation layer is missing (tools/dev.sh installs
all three: glslc, mesa-vulkan-drivers, vulkan-validationlayers). Builds go to a session directory
($OI_VK_CACHE keeps them between sessions).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
LAVAPIPE = REPO / "devices" / "lavapipe.json"
ADA_MOCK = REPO / "devices" / "ada_mock.json"
_LAYER_DIRS = ("/usr/share/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d",
               "/etc/vulkan/explicit_layer.d")


def unavailable() -> str | None:
    """Why the Vulkan tests cannot run here (None: they can)."""
    if shutil.which("glslc") is None:
        return "glslc (shaderc) is not installed"
    from openinfer.synth.devices import probe_vulkan

    if not any("llvmpipe" in g["device"]["name"] for g in probe_vulkan()):
        return "no lavapipe (Mesa llvmpipe) Vulkan device"
    dirs = [d for d in os.environ.get("VK_LAYER_PATH", "").split(":") if d] + list(_LAYER_DIRS)
    if not any((Path(d) / "VkLayer_khronos_validation.json").exists() for d in dirs):
        return "the Khronos validation layer is not installed"
    return None


_REASON = unavailable()


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason=f"Vulkan tests need lavapipe: {_REASON}")
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def vk_cache(tmp_path_factory) -> Path:
    return Path(os.environ["OI_VK_CACHE"]) if os.environ.get("OI_VK_CACHE") else tmp_path_factory.mktemp("vkcache")


@pytest.fixture(scope="session", autouse=True)
def vk_env(vk_cache):
    """Validation on, lavapipe picked, builds cached for the whole session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OI_VK_VALIDATION", "1")
    mp.setenv("OI_VK_DEVICE", "llvmpipe")
    mp.setenv("OI_CACHE_DIR", str(vk_cache))
    yield
    mp.undo()
