"""Sweep cases of the element-wise, reduction, row and layout ops: one call each, the deciding
extent (a row's length, the reduced extent, the moved axis) at every vector width -1 / +0 / +1,
1 and a prime, in f32 (the vector kernels) and in other dtypes of the op (portable kernels,
packed types whose odd lengths end inside a byte)."""

from __future__ import annotations

import numpy as np

from openinfer.dtypes import TENSOR_DTYPES, lookup
from openinfer.ops import get
from openinfer.ops.registry import cast_allowed
from openinfer.targets.x86 import renderer as avx

from .case import SweepCase, single
from .pick import Picker
from .widths import around

#: row lengths: every vector width -1 / +0 / +1, a single element and a prime past them
LENGTHS = [1, *around("lanes4", "lanes8", "lanes16"), 97]

_UNARY_F = ("neg", "recip", "abs", "sign", "floor", "ceil", "trunc", "round", "exp", "log", "sqrt", "rsqrt", "tanh",
            "sigmoid", "erf", "gelu", "silu", "is_nan", "is_inf", "is_neg", "relu", "clamp", "sin", "cos", "tan",
            "asin", "acos", "atan", "sinh", "cosh", "softplus", "softsign", "hard_sigmoid", "hard_swish", "elu", "selu",
            "celu", "leaky_relu", "mish")
_UNARY_I = ("not", "shl", "shr", "popcount")
_BINARY = ("add", "mul", "sub", "div", "min", "max", "pow", "floor_div", "rem", "and", "or", "xor", "eq", "ne", "lt",
           "le", "gt", "ge")
#: settings a call of the op is swept with, in turn
_ATTRS = {"relu": [{}, {"alpha": 0.1, "clamp_max": 2.0}], "clamp": [{"min": -0.5, "max": 1.5}],
          "gelu": [{}, {"approximate": "tanh"}], "shl": [{"bits": 3}], "shr": [{"bits": 2}],
          "div": [{}, {"div_by_zero_mask": 0.0}], "recip": [{}], "hard_sigmoid": [{}, {"alpha": 0.35, "beta": 0.25}],
          "elu": [{}, {"alpha": 0.5}], "selu": [{}, {"alpha": 2.0, "gamma": 1.5}], "celu": [{}, {"alpha": 2.5}],
          "leaky_relu": [{}, {"alpha": 0.2}]}
_POSITIVE = ("log", "sqrt", "rsqrt", "pow")


def _dtypes(op: str) -> list[str]:
    """The op's sweep dtypes: f32 first where allowed (the vector kernels), then one of each other
    kind it takes: f64, f16, a 32-bit and an 8-bit integer, a packed type, bool."""
    allowed = [d.name for d in get(op).dtypes]
    want = ("f32", "f64", "f16", "i32", "u8", "i4", "u2", "bool")
    return [d for d in want if d in allowed]


def _broadcast(kind: int, r: int, n: int) -> tuple[int, ...]:
    """Operand b's shape against a [r, n] operand a: full, a row, a column, a scalar."""
    return ((r, n), (n,), (r, 1), ())[kind % 4]


