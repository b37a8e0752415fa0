"""The Cortex-M wing: Armv7E-M (Cortex-M4F, M7) kernels for the single-precision FPU, everything
else from the portable C wing; `CortexMTarget` picks the renderer of the descriptor's kernel
family, this module's `CortexMRenderer` or Armv8.1-M's `HeliumRenderer` (helium.py).

These cores have no vector unit, so what GCC makes of the portable loops is bound by loads and
loop overhead: the f32 vecmat runs about 5 instructions per multiply-add (a load of x, a load of
W, the FMA, address and loop arithmetic). `CortexMRenderer` overrides `CRenderer.kernel()` only,
as the NEON wing's renderer does: the small f32 vecmat (x[M <= 4, K] @ W[K, N], an MLP's or a
decoder's GEMV) gets a register-blocked kernel (templates/mcu/vecmat.c.j2) that keeps M x NB sums
in s-registers for all of K and loads NB consecutive weights of a row of W with one VLDMIA
(inline assembly: GCC never merges scalar float loads into VLDM); a larger f32 matmul, a GEMM
(templates/mcu/gemm.c.j2) whose 4 x 4 blocks keep their sums in s16-s31 and load two k steps of
a row of A, and of the block's columns of B, a VLDMIA each. Any other request takes the portable
kernel.
"""

from __future__ import annotations

from ...dims import Dim
from ...synth.program import KernelRequest
from ..base import EmitterTable
from ..c.kernels import KernelSource, prototype
from ..c.renderer import CRenderer, CTarget
from ..env import render
from .helium import HeliumRenderer

_EMITTERS = EmitterTable()
emitter = _EMITTERS.emitter


class CortexMRenderer(CRenderer):
    """Armv7E-M with an FPv4-SP / FPv5 FPU: 32 single-precision registers, VFMA, VLDM."""

    def kernel(self, req: KernelRequest, name: str) -> KernelSource:
        emit = _EMITTERS.get(req.op)
        body = emit(self, req, name) if emit is not None and self.device.doc["isa"].get("fpu") != "none" else None
        return super().kernel(req, name) if body is None else KernelSource(name, prototype(req, name), body)


class CortexMTarget(CTarget):
    """The Cortex-M kernel families (openinfer/targets/isa.py rows with wing "mcu"): the scalar
    FPU's (Armv7E-M) and Helium's (Armv8.1-M)."""

    @property
    def renderer_class(self) -> type[CRenderer]:
        return RENDERERS[self.device.isa]


#: The renderer of each kernel family of this wing
RENDERERS: dict[str, type[CRenderer]] = {"cortex-m": CortexMRenderer, "helium": HeliumRenderer}


#: (columns per block NB, k steps per asm statement U) by rows of x. GCC takes at most 30
#: operands an asm statement, and a sum read and written counts twice: 2 M NB + U M (x) + 3 (the
#: pointer to W, read and written, and its row stride) <= 30. One row of x takes 4 k steps a
#: statement, so that they share the loop's compare and branch (about 1.4 instructions per
#: multiply-add); more rows amortise the loop over their M multiply-adds per weight.
_VECMAT_BLOCKING = {1: (8, 4), 2: (6, 1), 3: (4, 1), 4: (2, 1)}


@emitter("matmul")
def _matmul(r: CortexMRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 a[M, K] @ b[K, N], static sizes, neither operand transposed, no batch: the vecmat for M <= 4
    (a decoder's few tokens), the 4 x 4 register-blocked GEMM above (its last M % 4 rows the
    vecmat's); None for any other request (the portable kernel)."""
    if len(req.inputs) != 2 or req.mode != "normal" or req.aliased:
        return None
    (a, b), out = req.inputs, req.output
    if any(t.dtype.name != "f32" for t in (a, b, out)) or len(a.shape) != 2 or len(b.shape) != 2:
        return None
    if req.attr("transpose_a") or req.attr("transpose_b") or any(isinstance(d, Dim) for d in a.shape + b.shape):
        return None
    (m, k), n = a.shape, b.shape[1]
    if 0 in (m, k, n):
        return None
    if m in _VECMAT_BLOCKING:
        return _vecmat(prototype(req, name), m, k, n)
    rows = m % 4
    tail = (_vecmat(f"static oi_status {name}_rows(const oi_kctx *ctx, const float *restrict in0, "
                    f"const float *restrict in1, float *restrict out)", rows, k, n) if rows else "")
    return render("mcu/gemm.c.j2", name=name, proto=prototype(req, name), m=m, k=k, n=n, tail=tail)


def _vecmat(proto: str, m: int, k: int, n: int) -> str:
    """The vecmat of x[m, k] @ W[k, n] as a function of prototype `proto`."""
    nb, u = _VECMAT_BLOCKING[m]
    return render("mcu/vecmat.c.j2", proto=proto, m=m, k=k, n=n, nb=nb, u=u, n_full=n - n % nb)
