"""Where a command may write an output file, and with which mode (openinfer/files.py).

An output is written to a temporary renamed over its path, which would replace anything there: a
device (as root, /dev/null or /dev/full became regular files), a FIFO, a symbolic link. So a path
that exists and is not a regular file is refused without being opened (a FIFO would block), so is
an empty path and one of the command's own inputs; each is one error line and exit status 1, and
the path is left as it was. Files written get the mode open() would give them (0666 less the umask).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from openinfer.cli import main

GRAPH = ("dynamic {\n    x: f32[2];\n}\nvolatile {\n    y: f32[2];\n}\n"
         "block entry {\n    op add(x, x) >> y;\n    return;\n}\n")


@pytest.fixture
def files(tmp_path):
    import openinfer as oi

    (tmp_path / "g.oig").write_text(GRAPH)
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    np.savez(tmp_path / "in.npz", x=np.ones(2, np.float32))
    (tmp_path / "target.txt").write_text("the link's target\n")
    os.symlink("target.txt", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


@pytest.fixture
def fifo_reader(files):
    """A reader held open on the FIFO, so that a command opening it to write would not block: the
    test then sees what was written instead of hanging."""
    fd = os.open(files / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    yield fd
    os.close(fd)


def _graph_args(d: Path) -> list[str]:
    return [str(d / "g.oig"), "-m", str(d / "empty.oinf")]


#: (command line, the output path it names) for every option that names an output file
OUTPUT_OPTIONS = [
    (["run", "{g}", "--save-outputs", "{out}"], "--save-outputs"),
    (["trace", "{g}", "--save-outputs", "{out}"], "--save-outputs"),
    (["sim", "{g}", "--arch", "x86_64-generic", "--save-outputs", "{out}"], "--save-outputs"),
    (["trace", "{g}", "--json", "{out}"], "--json"),
    (["trace", "{g}", "--chrome", "{out}"], "--chrome"),
    (["gen", "{g}", "--arch", "x86_64-generic", "-o", "{d}/gen", "--depfile", "{out}"], "--depfile"),
    (["graph", "json", "{d}/g.oig", "-o", "{out}"], "--output"),
    (["oinf", "pack", "{out}", "--from", "{d}/in.npz"], "OUT.oinf"),
    (["oinf", "convert", "{d}/empty.oinf", "{out}", "--to-version", "1"], "OUT"),
    (["devices", "probe", "-o", "{out}"], "--out"),
]


def _argv(files: Path, template: list[str], out) -> list[str]:
    argv = []
    for part in template:
        if part == "{g}":
            argv += _graph_args(files)
        else:
            argv.append(part.format(d=files, out=out))
    return argv


def _refused(capsys, argv, phrase: str) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("openinfer: error: ") and len(err.splitlines()) == 1, err
    assert phrase in err, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("template,flag", OUTPUT_OPTIONS, ids=[" ".join(t[:2]) + " " + f for t, f in OUTPUT_OPTIONS])
def test_a_fifo_is_refused_unopened(files, fifo_reader, capsys, template, flag):
    _refused(capsys, _argv(files, template, files / "fifo"), f"{flag} {files / 'fifo'}: is a FIFO, not a regular file")
    assert stat.S_ISFIFO(os.lstat(files / "fifo").st_mode)
    assert os.read(fifo_reader, 4096) == b""        # nothing was written into it


@pytest.mark.parametrize("template,flag", OUTPUT_OPTIONS, ids=[" ".join(t[:2]) + " " + f for t, f in OUTPUT_OPTIONS])
def test_a_symbolic_link_is_refused_and_kept(files, capsys, template, flag):
    _refused(capsys, _argv(files, template, files / "link"), f"{flag} {files / 'link'}: is a symbolic link")
    assert os.readlink(files / "link") == "target.txt"
    assert (files / "target.txt").read_text() == "the link's target\n"


@pytest.mark.parametrize("template,flag", OUTPUT_OPTIONS, ids=[" ".join(t[:2]) + " " + f for t, f in OUTPUT_OPTIONS])
def test_an_empty_path_is_refused(files, capsys, template, flag):
    _refused(capsys, _argv(files, template, ""), f"{flag}: the path is empty")


@pytest.mark.parametrize("command", ["run", "trace", "sim"])
@pytest.mark.parametrize("which", ["in.npz", "empty.oinf", "g.oig"])
def test_an_input_of_the_command_is_never_written_over(files, capsys, command, which):
    before = (files / which).read_bytes()
    extra = ["--arch", "x86_64-generic"] if command == "sim" else []
    _refused(capsys, [command, *_graph_args(files), *extra, "--inputs", str(files / "in.npz"),
                      "--save-outputs", str(files / which)], "that is an input of this command")
    assert (files / which).read_bytes() == before


def test_an_empty_gen_folder_is_refused(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    _refused(capsys, ["gen", *_graph_args(files), "--arch", "x86_64-generic", "-o", ""], "--out: the folder's path")
    assert not (files / "meson.build").exists()


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_have_the_mode_open_would_give(files, capsys, umask):
    """Not mkstemp's 0600: the generated project, a trace, a depfile are the user's files."""
    old = os.umask(umask)
    try:
        assert main(["gen", *_graph_args(files), "--arch", "x86_64-generic", "-o", str(files / "gen"),
                     "--depfile", str(files / "gen.d"), "-q"]) == 0
        assert main(["trace", *_graph_args(files), "--json", str(files / "t.json"),
                     "--save-outputs", str(files / "t.npz")]) == 0
    finally:
        os.umask(old)
    want = 0o666 & ~umask
    modes = _modes(files / "gen")
    assert "meson.build" in modes and "g.c" in modes and "hal/include/oi_hal.h" in modes, sorted(modes)
    assert set(modes.values()) == {want}, modes
    for name in ("gen.d", "t.json", "t.npz"):
        assert (files / name).stat().st_mode & 0o777 == want, name
