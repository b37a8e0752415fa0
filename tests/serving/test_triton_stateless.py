"""A stateless graph served by a real Triton: `openinfer gen --emit triton` on the MLP example
with a dynamic batch; HTTP and gRPC requests through tritonclient equal the reference, and
requests Triton batches together give what each gives alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from .conftest import EXAMPLES, REPO, emit_triton, example_model, needs_triton, random, reference_steps, start_server

GRAPH = EXAMPLES / "mlp_regression.oig"


@pytest.fixture(scope="module")
def server(scratch):
    needs_triton()
    model = example_model(scratch, "mlp_regression")
    repo = scratch / "repo"
    emit_triton(GRAPH, model, repo, "--dynamic", "B=64", "--triton-instances", "1", "--triton-batch-delay", "20000")
    with start_server(repo, scratch, "mlp_regression") as s:
        s.model = model
        yield s


def _expected(server, x):
    return reference_steps(GRAPH, server.model, [{"x": x}], {"B": x.shape[0]})[0]


def test_config_batches_along_the_dynamic_size(scratch, server):
    config = (scratch / "repo" / "mlp_regression" / "config.pbtxt").read_text()
    assert "max_batch_size: 64" in config
    assert "dynamic_batching { max_queue_delay_microseconds: 20000 }" in config
    assert re.search(r'name: "x" data_type: TYPE_FP32 dims: \[ 16 \]', config)
    assert re.search(r'name: "y" data_type: TYPE_FP32 dims: \[ 8 \]', config)


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_http_and_grpc_equal_the_reference(server, rows):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    x = random(np.random.default_rng(rows), (rows, 16))
    want = _expected(server, x)
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url)
        inp = module.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("mlp_regression", [inp], outputs=[module.InferRequestedOutput("y"),
                                                                   module.InferRequestedOutput("h")])
        for name in ("y", "h"):
            np.testing.assert_allclose(result.as_numpy(name), want[name], rtol=1e-5, atol=1e-5)


def _batch_counts(client) -> tuple[int, int]:
    """(requests, executions) the model has served so far (Triton's statistics)."""
    stats = client.get_inference_statistics("mlp_regression")["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])


def test_dynamic_batching_matches_single_requests(server):
    import tritonclient.http as httpclient

    rng = np.random.default_rng(5)
    xs = [random(rng, (rows, 16)) for rows in (1, 3, 2, 5, 1, 4, 2, 1, 6, 3, 1, 2) * 3]
    client = httpclient.InferenceServerClient(server.http_url, concurrency=len(xs))
    rows_before, runs_before = _batch_counts(client)
    pending = []
    for x in xs:
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        pending.append(client.async_infer("mlp_regression", [inp]))
    for x, p in zip(xs, pending, strict=True):
        np.testing.assert_allclose(p.get_result().as_numpy("y"), _expected(server, x)["y"], rtol=1e-5, atol=1e-5)
    rows, runs = _batch_counts(client)
    # the requests queued while one ran were run together: fewer steps than requests
    assert rows - rows_before == sum(x.shape[0] for x in xs)
    assert runs - runs_before < len(xs)


def test_bad_requests_get_clear_errors_and_the_model_keeps_serving(server):
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(server.http_url)

    def send(name, shape, dtype, data):
        inp = httpclient.InferInput(name, shape, dtype)
        inp.set_data_from_numpy(data)
        return client.infer("mlp_regression", [inp])

    cases = [("x", [2, 15], "FP32", np.zeros((2, 15), np.float32), "unexpected shape"),
             ("x", [2, 16], "INT32", np.zeros((2, 16), np.int32), "data-type"),
             ("z", [2, 16], "FP32", np.zeros((2, 16), np.float32), "unexpected inference input 'z'"),
             ("x", [65, 16], "FP32", np.zeros((65, 16), np.float32), "batch-size must be <= 64")]
    for name, shape, dtype, data, message in cases:
        with pytest.raises(InferenceServerException, match=re.escape(message)):
            send(name, shape, dtype, data)
    x = random(np.random.default_rng(9), (3, 16))
    np.testing.assert_allclose(send("x", [3, 16], "FP32", x).as_numpy("y"), _expected(server, x)["y"],
                               rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def bert(scratch):
    """BERT (tests/data/onnx) imported once, served with a dynamic batch and sequence length."""
    needs_triton()
    ort = pytest.importorskip("onnxruntime")
    import openinfer as oi

    onnx_path = REPO / "tests" / "data" / "onnx" / "bert.onnx"
    graph, oinf = oi.import_onnx(onnx_path, sizevars={"batch": 2, "seq": 8}).write(scratch / "bert")
    repo = scratch / "bert-repo"
    emit_triton(graph, oinf, repo, "--dynamic", "batch=4", "--dynamic", "seq=24", "--outputs", "last_hidden_state",
                "--triton-batch-delay", "20000")
    with start_server(repo, scratch / "bert", "bert") as s:
        s.session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        s.config = (repo / "bert" / "config.pbtxt").read_text()
        yield s


def _bert_inputs(rng, batch: int, seq: int) -> dict:
    mask = np.ones((batch, seq), np.int64)
    mask[1:, seq - seq // 3:] = 0
    return {"input_ids": rng.integers(0, 100, (batch, seq)).astype(np.int64), "attention_mask": mask}


def test_bert_batches_along_batch_with_a_variable_sequence(bert):
    assert "max_batch_size: 4" in bert.config
    assert re.search(r'name: "input_ids" data_type: TYPE_INT64 dims: \[ -1 \]', bert.config)
    assert re.search(r'name: "last_hidden_state" data_type: TYPE_FP32 dims: \[ -1, \d+ \]', bert.config)


@pytest.mark.parametrize("batch, seq", [(1, 7), (3, 13), (4, 24)])
def test_bert_over_http_and_grpc_equals_onnxruntime(bert, batch, seq):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    feed = _bert_inputs(np.random.default_rng(batch * seq), batch, seq)
    want = bert.session.run(["last_hidden_state"], feed)[0]
    for module, url in ((httpclient, bert.http_url), (grpcclient, bert.grpc_url)):
        inputs = []
        for name, value in feed.items():
            inp = module.InferInput(name, list(value.shape), "INT64")
            inp.set_data_from_numpy(value)
            inputs.append(inp)
        got = module.InferenceServerClient(url).infer("bert", inputs).as_numpy("last_hidden_state")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_bert_batched_requests_of_two_lengths_match_each_alone(bert):
    import tritonclient.http as httpclient

    rng = np.random.default_rng(8)
    feeds = [_bert_inputs(rng, rows, seq) for rows, seq in ((1, 5), (2, 11), (1, 11), (1, 5), (2, 5), (1, 11))]
    client = httpclient.InferenceServerClient(bert.http_url, concurrency=len(feeds))
    pending = []
    for feed in feeds:
        inputs = []
        for name, value in feed.items():
            inp = httpclient.InferInput(name, list(value.shape), "INT64")
            inp.set_data_from_numpy(value)
            inputs.append(inp)
        pending.append(client.async_infer("bert", inputs))
    for feed, p in zip(feeds, pending, strict=True):
        want = bert.session.run(["last_hidden_state"], feed)[0]
        np.testing.assert_allclose(p.get_result().as_numpy("last_hidden_state"), want, rtol=1e-4, atol=1e-4)


def test_bert_refuses_a_sequence_past_its_bound_and_a_missing_input(bert):
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(bert.http_url)
    feed = _bert_inputs(np.random.default_rng(1), 1, 25)

    def inputs(names):
        out = []
        for name in names:
            inp = httpclient.InferInput(name, list(feed[name].shape), "INT64")
            inp.set_data_from_numpy(feed[name])
            out.append(inp)
        return out

    with pytest.raises(InferenceServerException,
                       match=re.escape("dim 1 is 25, which sets the size seq: the program was built for seq in 1..24")):
        client.infer("bert", inputs(feed))
    with pytest.raises(InferenceServerException, match="expected 2 inputs but got 1"):
        client.infer("bert", inputs(["input_ids"]))
