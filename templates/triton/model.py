"""Triton Python backend of an OpenInfer program (written by `openinfer gen --emit triton`).

The same file serves every program: it reads the program's manifest (NAME.json, named by the
config's `openinfer_manifest` parameter) and drives the generated C ABI (NAME.h) through ctypes.
It imports numpy and the standard library only, so the repository runs in a stock Triton
container. docs/serving.md describes the mapping; in short:

- stateless graphs: one program context per model instance; with `max_batch_size` > 0 the
  requests Triton batches are concatenated along the batch size (requests whose other dims
  differ run apart) and run as one step with that size set to the rows they hold;
- graphs with persistent state (the sequence batcher, oldest strategy): one context per live
  sequence, keyed by the correlation ID, reset on START and freed on END; a sequence Triton has
  released for idleness is freed by the idle sweeper. Contexts come from NAME_create_in over one
  copy of the weights the instance reads at start, in memory of their own.

Every problem with a request becomes that request's error response; the instance keeps running.
"""

import ctypes
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

#: the memory alignment create_in requires (OI_ALIGN, oi_hal.h)
ALIGN = 64

#: NumPy types of the dtypes Triton carries (openinfer/triton.py TRITON_TYPES has the same keys)
NUMPY_TYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "i16": np.int16,
               "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
               "u64": np.uint64, "bool": np.bool_}


class RequestError(Exception):
    """A request the program cannot run (its message goes back to the client)."""


def aligned_bytes(n):
    """A zeroed uint8 array of n bytes (at least one) whose data starts ALIGN-aligned."""
    raw = np.zeros(max(n, 1) + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + max(n, 1)]


class Program:
    """The library, its manifest and the weights image every context of this instance shares."""

    def __init__(self, folder, manifest):
        self.manifest = manifest
        serving = manifest["serving"]
        self.lib = ctypes.CDLL(os.path.join(folder, serving["library"]))
        p = manifest["prefix"]
        handle, u64p, vp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p
        signatures = {
            "create_in": (ctypes.c_int, [vp, vp, vp, vp, ctypes.c_size_t, ctypes.POINTER(handle)]),
            "set": (ctypes.c_int, [handle, ctypes.c_int, vp, ctypes.c_size_t]),
            "get": (ctypes.c_int, [handle, ctypes.c_int, vp, ctypes.c_size_t]),
            "step": (ctypes.c_int, [handle]),
            "reset": (ctypes.c_int, [handle]),
            "shape": (ctypes.c_int, [handle, ctypes.c_int, u64p, ctypes.c_size_t]),
            "set_size": (ctypes.c_int, [handle, ctypes.c_int, ctypes.c_uint64]),
            "destroy": (None, [handle]),
            "error": (ctypes.c_char_p, [handle]),
        }
        self.fn = {}
        for name, (restype, argtypes) in signatures.items():
            f = getattr(self.lib, f"{p}_{name}")
            f.restype, f.argtypes = restype, argtypes
            self.fn[name] = f
        self.lib.oi_status_str.restype, self.lib.oi_status_str.argtypes = ctypes.c_char_p, [ctypes.c_int]
        with open(os.path.join(folder, serving["weights"]), "rb") as f:
            data = f.read()
        self.image = aligned_bytes(len(data))
        self.image[:len(data)] = np.frombuffer(data, np.uint8)
        self.image_bytes = len(data)
        self.vars = {v["name"]: v for v in manifest["vars"]}
        self.size_index = {s["name"]: k for k, s in enumerate(manifest["sizes"])}
        self.size_range = {s["name"]: (s["min"], s["max"]) for s in manifest["sizes"]}
        # where each dynamic size can be read off a request: the first input dim that is the size itself
        self.size_source = {}
        for name in serving["inputs"]:
            for axis, d in enumerate(self.vars[name].get("dims", ())):
                if d in self.size_index and d not in self.size_source:
                    self.size_source[d] = (name, axis)

    def status(self, st):
        return self.lib.oi_status_str(st).decode()


