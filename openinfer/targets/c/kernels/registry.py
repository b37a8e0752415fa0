"""The C kernel families' registry: each family module registers its emitters with `@family`;
`emit_kernel` renders a request with the emitter of its op. (The package imports every family
module, so the registry is complete once `openinfer.targets.c.kernels` is imported.)"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....errors import SynthesisError
from ....synth.program import KernelRequest
from .common import ctype

Emitter = Callable[[KernelRequest, str, object], str]
_EMITTERS: dict[str, Emitter] = {}


def family(*ops: str):
    """Register an emitter for `ops`."""
    def deco(fn: Emitter) -> Emitter:
        for op in ops:
            _EMITTERS[op] = fn
        return fn
    return deco


class KernelText(str):
    """A kernel's definition that takes per-thread workspace from its oi_kctx (oi_kctx_scratch in
    oi_hal.h): `scratch` bytes on every thread that runs it (a packed panel of B, a zero-padded
    copy of an input, a block's scores), so that the kernel never allocates. An emitter returns
    one in place of the plain text; the program sizes the workspace for its largest kernel."""

    scratch: int

    def __new__(cls, text: str, scratch: int) -> KernelText:
        obj = super().__new__(cls, text)
        obj.scratch = (int(scratch) + 63) // 64 * 64
        return obj


@dataclass(frozen=True)
class KernelSource:
    name: str
    prototype: str      # "oi_status name(...)" without the trailing semicolon
    definition: str     # the full function definition
    #: other functions of the definition the model calls (a packed input's pack function)
    helpers: tuple[str, ...] = ()
    #: bytes of per-thread workspace it takes from its oi_kctx (KernelText)
    scratch: int = 0


def prototype(req: KernelRequest, name: str) -> str:

    # An in-place kernel's output is one of its inputs (its own, or its epilogue's): no pointer
    # may then be `restrict`.
    r = "" if req.aliased or (req.epilogue and req.epilogue.aliased) else "restrict "
    params = ["const oi_kctx *ctx"]
    params += [f"const {ctype(t.dtype)} *{r}in{i}" for i, t in enumerate(req.inputs)]
    params.append(f"{ctype(req.output.dtype)} *{r}out")
    params += [f"{'double' if dtype.is_float else 'int64_t'} rt_{attr}" for attr, dtype in req.runtime_attrs]
    params += [f"int64_t sz_{n} OI_MAYBE_UNUSED" for n in req.sizes]
    return f"oi_status {name}({', '.join(params)})"


def emit_kernel(req: KernelRequest, name: str, renderer) -> KernelSource:
    fn = _EMITTERS.get(req.op)
    if fn is None:
        raise SynthesisError(f"op `{req.op}` has no C kernel yet")
    body = fn(req, name, renderer)
    return KernelSource(name, prototype(req, name), body, scratch=getattr(body, "scratch", 0))
