"""ONNX's layers: MatMul (of a quantised weight: dequant_matmul, openinfer/onnx/quantized_weights.py)
and Gemm, Conv (a following BatchNormalization folded into its weights), BatchNormalization, the
pools, and LRN (the registry's `lrn`: the same window, attributes and defaults, so the node's
attributes are written as it gives them).
"""

from __future__ import annotations

import numpy as np

from ..context import DSL_OPS, NUMPY_DTYPES, Dim, NodeContext, Value, broadcast, handler, matmul_dims, quoted
from ..problems import given_sizevars
from ..quantized_weights import quantized_matmul


@handler("MatMul", note="matmul (NumPy semantics: batch dims broadcast, 1-D operands as vectors)")
def _matmul(c: NodeContext) -> None:
    c.allow()
    a, b = c.inputs(2, 2)
    (out,) = c.outputs()
    if a.dtype != b.dtype:
        c.fail(f"inputs of dtypes {a.dtype} and {b.dtype}")
    dims = matmul_dims(c, a.dims, b.dims)
    if quantized_matmul(c, a, b, out):
        return
    # f16 sums in f32, rounded once on store (as ONNX runtimes do), not rounded after every add
    c.emit("matmul", [c.var(a, 0), c.var(b, 1)], {"acc": "f32"} if a.dtype == "f16" else {}, a.dtype, dims,
           out=out)


@handler("Gemm", note="matmul + add; transA/transB as matmul's transpose_a/transpose_b on the operands as stored, "
                      "alpha/beta folded into constant operands")
def _gemm(c: NodeContext) -> None:
    c.allow("alpha", "beta", "transA", "transB", "broadcast")
    a, b, bias = c.inputs(2, 3)
    (out,) = c.outputs()
    alpha, beta = float(c.attrs.get("alpha", 1.0)), float(c.attrs.get("beta", 1.0))
    if len(a.dims) != 2 or len(b.dims) != 2:
        c.fail("A and B must be 2-D")
    base = c.node.output[0]
    trans = {"transpose_a": bool(c.attrs.get("transA", 0)), "transpose_b": bool(c.attrs.get("transB", 0))}

    def operand(v: Value, position: int, transpose: bool, scale: float) -> tuple[str, tuple[Dim, ...]]:
        """The operand as stored (transA/transB become matmul's transpose_a/transpose_b: a PyTorch
        Linear's [out, in] weight is used as it is) and its dims as multiplied; a constant is
        scaled by alpha here."""
        onnx_name = c.node.input[position]
        if v.const is not None and scale != 1.0:
            array = (v.const * np.asarray(scale, v.const.dtype)).astype(v.const.dtype)
            name = c.imp.new_constant(array, onnx_name, f'ONNX {quoted(onnx_name)}, times alpha={scale!r}')
        else:
            name = c.var(v, position)
        return name, (v.dims[1], v.dims[0]) if transpose else v.dims

    alpha_into = 1 if b.const is not None else (0 if a.const is not None else None)
    an, ad = operand(a, 0, trans["transpose_a"], alpha if alpha_into == 0 else 1.0)
    bn, bd = operand(b, 1, trans["transpose_b"], alpha if alpha_into == 1 else 1.0)
    if ad[1].size != bd[0].size:
        c.fail(f"inner dims differ: A {[d.size for d in ad]}, B {[d.size for d in bd]} (after transA/transB)")
    dims = (ad[0], bd[1])
    y = c.emit("matmul", [an, bn], {k: True for k, on in trans.items() if on}, a.dtype, dims, out=base)
    if alpha != 1.0 and alpha_into is None:
        scale = c.imp.new_constant(np.asarray(alpha, NUMPY_DTYPES[a.dtype]), f"{base}_alpha", "Gemm alpha")
        c.emit_inplace("mul", [y.var, scale], y)
    if bias is not None and beta != 0.0:
        if [d.size for d in broadcast(c.fail, bias.dims, dims)] != [d.size for d in dims]:
            c.fail(f"C of shape {list(bias.shape)} does not broadcast to the result's {[d.size for d in dims]}")
        if bias.const is not None and beta != 1.0:
            cn = c.imp.new_constant((bias.const * np.asarray(beta, bias.const.dtype)).astype(bias.const.dtype),
                                    c.node.input[2], f'ONNX {quoted(c.node.input[2])}, times beta={beta!r}')
        elif bias.const is None and beta != 1.0:
            scale = c.imp.new_constant(np.asarray(beta, NUMPY_DTYPES[a.dtype]), f"{base}_beta", "Gemm beta")
            cn = c.emit("mul", [c.var(bias, 2), scale], {}, a.dtype, bias.dims, temp=f"{base}_bias").var
        else:
            cn = c.var(bias, 2)
        c.emit_inplace("add", [y.var, cn], y)


