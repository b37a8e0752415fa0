"""What the Vulkan kernels can absorb: the answers VulkanTarget gives the synthesizer's fusion
passes (openinfer/synth/fusion.py). Each predicate accepts exactly the requests whose kernel
(linalg.py's matmuls, quant.py's dequantizing GEMV, nn.py's sdpa) renders the folded work."""

from __future__ import annotations

from ....dims import Dim
from ....synth.program import KernelRequest
from .linalg import matmul_path, transposes
from .quant import takes_gemv


def takes_epilogue(req: KernelRequest) -> bool:
    """Whether req's kernel applies `req.epilogue` (openinfer/synth/fusion.py) to an f32 product:
    the GEMVs and the per-element kernels store one element per invocation and do; the GEMMs
    store tiles (cooperative matrices) and do not; nor do the convolutions."""
    if req.op not in ("matmul", "dequant_matmul"):
        return False
    product = req.epilogue.inputs[0]
    if product.dtype.name != "f32" or req.output.dtype.name not in ("f32", "f16", "bf16"):
        return False
    if req.op == "dequant_matmul":
        return True
    return matmul_path(req) in ("gemv", "value")


def takes_rope(req: KernelRequest, caps) -> bool:
    """Whether req's kernel rotates its result's column pairs as it stores them (`req.epilogue` a
    rope, `fold_rope`): the f32 GEMV (f32 weights, neither operand transposed) and, on a device
    with subgroup arithmetic, the dequantizing GEMV; a rope in halves (not interleaved) with a
    static theta at one scalar position, over an f32 result of whole heads of dh columns, dh a
    multiple of 8 (of two 16-byte column groups for the dequantizing GEMV). The angles are f64,
    as the rope kernel's."""
    rope = req.epilogue
    x = rope.inputs[0]
    dh = x.shape[-1]
    n = req.output.shape[-1]
    if (rope.attr("interleaved") or rope.runtime_attrs or rope.inputs[1].shape or not caps.fp64
            or isinstance(dh, Dim) or isinstance(n, Dim) or dh % 8 or n % dh or req.prologue is not None
            or x.dtype.name != "f32" or req.output.dtype.name != "f32" or req.mode != "normal" or req.acc):
        return False
    if req.op == "dequant_matmul":
        w = req.own_inputs[1]
        return (takes_gemv(req) and caps.subgroup and caps.subgroup_size >= 4 and w.shape[0] >= 4
                and dh % (2 * (128 // w.dtype.bits)) == 0 and len(req.own_inputs[0].shape) == 2)
    return (req.op == "matmul" and matmul_path(req) == "gemv" and not any(transposes(req))
            and len(req.own_inputs[0].shape) == 2 and req.own_inputs[1].dtype.name == "f32"
            and not isinstance(req.own_inputs[1].shape[0], Dim) and req.own_inputs[1].shape[0] >= 4)


def takes_prologue(req: KernelRequest) -> bool:
    """Whether req's kernel computes its input 0 itself (`req.prologue`, openinfer/synth/fusion.py):
    the GEMVs (f32 / f16 / bf16 weights, and the dequantizing ones) over an f32 x of two dims
    with a static K, the prologue an f32 rms_norm over x's last axis (`fold_norms`), or an f32
    element-wise chain over operands of x's shape (`fold_elementwise`)."""
    pro = req.prologue
    a = req.own_inputs[0]
    if not (req.mode == "normal" and not req.acc and len(a.shape) == 2 and not isinstance(a.shape[1], Dim)
            and a.dtype.name == "f32" and all(t.dtype.name == "f32" for t in (*pro.inputs, pro.output))):
        return False
    if pro.op == "rms_norm":
        if not (pro.attr("axis") == 1 and all(t.shape == (a.shape[1],) for t in pro.inputs[1:])):
            return False
    elif not (pro.op == "fused" and all(t.shape == a.shape for t in pro.inputs)):
        return False
    if req.op == "dequant_matmul":
        return takes_gemv(req)
    return (req.op == "matmul" and matmul_path(req) == "gemv" and not any(transposes(req))
            and req.own_inputs[1].dtype.name in ("f32", "f16", "bf16"))


def takes_transposed(req: KernelRequest) -> bool:
    """Whether req's kernel reads its transposed inputs (`req.input_perms`) itself: sdpa's k and v
    of three static dims, stored with their first two swapped (a cache read as [Sk, heads, D])."""
    return req.op == "sdpa" and all(
        n in (1, 2) and perm == (1, 0, 2) and len(req.inputs[n].shape) == 3
        and not any(isinstance(d, Dim) for d in req.inputs[n].shape) for n, perm in req.input_perms)
