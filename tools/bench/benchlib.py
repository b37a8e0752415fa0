"""Helpers shared by the benchmarks in tools/bench: timing, the machine, optional peers (installed
on demand), loading the example workloads, and building ONNX graphs with onnx.helper.

Nothing here imports NumPy, onnx or OpenInfer at module level, so a benchmark can fix its thread
counts (environment variables) before any of them loads.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------- timing
def interleaved_best(fns: dict, repeat: int, clock=time.perf_counter) -> dict[str, float]:
    """Best seconds per call of each function: one warm-up call, then `repeat` rounds in which
    every function runs once in turn."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = clock()
            fn()
            best[name] = min(best[name], clock() - t)
    return best


def best_per_step(fn, repeat: int, steps: int, clock=time.perf_counter) -> float:
    """Best mean seconds per call of `fn` over `repeat` runs of `steps` calls (after a warm-up)."""
    for _ in range(max(1, steps // 4)):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t = clock()
        for _ in range(steps):
            fn()
        best = min(best, (clock() - t) / steps)
    return best


# --------------------------------------------------------------------------------------- machine
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def llc_bytes() -> int | None:
    """The last-level cache of CPU 0, from sysfs (None if unknown)."""
    try:
        caches = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"))
        size = (caches[-1] / "size").read_text().strip()
    except (OSError, IndexError):
        return None
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(size[:-1]) * scale[size[-1]] if size[-1] in scale else int(size)


def machine() -> dict:
    """CPU model, logical cores, last-level cache, 1-minute load average, Python."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "llc_bytes": llc_bytes(), "python": platform.python_version(),
            "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


# ----------------------------------------------------------------------------------------- peers
def ensure(modules: list[str], packages: list[str], *, install: bool = True, log=None) -> str | None:
    """Import `modules`, pip-installing `packages` into this interpreter first if one is missing.
    Returns None when they import, else why not."""
    def missing() -> str | None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:          # an optional peer: whatever fails to import
                return f"{type(exc).__name__}: {exc}"
        return None

    why = missing()
    if why is None or not install:
        return why
    if log:
        log(f"installing {' '.join(packages)} (pip) ...")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *packages],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["pip failed"]
        return f"pip install {' '.join(packages)} failed: {tail[0]}"
    importlib.invalidate_caches()
    return missing()


def load_example(name: str):
    """examples/<name>.py as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_example", REPO / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------ ONNX
class OnnxBuilder:
    """A small front end to onnx.helper: `op` adds a node and returns its output name, `const`
    adds an initializer (named, or numbered when anonymous)."""

    def __init__(self, name: str = "main"):
        self.name, self.nodes, self.inits, self._n = name, [], [], 0

    def _fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, value, name: str | None = None) -> str:
        import numpy as np
        from onnx import numpy_helper

        name = name or self._fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, outputs: int = 1, **attrs):
        from onnx import helper

        names = [out] if out else [self._fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def model(self, inputs: list[tuple], outputs: list[tuple], opset: int = 17):
        """inputs / outputs: (name, NumPy dtype, shape)."""
        import numpy as np
        from onnx import helper

        def info(name, dtype, shape):
            return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape))

        graph = helper.make_graph(self.nodes, self.name, [info(*i) for i in inputs], [info(*o) for o in outputs],
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8          # readable by every onnxruntime release of the last years
        return model


def ort_session(model, threads: int):
    """An onnxruntime CPU session of `model` (a ModelProto, bytes or a path) on `threads` intra-op
    threads (the caller's thread included), graph optimizations on (the default)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), opts,
                                providers=["CPUExecutionProvider"])
