"""One running instance of a generated program, as the simulator's executor drives it.

`ProgramLink` is the part of a program's C ABI (NAME.h) that openinfer/sim.py's `SimExecutor`
calls, with two implementations: `LibraryLink`, the library loaded into this process through
cffi, and openinfer/emulate.py's `EmulatedLink`, a program built for another architecture running
under QEMU in a child process. Everything else the executor does (converting values to their
stored bytes, shapes at the current sizes, trace events, the per-node observer) is written once,
over this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

#: Called after each node of a traced step: (graph node index, block name, duration in ns).
NodeHook = Callable[[int, str, int], None]

#: The generated program's functions as the simulator calls them: the declarations of NAME.h at
#: PROGRAM_ABI_VERSION (openinfer/targets/base.py; tests/synth/test_program_abi.py holds them
#: against a generated header).
_CDEF = """
typedef struct oi_var_info {{ const char *name; uint32_t dtype; uint32_t kind; uint32_t ndim; uint64_t dims[8];
                              uint64_t nbytes; uint32_t settable; uint32_t gettable; }} oi_var_info;
typedef void (*oi_trace_hook)(void *user, int32_t node_index, const char *block, uint64_t duration_ns);
int {p}_create(const char *oinf_path, void **out);
int {p}_set(void *model, int var, const void *src, size_t bytes);
int {p}_step(void *model);
int {p}_get(void *model, int var, void *dst, size_t bytes);
int {p}_bind(void *model, int var, void *memory, size_t bytes);
int {p}_reset(void *model);
int {p}_shape(void *model, int var, uint64_t *dims, size_t max_dims);
int {p}_set_size(void *model, int size, uint64_t value);
uint64_t {p}_get_size(void *model, int size);
void {p}_destroy(void *model);
const char *{p}_error(const void *model);
void {p}_set_trace_hook(void *model, oi_trace_hook hook, void *user);
const char *oi_status_str(int status);
int oi_cpu_require(uint32_t required, char *buf, size_t cap);
"""


class ProgramLink(ABC):
    """One instance of a program (one create()). Calls return the C status (0: OI_OK)."""

    @abstractmethod
    def create(self) -> int:
        """NAME_create on the model the link was opened with."""

    @abstractmethod
    def missing_cpu_features(self, mask: int) -> str:
        """oi_cpu_require's answer on the CPU the program runs on: the features of `mask` it
        lacks ("" when none)."""

    @abstractmethod
    def status_text(self, status: int) -> str:
        """oi_status_str."""

    @abstractmethod
    def error(self) -> str:
        """NAME_error: what the last failed call found."""

    @abstractmethod
    def set(self, var: int, data: np.ndarray) -> int:
        """NAME_set with `data`'s bytes (C-contiguous)."""

    @abstractmethod
    def get(self, var: int, out: np.ndarray) -> int:
        """NAME_get into `out` (C-contiguous, writable: exactly its bytes)."""

    @abstractmethod
    def shape(self, var: int, ndim: int) -> tuple[int, tuple[int, ...]]:
        """NAME_shape: (status, the variable's `ndim` run-time dims)."""

    @abstractmethod
    def set_size(self, size: int, value: int) -> int:
        """NAME_set_size."""

    @abstractmethod
    def get_size(self, size: int) -> int:
        """NAME_get_size (the value)."""

    @abstractmethod
    def reset(self) -> int:
        """NAME_reset."""

    @abstractmethod
    def bind(self, var: int, array: np.ndarray | None) -> int:
        """NAME_bind to `array`'s memory (None: back to the program's own buffer)."""

    @abstractmethod
    def step(self, on_node: NodeHook | None) -> int:
        """NAME_step, with the trace hook calling `on_node` after each node when given (which may
        call get, shape and get_size)."""


class LibraryLink(ProgramLink):
    """The library loaded into this process (cffi): the calls go straight to C."""

    def __init__(self, ffi, lib, prefix: str, model_path: str | None):
        self.ffi = ffi
        self.lib = lib
        #: the program's entry points, and its handle once created: what a benchmark calls raw
        #: (tools/bench/) to time the C call alone
        self.fn = {name: getattr(lib, f"{prefix}_{name}") for name in
                   ("create", "set", "step", "get", "reset", "destroy", "error", "set_trace_hook", "shape",
                    "set_size", "get_size", "bind")}
        self.handle = None
        self._model_path = model_path

    def create(self) -> int:
        out = self.ffi.new("void **")
        path = self._model_path.encode() if self._model_path is not None else self.ffi.NULL
        status = self.fn["create"](path, out)
        if status == 0:
            # the destructor holds the library, so the library is never unloaded before the handle
            # is destroyed (at interpreter exit the collection order is otherwise arbitrary)
            lib, destroy = self.lib, self.fn["destroy"]
            self.handle = self.ffi.gc(out[0], lambda handle, lib=lib: destroy(handle))
        return status

    def missing_cpu_features(self, mask: int) -> str:
        buf = self.ffi.new("char[]", 256)
        self.lib.oi_cpu_require(mask, buf, 256)
        return self.ffi.string(buf).decode()

    def status_text(self, status: int) -> str:
        return self.ffi.string(self.lib.oi_status_str(status)).decode()

    def error(self) -> str:
        return self.ffi.string(self.fn["error"](self.handle)).decode()

    def set(self, var: int, data: np.ndarray) -> int:
        return self.fn["set"](self.handle, var, self.ffi.from_buffer(data), data.nbytes)

    def get(self, var: int, out: np.ndarray) -> int:
        return self.fn["get"](self.handle, var, self.ffi.from_buffer(out), out.nbytes)

    def shape(self, var: int, ndim: int) -> tuple[int, tuple[int, ...]]:
        dims = self.ffi.new("uint64_t[]", max(1, ndim))
        status = self.fn["shape"](self.handle, var, dims, ndim)
        return status, tuple(int(dims[k]) for k in range(ndim))

    def set_size(self, size: int, value: int) -> int:
        return self.fn["set_size"](self.handle, size, value)

    def get_size(self, size: int) -> int:
        return int(self.fn["get_size"](self.handle, size))

    def reset(self) -> int:
        return self.fn["reset"](self.handle)

    def bind(self, var: int, array: np.ndarray | None) -> int:
        if array is None:
            return self.fn["bind"](self.handle, var, self.ffi.NULL, 0)
        return self.fn["bind"](self.handle, var, self.ffi.from_buffer(array), array.nbytes)

    def step(self, on_node: NodeHook | None) -> int:
        if on_node is None:     # the bare call (a cffi callback is not free: made only when wanted)
            return self.fn["step"](self.handle)

        def hook(_user, index, block, duration):
            on_node(int(index), self.ffi.string(block).decode(), int(duration))

        callback = self.ffi.callback("void(void *, int32_t, const char *, uint64_t)", hook)
        self.fn["set_trace_hook"](self.handle, callback, self.ffi.NULL)
        try:
            return self.fn["step"](self.handle)
        finally:
            self.fn["set_trace_hook"](self.handle, self.ffi.NULL, self.ffi.NULL)
