"""The compiled simulator: generate, build and load a program (through cffi, or under emulation),
with the same executor API as the NumPy reference, and the comparison of the two (`openinfer sim`).

    sim = Simulator(model, graph, arch="devices/x86_64-avx2.json")
    ex = sim.make_executor(); ex.insert(x=...); ex.run_step(); y = ex.fetch("y")

Builds are cached under $OI_CACHE_DIR (default ~/.cache/openinfer/sim), keyed by the generated
files, the build options and the C compiler (`CC`, resolved, and its version), so creating the same
simulator twice builds once, and another compiler or option builds anew.

A CPU descriptor of another architecture (aarch64 on an x86-64 machine) is cross-built and run
under QEMU in a child process (openinfer/emulate.py), behind the same executor: the executor
drives a `ProgramLink` (openinfer/link.py), the library in this process or the emulated one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .build import build, c_compiler, library_path
from .cross import is_foreign
from .dims import shape_sizevars
from .emulate import Emulation
from .errors import ExecutionError, SimulationError
from .firmware import FirmwareEmulation
from .ir import nodes as ir
from .ir.bind import rebind
from .ir.describe import describe
from .link import _CDEF, LibraryLink, ProgramLink
from .numerics import from_storage, storage_dtype, to_storage
from .outdir import folder_lock
from .reference.executor import check_sizes, coerce
from .synth import program as P
from .synth.program import dynamic_ranges
from .synthesizer import Synthesizer
from .trace import TraceEvent, emit_line, trace_mode
from .writetree import write_tree

_KIND = {ir.Assign: "Assign", ir.Op: "OpExecute", ir.CacheRead: "CacheRead", ir.CacheWrite: "CacheWrite",
         ir.CacheIncrement: "CacheIncrement", ir.CacheDecrement: "CacheDecrement", ir.CacheReset: "CacheReset",
         ir.Barrier: "Barrier", ir.Dep: "Dep", ir.Transfer: "Transfer", ir.Yield: "Yield", ir.Await: "Await",
         ir.Branch: "Branch", ir.Loop: "Loop", ir.Return: "Return"}


def cache_root() -> Path:
    root = os.environ.get("OI_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "openinfer" / "sim"


@dataclass(frozen=True)
class _Var:
    id: int
    info: P.VarInfo


class Simulator:
    """Generates, builds and loads `graph` on `model` for the device `arch`."""

    def __init__(self, model, graph, *, arch, sizevars: Mapping[str, int] | None = None,
                 dynamic: Mapping[str, int] | None = None, outputs: set[str] | None = None,
                 build_options: list[str] | None = None, progress: Callable[[str], None] | None = None,
                 trace: bool | str | None = None):
        from .api import bind_inputs

        synthesizer = Synthesizer.from_arch(arch)
        device = synthesizer.device
        #: how this machine runs a program of another architecture (None: in this process)
        self.emulation = None
        if is_foreign(device):      # a bare-metal program runs in a firmware under system emulation
            self.emulation = (FirmwareEmulation if device.bare_metal else Emulation).of(device)
        missing = device.missing_on_host() if self.emulation is None else []
        if missing:     # refused before anything is built or loaded: its code would die with SIGILL here
            raise SimulationError(f"cannot run code for {device.name} ({Path(str(arch)).stem}) on this "
                                  f"machine: its CPU lacks {', '.join(missing)}" + _host_cap_note())
        self.model, self.graph, self.bound = bind_inputs(model, graph, sizevars, dynamic)
        self.plan = synthesizer.synthesize(self.model, self.graph, sizevars=sizevars, dynamic=dynamic, outputs=outputs)
        self.program = self.plan.program
        name = self.program.name
        opts = list(build_options or [])
        files = dict(self.plan.files)
        compiler = c_compiler()
        if self.emulation is not None:     # a static library, linked into the runner QEMU runs
            files.update(self.emulation.runner_files(self.program))
            opts.append("-Ddefault_library=static")
            compiler = self.emulation.compiler
        digest = hashlib.sha256()
        for k in sorted(files):
            digest.update(k.encode() + b"\0" + files[k] + b"\0")
        digest.update("\0".join([compiler.key(), *opts]).encode())
        self.project = cache_root() / f"{name}-{digest.hexdigest()[:16]}"
        build_dir = self.project / "build"
        built = build_dir / (self.emulation.runner_name(name) if self.emulation is not None else f"lib{name}.so")
        # the entry is locked while it is checked and built: another process (or thread) making the
        # same simulator waits, then finds the library built, and never loads one still being linked
        with folder_lock(self.project):
            if not built.exists():
                write_tree(self.project, files)
                build(self.project, options=opts, progress=progress)
                if self.emulation is not None:
                    self.emulation.link_runner(self.project, build_dir, name)
            os.utime(self.project)      # its last use, which `openinfer cache clean --older-than` reads
        #: what was built: the library loaded here, or the runner executable QEMU runs
        self.library = built if self.emulation is not None else library_path(build_dir, name)
        self._trace = trace
        self.prefix = f"oi_{name}"
        #: the OI_CPU_* features its kernels were compiled for (the header's *_CPU_FEATURES)
        self.cpu_mask = device.cpu_feature_mask
        self.vars = {v.name: v for v in self.program.vars}
        self.node_outputs = _node_outputs(self.program)
        self.nodes = {n.index: n for b in self.graph.blocks.values() for n in ir.walk(b.nodes)}
        #: the loaded library (None under emulation: nothing is loaded into this process)
        self.ffi = self.lib = self._vk_ffi = self._vk_lib = None
        if self.emulation is None:
            self._load()

    def _load(self) -> None:
        """Load the library into this process (cffi), with the Vulkan HAL's counters."""
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF.format(p=self.prefix))
        self.lib = self.ffi.dlopen(str(self.library))
        # the Vulkan HAL's counters: validation messages, commands, waits (exported by Vulkan libraries only)
        self._vk_ffi = cffi.FFI()
        self._vk_ffi.cdef("".join(f"uint64_t oi_vk_{c}(void);" for c in (
            "validation_messages", "submissions", "replays", "dispatches", "transfers", "copy_kernels", "barriers",
            "wait_ns")))
        self._vk_ffi.cdef("uint32_t oi_vk_stage_profile(uint64_t *, uint32_t *, uint32_t *, uint32_t);")
        self._vk_lib = self._vk_ffi.dlopen(str(self.library))

    def open_link(self) -> ProgramLink:
        """A new instance of the program, not yet created: in this process, or under emulation."""
        model_path = str(self.model.path) if self.model is not None else None
        if self.emulation is not None:
            return self.emulation.open(self.library, model_path)
        return LibraryLink(self.ffi, self.lib, self.prefix, model_path)

    def cpu_note(self) -> str:
        """Which CPU a program's CPU check met, for messages."""
        return self.emulation.cpu_note() if self.emulation is not None else _host_cap_note()

    def make_executor(self) -> SimExecutor:
        return SimExecutor(self, trace=self._trace)

    def validation_messages(self) -> int | None:
        """Vulkan targets: warnings and errors the Khronos validation layer reported in this process
        (OI_VK_VALIDATION=1 enables it); None for libraries without the Vulkan HAL."""
        if self._vk_lib is None:
            return None
        try:
            fn = self._vk_lib.oi_vk_validation_messages
        except AttributeError:
            return None
        return int(fn())

    def submissions(self) -> int | None:
        """Vulkan targets: command buffers submitted in this process (each one a wait for the device)."""
        return self.vk_counters().get("submissions")

    def vk_counters(self) -> dict[str, int]:
        """Vulkan targets: what this process recorded and submitted so far (submissions, replays:
        submissions of a command buffer recorded before, dispatches, transfers, copy_kernels: the
        transfers that ran as the HAL's copy kernel, barriers) and the
        nanoseconds the host waited for the device
        (wait_ns; hal/include/oi_hal_vulkan.h); {} for other libraries. Differences taken around
        steps give their cost per step."""
        if self._vk_lib is None:
            return {}
        try:
            return {kind: int(getattr(self._vk_lib, f"oi_vk_{kind}")())
                    for kind in ("submissions", "replays", "dispatches", "transfers", "copy_kernels", "barriers",
                                 "wait_ns")}
        except AttributeError:
            return {}

    def vk_stage_profile(self) -> list[tuple[float, int, int]]:
        """Vulkan targets run with OI_VK_PROFILE=1 (set before the executor is made): the last
        submission's stages (the commands between two barriers) as (device microseconds,
        kernels, transfers), from GPU timestamps (hal/include/oi_hal_vulkan.h,
        oi_vk_stage_profile); [] when nothing was profiled or the library has no Vulkan HAL."""
        if self._vk_lib is None:
            return []
        try:
            fn = self._vk_lib.oi_vk_stage_profile
        except AttributeError:
            return []
        n = int(fn(self._vk_ffi.NULL, self._vk_ffi.NULL, self._vk_ffi.NULL, 0))
        ns, kernels, transfers = (self._vk_ffi.new(f"{t}[]", max(n, 1)) for t in ("uint64_t", "uint32_t", "uint32_t"))
        n = min(n, int(fn(ns, kernels, transfers, n)))
        return [(ns[i] / 1e3, int(kernels[i]), int(transfers[i])) for i in range(n)]


