"""The portable C target: the host schedule, the ABI header, kernels and the meson project.

`CTarget` is the wing's declared target (openinfer/targets/base.py); `CRenderer` renders one
program. The renderer resolves the Program into views — C expressions for operands, scalars and
indices — and the templates in templates/c/ lay the files out. The x86 wing
(openinfer/targets/x86/) extends both and overrides only kernel selection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from ... import __version__
from ...dims import Dim, capacity, host_expr, pretty_shape, shape_sizevars
from ...dtypes import DTypeInfo, Kind
from ...numerics import to_storage
from ...ops import all_ops
from ...resources import HAL_SOURCES, hal_dir
from ...synth import program as P
from ...synth.lower import c_name
from ...synth.memplan import MemoryPlan
from ...synth.program import dynamic_ranges
from ..base import PROGRAM_ABI_VERSION, RenderedProgram, Target
from ..env import c_string, render
from .kernels import KernelSource, emit_kernel
from .kernels.common import ctype
from .layout import context_bytes

#: The context's buffer for the last error message (NAME_error), by whether the target is bare
#: metal: a message names the node's source location and text and is cut to the buffer, and on a
#: microcontroller, where the context is RAM out of tens of kilobytes, 128 bytes keep the location
#: and the start of the node.
ERROR_BYTES = {False: 384, True: 128}

_KIND_CODES = {"dynamic": 0, "volatile": 1, "constant": 2, "persistent": 3}


@cache
def hal_abi_version() -> int:
    """OI_HAL_ABI_VERSION of the HAL shipped beside the templates (generated code checks it)."""
    m = re.search(r"^#define OI_HAL_ABI_VERSION (\d+)$", (hal_dir() / "include" / "oi_hal.h").read_text(), re.M)
    return int(m.group(1))


def scalar_to(dtype: DTypeInfo, ptr: str, target: str) -> str:
    """C expression converting element 0 at `ptr` (storage of `dtype`) to `target` ("int64_t" or
    "double")."""
    if dtype.name in ("f16", "bf16", "f8"):
        return f"({target})oi_{dtype.name}_to_f32({ptr}[0])"
    if dtype.is_packed:
        if dtype.name == "t1":
            return f"({target})oi_t1_get({ptr}, 0)"
        get = "oi_packed_get_s" if dtype.is_signed else "oi_packed_get_u"
        return f"({target}){get}({ptr}, 0, {dtype.bits})"
    if dtype.kind is Kind.BOOL:
        return f"({target})({ptr}[0] != 0)"
    return f"({target}){ptr}[0]"


def truth(dtype: DTypeInfo, ptr: str) -> str:
    """C condition: the scalar at `ptr` is non-zero (NaN counts as true, as in Python)."""
    if dtype.name in ("f16", "bf16"):
        return f"({ptr}[0] & 0x7fffu) != 0"
    if dtype.name == "f8":
        return f"({ptr}[0] & 0x7fu) != 0"
    if dtype.is_float:
        return f"{ptr}[0] != 0"
    if dtype.is_packed:
        return f"oi_packed_raw({ptr}, 0, {dtype.bits}) != 0" if dtype.name != "t1" else "1"
    return f"{ptr}[0] != 0"


def fill_pattern(dtype: DTypeInfo, value) -> tuple[str, int]:
    """(C initializer bytes, element bytes) for filling storage of `dtype` with `value`."""
    if dtype.is_packed:
        per = 8 // dtype.bits
        raw = to_storage(np.full(per, value, dtype=dtype.np_dtype), dtype)
    else:
        raw = to_storage(np.array([value], dtype=dtype.np_dtype), dtype)
    return ", ".join(f"0x{b:02x}" for b in raw), len(raw)


def scalar_step_line(p: str, d: DTypeInfo, amount: int) -> str:
    """C statement adding `amount` to element 0 at `p` (storage of `d`) with the dtype's
    rounding (floats) or wrap-around (integers): cache.increment / cache.decrement."""
    if d.name in ("f16", "bf16", "f8"):
        return f"{p}[0] = oi_f32_to_{d.name}(oi_{d.name}_to_f32({p}[0]) + {float(amount)!r}f);"
    if d.is_float:
        suffix = "f" if d.name == "f32" else ""
        return f"{p}[0] = {p}[0] + {float(amount)!r}{suffix};"
    u = ctype(d).replace("int", "uint") if d.is_signed else ctype(d)
    return f"{p}[0] = ({ctype(d)})({u})((uint64_t){p}[0] + UINT64_C({amount % (1 << d.bits)}));"


def size_expr(nbytes) -> str:
    """A byte count in the host schedule: a literal, or (dynamic) its size_t expression."""
    return f"(size_t)({host_expr(nbytes)})" if isinstance(nbytes, Dim) else f"{nbytes}u"


@dataclass
class Check:
    cond: str
    status: str
    message: str


@dataclass
class StatementView:
    kind: str
    node: int
    desc: str
    lines: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    # control flow
    var: str = ""
    start: str = ""
    end: str = ""
    body: list[StatementView] = field(default_factory=list)
    cond: str | None = None
    then_block: str = ""
    else_block: str | None = None


class CTarget(Target):
    """Portable C11 on the CPU HAL, for any CPU (the `x86_64-generic` descriptor)."""

    @property
    def label(self) -> str:
        return f"c/{self.device.isa}"

    def fuses_elementwise(self) -> bool:
        """The C kernels include the `fused` family (openinfer/targets/c/kernels/elementwise.py)."""
        return True

    @property
    def renderer_class(self) -> type[CRenderer]:
        """The class that renders one program for this target's kernel family."""
        return CRenderer

    def renderer(self, prog: P.Program, mem: MemoryPlan, *, embed_weights: bool = False) -> CRenderer:
        return self.renderer_class(prog, mem, self.device, embed_weights=embed_weights)

    def render(self, prog: P.Program, mem: MemoryPlan, *, embed_weights: bool) -> RenderedProgram:
        return self.renderer(prog, mem, embed_weights=embed_weights).rendered()


