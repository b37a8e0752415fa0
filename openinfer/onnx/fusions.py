"""Fused patterns: decomposed subgraphs of exported models mapped onto the registry's fused ops.
A pattern is found on the graph's structure before the nodes are imported; its inner nodes are
deferred to its last node, which checks the values exactly (dtypes, shapes, constants) and emits
the fused op, or else imports the deferred nodes as they are (no pattern is ever approximate).

Used by openinfer/onnx/importer.py: `find_fusions` before the nodes are imported, `apply_fusion`
at each pattern's last node; `bool_mask_where` by the Where handler (handlers/elementwise.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import OnnxImportError
from .context import (
    FLOATS,
    ONNX_DTYPES,
    Fusion,
    ImportState,
    NodeContext,
    Value,
    broadcast,
    dims_of,
    expanded,
    matmul_dims,
    quoted,
)

#: an additive mask value this low removes a key exactly: exp(score + mask - max) is 0 in f32
_MASKED = -1e30


class _Graph:
    """Producers and consumers of the ONNX values, for matching patterns."""

    def __init__(self, imp: ImportState):
        self.imp = imp
        self.nodes = list(imp.g.node)
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.outputs = set(imp.outputs)

    def made_by(self, name: str, *op_types: str):
        """(index, node) producing `name` when its op type is one of `op_types`, else None."""
        i = self.producer.get(name)
        if i is None or self.nodes[i].op_type not in op_types or self.nodes[i].domain not in ("", "ai.onnx"):
            return None
        return i, self.nodes[i]

    def sole(self, name: str, consumer: int) -> bool:
        """`name` is used only by node `consumer` (once) and is no graph output."""
        return self.imp.consumers.get(name, []) == [consumer] and name not in self.outputs


def find_fusions(imp: ImportState) -> dict[int, Fusion]:
    g = _Graph(imp)
    found: dict[int, Fusion] = {}
    claimed: set[int] = set()
    for i, node in enumerate(g.nodes):
        if node.domain not in ("", "ai.onnx"):
            continue
        for matcher in _MATCHERS.get(node.op_type, ()):
            fusion = matcher(g, i, node)
            if fusion is not None and not (claimed & {i, *fusion.inner}):
                found[i] = fusion
                claimed |= {i, *fusion.inner}
                break
    return found


def apply_fusion(imp: ImportState, index: int, import_node: Callable[[int, Any], None]) -> bool:
    """Emits the fusion ending at node `index` (True); otherwise imports its deferred nodes with
    `import_node(index, node)`, the importer's own step (False)."""
    fusion = imp.fusions.pop(index)
    if fusion.apply(imp, fusion):
        return True
    mask = fusion.parts.get("mask")
    if mask in imp.bool_masks:                       # the Where left to sdpa as a bool mask: its plain ops now
        del imp.bool_masks[mask]                     # (this fusion no longer counts as its user)
        where = _Graph(imp).producer[mask]
        import_node(where, imp.g.node[where])
    for j in fusion.inner:
        import_node(j, imp.g.node[j])
    return False


def _fusion_context(imp: ImportState, fusion: Fusion) -> NodeContext:
    node = imp.g.node[fusion.final]
    label = quoted(node.name) if node.name else f"#{fusion.final}"

    def fail(message: str):
        raise OnnxImportError(f"node {label} ({node.op_type}): {message}")

    return NodeContext(imp, node, {}, [], fail, label)


def _fusion_note(imp: ImportState, fusion: Fusion, what: str) -> str:
    nodes = [imp.g.node[j] for j in sorted(fusion.inner + [fusion.final])]
    first, last = (quoted(n.name) if n.name else n.op_type for n in (nodes[0], nodes[-1]))
    return f"{first} .. {last} ({', '.join(n.op_type for n in nodes)}): {what}"


def _scalar_const(v: Value | None) -> float | None:
    if v is None or v.const is None or v.const.size != 1 or v.dtype not in FLOATS:
        return None
    return float(v.const.reshape(()).item())


