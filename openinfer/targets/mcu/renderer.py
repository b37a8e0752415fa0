"""The Cortex-M wing: Armv7E-M (Cortex-M4F, M7) and Armv8-M Mainline (Cortex-M33) kernels for
the single-precision FPU and the DSP extension, everything else from the portable C wing;
`CortexMTarget` picks the renderer of the descriptor's kernel family, this module's
`CortexMRenderer` or Armv8.1-M's `HeliumRenderer` (helium.py).

These cores have no vector unit, so what GCC makes of the portable loops is bound by loads and
loop overhead: the f32 vecmat runs about 5 instructions per multiply-add (a load of x, a load of
W, the FMA, address and loop arithmetic), the i8 dequantizing GEMV 7. `CortexMRenderer` overrides
`CRenderer.kernel()` only, as the NEON wing's renderer does: the small f32 vecmat (x[M <= 4, K] @
W[K, N], an MLP's or a decoder's GEMV) gets a register-blocked kernel (templates/mcu/vecmat.c.j2)
that keeps M x NB sums in s-registers for all of K and loads NB consecutive weights of a row of W
with one VLDMIA (inline assembly: GCC never merges scalar float loads into VLDM); a larger f32
matmul, a GEMM (templates/mcu/gemm.c.j2) whose 4 x 4 blocks keep their sums in s16-s31 and load
two k steps of a row of A, and of the block's columns of B, a VLDMIA each; dequant_matmul of f32 x
with i8 / u8 / i4 / u4 weights (templates/mcu/dequant.c.j2) multiplies x, as integers in two
12-bit digits, with SMLAD (two 16-bit multiply-adds an instruction), 4 columns of w unpacked into
rows k, k + 1's pairs by PKHBT and SXTB16 (4-bit: masks) in an assembly routine; f32 conv1d /
conv2d at column stride 1 (fpu_conv.py, templates/mcu/conv.c.j2), tiles of 4 output channels x 4
output columns (fewer channels: wider) whose 16 sums stay in s16-s31 for all taps, a VLDMIA of the
input row's segment and one of each channel's row of weights per kernel row; any other request
takes the portable kernel; the integer-only qconv2d (TFLite's int8 CONV_2D, DEPTHWISE_CONV_2D)
with groups 1 or depthwise takes SMLAD over int16 copies of its windows, or 4 channels a word
(dsp_qconv.py, templates/mcu/qconv.c.j2), bit-exact with the portable kernel; qlinear (TFLite's
int8 FULLY_CONNECTED) 4 rows of w at a time with SMLAD, its double requantization emulated
exactly in integers (dsp_qlinear.py, templates/mcu/qlinear.c.j2).
"""

from __future__ import annotations

from ...dims import Dim
from ...synth.program import KernelRequest
from ..base import EmitterTable
from ..c.kernels import KernelSource, prototype
from ..c.renderer import CRenderer, CTarget
from ..env import render
from .dsp_qconv import qconv_kernel
from .dsp_qlinear import qlinear_kernel
from .fpu_conv import conv_context, conv_geometry
from .helium import HeliumRenderer
from .thumb import add_immediate

_EMITTERS = EmitterTable()
emitter = _EMITTERS.emitter


class CortexMRenderer(CRenderer):
    """Armv7E-M or Armv8-M Mainline with an FPv4-SP / FPv5 FPU (32 single-precision registers,
    VFMA, VLDM) and the DSP extension (SMLAD, SXTB16, PKHBT)."""

    def kernel(self, req: KernelRequest, name: str) -> KernelSource:
        emit = _EMITTERS.get(req.op)
        body = emit(self, req, name) if emit is not None and self.device.doc["isa"].get("fpu") != "none" else None
        if body is None:
            return super().kernel(req, name)
        return KernelSource(name, prototype(req, name), body, scratch=getattr(body, "scratch", 0))


class CortexMTarget(CTarget):
    """The Cortex-M kernel families (openinfer/targets/isa.py rows with wing "mcu"): the scalar
    FPU's (Armv7E-M) and Helium's (Armv8.1-M)."""

    @property
    def renderer_class(self) -> type[CRenderer]:
        return RENDERERS[self.device.isa]


#: The renderer of each kernel family of this wing
RENDERERS: dict[str, type[CRenderer]] = {"cortex-m": CortexMRenderer, "cortex-m-v8m": CortexMRenderer,
                                         "helium": HeliumRenderer}


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