class HostRenderer:
    """What every target's host program shares: the Program resolved into views (C expressions
    for operands, scalars, indices and checks) that the schedule templates lay out. `CRenderer`
    adds C kernels; the Vulkan wing renders statements that touch memory its own way."""

    def __init__(self, prog: P.Program, plan: MemoryPlan, device, *, embed_weights: bool = False):
        self.p = prog
        self.plan = plan
        self.device = device
        #: the kernel family (openinfer/targets/isa.py): its name, vector width and includes
        self.family = device.family if device.is_cpu else None
        self.embed = embed_weights
        self.prefix = f"oi_{c_name(prog.name)}"
        self.macro = self.prefix.upper()
        self.wfield = {k: f"w{i}_{c_name(k)}" for i, k in enumerate(prog.weight_keys)}
        self.kernel_names = [f"{self.prefix}_k{i}_{req.op}" for i, req in enumerate(prog.kernels)]

    # ------------------------------------------------------------------ operand resolution
    def field(self, key: str) -> str:
        return f"t_{key[len('#scratch'):]}" if key.startswith("#scratch") else f"v_{c_name(key)}"

    def global_buffer(self, var: str) -> P.Buffer | None:
        name = self.p.frames.get("global", {}).get(var)
        return self.p.buffers[name] if name else None

    def dtype_of(self, var: str) -> DTypeInfo:
        for frame in self.p.frames.values():
            if var in frame:
                return self.p.buffers[frame[var]].dtype
        return self.p.prefix_tables[var].dtype

    def global_ptr(self, buf: P.Buffer) -> str:
        if buf.storage == "weight":
            return f"m->{self.wfield[buf.model_key]}"
        return f"m->{buf.name}"

    def ptr(self, frame: str, op: P.Operand, view: StatementView | None = None) -> str:
        """C pointer expression for operand `op` in `frame` (adds range checks to `view`)."""
        packed = self.global_buffer(op.var)
        if packed is not None and packed.packed_from is not None:
            source = replace(op, var=packed.packed_from[0])
            self.ptr(frame, source, view)          # the constant's own index and presence checks
            if source.var not in self.p.prefix_tables:
                return f"m->{packed.name}"
            return f"(m->{packed.name} + ({self.prefix_flat(frame, source)}) * {packed.shape[-1]})"
        if op.var in self.p.prefix_tables:
            flat = self.prefix_flat(frame, op, view)
            expr = f"m->p_{c_name(op.var)}[{flat}]"
            if view is not None and not all(isinstance(e, P.Lit) for e in op.indices):
                view.checks.append(Check(f"!{expr}", "OI_ERR_INDEX_OUT_OF_RANGE",
                                         f"prefix table `{op.var}` has no model tensor for this index"))
            return expr
        if op.var in self.p.frames.get(frame, {}):
            return f"f->{self.field(op.var)}"
        buf = self.global_buffer(op.var)
        if buf is None:
            raise KeyError(f"{op.var} has no buffer in frame {frame}")
        return self.global_ptr(buf)

    def prefix_flat(self, frame: str, op: P.Operand, view: StatementView | None = None) -> str:
        """C expression of the row-major entry of prefix table operand `op` (adds range checks)."""
        pt = self.p.prefix_tables[op.var]
        terms = []
        stride = 1
        for size, e in reversed(list(zip(pt.sizes, op.indices, strict=True))):
            ix = self.int_expr(frame, e)
            if view is not None and not isinstance(e, P.Lit):
                view.checks.append(Check(f"({ix}) < 0 || ({ix}) >= {size}", "OI_ERR_INDEX_OUT_OF_RANGE",
                                         f"prefix table `{op.var}` index out of range 0..{size - 1}"))
            terms.append(f"({ix}) * {stride}" if stride != 1 else f"({ix})")
            stride *= size
        return " + ".join(reversed(terms))

    def buffer_of(self, frame: str, var: str) -> P.Buffer:
        name = self.p.frames.get(frame, {}).get(var) or self.p.frames["global"][var]
        return self.p.buffers[name]

    def int_expr(self, frame: str, e: P.IntExpr) -> str:
        if isinstance(e, P.Lit) and isinstance(e.value, Dim):     # a dynamic sizevar's current value
            return f"((int64_t){host_expr(e.value)})"
        if isinstance(e, P.Lit):
            return f"INT64_C({e.value})"
        if isinstance(e, P.LoopVar):
            return f"i_{c_name(e.name)}"
        dtype = self.dtype_of(e.var)
        return scalar_to(dtype, self.ptr(frame, P.Operand(e.var)), "int64_t")

    # ------------------------------------------------------------------ statements
    def view(self, frame: str, s: P.Statement, block: str) -> StatementView:
        if isinstance(s, P.Loop):
            v = StatementView("loop", s.node, s.desc, var=f"i_{c_name(s.var)}", start=self.int_expr(frame, s.start),
                              end=self.int_expr(frame, s.end))
            v.body = [self.view(frame, b, block) for b in s.body]
            return v
        if isinstance(s, P.Branch):
            cond = None
            if s.cond is not None:
                cond = truth(self.dtype_of(s.cond), self.ptr(frame, P.Operand(s.cond)))
            return StatementView("branch", s.node, s.desc, cond=cond, then_block=c_name(s.then_block),
                                 else_block=c_name(s.else_block) if s.else_block else None)
        if isinstance(s, P.Return):
            return StatementView("return", s.node, s.desc)
        v = StatementView("simple", s.node, s.desc)
        if isinstance(s, P.Call):
            args = [self.ptr(frame, o, v) for o in s.inputs] + [self.ptr(frame, s.output, v)]
            rt = dict(s.runtime_attrs)
            req = self.p.kernels[s.kernel]
            for attr, dtype in req.runtime_attrs:
                target = "double" if dtype.is_float else "int64_t"
                args.append(scalar_to(dtype, self.ptr(frame, P.Operand(rt[attr])), target))
            args += [f"m->sz_{n}" for n in req.sizes]
            v.lines.append(f"OI_TRY_NODE({s.node}, {self.kernel_names[s.kernel]}(&m->kctx, {', '.join(args)}));")
            if s.copy_to is not None:
                nbytes = size_expr(self.buffer_of(frame, s.copy_to.var).live_nbytes)
                v.lines.append(f"memcpy({self.ptr(frame, s.copy_to)}, {args[len(s.inputs)]}, {nbytes});")
        elif isinstance(s, P.Copy):
            dst = self.buffer_of(frame, s.dst.var) if s.dst.var not in self.p.prefix_tables else None
            nbytes = size_expr(dst.live_nbytes)
            v.lines.append(f"memcpy({self.ptr(frame, s.dst, v)}, {self.ptr(frame, s.src, v)}, {nbytes});")
        elif isinstance(s, P.TableRead):
            self.table_read(frame, s, v)
        elif isinstance(s, P.TableWrite):
            self.table_write(frame, s, v)
        elif isinstance(s, P.ScalarStep):
            self.scalar_step(s, v)
        elif isinstance(s, P.StateReset):
            self.state_reset(frame, s, v)
        elif isinstance(s, P.Yield) and s.consumers:
            self.start_consumers(frame, s, v)
        elif isinstance(s, P.Await) and frame == "entry":
            v.lines.append("OI_TRY(join_consumers(m, f));")
        return v

    def _table_index(self, frame: str, lay: P.TableLayout, pos: int, e: P.IntExpr, v: StatementView, name: str) -> str:
        ix = self.int_expr(frame, e)
        size = lay.sizes[pos]
        if not (isinstance(e, P.Lit) and not isinstance(e.value, Dim) and 0 <= e.value < size):
            v.checks.append(Check(f"({ix}) < 0", "OI_ERR_INDEX_OUT_OF_RANGE",
                                  f"cache table {lay.var} index is negative"))
            v.checks.append(Check(f"({ix}) >= {size}", "OI_ERR_TABLE_FULL",
                                  f"cache table {lay.var} index exceeds fixed size {size} (index `{name}`)"))
        return ix

    def table_read(self, frame: str, s: P.TableRead, v: StatementView) -> None:
        buf = self.buffer_of("global", s.var)
        entry = int(np.prod(self.p.tables[s.var].entry_shape, dtype=np.int64)) * buf.dtype.itemsize
        decl, bounds, lead_dims, dynamic, assign = self.table_read_bounds(frame, s, v)
        # the checks use the declarations, so both go inside the statement's own scope
        lines = ["{"] + [f"    {d}" for d in decl]
        lines += [f"    if ({c.cond}) return oi_fail(m, {c.status}, {s.node}, {c_string(c.message)});"
                  for c in v.checks]
        lines += [f"    {a}" for a in assign]
        v.checks = []
        if dynamic:
            lines += [f"    m->shape_{c_name(s.dst)}[{k}] = (uint64_t)(e{pos} - b{pos});"
                      for k, pos in enumerate(lead_dims)]
        lines.append(f"    uint8_t *dst = (uint8_t *){self.ptr(frame, P.Operand(s.dst))};")
        lines.append(f"    const uint8_t *src = (const uint8_t *){self.global_ptr(buf)};")
        lines.append("    size_t off = 0;")
        indent = "    "
        for pos, (b, e) in enumerate(bounds):
            lines.append(f"{indent}for (int64_t j{pos} = {b}; j{pos} < {e}; ++j{pos}) {{")
            indent += "    "
        lay = self.p.tables[s.var]
        flat = self._flat(lay.sizes, [f"j{k}" for k in range(len(bounds))])
        lines.append(f"{indent}memcpy(dst + off, src + (size_t)({flat}) * {entry}u, {entry}u);")
        lines.append(f"{indent}off += {entry}u;")
        for _ in bounds:
            indent = indent[:-4]
            lines.append(f"{indent}}}")
        lines.append("}")
        v.lines.extend(lines)

    def table_read_bounds(self, frame: str, s: P.TableRead, v: StatementView):
        """The index bounds of a table read: (declarations of b<pos>/e<pos>, (begin, end) per index,
        positions of the sliced indices, whether the destination has a run-time extent, statements
        setting the dynamic sizes the rows read set, to run after the checks); the range checks
        (which use the declarations) go to `v.checks`."""
        lay = self.p.tables[s.var]
        dst = self.buffer_of(frame, s.dst)
        idx_names = self._index_names(s.var)
        bounds = []   # (begin C expr, end C expr) per index; scalars as (ix, ix + 1)
        lead_dims = []
        decl = []
        for pos, sel in enumerate(s.select):
            size = lay.sizes[pos]
            if isinstance(sel, P.Slice):
                b = "INT64_C(0)" if sel.start is None else self.int_expr(frame, sel.start)
                if sel.end is None:
                    e = f"INT64_C({size})"
                elif isinstance(sel.end, P.Lit) and not isinstance(sel.end.value, Dim):
                    e = f"INT64_C({size + sel.end.value if sel.end.value < 0 else sel.end.value})"
                else:
                    raw = self.int_expr(frame, sel.end)
                    e = f"(({raw}) < 0 ? {size} + ({raw}) : ({raw}))"
                decl.append(f"const int64_t b{pos} = {b}, e{pos} = {e};")
                v.checks.append(Check(f"b{pos} < 0 || e{pos} < b{pos} || e{pos} > {size}", "OI_ERR_INDEX_OUT_OF_RANGE",
                                      f"slice of cache table {s.var} index `{idx_names[pos]}` is outside 0..{size}"))
                bounds.append((f"b{pos}", f"e{pos}"))
                lead_dims.append(pos)
            else:
                ix = self._table_index(frame, lay, pos, sel, v, idx_names[pos])
                decl.append(f"const int64_t b{pos} = {ix}, e{pos} = b{pos} + 1;")
                bounds.append((f"b{pos}", f"e{pos}"))
        want = dst.shape[:len(lead_dims)]
        if len(dst.shape) != len(lead_dims) + len(lay.entry_shape) or dst.shape[len(lead_dims):] != lay.entry_shape:
            raise ValueError(f"{s.desc}: destination shape {dst.shape} does not match table entries {lay.entry_shape}")
        dynamic = self.is_dynamic(s.dst)
        sets = dict(s.sets)
        ranges = dynamic_ranges(self.p) if sets else {}
        assign = []
        for k, pos in enumerate(lead_dims):
            rows = host_expr(want[k])       # (a dynamic size: the rows it holds at run time)
            if k in sets:   # the rows read set the size (range-checked like NAME_set_size)
                lo, hi, _ = ranges[sets[k]]
                v.checks.append(Check(f"e{pos} - b{pos} < {lo} || e{pos} - b{pos} > {hi}", "OI_ERR_SIZE_OUT_OF_RANGE",
                                      f"`{s.desc}` reads a number of rows outside {lo}..{hi}, the range of the "
                                      f"dynamic size {sets[k]} it sets"))
                assign.append(f"m->sz_{sets[k]} = e{pos} - b{pos};   /* the kernels after this read run at it */")
            elif dynamic:   # fewer rows than the declared capacity is fine: the extent is recorded
                v.checks.append(Check(f"e{pos} - b{pos} > {rows}", "OI_ERR_INDEX_OUT_OF_RANGE",
                                      f"`{s.desc}` selects more rows than `{s.dst}` holds ({want[k]!r})"))
            else:
                v.checks.append(Check(f"e{pos} - b{pos} != {rows}", "OI_ERR_INDEX_OUT_OF_RANGE",
                                      f"`{s.desc}` selects a different number of rows than `{s.dst}` holds"
                                      f" ({want[k]!r})"))
        return decl, bounds, lead_dims, dynamic, assign

    @staticmethod
    def _flat(sizes, names) -> str:
        expr = names[0] if names else "0"
        for size, n in zip(sizes[1:], names[1:], strict=True):
            expr = f"({expr}) * {size} + {n}"
        return expr

    def is_dynamic(self, var: str) -> bool:
        return any(v.name == var and v.dynamic_shape for v in self.p.vars)

    def _index_names(self, var: str) -> list[str]:
        return list(self.p.tables[var].indices)

    def table_write(self, frame: str, s: P.TableWrite, v: StatementView) -> None:
        lay = self.p.tables[s.var]
        buf = self.buffer_of("global", s.var)
        names = self._index_names(s.var)
        ix = [self._table_index(frame, lay, pos, e, v, names[pos]) for pos, e in enumerate(s.index)]
        entry = int(np.prod(lay.entry_shape, dtype=np.int64)) * buf.dtype.itemsize
        flat = self._flat(lay.sizes, [f"({i})" for i in ix])
        v.lines.append(f"memcpy((uint8_t *){self.global_ptr(buf)} + (size_t)({flat}) * {entry}u, "
                       f"{self.ptr(frame, s.src, v)}, {entry}u);")

    def scalar_step(self, s: P.ScalarStep, v: StatementView) -> None:
        buf = self.buffer_of("global", s.var)
        v.lines.append(scalar_step_line(self.global_ptr(buf), buf.dtype, s.amount))

    def persistent_init(self, buf: P.Buffer) -> dict:
        if buf.model_key:
            return {"kind": "copy", "ptr": f"m->{buf.name}", "src": f"m->{self.wfield[buf.model_key]}",
                    "nbytes": buf.nbytes}
        if not buf.init:
            return {"kind": "zero", "ptr": f"m->{buf.name}", "nbytes": buf.nbytes}
        pattern, elem = fill_pattern(buf.dtype, buf.init)
        count = buf.nbytes // elem
        return {"kind": "fill", "ptr": f"m->{buf.name}", "pattern": pattern, "elem": elem, "count": count,
                "nbytes": buf.nbytes}

    def state_reset(self, frame: str, s: P.StateReset, v: StatementView) -> None:
        buf = self.buffer_of("global", s.var)
        if s.var not in self.p.tables or not s.prefix:
            it = self.persistent_init(buf)
            if it["kind"] == "zero":
                v.lines.append(f"memset({it['ptr']}, 0, {it['nbytes']}u);")
            elif it["kind"] == "copy":
                v.lines.append(f"memcpy({it['ptr']}, {it['src']}, {it['nbytes']}u);")
            else:
                v.lines.append(f"{{ static const uint8_t pattern[{it['elem']}] = {{{it['pattern']}}}; "
                               f"fill({it['ptr']}, {it['count']}u, pattern, {it['elem']}u); }}")
            return
        lay = self.p.tables[s.var]
        names = self._index_names(s.var)
        ix = [self._table_index(frame, lay, pos, e, v, names[pos]) for pos, e in enumerate(s.prefix)]
        rest = int(np.prod(lay.sizes[len(ix):], dtype=np.int64)) * int(np.prod(lay.entry_shape, dtype=np.int64))
        elem = buf.dtype.itemsize
        flat = self._flat(lay.sizes[:len(ix)], [f"({i})" for i in ix])
        start = f"(uint8_t *){self.global_ptr(buf)} + (size_t)({flat}) * {rest * elem}u"
        if not buf.init:
            v.lines.append(f"memset({start}, 0, {rest * elem}u);")
        else:
            pattern, pe = fill_pattern(buf.dtype, buf.init)
            v.lines.append(f"{{ static const uint8_t pattern[{pe}] = {{{pattern}}}; "
                           f"fill({start}, {rest}u, pattern, {pe}u); }}")

    def start_consumers(self, frame: str, s: P.Yield, v: StatementView) -> None:
        for c in s.consumers:
            field_name = f"f_{c_name(c)}"
            v.lines.append(f"init_{field_name}(m);")
            for var in s.vars:
                if var in self.p.frames.get(c, {}):
                    nbytes = self.buffer_of(c, var).nbytes
                    v.lines.append(f"memcpy(m->{field_name}.{self.field(var)}, f->{self.field(var)}, {nbytes}u);")
        v.lines.append("m->pending = 1;")
        for c in s.consumers:
            field_name = f"f_{c_name(c)}"
            if self.consumer_inline(c):
                v.lines.append(f"run_{field_name}(m);  /* touches persistent state: runs at the yield */")
            else:
                v.lines.append(f"if (m->hook) run_{field_name}(m);  /* traced runs stay in order */")
                v.lines.append(f"else OI_TRY_NODE({s.node}, oi_pool_submit(m->pool, run_{field_name}, m));")

    def consumer_inline(self, consumer: str) -> bool:
        """A consumer that touches persistent state runs synchronously at the yield, which is
        exactly the reference's order; others may run beside entry on the pool."""
        def touches(stmts) -> bool:
            for st in stmts:
                if isinstance(st, (P.TableRead, P.TableWrite, P.ScalarStep, P.StateReset)):
                    return True
                if isinstance(st, P.Copy) and any(self.global_buffer(o.var) is not None and
                                                  self.global_buffer(o.var).storage == "persistent"
                                                  for o in (st.src, st.dst)):
                    return True
                if isinstance(st, P.Loop) and touches(st.body):
                    return True
            return False
        return any(touches(self.p.blocks[b]) for b in self.p.frame_blocks.get(consumer, ()))

    # ------------------------------------------------------------------ what the templates read
    def context(self) -> dict:
        p, plan = self.p, self.plan
        frame_fields: dict[str, str] = {}
        frame_pointers = []
        frames = ["entry"] + list(p.consumers)
        for fr in frames:
            for key, bname in sorted(p.frames.get(fr, {}).items()):
                buf = p.buffers[bname]
                fld = self.field(key)
                frame_fields[fld] = ctype(buf.dtype)
                frame_pointers.append({"frame": "entry" if fr == "entry" else f"f_{c_name(fr)}", "field": fld,
                                       "ctype": ctype(buf.dtype), "offset": plan.offset(bname)})
        weights = []
        for key in p.weight_keys:
            t = p.weights[key]
            weights.append({"field": self.wfield[key], "key": key, "ctype": ctype(t.dtype), "code": t.dtype.code,
                            "nbytes": t.dtype.storage_nbytes(t.numel), "dtype": t.dtype.name,
                            "shape": str(list(t.shape))})
        prefix_tables = []
        for pt in p.prefix_tables.values():
            nbytes = pt.dtype.storage_nbytes(int(np.prod(pt.shape, dtype=np.int64)))
            entries = [{"index": i, "key": k} for i, k in enumerate(pt.keys) if k]
            prefix_tables.append({"field": f"p_{c_name(pt.var)}", "ctype": ctype(pt.dtype), "count": len(pt.keys),
                                  "pattern": pt.pattern, "entries": entries, "code": pt.dtype.code,
                                  "nbytes": nbytes, "dtype": pt.dtype.name, "shape": str(list(pt.shape))})
        persistents, consts, const_inits, persistent_inits, packs = [], [], [], [], []
        for buf in sorted(p.buffers.values(), key=lambda b: b.name):
            if buf.storage in ("persistent", "packed"):
                persistents.append({"field": buf.name, "ctype": ctype(buf.dtype), "offset": plan.offset(buf.name)})
            if buf.storage == "persistent":
                persistent_inits.append(self.persistent_init(buf))
            elif buf.storage == "packed":
                packs += self.pack_calls(buf)
            elif buf.storage == "const":
                consts.append({"field": buf.name, "ctype": ctype(buf.dtype), "offset": plan.offset(buf.name)})
                const_inits.append(self.persistent_init(buf))
        frame_inits = []
        for fr in frames:
            items = []
            for key, bname in sorted(p.frames.get(fr, {}).items()):
                buf = p.buffers[bname]
                if not buf.needs_init:
                    continue
                ptr = f"m->{'entry' if fr == 'entry' else 'f_' + c_name(fr)}.{self.field(key)}"
                if buf.model_key:
                    items.append({"kind": "copy", "ptr": ptr, "src": f"m->{self.wfield[buf.model_key]}",
                                  "nbytes": buf.nbytes})
                elif not buf.init:
                    items.append({"kind": "zero", "ptr": ptr, "nbytes": buf.nbytes})
                else:
                    pattern, elem = fill_pattern(buf.dtype, buf.init)
                    items.append({"kind": "fill", "ptr": ptr, "pattern": pattern, "elem": elem,
                                  "count": buf.nbytes // elem, "nbytes": buf.nbytes})
            frame_inits.append({"frame": fr, "cname": "entry" if fr == "entry" else f"f_{c_name(fr)}", "inits": items})
        consumers = []
        for c in p.consumers:
            merge = [{"field": self.field(var), "nbytes": p.buffers[p.frames[c][var]].nbytes}
                     for var in self.consumer_writes(c) if var in p.frames.get("entry", {})]
            consumers.append({"block": c, "cname": c_name(c), "field": f"f_{c_name(c)}", "merge": merge})
        blocks = []
        for name, stmts in p.blocks.items():
            frame = next((fr for fr in frames if name in p.frame_blocks.get(fr, ())), "entry")
            blocks.append({"cname": c_name(name), "stmts": [self.view(frame, s, name) for s in stmts]})
        inputs = []
        for i, vinfo in enumerate(x for x in p.vars if x.settable):
            buf = self.buffer_of("entry", vinfo.name)
            inputs.append({"name": vinfo.name, "bit": i, "field": self.field(vinfo.name),
                           "nbytes": size_expr(buf.live_nbytes), "loc": vinfo.loc,
                           "sizes": shape_sizevars(vinfo.shape)})
        bindables = self.bind_views(inputs)
        gets = []
        for vinfo in p.vars:
            if not vinfo.gettable:
                continue
            if vinfo.kind in ("dynamic", "volatile"):
                src = f"m->entry.{self.field(vinfo.name)}"
            else:
                src = self.global_ptr(self.global_buffer(vinfo.name))
            gets.append({"name": vinfo.name, "src": src, "nbytes": size_expr(vinfo.live_nbytes),
                         "dynamic": vinfo.dynamic_shape,
                         "elem_bytes": vinfo.dtype.itemsize, "ndim": len(vinfo.shape), "cname": c_name(vinfo.name)})
        nodes = self.node_table()
        return {
            "name": p.name, "prefix": self.prefix, "macro": self.macro, "guard": f"{self.macro}_H",
            "version": __version__, "source": p.source_name or "<graph>", "device": self.device.name,
            "abi_version": PROGRAM_ABI_VERSION,
            "arena_bytes": plan.arena_bytes, "persistent_bytes": plan.persistent_bytes,
            "weight_bytes": p.weight_bytes,
            "vars": [self.var_view(v) for v in p.vars],
            "frame_fields": [{"field": k, "ctype": v} for k, v in sorted(frame_fields.items())],
            "frame_pointers": frame_pointers, "weights": weights, "prefix_tables": prefix_tables,
            "persistents": persistents, "consts": consts, "const_inits": const_inits, "packs": packs,
            "persistent_inits": persistent_inits, "frame_inits": frame_inits, "consumers": consumers,
            "blocks": blocks, "inputs": inputs, "inputs_bytes": max(1, (len(inputs) + 7) // 8), "gets": gets,
            "bindables": bindables,
            "nodes": nodes, "threads": self.device.threads, "embedded": self.embed, "hal_abi": hal_abi_version(),
            "map_weights": self.device.preferences.get("weights_memory") == "mapped",
            "cpu_features": " | ".join(self.device.cpu_feature_macros) or "0u",
            "dynamic_vars": [{"cname": c_name(v.name), "shape": list(v.shape)} for v in p.vars if v.dynamic_shape],
            "sizes": self.size_views(inputs),
            "sized_vars": [{"name": v.name, "dims": [{"dynamic": isinstance(d, Dim), "expr": host_expr(d)}
                                                     for d in v.shape]}
                           for v in p.vars if shape_sizevars(v.shape)],
        }

    def size_views(self, inputs: list[dict]) -> list[dict]:
        """The dynamic sizes of the ABI: range, the variables they shape, the inputs to set again."""
        out = []
        for name, (lo, hi, why) in dynamic_ranges(self.p).items():
            out.append({"name": name, "min": lo, "max": hi,
                        "why": f" (below {lo}, {why} would be empty)" if why else "",
                        "vars": [v.name for v in self.p.vars if name in shape_sizevars(v.shape)] or ["no variable"],
                        "inputs": [i for i in inputs if name in i["sizes"]]})
        return out

    def pack_calls(self, buf: P.Buffer) -> list[str]:
        """create(): the calls that fill a `packed` buffer from its model constant, entry by entry."""
        source, kernel, index = buf.packed_from
        fn = f"{self.kernel_names[kernel]}_pack{index}"
        pt = self.p.prefix_tables.get(source)
        if pt is None:
            return [f"{fn}(m->{self.wfield[self.global_buffer(source).model_key]}, m->{buf.name});"]
        return [f"{fn}(m->p_{c_name(source)}[{i}], m->{buf.name} + {i * buf.shape[-1]});"
                for i, key in enumerate(pt.keys) if key]

    def var_view(self, v: P.VarInfo) -> dict:
        # var_info() describes capacities; the header's comment shows the dynamic dims by name
        return {"id": v.id, "name": v.name, "kind": v.kind, "kind_code": _KIND_CODES[v.kind], "dtype": v.dtype,
                "shape": capacity(v.shape), "pretty_shape": pretty_shape(v.shape) + (
                    f" (at most {list(capacity(v.shape))})" if shape_sizevars(v.shape) else ""),
                "nbytes": v.nbytes, "settable": v.settable, "gettable": v.gettable}

    def node_table(self) -> list[dict]:
        descs: dict[int, tuple[str, str]] = {}

        def visit(stmts, block):
            for s in stmts:
                if s.node >= 0:
                    descs[s.node] = (s.desc, block)
                if isinstance(s, P.Loop):
                    visit(s.body, block)

        for name, stmts in self.p.blocks.items():
            visit(stmts, name)
        n = max(descs, default=-1) + 1
        return [{"desc": descs.get(i, ("", ""))[0], "block": descs.get(i, ("", ""))[1],
                 "loc": self.p.node_locations.get(i, f"{self.p.source_name or '<graph>'}:node {i}")}
                for i in range(max(n, 1))]

    def consumer_writes(self, consumer: str) -> list[str]:
        frame = self.p.frames.get(consumer, {})
        return sorted({var for b in self.p.frame_blocks.get(consumer, ())
                       for s, var in _writes(self.p.blocks[b]) if not isinstance(s, P.Copy) or var in frame})

    def bind_views(self, inputs: list[dict]) -> list[dict]:
        """The variables NAME_bind can put in caller memory: those of the entry frame's own pinned
        buffers (dynamic inputs, observable volatile variables) of a static shape, inputs only
        where no statement writes them (the caller's input memory is then only read)."""
        p, entry = self.p, self.p.frames.get("entry", {})
        refs: dict[str, int] = {}
        for fr in p.frames.values():
            for bname in fr.values():
                refs[bname] = refs.get(bname, 0) + 1
        written = {var for stmts in p.blocks.values() for _, var in _writes(stmts)}
        bits = {i["name"]: i["bit"] for i in inputs}
        out = []
        for v in p.vars:
            bname = entry.get(v.name)
            if (bname is None or v.kind not in ("dynamic", "volatile") or not (v.settable or v.gettable)
                    or p.buffers[bname].storage != "pinned" or refs[bname] != 1
                    or shape_sizevars(v.shape) or v.dynamic_shape or (v.settable and v.name in written)):
                continue
            buf = p.buffers[bname]
            out.append({"name": v.name, "field": self.field(v.name), "ctype": ctype(buf.dtype),
                        "offset": self.plan.offset(bname), "nbytes": v.nbytes,
                        "align": max(1, buf.dtype.bits // 8), "bit": bits.get(v.name)})
        return out



@dataclass(frozen=True)
class TileVec:
    """The f32 vector a target's tiles of the portable conv and sdpa kernels are written in: its C
    type and the operations the tiles use, each a C expression whose operands are named in braces
    (str.format), so one tile template serves every vector ISA."""

    type: str
    zero: str       # every lane 0
    load: str       # {p}: the vector at p, unaligned
    store: str      # {p}, {v}: store v at p, unaligned
    dup: str        # {x}: x in every lane
    fma: str        # {a}, {b}, {acc}: acc + a * b, fused
    add: str        # {a}, {b}
    #: {a}, {lane}, {b}, {acc}: acc + a[lane] * b, fused, where the ISA multiplies by a lane
    #: (the tiles then load a row's next weights once instead of broadcasting each)
    fma_lane: str | None = None


class CRenderer(HostRenderer):
    """One program in portable C: the host schedule and one C kernel per kernel request. The
    x86 wing's renderers override `kernel()`, and give the portable conv and sdpa kernels tiles
    of their own."""

    #: a tile the tiled convolution's whole-vector columns use instead of the portable loops
    #: (openinfer/targets/c/kernels/nn.py): (template, output channels, vectors of columns)
    conv_tile: tuple[str, int, int] | None = None
    #: likewise for the tiled sdpa (templates/c/ops/sdpa_vector_tile.j2): (query rows, vectors of
    #: keys / of V's columns)
    sdpa_tile: tuple[int, int] | None = None
    #: the vector type and operations those tiles are written in
    tile_vec: TileVec | None = None

    @classmethod
    def for_kernels(cls, device) -> CRenderer:
        """A renderer that emits kernels alone (no program): what the kernel emitters read is the
        device and its kernel family. For tests and tools that build one kernel at a time."""
        renderer = cls.__new__(cls)
        renderer.device, renderer.family = device, device.family
        return renderer

    # ------------------------------------------------------------------ kernels
    def kernel(self, req: P.KernelRequest, name: str) -> KernelSource:
        """The C source of one kernel; ISA subclasses return specialised versions when they can."""
        return emit_kernel(req, name, self)

    # ------------------------------------------------------------------ files
    def rendered(self) -> RenderedProgram:
        ctx = self.context()
        kernels = [self.kernel(req, name) for req, name in zip(self.p.kernels, self.kernel_names, strict=True)]
        # per-thread kernel workspace (oi_kctx in oi_hal.h): the largest any kernel takes; the
        # caller's lives in the context object, so CONTEXT_BYTES counts it; a whole number of cache
        # lines, so every worker's (at k * scratch_bytes) starts 64-aligned as the first
        scratch = -(-max([k.scratch for k in kernels] + [0]) // 64) * 64
        ctx = {**ctx, "scratch_bytes": scratch, "error_bytes": ERROR_BYTES[self.device.bare_metal]}
        ctx["context_bytes"] = context_bytes(ctx, self.device.pointer_bytes)
        n = self.p.name
        out = {
            f"{n}.h": render("c/model.h.j2", **ctx),
            f"{n}.c": render("c/model.c.j2", **ctx),
            f"{n}_kernels.h": render("c/kernels.h.j2", **ctx, kernels=kernels),
            f"{n}_kernels.c": render("c/kernels.c.j2", **ctx, kernels=kernels, family=self.family,
                                     uses_quant=any(r.op in _QUANTIZED_OPS for r in self.p.kernels)),
            "meson.build": render("c/meson.build.j2", **ctx, cflags=list(self.device.cflags),
                                  hal_c=HAL_SOURCES[self.device.hal_platform], baremetal=self.device.bare_metal),
        }
        if self.embed:
            out[f"{n}_weights.S"] = render("c/weights.S.j2", **ctx)
        return RenderedProgram(out, ctx["context_bytes"])



#: The integer-only ops, whose kernels use hal/include/oi_quant.h
_QUANTIZED_OPS = frozenset(op.name for op in all_ops() if op.category == "quantized")


def _writes(stmts):
    """(statement, variable) for every variable the statements write: a call's result, a copy's
    and a cache read's destination (loop bodies included; branch targets are blocks of their own)."""
    for s in stmts:
        if isinstance(s, P.Call):
            yield s, s.result.var
        elif isinstance(s, P.Copy):
            yield s, s.dst.var
        elif isinstance(s, P.TableRead):
            yield s, s.dst
        elif isinstance(s, P.Loop):
            yield from _writes(s.body)