def _pool_pads(fail, attrs, spatial, kernel, strides, dilations) -> list[int]:
    """ONNX pads ([begins..., ends...]) from `pads` or `auto_pad`."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    rank = len(spatial)
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * 2 * rank))
        if len(pads) != 2 * rank:
            fail(f"pads {pads}: expected {2 * rank} values")
        return pads
    if auto == "VALID":
        return [0] * 2 * rank
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begins.append(small if auto == "SAME_UPPER" else large)
            ends.append(large if auto == "SAME_UPPER" else small)
        return begins + ends
    fail(f"auto_pad {auto!r} is not supported (NOTSET, VALID, SAME_UPPER, SAME_LOWER are)")
    raise AssertionError


def _pair_setting(values: list[int], default: int):
    """A 2-D int_or_list setting written as hand-written DSL would: None at the default, an int when
    both are equal."""
    if all(v == values[0] for v in values):
        return None if values[0] == default else values[0]
    return list(values)


def _padding_setting(pads: list[int]):
    top, left, bottom, right = pads
    if top == bottom and left == right:
        return _pair_setting([top, left], 0)
    return [top, left, bottom, right]


def _spatial_attrs(c: NodeContext, x: Value, kernel: list[int], *, dilated: bool):
    spatial = list(x.shape[2:])
    strides = [int(s) for s in c.attrs.get("strides", [1] * len(spatial))]
    dilations = [int(d) for d in c.attrs.get("dilations", [1] * len(spatial))]
    if len(strides) != len(spatial) or len(dilations) != len(spatial):
        c.fail("strides/dilations must have one value per spatial dim")
    if not dilated and any(d != 1 for d in dilations):
        c.fail(f"dilations {dilations} are not supported (1 only)")
    pads = _pool_pads(c.fail, c.attrs, spatial, kernel, strides, dilations)
    for i, n in enumerate(spatial):     # (the sizevars may make an input this small)
        window, padded = dilations[i] * (kernel[i] - 1) + 1, n + pads[i] + pads[i + len(spatial)]
        if window > padded:
            c.fail(f"the window ({window}) is larger than the padded input ({padded}) in spatial dim {i}"
                   f"{given_sizevars(c.imp.sizevars)}")
    return spatial, strides, dilations, pads


def _need_1d_or_2d(c: NodeContext, x: Value) -> None:
    if len(x.dims) not in (3, 4):
        c.fail(f"a {len(x.dims)}-D input: only 1-D (NCL) and 2-D (NCHW) are supported")
    c.float_input(x)


@handler("Conv", note="conv1d (NCL) / conv2d (NCHW): pads/auto_pad, strides, dilations, group; a following "
                      "BatchNormalization is folded into its weights")
def _conv(c: NodeContext) -> None:
    c.allow("kernel_shape", "pads", "strides", "dilations", "group", "auto_pad")
    x, w, b = c.inputs(2, 3)
    (out,) = c.outputs()
    _need_1d_or_2d(c, x)
    rank = len(x.dims)
    if len(w.dims) != rank:
        c.fail(f"weights of rank {len(w.dims)}: expected {rank}")
    kernel = [int(k) for k in c.attrs.get("kernel_shape", w.shape[2:])]
    if kernel != list(w.shape[2:]):
        c.fail(f"kernel_shape {kernel} differs from the weights' {list(w.shape[2:])}")
    group = int(c.attrs.get("group", 1))
    spatial, strides, dilations, pads = _spatial_attrs(c, x, kernel, dilated=True)
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        c.fail(f"channels: input {x.shape[1]}, weights {list(w.shape)}, group {group} do not fit")
    k = len(spatial)
    size = [(n + pads[i] + pads[i + k] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
            for i, n in enumerate(spatial)]
    dims = (x.dims[0], Dim(w.shape[0]), *(Dim(n) for n in size))
    if k == 2:
        op = "conv2d"
        settings = {"stride": _pair_setting(strides, 1), "padding": _padding_setting(pads),
                    "dilation": _pair_setting(dilations, 1)}
    else:
        op = "conv1d"
        settings = {"stride": strides[0] if strides[0] != 1 else None,
                    "padding": _pair_setting(pads, 0), "dilation": dilations[0] if dilations[0] != 1 else None}
    settings["groups"] = group if group != 1 else None
    weight, bias = w.const, (b.const if b is not None else None)
    bn = _foldable_batch_norm(c, out)
    if bn is not None and weight is not None and (b is None or bias is not None):
        bn_index, bn_node, scale, shift = bn
        # y = (conv(x, w) + b - mean) * s + B  ==  conv(x, w * s) + ((b - mean) * s + B)
        weight = (weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (rank - 1))).astype(weight.dtype)
        base = bias.astype(np.float64) if bias is not None else np.zeros(weight.shape[0])
        bias = (base * scale + shift).astype(weight.dtype)
        c.imp.skip.add(bn_index)
        bn_label = quoted(bn_node.name) if bn_node.name else f"#{bn_index}"
        folded = f"with {bn_label} folded in"
        wn = c.imp.new_constant(weight, c.node.input[1], f'ONNX {quoted(c.node.input[1])}, {folded}')
        bias_name = c.node.input[2] if b is not None else f"{bn_node.output[0]}_bias"
        bn_ = c.imp.new_constant(bias, bias_name, (f'ONNX {quoted(bias_name)}, ' if b is not None else "") + folded)
        c.emit(op, [c.var(x, 0), wn, bn_], settings, x.dtype, dims, out=bn_node.output[0],
               note=f"{c.label} (Conv) + {bn_label} (BatchNormalization, folded)")
        return
    args = [c.var(x, 0), c.var(w, 1)] + ([c.var(b, 2)] if b is not None else [])
    c.emit(op, args, settings, x.dtype, dims, out=out)


def _batch_norm_affine(c: NodeContext, node, ins: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference BatchNormalization whose parameters are constants, else None."""
    if len(ins) != 5 or any(v is None or v.const is None for v in ins[1:]):
        return None
    import onnx.helper as oh

    attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
    eps = float(attrs.get("epsilon", 1e-5))
    gamma, beta, mean, var = (v.const.astype(np.float64).reshape(-1) for v in ins[1:])
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale


