"""`openinfer graph json|dot FILE [-o OUT]`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import openinfer as oi
from openinfer.cli import graph as graph_commands
from openinfer.cli import main
from openinfer.errors import OpenInferError
from openinfer.ir.json import graph_to_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(argv: list[str]) -> int:
    """What openinfer.cli.main does for these sub-commands."""
    parser = argparse.ArgumentParser(prog="openinfer")
    graph_commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        args.help_parser.print_help()
        return 2
    return args.handler(args)


def test_graph_json_to_stdout_and_file(tmp_path, capsys):
    src = EXAMPLES / "mlp_regression.oig"
    assert run(["graph", "json", str(src)]) == 0
    out = capsys.readouterr().out
    assert out == graph_to_json(oi.load_graph(src)) + "\n"
    target = tmp_path / "mlp.json"
    assert run(["graph", "json", str(src), "-o", str(target)]) == 0
    assert target.read_text() == out
    again = tmp_path / "again.json"
    assert run(["graph", "json", str(target), "-o", str(again)]) == 0
    assert again.read_bytes() == target.read_bytes()


def test_graph_dot(tmp_path):
    target = tmp_path / "g.dot"
    assert run(["graph", "dot", str(EXAMPLES / "moe_routing.oig"), "-o", str(target)]) == 0
    assert target.read_text().startswith('digraph "moe_routing" {')


def test_rust_index_option(tmp_path, capsys):
    rs = tmp_path / "g.rs"
    rs.write_text("fn main() { let a = graph! { block a { return; } }; let b = graph! { block b { return; } }; }")
    assert run(["graph", "json", str(rs), "--index", "1"]) == 0
    assert '"b": {' in capsys.readouterr().out


def test_errors(tmp_path, capsys):
    bad = tmp_path / "bad.oig"
    bad.write_text("block entry { return h; }")
    with pytest.raises(OpenInferError, match="return takes no value"):
        run(["graph", "json", str(bad)])
    with pytest.raises(OpenInferError, match="missing.oig: cannot read: No such file or directory"):
        run(["graph", "dot", str(tmp_path / "missing.oig")])
    assert main(["graph", "dot", str(tmp_path / "missing.oig")]) == 1
    missing = tmp_path / "missing.oig"
    assert capsys.readouterr().err == f"openinfer: error: {missing}: cannot read: No such file or directory\n"
    good = str(EXAMPLES / "mlp_regression.oig")
    assert main(["graph", "json", good, "-o", str(tmp_path / "no" / "such" / "folder.json")]) == 1
    assert "such/folder.json: No such file or directory" in capsys.readouterr().err


def test_group_help(capsys):
    assert run(["graph"]) == 2
    assert "openinfer graph json examples/mlp_regression.oig" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run(["graph", "json", "--help"])
    assert "example:" in capsys.readouterr().out
