"""ONNX GRU, LSTM and RNN: keyword-spotting-style models (40 features x 49 frames) built with
onnx.helper (random weights, fixed seed), imported whole and with `streaming=True`, run on the
reference and the generated C (x86_64-generic and the host's best CPU target), compared with
onnxruntime over the whole sequence. (The single-node cases are the ONNX backend node tests in
test_onnx_node_cases.py.)"""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_models import imported_executors  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.errors import OnnxImportError  # noqa: E402
from openinfer.targets.devices import best_host_target  # noqa: E402

FRAMES, FEATURES, CLASSES = 49, 40, 12
TARGETS = sorted({"x86_64-generic", best_host_target()})
ATOL, RTOL = 2e-5, 1e-4


def _weights(rng, shape, fan):
    return (rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32)


def streamable_model() -> onnx.ModelProto:
    """Forward GRU (hidden 48, linear_before_reset=1 as PyTorch exports it) -> LSTM (hidden 32,
    peepholes, constant non-zero initial state) -> per-frame logits; `frames` symbolic."""
    rng = np.random.default_rng(7)
    h1, h2 = 48, 32
    inits = {
        "gru_W": _weights(rng, (1, 3 * h1, FEATURES), FEATURES), "gru_R": _weights(rng, (1, 3 * h1, h1), h1),
        "gru_B": _weights(rng, (1, 6 * h1), 4),
        "lstm_W": _weights(rng, (1, 4 * h2, h1), h1), "lstm_R": _weights(rng, (1, 4 * h2, h2), h2),
        "lstm_B": _weights(rng, (1, 8 * h2), 4), "lstm_P": _weights(rng, (1, 3 * h2), 4),
        "lstm_h0": _weights(rng, (1, 1, h2), 4), "lstm_c0": _weights(rng, (1, 1, h2), 4),
        "fc_W": _weights(rng, (h2, CLASSES), h2), "fc_b": _weights(rng, (CLASSES,), 4),
        "axis1": np.array([1], np.int64),
    }
    nodes = [
        oh.make_node("GRU", ["x", "gru_W", "gru_R", "gru_B"], ["gru_Y", ""], name="/gru/GRU", hidden_size=h1,
                     linear_before_reset=1),
        oh.make_node("Squeeze", ["gru_Y", "axis1"], ["gru_out"], name="/gru/Squeeze"),
        oh.make_node("LSTM", ["gru_out", "lstm_W", "lstm_R", "lstm_B", "", "lstm_h0", "lstm_c0", "lstm_P"],
                     ["lstm_Y", "state", ""], name="/lstm/LSTM", hidden_size=h2),
        oh.make_node("Squeeze", ["lstm_Y", "axis1"], ["lstm_out"], name="/lstm/Squeeze"),
        oh.make_node("MatMul", ["lstm_out", "fc_W"], ["fc_mm"], name="/fc/MatMul"),
        oh.make_node("Add", ["fc_mm", "fc_b"], ["logits"], name="/fc/Add"),
    ]
    graph = oh.make_graph(
        nodes, "kws_stream", [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["frames", 1, FEATURES])],
        [oh.make_tensor_value_info("logits", TensorProto.FLOAT, ["frames", 1, CLASSES]),
         oh.make_tensor_value_info("state", TensorProto.FLOAT, [1, 1, h2])],
        [nh.from_array(v, k) for k, v in inits.items()])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def bidirectional_model() -> onnx.ModelProto:
    """Bidirectional GRU (hidden 32, linear_before_reset=0, initial_h a graph input) -> reverse
    LSTM (hidden 32, clip 2.5) on the two directions joined -> its final h and c. (Batch-first,
    layout 1, onnxruntime does not run: the node tests' `*_batchwise` cases check it.)"""
    rng = np.random.default_rng(11)
    h = 32
    inits = {
        "gru_W": _weights(rng, (2, 3 * h, FEATURES), FEATURES), "gru_R": _weights(rng, (2, 3 * h, h), h),
        "gru_B": _weights(rng, (2, 6 * h), 4),
        "lstm_W": _weights(rng, (1, 4 * h, 2 * h), 2 * h), "lstm_R": _weights(rng, (1, 4 * h, h), h),
        "lstm_B": _weights(rng, (1, 8 * h), 4), "joined": np.array([FRAMES, 1, 2 * h], np.int64),
    }
    nodes = [
        oh.make_node("GRU", ["x", "gru_W", "gru_R", "gru_B", "", "h0"], ["gru_Y", "gru_h"], name="/gru/GRU",
                     hidden_size=h, direction="bidirectional"),
        # [T, 2, 1, H] -> [T, 1, 2, H] -> [T, 1, 2H]: the directions joined
        oh.make_node("Transpose", ["gru_Y"], ["gru_bt"], name="/gru/Transpose", perm=[0, 2, 1, 3]),
        oh.make_node("Reshape", ["gru_bt", "joined"], ["gru_out"], name="/gru/Reshape"),
        oh.make_node("LSTM", ["gru_out", "lstm_W", "lstm_R", "lstm_B"], ["", "final", "cell"], name="/lstm/LSTM",
                     hidden_size=h, direction="reverse", clip=2.5),
    ]
    graph = oh.make_graph(
        nodes, "kws_bidi", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [FRAMES, 1, FEATURES]),
                            oh.make_tensor_value_info("h0", TensorProto.FLOAT, [2, 1, h])],
        [oh.make_tensor_value_info("final", TensorProto.FLOAT, [1, 1, h]),
         oh.make_tensor_value_info("cell", TensorProto.FLOAT, [1, 1, h]),
         oh.make_tensor_value_info("gru_h", TensorProto.FLOAT, [2, 1, h])],
        [nh.from_array(v, k) for k, v in inits.items()])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _onnxruntime(model: onnx.ModelProto, feed: dict) -> dict:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, feed), strict=True))


