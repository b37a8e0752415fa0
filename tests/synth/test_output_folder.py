"""The output folder is not trusted: whatever it holds (a planted listing or journal, links out of
it, a user's own files), `openinfer gen` touches nothing outside it, overwrites no file it did
not write, and answers a bad folder with one line; concurrent writers into one folder (and
concurrent simulators of one graph) take turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from openinfer import writetree
from openinfer.cli import main
from openinfer.errors import OutputFolderError
from openinfer.writetree import FILE_LIST, PENDING_RENAMES, write_tree

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gen(example_models, capsys):
    """gen(out) runs `openinfer gen` of mlp_regression into `out`: (exit code, stderr lines)."""
    def run(out: Path) -> tuple[int, list[str]]:
        capsys.readouterr()
        code = main(["gen", str(REPO / "examples" / "mlp_regression.oig"), "--model",
                     str(example_models / "mlp_regression.oinf"), "--arch", "x86_64-generic", "-o", str(out), "-q"])
        return code, capsys.readouterr().err.splitlines()
    return run


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder` (links not followed): its bytes, its link target, or "dir"."""
    out: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        out[rel] = ("link", os.readlink(p)) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


def one_line_error(code: int, err: list[str], *needles: str) -> None:
    assert code != 0
    assert len(err) == 1 and err[0].startswith("openinfer: "), err
    for needle in needles:
        assert needle in err[0], err


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the output folder, holding files nothing may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim").write_text("keep me")
    (folder / "victim3.txt").write_text("keep me too")
    return folder


def test_a_clean_generation_then_a_listing_planted_with_paths_out_of_the_folder(tmp_path, outside, gen):
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    listing = (out / FILE_LIST).read_text()
    before = snapshot(outside)
    for planted in ("../outside/victim", str(outside / "victim"), "hal/../../outside/victim"):
        (out / FILE_LIST).write_text(listing + planted + "\n")
        one_line_error(*gen(out), FILE_LIST, repr(planted))
        assert snapshot(outside) == before


def test_links_inside_the_folder_are_not_followed_out_of_it(tmp_path, outside, gen):
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    before = snapshot(outside)
    # a listed (stale) file reached through a link to the outside folder
    (out / "escape").symlink_to(outside, target_is_directory=True)
    (out / FILE_LIST).write_text((out / FILE_LIST).read_text() + "escape/victim\n")
    one_line_error(*gen(out), str(out / "escape"), "symbolic link")
    assert snapshot(outside) == before
    (out / "escape").unlink()
    (out / FILE_LIST).write_text((out / FILE_LIST).read_text().replace("escape/victim\n", ""))
    # a generated directory replaced by a link out: nothing is written through it
    real_hal = out / "hal.real"
    (out / "hal").rename(real_hal)
    (out / "hal").symlink_to(outside, target_is_directory=True)
    one_line_error(*gen(out), str(out / "hal"), "symbolic link")
    assert snapshot(outside) == before
    (out / "hal").unlink()
    real_hal.rename(out / "hal")
    # a generated file OpenInfer wrote, now a link to an outside file: the link is replaced, the
    # file it pointed to stays as it was
    (out / "meson.build").unlink()
    (out / "meson.build").symlink_to(outside / "victim")
    assert gen(out)[0] == 0
    assert not (out / "meson.build").is_symlink() and b"project(" in (out / "meson.build").read_bytes()
    assert snapshot(outside) == before
    # a listing or journal that is itself a link is refused (it is not what OpenInfer wrote)
    for name in (FILE_LIST, PENDING_RENAMES):
        saved = (out / name).read_bytes() if (out / name).exists() else None
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(outside / "victim")
        one_line_error(*gen(out), name, "symbolic link")
        assert snapshot(outside) == before
        (out / name).unlink()
        if saved is not None:
            (out / name).write_bytes(saved)


@pytest.mark.parametrize("dest", ["../outside/victim3.txt", "ABS"])
def test_a_planted_journal_renames_nothing_out_of_the_folder(tmp_path, outside, gen, dest):
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    dest = str(outside / "victim3.txt") if dest == "ABS" else dest
    (out / ".victim3.txt.x.tmp").write_text("planted")
    (out / PENDING_RENAMES).write_text(json.dumps([[".victim3.txt.x.tmp", dest]]))
    before = snapshot(outside)
    one_line_error(*gen(out), PENDING_RENAMES, "not a rename inside the folder")
    assert snapshot(outside) == before