def _host_cap_note() -> str:
    cap = os.environ.get("OI_HOST_ISA")
    return f" (OI_HOST_ISA={cap} caps what this machine may run)" if cap else ""


class SimExecutor:
    """Same methods as ReferenceExecutor, backed by the compiled program: one instance of it (one
    create()), reached through a `ProgramLink` — the library in this process, or the runner under
    emulation — so everything below is the same for both."""

    def __init__(self, sim: Simulator, *, trace: bool | str | None = None):
        self.sim = sim
        #: the program instance the calls go to: in this process, or under emulation
        self.link = sim.open_link()
        self._created = False
        self._check(self.link.create(), "create")
        self._created = True
        env = trace_mode()
        self._trace_mode = env if trace is None else ("full" if trace == "full" else ("1" if trace else None))
        self._print = env is not None
        self._events: list[TraceEvent] = []
        self._step = 0
        self._observer: Callable[[int], None] | None = None
        # What insert() and fetch() need of each variable, looked up once: for a small graph
        # (the CNN example, ~40 us a step) recomputing it on every call cost ~5 us a step.
        self._inputs = {name: (info, storage_dtype(info.dtype)) for name, info in sim.vars.items() if info.settable}
        self._outputs = {name: (info, storage_dtype(info.dtype)) for name, info in sim.vars.items() if info.gettable}
        self._first_step_started = False
        self._inserted_before_first_step: set[str] = set()
        self._bound_arrays: dict[str, np.ndarray] = {}   # bind()'s, kept alive while the library uses them
        # dynamic sizes: their ABI ids, and the graph bound at the current values (insert()'s shapes)
        ranges = dynamic_ranges(sim.program)
        self._size_ids = {name: i for i, name in enumerate(ranges)}
        self._sizes = {name: hi for name, (_, hi, _) in ranges.items()}
        self._bound = rebind(sim.bound, self._sizes) if self._sizes else sim.bound
        self._sized = {name for name, info in sim.vars.items() if shape_sizevars(info.shape)}

    # ------------------------------------------------------------------ errors
    def _check(self, status: int, what: str) -> None:
        if status == 0:
            return
        text = self.link.status_text(status)
        detail = ""
        if self._created:
            detail = self.link.error()
        elif what == "create":
            missing = self.link.missing_cpu_features(self.sim.cpu_mask)
            detail = f"this CPU lacks {missing}" + self.sim.cpu_note() if missing else ""
        raise (ExecutionError if what in ("step", "set", "get", "bind") else SimulationError)(
            f"{self.sim.prefix}_{what} failed: {text}" + (f" — {detail}" if detail else ""))

    # ------------------------------------------------------------------ API
    def insert(self, name: str | None = None, value=None, /, **values) -> None:
        if name is not None:
            values = {name: value, **values}
        for var_name, v in values.items():
            entry = self._inputs.get(var_name)
            if entry is None:
                raise ExecutionError(f"cannot insert `{var_name}`: only dynamic variables are inputs")
            info, native = entry
            bound = self._bound.vars[var_name]     # its shape at the current sizes
            if not self._first_step_started:
                self._inserted_before_first_step.add(var_name)
            if (native is not None and isinstance(v, np.ndarray) and v.dtype == native and v.shape == bound.shape
                    and v.flags.c_contiguous):
                data = v            # already the stored bytes: no conversion, no copy (the common case)
            else:
                data = np.frombuffer(to_storage(coerce(bound, v), info.dtype), np.uint8)
            self._check(self.link.set(info.id, data), "set")

    def bind(self, name: str, array: np.ndarray | None) -> None:
        """Puts variable `name` in `array`'s memory for the following steps (None: back in the
        library's own buffer; NAME_bind of the generated header): a bound input is read from the
        array by every step, with no copy (insert() refuses it: write the array), a bound output
        is written there. `array`: C-contiguous, writable, the variable's shape and stored dtype
        (uint8 bytes for packed types); it is kept alive while bound. Bindable: dynamic inputs
        the graph never writes and observable volatile variables, of static shapes."""
        entry = self._inputs.get(name) or self._outputs.get(name)
        if entry is None:
            raise ExecutionError(f"cannot bind `{name}`: not an input or observable variable of the compiled program")
        info, native = entry
        if array is None:
            self._check(self.link.bind(info.id, None), "bind")
            self._bound_arrays.pop(name, None)
            return
        shape = tuple(self._bound.vars[name].shape)        # at the current sizes
        want = ((native, shape) if native is not None else
                (np.dtype(np.uint8), (info.dtype.storage_nbytes(int(np.prod(shape, dtype=np.int64))),)))
        if not isinstance(array, np.ndarray) or (array.dtype, array.shape) != want or not array.flags.c_contiguous \
                or not array.flags.writeable:
            got = (f"{array.dtype}{list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__)
            raise ExecutionError(f"cannot bind `{name}`: needs a writable C-contiguous {want[0]}{list(want[1])} "
                                 f"array, got {got}")
        self._check(self.link.bind(info.id, array), "bind")
        self._bound_arrays[name] = array
        if name in self._inputs and not self._first_step_started:
            self._inserted_before_first_step.add(name)

    def set_sizes(self, **sizes: int) -> None:
        """As ReferenceExecutor.set_sizes: `NAME_set_size` for each, then insert again."""
        check_sizes(sizes, self._size_ids)
        for name, value in sizes.items():
            self._check(self.link.set_size(self._size_ids[name], int(value)), "set")
        want = {**self._sizes, **{k: int(v) for k, v in sizes.items()}}
        if want != self._sizes:
            self._bound = rebind(self.sim.bound, want)
            self._sizes = want

    def sizes(self) -> dict[str, int]:
        """The library's current sizes (a cache read may have set one during the last step)."""
        return {name: self.link.get_size(i) for name, i in self._size_ids.items()}

    def run_step(self) -> None:
        self._first_step_started = True
        if self._trace_mode is None and self._observer is None:     # nothing to record: the bare call
            status = self.link.step(None)
            self._step += 1
            self._check(status, "step")
            return
        for _ in self.iterate():
            pass

    def iterate(self) -> Iterator[TraceEvent]:
        """Runs one step; yields each node's trace event (after the step: the library runs it whole)."""
        events: list[TraceEvent] = []
        want = self._trace_mode is not None or self._observer is not None

        def on_node(index: int, block: str, duration: int) -> None:
            node = self.sim.nodes.get(index)
            if node is None:
                return
            events.append(TraceEvent(_KIND[type(node)], index, node.uuid, block, describe(node),
                                     node.op if isinstance(node, ir.Op) else None, (), (), 0, duration, self._step))
            if self._observer is not None:
                self._observer(index)

        self._first_step_started = True
        try:
            status = self.link.step(on_node if want else None)
        finally:
            self._step += 1
        if self._trace_mode:
            self._events.extend(events)
            if self._print:
                for e in events:
                    emit_line(e)
        self._check(status, "step")
        yield from events

    def fetch(self, name: str) -> np.ndarray:
        entry = self._outputs.get(name)
        if entry is None:
            raise ExecutionError(f"cannot fetch `{name}`: not an observable variable of the compiled program")
        info, native = entry
        if (not self._first_step_started and info.kind in ("dynamic", "volatile")
                and name not in self._inserted_before_first_step):
            # as the reference: a step's values exist once a step ran (the library would return zeros)
            raise ExecutionError(f"cannot fetch `{name}`: it has no value yet (run a step first)")
        shape = info.shape
        if info.dynamic_shape or name in self._sized:
            status, shape = self.link.shape(info.id, len(shape))
            self._check(status, "get")
        if native is not None:       # read straight into the result
            out = np.empty(shape, native)
            self._check(self.link.get(info.id, out), "get")
            return out
        n = info.dtype.storage_nbytes(int(np.prod(shape, dtype=np.int64)))
        buf = np.empty(n, dtype=np.uint8)
        self._check(self.link.get(info.id, buf), "get")
        return np.array(from_storage(buf, info.dtype, shape), copy=True)

    def trace(self) -> list[TraceEvent]:
        return list(self._events)

    def reset(self) -> None:
        self._check(self.link.reset(), "reset")

    def observe(self, fn: Callable[[int], None] | None) -> None:
        """Call fn(node_index) after every node of the next steps (None stops); fetch works inside."""
        self._observer = fn


def _node_outputs(prog: P.Program) -> dict[int, list[str]]:
    """Graph node index -> the variables it writes (for per-node comparison)."""
    out: dict[int, list[str]] = {}

    def visit(stmts):
        for s in stmts:
            if isinstance(s, P.Call):
                out.setdefault(s.node, []).append(s.result.var)
            elif isinstance(s, P.Copy):
                out.setdefault(s.node, []).append(s.dst.var)
            elif isinstance(s, P.TableRead):
                out.setdefault(s.node, []).append(s.dst)
            elif isinstance(s, (P.TableWrite, P.ScalarStep, P.StateReset)):
                out.setdefault(s.node, []).append(s.var)
            elif isinstance(s, P.Loop):
                visit(s.body)

    for stmts in prog.blocks.values():
        visit(stmts)
    return out
