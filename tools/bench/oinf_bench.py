"""Benchmark the .oinf reader and writer on a >= 1 GB file (not a test; run it by hand).

    python3 tools/bench/oinf_bench.py [OUT.json] [--model BIG.oinf] [--size-gb 1] [--dir DIR] [--keep]

Without --model it writes a model of four 256 MiB f32 tensors (1 GiB) into a temporary directory,
timing `write_oinf` (fsync included) against a plain `f.write` + fsync of the same bytes, each
repeated to a fresh file (VM disks are slow on the first write to new blocks), then measures:

- open: wall time and RSS growth of `ModelLoader.open` (only the tables should be read);
- read: one 256 MiB f32 tensor copied into a fresh array, `np.array(model.tensor(name))` (a fresh
  open each time), against `np.fromfile` of the same bytes; "cold" runs first evict the file from
  the page cache with posix_fadvise(DONTNEED) while nothing maps it (cold-ish: best effort), "warm"
  runs repeat at once.

It prints a table and writes the figures as JSON. The generated file is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openinfer.oinf import ModelLoader, write_oinf  # noqa: E402

MIB = 1 << 20
TENSOR_BYTES = 256 * MIB


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def evict(path: Path) -> None:
    """Ask the kernel to drop the file's cached pages (clean pages only; best effort)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def make_tensors(size_gb: float) -> dict[str, np.ndarray]:
    n = max(1, round(size_gb * (1 << 30) / TENSOR_BYTES))
    rng = np.random.default_rng(0)
    return {f"layer.{i}.w": rng.standard_normal(TENSOR_BYTES // 4, dtype=np.float32).reshape(-1, 4096)
            for i in range(n)}


def plain_write(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The baseline: the same bytes written with f.write + fsync, no format, no checks."""
    with open(path, "wb") as f:
        for a in tensors.values():
            f.write(memoryview(a).cast("B"))
        f.flush()
        os.fsync(f.fileno())


def bench_write(path: Path, tensors: dict[str, np.ndarray], reps: int) -> dict:
    """write_oinf and the plain baseline, alternately, each to a fresh file (the last .oinf stays)."""
    runs: dict[str, list[float]] = {"write_oinf": [], "plain": []}
    for _ in range(reps):
        for label in ("plain", "write_oinf"):
            path.unlink(missing_ok=True)
            if label == "plain":
                _, seconds = timed(lambda: plain_write(path, tensors))
            else:
                _, seconds = timed(lambda: write_oinf(path, tensors, {"D": 4096}, {"note": "bench"}))
            runs[label].append(path.stat().st_size / seconds / 1e9)
    return {"bytes": path.stat().st_size, "gb_per_s": runs, **{f"{k}_median_gb_per_s": float(np.median(v))
                                                                 for k, v in runs.items()}}


def bench_read(path: Path, reps: int) -> dict:
    """Copy the largest tensor into a fresh array: via the model (mmap view) and via np.fromfile."""
    with ModelLoader.open(path) as model:
        name = max(model.tensor_names, key=lambda n: model.info(n).data_nbytes)
        info = model.info(name)
    if info.dtype.name != "f32":
        raise SystemExit(f"the largest tensor {name!r} is {info.dtype.name}; the read benchmark wants f32")

    def oinf_read():
        with ModelLoader.open(path) as model:
            view = model.tensor(name)
            out = np.array(view)
            del view                      # so close() can unmap and the next eviction is real
        return out

    def numpy_read():
        return np.fromfile(path, dtype=np.float32, count=info.numel, offset=info.data_offset)

    out: dict = {"tensor": name, "bytes": info.data_nbytes}
    for label in ("np.fromfile", "oinf"):
        out[label] = {"cold_gb_per_s": [], "warm_gb_per_s": []}
    for _ in range(reps):
        for label, fn in (("np.fromfile", numpy_read), ("oinf", oinf_read)):
            evict(path)                   # cold-ish: nothing maps the file now, its pages are dropped
            first, cold = timed(fn)
            second, warm = timed(fn)
            assert np.array_equal(first[:4096], second[:4096])
            del first, second
            out[label]["cold_gb_per_s"].append(info.data_nbytes / cold / 1e9)
            out[label]["warm_gb_per_s"].append(info.data_nbytes / warm / 1e9)
    for label in ("np.fromfile", "oinf"):
        for kind in ("cold", "warm"):
            out[label][f"{kind}_median_gb_per_s"] = float(np.median(out[label][f"{kind}_gb_per_s"]))
    with ModelLoader.open(path) as model:
        _, seconds = timed(lambda: model.tensor(name))
    out["view_only_s"] = seconds
    return out


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, default=Path("build/bench/oinf_bench.json"),
                    help="where to write the JSON figures (default: %(default)s)")
    ap.add_argument("--model", type=Path, help="an existing .oinf (>= 1 GB) to measure instead of generating one")
    ap.add_argument("--size-gb", type=float, default=1.0, help="size of the generated model (default: 1)")
    ap.add_argument("--dir", type=Path, help="where to generate the model (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the generated model")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (default: 3)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="oinf_bench_", dir=args.dir))
    path = args.model or work / "bench.oinf"
    results: dict = {"machine": machine()}
    try:
        if args.model is None:
            results["write"] = bench_write(path, make_tensors(args.size_gb), args.reps)
        results["file_bytes"] = path.stat().st_size
        evict(path)
        before = rss()
        model, seconds = timed(lambda: ModelLoader.open(path))
        results["open"] = {"seconds": seconds, "rss_growth_bytes": rss() - before,
                           "n_tensors": len(model.tensor_names)}
        model.close()
        results["read"] = bench_read(path, args.reps)
    finally:
        if args.model is None and not args.keep:
            path.unlink(missing_ok=True)
            work.rmdir()

    def runs(values: list[float]) -> str:
        return f"median {np.median(values):.2f} GB/s (runs: {', '.join(f'{v:.2f}' for v in values)})"

    rows = [("file size", f"{results['file_bytes'] / 1e9:.3f} GB")]
    if "write" in results:
        rows.append(("write: write_oinf (fsync incl.)", runs(results["write"]["gb_per_s"]["write_oinf"])))
        rows.append(("write: plain f.write + fsync", runs(results["write"]["gb_per_s"]["plain"])))
    o = results["open"]
    rows.append(("open (cold cache)", f"{o['seconds'] * 1e3:.2f} ms, RSS +{o['rss_growth_bytes'] / MIB:.2f} MiB"))
    r = results["read"]
    for label in ("oinf", "np.fromfile"):
        for kind in ("cold", "warm"):
            rows.append((f"read 256 MiB f32, {label}, {kind}", runs(r[label][f"{kind}_gb_per_s"])))
    rows.append(("tensor() view, no copy", f"{r['view_only_s'] * 1e6:.1f} us"))
    width = max(len(k) for k, _ in rows)
    print(f"machine: {results['machine']['cpu']} ({results['machine']['cores']} cores), "
          f"numpy {results['machine']['numpy']}")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
