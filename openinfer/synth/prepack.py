"""Pre-packed weights: a kernel that reads a model constant in a layout of its own (the AVX GEMM's
column panels of B) gets that constant packed once, at create time, instead of on every call.

The target says, per kernel request, which inputs it would take pre-packed and how many elements
the packed form has (`packed_inputs(request) -> {input index: elements}`). For every call whose
such input is a model constant (a weight tensor or an entry of a prefix table), the pass

- adds one buffer of storage `packed` per (constant, kernel request): global and placed in the
  persistent region (which lives as long as the program); for a prefix table, a dense table of
  packed entries over the table's indices, addressed by the call's own index expressions;
- points the call at that buffer and at a copy of its request with `packed=(input,)`, which the
  target renders as a kernel reading the packed layout plus a pack function that create() runs
  on every entry.

Calls whose input is not a model constant (a volatile or persistent value, a constant without
model data) keep the kernel that packs as it goes. Packing costs the packed bytes in the
persistent region; the weights' own pages are then only read at create time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from . import program as P
from .lower import c_name

PackedInputs = Callable[[P.KernelRequest], dict[int, int]]


class _Prepacker:
    def __init__(self, prog: P.Program, packed_inputs: PackedInputs):
        self.p = prog
        self.packed_inputs = packed_inputs
        self.kernels = list(prog.kernels)
        self.kernel_ids = {k: i for i, k in enumerate(self.kernels)}
        self.buffers = dict(prog.buffers)
        self.globals = dict(prog.frames.get("global", {}))
        self.packed: dict[tuple[str, int, int], str] = {}     # (constant, kernel, input) -> variable

    def kernel_id(self, req: P.KernelRequest) -> int:
        if req not in self.kernel_ids:
            self.kernel_ids[req] = len(self.kernels)
            self.kernels.append(req)
        return self.kernel_ids[req]

    def constant_shape(self, var: str) -> tuple[int, ...] | None:
        """The index sizes of a model constant (() for a plain weight), None for anything else."""
        if var in self.p.prefix_tables:
            return self.p.prefix_tables[var].sizes
        name = self.p.frames.get("global", {}).get(var)
        if name is not None and self.p.buffers[name].storage == "weight":
            return ()
        return None

    def call(self, s: P.Call) -> P.Call:
        req = self.p.kernels[s.kernel]
        wanted = {i: n for i, n in self.packed_inputs(req).items() if self.constant_shape(s.inputs[i].var) is not None}
        if not wanted:
            return s
        packed_req = replace(req, packed=tuple(sorted(wanted)))
        kid = self.kernel_id(packed_req)
        inputs = list(s.inputs)
        for i, numel in wanted.items():
            source = s.inputs[i].var
            if (source, kid, i) not in self.packed:
                name = f"pk{len(self.packed)}_{c_name(source)}"
                var = self.packed[source, kid, i] = f"{source}#{name}"     # '#': apart from graph names
                self.buffers[name] = P.Buffer(name, var, "global", req.inputs[i].dtype,
                                              self.constant_shape(source) + (numel,), "packed",
                                              packed_from=(source, kid, i))
                self.globals[var] = name
            inputs[i] = replace(s.inputs[i], var=self.packed[source, kid, i])
        return replace(s, kernel=kid, inputs=tuple(inputs))

    def stmts(self, stmts) -> tuple[P.Statement, ...]:
        out = []
        for s in stmts:
            if isinstance(s, P.Call):
                s = self.call(s)
            elif isinstance(s, P.Loop):
                s = replace(s, body=self.stmts(s.body))
            out.append(s)
        return tuple(out)


def prepack(prog: P.Program, packed_inputs: PackedInputs) -> P.Program:
    pk = _Prepacker(prog, packed_inputs)
    blocks = {name: pk.stmts(stmts) for name, stmts in prog.blocks.items()}
    if pk.buffers == prog.buffers:
        return prog
    blocks, kernels, new_id = P.prune_kernels(blocks, pk.kernels)
    buffers = {name: replace(b, packed_from=(b.packed_from[0], new_id[b.packed_from[1]], b.packed_from[2]))
               if b.packed_from else b for name, b in pk.buffers.items()}
    frames = dict(prog.frames)
    frames["global"] = pk.globals
    return replace(prog, blocks=blocks, buffers=buffers, frames=frames, kernels=kernels)