class Context:
    """One program instance (NAME_create_in) in memory of its own."""

    def __init__(self, program):
        self.program = program
        m = program.manifest
        self.memory = [aligned_bytes(m["context_bytes"]), aligned_bytes(m["arena_bytes"]),
                       aligned_bytes(m["persistent_bytes"])]
        self.handle = ctypes.c_void_p()
        st = program.fn["create_in"](*(b.ctypes.data for b in self.memory), program.image.ctypes.data,
                                     program.image_bytes, ctypes.byref(self.handle))
        if st != 0:
            raise RequestError(f"no program context: {m['prefix']}_create_in: {program.status(st)}")
        self.sizes = {name: hi for name, (_, hi) in program.size_range.items()}   # each starts at its MAX
        self.last_use = time.monotonic()

    def _check(self, st, what):
        if st != 0:
            detail = self.program.fn["error"](self.handle).decode()
            raise RequestError(f"{what}: {self.program.status(st)}" + (f" ({detail})" if detail else ""))

    def shape(self, name):
        v = self.program.vars[name]
        dims = (ctypes.c_uint64 * max(1, len(v["shape"])))()
        self._check(self.program.fn["shape"](self.handle, v["id"], dims, len(v["shape"])), f"shape of {name}")
        return tuple(int(dims[k]) for k in range(len(v["shape"])))

    def run(self, feeds):
        """One step on `feeds` (input name -> array): {output name: array}."""
        p = self.program
        wanted = {}
        for size, (name, axis) in p.size_source.items():
            value = feeds[name].shape[axis]
            lo, hi = p.size_range[size]
            if not lo <= value <= hi:
                raise RequestError(f"input {name}: dim {axis} is {value}, which sets the size {size}: "
                                   f"the program was built for {size} in {lo}..{hi}")
            wanted[size] = value
        for size, value in wanted.items():
            if self.sizes[size] != value:
                self._check(p.fn["set_size"](self.handle, p.size_index[size], value), f"size {size} = {value}")
                self.sizes[size] = value
        for name, array in feeds.items():
            v = p.vars[name]
            expected = self.shape(name)
            if tuple(array.shape) != expected:
                at = ", ".join(f"{k}={x}" for k, x in sorted(wanted.items()))
                raise RequestError(f"input {name}: shape {list(array.shape)}, but the program takes "
                                   f"{list(expected)} ({name}: {v['dtype']}{list(v.get('dims', v['shape']))}"
                                   + (f" at {at}" if at else "") + ")")
            data = np.ascontiguousarray(array, NUMPY_TYPES[v["dtype"]])
            self._check(p.fn["set"](self.handle, v["id"], data.ctypes.data, data.nbytes), f"set {name}")
        self._check(p.fn["step"](self.handle), "step")
        out = {}
        for name in p.manifest["serving"]["outputs"]:
            v = p.vars[name]
            result = np.empty(self.shape(name), NUMPY_TYPES[v["dtype"]])
            self._check(p.fn["get"](self.handle, v["id"], result.ctypes.data, result.nbytes), f"get {name}")
            out[name] = result
        self.last_use = time.monotonic()
        return out

    def reset(self):
        self._check(self.program.fn["reset"](self.handle), "reset")

    def close(self):
        if self.handle:
            self.program.fn["destroy"](self.handle)
            self.handle = ctypes.c_void_p()


def _error(message):
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))


