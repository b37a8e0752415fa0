"""Graphs with persistent state served by a real Triton through the sequence batcher: each
sequence keeps its own program context (interleaved streams equal each run alone on the
reference), END and idle release free it, sequences beyond the slots wait in the backlog."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from .conftest import EXAMPLES, REPO, emit_triton, example_model, needs_triton, random, reference_steps, start_server

ONLINE = EXAMPLES / "online_weight_update.oig"


@pytest.fixture(scope="module")
def server(scratch):
    needs_triton()
    online = example_model(scratch, "online_weight_update")
    subprocess.run([sys.executable, str(EXAMPLES / "decoder.py"), "--size", "test", "--out", str(scratch / "dec")],
                   check=True, capture_output=True, cwd=REPO)
    repo = scratch / "repo"
    emit_triton(ONLINE, online, repo)                                   # the defaults: 4 sequences, 60 s
    emit_triton(ONLINE, online, repo, "--name", "online_two", "--triton-sequences", "2")
    emit_triton(ONLINE, online, repo, "--name", "online_idle", "--triton-idle", "1")
    decoder = scratch / "dec" / "decoder_test"
    emit_triton(decoder.with_suffix(".oig"), decoder.with_suffix(".oinf"), repo, "--outputs", "next,logits")
    with start_server(repo, scratch, "online_weight_update", "online_two", "online_idle", "decoder_test") as s:
        s.online, s.decoder = online, decoder
        yield s


def _client(server):
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(server.http_url, concurrency=8)


def _inputs(feed: dict):
    import tritonclient.http as httpclient

    out = []
    for name, value in feed.items():
        dtype = {np.float32: "FP32", np.int32: "INT32"}[value.dtype.type]
        inp = httpclient.InferInput(name, list(value.shape), dtype)
        inp.set_data_from_numpy(value)
        out.append(inp)
    return out


def _online_feeds(seed: int, steps: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": random(rng, (4, 16)), "delta": random(rng, (16, 8)) * 0.1} for _ in range(steps)]


def test_config_uses_the_sequence_batcher(scratch, server):
    config = (scratch / "repo" / "online_weight_update" / "config.pbtxt").read_text()
    assert "max_batch_size: 0" in config and "oldest { max_candidate_sequences: 4 }" in config
    assert "max_sequence_idle_microseconds: 60000000" in config
    assert re.search(r'name: "x" data_type: TYPE_FP32 dims: \[ 4, 16 \]', config)


def test_interleaved_sequences_keep_their_own_state(server):
    client = _client(server)
    streams = {101: _online_feeds(1, 5), 202: _online_feeds(2, 5), 303: _online_feeds(3, 5)}
    got = {cid: [] for cid in streams}
    for step in range(5):
        for cid, feeds in streams.items():
            r = client.infer("online_weight_update", _inputs(feeds[step]), sequence_id=cid,
                             sequence_start=step == 0, sequence_end=step == 4)
            got[cid].append(r.as_numpy("y"))
    for cid, feeds in streams.items():
        want = reference_steps(ONLINE, server.online, feeds)
        for step, y in enumerate(got[cid]):
            np.testing.assert_allclose(y, want[step]["y"], rtol=1e-5, atol=1e-5, err_msg=f"sequence {cid} step {step}")
    # each step's y depends on the sequence's past deltas: the streams differ from step 1 on
    assert not np.allclose(got[101][1], reference_steps(ONLINE, server.online, [streams[101][1]])[0]["y"])


def test_end_frees_the_context_and_a_new_start_begins_afresh(server):
    from tritonclient.utils import InferenceServerException

    client = _client(server)
    feeds = _online_feeds(7, 3)
    client.infer("online_weight_update", _inputs(feeds[0]), sequence_id=77, sequence_start=True)
    client.infer("online_weight_update", _inputs(feeds[1]), sequence_id=77, sequence_end=True)
    assert server.wait_for_log("sequence 77 ended: its context freed")
    with pytest.raises(InferenceServerException, match="must specify the START flag"):
        client.infer("online_weight_update", _inputs(feeds[2]), sequence_id=77)
    again = client.infer("online_weight_update", _inputs(feeds[2]), sequence_id=77, sequence_start=True)
    np.testing.assert_allclose(again.as_numpy("y"), reference_steps(ONLINE, server.online, [feeds[2]])[0]["y"],
                               rtol=1e-5, atol=1e-5)


def test_sequences_beyond_the_slots_wait_in_the_backlog(server):
    from tritonclient.utils import InferenceServerException

    client = _client(server)
    feeds = _online_feeds(11, 2)
    for cid in (1, 2):
        client.infer("online_two", _inputs(feeds[0]), sequence_id=cid, sequence_start=True)
    third = client.async_infer("online_two", _inputs(feeds[0]), sequence_id=3, sequence_start=True)
    with pytest.raises(InferenceServerException, match="failed to obtain inference response"):
        third.get_result(timeout=1)                 # not run: both slots are taken
    client.infer("online_two", _inputs(feeds[1]), sequence_id=1, sequence_end=True)
    y3 = third.get_result(timeout=30).as_numpy("y")  # the freed slot takes it
    np.testing.assert_allclose(y3, reference_steps(ONLINE, server.online, [feeds[0]])[0]["y"], rtol=1e-5, atol=1e-5)
    for cid in (2, 3):
        client.infer("online_two", _inputs(feeds[1]), sequence_id=cid, sequence_end=True)


def test_an_idle_sequence_is_released_and_its_context_freed(server):
    from tritonclient.utils import InferenceServerException

    client = _client(server)
    feeds = _online_feeds(13, 2)
    client.infer("online_idle", _inputs(feeds[0]), sequence_id=55, sequence_start=True)
    assert server.wait_for_log("sequence 55 idle for 1 s: its context freed (0 live)")
    with pytest.raises(InferenceServerException, match="must specify the START flag"):
        client.infer("online_idle", _inputs(feeds[1]), sequence_id=55)


def test_bad_sequence_requests_get_errors_and_the_instance_keeps_serving(server):
    from tritonclient.utils import InferenceServerException

    client = _client(server)
    feeds = _online_feeds(17, 1)
    with pytest.raises(InferenceServerException, match="correlation ID"):
        client.infer("online_weight_update", _inputs(feeds[0]))
    with pytest.raises(InferenceServerException, match="must specify the START flag"):
        client.infer("online_weight_update", _inputs(feeds[0]), sequence_id=999)
    bad = {"x": feeds[0]["x"][:3], "delta": feeds[0]["delta"]}
    with pytest.raises(InferenceServerException, match="unexpected shape"):
        client.infer("online_weight_update", _inputs(bad), sequence_id=998, sequence_start=True)
    ok = client.infer("online_weight_update", _inputs(feeds[0]), sequence_id=998, sequence_start=True,
                      sequence_end=True)
    np.testing.assert_allclose(ok.as_numpy("y"), reference_steps(ONLINE, server.online, [feeds[0]])[0]["y"],
                               rtol=1e-5, atol=1e-5)


def test_decoder_streams_equal_the_reference(server):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    rng = np.random.default_rng(21)
    prompts = {11: rng.integers(0, 64, 9).astype(np.int32), 12: rng.integers(0, 64, 9).astype(np.int32)}
    got = {cid: [] for cid in prompts}
    for step in range(9):
        for cid, tokens in prompts.items():
            inp = grpcclient.InferInput("token", [1], "INT32")
            inp.set_data_from_numpy(tokens[step:step + 1])
            r = client.infer("decoder_test", [inp], sequence_id=cid, sequence_start=step == 0, sequence_end=step == 8)
            got[cid].append((r.as_numpy("next"), r.as_numpy("logits")))
    graph, model = server.decoder.with_suffix(".oig"), server.decoder.with_suffix(".oinf")
    for cid, tokens in prompts.items():
        want = reference_steps(graph, model, [{"token": tokens[s:s + 1]} for s in range(9)])
        for step, (nxt, logits) in enumerate(got[cid]):
            np.testing.assert_allclose(logits, want[step]["logits"], rtol=1e-4, atol=1e-4)
            assert nxt.tolist() == want[step]["next"].tolist(), f"sequence {cid} step {step}"
