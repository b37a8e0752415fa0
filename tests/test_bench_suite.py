"""tools/bench/suite.py: its peers compute what OpenInfer computes (the ONNX mirrors and the NumPy
decoder against the OpenInfer reference interpreter, which tests/flagship checks against plain
NumPy), its check catches a peer that computes something else, and one small end-to-end run
writes consistent JSON. No timing is asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.compare import compare
from openinfer.dtypes import lookup
from openinfer.reference.executor import Reference
from openinfer.targets.devices import best_host_target

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "bench"))

import suite  # noqa: E402
import workloads  # noqa: E402

F32 = lookup("f32")


def reference_outputs(wl) -> list[dict]:
    ex = Reference(_model(wl), oi.graph(wl.graph)).make_executor()
    out = []
    for feeds in wl.feeds:
        ex.insert(**feeds)
        ex.run_step()
        out.append({n: ex.fetch(n) for n in wl.outputs})
    return out


_MODELS: dict[str, oi.ModelLoader] = {}


def _model(wl):
    if wl.name not in _MODELS:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="oi-bench-test-")) / "model.oinf"
        oi.write_oinf(path, tensors=wl.tensors, sizevars=wl.sizevars)
        _MODELS[wl.name] = oi.ModelLoader.open(path)
    return _MODELS[wl.name]


def run_pass(runner, wl) -> list[dict]:
    runner.reset()
    return [runner.step(f) for f in wl.feeds]


def assert_same(wl, got: list[dict], want: list[dict]):
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        terms = wl.terms(wl.feeds[step]) if wl.terms else {}
        for name in wl.outputs:
            c = compare(name, F32, w[name], np.asarray(g[name]), terms.get(name))
            assert c.ok, f"{wl.name} step {step}: {c.detail}"


def test_numpy_decoder_equals_the_reference_at_every_position():
    wl = workloads.decoder("test")
    assert_same(wl, run_pass(wl.numpy(), wl), reference_outputs(wl))


@pytest.mark.parametrize("row", ["gemm", "mlp", "decoder-test", "encoder", "cnn"])
def test_onnx_mirror_equals_the_reference(row, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import onnx

    wl = workloads.BUILDERS[row]()
    onnx.save(wl.onnx(), tmp_path / "model.onnx")
    runner = suite.Onnxruntime(wl, tmp_path, threads=1)
    assert_same(wl, run_pass(runner, wl), reference_outputs(wl))


def test_roofline_floor_is_the_larger_term():
    roof = {"copy_gbs": 20.0, "triad_gbs": 25.0, "fma_gflops": 100.0}
    mem = {"seconds": 0.02}
    suite.floors(mem, {"bytes": 250e6, "flops": 1e8}, roof)          # 250 MB / 25 GB/s = 10 ms > 1 ms
    assert mem["floor_bound"] == "memory"
    assert mem["floor_seconds"] == pytest.approx(0.01)
    assert mem["floor_fraction"] == pytest.approx(0.5)
    fma = {"seconds": 0.04}
    suite.floors(fma, {"bytes": 12e6, "flops": 2 * 1024.0 ** 3}, roof)
    assert fma["floor_bound"] == "fma"
    assert fma["floor_seconds"] == pytest.approx(2 * 1024.0 ** 3 / 100e9)


def test_stream_fraction_is_the_stream_bytes_at_the_floor_bandwidth():
    roof = {"copy_gbs": 20.0, "triad_gbs": 25.0, "read_gbs": 30.0, "fma_gflops": 100.0}
    r = {"seconds": 0.01, "stream_seconds": 0.005}
    suite.floors(r, {"bytes": 150e6, "flops": 1e8, "stream_bytes": 120e6}, roof)
    assert r["stream_fraction"] == pytest.approx(120e6 / 30e9 / 0.005)      # 0.8: the read is the best bandwidth
    out = {"threads": [1], "rows": [{"row": "decoder-i8", "results": [{"impl": "openinfer", "threads": 1, **r}]}]}
    (target,) = suite.targets(out)
    assert target["what"].startswith("decoder-i8, 1 thread(s): its GEMVs at >= 80%")
    assert target["met"] is (r["stream_fraction"] >= 0.8)


def test_every_row_with_a_peer_target_reports_it():
    """Issue 19's peer targets, one line per row and thread count (the CNN's was missing)."""
    rows = [{"row": row, "results": [{"impl": peer, "threads": 2, "vs_ours": want - 0.01}]}
            for row, peer, want in suite.TARGETS]
    found = [f for f in suite.targets({"threads": [2], "rows": rows}) if f["kind"] == "ratio"]
    assert [f["what"].split(",")[0] for f in found] == [row for row, _, _ in suite.TARGETS]
    assert all(f["met"] is False for f in found)
    assert {"gemm", "mlp", "decoder-bench", "encoder", "cnn"} <= {row for row, _, _ in suite.TARGETS}


@pytest.mark.parametrize("weights", ["i8", "i4"])
def test_quantized_decoder_rows_count_the_stored_bytes_of_their_matrices(weights):
    wl = workloads.decoder("test", weights=weights)
    model = _model(wl)
    dec = workloads.load_example("decoder")
    mats = [n for n in model.tensor_names if n.rsplit(".", 1)[-1] in dec.MATRICES]
    stored = {n: model.info(n).data_nbytes + model.info(n + "#scale").data_nbytes for n in mats}
    assert all(model.info(n).dtype.name == weights for n in mats)
    assert wl.stream_op == "dequant_matmul" and wl.stream_bytes == sum(stored.values())
    others = sum(model.info(n).data_nbytes for n in model.tensor_names if n not in stored)
    emb = model.info("tok_emb")
    assert wl.bytes == sum(stored.values()) + others - emb.data_nbytes + emb.data_nbytes // emb.shape[0]
    assert wl.onnx is None and wl.numpy is None


def test_stream_profile_charges_each_gemv_to_one_node(tmp_path, monkeypatch):
    """The test decoder with i8 matrices: seven GEMVs in the layer loop's body and the LM head, some
    of them fused with the op after them (on the AVX targets), each charged to a call that reported
    its time; their time is part of the step's."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    wl = workloads.decoder("test", weights="i8")
    ex = oi.Simulator(_model(wl), oi.graph(wl.graph), arch=best_host_target(), outputs=set(wl.outputs)).make_executor()
    got = suite.stream_profile(ex, wl, passes=2)
    assert got["stream_nodes"] == 8
    assert got["stream_seconds"] > 0 and 0 < got["stream_share"] < 1
    ex.reset()                                  # the observer is gone: steps run bare again
    ex.insert("token", wl.feeds[0]["token"])
    assert list(ex.iterate()) == []


