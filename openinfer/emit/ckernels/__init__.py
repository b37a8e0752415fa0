"""Portable C kernels: one emitter per op family, selected through the op registry's name.

Calling convention of every generated kernel (the host schedule relies on it):

    oi_status NAME(const oi_kctx *ctx, const IN0 *in0, ..., OUT *out, <runtime attributes>)

Inputs and output are storage pointers (`ctype()`: f16/bf16 as uint16_t bits, f8 and packed
types as bytes). Runtime attributes (values of scalar variables) follow as `double` (float
variables) or `int64_t`. Static attributes, shapes and dtypes are baked into the code. A kernel
returns OI_OK, or a status for data-dependent failures (a gather index out of range).

An emitter is `fn(req, name, renderer) -> str` returning the function definition; families live
in the modules of this package and register with `@family("op", ...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import SynthesisError
from ...synth.program import KernelRequest

Emitter = Callable[[KernelRequest, str, object], str]
_EMITTERS: dict[str, Emitter] = {}


def family(*ops: str):
    """Register an emitter for `ops`."""
    def deco(fn: Emitter) -> Emitter:
        for op in ops:
            _EMITTERS[op] = fn
        return fn
    return deco


@dataclass(frozen=True)
class KernelSource:
    name: str
    prototype: str      # "oi_status name(...)" without the trailing semicolon
    definition: str     # the full function definition


def prototype(req: KernelRequest, name: str) -> str:
    from ..cstyle import ctype

    # An in-place kernel's output is one of its inputs: no pointer may then be `restrict`.
    r = "" if req.aliased else "restrict "
    params = ["const oi_kctx *ctx"]
    params += [f"const {ctype(t.dtype)} *{r}in{i}" for i, t in enumerate(req.inputs)]
    params.append(f"{ctype(req.output.dtype)} *{r}out")
    params += [f"{'double' if dtype.is_float else 'int64_t'} rt_{attr}" for attr, dtype in req.runtime_attrs]
    return f"oi_status {name}({', '.join(params)})"


def emit_kernel(req: KernelRequest, name: str, renderer) -> KernelSource:
    _load_families()
    fn = _EMITTERS.get(req.op)
    if fn is None:
        raise SynthesisError(f"op `{req.op}` has no C kernel yet")
    return KernelSource(name, prototype(req, name), fn(req, name, renderer))


def _load_families() -> None:
    if _EMITTERS:
        return
    from . import elementwise, linalg  # noqa: F401  (registration side effects)