def _match_attention(g: _Graph, i: int, node) -> Fusion | None:
    """MatMul(Softmax(MatMul(Q, Transpose(K)) * scale [+ mask]), V), Softmax over the keys, as
    sdpa(Q, K, V[, mask], scale). The scale is a Mul or Div by a scalar constant (or absent); the
    mask an added tensor (a constant causal one becomes causal=true), or Where(cond, 0, -big) of a
    computed cond (passed to sdpa as the bool mask); Identity/Dropout/Cast may follow the Softmax.
    torch's decomposition of F.scaled_dot_product_attention (the dynamo exporter's) also fits: Q
    and K^T each multiplied by a scalar constant (sqrt of the scale), K^T as Reshape(Transpose(
    Reshape(K, [-1, Sk, D]), [0, 2, 1]), [..., D, Sk]), and Where(IsNaN(P), 0, P) after the Softmax."""
    if len(node.input) != 2:
        return None
    inner = []
    p = node.input[0]
    consumer = i
    while (step := g.made_by(p, "Identity", "Dropout", "Cast")) is not None and g.sole(p, consumer) \
            and len([o for o in step[1].output if o]) == 1:
        inner.append(step[0])
        consumer, p = step[0], step[1].input[0]
    chain = [g.nodes[j] for j in inner]
    guard = _nan_guard(g, p, consumer)
    if guard is not None:
        inner += guard[0]
        p = guard[2]
    softmax = g.made_by(p, "Softmax")
    if softmax is None or not (g.sole(p, consumer) if guard is None else
                               sorted(g.imp.consumers.get(p, [])) == guard[0] and p not in g.outputs):
        return None
    inner.append(softmax[0])
    scores, consumer = softmax[1].input[0], softmax[0]
    parts = {"softmax": softmax[1], "chain": chain, "mask": None, "scale": None,
             "nan_zero": guard[1] if guard is not None else None}
    add = g.made_by(scores, "Add")
    if add is not None and g.sole(scores, consumer):
        for k in (0, 1):
            if g.made_by(add[1].input[k], "Mul", "Div", "MatMul") is not None:
                inner.append(add[0])
                consumer, scores = add[0], add[1].input[k]
                parts["mask"] = add[1].input[1 - k]
                break
    scale = g.made_by(scores, "Mul", "Div")
    if scale is not None and g.sole(scores, consumer):
        k = 0 if g.made_by(scale[1].input[0], "MatMul") is not None else 1
        if scale[1].op_type == "Div" and k != 0:
            return None
        inner.append(scale[0])
        consumer, scores = scale[0], scale[1].input[k]
        parts["scale"] = (scale[1].op_type, scale[1].input[1 - k])
    qk = g.made_by(scores, "MatMul")
    if qk is None or not g.sole(scores, consumer):
        return None
    inner.append(qk[0])
    parts["q"], parts["kt"], parts["v"], parts["perm"] = qk[1].input[0], qk[1].input[1], node.input[1], None
    parts["kt_chain"], kt_consumer = None, qk[0]
    for side in ("q", "kt"):                         # torch's decomposition: Q * sqrt(s), K^T * sqrt(s)
        scaled = _scaled_by_scalar(g, parts[side], qk[0])
        if scaled is not None:
            inner.append(scaled[0])
            parts[side], parts[f"{side}_scale"] = scaled[1], scaled[2]
            kt_consumer = scaled[0] if side == "kt" else kt_consumer
    transpose = g.made_by(parts["kt"], "Transpose")
    if (swap := _swap_chain(g, parts["kt"], kt_consumer)) is not None:
        inner += swap[0]
        parts["kt"], parts["kt_chain"] = swap[1], swap[2]
    elif transpose is not None and g.sole(parts["kt"], kt_consumer):
        inner.append(transpose[0])
        parts["kt"], parts["perm"] = transpose[1].input[0], transpose[1]
    return Fusion("attention", i, sorted(inner), _apply_attention, parts)