def _foldable_batch_norm(c: NodeContext, conv_out: str):
    """The BatchNormalization that alone consumes this Conv's output, with constant parameters:
    (its index, node, scale, shift); else None."""
    imp = c.imp
    users = imp.consumers.get(conv_out, [])
    if len(users) != 1 or conv_out in imp.outputs:
        return None
    index = users[0]
    node = imp.g.node[index]
    if node.op_type != "BatchNormalization" or node.input[0] != conv_out or any(node.output[1:]):
        return None
    if any(a.name == "training_mode" and a.i for a in node.attribute):
        return None
    ins = [imp.values.get(x) if x else None for x in node.input]
    affine = _batch_norm_affine(c, node, ins)
    return None if affine is None else (index, node, *affine)


@handler("BatchNormalization", note="inference only: folded into a preceding Conv, else mul + add")
def _batch_norm(c: NodeContext) -> None:
    c.allow("epsilon", "momentum", "spatial", "is_test", "training_mode")
    x = c.inputs(5, 5)[0]
    (out,) = c.outputs()
    if c.attrs.get("training_mode", 0):
        c.fail("training_mode=1 is not supported (inference only)")
    if c.attrs.get("spatial", 1) != 1:
        c.fail("spatial=0 is not supported")
    c.float_input(x)
    affine = _batch_norm_affine(c, c.node, c.ins)
    if affine is None:
        c.fail("scale, B, mean and var must be constants")
    if len(x.dims) < 2:
        c.fail("the input needs a channel dim (rank >= 2)")
    shape = (x.shape[1],) + (1,) * (len(x.dims) - 2)
    np_dtype = NUMPY_DTYPES[x.dtype]
    scale, shift = (a.reshape(shape).astype(np_dtype) for a in affine)
    sn = c.imp.new_constant(scale, f"{out}_scale", "scale / sqrt(var + epsilon)")
    tn = c.imp.new_constant(shift, f"{out}_shift", "B - mean * scale / sqrt(var + epsilon)")
    y = c.emit("mul", [c.var(x, 0), sn], {}, x.dtype, x.dims, out=out)
    c.emit_inplace("add", [y.var, tn], y)


_POOL_NOTE = ("{dsl} (NCHW; 1-D NCL through reshapes): kernel_shape, strides, pads up to half the kernel "
              "(ceil_mode's extra end padding included), auto_pad%s; no dilations")


