"""`openinfer run|trace|sim --inputs in.npz --save-outputs out.npz`: the user's inputs by variable
name (per step or shared), checked before anything runs; outputs written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from openinfer.cli import main

GRAPH = """\
dynamic {
    x: f32[2, 3];
    ids: i16[3];
    keep: bool[3];
}
volatile {
    y: f32[2, 3];
    z: i16[3];
    picked: i16[3];
    dropped: bool[3];
}
block entry {
    op add(x, x) >> y;
    op add(ids, ids) >> z;
    op filter(z, ids, ids) >> picked;
    op not(keep) >> dropped;
    return;
}
"""

X = np.array([[0.1, -2.5, 3.0], [1e-3, 7.0, -0.2]])          # float64: rounded to f32 on input
IDS = [np.array([0, -2, 300], np.int64), np.array([4, 5, -6], np.int32)]   # wider ints whose values fit
KEEP = [np.array([True, False, True]), np.array([False, False, True])]


def expected(step: int) -> dict[str, np.ndarray]:
    x = X.astype(np.float32)
    ids = IDS[step].astype(np.int16)
    z = (ids + ids).astype(np.int16)
    return {"y": x + x, "z": z, "picked": np.where(ids != 0, z, ids), "dropped": ~KEEP[step]}


@pytest.fixture
def files(tmp_path):
    import openinfer as oi

    (tmp_path / "g.oig").write_text(GRAPH)
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    np.savez(tmp_path / "in.npz", x=X, **{f"step{s}/ids": IDS[s] for s in range(2)},
             **{f"step{s}/keep": KEEP[s] for s in range(2)})
    return tmp_path


def _argv(files, command, *extra):
    return [command, str(files / "g.oig"), "-m", str(files / "empty.oinf"), *map(str, extra)]


def _assert_saved(path: Path, steps: int) -> None:
    saved = np.load(path)
    keys = [name if steps == 1 else f"step{s}/{name}" for s in range(steps) for name in ("y", "z", "picked", "dropped")]
    assert sorted(saved.files) == sorted(keys)
    for s in range(steps):
        for name, want in expected(s).items():
            got = saved[name if steps == 1 else f"step{s}/{name}"]
            assert got.dtype == want.dtype and np.array_equal(got, want), (s, name, got, want)


def test_run_reads_per_step_and_shared_inputs_and_saves_the_outputs(files, capsys):
    out = files / "sub" / "out.npz"
    assert main(_argv(files, "run", "--inputs", files / "in.npz", "--save-outputs", out)) == 0
    printed = capsys.readouterr().out
    assert "step 1 picked: int16[3] = [8, 10, -12]" in printed           # --steps defaults to the file's 2
    _assert_saved(out, 2)
    assert not [p for p in out.parent.iterdir() if p.name != "out.npz"]   # no temporary left beside it


def test_one_step_saves_plain_names_and_shared_inputs_serve_every_step(files, capsys):
    np.savez(files / "one.npz", x=X, ids=IDS[0], keep=KEEP[0])
    assert main(_argv(files, "run", "--inputs", files / "one.npz", "--save-outputs", files / "o1.npz")) == 0
    _assert_saved(files / "o1.npz", 1)
    assert main(_argv(files, "run", "--inputs", files / "one.npz", "--steps", 3,
                      "--save-outputs", files / "o3.npz")) == 0
    saved = np.load(files / "o3.npz")
    for s in range(3):
        assert np.array_equal(saved[f"step{s}/picked"], expected(0)["picked"])


def test_a_steps_own_value_wins_over_the_shared_one(files, capsys):
    np.savez(files / "mixed.npz", x=X, ids=IDS[0], keep=KEEP[0], **{"step1/ids": IDS[1], "step1/keep": KEEP[1]})
    assert main(_argv(files, "run", "--inputs", files / "mixed.npz", "--steps", 2,
                      "--save-outputs", files / "o.npz")) == 0
    _assert_saved(files / "o.npz", 2)


def test_trace_takes_inputs_and_saves_outputs(files, capsys):
    assert main(_argv(files, "trace", "--inputs", files / "in.npz", "--save-outputs", files / "t.npz",
                      "--json", files / "t.json")) == 0
    _assert_saved(files / "t.npz", 2)


def test_sim_compares_generated_code_on_the_files_inputs(files, capsys):
    assert main(_argv(files, "sim", "--arch", "x86_64-generic", "--inputs", files / "in.npz",
                      "--save-outputs", files / "s.npz", "--bisect")) == 0
    out = capsys.readouterr().out
    assert "bisect: step 1: all" in out            # the node-by-node replay ran on the file's inputs too
    assert "all 4 output(s) match the reference over 2 step(s)" in out
    _assert_saved(files / "s.npz", 2)


def test_without_inputs_the_seeded_random_inputs_stay(files, capsys):
    from openinfer.api import bind_inputs
    from openinfer.inputs import random_inputs

    assert main(_argv(files, "run", "--seed", 7, "--save-outputs", files / "r.npz")) == 0
    _, _, bound = bind_inputs(str(files / "empty.oinf"), files / "g.oig", {})
    feed = random_inputs(bound, 7, 0)
    x, ids = feed["x"], feed["ids"]
    saved = np.load(files / "r.npz")
    assert np.array_equal(saved["y"], x + x) and np.array_equal(saved["z"], ids + ids)
    assert np.array_equal(saved["dropped"], ~feed["keep"])


def _entries(**overrides):
    base = {"x": X, "ids": IDS[0], "keep": KEEP[0]}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize("entries,extra,phrase", [
    (_entries(ids=None), (), "no value for input `ids` in step 0 (give `step0/ids`, or `ids` for every step)"),
    ({"x": X, "keep": KEEP[0], "step0/ids": IDS[0]}, ("--steps", "2"), "no value for input `ids` in step 1"),
    (_entries(idz=IDS[0]), (), "`idz`: `idz` is not a variable of the graph; the graph's inputs (dynamic) are: "
                               "x, ids, keep"),
    (_entries(y=X), (), "`y`: `y` is volatile, not an input"),
    (_entries(**{"step0/nope": IDS[0]}), (), "`step0/nope`: `nope` is not a variable of the graph"),
    (_entries(x=X.T), (), "`x`: `x` expects shape [2, 3], got [3, 2]"),
    (_entries(ids=np.array([1.0, 2.0, 3.0])), (), "`ids`: `ids` is i16; the file holds float64 values"),
    (_entries(keep=np.array([1.0, 0.0, 1.0], np.float32)), (), "`keep`: `keep` is bool; the file holds float32"),
    (_entries(ids=np.array([1, 2, 40000], np.int64)), (), "`ids`: `ids` is i16 (-32768..32767); values 1..40000 "
                                                          "are out of range"),
    (_entries(ids=np.array([0, 1, 2**40], np.uint64)), (), "values 0..1099511627776 are out of range"),
    (_entries(keep=np.array([0, 1, 2])), (), "`keep`: `keep` is bool; 2 is not True/False"),
    (_entries(x=np.array([[1e39, 0, 0], [0, 0, 0]])), (), "`x`: `x` is f32; 1e+39 is beyond its range"),
    ({**_entries(), "step2/x": X}, ("--steps", "2"), "holds inputs for step 2 but 2 step(s) are run"),
])
def test_bad_inputs_are_one_error_line(files, capsys, entries, extra, phrase):
    path = files / "bad.npz"
    np.savez(path, **entries)
    (files / "out.npz").write_bytes(b"previous")
    for command in ("run", "trace"):
        assert main(_argv(files, command, "--inputs", path, "--save-outputs", files / "out.npz", *extra)) == 1
        captured = capsys.readouterr()
        assert captured.err.startswith(f"openinfer: error: {path}: "), captured.err
        assert phrase in captured.err and len(captured.err.splitlines()) == 1, captured.err
        assert captured.out == "" and "Traceback" not in captured.err     # checked before any step runs
    assert (files / "out.npz").read_bytes() == b"previous"


@pytest.mark.parametrize("content,phrase", [
    (b"x = 1\n", "not a .npz archive"),
    (None, "holds a single array (.npy)"),
    (b"PK\x03\x04 truncated", "not a readable .npz archive"),
])
def test_a_file_that_is_not_an_npz_is_one_error_line(files, capsys, content, phrase):
    path = files / "in.bad"
    if content is None:
        with open(path, "wb") as fh:
            np.save(fh, X)
    else:
        path.write_bytes(content)
    assert main(_argv(files, "run", "--inputs", path)) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"openinfer: error: {path}: {phrase}") and len(err.splitlines()) == 1, err


def test_object_arrays_are_refused_without_unpickling(files, capsys):
    np.savez(files / "obj.npz", x=np.array([1, "a", None], dtype=object))
    assert main(_argv(files, "run", "--inputs", files / "obj.npz")) == 1
    assert "not a readable .npz archive (Object arrays cannot be loaded" in capsys.readouterr().err


@pytest.mark.parametrize("member,phrase", [
    (b"not an array", "`x.npy` is not a .npy array (the magic string is not correct"),
    (b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4'}    \n", "`x.npy` is not a .npy array (Cannot parse header"),
    (b"\x93NUMPY\x09\x09", "`x.npy` is not a .npy array (.npy format version 9.9 is not read here)"),
])
def test_a_member_that_is_not_an_npy_array_is_one_error_line(files, capsys, member, phrase):
    """numpy.load hands such a member over as bytes (or its header parser's exception): a traceback before."""
    import zipfile

    path = files / "odd.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", member)
    assert main(_argv(files, "run", "--inputs", path)) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"openinfer: error: {path}: {phrase}"), captured.err
    assert len(captured.err.splitlines()) == 1 and captured.out == ""