def _nan_guard(g: _Graph, name: str, consumer: int):
    """Where(IsNaN(P), zero, P) computing `name`, used only by node `consumer`, where P is used by
    nothing else: ([IsNaN, Where] node indices, sorted; the zero's name; P), or None. (The zero is
    checked to be +0 when the fusion is applied.)"""
    where = g.made_by(name, "Where")
    if where is None or not g.sole(name, consumer) or len(where[1].input) != 3:
        return None
    cond, zero, p = where[1].input
    isnan = g.made_by(cond, "IsNaN")
    if isnan is None or not g.sole(cond, where[0]) or isnan[1].input[0] != p:
        return None
    return sorted([isnan[0], where[0]]), zero, p


def _scaled_by_scalar(g: _Graph, name: str, consumer: int):
    """Mul(X, c) (either order) computing `name`, used only by node `consumer`, c a scalar float
    initializer: (the Mul's index, X, c), or None."""
    mul = g.made_by(name, "Mul")
    if mul is None or not g.sole(name, consumer) or len(mul[1].input) != 2:
        return None
    for k in (0, 1):
        c = mul[1].input[1 - k]
        if c not in g.producer and _scalar_const(g.imp.values.get(c)) is not None:
            return mul[0], mul[1].input[k], c
    return None


def _swap_chain(g: _Graph, name: str, consumer: int):
    """Reshape(Transpose(Reshape(K, s1), perm), s2) computing `name`, each link used only by the
    next (the last by node `consumer`): torch's K^T, the last two dims of K swapped through a 3-D
    transpose. ([its node indices], K, (Reshape, Transpose, Reshape)), or None; the shapes and perm
    are checked when the fusion is applied."""
    nodes, links = [], []
    for op_type in ("Reshape", "Transpose", "Reshape"):
        made = g.made_by(name, op_type)
        if made is None or not g.sole(name, consumer):
            return None
        nodes.append(made[0])
        links.append(made[1])
        consumer, name = made[0], made[1].input[0]
    return sorted(nodes), name, tuple(links[::-1])


def _causal_mask(mask: np.ndarray, sq: int, sk: int) -> bool:
    """Whether an additive mask, broadcast to [..., sq, sk], is sdpa's causal mask: 0 where key j
    <= query i + (sk - sq), at most _MASKED elsewhere."""
    m = np.broadcast_to(mask, mask.shape[:-2] + (sq, sk)) if mask.ndim >= 2 else None
    if m is None:
        return False
    allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
    return bool(np.all(m[..., allowed] == 0) and np.all(m[..., ~allowed] <= _MASKED))


