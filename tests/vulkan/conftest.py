"""Fixtures of the Vulkan tests: they run on Mesa's lavapipe (devices/lavapipe.json) with the
Khronos validation layer on (OI_VK_VALIDATION=1) and fail on any validation message.

Skipped when glslc, a lavapipe device or the validation layer is missing (tools/dev.sh installs
all three: glslc, mesa-vulkan-drivers, vulkan-validationlayers). Builds go to a session directory
($OI_VK_CACHE keeps them between sessions).

    OI_VK_ARCH=devices/nvidia-h200.json   run the device-independent tests (examples,
                                          conformance) on that descriptor's GPU instead; the
                                          lavapipe-specific runtime tests are skipped then
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
LAVAPIPE = REPO / "devices" / "lavapipe.json"
#: the descriptor the examples and conformance cases run on
VK_ARCH = Path(os.environ["OI_VK_ARCH"]).resolve() if os.environ.get("OI_VK_ARCH") else LAVAPIPE
ON_LAVAPIPE = VK_ARCH == LAVAPIPE
ADA_MOCK = REPO / "devices" / "ada_mock.json"
_LAYER_DIRS = ("/usr/share/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d",
               "/etc/vulkan/explicit_layer.d")


def unavailable() -> str | None:
    """Why the Vulkan tests cannot run here (None: they can)."""
    if shutil.which("glslc") is None:
        return "glslc (shaderc) is not installed"
    from openinfer.targets.devices import probe_vulkan

    gpus = probe_vulkan()
    if ON_LAVAPIPE and not any("llvmpipe" in g["device"]["name"] for g in gpus):
        return "no lavapipe (Mesa llvmpipe) Vulkan device"
    if not gpus:
        return "no Vulkan device"
    dirs = [d for d in os.environ.get("VK_LAYER_PATH", "").split(":") if d] + list(_LAYER_DIRS)
    if not any((Path(d) / "VkLayer_khronos_validation.json").exists() for d in dirs):
        return "the Khronos validation layer is not installed"
    return None


_REASON = unavailable()


def use_lavapipe(monkeypatch, cache: Path) -> Path:
    """For a test outside tests/vulkan: skips it where lavapipe cannot run, else picks lavapipe
    with the validation layer on and builds under `cache`; returns the lavapipe descriptor."""
    if _REASON is not None:
        pytest.skip(f"needs lavapipe: {_REASON}")
    monkeypatch.setenv("OI_VK_VALIDATION", "1")
    monkeypatch.setenv("OI_VK_DEVICE", "llvmpipe")
    monkeypatch.setenv("OI_CACHE_DIR", str(cache))
    return LAVAPIPE


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason=f"Vulkan tests need lavapipe: {_REASON}")
    lavapipe_only = pytest.mark.skip(reason=f"lavapipe-specific; OI_VK_ARCH is {VK_ARCH.name}")
    for item in items:
        path = Path(str(item.fspath))
        if path.parent != here:
            continue
        if _REASON is not None:
            item.add_marker(skip)
        elif not ON_LAVAPIPE and path.name == "test_vulkan_runtime.py":
            item.add_marker(lavapipe_only)


@pytest.fixture(scope="session")
def vk_cache(tmp_path_factory) -> Path:
    return Path(os.environ["OI_VK_CACHE"]) if os.environ.get("OI_VK_CACHE") else tmp_path_factory.mktemp("vkcache")


@pytest.fixture(scope="session", autouse=True)
def vk_env(vk_cache):
    """Validation on, lavapipe picked (or OI_VK_ARCH's device), builds cached for the whole session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OI_VK_VALIDATION", "1")
    if ON_LAVAPIPE:
        mp.setenv("OI_VK_DEVICE", "llvmpipe")
    mp.setenv("OI_CACHE_DIR", str(vk_cache))
    yield
    mp.undo()
