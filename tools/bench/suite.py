"""OpenInfer benchmark suite: the generated C library against its peers, side by side in one run.

    python tools/bench/suite.py [--out results.json] [--threads 1 2] [--repeat 5]
        [--rows gemm mlp decoder-test decoder-bench decoder-i8 decoder-i4 encoder cnn roofline]
        [--arch DEVICE.json]

Rows (tools/bench/workloads.py defines each once for every implementation and says exactly what
is compared): gemm (1024^3), mlp (1024->4096->1024), decoder-test and decoder-bench (one decode
step of examples/decoder.py with its KV cache), decoder-i8 and decoder-i4 (decoder-bench with
int8 / int4 matrices: OpenInfer against its floor, and its dequant_matmul nodes, timed by a
per-node profile, against the bytes of their matrices), encoder (examples/encoder.py at seq 128),
cnn (examples/cnn.py), and roofline: the machine's STREAM bandwidth and f32 FMA peak in the
descriptor's vector registers (the AVX2 peak for the AVX2 descriptor on an AVX-512 host;
tools/bench/roofline.py, measured at the start and at the end, the best kept), against which
every result gets its floor, max(bytes / bandwidth, FLOPs / FMA peak) at the same thread count,
bandwidth being the best of STREAM copy, triad and a multi-stream read (the weight-streaming
pattern). A row whose bytes per step are within twice the last-level cache (marked *) can beat
its DRAM floor.

Implementations: openinfer (the library generated for --arch, through the cffi executor: insert,
run_step, fetch; bind for inputs and outputs of 64 KiB or more, read and written in place as the
peers do; `raw` also times the bare set() or bind() + step() calls), numpy (gemm, mlp, decoder),
onnxruntime (the same graph built with onnx.helper), iree (that ONNX graph imported and compiled
for llvm-cpu, run on local-task) and torch (gemm, mlp; only if already installed). onnx and
onnxruntime, and iree-base-compiler + iree-base-runtime, are pip-installed into this interpreter
when missing (--no-install: never); a peer that does not install, import or compile is reported
"not available" with the reason.

Before any timing, each (implementation, row) runs one pass on the same inputs and its outputs
must equal the OpenInfer reference interpreter's (openinfer.compare tolerances); a failing one is
not timed, so the table never compares different computations. Every (implementation, thread
count) then runs in a child process of its own, its thread counts fixed before the libraries load
(OI_NUM_THREADS, OPENBLAS_NUM_THREADS/OMP_NUM_THREADS, onnxruntime's intra-op threads, IREE's task
topology, torch.set_num_threads), so no spinning pool of one implementation competes with
another. A figure is the best over --repeat runs (at least 5) of the mean per-step time of one run
of >= --min-time seconds (whole passes; a decoder pass is max_seq steps from an empty cache).
Ratios are peer time / openinfer time at the same thread count (> 1: OpenInfer is faster).

Prints the table (with the machine: CPU model, cores, load average) and the targets, writes the
JSON to --out; progress goes to stderr. Exit status 1 if a check failed or OpenInfer did not run
(a peer that crashes is reported, not fatal).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import REPO

ROWS = ["gemm", "mlp", "decoder-test", "decoder-bench", "decoder-i8", "decoder-i4", "encoder", "cnn", "roofline"]
IMPLS = ["openinfer", "numpy", "onnxruntime", "iree", "torch"]
OURS = "openinfer"
# (row, peer, minimum peer-time / our-time) and (row, minimum fraction of the roofline floor)
TARGETS = [("gemm", "numpy", 1.0), ("mlp", "onnxruntime", 1.2), ("decoder-test", "onnxruntime", 1.2),
           ("decoder-bench", "onnxruntime", 1.2), ("encoder", "onnxruntime", 1.0), ("cnn", "onnxruntime", 1.0)]
FLOOR_TARGETS = [("decoder-bench", 0.9)]
#: (row, minimum fraction of the bandwidth floor of its streaming nodes alone: workloads' stream_op)
STREAM_TARGETS = [("decoder-i8", 0.8)]
#: passes of the per-node profile of a row with a stream_op (the best pass kept)
PROFILE_PASSES = 5
#: Ours binds inputs and outputs of this many bytes or more (their copies show beside a 1024^3 GEMM)
BIND_BYTES = 1 << 16
_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[suite {time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- child processes
class Ours:
    def __init__(self, wl, work: Path, arch: str):
        import numpy as np

        import openinfer as oi
        from openinfer.numerics import storage_dtype, to_storage
        from openinfer.reference.executor import coerce

        # only the outputs are observable (as the peers return only theirs): the memory plan may
        # reuse the other buffers, and reshapes may be views
        self.ex = oi.Simulator(oi.ModelLoader.open(work / "model.oinf"), oi.graph(wl.graph),
                               arch=arch, outputs=set(wl.outputs)).make_executor()
        self.outputs, sim = wl.outputs, self.ex.sim
        # Inputs and outputs of BIND_BYTES or more live in the caller's arrays (bind(): no copy in or
        # out, as numpy and onnxruntime read their inputs in place): each step binds the feed
        # arrays and fresh output arrays (the peers return fresh ones too); smaller ones are
        # inserted and fetched. The library says what it can bind: a refusal keeps the copies.
        self.bind_in, self.bind_out, self.empty = set(), {}, np.empty
        for name, value in wl.feeds[0].items():
            if np.asarray(value).nbytes >= BIND_BYTES and self._bindable(name, np.array(value)):
                self.bind_in.add(name)
        for name in self.outputs:
            info = sim.vars[name]
            out = np.empty(info.shape, storage_dtype(info.dtype) or np.uint8)
            if out.nbytes >= BIND_BYTES and self._bindable(name, out):
                self.bind_out[name] = (out.shape, out.dtype)
        # the bare C calls: set() (bind() where step() binds) each input of a step from a prepared
        # buffer, then step()
        self.raw_feeds = []
        for feeds in wl.feeds:
            bufs = [(k, sim.vars[k].id, to_storage(coerce(sim.bound.vars[k], v), sim.vars[k].dtype)) for k, v in
                    feeds.items()]
            self.raw_feeds.append([(self.ex.link.fn["bind" if k in self.bind_in else "set"], i,
                                    self.ex.link.ffi.from_buffer(b), len(b), b) for k, i, b in bufs])

    def _bindable(self, name, array) -> bool:
        from openinfer.errors import ExecutionError

        try:
            self.ex.bind(name, array)
        except ExecutionError:
            return False
        self.ex.bind(name, None)
        return True

    def reset(self):
        self.ex.reset()

    def step(self, feeds):
        for name, value in feeds.items():
            if name in self.bind_in:
                self.ex.bind(name, value)
            else:
                self.ex.insert(name, value)
        outs = {name: self.empty(shape, dtype) for name, (shape, dtype) in self.bind_out.items()}
        for name, out in outs.items():
            self.ex.bind(name, out)
        self.ex.run_step()
        return {n: outs[n] if n in outs else self.ex.fetch(n) for n in self.outputs}

    def raw_step(self, index: int):
        handle = self.ex.link.handle
        for fn, var, buf, n, _ in self.raw_feeds[index]:
            fn(handle, var, buf, n)
        if self.ex.link.fn["step"](handle):
            raise RuntimeError("step() failed")


class Onnxruntime:
    def __init__(self, wl, work: Path, threads: int):
        self.sess = benchlib.ort_session(work / "model.onnx", threads)
        self.names = [o.name for o in self.sess.get_outputs()]
        self.wl = wl

    def reset(self):
        self.state = {k: v for k, (_, v) in self.wl.state.items()}

    def step(self, feeds):
        out = dict(zip(self.names, self.sess.run(None, {**feeds, **self.state}), strict=True))
        self.state = {k: out[o] for k, (o, _) in self.wl.state.items()}       # fed back as they are
        return {n: out[n] for n in self.wl.outputs}


class Iree:
    def __init__(self, wl, work: Path, threads: int):
        import iree.runtime as rt

        rt.flags.parse_flags(f"--task_topology_group_count={threads}")
        config = rt.Config("local-task")
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(rt.VmModule.mmap(config.vm_instance, str(work / "model.vmfb")))
        io = json.loads((work / "onnx_io.json").read_text())
        self.fn, self.inputs, self.names, self.wl = ctx.modules.module[io["function"]], io["inputs"], io["outputs"], wl

    def reset(self):
        self.state = {k: v for k, (_, v) in self.wl.state.items()}

    def step(self, feeds):
        out = self.fn(*[feeds[n] if n in feeds else self.state[n] for n in self.inputs])
        out = dict(zip(self.names, out if isinstance(out, tuple | list) else (out,), strict=True))
        self.state = {k: out[o] for k, (o, _) in self.wl.state.items()}       # stay device arrays
        return {n: out[n].to_host() for n in self.wl.outputs}


def time_passes(step, reset, feeds: list, repeat: int, min_time: float) -> float:
    """Best over `repeat` runs of the mean seconds per step; a run is whole passes over `feeds`
    (reset() before each, untimed) adding up to >= min_time seconds."""
    def one_pass() -> float:
        reset()
        t = time.perf_counter()
        for i, f in enumerate(feeds):
            step(i, f)
        return time.perf_counter() - t

    passes = max(1, math.ceil(min_time / max(one_pass(), 1e-9)))
    return min(sum(one_pass() for _ in range(passes)) / (passes * len(feeds)) for _ in range(repeat))


def worker(row: str, impl: str, threads: int, work: Path, args) -> dict:
    """One implementation of one row at one thread count, in this child process: check, then time."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    import workloads

    import openinfer as oi
    from openinfer.compare import compare
    from openinfer.dtypes import lookup

    model = oi.ModelLoader.open(work / "model.oinf")
    wl = workloads.BUILDERS[row]({k: model.tensor(k) for k in model.tensor_names})
    if impl == OURS:
        runner = Ours(wl, work, args.arch)
    elif impl == "onnxruntime":
        runner = Onnxruntime(wl, work, threads)
    elif impl == "iree":
        runner = Iree(wl, work, threads)
    else:
        if impl == "torch":
            import torch

            torch.set_num_threads(threads)
        runner = getattr(wl, impl)()
    expected = np.load(work / "expected.npz")
    result = {"impl": impl, "threads": threads, "ok": True, "max_abs_err": 0.0}
    runner.reset()
    for i, feeds in enumerate(wl.feeds):                     # the check pass, before any timing
        got = runner.step(feeds)
        terms = wl.terms(feeds) if wl.terms else {}
        for name in wl.outputs:
            c = compare(name, lookup("f32"), expected[f"{i}:{name}"], np.asarray(got[name]), terms.get(name))
            result["max_abs_err"] = max(result["max_abs_err"], c.max_abs)
            if not c.ok:
                result.update(ok=False, detail=f"step {i}: {name}: {c.detail}")
                return result
    result["seconds"] = time_passes(lambda i, f: runner.step(f), runner.reset, wl.feeds, args.repeat, args.min_time)
    if impl == OURS:
        result["raw_seconds"] = time_passes(lambda i, f: runner.raw_step(i), runner.reset, wl.feeds, args.repeat,
                                            args.min_time)
        if wl.stream_op:
            result.update(stream_profile(runner.ex, wl))
    return result