def test_a_planted_journal_overwrites_no_file_openinfer_did_not_write(tmp_path, gen):
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    (out / "notes.txt").write_text("mine")
    (out / ".notes.txt.x.tmp").write_text("planted")
    (out / PENDING_RENAMES).write_text(json.dumps([[".notes.txt.x.tmp", "notes.txt"]]))
    one_line_error(*gen(out), PENDING_RENAMES, "'notes.txt' is not a file OpenInfer wrote")
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("journal", [b"{not json", b"\xff\xfe", b"{}", b"[[1, 2]]", b"[[\"a\"]]",
                                     b"[[\"x.tmp\", \"meson.build\"]]", b"[" * 100_000])
def test_a_malformed_journal_is_one_line_and_recovered_from_by_removing_it(tmp_path, gen, journal):
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    (out / PENDING_RENAMES).write_bytes(journal)
    before = snapshot(out)
    one_line_error(*gen(out), PENDING_RENAMES, "remove it")
    assert snapshot(out) == before
    (out / PENDING_RENAMES).unlink()
    assert gen(out) == (0, [])


def test_a_users_own_file_is_not_overwritten(tmp_path, gen):
    out = tmp_path / "o"
    out.mkdir()
    (out / "meson.build").write_text("project('mine', 'c')\n")
    before = snapshot(out)
    one_line_error(*gen(out), str(out / "meson.build"), "OpenInfer did not write it")
    assert snapshot(out) == before                 # nothing at all was written
    # a file OpenInfer wrote (it is listed) is its to rewrite, edited or not
    (out / "meson.build").unlink()
    assert gen(out)[0] == 0
    generated = (out / "meson.build").read_bytes()
    (out / "meson.build").write_text("# edited\n")
    assert gen(out)[0] == 0
    assert (out / "meson.build").read_bytes() == generated
    # a copy of a generated tree without its listing is adopted: nothing in it would change
    copy = tmp_path / "copy"
    copy.mkdir()
    for rel, data in snapshot(out).items():
        if rel != FILE_LIST:
            (copy / rel).mkdir() if data == "dir" else (copy / rel).write_bytes(data)
    assert gen(copy)[0] == 0
    assert snapshot(copy) == snapshot(out)


def test_gen_onto_a_file_is_one_line(tmp_path, gen):
    target = tmp_path / "file"
    target.write_text("x")
    one_line_error(*gen(target), "not a directory")
    assert target.read_text() == "x"


def _tree(tag: str, n: int) -> dict[str, bytes]:
    """n files, some in a subfolder; names shared between tags, plus a few of the tag's own."""
    files = {f"sub/f{i:03d}.c" if i % 3 else f"f{i:03d}.c": (tag * (2000 + i)).encode() for i in range(n)}
    files.update({f"only_{tag}/{j}.h": tag.encode() * 10 for j in range(5)})
    return files


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.name != FILE_LIST}


class TakeTurns:
    """os.replace for two writer threads named "a" and "b" that makes their renames alternate
    a b b a a b b a ... once both have reached their first one, so that, were they both in their
    renames at once, neither would be the last to write every file. A writer that finds itself
    alone for half a second (the other waiting for the folder) goes on by itself."""

    def __init__(self, real_replace):
        self.real_replace = real_replace
        self.cond = threading.Condition()
        self.arrived: set[str] = set()
        self.finished: set[str] = set()
        self.calls = 0
        self.alone = False

    def __call__(self, src, dst):
        me = threading.current_thread().name
        if me not in ("a", "b"):
            return self.real_replace(src, dst)
        with self.cond:
            if me not in self.arrived:
                self.arrived.add(me)
                self.cond.notify_all()
                if not self.cond.wait_for(lambda: len(self.arrived) == 2, timeout=0.5):
                    self.alone = True
            self.cond.wait_for(lambda: self.alone or "abba"[self.calls % 4] == me or self.finished, timeout=0.5)
            self.real_replace(src, dst)
            self.calls += 1
            self.cond.notify_all()

    def finish(self):
        with self.cond:
            self.finished.add(threading.current_thread().name)
            self.cond.notify_all()