def _apply_attention(imp: ImportState, f: Fusion) -> bool:
    p = f.parts
    if any(n not in imp.values for n in (p["q"], p["kt"], p["v"])) or \
            (p["mask"] is not None and p["mask"] not in imp.values and p["mask"] not in imp.bool_masks):
        return False
    q, kt, v = imp.values[p["q"]], imp.values[p["kt"]], imp.values[p["v"]]
    rank = len(q.dims)
    if q.dtype not in FLOATS or kt.dtype != q.dtype or v.dtype != q.dtype or rank < 2 or \
            len(kt.dims) != rank or len(v.dims) != rank:
        return False
    if any(n.op_type == "Cast" and ONNX_DTYPES.get(int(_attr(n, "to", 0))) != q.dtype for n in p["chain"]) or \
            any(n.op_type == "Dropout" and len(n.input) > 2 and n.input[2] for n in p["chain"]):
        return False
    axis = int(_attr(p["softmax"], "axis", -1 if imp.opset >= 13 else 1))
    if axis % rank != rank - 1:
        return False
    if p["nan_zero"] is not None:                    # Where(IsNaN(P), +0, P): sdpa's zeros for rows with no key
        z = imp.values.get(p["nan_zero"])
        if _scalar_const(z) != 0.0 or np.signbit(z.const).any() or z.dtype != q.dtype or len(z.dims) > rank:
            return False
    if p["kt_chain"] is not None:                    # K^T = Reshape(Transpose(Reshape(K))): K as it is
        if not _swaps_last_two(imp, kt, p["kt_chain"]):
            return False
        k_perm, k_dims = list(range(rank)), kt.dims
    elif p["perm"] is not None:                      # K^T = transpose(K0, perm): K = transpose(K0, perm')
        perm = [int(a) for a in _attr(p["perm"], "perm", list(range(rank))[::-1])]
        if sorted(perm) != list(range(rank)):
            return False
        k_perm = perm[:-2] + [perm[-1], perm[-2]]
        k_dims = tuple(kt.dims[a] for a in k_perm)
    else:
        k_perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        k_dims = tuple(kt.dims[a] for a in k_perm)
    ctx = _fusion_context(imp, f)
    try:
        scores = matmul_dims(ctx, q.dims, k_dims[:-2] + (k_dims[-1], k_dims[-2]))
        out_dims = matmul_dims(ctx, scores, v.dims)
    except OnnxImportError:
        return False
    sq, sk = scores[-2].size, scores[-1].size
    scale = 1.0
    if p["scale"] is not None:
        c = _scalar_const(imp.values.get(p["scale"][1]))
        if c is None or imp.values[p["scale"][1]].dtype != q.dtype or len(imp.values[p["scale"][1]].dims) > rank:
            return False
        scale = c if p["scale"][0] == "Mul" else 1.0 / c
    for side in ("q_scale", "kt_scale"):             # (Q * a) (K^T * b) = a * b * Q K^T
        if p.get(side) is not None:
            c, cv = _scalar_const(imp.values.get(p[side])), imp.values.get(p[side])
            if c is None or cv.dtype != q.dtype or len(cv.dims) > rank:
                return False
            scale *= c
    mask_arg, causal = None, False
    if p["mask"] is not None:
        if p["mask"] in imp.bool_masks:
            m = imp.bool_masks[p["mask"]]
        else:
            m = imp.values[p["mask"]]
            if m.dtype != q.dtype:
                return False
        try:
            if tuple(d.size for d in broadcast(ctx.fail, scores, m.dims)) != tuple(d.size for d in scores):
                return False
        except OnnxImportError:
            return False
        if m.const is not None and m.dtype != "bool" and _causal_mask(m.const, sq, sk) and sk >= sq:
            causal = True
        else:
            mask_arg = imp.tensor(m, p["mask"]) if m.var is None else m.var
    k0 = imp.tensor(kt, p["kt"])
    if k_perm != list(range(rank)):
        k0 = ctx.emit("transpose", [k0], {"perm": k_perm}, q.dtype, k_dims, temp=f"{p['kt']}_keys").var
    args = [imp.tensor(q, p["q"]), k0, imp.tensor(v, p["v"])] + ([mask_arg] if mask_arg else [])
    what = "attention as sdpa" + (" (the causal mask as causal=true)" if causal else "") + \
        (" (Where's condition as the bool mask)" if p["mask"] in imp.bool_masks else "") + \
        (" (IsNaN's zeros for rows with no key as sdpa's)" if p["nan_zero"] is not None else "")
    ctx.emit("sdpa", args, {"scale": scale, "causal": causal or None}, q.dtype, out_dims,
             out=imp.g.node[f.final].output[0], note=_fusion_note(imp, f, what))
    return True


def _reshape_sizes(target: np.ndarray, sizes: tuple[int, ...], allow_zero: bool) -> tuple[int, ...] | None:
    """The sizes a Reshape to `target` gives an input of `sizes` (0 copies, -1 infers), or None."""
    out = [sizes[k] if s == 0 and not allow_zero and k < len(sizes) else int(s) for k, s in enumerate(target)]
    if out.count(-1) > 1 or any(s < -1 for s in out):
        return None
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1]))
        if known == 0 or int(np.prod(sizes)) % known:
            return None
        out[out.index(-1)] = int(np.prod(sizes)) // known
    return tuple(out) if int(np.prod(out)) == int(np.prod(sizes)) else None


