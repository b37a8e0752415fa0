"""Portable C kernels: one emitter per op family, selected through the op registry's name.

Calling convention of every generated kernel (the host schedule relies on it):

    oi_status NAME(const oi_kctx *ctx, const IN0 *in0, ..., OUT *out, <runtime attributes>, <sizes>)

Inputs and output are storage pointers (`ctype()`: f16/bf16 as uint16_t bits, f8 and packed
types as bytes). Runtime attributes (values of scalar variables) follow as `double` (float
variables) or `int64_t`, then the run-time value of each dynamic sizevar its extents depend on
(`int64_t sz_S`: a dim of such a kernel renders as a C expression over it, openinfer/ir/dims.py).
Static attributes, static shapes and dtypes are baked into the code. A kernel
returns OI_OK, or a status for data-dependent failures (a gather index out of range).

An emitter is `fn(req, name, renderer) -> str` returning the function definition; families live
in the modules of this package and register with `@family("op", ...)`:

    elementwise  every element-wise op (an expression table), cast, fill, and `fused` chains
    reduce       sum/mean/prod/max/min_axis, argmax/argmin_axis, is_finite's 0-d form
    linalg       matmul, dequant_matmul
    layout       gather, transpose, reshape, concat, slice
    nn           softmax, log_softmax, layer_norm, rms_norm, rope, sdpa, conv1d/2d, max/avg_pool2d, lrn

The C lives in templates/c/ops/*.c.j2; oi_numeric.h has the scalar helpers (rounding, IEEE
minimum/maximum, wrapping division, float -> integer conversion, 128-bit sums).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ....errors import SynthesisError
from ....synth.program import KernelRequest

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
    from ..renderer import ctype

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
    _load_families()
    fn = _EMITTERS.get(req.op)
    if fn is None:
        raise SynthesisError(f"op `{req.op}` has no C kernel yet")
    body = fn(req, name, renderer)
    return KernelSource(name, prototype(req, name), body, scratch=getattr(body, "scratch", 0))


_LOADED = threading.Lock()
_loaded = False


def _load_families() -> None:
    global _loaded
    with _LOADED:   # renderers may run in threads: register every family before any lookup
        if _loaded:
            return
        from . import elementwise, layout, linalg, nn, reduce  # noqa: F401  (registration side effects)
        _loaded = True
