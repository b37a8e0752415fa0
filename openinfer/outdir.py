"""The rules OpenInfer follows in a folder it writes (an `openinfer gen -o` folder, a simulator
cache entry): one writer at a time, and nothing outside the folder is ever touched.

The folder's content is not trusted: a path read from it (a listing, a journal) must name a file
inside the folder, and a symbolic link or a non-directory met on the way to a file is refused
rather than followed, so no planted entry can make OpenInfer create, delete or rename anything
elsewhere.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from .errors import OutputFolderError

#: the folders (device, inode) this thread holds locked: a nested lock of the same folder (the
#: simulator locks its cache entry, then write_tree and build lock it again) is already held
_held = threading.local()


def make_folder(folder: Path) -> None:
    """Create `folder` (and its parents) unless it exists; an existing non-directory is an error."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputFolderError(f"{folder} exists and is not a directory") from None
    except OSError as exc:
        raise OutputFolderError(f"cannot create {folder}: {exc.strerror}") from None


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (created if missing) for the duration.

    The lock is flock(2) on the directory itself, so it leaves no file behind; it excludes other
    processes and other threads (each open is its own lock holder), and is re-entrant within one
    thread."""
    make_folder(folder)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        held = _held.__dict__.setdefault("folders", set())
        if key in held:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:          # e.g. ENOLCK on a file system without locks
            raise OutputFolderError(f"cannot lock {folder}: {exc.strerror}") from None
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        os.close(fd)


def is_inside(rel) -> bool:
    """Whether `rel` is a plain relative path below a folder: no `..`, `.`, empty component, NUL."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/"):
        return False
    path = PurePosixPath(rel)
    return path.as_posix() == rel and not any(p in (".", "..") for p in path.parts)


def locate(folder: Path, rel: str, *, create: bool = False) -> Path | None:
    """`folder / rel`, after checking that every directory on the way below `folder` is a real
    directory (not a symbolic link); None where one is missing (created instead with `create`)."""
    here = folder
    for part in PurePosixPath(rel).parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(here)
            continue
        if stat.S_ISLNK(mode):
            raise OutputFolderError(f"{here} is a symbolic link: OpenInfer writes only inside {folder}, "
                                    "and does not follow links out of it")
        if not stat.S_ISDIR(mode):
            raise OutputFolderError(f"{here} is not a directory")
    return folder / rel


#: what `read_entry` returns for a symbolic link (never equal to any content)
SYMLINK = object()


def holds(path: Path, data: bytes) -> bool | None:
    """Whether the regular file `path` holds exactly `data` (read only when the sizes agree);
    None if there is nothing there; False for a link (not followed). Anything else there (a
    directory, a FIFO, ...) is an error."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(info.st_mode) and info.st_size != len(data):
        return False
    entry = read_entry(path)
    return entry is not SYMLINK and entry == data


def read_entry(path: Path):
    """The bytes of the regular file `path`, None if there is nothing there, SYMLINK for a link
    (not followed); anything else there (a directory, a FIFO, ...) is an error."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return SYMLINK
    if not stat.S_ISREG(mode):
        raise OutputFolderError(f"{path} is not a regular file")
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as fh:
        return fh.read()