#: k pairs an iteration of the dequantizing GEMV's asm loop (19 instructions a pair of 8-bit
#: weights, 17 or 18 of 4-bit; the loop's compare and branch, and an ADD to the pointer to w per
#: iteration or per pair), and rows of w a chunk: 124 pairs, a multiple of the iteration, whose
#: digits (2 words a pair, and the sentinel's) are 1000 bytes of stack
_DQ_PAIRS, _DQ_CHUNK = 4, 248


@emitter("dequant_matmul")
def _dequant_matmul(r: CortexMRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 x[M, K] (or [K]) @ dequantize(w[K, N]) with i8 / u8 / i4 / u4 weights into f32, static
    sizes: x's rows as integers in two 12-bit digits, multiplied with SMLAD (templates/mcu/dequant.c.j2);
    None for any other request (the portable kernel)."""
    if req.mode != "normal" or req.aliased or req.acc or req.epilogue or req.prologue or req.input_perms:
        return None
    x, w, scale = req.inputs[:3]
    zp = req.inputs[3] if len(req.inputs) > 3 else None
    if len(req.inputs) > 4 or x.dtype.name != "f32" or req.output.dtype.name != "f32":
        return None
    if w.dtype.name not in ("i8", "u8", "i4", "u4") or any(isinstance(d, Dim) for d in x.shape + w.shape):
        return None
    (k, n), m = w.shape, x.shape[0] if len(x.shape) == 2 else 1
    if 0 in (m, k, n):
        return None
    doc = (f"dequant_matmul: f32{list(x.shape)} @ dequantize({w.dtype.name}{list(w.shape)}, "
           f"{'per-channel' if scale.numel > 1 else 'per-tensor'} scale{', zero point' if zp else ''}) "
           f"-> f32{list(req.output.shape)}")
    group, add_imm = _pointer_steps(n, w.dtype.bits)
    return render("mcu/dequant.c.j2", name=name, proto=prototype(req, name), doc=doc, m=m, k=k, n=n,
                  wt=w.dtype.name, zp=zp is not None, zp_channel=zp is not None and zp.numel > 1,
                  scale_channel=scale.numel > 1, u=_DQ_PAIRS, kc=_DQ_CHUNK, group=group, add_imm=add_imm)


def _pointer_steps(n: int, bits: int) -> tuple[int, bool]:
    """(k pairs G that share one ADD to the pointer to w, whether G pairs' bytes are an ADD
    immediate): the most, of a divisor of _DQ_PAIRS, whose loads all reach their rows through
    12-bit offsets and whose step is an immediate; 1 otherwise (a MOVW then takes what does not fit)."""
    stride = n * bits // 4                                    # bytes of two rows of w
    reach = n // 2 if bits == 4 else n + 2                    # the farthest load's offset past a pair's row k
    for group in (g for g in (_DQ_PAIRS, 2, 1) if _DQ_PAIRS % g == 0):
        if (group - 1) * stride + reach <= 4095 and add_immediate(group * stride):
            return group, True
    return 1, add_immediate(stride)


@emitter("conv1d", "conv2d")
def _conv(r: CortexMRenderer, req: KernelRequest, name: str) -> str | None:
    """f32 convolutions at column stride 1: 4 channels x 4 columns of sums in s16-s31
    (openinfer/targets/mcu/fpu_conv.py, templates/mcu/conv.c.j2); None for any other request."""
    g = conv_geometry(req)
    if g is None:
        return None
    return render("mcu/conv.c.j2", name=name, proto=prototype(req, name), **conv_context(req, g))


@emitter("qconv2d")
def _qconv(r: CortexMRenderer, req: KernelRequest, name: str) -> str | None:
    """Integer-only int8 convolutions, groups 1 or depthwise (multiplier 1), with SMLAD / SXTB16
    (openinfer/targets/mcu/dsp_qconv.py, templates/mcu/qconv.c.j2); None for any other request."""
    return qconv_kernel(req, name, prototype(req, name))


@emitter("qlinear")
def _qlinear(r: CortexMRenderer, req: KernelRequest, name: str) -> str | None:
    """Integer-only int8 fully connected layers with SMLAD / SXTB16, the double requantization in
    integers (openinfer/targets/mcu/dsp_qlinear.py, templates/mcu/qlinear.c.j2); None for dynamic shapes."""
    return qlinear_kernel(req, name, prototype(req, name))
