"""Writing a generated tree into a folder (an `openinfer gen -o` folder, a simulator cache
entry): only the files that changed, never a mix of two generations, and only OpenInfer's files.

A list in the folder (FILE_LIST, or FILE_LIST-NAME per program for `gen --emit sources`) names the
files the last generation wrote, so the next one removes those it no longer produces and never
overwrites a file OpenInfer did not write.

Two phases keep a failure from leaving a mix of old and new files: every changed file is first
written completely to a temporary name beside its destination (any error there removes the
temporaries and leaves the output as it was); only then are they renamed into place. The renames
are listed first in a journal (PENDING_RENAMES, written atomically): a process killed among them
leaves the journal behind, and the next write_tree into the folder finishes those renames before
anything else, so the tree only ever moves from one whole generation to the next.

What is read from the folder (the lists, the journal) is not trusted: openinfer/outdir.py holds
the rules (one writer at a time, nothing outside the folder touched) that every step here follows.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from .errors import OutputFolderError
from .files import mkstemp
from .outdir import SYMLINK, folder_lock, holds, is_inside, locate, read_entry

#: Written into the output directory: the files the last generation produced (so the next one
#: can remove files it no longer produces). A generation of one program's sources only (`gen
#: --emit sources`: several programs may share a build's folder) keeps its own list,
#: FILE_LIST-NAME, and so removes only its own stale files.
FILE_LIST = ".openinfer-files"

#: the journal of renames a write_tree is doing (see write_tree)
PENDING_RENAMES = ".openinfer-pending-renames.json"


def _listing_text(rels) -> bytes:
    return ("\n".join(sorted(rels)) + "\n").encode()


def listing_name(owner: str | None) -> str:
    """The list of the files a generation wrote: FILE_LIST, or FILE_LIST-NAME for `owner` NAME."""
    if owner is None:
        return FILE_LIST
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", owner):
        raise OutputFolderError(f"owner {owner!r} must be a C identifier")
    return f"{FILE_LIST}-{owner}"


def listings(out_dir: Path) -> list[str]:
    """The names of the file lists in `out_dir` (not their temporaries, which contain a dot)."""
    names = os.listdir(out_dir)
    prefix = f"{FILE_LIST}-"
    return sorted(n for n in names if n == FILE_LIST or (n.startswith(prefix) and "." not in n[len(prefix):]))


def read_listing(path: Path) -> set[str]:
    """The files a list of OpenInfer's names; every entry must name a path inside the folder (a
    planted `../x` is refused, never deleted)."""
    data = read_entry(path)
    if data is None:
        return set()
    bad = "it is a symbolic link" if data is SYMLINK else None
    listed: set[str] = set()
    if bad is None:
        try:
            listed = {line for line in data.decode().split("\n") if line}
        except UnicodeDecodeError:
            bad = "it is not UTF-8 text"
    outside = sorted(rel for rel in listed if not is_inside(rel))
    if outside:
        bad = f"it names {outside[0]!r}, which is not a path inside the folder"
    if bad:
        raise OutputFolderError(f"{path} is not a list of files OpenInfer wrote ({bad}): remove it, and "
                                "the files it should list, then generate again")
    return listed


def _read_journal(journal: Path, data, owned: set[str]) -> list[tuple[str, str]]:
    """The [temporary, destination] pairs of a journal, each checked to be one write_tree makes:
    both inside the folder, the temporary beside its destination and named as mkstemp names it,
    the destination one of OpenInfer's files (or absent)."""
    try:
        if data is SYMLINK:
            raise ValueError("it is a symbolic link")
        pairs = json.loads(data)
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ValueError("not a list of [temporary, destination] pairs")
        for tmp, dest in pairs:
            if not (is_inside(tmp) and is_inside(dest)):
                raise ValueError(f"{tmp!r} -> {dest!r} is not a rename inside the folder")
            t, d = PurePosixPath(tmp), PurePosixPath(dest)
            if t.parent != d.parent or not (t.name.startswith(f".{d.name}.") and t.name.endswith(".tmp")):
                raise ValueError(f"{tmp!r} is not a temporary of {dest!r}")
            if dest not in owned and os.path.lexists(journal.parent / dest):
                raise ValueError(f"{dest!r} is not a file OpenInfer wrote")
    except (ValueError, RecursionError) as exc:     # json's errors and UnicodeDecodeError are ValueErrors
        raise OutputFolderError(f"{journal} is not a rename journal OpenInfer wrote ({exc}): remove it, "
                                "then generate again") from None
    return [(tmp, dest) for tmp, dest in pairs]