# ------------------------------------------------------------------------------------ the parent
def prepare(row: str, work: Path, args, peers: dict) -> tuple[object, dict]:
    """Write the row's model, graph, expected outputs and ONNX model; build the library and the
    IREE module. Returns the workload and the peers that can run it (name -> None or why not)."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    import workloads

    import openinfer as oi
    from openinfer.reference.executor import Reference

    work.mkdir(parents=True, exist_ok=True)
    wl = workloads.BUILDERS[row]()
    log(f"{row}: {wl.title}: writing the model")
    oi.write_oinf(work / "model.oinf", tensors=wl.tensors, sizevars=wl.sizevars)
    log(f"{row}: model written ({(work / 'model.oinf').stat().st_size / 1e6:.1f} MB)")
    model, graph = oi.ModelLoader.open(work / "model.oinf"), oi.graph(wl.graph)
    log(f"{row}: reference outputs ({len(wl.feeds)} step(s), OpenInfer reference interpreter)")
    ref, expected = Reference(model, graph).make_executor(), {}
    for i, feeds in enumerate(wl.feeds):
        ref.insert(**feeds)
        ref.run_step()
        expected.update({f"{i}:{n}": ref.fetch(n) for n in wl.outputs})
    np.savez(work / "expected.npz", **expected)
    log(f"{row}: generating and building the library for {args.arch}")
    t = time.perf_counter()
    oi.Simulator(model, graph, arch=args.arch)      # cached: the children load it
    log(f"{row}: built in {time.perf_counter() - t:.1f}s")
    avail = {OURS: None, "numpy": None if wl.numpy else "-", "torch": peers["torch"] if wl.torch else "-",
             "onnxruntime": peers["onnxruntime"] if wl.onnx else "-",
             "iree": peers["iree"] if wl.onnx else "-"}       # "-": no such version of the row
    if avail["onnxruntime"] is None or avail["iree"] is None:
        import onnx

        proto = wl.onnx()
        onnx.checker.check_model(proto, full_check=True)
        onnx.save(proto, work / "model.onnx")
        (work / "onnx_io.json").write_text(json.dumps({"function": proto.graph.name,
                                                       "inputs": [i.name for i in proto.graph.input],
                                                       "outputs": [o.name for o in proto.graph.output]}))
        del proto
    if avail["iree"] is None:
        avail["iree"] = compile_iree(row, work)
    return wl, avail


def compile_iree(row: str, work: Path) -> str | None:
    """model.onnx -> model.vmfb for llvm-cpu (this machine's CPU); None, or why it failed."""
    log(f"{row}: IREE: importing and compiling for llvm-cpu")
    t = time.perf_counter()
    steps = [[sys.executable, "-m", "iree.compiler.tools.import_onnx", str(work / "model.onnx"),
              "-o", str(work / "model.mlir")],
             [sys.executable, "-m", "iree.compiler.tools.scripts.iree_compile", str(work / "model.mlir"),
              "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host", "-o", str(work / "model.vmfb")]]
    for argv in steps:
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "error" in ln.lower()]
            why = (lines or (proc.stderr or proc.stdout).strip().splitlines() or ["failed"])[0].strip()
            log(f"{row}: IREE failed: {why}")
            return f"{Path(argv[2]).name.replace('_', '-')} failed: {why[:300]}"
    (work / "model.mlir").unlink(missing_ok=True)
    log(f"{row}: IREE compiled in {time.perf_counter() - t:.1f}s")
    return None


