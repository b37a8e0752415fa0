"""The Vulkan renderer: GLSL compute shaders + a C host program on hal/oi_hal_vulkan.

Same ABI as the C targets (templates/c/model.h.j2 is rendered unchanged), different insides:

- Data lives on the device: one arena buffer (pinned + planned regions at the memory plan's
  offsets), one persistent buffer, one weights buffer (every model tensor the program reads, each
  at a 256-byte aligned offset of a static layout, uploaded once at create from the mmapped
  .oinf), and a 4-byte kernel status buffer.
- Each call site's kernel gets one descriptor set per (frame it runs in x prefix-table entry
  combination), created at create() from a static table (every offset is known here); a dispatch
  picks its set by the frame's index and the run-time prefix index (range- and NULL-checked like
  the C path). Push constants carry run-time attributes only.
- Table reads/writes, copies, transfers and (re)initialisation are vkCmdCopyBuffer /
  vkCmdFillBuffer / vkCmdUpdateBuffer with offsets computed on the host.
- Values the host needs (cache indices, loop bounds, branch conditions, run-time attributes,
  counters it increments) come from host shadows of scalar variables: valid after set(), frame
  initialisation, reset, a copy from a valid shadow and host-computed increments; invalidated
  when GPU work writes the variable; read through `sh_local` / `sh_global`, which refresh an
  invalid shadow with one submission + a small readback. A decode step whose indices are
  persistent counters therefore records the whole step into one submission.

The schedule's statements reuse CRenderer's resolution (int_expr, table bounds and checks, the
schedule.j2 macros); only the statements that touch memory are rendered differently here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...dims import Dim, host_expr
from ...errors import SynthesisError
from ...resources import hal_dir
from ...synth import program as P
from ...synth.lower import c_name
from ...synth.memplan import MemoryPlan
from ..base import RenderedProgram, Target, register
from ..c.kernels.common import ctype
from ..c.renderer import Check, HostRenderer, StatementView, fill_pattern, scalar_step_line, scalar_to, size_expr
from ..env import c_string, render
from .glsl import Caps, Shader, emit_shader
from .glsl.fusions import takes_epilogue, takes_prologue, takes_rope, takes_transposed

#: offsets of model tensors in the weights buffer (a multiple of every device's
#: minStorageBufferOffsetAlignment, which is at most 256)
WEIGHT_ALIGN = 256
#: buffer ids of the static descriptor tables (templates/vulkan/model.c.j2 buf_of())
ARENA, PERSISTENT, WEIGHTS, STATUS = 0, 1, 2, 3
_FEATURE_BITS = {"int64": "OI_VK_FEATURE_INT64", "fp64": "OI_VK_FEATURE_FP64",
                 "storage8": "OI_VK_FEATURE_STORAGE8", "storage16": "OI_VK_FEATURE_STORAGE16",
                 "subgroup": "OI_VK_FEATURE_SUBGROUP", "denorm32": "OI_VK_FEATURE_DENORM32",
                 "float16": "OI_VK_FEATURE_FLOAT16", "coopmat": "OI_VK_FEATURE_COOPMAT"}


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@register("vulkan")
class VulkanTarget(Target):
    """GLSL compute shaders and a C host program on hal/oi_hal_vulkan, for a Vulkan device."""

    def __init__(self, device):
        super().__init__(device)
        self.caps = Caps.from_device(device)

    @property
    def label(self) -> str:
        return "vulkan"

    def fuses_elementwise(self) -> bool:
        """Element-wise chains fused by openinfer/synth/fusion.py become one `fused` GLSL kernel."""
        return True

    def takes_epilogue(self, req: P.KernelRequest) -> bool:
        """Which matmul kernels take an element-wise epilogue (openinfer/synth/fusion.py): on a
        GPU each fused call is one dispatch and one barrier fewer."""
        return takes_epilogue(req)

    def takes_prologue(self, req: P.KernelRequest) -> bool:
        """Which matmul kernels normalise their input rows themselves (openinfer/synth/fusion.py
        `fold_norms`): a layer's norm and the GEMVs that read it become those GEMVs alone, one
        dispatch and one barrier fewer."""
        return takes_prologue(req)

    def reads_transposed(self, req: P.KernelRequest) -> bool:
        """Which kernels read an operand through a transpose (openinfer/synth/fusion.py
        `fold_transposes`): sdpa's keys and values, read from a cache's [Sk, heads, D] rows
        without the transpose kernel, one dispatch fewer each and a barrier fewer per layer."""
        return takes_transposed(req)

    def takes_rope_epilogue(self, req: P.KernelRequest) -> bool:
        """Which matmul kernels apply a rope to their result as they store it
        (openinfer/synth/fusion.py `fold_rope`): the GEMVs, whose workgroups then take column
        pairs. A decoder layer's rope stage goes: q and k leave the projections rotated."""
        return takes_rope(req, self.caps)

    def reads_tables_in_place(self) -> bool:
        """Kernels may read a persistent table's rows under leading indices in place (a binding of
        that part of the persistent buffer): openinfer/synth/table_views.py makes cache reads views."""
        return True

    def render(self, prog: P.Program, mem: MemoryPlan, *, embed_weights: bool) -> RenderedProgram:
        return VulkanRenderer(prog, mem, self.device, embed_weights=embed_weights).rendered()

    def hal_sources(self) -> list[Path]:
        """The CPU HAL and its Vulkan part."""
        hal = hal_dir()
        return [*super().hal_sources(), hal / "include" / "oi_hal_vulkan.h", hal / "src" / "oi_hal_vulkan.c"]

    def source_names(self, name: str) -> tuple[str, ...]:
        """NAME.h, NAME.c and NAME_shaders.c (its SPIR-V compiled in: openinfer/synthesizer.py)."""
        return (f"{name}.h", f"{name}.c", f"{name}_shaders.c")


