"""`openinfer import` and the mistakes a user's model or command line can hold: each is one error
line naming the file, node, initializer or flag (never a traceback, never an "internal error",
never a silently wrong graph), nothing is written, and every unsupported node is listed in one run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.cli import main  # noqa: E402


def _model(nodes, inputs, outputs, initializers=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _info(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _import_fails(capsys, tmp_path, model, *extra, phrase: str) -> str:
    """Imports `model` (a ModelProto, saved first, or a path) from the CLI: exit 1, one line
    starting `openinfer: error: ` and holding `phrase`, nothing written."""
    path = model if isinstance(model, (str, os.PathLike)) else tmp_path / "m.onnx"
    if not isinstance(model, (str, os.PathLike)):
        onnx.save(model, path)
    out = tmp_path / "out"
    before = sorted(out.iterdir()) if out.exists() else []
    assert main(["import", str(path), "-o", str(out), *extra]) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("openinfer: error: ") and len(err.splitlines()) == 1, err
    assert phrase in err, err
    assert "Traceback" not in err and "internal error" not in err and captured.out == ""
    assert (sorted(out.iterdir()) if out.exists() else []) == before       # nothing written
    return err


def test_an_empty_file_is_not_an_empty_graph(tmp_path, capsys):
    """protobuf reads 0 bytes as an empty ModelProto: it was imported as a graph of nothing."""
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    _import_fails(capsys, tmp_path, empty, phrase=f"{empty}: not an ONNX model: it holds no graph (the file is empty)")


@pytest.mark.parametrize("raw", [True, False])
def test_an_initializer_whose_dims_its_data_does_not_fill_is_named(tmp_path, capsys, raw):
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w") if raw else \
        helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    w.dims[:] = [5, 7]
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_info("x", [2, 3])],
                   [_info("y", [2, 3])], [w])
    _import_fails(capsys, tmp_path, model, phrase="initializer `w`: its data does not fill its dims [5, 7] "
                                                  "(cannot reshape array of size 6 into shape (5,7))")


def test_a_constant_node_whose_dims_its_data_does_not_fill_is_named(tmp_path, capsys):
    value = helper.make_tensor("v", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    value.dims[:] = [4]
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=value),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    _import_fails(capsys, tmp_path, _model(nodes, [_info("x", [2, 3])], [_info("y", [2, 3])]),
                  phrase='node "const" (Constant): value: its data does not fill its dims [4]')


def test_an_input_without_a_shape_is_not_taken_for_a_scalar(tmp_path, capsys):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_info("x", None)], [_info("y", None)])
    _import_fails(capsys, tmp_path, model, phrase="graph input `x` has no shape (not even a rank): give it one in "
                                                  "the model, with a dim_param for each size --sizevar NAME=VALUE sets")


def test_every_unsupported_node_is_listed_in_one_run(tmp_path, capsys):
    """Nodes after one that fails are still tried where they do not read its outputs; one reading
    them is listed when its op type alone is unsupported (nothing else can be known of it)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Unique", ["a"], ["b"], name="/first/Unique"),
             helper.make_node("Tanh", ["b"], ["c"], name="after_unique"),           # downstream: not tried
             helper.make_node("Relu", ["x"], ["d"], name="relu_alpha", alpha=0.5),  # independent
             helper.make_node("Sum", ["c", "d"], ["e"], name="sum"),
             helper.make_node("Foo", ["e"], ["y"], name="foo", domain="com.example")]
    model = _model(nodes, [_info("x", [2, 3])], [_info("y", [2, 3])])
    with pytest.raises(oi.OnnxImportError) as info:
        oi.import_onnx(model)
    assert str(info.value) == (
        '3 nodes cannot be imported: node "/first/Unique" (Unique): op type Unique is not supported; '
        'node "relu_alpha" (Relu): attribute `alpha` is not supported (it takes none); '
        'node "foo" (Foo): ops of domain `com.example` are not supported '
        "(`openinfer import --list-ops` lists those that are)")
    _import_fails(capsys, tmp_path, model, phrase="3 nodes cannot be imported")


