"""Every command and sub-command explains itself, and the main flows work from the CLI."""

from __future__ import annotations

import argparse

import pytest

from openinfer.cli import build_parser, main


def _leaves(parser: argparse.ArgumentParser, prefix=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    yield prefix, parser
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, prefix + (name,))


COMMANDS = [p for p, _ in _leaves(build_parser())]


def test_expected_commands_exist():
    names = {" ".join(p) for p in COMMANDS}
    for cmd in ("oinf verify", "oinf inspect", "oinf pack", "oinf convert", "graph json", "graph dot", "check",
                "run", "trace", "gen", "build", "sim", "plan", "devices list", "devices show", "devices probe",
                "cache info", "cache clean"):
        assert cmd in names, cmd


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(p) or "openinfer" for p in COMMANDS])
def test_help_explains(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: openinfer" in out
    assert len(out.split()) > 20, f"`openinfer {' '.join(argv)} --help` says too little"


def test_group_without_subcommand_prints_help(capsys):
    assert main(["oinf"]) == 2
    assert "verify" in capsys.readouterr().out


def test_run_and_check_from_the_cli(example_models, capsys):
    from pathlib import Path

    graph = str(Path(__file__).resolve().parent.parent / "examples" / "kv_cache_decode.oig")
    model = str(example_models / "kv_cache_decode.oinf")
    assert main(["check", graph, "--model", model]) == 0
    assert "K  " in capsys.readouterr().out or True
    assert main(["run", graph, "--model", model, "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("k_hist") == 2


def test_errors_are_printed_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.oig"
    bad.write_text("constants { x: f32; }\n")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.oig:1:1" in err and "did you mean `constant`" in err


def test_devices_list_and_show(capsys):
    assert main(["devices", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("ada_mock", "x86_64-generic", "x86_64-avx2", "x86_64-avx512"):
        assert name in out
    assert main(["devices", "show", "ada_mock"]) == 0
    assert '"cooperative_matrix": false' in capsys.readouterr().out


GRAPH = ("dynamic {\n    x: f32[2];\n}\nvolatile {\n    y: f32[2];\n}\n"
         "block entry {\n    op add(x, x) >> y;\n    return;\n}\n")


@pytest.fixture
def files(tmp_path):
    import openinfer as oi

    (tmp_path / "g.oig").write_text(GRAPH)
    (tmp_path / "dir.oig").mkdir()
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "digits.oig").write_text("dynamic {\n    x: f32[" + "7" * 5000 + "];\n}\nblock entry { return; }\n")
    (tmp_path / "huge.oig").write_text("volatile {\n    v: f32[1000000000000];\n}\nblock entry {\n    return;\n}\n")
    (tmp_path / "sized.oig").write_text("dynamic {\n    x: f32[N, 64];\n}\nvolatile {\n    y: f32[N, 64];\n}\n"
                                        "block entry {\n    op add(x, x) >> y;\n    return;\n}\n")
    (tmp_path / "net.onnx").write_bytes(b"\x08\x08\x12\x07pytorch")     # (the start of an exported model)
    (tmp_path / "latin1.json").write_bytes('{"name": "CPU à 3 GHz"}'.encode("latin-1"))
    oi.write_oinf(tmp_path / "empty.oinf", tensors={})
    return tmp_path


def _one_error_line(capsys, argv, phrase):
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("openinfer: error: ") and not err.startswith("openinfer: error: error:"), err
    assert phrase in err.splitlines()[0], err
    assert "Traceback" not in err + captured.out
    return err


@pytest.mark.parametrize("argv,phrase", [
    (["check", "{d}/missing.oig"], "missing.oig: cannot read: No such file or directory"),
    (["check", "{d}/dir.oig"], "dir.oig: not a regular file"),
    (["check", "/dev/zero"], "/dev/zero: not a regular file"),
    (["graph", "json", "/dev/zero"], "/dev/zero: not a regular file"),
    (["check", "{d}/g.oig", "-m", "{d}/missing.oinf"], "missing.oinf: cannot open"),
    (["check", "{d}/g.oig", "-m", "{d}/dir.oig"], "dir.oig: not a regular file"),
    (["check", "{d}/g.oig", "-m", "/dev/zero"], "/dev/zero: not a regular file"),
    (["check", "{d}/digits.oig"], "digits.oig:2:12: syntax error: integer literal `77777777777777777777...77777777` "
                                  "(5000 digits) is out of range"),
    (["gen", "{d}/g.oig", "-m", "{d}/empty.oinf", "--arch", "x86_64-generic", "-o", "{d}/file"], "{d}/file"),
    (["run", "{d}/huge.oig", "-m", "{d}/empty.oinf"], "huge.oig:2:5: runtime error: `v` (f32[1000000000000]) does not "
                                                       "fit in memory"),
    # a dynamic bound whose buffers pass 2^63 bytes (a traceback: whether the size fits was asked of the
    # run-time size, not of the bound the memory is planned for)
    (["check", "{d}/sized.oig", "--dynamic", "N=4611686018427387904"],
     "sized.oig:2:5: error: f32[N, 64] (at most [4611686018427387904, 64]) is 1180591620717411303424 bytes, more "
     "than the generated code can address"),
    # sizes the graph does not have: a typo left the size it meant at the model's value, silently
    (["check", "{d}/sized.oig", "--sizevar", "N=2", "--sizevar", "M=3"],
     "--sizevar M: the graph has no size variable `M`; its size variables: N"),
    (["run", "{d}/sized.oig", "-m", "{d}/empty.oinf", "--sizevar", "N=2", "--dynamic", "K=3", "--dynamic", "L=3"],
     "--dynamic K: the graph has no size variable `K` (nor L); its size variables: N"),
    (["gen", "{d}/g.oig", "-m", "{d}/empty.oinf", "--arch", "x86_64-generic", "-o", "{d}/out", "--sizevar", "N=2"],
     "--sizevar N: the graph has no size variable `N`; its size variables: none"),
    # a descriptor that is not UTF-8 (a traceback: UnicodeDecodeError)
    (["devices", "show", "{d}/latin1.json"], "latin1.json: not UTF-8 text (byte offset 14)"),
    (["gen", "{d}/g.oig", "-m", "{d}/empty.oinf", "--arch", "{d}/latin1.json", "-o", "{d}/out"],
     "latin1.json: not UTF-8 text (byte offset 14)"),
    # an ONNX model where the graph or the model goes: say how to import it (it was `bad magic`)
    (["run", "{d}/g.oig", "-m", "{d}/net.onnx"],
     "{d}/net.onnx is an ONNX model: import it first, `openinfer import {d}/net.onnx -o DIR` writes DIR/net.oig "
     "(the graph) and DIR/net.oinf"),
    (["check", "{d}/net.onnx"], "{d}/net.onnx is an ONNX model: import it first"),
    # a message without a place is printed once prefixed (was `openinfer: error: error: sizevar ...`)
    (["check", "{d}/sized.oig", "--sizevar", "N=3", "--dynamic", "N=3"],
     "openinfer: error: sizevar `N` is given both a fixed value (3) and a dynamic bound (3)"),
])
def test_bad_files_and_sizes_are_one_error_line(files, capsys, argv, phrase):
    """Every way a command's input or output can be wrong ends in `openinfer: error: ...` and
    exit status 1, never a traceback (nor a read of /dev/zero until memory runs out)."""
    _one_error_line(capsys, [a.format(d=files) for a in argv], phrase.format(d=files))


def test_library_calls_raise_openinfer_errors(files):
    import openinfer as oi

    for path in (files / "missing.oig", files / "dir.oig", "/dev/zero"):
        with pytest.raises(oi.DslError, match="cannot read|not a regular file"):
            oi.load_graph(path)
    ex = oi.Reference(None, str(files / "huge.oig")).make_executor()
    with pytest.raises(oi.ExecutionError, match="does not fit in memory"):
        ex.run_step()
