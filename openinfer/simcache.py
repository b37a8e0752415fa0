"""The simulator's build cache, as `openinfer cache info` shows it and `openinfer cache clean`
prunes it.

Each `Simulator` generates and builds its program in an entry of `cache_root()` (openinfer/sim.py):
a folder `NAME-KEY`, NAME the program's and KEY the first 16 hex digits of a SHA-256 over what
makes the build (see Simulator.__init__), holding the generated project, its `.openinfer-files`
listing and its `build/` folder. A simulator whose key is there loads the library built before;
each use refreshes the entry's modification time, its "last used". Nothing removes entries by
itself: every graph, size and target tried leaves one (a few MB each).

Only entries are ever removed: folders (not links) named so, holding the listing a build writes;
anything else under the root is left alone. An entry is removed under its lock, so a simulator
building it finishes first, and one waiting for it builds it again.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .outdir import folder_lock
from .writetree import FILE_LIST

#: an entry's name: the program's (a C identifier), a dash, 16 hex digits of its key
_ENTRY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*-[0-9a-f]{16}")


@dataclass(frozen=True)
class Entry:
    path: Path
    nbytes: int             # the files' sizes, summed
    last_used: float        # seconds since the epoch (the folder's mtime)


def _is_entry(path: Path) -> bool:
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        return stat.S_ISREG(os.lstat(path / FILE_LIST).st_mode)
    except FileNotFoundError:
        return False


def _size(folder: Path) -> int:
    total = 0
    for here, _, files in os.walk(folder):      # (links are not followed)
        for name in files:
            try:
                total += os.lstat(os.path.join(here, name)).st_size
            except FileNotFoundError:           # removed meanwhile
                pass
    return total


def entries(root: Path) -> tuple[list[Entry], list[Path]]:
    """The cache's entries (oldest use first), and whatever else is in `root` (never touched)."""
    if not root.is_dir():
        return [], []
    found, other = [], []
    for path in sorted(root.iterdir()):
        if _ENTRY_NAME.fullmatch(path.name) and _is_entry(path):
            found.append(Entry(path, _size(path), os.lstat(path).st_mtime))
        else:
            other.append(path)
    return sorted(found, key=lambda e: (e.last_used, e.path.name)), other


def clean(root: Path, older_than_days: float | None = None) -> list[Entry]:
    """Removes the entries of `root` last used more than `older_than_days` ago (all of them
    without it); returns those removed."""
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    removed = []
    for entry in entries(root)[0]:
        if cutoff is not None and entry.last_used >= cutoff:
            continue
        with folder_lock(entry.path):       # a simulator building this entry finishes first
            if not _is_entry(entry.path):
                continue
            if cutoff is not None and os.lstat(entry.path).st_mtime >= cutoff:     # used meanwhile
                continue
            shutil.rmtree(entry.path)
        removed.append(entry)
    return removed


def megabytes(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"