def elementwise() -> list[SweepCase]:
    pick, out = Picker("elementwise"), []
    for op in (*_UNARY_F, *_UNARY_I, *_BINARY, "fma", "filter", "fill", "cast", "arange", "is_finite"):
        for k, t in enumerate(_dtypes(op)):
            # f32 at every length; the other dtypes at a few (their kernels are the portable loops,
            # whose one extent-dependent part is the packed types' last partial byte)
            lengths = LENGTHS if k == 0 else [pick.one_of(LENGTHS[1:4]), pick.one_of(LENGTHS[4:-1]), 97]
            for j, n in enumerate(lengths):
                r = pick.small()
                out.append(_elementwise_case(op, t, r, n, j, pick))
    # the AVX element-wise kernels' row chunk and their parallel thresholds (openinfer/targets/x86/renderer.py
    # ROW_CHUNK, _PAR_ELEMS, _PAR_ELEMS_MATH), crossed in a row or in rows
    for n in (avx.ROW_CHUNK - 1, avx.ROW_CHUNK + 1):
        out.append(single("elementwise", "add", [("f32", (2, n)), ("f32", (n,))], extents={"n": n}))
    for op, limit in (("mul", avx._PAR_ELEMS), ("exp", avx._PAR_ELEMS_MATH)):
        for total in (limit - 1, limit + 7):
            shape = (total // 7, 7) if total % 7 == 0 else (1, total)
            ins = [("f32", shape)] + ([("f32", shape)] if op == "mul" else [])
            out.append(single("elementwise", op, ins, extents={"n": shape[-1]}))
    return out


def _elementwise_case(op: str, t: str, r: int, n: int, j: int, pick: Picker) -> SweepCase:
    ext = {"n": n}
    attrs_sets = _ATTRS.get(op, [{}])
    attrs = {k: _typed(v, t) for k, v in attrs_sets[j % len(attrs_sets)].items()}
    kw = {"positive": op in _POSITIVE and j % 3 != 2, "small_ints": op in ("pow",)}
    inplace = j % 5 == 1 and get(op).inplace
    if op in _BINARY:
        b = _broadcast(j, r, n) if get(op).broadcast else (r, n)
        inplace = inplace and b != ()
        return single("elementwise", op, [(t, (r, n)), (t, b)], attrs, extents=ext, inplace=inplace, **kw)
    if op in ("fma", "filter"):
        return single("elementwise", op, [(t, (r, n))] * 3, extents=ext, inplace=inplace)
    if op == "fill":
        return single("elementwise", op, [(t, (r, n))], {"value": 1 if t in ("bool", "u2") else 3}, extents=ext,
                      inplace=inplace)
    if op == "cast":
        to = pick.one_of([d.name for d in _cast_targets(t)])
        return single("elementwise", op, [(t, (r, n))], {"to": lookup(to)}, extents=ext)
    if op == "arange":
        return single("elementwise", op, [(t, (r, n))], {"start": 2, "step": 3, "axis": -1 if j % 2 else 0},
                      extents=ext, inplace=inplace)
    if op == "is_finite":
        return single("elementwise", op, [(t, (r, n))], out=("bool", (r, n)) if j % 2 else None, extents=ext)
    return single("elementwise", op, [(t, (r, n))], attrs, extents=ext, inplace=inplace, **kw)


def _typed(v, t: str):
    """A float setting made an integer one for an integer dtype (clamp bounds, masks)."""
    return v if lookup(t).is_float or not isinstance(v, float) else round(v + 0.5)


def _cast_targets(t: str):
    src = lookup(t)
    return [d for d in TENSOR_DTYPES if d.name != t and cast_allowed(src, d)]


_REDUCE = ("sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis", "argmax_axis", "argmin_axis", "cumsum",
           "topk_indices")


def reductions() -> list[SweepCase]:
    pick, out = Picker("reduce"), []
    for op in _REDUCE:
        arg = op.startswith("arg")
        for k, t in enumerate(("f32", "f64", "i32")):
            lengths = LENGTHS if k == 0 else [pick.one_of(LENGTHS[1:5]), pick.one_of(LENGTHS[5:-1])]
            for j, red in enumerate(lengths):
                outer = pick.small()
                # the elements after the reduced extent: none, or a vector width's worth +-1
                inner = 1 if j % 2 == 0 else pick.one_of(around("lanes4", "lanes8", "lanes16"))
                shape = (outer, red, inner)
                if arg:
                    attrs = {"axis": 1, "keepdims": j % 3 == 0, "select_first": j % 2 == 0}
                elif op == "cumsum":
                    attrs = {"axis": 1, "exclusive": j % 2 == 1, "reverse": j % 3 == 0}
                elif op == "topk_indices":
                    attrs = {"axis": 1, "k": 1 + j % red, "largest": j % 2 == 0}
                else:
                    attrs = {"axes": [1] if j % 4 != 3 else [1, 2], "keepdims": j % 3 == 0}
                out.append(single("reduce", op, [(t, shape)], attrs, extents={"red": red, "inner": inner},
                                  sums=op in ("sum_axis", "mean_axis", "cumsum"), small_ints=True))
        out.append(single("reduce", op, [("f32", (3, 5, 17))],
                          {"axis": 2, "k": 5} if op == "topk_indices" else
                          {"axis": 2} if arg or op == "cumsum" else {"axes": [0, 2]},
                          extents={"red": 17}, sums=op in ("sum_axis", "mean_axis", "cumsum")))
    return out


def rows() -> list[SweepCase]:
    """softmax / log_softmax / layer_norm / rms_norm over rows of every vector width +-1, the
    Vulkan row workgroup +-1, one element; off the last axis; in place; past the AVX kernels'
    parallel threshold."""
    pick, out = Picker("rows"), []
    lengths = [*LENGTHS, *around("vk_row_wg")]
    for op in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
        for k, t in enumerate(("f32", "f64")):
            for j, n in enumerate(lengths if k == 0 else lengths[2::3]):
                r = pick.small()
                ins = [(t, (r, n))]
                if op == "layer_norm" and j % 3:
                    ins += [(t, (n,))] * (j % 3)         # gamma, then beta too
                if op == "rms_norm" and j % 2:
                    ins += [(t, (n,))]
                attrs = {"eps": 1e-3} if op.endswith("norm") and j % 4 == 1 else {}
                out.append(single("rows", op, ins, attrs, extents={"n": n}, inplace=j % 3 == 2 and len(ins) == 1,
                                  scale=3.0))
        # off the last axis (the portable kernel), and rows past the parallel threshold
        out.append(single("rows", op, [("f32", (9, 17, 3))], {"axis": 1}, extents={"n": 17}))
        out.append(single("rows", op, [("f32", (4099, 65))], extents={"n": 65}))
    return out


def layout() -> list[SweepCase]:
    pick, out = Picker("layout"), []
    own = Picker("gather_elements")          # its draws leave the other layout cases as they were
    nms = Picker("non_max_suppression")
    dtypes = ("f32", "f64", "f16", "i8", "u4", "bool")
    for j, n in enumerate(LENGTHS):
        t = dtypes[j % len(dtypes)]
        a, b = pick.small(), pick.prime()
        ext = {"n": n}
        perm = pick.one_of([[2, 0, 1], [1, 0, 2], [0, 2, 1], [2, 1, 0]])
        out.append(single("layout", "transpose", [(t, (a, b, n))], {"perm": perm}, extents=ext))
        out.append(single("layout", "transpose", [("f32", (n, a, b))], {"perm": [1, 2, 0]}, extents=ext))
        axis = j % 3 - 1 if j % 3 != 1 else 0
        parts = [(t, (a, n)) if axis != 0 else (t, (pick.small(), n)) for _ in range(1 + j % 3)]
        if axis == -1:
            parts = [(t, (a, pick.one_of(LENGTHS))) for _ in range(2)] + [(t, (a, n))]
        out.append(single("layout", "concat", parts, {"axis": axis}, extents=ext))
        step = 1 + j % 3
        out.append(single("layout", "slice", [(t, (a, n))], {"starts": [j % 2], "ends": [n], "axes": [1],
                                                            "steps": [step]}, extents=ext))
        out.append(single("layout", "slice", [(t, (n, b))], {"starts": [-1], "ends": [-n - 1], "axes": [0],
                                                            "steps": [-1]}, extents=ext))
        rows_ = pick.prime()
        idx = pick.rng.integers(0, rows_, (a, 3)).astype("int32")
        out.append(single("layout", "gather", [(t, (rows_, n)), ("i32", (a, 3))], extents=ext, values={1: idx}))
        # index tuples: rows of a [rows_, n] table (k = 1), or per batch of a [a, rows_, n] one
        tuples = pick.rng.integers(-rows_, rows_, (a, 3, 1)).astype("int64")
        nd_attrs, nd_data = ({"batch_dims": 1}, (a, rows_, n)) if j % 2 else ({}, (rows_, n))
        out.append(single("layout", "gather_nd", [(t, nd_data), ("i64", (a, 3, 1))], nd_attrs, extents=ext,
                          values={1: tuples}))
        reduction = ("none", "add", "max", "mul")[j % 4]
        reduction = "none" if reduction == "max" and t == "bool" else reduction
        out.append(single("layout", "scatter_nd", [(t, (rows_, n)), ("i32", (a, 3, 1)), (t, (a, 3, n))],
                          {"reduction": reduction}, inplace=j % 3 == 0, extents=ext,
                          values={1: tuples.astype("int32")}))
        linear = j % 2 == 1
        out.append(single("layout", "resize", [("f32" if linear else t, (a, n))],
                          {"sizes": [a, 2 * n + 1 - j % 3], "mode": "linear" if linear else "nearest",
                           "coordinate_transformation_mode": ("half_pixel", "align_corners", "asymmetric")[j % 3]},
                          extents=ext))
        start = pick.rng.integers(0, n, ()).astype("int64")
        out.append(single("layout", "dynamic_slice", [(t, (a, n)), ("i64", ())], {"sizes": [max(1, n // 2)],
                                                                                  "axes": [1]},
                          extents=ext, values={1: start}))
        elements = own.rng.integers(-rows_, rows_, (a, n)).astype("int64")
        out.append(single("layout", "gather_elements", [(t, (rows_, n)), ("i64", (a, n))], extents=ext,
                          values={1: elements}))
        out.append(single("layout", "reshape", [(t, (a, n))], out=(t, (n, a)), extents=ext))
        # n boxes [y1, x1, y2, x2] that overlap, scores with ties: some selected, some suppressed
        corners = nms.rng.integers(0, 6, (2, n, 2))
        boxes = np.concatenate([corners, corners + nms.rng.integers(1, 4, (2, n, 2))], axis=-1).astype("float32")
        scores = (nms.rng.integers(-3, 4, (2, 3, n)) / 2).astype("float32")
        out.append(single("layout", "non_max_suppression", [("f32", (2, n, 4)), ("f32", (2, 3, n))],
                          {"max_output": 1 + j % 5, "iou_threshold": 0.4, "center_point_box": j % 2,
                           **({"score_threshold": 0.0} if j % 3 == 0 else {})},
                          extents=ext, values={0: boxes, 1: scores}))
    return out
