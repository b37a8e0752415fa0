"""`openinfer generate` (openinfer/generate.py): the LLaMA-shaped decoder of examples/decoder.py
generates, greedily, the ids a plain NumPy decoder chooses (tests/flagship/test_decoder.py's,
independent of OpenInfer), on the reference and on generated C; sampling is reproducible; a
generation that would overflow the cache is refused before it starts."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from example_modules import load_example
from flagship.test_decoder import NumpyDecoder

import openinfer as oi
from openinfer.errors import OpenInferError
from openinfer.generate import Sampling, choose, generate, roles_of
from openinfer.reference.executor import Reference
from openinfer.targets.devices import best_host_target

decoder = load_example("decoder")
CFG = decoder.SIZES["test"]
PROMPT = [3, 1, 4, 1, 5]
NEW = CFG.max_seq - len(PROMPT) + 1          # up to the cache's capacity


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return decoder.write(CFG, tmp_path_factory.mktemp("decoder"))


@pytest.fixture(scope="module")
def numpy_ids(files):
    _, model_path = files
    model = oi.ModelLoader.open(model_path)
    ref = NumpyDecoder({k: model.tensor(k) for k in model.tensor_names}, CFG)
    for token in PROMPT[:-1]:
        ref.step(token)
    ids = [ref.step(PROMPT[-1])[1]]
    while len(ids) < NEW:
        ids.append(ref.step(ids[-1])[1])
    return ids


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openinfer", "generate", *args], capture_output=True, text=True)


def test_roles_come_from_the_model_metadata(files):
    graph, model_path = files
    model = oi.ModelLoader.open(model_path)
    bound = Reference(model, oi.load_graph(graph)).make_executor().bound
    roles = roles_of(bound, model.metadata)
    assert (roles.token_input, roles.logits, roles.capacity) == ("token", "logits", CFG.max_seq)
    assert roles_of(bound, {}).capacity == CFG.max_seq         # inferred: the tables' @fixed position index


def test_greedy_ids_equal_a_numpy_decoder_on_the_reference(files, numpy_ids):
    graph, model_path = files
    model = oi.ModelLoader.open(model_path)
    executor = Reference(model, oi.load_graph(graph)).make_executor()
    result = generate(executor, roles_of(executor.bound, model.metadata), PROMPT, NEW)
    assert list(result.ids) == numpy_ids
    assert len(set(numpy_ids)) > 3          # the ids are not one repeated token: the test can fail


@pytest.mark.parametrize("arch", sorted({"x86_64-generic", best_host_target()}))
def test_cli_json_on_generated_c_equals_the_numpy_decoder(files, numpy_ids, arch, tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    graph, model_path = files
    run = _cli(str(graph), "-m", str(model_path), "--arch", f"devices/{arch}.json",
               "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", str(NEW), "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["ids"] == numpy_ids and out["tokens_per_s"] > 0


def test_cli_text_on_the_reference(files, numpy_ids):
    graph, model_path = files
    run = _cli(str(graph), "-m", str(model_path), "--prompt-ids", ",".join(map(str, PROMPT)),
               "--max-new-tokens", "4")
    assert run.returncode == 0, run.stderr
    assert f"new ids: {' '.join(map(str, numpy_ids[:4]))}\n" in run.stdout
    assert "tokens/s (reference)" in run.stdout


def test_overflowing_the_cache_is_refused_before_any_step(files):
    graph, model_path = files
    run = _cli(str(graph), "-m", str(model_path), "--prompt-ids", ",".join(map(str, PROMPT)),
               "--max-new-tokens", str(NEW + 1))
    assert run.returncode == 1
    assert f"need {CFG.max_seq + 1} cache rows, more than its capacity {CFG.max_seq}" in run.stderr


def test_bad_arguments_are_clear_errors(files):
    graph, model_path = files
    assert "expected comma-separated integers" in _cli(str(graph), "-m", str(model_path), "--prompt-ids", "1,x").stderr
    assert "`nope` is not a variable" in _cli(str(graph), "-m", str(model_path), "--prompt-ids", "1",
                                               "--logits", "nope").stderr
    with pytest.raises(OpenInferError, match="temperature"):
        Sampling(temperature=-1.0)


def test_sampling_is_reproducible_and_top_k_1_is_greedy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=50)
    draws = [choose(logits, Sampling(1.0, 5, 7), np.random.default_rng(7)) for _ in range(3)]
    assert len(set(draws)) == 1 and draws[0] in np.argsort(-logits)[:5]
    assert choose(logits, Sampling(0.7, 1), np.random.default_rng(1)) == int(np.argmax(logits))
    spread = {choose(logits, Sampling(5.0, 0), r) for r in [np.random.default_rng(s) for s in range(40)]}
    assert len(spread) > 5                   # a high temperature samples widely