@pytest.fixture(scope="module")
def features():
    return np.random.default_rng(3).standard_normal((FRAMES, 1, FEATURES)).astype(np.float32)


def _engine(kind: str, graph, oinf, tmp_path_factory, monkeypatch):
    model = oi.ModelLoader.open(oinf)
    if kind == "reference":
        return oi.Reference(model, oi.load_graph(graph)).make_executor()
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))
    return oi.Simulator(model, oi.load_graph(graph), arch=kind).make_executor()


ENGINES = ["reference", *TARGETS]


@pytest.mark.parametrize("engine", ENGINES)
def test_whole_sequence_matches_onnxruntime(engine, features, tmp_path_factory, monkeypatch):
    cases = [(streamable_model(), {"x": features}, {"frames": FRAMES}),
             (bidirectional_model(), {"x": features,
                                      "h0": np.random.default_rng(5).standard_normal((2, 1, 32)).astype(np.float32)},
              {})]
    for model, feed, sizevars in cases:
        expected = _onnxruntime(model, feed)
        imported = oi.import_onnx(model, sizevars=sizevars)
        assert "loop " in imported.text and "dynamic_slice" in imported.text
        graph, oinf = imported.write(tmp_path_factory.mktemp(model.graph.name))
        ex = _engine(engine, graph, oinf, tmp_path_factory, monkeypatch)
        ex.insert(**feed)
        ex.run_step()
        for name, want in expected.items():
            np.testing.assert_allclose(ex.fetch(imported.renamed.get(name, name)), want, atol=ATOL, rtol=RTOL,
                                       err_msg=f"{model.graph.name}: {name}")


@pytest.mark.parametrize("engine", ENGINES)
def test_streaming_step_by_step_matches_the_whole_sequence(engine, features, tmp_path_factory, monkeypatch):
    """49 runs of one frame each give onnxruntime's per-frame logits over the whole sequence, and
    the final LSTM state; `reset()` starts the stream again (from the constant initial state)."""
    model = streamable_model()
    expected = _onnxruntime(model, {"x": features})
    imported = oi.import_onnx(model, streaming=True)
    assert imported.sizevars == {"frames": 1}
    assert "persistent {" in imported.text and "loop " not in imported.text
    graph, oinf = imported.write(tmp_path_factory.mktemp("stream"))
    ex = _engine(engine, graph, oinf, tmp_path_factory, monkeypatch)
    for t in range(FRAMES):
        ex.insert(x=features[t:t + 1])
        ex.run_step()
        np.testing.assert_allclose(ex.fetch("logits"), expected["logits"][t:t + 1], atol=ATOL, rtol=RTOL,
                                   err_msg=f"frame {t}")
    np.testing.assert_allclose(ex.fetch("state"), expected["state"], atol=ATOL, rtol=RTOL)
    ex.reset()
    for t in range(2):
        ex.insert(x=features[t:t + 1])
        ex.run_step()
    np.testing.assert_allclose(ex.fetch("logits"), expected["logits"][1:2], atol=ATOL, rtol=RTOL)