def test_sizevars_that_make_a_node_impossible_are_the_users_error(tmp_path, capsys):
    """A Conv's input smaller than its window at the given sizes, and sizes whose input passes 2^63
    bytes, were reported as an internal error pointing into the graph text, never written."""
    x = _info("x", [1, 3, "H", "W"])
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    conv = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [x], [_info("y", None)], [w])
    for h in (1, 2):
        _import_fails(capsys, tmp_path, conv, "-s", f"H={h}", "-s", "W=8",
                      phrase=f'node "conv" (Conv): the window (3) is larger than the padded input ({h}) in '
                             f"spatial dim 0 with H={h}, W=8")
    _import_fails(capsys, tmp_path, conv, "-s", f"H={2 ** 62}", "-s", "W=8",
                  phrase=f"graph input `x`: f32[1, 3, {2 ** 62}, 8] would be {2 ** 62 * 96} bytes with H={2 ** 62}, "
                         "W=8, more than the generated code can address (2^63 - 1)")
    reshape = _model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])],
                     [x], [_info("y", None)])
    _import_fails(capsys, tmp_path, reshape, "-s", "H=1", "-s", "W=8",
                  phrase='node "pool" (MaxPool): the window (2) is larger than the padded input (1) in spatial dim 0')


@pytest.mark.parametrize("name", ["???", "-", "é", "_"])
def test_a_name_with_nothing_to_keep_is_refused(tmp_path, capsys, name):
    """Each of these became `v`: every such import wrote v.oig and v.oinf."""
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_info("x", [2])], [_info("y", [2])])
    _import_fails(capsys, tmp_path, model, "--name", name,
                  phrase=f"--name {name!r} has no ASCII letter or digit to make the graph's name of")
    onnx.save(model, tmp_path / f"{name}.onnx")
    _import_fails(capsys, tmp_path, tmp_path / f"{name}.onnx",
                  phrase=f"the model's name {name!r} has no ASCII letter or digit")


def test_a_hand_edited_graph_is_replaced_only_with_force(tmp_path, capsys):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_info("x", [2])], [_info("y", [2])])
    path, out = tmp_path / "net.onnx", tmp_path / "out"
    onnx.save(model, path)
    argv = ["import", str(path), "-o", str(out)]
    assert main(argv) == 0 and main(argv) == 0          # the same graph again: kept, no --force needed
    graph, weights = out / "net.oig", out / "net.oinf"
    edited = graph.read_text() + "// my notes\n"
    graph.write_text(edited)
    weights_before = weights.read_bytes()
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == (f"openinfer: error: {graph} exists and is not the graph imported now: it may hold your edits; "
                   "--force replaces it (or choose another -o DIR or --name)\n")
    assert graph.read_text() == edited and weights.read_bytes() == weights_before
    assert main([*argv, "--force"]) == 0
    assert "my notes" not in graph.read_text()


def test_outputs_that_are_not_regular_files_are_refused(tmp_path, capsys):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_info("x", [2])], [_info("y", [2])])
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "m.oig")
    os.symlink("/dev/null", out / "n.oinf")
    _import_fails(capsys, tmp_path, model, phrase=f"{out / 'm.oig'}: is a FIFO, not a regular file")
    _import_fails(capsys, tmp_path, model, "--name", "n", phrase=f"{out / 'n.oinf'}: is a symbolic link")
    assert os.readlink(out / "n.oinf") == "/dev/null" and not (out / "n.oig").exists()


def test_an_empty_output_folder_is_refused(tmp_path, capsys, monkeypatch):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_info("x", [2])], [_info("y", [2])])
    onnx.save(model, tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(tmp_path / "m.onnx"), "-o", ""]) == 1
    assert capsys.readouterr().err == "openinfer: error: --out: the folder's path is empty\n"
    assert not (tmp_path / "m.oig").exists()
