"""Generated trees: golden sources, determinism across runs/dirs/PYTHONHASHSEED, only-if-changed
writes, relative paths, and the memory planner's sharing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import openinfer as oi
from openinfer import writetree
from openinfer.synth.memplan import plan
from openinfer.synthesizer import Synthesizer
from openinfer.writetree import PENDING_RENAMES

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
#: examples whose generated sources are stored and compared byte for byte
GOLDEN_EXAMPLES = ("mlp_regression", "residual_mlp_stack", "kv_cache_decode", "streaming_pipeline",
                   "cache_window_slice")
UPDATE = os.environ.get("OI_UPDATE_GOLDEN") == "1"


def generated(example, name: str, arch: str = "x86_64-generic") -> dict[str, bytes]:
    model, graph = example(name)
    return Synthesizer.from_arch(arch).synthesize(model, graph).files


@pytest.mark.parametrize("name", GOLDEN_EXAMPLES)
def test_golden_sources(example, name):
    """Generated sources equal tests/golden/<name>/ (OI_UPDATE_GOLDEN=1 rewrites them; review the diff)."""
    files = {k: v for k, v in generated(example, name).items() if not k.startswith("hal/")}
    folder = GOLDEN / name
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
    stored = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}
    assert sorted(stored) == sorted(files), "golden file set differs (OI_UPDATE_GOLDEN=1 to update)"
    for rel, data in files.items():
        assert stored[rel] == data, f"{name}/{rel} differs from the golden copy (OI_UPDATE_GOLDEN=1 to update)"


def test_generation_is_deterministic_across_processes_and_directories(tmp_path, example_models):
    script = (
        "import sys, openinfer as oi\n"
        "from openinfer.synthesizer import Synthesizer\n"
        "m = oi.ModelLoader.open(sys.argv[1]); g = oi.load_graph(sys.argv[2])\n"
        "Synthesizer.from_arch('x86_64-avx2').synthesize(m, g).emit(sys.argv[3])\n"
    )
    trees = []
    for seed, out in (("1", tmp_path / "a"), ("2", tmp_path / "deeper" / "b")):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
        subprocess.run([sys.executable, "-c", script, str(example_models / "linear_attention.oinf"),
                        str(REPO / "examples" / "linear_attention.oig"), str(out)], check=True, env=env)
        trees.append({p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert trees[0] == trees[1]


def test_regenerating_rewrites_nothing(tmp_path, example):
    model, graph = example("mlp_regression")
    synth = Synthesizer.from_arch("x86_64-generic")
    out = tmp_path / "out"
    first = synth.synthesize(model, graph).emit(out)
    assert first
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert synth.synthesize(model, graph).emit(out) == []
    assert mtimes == {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}


def test_generated_files_embed_no_absolute_paths(example, example_models):
    files = generated(example, "residual_mlp_stack")
    for rel, data in files.items():
        text = data.decode(errors="replace")
        for needle in (str(REPO), str(example_models), "/tmp/", "/home/", "/root/"):
            assert needle not in text, f"{rel} embeds {needle}"


def test_planner_shares_memory_between_short_lived_buffers():
    graph = oi.graph("""
        dynamic { x: f32[64]; }
        volatile { y: f32[64]; }
        block entry {
            assign t1: f32[64];
            assign t2: f32[64];
            assign t3: f32[64];
            op exp(x) >> t1;
            op exp(t1) >> t2;
            op exp(t2) >> t3;
            op exp(t3) >> y;
        }
    """)
    from openinfer.ir.bind import bind
    from openinfer.synth.lower import lower

    prog = lower(bind(graph, None, {}), name="chain")
    mem = plan(prog)
    offsets = {p.buffer.split("__")[-1]: p.offset for p in mem.placements.values()}
    # t1 and t3 never live at the same time: they share one slot; t2 overlaps both
    assert offsets["t1"] == offsets["t3"] != offsets["t2"]
    assert mem.arena_bytes - mem.pinned_bytes < mem.unshared_bytes
    assert "lifetime" in mem.table() and "#" in mem.diagram()


def test_outputs_option_lets_unobservable_volatiles_share(example):
    model, graph = example("linear_attention")
    synth = Synthesizer.from_arch("x86_64-generic")
    everything = synth.synthesize(model, graph).memory
    only_out = synth.synthesize(model, graph, outputs={"out"}).memory
    assert only_out.arena_bytes < everything.arena_bytes


def test_a_failing_write_leaves_the_previous_output(tmp_path, example, monkeypatch):
    """Inject a failure while the new files are being written: nothing of the old output changes
    and no temporary file stays behind."""
    model, graph = example("mlp_regression")
    out = tmp_path / "out"
    synth = Synthesizer.from_arch("x86_64-generic")
    synth.synthesize(model, graph).emit(out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = synth.synthesize(model, graph, outputs={"y"})        # a different plan: several files change
    real_fdopen = writetree.os.fdopen
    calls = {"n": 0}

    def failing_fdopen(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (injected)")
        return real_fdopen(*args, **kwargs)

    monkeypatch.setattr(writetree.os, "fdopen", failing_fdopen)
    with pytest.raises(OSError, match="injected"):
        other.emit(out)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


def test_killing_gen_midway_leaves_the_previous_output(tmp_path, example_models):
    """SIGKILL `gen` at several moments: killed while staging, the earlier output stays as it was;
    killed among the final renames, the journal it leaves lets the next `gen` finish them. Either
    way no file is ever half-written and the tree ends as one whole generation."""
    import signal
    import time

    graph = REPO / "examples" / "mlp_regression.oig"
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "openinfer", "gen", str(graph), "--model", str(example_models / "mlp_regression.oinf"),
           "--arch", "x86_64-generic", "--out", str(out)]
    reference_out = tmp_path / "after"
    subprocess.run(cmd[:-1] + [str(reference_out), "--outputs", "y"], check=True, env=env, capture_output=True)
    after = {out / p.relative_to(reference_out): p.read_bytes() for p in reference_out.rglob("*") if p.is_file()}
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert before != after
    for delay in (0.05, 0.2, 0.4, 0.8):
        proc = subprocess.Popen(cmd + ["--outputs", "y"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        journal = out / PENDING_RENAMES
        if proc.returncode != 0 and journal.exists():        # killed among the renames
            new = {p: (after[p] if p in after else p.read_bytes()) for p in before}
            for p in before:
                assert p.read_bytes() in (before[p], new[p]), f"killed after {delay} s: {p.name} is torn"
            subprocess.run(cmd + ["--outputs", "y"], check=True, env=env, capture_output=True)
            assert not journal.exists()
        files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and not p.name.endswith(".tmp")}
        if proc.returncode == 0 or files == after:
            assert files == after, f"killed after {delay} s: the output is not the new generation"
            before = files           # it finished (or was finished): that is the output now
        else:
            assert files == before, f"killed after {delay} s: the output changed"
        for leftover in out.rglob("*.tmp"):
            leftover.unlink()


def test_a_write_stopped_among_its_renames_is_finished_by_the_next(tmp_path, monkeypatch):
    """Deterministic version of the kill above: the process dies after the first of three renames.
    The journal is left; the next write_tree (of anything) first completes the old generation."""
    old = {"a.c": b"old a", "b.c": b"old b", "c.h": b"old c"}
    new = {"a.c": b"new a", "b.c": b"new b", "c.h": b"new c"}
    writetree.write_tree(tmp_path, old)
    real_replace, calls = os.replace, []

    class Killed(BaseException):
        pass

    def dying_replace(src, dst):
        calls.append(dst)
        if len(calls) == 3:                 # the journal, then the first file, then death
            raise Killed
        real_replace(src, dst)

    monkeypatch.setattr(writetree.os, "replace", dying_replace)
    with pytest.raises(Killed):
        writetree.write_tree(tmp_path, new)
    monkeypatch.setattr(writetree.os, "replace", real_replace)
    assert (tmp_path / PENDING_RENAMES).exists()
    assert [(tmp_path / n).read_bytes() for n in sorted(new)] == [b"new a", b"old b", b"old c"]
    writetree.write_tree(tmp_path, new)
    assert not (tmp_path / PENDING_RENAMES).exists()
    assert {n: (tmp_path / n).read_bytes() for n in new} == new
    assert not list(tmp_path.glob("*.tmp"))