def test_streaming_refuses_what_needs_the_whole_sequence():
    with pytest.raises(OnnxImportError, match=r"/gru/GRU.*--streaming runs one time step per run: it needs "
                                              r"direction forward"):
        oi.import_onnx(bidirectional_model(), streaming=True)
    with pytest.raises(OnnxImportError, match="--streaming runs one time step"):
        oi.import_onnx(streamable_model(), streaming=True, sizevars={"frames": 4})


def _single(op: str, **attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    inits = [nh.from_array(_weights(rng, (1, gates * 4, 3), 3), "W"),
             nh.from_array(_weights(rng, (1, gates * 4, 4), 4), "R")]
    node = oh.make_node(op, ["x", "W", "R"], ["", "h"], hidden_size=4, name="cell", **attrs)
    graph = oh.make_graph([node], "one", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, 3])],
                          [oh.make_tensor_value_info("h", TensorProto.FLOAT, [1, 2, 4])], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("op, attrs, message", [
    ("GRU", {"activations": ["Sigmoid", "HardSigmoid"]}, "activations HardSigmoid are not supported"),
    ("LSTM", {"input_forget": 1}, "input_forget=1 is not supported"),
    ("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.1]}, "activation_alpha"),
])
def test_refusals_name_the_node_and_the_reason(op, attrs, message):
    with pytest.raises(OnnxImportError, match=rf'node "cell" \({op}\): .*{message}'):
        oi.import_onnx(_single(op, **attrs))


# per-row sequence_lens: B = 3 rows of lengths T, 1 and T - 2 over T = 7 steps
STEPS, ROWS, INPUTS, HIDDEN = 7, 3, 3, 5
LENS = np.array([STEPS, 1, STEPS - 2], np.int32)
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _lens_model(op: str, layout: int, lbr: int = 0, lens=LENS) -> onnx.ModelProto:
    """One node per direction reading the same X, each with random W, R, B, a random constant
    initial_h (and initial_c and peepholes for LSTM: a row past its length keeps them) and the
    constant `lens`; outputs Y, Y_h (Y_c) of each."""
    rng = np.random.default_rng(17 + layout + 2 * lbr)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    xs = [STEPS, ROWS, INPUTS] if layout == 0 else [ROWS, STEPS, INPUTS]
    inits, nodes, outs = [nh.from_array(np.asarray(lens, np.int32), "lens")], [], []
    for direction, nd in DIRECTIONS.items():
        state = [nd, ROWS, HIDDEN] if layout == 0 else [ROWS, nd, HIDDEN]
        names = [f"{direction}_{n}" for n in ("W", "R", "B", "h0", "c0", "P")]
        arrays = [_weights(rng, (nd, gates * HIDDEN, INPUTS), INPUTS), _weights(rng, (nd, gates * HIDDEN, HIDDEN), 3),
                  _weights(rng, (nd, 2 * gates * HIDDEN), 4), _weights(rng, state, 2), _weights(rng, state, 2),
                  _weights(rng, (nd, 3 * HIDDEN), 4)]
        ins = ["x", *names[:3], "lens", names[3]] + (names[4:] if op == "LSTM" else [])
        inits += [nh.from_array(a, n) for a, n in zip(arrays, names, strict=True) if n in ins]
        results = [f"{direction}_{n}" for n in ("Y", "Y_h", "Y_c")[:3 if op == "LSTM" else 2]]
        extra = {"linear_before_reset": lbr} if op == "GRU" else {}
        nodes.append(oh.make_node(op, ins, results, name=f"{op}_{direction}", hidden_size=HIDDEN, layout=layout,
                                  direction=direction, **extra))
        outs += [oh.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in results]
    graph = oh.make_graph(nodes, "lens", [oh.make_tensor_value_info("x", TensorProto.FLOAT, xs)], outs, inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _as_layout0(model: onnx.ModelProto) -> onnx.ModelProto:
    """A layout-1 model as layout 0 (onnxruntime runs only that): X [T, B, I], initial states
    [D, B, H]; its Y [T, D, B, H] and Y_h [D, B, H] transposed give the layout-1 outputs."""
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    for node in twin.graph.node:
        for a in node.attribute:
            if a.name == "layout":
                a.i = 0
    for t in twin.graph.initializer:
        if t.name.endswith(("_h0", "_c0")):
            t.CopyFrom(nh.from_array(nh.to_array(t).transpose(1, 0, 2), t.name))
    twin.graph.input[0].CopyFrom(oh.make_tensor_value_info("x", TensorProto.FLOAT, [STEPS, ROWS, INPUTS]))
    return twin


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op, lbr", [("RNN", 0), ("GRU", 0), ("GRU", 1), ("LSTM", 0)])
def test_per_row_sequence_lens_match_onnxruntime(op, lbr, layout, tmp_path):
    """Rows shorter than T: forward keeps the state past the row's length and writes Y = 0 there,
    reverse runs each row from its last step down; on the reference and the generated C."""
    model = _lens_model(op, layout, lbr)
    x = np.random.default_rng(4).standard_normal((STEPS, ROWS, INPUTS)).astype(np.float32)
    expected = _onnxruntime(_as_layout0(model) if layout else model, {"x": x})
    if layout == 1:
        expected = {k: v.transpose(2, 0, 1, 3) if v.ndim == 4 else v.transpose(1, 0, 2) for k, v in expected.items()}
        x = x.transpose(1, 0, 2).copy()
    # the masks are real: zeros in Y past each row's length, and not the state of a full-length run
    assert not np.any(expected["forward_Y"][LENS[1]:, 0, 1] if layout == 0 else expected["forward_Y"][1, 1:])
    imported, executors = imported_executors(model, tmp_path)
    assert imported.text.count("op filter(") == 4 * (2 if op == "LSTM" else 1)     # one per state of each loop
    for ex in executors:
        ex.insert(x=x)
        ex.run_step()
        for name, want in expected.items():
            np.testing.assert_allclose(ex.fetch(imported.renamed.get(name, name)), want, atol=ATOL, rtol=RTOL,
                                       err_msg=f"{op} layout {layout}: {name}")


def test_layout_1_computed_initial_state_matches_onnxruntime(tmp_path):
    """Batch-first initial_h [B, D, H] from a graph input: each direction's slice along axis 1
    (onnxruntime runs the layout-0 twin, initial_h transposed)."""
    rng = np.random.default_rng(23)
    inits = [nh.from_array(_weights(rng, (2, 3 * HIDDEN, INPUTS), INPUTS), "W"),
             nh.from_array(_weights(rng, (2, 3 * HIDDEN, HIDDEN), 3), "R"), nh.from_array(LENS, "lens")]

    def model(layout):
        xs, hs = ([ROWS, STEPS, INPUTS], [ROWS, 2, HIDDEN]) if layout else ([STEPS, ROWS, INPUTS], [2, ROWS, HIDDEN])
        node = oh.make_node("GRU", ["x", "W", "R", "", "lens", "h0"], ["Y", "Y_h"], hidden_size=HIDDEN,
                            direction="bidirectional", layout=layout)
        graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, xs),
                                            oh.make_tensor_value_info("h0", TensorProto.FLOAT, hs)],
                              [oh.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")], inits)
        return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])

    x = rng.standard_normal((STEPS, ROWS, INPUTS)).astype(np.float32)
    h0 = rng.standard_normal((2, ROWS, HIDDEN)).astype(np.float32)
    want = _onnxruntime(model(0), {"x": x, "h0": h0})
    imported, executors = imported_executors(model(1), tmp_path)
    for ex in executors:
        ex.insert(x=x.transpose(1, 0, 2).copy(), h0=h0.transpose(1, 0, 2).copy())
        ex.run_step()
        np.testing.assert_allclose(ex.fetch("Y"), want["Y"].transpose(2, 0, 1, 3), atol=ATOL, rtol=RTOL)
        np.testing.assert_allclose(ex.fetch("Y_h"), want["Y_h"].transpose(1, 0, 2), atol=ATOL, rtol=RTOL)