def test_decoder_bytes_per_step_leave_out_the_embedding_table_but_one_row():
    dec = workloads.load_example("decoder")
    cfg = dec.SIZES["test"]
    wl = workloads.decoder("test")
    assert wl.bytes == cfg.weight_bytes() - cfg.vocab * cfg.dim * 4 + cfg.dim * 4


def test_end_to_end_run_checks_then_times_and_a_wrong_peer_fails_its_check(tmp_path):
    out = tmp_path / "results.json"
    work = tmp_path / "work"
    rc = suite.main(["--rows", "decoder-test", "--threads", "1", "--impls", "openinfer", "numpy", "--repeat", "5",
                     "--min-time", "0", "--no-install", "--work", str(work), "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    results = {r["impl"]: r for r in row["results"]}
    assert set(results) == {"openinfer", "numpy"}
    assert all(r["ok"] and r["seconds"] > 0 for r in results.values())
    assert results["numpy"]["vs_ours"] == pytest.approx(results["numpy"]["seconds"] / results["openinfer"]["seconds"])
    assert [t["what"].split(":")[0] for t in data["targets"]] == ["decoder-test, 1 thread(s)"]

    # a peer whose outputs differ from the reference's is reported failed and not timed
    expected = dict(np.load(work / "decoder-test" / "expected.npz"))
    expected["3:logits"] = expected["3:logits"] + 1.0
    np.savez(work / "decoder-test" / "expected.npz", **expected)
    args = suite.argparse.Namespace(arch=f"devices/{best_host_target()}.json", repeat=5, min_time=0.0)
    r = suite.worker("decoder-test", "numpy", 1, work / "decoder-test", args)
    assert not r["ok"] and "seconds" not in r and r["detail"].startswith("step 3: logits")
