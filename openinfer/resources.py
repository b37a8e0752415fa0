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