def stream_profile(ex, wl, passes: int = PROFILE_PASSES) -> dict:
    """Per-node profile of OpenInfer's executor `ex` (the library's trace hook) over passes of
    `wl.feeds`: the mean time per step in the calls of `wl.stream_op` kernels (with the
    element-wise ops fused into them: such a call reports under the last fused op's node), and
    its share of the profiled step; the pass with the least such time kept. The hook calls back
    into Python between nodes, never inside one."""
    from openinfer.synth.program import calls

    prog = ex.sim.program
    owners = {c.node for c in calls(prog.blocks) if prog.kernels[c.kernel].op == wl.stream_op}
    best = None
    ex.observe(lambda index: None)        # (with an observer, iterate() yields each node's event)
    try:
        for _ in range(passes):
            ex.reset()
            events = []
            for feeds in wl.feeds:
                for name, value in feeds.items():
                    ex.insert(name, value)
                events += ex.iterate()
            total = sum(e.duration_ns for e in events) * 1e-9 / len(wl.feeds)
            inside = sum(e.duration_ns for e in events if e.node_index in owners) * 1e-9 / len(wl.feeds)
            if best is None or inside < best["stream_seconds"]:
                best = {"stream_seconds": inside, "stream_share": inside / total,      # (calls that reported)
                        "stream_nodes": len(owners & {e.node_index for e in events})}
    finally:
        ex.observe(None)
    return best