def _deflated_array(path: Path, name: str, descr: str, shape: tuple[int, ...], body_bytes: int) -> None:
    """A .npz member whose .npy header declares `shape` and whose body is `body_bytes` zeros,
    deflated (256 MiB of them take about 1 MB): a small file that unpacks to a large array."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            for _ in range(body_bytes >> 20):
                member.write(zeros)


def test_an_array_is_refused_by_its_header_before_its_data_is_read(files):
    """A 1 MB .npz declaring a 4 GiB array: refused from the member's .npy header (its shape is
    not the variable's), before its data is read; reading it first took the process past 300 MB."""
    import subprocess
    import sys

    path = files / "bomb.npz"
    _deflated_array(path, "x", "<f4", (1 << 30,), 256 << 20)
    assert path.stat().st_size < 2 << 20
    # The peak is the process's VmHWM: getrusage's ru_maxrss keeps, across fork and exec, the peak
    # of the process that forked it (this test's, hundreds of MB late in a full run).
    probe = ("import sys\nfrom openinfer.cli import main\nrc = main(sys.argv[1:])\n"
             "print(rc, next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))")
    proc = subprocess.run([sys.executable, "-c", probe, *_argv(files, "run", "--inputs", path)],
                          capture_output=True, text=True, timeout=300)
    rc, peak_kib = map(int, proc.stdout.split())
    assert peak_kib < 160 * 1024, f"peak RSS {peak_kib} KiB: the array's data was read"
    assert rc == 1
    assert proc.stderr == f"openinfer: error: {path}: `x`: `x` expects shape [2, 3], got [1073741824]\n"


