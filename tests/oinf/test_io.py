"""Atomic writes (the destination is never left half-written) and lazy opening (tables only)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from openinfer import OinfError
from openinfer.oinf import ModelLoader, TensorSpec, reader, write_oinf, writer

OLD = b"previous contents"


def leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def dest(tmp_path):
    path = tmp_path / "model.oinf"
    path.write_bytes(OLD)
    return path


def test_invalid_input_leaves_destination_untouched(dest):
    with pytest.raises(OinfError):
        write_oinf(dest, {"x": TensorSpec([99], "i4")})
    assert dest.read_bytes() == OLD and leftovers(dest.parent) == []


def test_failure_mid_write_removes_the_temp_file(dest, monkeypatch):
    """The payload conversion fails after part of the file is on disk."""
    monkeypatch.setattr(writer, "CHUNK_ELEMENTS", 64)
    calls = []
    real = writer.numerics.to_storage

    def flaky(values, dtype):
        calls.append(len(values))
        if len(calls) == 5:
            raise RuntimeError("disk on fire")
        return real(values, dtype)

    monkeypatch.setattr(writer.numerics, "to_storage", flaky)
    seen = []
    real_emit = writer._write_tensor

    def spy(f, t):
        seen.append(f.tell())                    # bytes already written when the payload starts
        return real_emit(f, t)

    monkeypatch.setattr(writer, "_write_tensor", spy)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_oinf(dest, {"a": np.ones(10, np.float32), "b": TensorSpec(np.arange(1000.0), "bf16")})
    assert seen and seen[-1] > 0 and len(calls) == 5
    assert dest.read_bytes() == OLD and leftovers(dest.parent) == []


def test_fsync_failure_and_interrupt(dest, monkeypatch):
    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, "fsync", broken_fsync)
    with pytest.raises(OinfError, match="No space left on device"):
        write_oinf(dest, {"a": np.ones(4)})
    assert dest.read_bytes() == OLD and leftovers(dest.parent) == []
    monkeypatch.undo()

    def interrupted(f, t):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "_write_tensor", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_oinf(dest, {"a": np.ones(4)})
    assert dest.read_bytes() == OLD and leftovers(dest.parent) == []


def test_new_file_is_created_whole_with_normal_permissions(tmp_path):
    path = tmp_path / "new.oinf"
    write_oinf(path, {"a": np.ones(4, np.float32)})
    mode = stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask and leftovers(tmp_path) == []


def test_unwritable_destination(tmp_path):
    with pytest.raises(OinfError, match="cannot create a file"):
        write_oinf(tmp_path / "no" / "such" / "dir.oinf", {"a": np.ones(1)})
    (tmp_path / "d.oinf").mkdir()
    with pytest.raises(OinfError, match="cannot write"):
        write_oinf(tmp_path / "d.oinf", {"a": np.ones(1)})
    assert leftovers(tmp_path) == []


@pytest.fixture(scope="module")
def big_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.oinf"
    write_oinf(path, {"w": np.ones((4096, 4096), np.float32), "v": np.arange(1000, dtype=np.float32)},
               {"B": 1}, {"note": "lazy", "ids": [1, 2, 3]})
    return path


def test_open_reads_only_header_tables_and_metadata(big_model, monkeypatch):
    reads = []
    real = reader._Parser.take

    def counting(self, off, n, *args):
        reads.append((off, n))
        return real(self, off, n, *args)

    monkeypatch.setattr(reader._Parser, "take", counting)
    with ModelLoader.open(big_model) as m:
        h = m.header
        meta = [(i.value_offset, i.value_offset + i.value_nbytes) for i in m.metadata_infos.values()]
        tensor_ranges = [(i.data_offset, i.data_offset + i.data_nbytes) for i in m.tensor_infos.values()]
    assert reads
    for off, n in reads:
        inside_tables = off + n <= h.offset_data
        inside_meta = any(a <= off and off + n <= b for a, b in meta)
        assert inside_tables or inside_meta, (off, n)
        assert not any(off < b and a < off + n for a, b in tensor_ranges)
    assert sum(n for _, n in reads) < 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_open_does_not_touch_tensor_pages(big_model):
    before = _rss()
    m = ModelLoader.open(big_model)
    grown_open = _rss() - before
    w = m.tensor("w")
    grown_view = _rss() - before
    total = float(w.sum(dtype=np.float64))           # now the 64 MB are really read
    grown_read = _rss() - before
    assert total == 4096 * 4096
    assert grown_open < 4 * 2**20 and grown_view < 4 * 2**20
    assert grown_read > 48 * 2**20                    # the measurement does see mapped pages
    del w
    m.close()


def test_quant_keys_read_scales_and_zero_points_in_place(tmp_path):
    from openinfer import QuantParams

    scales, zps = np.array([0.5, 0.25, 2.0], np.float32), np.array([1, -2, 3], np.int32)
    path = tmp_path / "q.oinf"
    write_oinf(path, {"a": TensorSpec(np.zeros((2, 3), np.int8), quant=QuantParams.per_channel(1, scales, zps)),
                      "b": TensorSpec(np.zeros(4, np.int8), quant=QuantParams.per_tensor(0.125)),
                      "c": np.ones(2, np.float32)})
    m = ModelLoader.open(path)
    assert m.quant_keys == ["a#scale", "a#zero_point", "b#scale"]
    assert m.tensor_names == ["a", "b", "c"]
    np.testing.assert_array_equal(m.tensor("a#scale"), scales)
    np.testing.assert_array_equal(m.tensor("a#zero_point"), zps)
    np.testing.assert_array_equal(m.tensor("b#scale"), [0.125])
    info = m.info("a#zero_point")
    assert (info.dtype.name, info.shape) == ("i32", (3,))
    raw = path.read_bytes()
    assert raw[info.data_offset:info.data_offset + info.data_nbytes] == zps.tobytes()
    for missing in ("b#zero_point", "c#scale", "a#bias", "a#", "#scale"):
        with pytest.raises(OinfError, match="no tensor named"):
            m.info(missing)


_PAUSED_WRITER = r"""
import os, sys, time
import numpy as np
import openinfer.oinf.writer as writer
def pause(fd):                      # the whole file is in the temporary: stop here until killed
    print("written", flush=True)
    time.sleep(120)