def _swaps_last_two(imp: ImportState, k: Value, chain) -> bool:
    """Whether Reshape(Transpose(Reshape(k, s1), perm), s2) is k with its last two dims swapped:
    s1 = [N, Sk, D] (N the product of k's leading dims), perm [0, 2, 1], s2 = k's leading dims + [D, Sk]."""
    first, transpose, second = chain
    sizes = tuple(d.size for d in k.dims)
    if len(sizes) < 2 or [int(a) for a in _attr(transpose, "perm", [2, 1, 0])] != [0, 2, 1]:
        return False
    lead, (sk, d) = sizes[:-2], sizes[-2:]
    shapes = []
    for r in (first, second):
        s = imp.values.get(r.input[1]) if len(r.input) == 2 else None
        if s is None or s.const is None or s.dtype != "i64":
            return False
        shapes.append((s.const.reshape(-1), bool(_attr(r, "allowzero", 0))))
    n = int(np.prod(lead, dtype=np.int64))
    return _reshape_sizes(shapes[0][0], sizes, shapes[0][1]) == (n, sk, d) and \
        _reshape_sizes(shapes[1][0], (n, d, sk), shapes[1][1]) == lead + (d, sk)


def _attr(node, name: str, default):
    import onnx.helper as oh

    return next((oh.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def bool_mask_where(c: NodeContext, cond: Value, a: Value, b: Value, out: str) -> bool:
    """Where(cond, 0, -big) used only as the mask of attention fusions: no op here; each sdpa takes
    `cond` as its bool mask (true = attend), which removes the same keys."""
    imp = c.imp
    users = imp.consumers.get(out, [])
    mask_adds = {j for f in imp.fusions.values() if f.kind == "attention" and f.parts["mask"] == out
                 for j in f.inner}
    if not users or out in imp.outputs or not set(users) <= mask_adds or _scalar_const(a) != 0.0 or \
            (_scalar_const(b) or 0.0) > _MASKED:
        return False
    dims = broadcast(c.fail, broadcast(c.fail, cond.dims, a.dims), b.dims)
    imp.bool_masks[out] = Value("bool", dims, var=expanded(c, cond, 0, dims, f"{out}_mask"))
    return True


def _other(node, name: str) -> str | None:
    """The other input of a two-input node one of whose inputs is `name`."""
    ins = list(node.input)
    if len(ins) != 2 or name not in ins:
        return None
    return ins[1] if ins[0] == name else ins[0]


def _rms_core(g: _Graph, name: str, consumer: int | None):
    """X / sqrt(mean(X^2) + eps) computing `name` (Mul by Reciprocal(Sqrt), or Div by Sqrt), used
    only by node `consumer` (None: by anything): (inner nodes, parts) or None."""
    top = g.made_by(name, "Mul", "Div")
    if top is None or (consumer is not None and not g.sole(name, consumer)):
        return None
    n, node = top
    for k in ((0, 1) if node.op_type == "Mul" else (1,)):
        inner, r = [n], node.input[k]
        if node.op_type == "Mul":
            recip = g.made_by(r, "Reciprocal")
            if recip is None or not g.sole(r, n):
                continue
            inner.append(recip[0])
            r, user = recip[1].input[0], recip[0]
        else:
            user = n
        sqrt = g.made_by(r, "Sqrt")
        if sqrt is None or not g.sole(r, user):
            continue
        a = sqrt[1].input[0]
        add = g.made_by(a, "Add")
        if add is None or not g.sole(a, sqrt[0]):
            continue
        x = node.input[1 - k]
        for j in (0, 1):
            mean = g.made_by(add[1].input[j], "ReduceMean")
            if mean is None or not g.sole(add[1].input[j], add[0]):
                continue
            sq = g.made_by(mean[1].input[0], "Pow", "Mul")
            if sq is None or not g.sole(mean[1].input[0], mean[0]) or sq[1].input[0] != x or \
                    (sq[1].op_type == "Mul" and sq[1].input[1] != x):
                continue
            return inner + [sqrt[0], add[0], mean[0], sq[0]], {
                "x": x, "eps": add[1].input[1 - j], "mean": mean[1], "square": sq[1], "weight": None}
    return None


def _is_parameter(g: _Graph, name: str) -> bool:
    """An initializer or a Constant node's output (a weight)."""
    return name in g.imp.values or g.made_by(name, "Constant") is not None


def _match_rms_norm(g: _Graph, i: int, node):
    """weight * (X / sqrt(mean(X^2, trailing axes) + eps)) (the weight Mul optional) as rms_norm."""
    if node.op_type == "Mul":
        for k in (0, 1):
            core = _rms_core(g, node.input[k], i)
            if core is not None and _is_parameter(g, node.input[1 - k]):
                inner, parts = core
                parts["weight"] = node.input[1 - k]
                return Fusion("rms_norm", i, sorted(inner), _apply_rms_norm, parts)
    users = g.imp.consumers.get(node.output[0], [])
    if len(users) == 1:           # a weight Mul after it takes the whole pattern
        user = g.nodes[users[0]]
        if user.op_type == "Mul" and _is_parameter(g, _other(user, node.output[0]) or ""):
            return None
    own = _rms_core(g, node.output[0], None)
    if own is None:
        return None
    inner, parts = own
    return Fusion("rms_norm", i, sorted(inner[1:]), _apply_rms_norm, parts)


def _apply_rms_norm(imp: ImportState, f: Fusion) -> bool:
    p = f.parts
    x = imp.values.get(p["x"])
    eps = _scalar_const(imp.values.get(p["eps"]))
    if x is None or x.dtype not in FLOATS or eps is None or eps < 0 or imp.values[p["eps"]].dtype != x.dtype:
        return False
    rank = len(x.dims)
    if p["square"].op_type == "Pow":
        e = imp.values.get(p["square"].input[1])
        if e is None or e.const is None or e.const.size != 1 or float(e.const.reshape(())) != 2.0:
            return False
    mean = p["mean"]
    axes_in = imp.values.get(mean.input[1]) if len(mean.input) > 1 and mean.input[1] else None
    if axes_in is not None and axes_in.const is None:
        return False
    axes = [int(a) for a in axes_in.const.reshape(-1)] if axes_in is not None else \
        [int(a) for a in _attr(mean, "axes", [])]
    axes = sorted(a % rank for a in axes) if rank and all(-rank <= a < rank for a in axes) else []
    if not axes or axes != list(range(axes[0], rank)) or int(_attr(mean, "keepdims", 1)) != 1:
        return False
    axis = axes[0]
    normalised = x.dims[axis:]
    ctx = _fusion_context(imp, f)
    args = [imp.tensor(x, p["x"])]
    if p["weight"] is not None:
        w = imp.values.get(p["weight"])
        shape = tuple(d.size for d in normalised)
        if w is None or w.dtype != x.dtype or len(w.dims) > rank or \
                any(s != 1 for s in w.shape[:max(0, len(w.shape) - len(shape))]):
            return False
        core_shape = w.shape[max(0, len(w.shape) - len(shape)):]
        try:
            if tuple(d.size for d in broadcast(ctx.fail, dims_of(core_shape), normalised)) != shape:
                return False
        except OnnxImportError:
            return False
        if w.const is not None:
            args.append(imp.new_constant(np.broadcast_to(w.const.reshape(core_shape), shape), f"{p['weight']}_gamma",
                                         f"{quoted(p['weight'])} as rms_norm's gamma"))
        elif w.shape == shape:
            args.append(w.var)
        else:
            return False
    ctx.emit("rms_norm", args, {"axis": axis if axis != rank - 1 else None, "eps": eps}, x.dtype, x.dims,
             out=imp.g.node[f.final].output[0], note=_fusion_note(imp, f, "RMSNorm as rms_norm"))
    return True


def _match_gelu(g: _Graph, i: int, node):
    """0.5 * x * (1 + erf(x / sqrt 2)) and 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))),
    the product in any grouping, as gelu (approximate none / tanh)."""
    leaves, inner = [], []
    for name in node.input:
        m = g.made_by(name, "Mul")
        if m is not None and g.sole(name, i) and len(m[1].input) == 2:
            leaves += list(m[1].input)
            inner.append(m[0])
        else:
            leaves.append(name)
    if len(leaves) != 3 or len(node.input) != 2:
        return None
    for h in leaves:
        add = g.made_by(h, "Add")
        if add is None or leaves.count(h) != 1 or not any(g.sole(h, j) for j in inner + [i]):
            continue
        for k in (0, 1):
            e = add[1].input[k]
            core = _gelu_core(g, e, add[0])
            if core is None:
                continue
            approximate, x, core_inner, constants = core
            rest = [n for n in leaves if n != h]
            if x not in rest or len(rest) != 2:
                continue
            half = rest[1] if rest[0] == x else rest[0]
            checks = constants + [(half, 0.5, True), (add[1].input[1 - k], 1.0, True)]
            parts = {"x": x, "approximate": approximate, "checks": checks}
            return Fusion("gelu", i, sorted(inner + [add[0]] + core_inner), _apply_gelu, parts)
    return None


def _gelu_core(g: _Graph, e: str, user: int):
    """erf(x / sqrt 2) or tanh(sqrt(2/pi) * (x + 0.044715 x^3)) computing `e`: (approximate, x,
    inner nodes, [(constant input, the value it must have, whether of x's dtype)]) or None."""
    erf = g.made_by(e, "Erf")
    if erf is not None and g.sole(e, user):
        arg = erf[1].input[0]
        scaled = g.made_by(arg, "Div", "Mul")
        if scaled is None or not g.sole(arg, erf[0]):
            return None
        x, c = scaled[1].input
        if scaled[1].op_type == "Mul" and _is_parameter(g, x):
            x, c = c, x
        value = math.sqrt(2.0) if scaled[1].op_type == "Div" else 1.0 / math.sqrt(2.0)
        return "none", x, [erf[0], scaled[0]], [(c, value, True)]
    tanh = g.made_by(e, "Tanh")
    if tanh is None or not g.sole(e, user):
        return None
    arg = tanh[1].input[0]
    outer = g.made_by(arg, "Mul")
    if outer is None or not g.sole(arg, tanh[0]):
        return None
    for k in (0, 1):
        inner_sum = g.made_by(outer[1].input[k], "Add")
        if inner_sum is None or not g.sole(outer[1].input[k], outer[0]):
            continue
        for j in (0, 1):
            x, cubic_term = inner_sum[1].input[j], inner_sum[1].input[1 - j]
            cm = g.made_by(cubic_term, "Mul")
            if cm is None or not g.sole(cubic_term, inner_sum[0]):
                continue
            for m in (0, 1):
                cube = g.made_by(cm[1].input[m], "Pow")
                if cube is None or not g.sole(cm[1].input[m], cm[0]) or cube[1].input[0] != x:
                    continue
                return "tanh", x, [tanh[0], outer[0], inner_sum[0], cm[0], cube[0]], [
                    (outer[1].input[1 - k], math.sqrt(2.0 / math.pi), True), (cm[1].input[1 - m], 0.044715, True),
                    (cube[1].input[1], 3.0, False)]
    return None


def _apply_gelu(imp: ImportState, f: Fusion) -> bool:
    p = f.parts
    x = imp.values.get(p["x"])
    if x is None or x.dtype not in FLOATS:
        return False
    for name, want, same_dtype in p["checks"]:
        v = imp.values.get(name)
        if v is None or v.const is None or v.const.size != 1 or len(v.dims) > len(x.dims) or \
                (same_dtype and v.dtype != x.dtype) or v.dtype == "bool":
            return False
        # the constants as a float32 export rounds them (exact ones exactly)
        if not math.isclose(float(v.const.reshape(()).item()), want, rel_tol=1e-7 if want % 0.5 else 0.0):
            return False
    ctx = _fusion_context(imp, f)
    ctx.emit("gelu", [imp.tensor(x, p["x"])], {"approximate": '"tanh"' if p["approximate"] == "tanh" else None},
             x.dtype, x.dims, out=imp.g.node[f.final].output[0],
             note=_fusion_note(imp, f, f"GELU ({'tanh' if p['approximate'] == 'tanh' else 'erf'}) as gelu"))
    return True


_MATCHERS: dict[str, tuple[Callable, ...]] = {"MatMul": (_match_attention,), "Mul": (_match_rms_norm, _match_gelu),
                                              "Div": (_match_rms_norm,)}