def finish_pending_renames(out_dir: Path, owned: set[str]) -> None:
    """Complete the renames of a write_tree that was killed among them (its journal is left)."""
    journal = out_dir / PENDING_RENAMES
    data = read_entry(journal)
    if data is None:
        return
    for tmp, dest in _read_journal(journal, data, owned):
        src = locate(out_dir, tmp)
        if src is None or not os.path.lexists(src):
            continue
        if not stat.S_ISREG(os.lstat(src).st_mode):
            raise OutputFolderError(f"{src} is not a regular file: not a temporary OpenInfer wrote")
        if os.path.isdir(out_dir / dest) and not os.path.islink(out_dir / dest):
            raise OutputFolderError(f"{out_dir / dest} is a directory")
        os.replace(src, out_dir / dest)
    journal.unlink()


def _replace_file(out_dir: Path, name: str, data: bytes) -> None:
    """Write `out_dir/name` atomically and durably (temporary, fsync, rename)."""
    fd, tmp = mkstemp(dir=out_dir, prefix=f"{name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out_dir / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_tree(out_dir: Path, files: Mapping[str, bytes], *, owner: str | None = None) -> list[Path]:
    """Write `files` under `out_dir`: only changed ones; drop stale generated files.

    The folder is locked for the call (concurrent writers take turns; the last one's tree is what
    remains) and its content is not trusted (see openinfer.outdir): nothing outside it is
    created, renamed or deleted, and a file OpenInfer did not write there (no FILE_LIST* names it)
    is never overwritten: that is an OutputFolderError naming it. Stale files (listed by the
    previous write of the same `owner`, no longer in `files`, and listed by no other owner) are
    removed.

    Two phases keep a failure from leaving a mix of old and new files: every changed file is
    first written completely to a temporary name beside its destination (any error there removes
    the temporaries and leaves the output as it was); only then are they renamed into place. The
    renames are listed first in a journal (PENDING_RENAMES, written atomically): a process killed
    among them leaves the journal behind, and the next write_tree into the directory finishes
    those renames before anything else, so the tree only ever moves from one whole generation to
    the next. The owner's list names the new files before they appear, so a killed write leaves
    none of them looking foreign.
    """
    out_dir = Path(out_dir)
    listing = listing_name(owner)
    for rel in files:
        if not is_inside(rel):
            raise OutputFolderError(f"refusing to write {rel!r}: not a path inside {out_dir}")
    with folder_lock(out_dir):
        listed = {name: read_listing(out_dir / name) for name in listings(out_dir)}
        mine = listed.get(listing, set())
        others = set().union(*(v for k, v in listed.items() if k != listing))
        owned = mine | others
        finish_pending_renames(out_dir, owned)
        same: dict[str, bool | None] = {}           # None: nothing there yet
        for rel in sorted(files):
            path = locate(out_dir, rel)
            same[rel] = holds(path, files[rel]) if path is not None else None
        foreign = [rel for rel in sorted(files) if same[rel] is False and rel not in owned]
        if foreign:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise OutputFolderError(f"{out_dir / foreign[0]}{more} would be overwritten, but OpenInfer did not "
                                    f"write it (no {FILE_LIST}* list there names it): move it away or choose "
                                    "another output folder")
        stale = [p for p in (locate(out_dir, rel) for rel in sorted(mine - set(files) - others))
                 if p is not None and os.path.lexists(p) and not stat.S_ISDIR(os.lstat(p).st_mode)]
        staged: list[tuple[Path, Path]] = []
        try:
            for rel in sorted(files):
                if same[rel]:
                    continue
                path = locate(out_dir, rel, create=True)
                fd, tmp = mkstemp(dir=path.parent, prefix=f".{path.name}.")
                staged.append((Path(tmp), path))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(files[rel])
            if not set(files) <= mine:
                _replace_file(out_dir, listing, _listing_text(mine | set(files)))
            if staged:
                _replace_file(out_dir, PENDING_RENAMES, json.dumps(
                    [[os.path.relpath(t, out_dir), os.path.relpath(d, out_dir)] for t, d in staged]).encode())
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        changed: list[Path] = []
        for tmp, path in staged:
            os.replace(tmp, path)
            changed.append(path)
        if staged:
            (out_dir / PENDING_RENAMES).unlink()
        for path in stale:
            path.unlink()
            changed.append(path)
        if read_entry(out_dir / listing) != _listing_text(files):
            _replace_file(out_dir, listing, _listing_text(files))
        return changed