def better(old: dict | None, new: dict) -> dict:
    """Across rounds: a wrong result stays; else the fastest; a crash only if no round ran."""
    if old is None or "error" in old:
        return new
    if "detail" in old or "error" in new:
        return old
    return new if "detail" in new or new["seconds"] < old["seconds"] else old


def run_child(row: str, impl: str, threads: int, work: Path, args) -> dict:
    argv = [sys.executable, __file__, "--worker", row, impl, str(threads), "--work", str(work),
            "--repeat", str(args.repeat), "--min-time", str(args.min_time), "--arch", args.arch]
    env = dict(os.environ, OI_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
        return {"impl": impl, "threads": threads, "ok": False, "error": tail[0][:300]}
    return json.loads(lines[-1])


def peer_versions(peers: dict) -> dict:
    """What ran (distributions and versions) or why not."""
    from importlib.metadata import version

    import numpy as np

    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    out = {"numpy": f"numpy {np.__version__} ({blas.get('name', '?')} {blas.get('version', '')})".strip()}
    dists = {"onnxruntime": ["onnxruntime", "onnx"], "iree": ["iree-base-compiler", "iree-base-runtime"],
             "torch": ["torch"]}
    for name, why in peers.items():
        out[name] = f"not available: {why}" if why else ", ".join(f"{d} {version(d)}" for d in dists[name])
    return out


def floors(result: dict, wl_terms: dict, roof: dict | None) -> None:
    """Add the roofline floor of a result (max of the bandwidth and the compute term) and its fraction."""
    if roof is None or "seconds" not in result:
        return
    bandwidth = max(roof["copy_gbs"], roof["triad_gbs"], roof.get("read_gbs", 0)) * 1e9
    mem, fma = wl_terms["bytes"] / bandwidth, wl_terms["flops"] / (roof["fma_gflops"] * 1e9)
    result.update(floor_seconds=max(mem, fma), floor_bound="memory" if mem >= fma else "fma",
                  floor_fraction=max(mem, fma) / result["seconds"])
    if "stream_seconds" in result:          # the streaming nodes alone: their bytes at the same bandwidth
        result["stream_fraction"] = wl_terms["stream_bytes"] / bandwidth / result["stream_seconds"]


def report(out: dict) -> list[str]:
    lines = []
    m = out["machine"]
    llc = m.get("llc_bytes")
    lines.append(f"OpenInfer benchmark suite: {m['cpu']}, {m['cores']} logical cores, load average "
                 f"{m['load_before']:.2f} before / {m['load_after']:.2f} after; arch {out['arch']}; best of "
                 f"{out['repeat']} runs of >= {out['min_time']} s")
    for name, what in out["peers"].items():
        lines.append(f"  {name:<12} {what}")
    for r in out.get("roofline", []):
        lines.append(f"roofline, {r['threads']} thread(s): STREAM copy {r['copy_gbs']:.1f} GB/s, triad "
                     f"{r['triad_gbs']:.1f} GB/s, read {r['read_gbs']:.1f} GB/s, f32 FMA peak "
                     f"{r['fma_gflops']:.0f} GFLOP/s")
    head = f"{'row':<14} {'implementation':<12} {'thr':>3} {'ms/step':>10} {'raw ms':>9} {'peer/ours':>9} " \
           f"{'floor ms':>9} {'bound':>6} {'of floor':>8}  check"
    lines += ["", head, "-" * len(head)]
    for row in out["rows"]:
        for r in row["results"]:
            ms = f"{r['seconds'] * 1e3:10.3f}" if "seconds" in r else " " * 10
            raw = f"{r['raw_seconds'] * 1e3:9.3f}" if "raw_seconds" in r else " " * 9
            ratio = f"{r['vs_ours']:8.2f}x" if r.get("vs_ours") else " " * 9
            star = "*" if llc and r.get("floor_bound") == "memory" and row["bytes"] <= 2 * llc else " "
            floor = (f"{r['floor_seconds'] * 1e3:9.3f} {r['floor_bound']:>6}{star}{r['floor_fraction']:7.1%}"
                     if "floor_fraction" in r else " " * 25)
            check = "pass" if r.get("ok") else f"FAIL: {r.get('error') or r.get('detail', '')}"
            lines.append(f"{row['row']:<14} {r['impl']:<12} {r['threads']:>3} {ms} {raw} {ratio} {floor}  {check}")
            if "stream_fraction" in r:
                lines.append(f"{'':<14} {row['stream_op']} nodes: {r['stream_seconds'] * 1e3:.3f} ms/step "
                             f"({r['stream_share']:.0%} of the profiled step), {row['stream_bytes'] / 1e6:.1f} MB at "
                             f"{row['stream_bytes'] / r['stream_seconds'] / 1e9:.1f} GB/s: "
                             f"{r['stream_fraction']:.1%} of the bandwidth")
        for impl, why in row["unavailable"].items():
            lines.append(f"{row['row']:<14} {impl:<12}     not available: {why}")
    if llc and any(row["bytes"] <= 2 * llc for row in out["rows"]):
        lines.append(f"* bytes per step within twice the {llc / (1 << 20):.0f} MiB last-level cache: partly cached "
                     "between steps, the DRAM floor can be beaten")
    if out["targets"]:
        lines += ["", "targets:"]
        for t in out["targets"]:
            got = "n/a" if t["value"] is None else (f"{t['value']:.2f}x" if t["kind"] == "ratio"
                                                     else f"{t['value']:.1%}")
            state = "-" if t["met"] is None else ("met" if t["met"] else "MISSED")
            lines.append(f"  {t['what']:<58} {got:>8}  {state}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("build/bench/suite.json"),
                    help="JSON results (default: %(default)s)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default: 1 2)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per figure, best kept (at least 5)")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds a timed run lasts at least (default 0.2)")
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=ROWS, metavar="ROW",
                    help=f"rows to run, of: {' '.join(ROWS)} (default: all)")
    ap.add_argument("--impls", nargs="+", choices=IMPLS, default=IMPLS, metavar="IMPL",
                    help=f"implementations, of: {' '.join(IMPLS)} (default: all that are available)")
    ap.add_argument("--arch", help="OpenInfer device (default: the widest bundled CPU descriptor this machine runs)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every (implementation, threads) child this many times, taking turns, and keep the "
                         "fastest (a busy machine; default 1)")
    ap.add_argument("--no-install", action="store_true", help="never pip-install a missing peer")
    ap.add_argument("--work", type=Path, help="keep the models, ONNX graphs and IREE modules here (default: a "
                                              "temporary directory, removed)")
    ap.add_argument("--worker", nargs=3, metavar=("ROW", "IMPL", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], int(args.worker[2]), args.work, args)), flush=True)
        os._exit(0)             # the figure is out: skip the peers' runtime teardown (IREE's has crashed there)
    if args.repeat < 5:
        log(f"--repeat {args.repeat} raised to 5")
        args.repeat = 5
    if args.arch is None:
        from openinfer.targets.devices import best_host_target

        args.arch = f"devices/{best_host_target()}.json"
    if not Path(args.arch).is_absolute() and not Path(args.arch).exists() and (REPO / args.arch).exists():
        args.arch = str(REPO / args.arch)
    load_before = os.getloadavg()[0]

    install = not args.no_install
    peers = {"onnxruntime": benchlib.ensure(["onnx", "onnxruntime"], ["onnx", "onnxruntime"], install=install,
                                            log=log) if "onnxruntime" in args.impls else "not requested",
             "iree": benchlib.ensure(["onnx", "iree.compiler", "iree.runtime"],
                                     ["onnx", "iree-base-compiler", "iree-base-runtime"], install=install, log=log)
             if "iree" in args.impls else "not requested",
             "torch": benchlib.ensure(["torch"], [], install=False) if "torch" in args.impls else "not requested"}
    if peers["torch"] is not None and peers["torch"] != "not requested":
        peers["torch"] = "not installed (optional; pip install torch)"
    out = {"machine": benchlib.machine(), "arch": args.arch, "repeat": args.repeat, "min_time": args.min_time,
           "threads": args.threads, "peers": peer_versions(peers), "rows": [], "targets": []}

    tmp = tempfile.TemporaryDirectory(prefix="oi-suite-") if args.work is None else None
    work = Path(tmp.name) if tmp else args.work
    work.mkdir(parents=True, exist_ok=True)
    roof: dict[int, dict] = {}

    # the FMA peak in the descriptor's vector registers (AVX2 code on an AVX-512 host: the AVX2 peak)
    bits = json.loads(Path(args.arch).read_text()).get("isa", {}).get("vector_bits")
    bits = bits if bits in (256, 512) else None

    def measure_roofline():                 # at the start and at the end; the best of the two is kept
        import roofline

        for t in args.threads:
            log(f"roofline: STREAM bandwidth and FMA peak, {t} thread(s)")
            r = roofline.measure(t, work, bits)
            roof[t] = {k: max(v, roof.get(t, r)[k]) for k, v in r.items()}

    try:
        if "roofline" in args.rows:
            measure_roofline()
        for row in [r for r in args.rows if r != "roofline"]:
            wl, avail = prepare(row, work / row, args, peers)
            entry = {"row": row, "title": wl.title, "notes": wl.notes, "bytes": wl.bytes, "flops": wl.flops,
                     **({"stream_op": wl.stream_op, "stream_bytes": wl.stream_bytes} if wl.stream_op else {}),
                     "unavailable": {k: v for k, v in avail.items() if k in args.impls and v not in (None, "-")
                                     and v != peers.get(k)}}        # failed for this row (not globally)
            del wl
            impls = [i for i in IMPLS if i in args.impls and avail[i] is None]
            best: dict[tuple[str, int], dict] = {}
            for rnd in range(args.rounds):
                for t in args.threads:
                    for impl in impls:
                        tag = f"{row}: {impl}, {t} thread(s)" + (f", round {rnd + 1}" if args.rounds > 1 else "")
                        log(f"{tag} ...")
                        r = run_child(row, impl, t, work / row, args)
                        log(f"{tag}: " + (f"{r['seconds'] * 1e3:.3f} ms/step" if "seconds" in r else
                                          f"FAILED: {r.get('error') or r.get('detail')}"))
                        best[(impl, t)] = better(best.get((impl, t)), r)
            entry["results"] = [best[(i, t)] for t in args.threads for i in impls]
            out["rows"].append(entry)
        if "roofline" in args.rows:
            measure_roofline()
    finally:
        if tmp:
            tmp.cleanup()
    out["roofline"] = list(roof.values())
    for entry in out["rows"]:
        for r in entry["results"]:
            ours = next(q for q in entry["results"] if q["impl"] == OURS and q["threads"] == r["threads"])
            if ours.get("ok") and r.get("ok"):
                r["vs_ours"] = r["seconds"] / ours["seconds"]
            floors(r, entry, roof.get(r["threads"]))
    out["machine"].update(load_before=load_before, load_after=os.getloadavg()[0])
    out["targets"] = targets(out)
    print("\n".join(report(out)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    log(f"wrote {args.out}")
    # a crashed peer is reported, not fatal; a wrong result, or OpenInfer failing, is
    return 0 if all(r.get("ok") or (r["impl"] != OURS and "error" in r)
                    for entry in out["rows"] for r in entry["results"]) else 1


def targets(out: dict) -> list[dict]:
    rows = {r["row"]: r["results"] for r in out["rows"]}
    found = []
    for row, peer, want in TARGETS:
        for t in out["threads"]:
            r = next((r for r in rows.get(row, []) if r["impl"] == peer and r["threads"] == t), None)
            if row in rows:
                v = r.get("vs_ours") if r else None
                found.append({"what": f"{row}, {t} thread(s): {peer} time / openinfer >= {want}", "kind": "ratio",
                              "value": v, "met": None if v is None else v >= want})
    fractions = [(row, want, "floor_fraction", f"openinfer at >= {want:.0%} of its floor")
                 for row, want in FLOOR_TARGETS]
    fractions += [(row, want, "stream_fraction", f"its GEMVs at >= {want:.0%} of the bandwidth")
                  for row, want in STREAM_TARGETS]
    for row, want, key, what in fractions:
        for t in out["threads"]:
            r = next((r for r in rows.get(row, []) if r["impl"] == OURS and r["threads"] == t), None)
            if row in rows:
                v = r.get(key) if r else None
                found.append({"what": f"{row}, {t} thread(s): {what}", "kind": "fraction", "value": v,
                              "met": None if v is None else v >= want})
    return found


if __name__ == "__main__":
    sys.exit(main())