def test_sequence_lens_all_the_sequence_length_generate_no_mask():
    """Lengths all T import as the node without sequence_lens: the same graph."""
    with_lens, without = _lens_model("GRU", 0, lens=[STEPS] * ROWS), _lens_model("GRU", 0)
    for node in without.graph.node:
        node.input[4] = ""
    assert oi.import_onnx(with_lens).text == oi.import_onnx(without).text
    assert "op filter(" not in oi.import_onnx(with_lens).text


def test_sequence_lens_refusals():
    model = _single("RNN")
    model.graph.node[0].input.extend(["", "lens"])
    for lens, message in (([5, 0], r"sequence_lens \[5, 0\]: each length must be in 1..5"),
                          ([6, 2], r"sequence_lens \[6, 2\]: each length must be in 1..5"),
                          ([5, 3, 1], r"sequence_lens \[5, 3, 1\] must have one length per batch row \(2\)")):
        del model.graph.initializer[2:]
        model.graph.initializer.append(nh.from_array(np.array(lens, np.int32), "lens"))
        with pytest.raises(OnnxImportError, match=rf'node "cell" \(RNN\): {message}'):
            oi.import_onnx(model)
    # per-row lengths at run time: a graph input
    del model.graph.initializer[2:]
    model.graph.input.append(oh.make_tensor_value_info("lens", TensorProto.INT32, [2]))
    with pytest.raises(OnnxImportError, match=r'node "cell" \(RNN\): sequence_lens must be a constant'):
        oi.import_onnx(model)
    # streaming: one step per run, the lengths of the whole stream do not fit
    stream = _single("GRU")
    stream.graph.input[0].CopyFrom(oh.make_tensor_value_info("x", TensorProto.FLOAT, ["frames", 2, 3]))
    stream.graph.node[0].input.extend(["", "lens"])
    stream.graph.initializer.append(nh.from_array(np.array([1, 1], np.int32), "lens"))
    assert "op filter(" not in oi.import_onnx(stream, streaming=True).text
    stream.graph.initializer[-1].CopyFrom(nh.from_array(np.array([40, 12], np.int32), "lens"))
    with pytest.raises(OnnxImportError, match=r'node "cell" \(GRU\): --streaming runs one time step per run: '
                                              r"sequence_lens \[40, 12\]"):
        oi.import_onnx(stream, streaming=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_relu_activation_and_clip_match_onnxruntime(op):
    acts = {"RNN": ["Relu"], "GRU": ["Sigmoid", "Relu"], "LSTM": ["Sigmoid", "Relu", "Tanh"]}[op]
    model = _single(op, activations=acts, clip=0.75)
    x = np.random.default_rng(2).standard_normal((5, 2, 3)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        graph, oinf = oi.import_onnx(model).write(tmp)
        ex = oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()
        ex.insert(x=x)
        ex.run_step()
        got = ex.fetch("h")
    np.testing.assert_allclose(got, _onnxruntime(model, {"x": x})["h"], atol=1e-6, rtol=1e-5)


def test_cli_streaming_import(tmp_path, capsys):
    from openinfer.cli import main

    path = tmp_path / "kws.onnx"
    onnx.save(streamable_model(), str(path))
    assert main(["import", str(path), "-o", str(tmp_path / "out"), "--streaming"]) == 0
    text = (tmp_path / "out" / "kws.oig").read_text()
    assert "gru_GRU_h_state: f32[1, 48];" in text and "cache.write lstm_LSTM_c >> lstm_LSTM_c_state;" in text
    assert "// Sizevars (symbolic dims of the inputs): frames = 1" in text