writer.os.fsync = pause
writer.write_oinf(sys.argv[1], {"w": np.ones(1 << 22, np.float32)})     # 16 MiB
"""


def _start_paused_writer(path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _PAUSED_WRITER, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.stdout.readline() == "written\n"
    return proc


def test_a_writer_killed_mid_write_leaves_no_temporary_after_the_next_write(tmp_path):
    """kill -9 during a write leaves its temporary (nothing can remove it then); the next write of
    that path removes it, and leaves alone a live writer's and other paths' temporaries."""
    import signal

    path = tmp_path / "m.oinf"
    other = tmp_path / "m.oinf.7"
    killed = _start_paused_writer(path)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    live_other = _start_paused_writer(other)      # a live writer of another path whose name extends this one
    try:
        stale = leftovers(tmp_path)
        assert len(stale) == 2 and any(n.startswith(f".m.oinf.{killed.pid}.") for n in stale)
        assert (tmp_path / next(n for n in stale if f".{killed.pid}." in n)).stat().st_size > 16 << 20
        write_oinf(path, {"a": np.arange(3, dtype=np.int32)})
        assert leftovers(tmp_path) == [n for n in stale if f".{live_other.pid}." in n]
        with ModelLoader.open(path) as m:
            assert m.tensor("a").tolist() == [0, 1, 2]
    finally:
        live_other.kill()
        live_other.wait()
    write_oinf(other, {"a": np.ones(1)})        # now its writer is gone too
    assert leftovers(tmp_path) == []


def test_a_live_writers_temporary_is_not_removed(tmp_path):
    path = tmp_path / "m.oinf"
    writer = _start_paused_writer(path)
    try:
        mine = leftovers(tmp_path)
        write_oinf(path, {"a": np.ones(2)})      # a concurrent write of the same path
        assert leftovers(tmp_path) == mine
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize("shape, match", [
    ((0, 2**64 - 1), r"too large \(the product of its non-zero dims must be below 2\^58\)"),
    ((2**30, 2**28), "too large"),
    ((1,) * 9, "9 dims; at most 8 are supported"),
])
def test_writer_refuses_shapes_the_readers_refuse(tmp_path, shape, match):
    """A shape the verifier (and the C loader) rejects is never written: nothing is left at the path."""
    from openinfer.oinf import UninitializedTensor

    path = tmp_path / "m.oinf"
    with pytest.raises(OinfError, match=match):
        write_oinf(path, tensors={"t": UninitializedTensor("f32", shape)})
    assert list(tmp_path.iterdir()) == []
    write_oinf(path, tensors={"t": UninitializedTensor("f32", (0, 2**57))})       # the largest class accepted
    assert ModelLoader.open(path).info("t").shape == (0, 2**57)