def _flag(request, name):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return t is not None and bool(t.as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        folder = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(folder, config["parameters"]["openinfer_manifest"]["string_value"])) as f:
            manifest = json.load(f)
        self.program = Program(folder, manifest)
        self.serving = manifest["serving"]
        self.name = config["name"]
        self.logger = pb_utils.Logger
        self.lock = threading.Lock()
        if self.serving["stateful"]:
            self.sequences = {}         # correlation ID -> Context
            self.done = threading.Event()
            self.sweeper = threading.Thread(target=self._sweep, daemon=True)
            self.sweeper.start()
        else:
            self.context = Context(self.program)

    # -- stateless -------------------------------------------------------------------------
    def _feeds(self, request):
        feeds = {}
        for name in self.serving["inputs"]:
            t = pb_utils.get_input_tensor_by_name(request, name)
            if t is None:
                raise RequestError(f"input {name} is missing")
            feeds[name] = t.as_numpy()
        return feeds

    @staticmethod
    def _response(outputs):
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(k, v) for k, v in outputs.items()])

    def _run_batched(self, requests):
        """Requests whose non-batch dims agree are concatenated and run as one step."""
        responses = [None] * len(requests)
        groups = {}
        for k, request in enumerate(requests):
            try:
                feeds = self._feeds(request)
            except RequestError as e:
                responses[k] = _error(str(e))
                continue
            key = tuple((n, a.shape[1:], a.dtype.str) for n, a in sorted(feeds.items()))
            groups.setdefault(key, []).append((k, feeds))
        for members in groups.values():
            try:
                joined = {n: np.concatenate([f[n] for _, f in members]) for n in self.serving["inputs"]}
                outputs = self.context.run(joined)
            except RequestError as e:
                if len(members) == 1:
                    responses[members[0][0]] = _error(str(e))
                    continue
                for k, f in members:        # one bad request must not fail the others: run each alone
                    try:
                        responses[k] = self._response(self.context.run(f))
                    except RequestError as alone:
                        responses[k] = _error(str(alone))
                continue
            start = 0
            for k, f in members:
                rows = next(iter(f.values())).shape[0]
                responses[k] = self._response({n: o[start:start + rows] for n, o in outputs.items()})
                start += rows
        return responses

    # -- sequences -------------------------------------------------------------------------
    def _sweep(self):
        """Frees the contexts of sequences idle past Triton's release time (Triton does not tell
        the model when it releases one)."""
        idle = self.serving["sequence_idle_s"]
        while not self.done.wait(min(idle / 4, 1.0)):
            now = time.monotonic()
            with self.lock:
                for cid, ctx in list(self.sequences.items()):
                    if now - ctx.last_use > idle:
                        self._release(cid, f"idle for {idle:g} s")

    def _release(self, cid, why):
        self.sequences.pop(cid).close()
        self.logger.log_info(f"{self.name}: sequence {cid} {why}: its context freed "
                             f"({len(self.sequences)} live)")

    def _run_sequence(self, request):
        corrid = pb_utils.get_input_tensor_by_name(request, "CORRID")
        cid = int(corrid.as_numpy().reshape(-1)[0]) if corrid is not None else 0
        start, end = _flag(request, "START"), _flag(request, "END")
        with self.lock:
            ctx = self.sequences.get(cid)
            if start:
                if ctx is None:
                    if len(self.sequences) >= self.serving["sequences"]:
                        # Triton runs no more live sequences than that here: the oldest was
                        # released by it between two sweeps
                        self._release(min(self.sequences, key=lambda c: self.sequences[c].last_use), "replaced")
                    ctx = self.sequences[cid] = Context(self.program)
                else:
                    ctx.reset()
            elif ctx is None:
                raise RequestError(f"sequence {cid} has no state on this instance: its first request must set "
                                   "sequence_start (or the sequence was released after "
                                   f"{self.serving['sequence_idle_s']:g} s idle)")
            try:
                outputs = ctx.run(self._feeds(request))
            finally:
                if end:
                    self._release(cid, "ended")
        return self._response(outputs)

    def execute(self, requests):
        if not self.serving["stateful"]:
            if self.serving["batch"]:
                return self._run_batched(requests)
            responses = []
            for request in requests:
                try:
                    responses.append(self._response(self.context.run(self._feeds(request))))
                except RequestError as e:
                    responses.append(_error(str(e)))
            return responses
        responses = []
        for request in requests:
            try:
                responses.append(self._run_sequence(request))
            except RequestError as e:
                responses.append(_error(str(e)))
        return responses

    def finalize(self):
        if self.serving["stateful"]:
            self.done.set()
            with self.lock:
                for ctx in self.sequences.values():
                    ctx.close()
                self.sequences.clear()
        else:
            self.context.close()
