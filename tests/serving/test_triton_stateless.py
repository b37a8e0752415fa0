"""A stateless graph served by a real Triton: `openinfer gen --emit triton` on the MLP example
with a dynamic batch; HTTP and gRPC requests through tritonclient equal the reference, and
requests Triton batches together give what each gives alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from .conftest import EXAMPLES, emit_triton, example_model, needs_triton, random, reference_steps, start_server

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
