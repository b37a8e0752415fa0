"""The ops of exported transformers: LayerNormalization (and its Mean / InvStdDev outputs),
RMSNormalization, and Attention as sdpa. (The decomposed forms exporters also write, MatMul and
Softmax attention, RMSNorm and GELU chains, are fused in openinfer/onnx/fusions.py.)
"""

from __future__ import annotations

import numpy as np

from ..context import NUMPY_DTYPES, Dim, NodeContext, Value, broadcast, expanded, handler


def _norm_axis(c: NodeContext, x: Value) -> tuple[int, int, tuple[Dim, ...]]:
    """LayerNormalization / RMSNormalization: X's rank, the first normalised axis and the
    normalised dims (statistics in f32: stash_type 1)."""
    c.float_input(x)
    if int(c.attrs.get("stash_type", 1)) != 1:
        c.fail(f"stash_type {c.attrs['stash_type']}: only 1 (f32 statistics) is supported")
    rank = len(x.dims)
    axis = int(c.attrs.get("axis", -1))
    if rank == 0 or not -rank <= axis < rank:
        c.fail(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    return rank, axis, x.dims[axis:]


def _norm_parameter(c: NodeContext, x: Value, v: Value, k: int, what: str, normalised: tuple[Dim, ...],
                    out: str) -> str:
    """A norm's scale or bias input, of the normalised dims' shape (a constant that broadcasts to
    it is expanded at import)."""
    if v.dtype != x.dtype:
        c.fail(f"{what} of dtype {v.dtype}, X of {x.dtype}")
    if v.shape != tuple(d.size for d in normalised):
        if v.const is None or broadcast(c.fail, v.dims, normalised) != normalised:
            c.fail(f"{what} of shape {list(v.shape)}: expected {[d.size for d in normalised]} "
                   f"(or a constant that broadcasts to it)")
    return expanded(c, v, k, normalised, f"{out}_{what.lower()}")


@handler("LayerNormalization", note="layer_norm(axis, eps); Scale and B of the normalised dims' shape (broadcast "
                                    "at import when constant); the Mean / InvStdDev outputs (f32) by mean_axis, sub, "
                                    "mul, add, rsqrt")
def _layer_norm(c: NodeContext) -> None:
    c.allow("axis", "epsilon", "stash_type")
    x, scale, bias = c.inputs(2, 3)
    out, mean_out, inv_std_out = (c.outputs(3) + ["", ""])[:3]
    rank, axis, normalised = _norm_axis(c, x)
    args = [c.var(x, 0)] + [_norm_parameter(c, x, v, k, what, normalised, out)
                            for v, k, what in ((scale, 1, "Scale"), (bias, 2, "B")) if v is not None]
    eps = float(c.attrs.get("epsilon", 1e-5))
    if out:
        c.emit("layer_norm", args, {"axis": axis if axis != rank - 1 else None, "eps": eps if eps != 1e-5 else None},
               x.dtype, x.dims, out=out)
    if mean_out or inv_std_out:
        _layer_norm_statistics(c, x, axis, eps, mean_out, inv_std_out)


def _layer_norm_statistics(c: NodeContext, x: Value, axis: int, eps: float, mean_out: str, inv_std_out: str) -> None:
    """LayerNormalization's Mean and InvStdDev outputs (f32, the normalised dims kept as 1), computed
    by ops: the mean, and rsqrt of the mean square deviation plus epsilon."""
    if x.dtype != "f32":
        c.fail(f"the Mean / InvStdDev outputs of a {x.dtype} input (f32 only: they are f32)")
    axes = list(range(axis, len(x.dims)))
    stat_dims = x.dims[:axis] + (Dim(1),) * len(axes)
    base = mean_out or inv_std_out
    mean = c.emit("mean_axis", [c.var(x, 0)], {"axes": axes, "keepdims": True}, x.dtype, stat_dims,
                  **({"out": mean_out} if mean_out else {"temp": f"{base}_mean"}))
    if not inv_std_out:
        return
    deviation = c.emit("sub", [c.var(x, 0), mean.var], {}, x.dtype, x.dims, temp=f"{inv_std_out}_deviation")
    c.emit_inplace("mul", [deviation.var, deviation.var], deviation)
    var = c.emit("mean_axis", [deviation.var], {"axes": axes, "keepdims": True}, x.dtype, stat_dims,
                 temp=f"{inv_std_out}_var")
    eps_name = c.imp.new_constant(np.asarray(eps, np.float32), f"{inv_std_out}_epsilon", "LayerNormalization epsilon")
    c.emit_inplace("add", [var.var, eps_name], var)
    c.emit("rsqrt", [var.var], {}, x.dtype, stat_dims, out=inv_std_out)


@handler("RMSNormalization", note="rms_norm(axis, eps); scale of the normalised dims' shape (broadcast at import "
                                  "when constant); stash_type 1")
def _rms_norm(c: NodeContext) -> None:
    c.allow("axis", "epsilon", "stash_type")
    x, scale = c.inputs(2, 2)
    (out,) = c.outputs()
    rank, axis, normalised = _norm_axis(c, x)
    gamma = _norm_parameter(c, x, scale, 1, "scale", normalised, out)
    eps = float(c.attrs.get("epsilon", 1e-5))
    c.emit("rms_norm", [c.var(x, 0), gamma], {"axis": axis if axis != rank - 1 else None, "eps": eps},
           x.dtype, x.dims, out=out)


@handler("Attention", note="sdpa(scale, causal): 4-D [B, H, S, D] or 3-D [B, S, H*D] (q_num_heads/kv_num_heads) "
                           "through reshape and transpose; attn_mask bool or float; past_key/past_value joined by "
                           "concat (present_key/present_value outputs); no softcap, no qk output, no nonpad_kv_seqlen")
def _attention(c: NodeContext) -> None:
    c.allow("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
            "softmax_precision")
    q, k, v, mask, past_k, past_v, nonpad = c.inputs(3, 7)
    outs = (list(c.node.output) + ["", "", "", ""])[:4]
    out, present_k_out, present_v_out, qk_out = outs
    if qk_out:
        c.fail("the qk_matmul_output output is not supported")
    if float(c.attrs.get("softcap", 0.0)) != 0.0:
        c.fail("softcap is not supported (sdpa has none)")
    if nonpad is not None:
        c.fail("nonpad_kv_seqlen is not supported")
    if (past_k is None) != (past_v is None):
        c.fail("past_key and past_value must come together")
    for t in (q, k, v, past_k, past_v):
        if t is not None:
            c.float_input(t)
            if t.dtype != q.dtype:
                c.fail("Q, K, V and the past of different dtypes")
    rank = len(q.dims)
    if rank not in (3, 4) or len(k.dims) != rank or len(v.dims) != rank:
        c.fail(f"Q, K, V of ranks {len(q.dims)}, {len(k.dims)}, {len(v.dims)}: 3-D or 4-D each")

    def heads(t: Value, position: int, count_attr: str) -> Value:
        """t as [B, H, S, D]: a 3-D [B, S, H*D] input reshaped and transposed."""
        name = c.var(t, position)
        if rank == 4:
            return Value(t.dtype, t.dims, var=name)
        if count_attr not in c.attrs:
            c.fail(f"3-D inputs need {count_attr}")
        n = int(c.attrs[count_attr])
        if n <= 0 or t.shape[2] % n:
            c.fail(f"{count_attr}={n} does not divide {t.shape[2]}")
        split = (t.dims[0], t.dims[1], Dim(n), Dim(t.shape[2] // n))
        r = c.emit("reshape", [name], {}, t.dtype, split, temp=f"{out or 'attention'}_{c.node.input[position]}_heads")
        dims = (split[0], split[2], split[1], split[3])
        return c.emit("transpose", [r.var], {"perm": [0, 2, 1, 3]}, t.dtype, dims, temp=f"{r.var}_t")

    qh = heads(q, 0, "q_num_heads")
    kh = heads(k, 1, "kv_num_heads")
    vh = heads(v, 2, "kv_num_heads")
    past_len = 0
    if past_k is not None:
        if len(past_k.dims) != 4 or len(past_v.dims) != 4:
            c.fail("past_key / past_value must be 4-D")
        past_len = past_k.shape[2]
        for cur, past, position, present in ((kh, past_k, 4, present_k_out), (vh, past_v, 5, present_v_out)):
            dims = (cur.dims[0], cur.dims[1], Dim(past.shape[2] + cur.shape[2]), cur.dims[3])
            joined = c.emit("concat", [c.var(past, position), cur.var], {"axis": 2}, cur.dtype, dims,
                            **({"out": present} if present else {"temp": f"{out}_{'kv'[position - 4]}_all"}))
            if position == 4:
                kh = joined
            else:
                vh = joined
    elif present_k_out or present_v_out:
        for cur, present in ((kh, present_k_out), (vh, present_v_out)):
            if present:
                c.emit("reshape", [cur.var], {}, cur.dtype, cur.dims, out=present)
    if qh.shape[1] % kh.shape[1]:
        c.fail(f"{qh.shape[1]} query heads over {kh.shape[1]} key/value heads")
    sq, sk = qh.shape[2], kh.shape[2]
    causal = bool(c.attrs.get("is_causal", 0))
    args = [qh.var, kh.var, vh.var]
    if mask is not None:
        if mask.dtype not in ("bool", q.dtype):
            c.fail(f"attn_mask of dtype {mask.dtype}")
        if mask.shape[-1:] != (sk,):
            c.fail(f"attn_mask of shape {list(mask.shape)}: its last dim must be the {sk} keys")
        broadcast(c.fail, mask.dims, qh.dims[:2] + (Dim(sq), Dim(sk)))
    if causal and sk - sq != past_len:
        # ONNX lets query i see keys j <= i + past; sdpa's causal aligns at the keys' end instead,
        # so the causal part becomes a constant mask (combined with attn_mask where there is one)
        causal = False
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + past_len
        if mask is None or mask.dtype == "bool":
            extra = c.imp.const_value(allowed)
        else:
            extra = c.imp.const_value(np.where(allowed, 0, -np.inf).astype(NUMPY_DTYPES[mask.dtype]))
        if mask is None:
            mask_name = c.imp.new_constant(extra.const, f"{out}_causal", f"{c.label}'s causal mask (ONNX alignment)")
        else:
            both = broadcast(c.fail, mask.dims, extra.dims)
            m = expanded(c, mask, 3, both, f"{out}_mask")
            e = c.imp.new_constant(np.broadcast_to(extra.const, tuple(d.size for d in both)), f"{out}_causal",
                                   f"{c.label}'s causal mask (ONNX alignment)")
            mask_name = c.emit("and" if mask.dtype == "bool" else "add", [m, e], {}, mask.dtype, both,
                               temp=f"{out}_mask_causal").var
        args.append(mask_name)
    elif mask is not None:
        args.append(c.var(mask, 3))
    dims = qh.dims[:3] + (vh.dims[3],)
    settings = {"scale": float(c.attrs["scale"]) if "scale" in c.attrs else None, "causal": causal or None}
    if rank == 4:
        c.emit("sdpa", args, settings, q.dtype, dims, out=out)
        return
    y = c.emit("sdpa", args, settings, q.dtype, dims, temp=f"{out}_heads")
    t = c.emit("transpose", [y.var], {"perm": [0, 2, 1, 3]}, q.dtype, (dims[0], dims[2], dims[1], dims[3]),
               temp=f"{out}_t")
    c.emit("reshape", [t.var], {}, q.dtype, (dims[0], dims[2], Dim(dims[1].size * dims[3].size)), out=out)
