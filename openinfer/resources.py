"""Where the data directories are: inside the installed package, or at the top of a checkout.

`pip install .` copies the repository's top-level `templates/`, `hal/` and `devices/` into the
package (pyproject.toml maps them); a source checkout or editable install finds them one level up.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """The directory `name` ("templates", "hal" or "devices")."""
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir() and any(candidate.iterdir()):
            return candidate
    raise FileNotFoundError(f"OpenInfer data directory {name!r} not found next to {_PKG}")


def templates_dir() -> Path:
    return data_dir("templates")


def hal_dir() -> Path:
    return data_dir("hal")


def devices_dir() -> Path:
    return data_dir("devices")


#: The CPU HAL's C sources by platform, relative to hal/ (one list per fact: generated meson
#: projects, the make snippet, the repository's meson.build and the tests that compile the HAL by
#: hand all name these). oi_hal_core.c needs no OS; the second file is the OS's half.
HAL_SOURCES: dict[str, tuple[str, ...]] = {
    "posix": ("src/oi_hal_core.c", "src/oi_hal.c"),
    "baremetal": ("src/oi_hal_core.c", "src/oi_hal_baremetal.c"),
}


def hal_sources(platform: str = "posix", root: Path | None = None) -> list[str]:
    """Paths of the CPU HAL's C sources for `platform` ("posix" or "baremetal"), as strings for a
    compiler's command line: this package's, or those of the generated tree at `root`."""
    hal = hal_dir() if root is None else root / "hal"
    return [str(hal / s) for s in HAL_SOURCES[platform]]