class VulkanRenderer(HostRenderer):
    """One program as GLSL kernels and a Vulkan host schedule."""

    def __init__(self, prog: P.Program, plan: MemoryPlan, device, *, embed_weights: bool = False):
        super().__init__(prog, plan, device, embed_weights=embed_weights)
        self.caps = Caps.from_device(device)
        alignment = device.doc["limits"].get("min_storage_buffer_offset_alignment")
        if alignment and 64 % alignment:
            raise SynthesisError(f"{self.caps.device}: limits.min_storage_buffer_offset_alignment = {alignment} "
                                 "does not divide 64, the alignment of arena and persistent buffers; the Vulkan "
                                 "target cannot bind operands at such offsets")
        self.frames_all = ["entry"] + list(prog.consumers)
        self.frame_index = {f: i for i, f in enumerate(self.frames_all)}
        # frame-local variables (and scratch buffers) get one slot each: frame_off[frame][slot]
        keys = sorted({k for fr in self.frames_all for k in prog.frames.get(fr, {})})
        self.slot = {k: i for i, k in enumerate(keys)}
        self.wlayout: dict[str, int] = {}
        off = 0
        for key in prog.weight_keys:
            t = prog.weights[key]
            self.wlayout[key] = off
            off = _align(off + t.dtype.storage_nbytes(t.numel), WEIGHT_ALIGN)
        self.weights_bytes = off
        self.shadow_vars = self._shadow_vars()
        local = sorted(v for v in self.shadow_vars if not self._is_global(v))
        self.local_sh = {v: i for i, v in enumerate(local)}
        self.global_sh = {v: i for i, v in enumerate(sorted(v for v in self.shadow_vars if self._is_global(v)))}
        # descriptor sets: per call site, frame (all frames) and prefix-entry combination
        self.set_rows: list[dict | None] = []
        self._shaders: list[Shader] | None = None

    # ------------------------------------------------------------------ kernels
    def shaders(self) -> list[Shader]:
        """One compute shader per kernel; SynthesisError names the node and what the device lacks."""
        if self._shaders is None:
            first: dict[int, P.Call] = {}
            for stmts in self.p.blocks.values():
                for s in _walk(stmts):
                    if isinstance(s, P.Call):
                        first.setdefault(s.kernel, s)
            out = []
            for i, (req, name) in enumerate(zip(self.p.kernels, self.kernel_names, strict=True)):
                call = first.get(i)
                where, names = "", ()
                if call is not None:
                    loc = self.p.node_locations.get(call.node, f"node {call.node}")
                    names = tuple(o.var for o in call.inputs) + (call.result.var,)
                    where = f"{loc}: in `{call.desc}`: "
                out.append(emit_shader(req, name, self.caps, where, names))
            self._shaders = out
        return self._shaders


    # ------------------------------------------------------------------ storage
    def _is_global(self, var: str) -> bool:
        return var in self.p.frames.get("global", {}) or var in self.p.prefix_tables

    def addr(self, frame: str, op: P.Operand, view: StatementView | None = None) -> tuple[str, str]:
        """(VkBuffer, byte offset) C expressions of operand `op` as seen from `frame`."""
        if op.var in self.p.prefix_tables:
            flat = self.prefix_flat(frame, op, view)
            expr = f"poff_{c_name(op.var)}[{flat}]"
            if view is not None and not all(isinstance(e, P.Lit) for e in op.indices):
                view.checks.append(Check(f"{expr} == UINT64_MAX", "OI_ERR_INDEX_OUT_OF_RANGE",
                                         f"prefix table `{op.var}` has no model tensor for this index"))
            return "m->weights.buffer", expr
        if op.var in self.p.frames.get(frame, {}):
            return "m->arena.buffer", f"frame_off[f->index][{self.slot[op.var]}]"
        buf = self.global_buffer(op.var)
        if buf is None:
            raise KeyError(f"{op.var} has no buffer in frame {frame}")
        return self.static_addr(buf)

    def static_addr(self, buf: P.Buffer) -> tuple[str, str]:
        if buf.storage == "weight":
            return "m->weights.buffer", f"{self.wlayout[buf.model_key]}u"
        if buf.storage == "persistent":
            return "m->persistent.buffer", f"{self.plan.offset(buf.name)}u"
        return "m->arena.buffer", f"{self.plan.offset(buf.name)}u"

    def _index_sizes(self, op: P.Operand) -> tuple[int, ...]:
        """The sizes of the indices operand `op` carries: a prefix table's, or a persistent
        table's leading ones (a kernel reading the rows under them: openinfer/synth/table_views.py)."""
        if op.var in self.p.prefix_tables:
            return self.p.prefix_tables[op.var].sizes
        if op.var in self.p.tables and op.indices:
            return self.p.tables[op.var].sizes[:len(op.indices)]
        return ()

    def _entries(self, op: P.Operand) -> int:
        """How many entries operand `op` chooses among by its indices (0: none)."""
        sizes = self._index_sizes(op)
        return int(np.prod(sizes, dtype=np.int64)) if sizes else 0

    def index_checks(self, frame: str, op: P.Operand, view: StatementView) -> None:
        """The range checks of an indexed operand's run-time indices, added to `view`."""
        if op.var in self.p.prefix_tables:
            self.prefix_flat(frame, op, view)
            return
        lay = self.p.tables[op.var]
        names = self._index_names(op.var)
        for k, e in enumerate(op.indices):
            self._table_index(frame, lay, k, e, view, names[k])

    def binding(self, frame: str, op: P.Operand, combo: tuple[int, ...] | None) -> tuple[int, int, int] | None:
        """(buffer id, offset, bytes) of an operand in `frame`; prefix tables at entry `combo`
        (None: the model has no tensor there), persistent tables' rows under leading indices at
        entry `combo` of those indices."""
        if op.var in self.p.prefix_tables:
            pt = self.p.prefix_tables[op.var]
            key = pt.keys[combo[0]]
            if key is None:
                return None
            return WEIGHTS, self.wlayout[key], pt.dtype.storage_nbytes(int(np.prod(pt.shape, dtype=np.int64)))
        if op.var in self.p.tables and op.indices:        # the rows under entry `combo` of the leading indices
            lay = self.p.tables[op.var]
            rows = int(np.prod(lay.sizes[len(op.indices):], dtype=np.int64))
            nbytes = rows * self._entry_bytes(op.var)
            return PERSISTENT, self.plan.offset(self.buffer_of("global", op.var).name) + combo[0] * nbytes, nbytes
        if op.var in self.p.frames.get(frame, {}):
            buf = self.p.buffer(frame, op.var)
            return ARENA, self.plan.offset(buf.name), buf.nbytes
        buf = self.global_buffer(op.var)
        if buf.storage == "weight":
            return WEIGHTS, self.wlayout[buf.model_key], buf.nbytes
        return (PERSISTENT if buf.storage == "persistent" else ARENA), self.plan.offset(buf.name), buf.nbytes

    # ------------------------------------------------------------------ shadows
    def _shadow_vars(self) -> set[str]:
        """Scalar variables whose value the host reads, closed under copies into them."""
        need: set[str] = set()
        copies: list[tuple[str, str]] = []

        def ints(exprs):
            for e in exprs:
                if isinstance(e, P.ScalarOf):
                    need.add(e.var)

        for stmts in self.p.blocks.values():
            for s in _walk(stmts):
                if isinstance(s, P.Loop):
                    ints((s.start, s.end))
                elif isinstance(s, P.Branch) and s.cond:
                    need.add(s.cond)
                elif isinstance(s, P.Call):
                    need.update(v for _, v in s.runtime_attrs)
                    for o in (*s.inputs, s.output):
                        ints(o.indices)
                elif isinstance(s, P.Copy):
                    ints(s.src.indices)
                    ints(s.dst.indices)
                    copies.append((s.dst.var, s.src.var))
                elif isinstance(s, P.TableRead):
                    for sel in s.select:
                        ints((sel.start, sel.end) if isinstance(sel, P.Slice) else (sel,))
                elif isinstance(s, P.TableWrite):
                    ints(s.index)
                    ints(s.src.indices)
                elif isinstance(s, P.StateReset):
                    ints(s.prefix)
                elif isinstance(s, P.ScalarStep):
                    need.add(s.var)
        for c in self.p.consumers:
            copies += [(v, v) for v in self.consumer_writes(c)]
        changed = True
        while changed:
            changed = False
            for dst, src in copies:
                if dst in need and src not in need and src not in self.p.prefix_tables and self._scalar(src):
                    need.add(src)
                    changed = True
        return {v for v in need if self._scalar(v)}

    def _scalar(self, var: str) -> bool:
        for fr in self.p.frames.values():
            if var in fr:
                return self.p.buffers[fr[var]].numel == 1
        return False

    def sh_ptr(self, frame: str, var: str) -> str:
        """C expression: a pointer (of the variable's C type) to its valid host shadow."""
        ct = ctype(self.dtype_of(var))
        if var in self.global_sh:
            bid, off = self._global_loc(var)
            return f"((const {ct} *)sh_global(m, {self.global_sh[var]}, {bid}, {off}u, {self._sh_bytes(var)}u))"
        return f"((const {ct} *)sh_local(m, f, {self.local_sh[var]}, {self.slot[var]}, {self._sh_bytes(var)}u))"

    def _global_loc(self, var: str) -> tuple[int, int]:
        buf = self.global_buffer(var)
        if buf.storage == "weight":
            return WEIGHTS, self.wlayout[buf.model_key]
        return (PERSISTENT if buf.storage == "persistent" else ARENA), self.plan.offset(buf.name)

    def _sh_bytes(self, var: str) -> int:
        d = self.dtype_of(var)
        return max(1, min(8, d.storage_nbytes(1)))

    def sh_ref(self, var: str, frame_expr: str = "f") -> tuple[str, str]:
        """(value lvalue, valid-flag lvalue) of a shadow; frame-local ones in `frame_expr`."""
        if var in self.global_sh:
            i = self.global_sh[var]
            return f"m->gsh[{i}]", f"m->gsh_ok[{i}]"
        i = self.local_sh[var]
        return f"{frame_expr}->sh[{i}]", f"{frame_expr}->sh_ok[{i}]"

    def sh_invalidate(self, var: str, v: StatementView, frame_expr: str = "f") -> None:
        if var in self.shadow_vars:
            v.lines.append(f"{self.sh_ref(var, frame_expr)[1]} = 0;")

    def sh_copy(self, dst: str, src: str, v: StatementView, dst_frame: str = "f", src_frame: str = "f") -> None:
        """After a device copy src -> dst: the destination's shadow follows the source's."""
        if dst not in self.shadow_vars:
            return
        if src not in self.shadow_vars:
            self.sh_invalidate(dst, v, dst_frame)
            return
        dv, dok = self.sh_ref(dst, dst_frame)
        sv, sok = self.sh_ref(src, src_frame)
        v.lines.append(f"{dv} = {sv};")
        v.lines.append(f"{dok} = {sok};")

    # ------------------------------------------------------------------ operand resolution (host reads)
    def ptr(self, frame: str, op: P.Operand, view: StatementView | None = None) -> str:
        """Host reads of scalar variables (indices, bounds, conditions, run-time attributes) go
        through their shadows; everything else is addressed with `addr`."""
        if op.indices or op.var not in self.shadow_vars:
            raise SynthesisError(f"internal: the host reads `{op.var}`, which has no shadow")
        return self.sh_ptr(frame, op.var)

    # ------------------------------------------------------------------ statements
    def view(self, frame: str, s: P.Statement, block: str) -> StatementView:
        if isinstance(s, P.Call):
            v = StatementView("simple", s.node, s.desc)
            self.call(frame, s, block, v)
            return v
        if isinstance(s, P.Copy):
            v = StatementView("simple", s.node, s.desc)
            sb, so = self.addr(frame, s.src, v)
            db, do = self.addr(frame, s.dst, v)
            nbytes = size_expr(self.buffer_of(frame, s.dst.var).live_nbytes)
            v.lines.append(f"OI_VK_NODE({s.node}, oi_vk_copy(&m->vk, {sb}, {so}, {db}, {do}, {nbytes}));")
            self.sh_copy(s.dst.var, s.src.var if not s.src.indices else "", v)
            return v
        if isinstance(s, P.Yield) and s.consumers:
            v = StatementView("simple", s.node, s.desc)
            self.start_consumers(frame, s, v)
            return v
        return super().view(frame, s, block)

    def call(self, frame: str, s: P.Call, block: str, v: StatementView) -> None:
        sh = self.shaders()[s.kernel]
        req = self.p.kernels[s.kernel]
        operands = [*s.inputs, s.output]
        # operands with run-time indices (prefix tables, table rows) select among the site's sets:
        # one set per combination of the values of the distinct run-time indices (wq[l] and
        # attn_norm[l] choose by l alone, Vc[l, pos] by l and pos), each up to the smallest size
        # it indexes (the checks refuse larger values)
        index_sizes: dict[P.IntExpr, int] = {}
        row_checks = StatementView("simple", s.node, s.desc)     # (those of a cache.write's row)
        for o in operands:
            if self._entries(o) and not all(isinstance(e, P.Lit) for e in o.indices):
                self.index_checks(frame, o, row_checks if o is s.output and s.store_node is not None else v)
                for size, e in zip(self._index_sizes(o), o.indices, strict=True):
                    if not isinstance(e, P.Lit):
                        index_sizes[e] = min(index_sizes.get(e, size), size)
        combos = int(np.prod(list(index_sizes.values()), dtype=np.int64)) if index_sizes else 1
        base = len(self.set_rows)
        frames = [fr for fr in self.frames_all if block in self.p.frame_blocks.get(fr, ())] or ["entry"]
        for fr in self.frames_all:
            for c in range(combos):
                self.set_rows.append(self._set_row(fr, s, operands, index_sizes, c, sh) if fr in frames else None)
        # host side: the set index (checked), push constants, the dispatch
        flat = "0"
        for e, size in index_sizes.items():
            ix = self.int_expr(frame, e)
            flat = f"({ix})" if flat == "0" else f"({flat}) * {size} + ({ix})"
        rt = dict(s.runtime_attrs)
        lines = [f"if ({c.cond}) return oi_fail(m, {c.status}, {s.store_node}, {c_string(c.message)});"
                 for c in row_checks.checks] + ["{"]
        for attr, dtype in req.runtime_attrs:
            target = "double" if dtype.is_float else "int64_t"
            lines.append(f"    const {target} rt_{attr} = "
                         f"{scalar_to(dtype, self.ptr(frame, P.Operand(rt[attr])), target)};")
        push = "NULL"
        if sh.push:
            values = ", ".join(f".{f.name} = {f.expr.replace('NODE', str(s.node))}" for f in sh.push)
            lines.append(f"    const push_k{s.kernel} push = {{{values}}};")
            push = "&push"
        index = f"{base}u + f->index * {combos}u" + (f" + (uint32_t)({flat})" if index_sizes else "")
        lines.append(f"    const uint32_t set_index = {index};")
        lines.append("    VkDescriptorSet set_ = m->sets[set_index];")
        weights = [o for o in operands
                   if o.var in self.p.prefix_tables and not all(isinstance(e, P.Lit) for e in o.indices)]
        if weights:
            names = ", ".join(f"`{o.var}`" for o in weights)
            lines.append(f"    if (!set_) return oi_fail(m, OI_ERR_INDEX_OUT_OF_RANGE, {s.node}, "
                         f"\"prefix table {names} has no model tensor for this index\");")
        if isinstance(sh.groups, Dim):      # a count that depends on a dynamic size
            lines.append("    uint32_t gx_, gy_;")
            lines.append(f"    split_groups((uint64_t)({host_expr(sh.groups)}), &gx_, &gy_);")
            gx, gy, gz = "gx_", "gy_", "1u"
        else:
            gx, gy, gz = (f"{g}u" for g in sh.groups)
        lines.append(f"    OI_VK_NODE({s.node}, oi_vk_dispatch(&m->vk, &m->pipes[{s.kernel}], set_, {push}, "
                     f"{gx}, {gy}, {gz}, &m->access[set_first[set_index]], {sh.bindings}u));")
        lines.append("}")
        v.lines.extend(lines)
        if s.copy_to is not None:
            sb, so = self.addr(frame, s.output)
            db, do = self.addr(frame, s.copy_to, v)
            nbytes = size_expr(self.buffer_of(frame, s.copy_to.var).live_nbytes)
            v.lines.append(f"OI_VK_NODE({s.node}, oi_vk_copy(&m->vk, {sb}, {so}, {db}, {do}, {nbytes}));")
        self.sh_invalidate(s.result.var, v)

    def _set_row(self, frame, s: P.Call, operands, index_sizes: dict, combo: int, sh: Shader) -> dict | None:
        value: dict[P.IntExpr, int] = {}            # each run-time index's value in combination `combo`
        rest = combo
        for e, size in reversed(index_sizes.items()):
            value[e] = rest % size
            rest //= size
        binds = []
        for o in operands:
            if self._entries(o):
                entry = 0
                for size, e in zip(self._index_sizes(o), o.indices, strict=True):
                    entry = entry * size + (e.value if isinstance(e, P.Lit) else value[e])
                b = self.binding(frame, o, (entry,))
            else:
                b = self.binding(frame, o, None)
            if b is None:
                return None
            if b[2] > self.caps.max_range:
                raise SynthesisError(f"{self.p.node_locations.get(s.node, s.desc)}: `{o.var}` takes {b[2]} bytes, more "
                                     f"than one storage buffer binding may address on {self.caps.device} "
                                     f"(limits.max_storage_buffer_range_bytes = {self.caps.max_range})")
            binds.append(b)
        if sh.fallible:
            binds.append((STATUS, 0, 4))
        return {"kernel": s.kernel, "binds": binds}

    def table_read(self, frame: str, s: P.TableRead, v: StatementView) -> None:
        lay = self.p.tables[s.var]
        buf = self.buffer_of("global", s.var)
        entry = self._entry_bytes(s.var)
        decl, bounds, lead_dims, dynamic, assign = self.table_read_bounds(frame, s, v)
        lines = ["{"] + [f"    {d}" for d in decl]
        lines += [f"    if ({c.cond}) return oi_fail(m, {c.status}, {s.node}, {c_string(c.message)});"
                  for c in v.checks]
        lines += [f"    {a}" for a in assign]      # (before the dispatches after it are recorded)
        v.checks = []
        if dynamic:
            lines += [f"    m->shape_{c_name(s.dst)}[{k}] = (uint64_t)(e{pos} - b{pos});"
                      for k, pos in enumerate(lead_dims)]
        db, do = self.addr(frame, P.Operand(s.dst))
        toff = self.plan.offset(buf.name)
        lines.append("    uint64_t off = 0;")
        indent = "    "
        for pos, (b, e) in enumerate(bounds[:-1]):
            lines.append(f"{indent}for (int64_t j{pos} = {b}; j{pos} < {e}; ++j{pos}) {{")
            indent += "    "
        last = len(bounds) - 1
        flat = self._flat(lay.sizes, [f"j{k}" for k in range(last)] + [f"b{last}"])
        run = f"(uint64_t)(e{last} - b{last}) * {entry}u"
        # the innermost index is contiguous in the table: one copy per run of rows
        lines.append(f"{indent}OI_VK_NODE({s.node}, oi_vk_copy(&m->vk, m->persistent.buffer, "
                     f"{toff}u + (uint64_t)({flat}) * {entry}u, {db}, {do} + off, {run}));")
        lines.append(f"{indent}off += {run};")
        for _ in bounds[:-1]:
            indent = indent[:-4]
            lines.append(f"{indent}}}")
        lines.append("}")
        v.lines.extend(lines)
        self.sh_invalidate(s.dst, v)

    def _entry_bytes(self, var: str) -> int:
        lay = self.p.tables[var]
        d = self.buffer_of("global", var).dtype
        n = int(np.prod(lay.entry_shape, dtype=np.int64))
        if (n * d.bits) % 8:
            raise SynthesisError(f"table `{var}`: an entry of {n} {d.name} values is not a whole number of bytes; "
                                 "the Vulkan target copies table entries byte-wise")
        return n * d.bits // 8

    def table_write(self, frame: str, s: P.TableWrite, v: StatementView) -> None:
        lay = self.p.tables[s.var]
        buf = self.buffer_of("global", s.var)
        names = self._index_names(s.var)
        ix = [self._table_index(frame, lay, pos, e, v, names[pos]) for pos, e in enumerate(s.index)]
        entry = self._entry_bytes(s.var)
        flat = self._flat(lay.sizes, [f"({i})" for i in ix])
        sb, so = self.addr(frame, s.src, v)
        v.lines.append(f"OI_VK_NODE({s.node}, oi_vk_copy(&m->vk, {sb}, {so}, m->persistent.buffer, "
                       f"{self.plan.offset(buf.name)}u + (uint64_t)({flat}) * {entry}u, {entry}u));")

    def scalar_step(self, s: P.ScalarStep, v: StatementView) -> None:
        buf = self.buffer_of("global", s.var)
        i = self.global_sh[s.var]
        # computed on the host (its shadow is made valid first), then written in stream order
        off = self.plan.offset(buf.name)
        v.lines.append(f"(void)sh_global(m, {i}, {PERSISTENT}, {off}u, {self._sh_bytes(s.var)}u);")
        v.lines.append(scalar_step_line(f"(({ctype(buf.dtype)} *)&m->gsh[{i}])", buf.dtype, s.amount))
        v.lines.append(f"OI_VK_NODE({s.node}, oi_vk_update(&m->vk, m->persistent.buffer, "
                       f"{self.plan.offset(buf.name)}u, &m->gsh[{i}], 8u));")

    def init_item(self, buf: P.Buffer, bid: str, off: str, nbytes: int | None = None, start: str = "0") -> dict:
        """How to (re)initialise `buf` (or `nbytes` of it from byte `start`) on the device."""
        n = buf.nbytes if nbytes is None else nbytes
        dst = f"{bid}, {off} + {start}" if start != "0" else f"{bid}, {off}"
        if buf.model_key:
            return {"kind": "copy", "dst": dst, "src": f"m->weights.buffer, {self.wlayout[buf.model_key]}u",
                    "nbytes": n}
        if not buf.init:
            return {"kind": "zero", "dst": dst, "nbytes": n}
        pattern, elem = fill_pattern(buf.dtype, buf.init)
        return {"kind": "fill", "dst": dst, "pattern": pattern, "elem": elem, "nbytes": n}

    def state_reset(self, frame: str, s: P.StateReset, v: StatementView) -> None:
        buf = self.buffer_of("global", s.var)
        off = f"{self.plan.offset(buf.name)}u"
        if s.var not in self.p.tables or not s.prefix:
            v.lines += _init_lines(self.init_item(buf, "m->persistent.buffer", off), s.node)
            if s.var in self.global_sh:
                v.lines += self.shadow_init(buf, s.var)
            return
        lay = self.p.tables[s.var]
        names = self._index_names(s.var)
        ix = [self._table_index(frame, lay, pos, e, v, names[pos]) for pos, e in enumerate(s.prefix)]
        rest = int(np.prod(lay.sizes[len(ix):], dtype=np.int64)) * int(np.prod(lay.entry_shape, dtype=np.int64))
        if (rest * buf.dtype.bits) % 8:
            raise SynthesisError(f"`{s.desc}`: resetting part of packed table `{s.var}` is not byte-aligned")
        nbytes = rest * buf.dtype.bits // 8
        flat = self._flat(lay.sizes[:len(ix)], [f"({i})" for i in ix])
        item = self.init_item(buf, "m->persistent.buffer", off, nbytes, f"(uint64_t)({flat}) * {nbytes}u")
        if item["kind"] == "copy":
            item["src"] = f"m->weights.buffer, {self.wlayout[buf.model_key]}u + (uint64_t)({flat}) * {nbytes}u"
        v.lines += _init_lines(item, s.node)

    def shadow_init(self, buf: P.Buffer, var: str, frame_expr: str = "f") -> list[str]:
        """C lines giving `var`'s shadow the value (re)initialisation gives the device copy."""
        val, ok = self.sh_ref(var, frame_expr)
        if buf.model_key:
            k = self.p.weight_keys.index(buf.model_key)
            return [f"{val} = 0;", f"memcpy(&{val}, m->wptr[{k}], {self._sh_bytes(var)}u);", f"{ok} = 1;"]
        if not buf.init:
            return [f"{val} = 0;", f"{ok} = 1;"]
        pattern, elem = fill_pattern(buf.dtype, buf.init)
        return [f"{val} = 0;", f"{{ static const uint8_t pattern[{elem}] = {{{pattern}}}; "
                f"memcpy(&{val}, pattern, {min(elem, 8)}u); }}", f"{ok} = 1;"]

    def start_consumers(self, frame: str, s: P.Yield, v: StatementView) -> None:
        """Consumers run synchronously at the yield (the reference's order), each on snapshots of
        the yielded variables in its own frame, recording into the same command stream."""
        for c in s.consumers:
            fc = f"f_{c_name(c)}"
            v.lines.append(f"OI_TRY(init_{fc}(m));")
            for var in s.vars:
                if var in self.p.frames.get(c, {}):
                    nbytes = self.buffer_of(c, var).nbytes
                    v.lines.append(f"OI_VK_NODE({s.node}, oi_vk_copy(&m->vk, m->arena.buffer, "
                                   f"frame_off[f->index][{self.slot[var]}], m->arena.buffer, "
                                   f"frame_off[{self.frame_index[c]}][{self.slot[var]}], {nbytes}u));")
                    self.sh_copy(var, var, v, dst_frame=f"(&m->{fc})")
        v.lines.append("m->pending = 1;")
        for c in s.consumers:
            v.lines.append(f"OI_TRY(block_{c_name(c)}(m, &m->f_{c_name(c)}));")

    # ------------------------------------------------------------------ files
    def context(self) -> dict:
        self.set_rows = []
        ctx = super().context()       # the views (and with them the descriptor set table) are built here
        p, plan = self.p, self.plan
        shaders = self.shaders()
        features = sorted({f for sh in shaders for f in sh.features})
        frame_inits = []
        for fr in self.frames_all:
            items, shadows = [], []
            for key, bname in sorted(p.frames.get(fr, {}).items()):
                buf = p.buffers[bname]
                if not buf.needs_init:
                    continue
                items.append(self.init_item(buf, "m->arena.buffer", f"{plan.offset(bname)}u"))
                if key in self.local_sh:
                    shadows += self.shadow_init(buf, key, f"(&m->{'entry' if fr == 'entry' else 'f_' + c_name(fr)})")
            # shadows from the last step are stale (dynamic inputs were just set, their shadows stay)
            settable = {v.name for v in p.vars if v.settable}
            invalidate = [i for var, i in sorted(self.local_sh.items(), key=lambda x: x[1])
                          if var in p.frames.get(fr, {}) and not (fr == "entry" and var in settable)]
            frame_inits.append({"cname": "entry" if fr == "entry" else f"f_{c_name(fr)}", "frame": fr,
                                "lines": [ln for it in items for ln in _init_lines(it, None)], "shadows": shadows,
                                "invalidate": invalidate})
        persistent_lines, persistent_shadows, const_lines, const_shadows = [], [], [], []
        for buf in sorted(p.buffers.values(), key=lambda b: b.name):
            if buf.storage == "persistent":
                persistent_lines += _init_lines(self.init_item(buf, "m->persistent.buffer",
                                                               f"{plan.offset(buf.name)}u"), None)
                if buf.var in self.global_sh:
                    persistent_shadows += self.shadow_init(buf, buf.var)
            elif buf.storage == "const":
                const_lines += _init_lines(self.init_item(buf, "m->arena.buffer", f"{plan.offset(buf.name)}u"), None)
                if buf.var in self.global_sh:
                    const_shadows += self.shadow_init(buf, buf.var)
            elif buf.storage == "weight" and buf.var in self.global_sh:
                const_shadows += self.shadow_init(buf, buf.var)
        consumers = []
        for c in p.consumers:
            fc = f"f_{c_name(c)}"
            merge = []
            for var in self.consumer_writes(c):
                if var not in p.frames.get("entry", {}):
                    continue
                merge.append({"src": f"frame_off[{self.frame_index[c]}][{self.slot[var]}]",
                              "dst": f"frame_off[0][{self.slot[var]}]",
                              "nbytes": p.buffers[p.frames[c][var]].nbytes, "shadow": []})
                if var in self.shadow_vars:
                    dv, dok = self.sh_ref(var, "f")
                    sv, sok = self.sh_ref(var, f"(&m->{fc})")
                    merge[-1]["shadow"] = [f"{dv} = {sv};", f"{dok} = {sok};"]
            consumers.append({"block": c, "cname": c_name(c), "field": fc, "merge": merge,
                              "index": self.frame_index[c]})
        inputs, staging = [], 256      # staging: [0, 256) status readback, then one slot per input
        for i, vinfo in enumerate(x for x in p.vars if x.settable):
            buf = self.buffer_of("entry", vinfo.name)
            sh = None
            if vinfo.name in self.local_sh:
                sh = self.sh_ref(vinfo.name, "(&m->entry)")
            inputs.append({"name": vinfo.name, "bit": i, "nbytes": buf.nbytes, "live": size_expr(buf.live_nbytes),
                           "loc": vinfo.loc,
                           "staging": staging, "offset": plan.offset(buf.name), "shadow": sh,
                           "sh_bytes": min(8, buf.nbytes)})
            staging = _align(staging + buf.nbytes, 64)
        gets = []
        for vinfo in p.vars:
            if not vinfo.gettable:
                continue
            g = {"name": vinfo.name, "nbytes": vinfo.nbytes, "live": size_expr(vinfo.live_nbytes),
                 "dynamic": vinfo.dynamic_shape,
                 "elem_bytes": vinfo.dtype.itemsize, "ndim": len(vinfo.shape), "cname": c_name(vinfo.name),
                 "host": None}
            if vinfo.kind in ("dynamic", "volatile"):
                g["buf"], g["off"] = "m->arena.buffer", f"{plan.offset(self.p.frames['entry'][vinfo.name])}u"
            else:
                buf = self.global_buffer(vinfo.name)
                if buf.storage == "weight":
                    g["host"] = f"m->wptr[{p.weight_keys.index(buf.model_key)}]"   # straight from the mapped .oinf
                g["buf"], g["off"] = self.static_addr(buf)
            gets.append(g)
        weights = []
        for key in p.weight_keys:
            t = p.weights[key]
            weights.append({"key": key, "code": t.dtype.code, "nbytes": t.dtype.storage_nbytes(t.numel),
                            "offset": self.wlayout[key], "dtype": t.dtype.name, "shape": str(list(t.shape))})
        prefix_offsets = []
        for pt in p.prefix_tables.values():
            offs = [f"{self.wlayout[k]}u" if k else "UINT64_MAX" for k in pt.keys]
            prefix_offsets.append({"cname": c_name(pt.var), "offsets": offs})
        binds, set_rows, writes = [], [], []
        for row in self.set_rows:
            if row is None:
                set_rows.append({"kernel": "UINT32_MAX", "first": 0})
                continue
            set_rows.append({"kernel": f"{row['kernel']}u", "first": len(binds)})
            binds += row["binds"]
            n_in = len(p.kernels[row["kernel"]].inputs)      # then the output (and the status word)
            writes += [int(b >= n_in) for b in range(len(row["binds"]))]
        frame_off = []
        for fr in self.frames_all:
            offs = ["UINT64_MAX"] * max(1, len(self.slot))
            for key, bname in p.frames.get(fr, {}).items():
                offs[self.slot[key]] = f"{plan.offset(bname)}u"
            frame_off.append(offs)
        max_range = max([b[2] for b in binds] + [4])
        staging_reserved = _align(staging, 256)
        transfer = min(max([64 * 1024, self.weights_bytes] + [v.nbytes for v in p.vars]), 16 * 1024 * 1024)
        # the HAL context (with OI_VK_PENDING_ACCESSES accesses of 32 bytes) fits in the first 16 KiB
        # + 2 KiB; then per kernel, set, binding (an oi_vk_access each), shadow, weight and input
        ctx["context_bytes"] = _align(16384 + 2048 + 64 * len(shaders) + 8 * len(self.set_rows) + 32 * len(binds)
                                      + len(self.frames_all) * 16 * max(1, len(self.local_sh))
                                      + 16 * max(1, len(self.global_sh)) + 8 * len(p.weight_keys)
                                      + 64 * len(ctx["dynamic_vars"]) + ctx["inputs_bytes"], 64)
        ctx.update({
            "shaders": shaders, "features": features,
            "feature_bits": " | ".join(_FEATURE_BITS[f] for f in features) or "0u",
            "weights_bytes": self.weights_bytes, "vk_weights": weights, "prefix_offsets": prefix_offsets,
            "set_rows": set_rows, "binds": binds, "bind_writes": writes, "n_bindings": len(binds),
            "n_created_sets": sum(1 for r in self.set_rows if r is not None),
            "frame_off": frame_off, "n_slots": max(1, len(self.slot)), "n_frames": len(self.frames_all),
            "n_local_sh": max(1, len(self.local_sh)), "n_global_sh": max(1, len(self.global_sh)),
            "vk_frame_inits": frame_inits, "vk_consumers": consumers, "vk_inputs": inputs, "vk_gets": gets,
            "persistent_lines": persistent_lines, "persistent_shadows": persistent_shadows,
            "const_lines": const_lines, "const_shadows": const_shadows,
            "staging_reserved": staging_reserved, "transfer_bytes": transfer, "max_range": max_range,
            "max_push": max([sh.push_bytes for sh in shaders] + [0]),
            "max_wg": max([sh.local_size for sh in shaders] + [1]),
            "fallible": any(sh.fallible for sh in shaders),
            "vendor": self.device.doc["device"].get("vendor", ""),
            "device_name": self.device.doc["device"]["name"],
            "descriptor": self.caps.device,
            "frames_all": [{"cname": "entry" if fr == "entry" else f"f_{c_name(fr)}", "index": i}
                           for i, fr in enumerate(self.frames_all)],
        })
        return ctx

    def rendered(self) -> RenderedProgram:
        ctx = self.context()
        n = self.p.name
        out = {
            f"{n}.h": render("c/model.h.j2", **ctx),
            f"{n}.c": render("vulkan/model.c.j2", **ctx),
            f"{n}_shaders.c": render("vulkan/shaders.c.j2", **ctx),
            "meson.build": render("vulkan/meson.build.j2", **ctx),
            "shaders/oi_common.glsl": render("vulkan/glsl/oi_common.glsl"),
            "shaders/oi_trig.glsl": render("vulkan/glsl/oi_trig.glsl"),
            "shaders/oi_copy.comp": render("vulkan/glsl/oi_copy.comp"),
        }
        for sh in ctx["shaders"]:
            out[f"shaders/{sh.name}.comp"] = sh.source
        if self.embed:
            out[f"{n}_weights.S"] = render("c/weights.S.j2", **ctx)
        return RenderedProgram(out, ctx["context_bytes"])


def _walk(stmts):
    for s in stmts:
        yield s
        if isinstance(s, P.Loop):
            yield from _walk(s.body)




def _init_lines(item: dict, node: int | None) -> list[str]:
    """C lines recording one (re)initialisation; inside a node they fail with its description."""
    wrap = (lambda call: f"OI_VK_NODE({node}, {call});") if node is not None else (lambda call: f"OI_TRY({call});")
    if item["kind"] == "copy":
        src_b, src_o = item["src"].split(", ", 1)
        dst_b, dst_o = item["dst"].split(", ", 1)
        return [wrap(f"oi_vk_copy(&m->vk, {src_b}, {src_o}, {dst_b}, {dst_o}, {item['nbytes']}u)")]
    if item["kind"] == "zero":
        return [wrap(f"oi_vk_fill_bytes(&m->vk, {item['dst']}, {item['nbytes']}u, zero_byte, 1u)")]
    return [f"{{ static const uint8_t pattern[{item['elem']}] = {{{item['pattern']}}};",
            "  " + wrap(f"oi_vk_fill_bytes(&m->vk, {item['dst']}, {item['nbytes']}u, pattern, {item['elem']}u)"),
            "}"]
