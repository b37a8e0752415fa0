"""GLSL 450 compute kernels for the Vulkan target: one shader per KernelRequest.

Every shader follows one calling convention (the host program in templates/vulkan/ relies on it):

- set 0, bindings 0..n-1: the inputs in order, then the output, then (fallible kernels only) a
  status word; each bound as (buffer, offset, range) so the shader indexes every operand from 0.
  Storage types by dtype (`storage_type`): f32 float, f64 double, f16/bf16 uint16_t (raw bits),
  f8/bool/bitset/u8 and packed types uint8_t, i8 int8_t, i16 int16_t, u16 uint16_t, i32 int,
  u32 uint, i64 int64_t, u64 uint64_t.
- push constants: run-time attributes (values of scalar variables, already converted by the host
  into the type the kernel computes in), the node index for fallible kernels, and the run-time
  value of each dynamic size the kernel's extents depend on (`oi_sz_<NAME>`, an int).
- run-time extents: a dim that depends on a dynamic size (openinfer/dims.py) renders as a
  macro, `OI_DIM<k>` (an int expression over the sizes, as a literal `128` is an int) and
  `OI_DIM<k>u` (its uint, as `128u`), defined at the top of the shader: emitters format dims
  exactly as they format static ones, and one pipeline serves every size.
- one invocation per output element, or per output byte for packed outputs (so no two
  invocations ever write the same byte); a few kernels (rows of softmax, norms, sdpa, rope)
  own whole rows instead. The dispatch is 2-D when more than 65535 workgroups are needed; a
  workgroup count that depends on a dynamic size is computed (and split) by the host.

Semantics are those of the NumPy reference (openinfer/reference/kernels): floats compute in f32 (f64
for f64) and round on store (narrow floats through templates/vulkan/glsl/oi_common.glsl, bit-exact
with oi_numeric.h); integers narrower than 64 bits compute in 32-bit `int`/`uint` (wrapping
modulo 2^32 agrees with the reference's 64-bit wrap once stored into <= 32 bits), 64-bit ones in
int64_t/uint64_t. What a device lacks is refused at generation time by `KernelCtx.need`.

An emitter is `fn(req, ctx) -> Body` registered with `@family("op", ...)`.
"""

from __future__ import annotations

from ....dims import rendering
from ....errors import SynthesisError
from ....synth.program import KernelRequest
from ...env import render
from . import detection, layout, linalg, nn, quant, quantized, reduce  # noqa: F401  (each registers its emitters)
from .elementwise import epilogue_function, prologue_function
from .registry import Body, Emitter, Extents, Shader, dispatch, emitter, family
from .types import Caps, KernelCtx, PushField, storage_type

__all__ = ["Body", "Caps", "KernelCtx", "PushField", "Shader", "dispatch", "emit_shader", "family", "storage_type"]


def emit_shader(req: KernelRequest, name: str, caps: Caps, where: str = "",
                names: tuple[str, ...] = ()) -> Shader:
    """The compute shader of one kernel. Raises SynthesisError naming what the device lacks;
    `where` locates the first call site and `names` are its operands (inputs, then output)."""
    fn = emitter(req.op)
    if fn is None:
        raise SynthesisError(f"op `{req.op}` has no GLSL kernel")
    ctx = KernelCtx(req, caps, where)
    if caps.denorm32:
        ctx.features.add("denorm32")     # keep f32 subnormals (drivers flush them by default)
    for i, t in enumerate((*req.inputs, req.output)):
        ctx.need_dtype(t.dtype, names[i] if i < len(names) else "")
    for n in req.sizes:
        ctx.push(f"oi_sz_{n}", "int", f"(int32_t)m->sz_{n}")
    extents = Extents()
    with rendering(extents):
        return _emit(fn, req, name, caps, ctx, where, extents)


def _emit(fn: Emitter, req: KernelRequest, name: str, caps: Caps, ctx: KernelCtx, where: str,
          extents: Extents) -> Shader:
    body = fn(req, ctx)
    out = req.output
    functions, vct = body.functions, body.vct
    if req.epilogue is not None and req.epilogue.op != "rope":   # (a rope: the GEMV mains rotate pairs)
        # value mode stores oi_epilogue(v, u); GEMV mains call it themselves
        text, vct = epilogue_function(req, ctx)
        functions = f"{functions}\n{text}" if functions else text
    if req.prologue is not None and req.prologue.op == "fused":   # the GEMVs call it as they read x
        text = prologue_function(req, ctx)
        functions = f"{functions}\n{text}" if functions else text
    wg = body.local_size or caps.wg
    if body.main is not None:
        units = body.units
        groups = body.groups if body.groups is not None else dispatch(units, wg)
    else:
        units = out.dtype.storage_nbytes(out.numel) if out.dtype.is_packed else out.numel
        groups = dispatch(units, wg)
    fields = ctx.push_fields()
    if sum(f.size for f in fields) > caps.max_push:
        raise SynthesisError(f"{where}{req.op}: {sum(f.size for f in fields)} bytes of run-time attributes exceed "
                             f"the device's push-constant limit ({caps.max_push} bytes, "
                             "limits.max_push_constants_bytes)")
    bindings = [{"name": f"in{i}", "type": storage_type(t.dtype), "readonly": True} for i, t in enumerate(req.inputs)]
    bindings.append({"name": "out_", "type": storage_type(out.dtype), "readonly": False})
    if ctx.fallible:
        bindings.append({"name": "oi_status", "type": "uint", "readonly": False})
    if len(bindings) > caps.max_bindings:
        raise SynthesisError(f"{where}{req.op}: {len(bindings)} storage buffers exceed the {caps.max_bindings} "
                             "bindings a kernel may use")
    value_mode = body.main is None
    v = "oi_epilogue(v, u)" if req.epilogue is not None else "v"
    store = ctx.store(out.dtype, v, vct) if value_mode else ""
    raw = ctx.raw(out.dtype, v, vct) if value_mode else ""
    # stringified here so that their extents are named before the defines are
    units_text, numel_text = (None if units is None else str(units)), str(out.numel)
    source = render("vulkan/glsl/kernel.comp.j2", name=name, doc=body.doc or req.op, features=sorted(ctx.features),
                    wg=wg, bindings=bindings, push=fields, extents=extents.defines(req.sizes),
                    functions=functions, value=body.value,
                    vct=body.vct, main=body.main, units=units_text, out=out.dtype, numel=numel_text,
                    store=store, raw=raw,
                    per=8 // out.dtype.bits if out.dtype.is_packed else 1, shared=body.shared,
                    fallible=ctx.fallible)
    return Shader(name, source, len(bindings), tuple(fields), groups, ctx.fallible, frozenset(ctx.features),
                  body.doc, wg)