@handler("AveragePool", note=_POOL_NOTE % ", count_include_pad")
@handler("MaxPool", note=_POOL_NOTE % "; no Indices output")
def _pool(c: NodeContext) -> None:
    is_max = c.node.op_type == "MaxPool"
    c.allow("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations",
            *(("storage_order",) if is_max else ("count_include_pad",)))
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    _need_1d_or_2d(c, x)
    one_d = len(x.dims) == 3
    if "kernel_shape" not in c.attrs:
        c.fail("kernel_shape is required")
    kernel = [int(k) for k in c.attrs["kernel_shape"]]
    if len(kernel) != len(x.dims) - 2:
        c.fail(f"kernel_shape {kernel}: expected {len(x.dims) - 2} values")
    spatial, strides, _, pads = _spatial_attrs(c, x, kernel, dilated=False)
    if one_d:       # pooled as [N, C, 1, L] by the 2-D pools
        spatial, kernel, strides, pads = [1, *spatial], [1, *kernel], [1, *strides], [0, pads[0], 0, pads[1]]
    include_pad = not is_max and bool(c.attrs.get("count_include_pad", 0))
    onnx_pads, size = list(pads), []
    for i, n in enumerate(spatial):
        span = n + pads[i] + pads[i + 2] - kernel[i]
        floor, ceil = span // strides[i] + 1, -(-span // strides[i]) + 1
        # ceil mode keeps a last window that starts inside the input (or its begin padding)
        if c.attrs.get("ceil_mode", 0) and ceil != floor and (ceil - 1) * strides[i] < n + pads[i]:
            if include_pad:
                c.fail(f"ceil_mode=1 with count_include_pad=1 where it changes the output size ({floor} -> "
                       f"{ceil}) is not supported")
            # the floor-mode pool over more end padding: padding is never the max, and is not
            # counted by an average without count_include_pad
            pads[i + 2] += (ceil - 1) * strides[i] + kernel[i] - (n + pads[i] + pads[i + 2])
            floor = ceil
        size.append(floor)
    for i in range(2):
        if max(pads[i], pads[i + 2]) * 2 > kernel[i]:
            c.fail(f"pads {onnx_pads}" + (f" (with ceil_mode: {pads})" if pads != onnx_pads else "") +
                   f" larger than half the kernel {kernel} are not supported")
    settings = {"kernel": _pair_setting(kernel, -1),
                "stride": None if strides == kernel else _pair_setting(strides, -1),
                "padding": _padding_setting(pads)}
    if include_pad:
        settings["count_include_pad"] = True
    op = DSL_OPS[c.node.op_type]
    if not one_d:
        c.emit(op, [c.var(x, 0)], settings, x.dtype, (x.dims[0], x.dims[1], Dim(size[0]), Dim(size[1])), out=out)
        return
    lifted = c.emit("reshape", [c.var(x, 0)], {}, x.dtype, (x.dims[0], x.dims[1], Dim(1), x.dims[2]),
                    temp=f"{out}_2d")
    pooled = c.emit(op, [lifted.var], settings, x.dtype, (x.dims[0], x.dims[1], Dim(1), Dim(size[1])),
                    temp=f"{out}_2d_pooled")
    c.emit("reshape", [pooled.var], {}, x.dtype, (x.dims[0], x.dims[1], Dim(size[1])), out=out)


@handler("GlobalAveragePool", note="mean_axis over the spatial dims, keepdims")
def _global_average_pool(c: NodeContext) -> None:
    c.allow()
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    if len(x.dims) < 3:
        c.fail(f"a {len(x.dims)}-D input: expected N, C and spatial dims")
    axes = list(range(2, len(x.dims)))
    dims = x.dims[:2] + (Dim(1),) * len(axes)
    c.emit("mean_axis", [c.var(x, 0)], {"axes": axes, "keepdims": True}, x.dtype, dims, out=out)


@handler("LRN", note="lrn(size, alpha, beta, bias); float dtypes; X of at least 2 dims ([N, C, ...])")
def _lrn(c: NodeContext) -> None:
    c.allow("size", "alpha", "beta", "bias")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    if "size" not in c.attrs:
        c.fail("size is required")
    size = int(c.attrs["size"])
    if size < 1:
        c.fail(f"size {size}: expected at least 1")
    if len(x.dims) < 2:
        c.fail(f"a {len(x.dims)}-D input: expected [N, C, ...]")
    settings = {"size": size, **{k: float(c.attrs[k]) for k in ("alpha", "beta", "bias") if k in c.attrs}}
    c.emit("lrn", [c.var(x, 0)], settings, x.dtype, x.dims, out=out)