def test_concurrent_write_trees_into_one_folder_leave_one_whole_tree(tmp_path, monkeypatch):
    """Two threads write different trees into one folder at once, their renames forced to
    interleave (TakeTurns) where they can: unlocked, the tree ends as a mix of the two; locked,
    the second writer waits for the first and its tree is what remains."""
    trees = {"a": _tree("a", 60), "b": _tree("b", 60)}
    real_replace = os.replace
    for round_ in range(2):
        out = tmp_path / f"r{round_}"
        write_tree(out, _tree("c", 40))              # an earlier generation both replace
        turns = TakeTurns(real_replace)
        monkeypatch.setattr(writetree.os, "replace", turns)
        errors: list[BaseException] = []

        def writer(tag, out=out, turns=turns, errors=errors):
            try:
                write_tree(out, trees[tag])
            except BaseException as exc:           # reported below, in the test's thread
                errors.append(exc)
            finally:
                turns.finish()

        threads = [threading.Thread(target=writer, args=(t,), name=t) for t in trees]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        monkeypatch.setattr(writetree.os, "replace", real_replace)
        assert not errors, errors
        final = _files(out)
        assert final in (trees["a"], trees["b"]), f"round {round_}: the tree matches neither writer's"
        assert (out / FILE_LIST).read_text() == "".join(f"{rel}\n" for rel in sorted(final))


def test_write_tree_refuses_paths_out_of_the_folder(tmp_path):
    for rel in ("../x", "/abs", "a/../../x", "a//b", "./a", ""):
        with pytest.raises(OutputFolderError):
            write_tree(tmp_path / "o", {rel: b"x"})
    assert not (tmp_path / "x").exists()


_SIM_SCRIPT = """
import sys, numpy as np, openinfer as oi
from openinfer.sim import Simulator
graph = oi.graph('''
    dynamic { x: f32[8]; }
    volatile { y: f32[8]; }
    block entry { op exp(x) >> y; }
''')
ex = Simulator(None, graph, arch='x86_64-generic').make_executor()
ex.insert(x=np.linspace(-2, 2, 8, dtype=np.float32))
ex.run_step()
print(' '.join(repr(float(v)) for v in ex.fetch('y')))
"""


def test_two_simulators_of_one_graph_build_a_cold_cache_entry_together(tmp_path):
    env = dict(os.environ, OI_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", _SIM_SCRIPT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    expected = np.exp(np.linspace(-2, 2, 8, dtype=np.float32))
    for out, err, code in results:
        assert code == 0, err
        np.testing.assert_allclose([float(v) for v in out.split()], expected, rtol=1e-6)
    assert len(list((tmp_path / "cache").iterdir())) == 1       # one entry, built once


def test_programs_sharing_a_folder_for_their_sources_keep_each_others_files(tmp_path, example_models, capsys):
    """`gen --emit sources` of two programs into one folder (two custom_targets in one meson
    directory): each removes only its own stale files, never the other's sources."""
    out = tmp_path / "o"

    def gen_sources(name: str) -> None:
        assert main(["gen", str(REPO / "examples" / "mlp_regression.oig"), "--model",
                     str(example_models / "mlp_regression.oinf"), "--arch", "x86_64-generic", "--name", name,
                     "--emit", "sources", "-o", str(out), "-q"]) == 0, capsys.readouterr().err

    gen_sources("first")
    gen_sources("second")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == sorted(f"{n}{s}" for n in ("first", "second") for s in (".c", ".h", "_kernels.c", "_kernels.h"))
    # a stale file of one owner goes; the other owner's stay
    write_tree(out, {"first.h": (out / "first.h").read_bytes(), "first_extra.c": b"x"}, owner="first")
    write_tree(out, {"first.h": (out / "first.h").read_bytes()}, owner="first")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        ["first.h", "second.c", "second.h", "second_kernels.c", "second_kernels.h"]


def test_build_configures_afresh_only_a_meson_build_directory(tmp_path, outside, gen, capsys):
    """`openinfer build` removes a build directory it must configure again only if meson made it:
    a folder of someone's files, or a link out of the project, is an error that keeps them."""
    out = tmp_path / "o"
    assert gen(out)[0] == 0
    before = snapshot(outside)
    capsys.readouterr()
    assert main(["build", str(out), "--builddir", str(outside)]) == 1
    one_line_error(1, capsys.readouterr().err.splitlines(), str(outside), "not a meson build directory")
    (out / "build").symlink_to(outside, target_is_directory=True)
    assert main(["build", str(out)]) == 1
    one_line_error(1, capsys.readouterr().err.splitlines(), str(out / "build"), "symbolic link")
    assert snapshot(outside) == before