def test_a_failed_save_leaves_the_previous_file_and_no_temporary(files, capsys, monkeypatch):
    target = files / "out.npz"
    target.write_bytes(b"previous")

    def savez_fails_midway(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", savez_fails_midway)
    assert main(_argv(files, "run", "--inputs", files / "in.npz", "--save-outputs", target)) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".")) == []


def test_saved_outputs_follow_the_umask(files, capsys):
    old = os.umask(0o027)
    try:
        assert main(_argv(files, "run", "--inputs", files / "in.npz", "--save-outputs", files / "m.npz")) == 0
    finally:
        os.umask(old)
    assert (files / "m.npz").stat().st_mode & 0o777 == 0o640


def test_saved_outputs_read_back_as_inputs(files, capsys):
    """A graph's outputs saved by one run feed the next (same keys, same shapes and dtypes)."""
    chain = files / "chain.oig"
    chain.write_text("dynamic {\n    y: f32[2, 3];\n}\nvolatile {\n    w: f32[2, 3];\n}\n"
                     "block entry {\n    op mul(y, y) >> w;\n    return;\n}\n")
    assert main(_argv(files, "run", "--inputs", files / "in.npz", "--show", "y",
                      "--save-outputs", files / "y.npz")) == 0
    assert sorted(np.load(files / "y.npz").files) == ["step0/y", "step1/y"]
    assert main(["run", str(chain), "-m", str(files / "empty.oinf"), "--inputs", str(files / "y.npz"),
                 "--save-outputs", str(files / "w.npz")]) == 0
    y = expected(0)["y"]
    assert np.array_equal(np.load(files / "w.npz")["step1/w"], y * y)


@pytest.mark.parametrize("command", ["run", "trace", "sim"])
@pytest.mark.parametrize("extra,phrase", [
    (("--steps", "0"), "--steps 0: a run takes at least 1 step"),
    (("--steps", "-1"), "--steps -1: a run takes at least 1 step"),
    (("--seed", "-1"), "--seed -1: the seed is an integer >= 0"),
])
def test_steps_below_one_and_negative_seeds_are_refused(files, capsys, command, extra, phrase):
    """`sim --steps 0` compared nothing and reported every output matching, `run --steps 0` saved
    an empty archive, and `--seed -1` ended in numpy's traceback."""
    arch = ("--arch", "x86_64-generic") if command == "sim" else ()
    assert main(_argv(files, command, *arch, *extra, "--save-outputs", files / "o.npz")) == 1
    captured = capsys.readouterr()
    assert captured.err == f"openinfer: error: {phrase}\n" and captured.out == ""
    assert not (files / "o.npz").exists()
