"""The user's files: text OpenInfer reads, and which paths it may write, with which mode.

A text file read (a graph, a device descriptor) must be a regular file, checked before it is
opened (a FIFO would block, /dev/zero never end), and UTF-8; either failure is one error naming
the file.

Every output file is written to a temporary beside it and renamed over it, so a failure never
leaves a half-written file. A rename replaces whatever the path names: a device such as
/dev/null (when run as root), a FIFO, a symbolic link (not the file it points to). So an output
path must name nothing yet or a regular file, checked with lstat: opening a FIFO to find out would
block. And a command never writes over one of its own inputs.

A temporary gets the mode `open()` would give the file (0666 less the umask), not mkstemp's 0600,
since it becomes the user's file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from .errors import OpenInferError, OutputFileError

#: why an output path must be new or a regular file, for the messages
REPLACED_WHOLE = "an output replaces its path whole (a temporary file renamed over it), so it must be a new path " \
                 "or a regular file"

#: what `lstat` says a path is, for the messages
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def current_umask() -> int:
    """The process umask, read without changing it (os.umask would race with other threads)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def read_text(path: str | os.PathLike, error: type[OpenInferError]) -> str:
    """The UTF-8 text of the regular file `path` (a BOM is dropped). A missing, unreadable or
    non-regular file, or bytes that are not UTF-8, raise `error` with a message naming the file."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise error(f"{name}: not a regular file")
        with open(name, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{name}: not UTF-8 text (byte offset {exc.start})") from None


def non_regular(path: str | os.PathLike) -> str | None:
    """What `path` is when it exists and is not a regular file ("a FIFO"; a link is not followed),
    else None."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "something")


def refuse_non_regular(path: str | os.PathLike, flag: str | None = None) -> None:
    """Raise OutputFileError if `path` exists and is not a regular file; `flag` is the option that
    gave it, for the message."""
    kind = non_regular(path)
    if kind is not None:
        where = f"{flag} {os.fspath(path)}" if flag else os.fspath(path)
        raise OutputFileError(f"{where}: is {kind}, not a regular file; {REPLACED_WHOLE}")


def check_output_path(path: str | None, flag: str, *, inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """Checks the value of an output option (`flag`, e.g. `--save-outputs`) before a command does any
    work: not empty, not an existing non-regular file, and not the same file as any of `inputs`
    (the command's input files; None entries are skipped). None (the option not given) passes."""
    if path is None:
        return
    if not path:
        raise OutputFileError(f"{flag}: the path is empty")
    refuse_non_regular(path, flag)
    try:
        out = os.stat(path)
    except FileNotFoundError:
        return
    for source in inputs:
        if source is None:
            continue
        try:
            info = os.stat(source)
        except OSError:
            continue            # reported by the command that reads it
        if (info.st_dev, info.st_ino) == (out.st_dev, out.st_ino):
            raise OutputFileError(f"{flag} {path}: that is an input of this command ({os.fspath(source)}); "
                                  "write the output to another file")


def mkstemp(*, dir: str | os.PathLike, prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """tempfile.mkstemp, with the mode a new file `open()`ed for writing would have."""
    fd, tmp = tempfile.mkstemp(dir=dir, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def replace_file(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Writes `path` whole or not at all: `write` fills a temporary beside it (`.NAME.XXXX.tmp`),
    which is then renamed over it. Refuses a path that is not a regular file (refuse_non_regular);
    creates missing parent folders."""
    target = Path(path)
    refuse_non_regular(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to `path` whole or not at all; '-' (as a command's file option takes it) is
    standard output."""
    if path == "-":
        print(text, end="" if text.endswith("\n") else "\n")
        return
    replace_file(path, lambda fh: fh.write(text.encode()))


def fsync_dir(directory: Path) -> None:
    """Make the rename durable; not every platform or file system lets a directory be fsync'ed."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
