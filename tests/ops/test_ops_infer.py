"""OpSpec.infer: modes, output types, attribute completion, and every error message."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openinfer import dtypes as dt
from openinfer.ops import OpRuntimeError, OpTypeError, TensorType, all_ops, get
from openinfer.reference.kernels import run_kernel

from .helpers import tt

ORIGINAL_47 = ("add mul sub div floor_div rem fma neg recip abs relu matmul sign min max clamp floor ceil trunc round "
               "and or xor not shl shr popcount eq ne lt le gt ge filter is_finite is_nan is_inf is_neg sum_axis "
               "mean_axis prod_axis max_axis min_axis argmax_axis argmin_axis cast fill").split()
BEYOND = ("exp log pow sqrt rsqrt tanh sigmoid erf sin cos tan asin acos atan sinh cosh gelu silu softplus "
          "softsign hard_sigmoid hard_swish elu selu celu leaky_relu mish softmax log_softmax layer_norm "
          "rms_norm gather gather_nd gather_elements scatter_nd transpose reshape concat slice pad resize "
          "rope sdpa conv1d conv2d max_pool2d avg_pool2d dequant_matmul arange dynamic_slice lrn cumsum "
          "topk_indices non_max_suppression").split()
#: TFLite's int8 kernels, integer-only (issue 41)
QUANTIZED = ("qconv2d qlinear qavg_pool2d qmax_pool2d qadd qsub qmul qmean qsoftmax qlut qhard_swish quantize "
             "dequantize requantize").split()


def test_catalogue_is_the_47_plus_the_real_model_ops() -> None:
    assert [o.name for o in all_ops()] == ORIGINAL_47 + BEYOND + QUANTIZED


def test_digest_table_flags() -> None:
    bc = {o.name for o in all_ops() if o.broadcast}
    assert bc == {"add", "mul", "sub", "div", "floor_div", "rem", "pow", "matmul", "sdpa",
                  "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "qadd", "qsub", "qmul"}
    acc = {o.name for o in all_ops() if o.accumulate}
    assert acc == {"add", "mul", "sub", "abs", "matmul", "sum_axis", "mean_axis", "prod_axis", "cumsum"}
    no_inplace = {o.name for o in all_ops()[:47] if not o.inplace}
    assert no_inplace == {"popcount", "eq", "ne", "lt", "le", "gt", "ge", "is_finite", "is_nan", "is_inf", "is_neg",
                          "sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis", "argmax_axis", "argmin_axis",
                          "cast"}
    assert [d.name for d in get("shl").dtypes] == ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                                   "i2", "i4", "u2", "u4"]
    assert len(get("add").acc_pairs) == 12 + 5 and sum(len(v) for k, v in get("add").acc_pairs.items()
                                                        if k[0] in "iu") == 36
    assert sum(len(v) for k, v in get("abs").acc_pairs.items() if k[0] == "i") == 18


def test_modes() -> None:
    f = tt("f32", (2, 3))
    assert get("add").infer([f, f], {}).mode == "normal"
    assert get("add").infer([f, f], {}, f, output_name_is_input=True).mode == "inplace"
    inf = get("add").infer([tt("i8", (2,)), tt("i8", (2,))], {"acc": dt.I32})
    assert (inf.mode, inf.out_dtype.name, inf.acc, inf.acc_dtype, inf.product_dtype) == \
        ("accumulate", "i32", (dt.I32,), dt.I32, dt.I32)


def test_acc_list_forms_and_float_output_rounding() -> None:
    a, b = tt("f16", (2, 4)), tt("f16", (4, 3))
    inf = get("matmul").infer([a, b], {"acc": [dt.F32, dt.F32]})
    assert inf.out_dtype == dt.F32 and inf.acc == (dt.F32, dt.F32)
    inf = get("matmul").infer([a, b], {"acc": [dt.F32]}, tt("f16", (2, 3)))
    assert inf.out_dtype == dt.F16 and inf.acc_dtype == dt.F32
    inf = get("matmul").infer([tt("i8", (2, 4)), tt("i8", (4, 3))], {"acc": [dt.I16, dt.I32]})
    assert (inf.product_dtype, inf.acc_dtype, inf.out_dtype) == (dt.I16, dt.I32, dt.I32)
    inf = get("sum_axis").infer([tt("bf16", (2, 4))], {"axes": [1], "acc": "f32"})
    assert inf.out_dtype == dt.F32 and inf.out_shape == (2,)


def test_completed_attrs() -> None:
    x = tt("i8", (2, 3))
    a = get("relu").infer([x], {"negative_slope": 0.5, "clamp_max": 6.0}).attrs
    assert a == {"alpha": 0.5, "clamp_max": 6, "clamp_min": -128}
    a = get("clamp").infer([x], {"max": math.inf}).attrs
    assert a == {"min": -128, "max": 127}
    assert math.isnan(get("div").infer([tt("f32", (2,))] * 2, {}).attrs["div_by_zero_mask"])
    assert get("div").infer([x, x], {}).attrs["div_by_zero_mask"] == 0
    assert get("sum_axis").infer([x], {"axes": [-1, 1, 0]}).attrs["axes"] == (0, 1)
    assert get("transpose").infer([tt("f32", (2, 3, 4))], {}).attrs["perm"] == (2, 1, 0)
    assert get("sdpa").infer([tt("f32", (3, 16))] * 3, {}).attrs["scale"] == 0.25
    a = get("conv2d").infer([tt("f32", (1, 2, 5, 5)), tt("f32", (3, 2, 3, 3))], {"padding": [1, 2]}).attrs
    assert (a["stride"], a["dilation"], a["padding"]) == ((1, 1), (1, 1), (1, 2, 1, 2))
    a = get("max_pool2d").infer([tt("f32", (1, 1, 4, 4))], {"kernel": 2}).attrs
    assert a["stride"] == (2, 2) and a["padding"] == (0, 0, 0, 0)


def test_shapes() -> None:
    f = "f32"
    cases = [
        ("add", [tt(f, (2, 1, 4)), tt(f, (3, 1))], {}, (2, 3, 4)),
        ("matmul", [tt(f, (4,)), tt(f, (4, 3))], {}, (3,)),
        ("matmul", [tt(f, (3, 4)), tt(f, (4,))], {}, (3,)),
        ("matmul", [tt(f, (4,)), tt(f, (4,))], {}, ()),
        ("matmul", [tt(f, (2, 1, 3, 4)), tt(f, (5, 4, 2))], {}, (2, 5, 3, 2)),
        ("matmul", [tt(f, (3, 4)), tt(f, (7, 4))], {"transpose_b": True}, (3, 7)),
        ("matmul", [tt(f, (4, 3)), tt(f, (4, 7))], {"transpose_a": True}, (3, 7)),
        ("matmul", [tt(f, (2, 1, 4, 3)), tt(f, (5, 2, 4))], {"transpose_a": True, "transpose_b": True}, (2, 5, 3, 2)),
        ("matmul", [tt(f, (4,)), tt(f, (6, 3, 4))], {"transpose_b": True}, (6, 3)),
        ("matmul", [tt(f, (4, 3)), tt(f, (4,))], {"transpose_a": True}, (3,)),
        ("argmax_axis", [tt(f, (2, 3))], {"axis": -1, "keepdims": True}, (2, 1)),
        ("gather", [tt(f, (10, 4)), tt("i32", (2, 3))], {}, (2, 3, 4)),
        ("gather_nd", [tt(f, (5, 7, 3)), tt("i64", (2, 4, 2))], {}, (2, 4, 3)),
        ("gather_nd", [tt(f, (5, 7, 3)), tt("i32", (5, 2, 1))], {"batch_dims": 1}, (5, 2, 3)),
        ("gather_nd", [tt(f, (5, 7, 3)), tt("u8", (5, 2))], {"batch_dims": 1}, (5,)),
        ("scatter_nd", [tt(f, (5, 7, 3)), tt("i64", (4, 2)), tt(f, (4, 3))], {"reduction": "max"}, (5, 7, 3)),
        ("concat", [tt(f, (2, 3)), tt(f, (2, 1))], {"axis": 1}, (2, 4)),
        ("slice", [tt(f, (4, 6))], {"starts": [-1], "ends": [-100], "axes": [1], "steps": [-2]}, (4, 3)),
        ("pad", [tt(f, (4, 6))], {"pads": [1, 0, 2, 3]}, (5, 11)),
        ("resize", [tt(f, (1, 3, 4, 6))], {"sizes": [1, 3, 9, 2], "mode": "linear"}, (1, 3, 9, 2)),
        ("sdpa", [tt(f, (1, 8, 3, 4)), tt(f, (1, 2, 5, 4)), tt(f, (1, 2, 5, 6))], {}, (1, 8, 3, 6)),
        ("conv1d", [tt(f, (2, 4, 7)), tt(f, (6, 2, 3))], {"groups": 2, "stride": 2, "padding": 1}, (2, 6, 4)),
        ("avg_pool2d", [tt(f, (1, 2, 5, 6))], {"kernel": [3, 2], "stride": [2, 1], "padding": 1}, (1, 2, 3, 7)),
    ]
    for op, ins, attrs, shape in cases:
        assert get(op).infer(ins, attrs).out_shape == shape, op
    assert get("add").infer([tt(f, (2, 3)), tt(f, (3,))], {}).broadcast
    assert not get("add").infer([tt(f, (2, 3)), tt(f, (2, 3))], {}).broadcast


def test_is_finite_form_follows_the_declared_output() -> None:
    x = tt("f32", (2, 3))
    assert get("is_finite").infer([x], {}).out_shape == ()
    assert get("is_finite").infer([x], {}, tt("bool", (2, 3))).out_shape == (2, 3)


E = OpTypeError
F32_23 = tt("f32", (2, 3))
ERRORS = [
    # (op, inputs, attrs, declared output, in place, message fragment)
    ("add", [F32_23] * 3, {}, None, False, "add takes 2 inputs (a, b), got 3"),
    ("layer_norm", [F32_23] * 4, {}, None, False, "layer_norm takes 1 to 3 inputs"),
    ("add", [F32_23, F32_23], {"acc2": 1}, None, False, "add: unknown attribute `acc2`"),
    ("relu", [F32_23], {"alpha": "x"}, None, False, "attribute `alpha` must be a number"),
    ("shl", [tt("i8", (2,))], {"bits": 1.0}, None, False, "attribute `bits` must be an integer"),
    ("sum_axis", [F32_23], {"axes": [0], "keepdims": 1}, None, False, "attribute `keepdims` must be true or false"),
    ("gelu", [F32_23], {"approximate": "fast"}, None, False, "must be one of 'none', 'tanh'"),
    ("cast", [F32_23], {"to": "f33"}, None, False, "attribute `to` must be a dtype"),
    ("add", [F32_23, F32_23], {"acc": []}, None, False, "a dtype or a list of one or two dtypes"),
    ("sum_axis", [F32_23], {"axes": 1}, None, False, "attribute `axes` must be a list of integers"),
    ("conv1d", [tt("f32", (1, 1, 4)), tt("f32", (1, 1, 2))], {"stride": [1.5]}, None, False,
     "must be an integer or a list of integers"),
    ("relu", [F32_23], {"alpha": 0.1, "negative_slope": 0.2}, None, False, "give only one of them"),
    ("shl", [tt("i8", (2,))], {}, None, False, "missing required attribute `bits`"),
    ("add", [F32_23, tt("f16", (2, 3))], {}, None, False,
     "add: input dtypes differ: f32 (a) and f16 (b) (no implicit promotion)"),
    ("gather", [F32_23, tt("f32", (2,))], {}, None, False, "input `indices` cannot be f32"),
    ("gather_nd", [F32_23, tt("i64", (2, 3))], {}, None, False,
     "gather_nd: index tuples of length 3 (indices [2, 3]) for data [2, 3]"),
    ("gather_nd", [F32_23, tt("i64", (2, 1))], {"batch_dims": 2}, None, False, "gather_nd: batch_dims 2"),
    ("gather_nd", [F32_23, tt("i64", (3, 1))], {"batch_dims": 1}, None, False, "gather_nd: the 1 batch dims differ"),
    ("gather_nd", [F32_23, tt("i64", ())], {}, None, False, "indices must have at least 1 dim"),
    ("scatter_nd", [F32_23, tt("i64", (4, 1)), tt("f32", (4, 2))], {}, None, False,
     "scatter_nd: updates must have shape [4, 3]"),
    ("scatter_nd", [tt("bool", (2,)), tt("i64", (1, 1)), tt("bool", (1,))], {"reduction": "min"}, None, False,
     "scatter_nd: reduction 'min' does not support dtype bool"),
    ("scatter_nd", [F32_23, tt("i64", (1, 1)), tt("f32", (1, 3))], {"reduction": "sum"}, None, False,
     "must be one of 'none', 'add', 'mul', 'max', 'min'"),
    ("sdpa", [F32_23] * 3 + [tt("i8", (2, 2))], {}, None, False, "it must be bool or f32"),
    ("add", [tt("i8", (2,))] * 2, {"acc": dt.I32}, None, True, "`acc` cannot be combined with an in-place output"),
    ("matmul", [tt("f32", (4,)), tt("f32", (3, 4))], {"transpose_a": True}, None, False,
     "matmul: transpose_a needs a of rank >= 2, got [4]"),
    ("matmul", [F32_23, tt("f32", (3,))], {"transpose_b": True}, None, False,
     "matmul: transpose_b needs b of rank >= 2, got [3]"),
    ("matmul", [F32_23, tt("f32", (3, 4))], {"transpose_b": True}, None, False,
     "inner dims differ: [2, 3] @ [4, 3] (3 vs 4) after transpose_a / transpose_b"),
    ("matmul", [F32_23, F32_23], {"transpose_b": 1}, None, False, "attribute `transpose_b` must be true or false"),
    ("popcount", [tt("i8", (2,))], {}, tt("i8", (2,)), True, "popcount cannot write in place"),
    ("popcount", [F32_23], {}, None, False, "popcount does not support dtype f32"),
    ("neg", [tt("u8", (2,))], {}, None, False, "neg does not support dtype u8"),
    ("div", [tt("i8", (2,))] * 2, {"acc": dt.I32}, None, False, "div does not accumulate"),
    ("add", [tt("i8", (2,))] * 2, {"acc": dt.U32}, None, False, "add: cannot accumulate i8 in u32"),
    ("add", [tt("i32", (2,))] * 2, {"acc": dt.I32}, None, False, "cannot accumulate i32 in i32"),
    ("add", [tt("bool", (2,))] * 2, {"acc": dt.I32}, None, False, "cannot accumulate bool in i32"),
    ("abs", [tt("f32", (2,))], {"acc": dt.F16}, None, False, "abs: cannot accumulate f32 in f16"),
    ("add", [tt("i8", (2,))] * 2, {"acc": [dt.I16, dt.I32, dt.I64]}, None, False, "takes one or two dtypes"),
    ("add", [tt("i8", (2,))] * 2, {"acc": [dt.I16, dt.I32]}, None, False, "only matmul has a separate product"),
    ("matmul", [tt("i8", (2, 2))] * 2, {"acc": [dt.I64, dt.I32]}, None, False, "product dtype i64 does not fit"),
    ("fill", [tt("i32", (2,))], {"value": 2.0}, None, False, "`value`=2.0 is a float but the type is i32"),
    ("fill", [tt("i8", (2,))], {"value": 300}, None, False, "`value`=300 is out of range for i8 (-128..127)"),
    ("fill", [tt("i8", (2,))], {"value": True}, None, False, "`value` is a bool but the type is i8"),
    ("fill", [tt("bool", (2,))], {"value": 2}, None, False, "must be true or false for bool"),
    ("clamp", [tt("i8", (2,))], {"max": 2.5}, None, False, "`max`=2.5 is a float but the type is i8"),
    ("div", [tt("i8", (2,))] * 2, {"div_by_zero_mask": math.nan}, None, False, "is a float but the type is i8"),
    ("cast", [tt("i8", (2,))], {"to": dt.U16}, None, False, "signed and unsigned types do not convert"),
    ("cast", [tt("f32", (2,))], {"to": dt.lookup("i4")}, None, False, "casting to packed types is not supported"),
    ("cast", [tt("i32", (2,))], {"to": dt.I16}, None, False, "integer casts must widen"),
    ("cast", [tt("bitset", (2,))], {"to": dt.F32}, None, False, "cast does not support dtype bitset"),
    ("cast", [tt("f32", (2,))], {"to": dt.lookup("bitset")}, None, False, "bitset does not cast"),
    ("cast", [tt("bool", (2,))], {"to": dt.BOOL}, None, False, "the input is already bool"),
    ("cast", [tt("bool", (2,))], {"to": dt.lookup("u4")}, None, False, "casting to packed types is not supported"),
    ("eq", [tt("f32", (2, 3)), tt("f32", (2,))], {}, None, False, "cannot broadcast shapes [2, 3] and [2]"),
    ("arange", [tt("u8", (4,))], {"step": -1}, None, False, "`step`=-1 is out of range for u8"),
    ("arange", [tt("i32", (4,))], {"start": 0.5}, None, False, "`start`=0.5 is a float but the type is i32"),
    ("arange", [tt("i32", (4,))], {"axis": 1}, None, False, "axis 1 is out of range for a 1-d input"),
    ("add", [F32_23, F32_23], {}, tt("f16", (2, 3)), False, "the output is declared f16 but the result is f32"),
    ("eq", [F32_23, F32_23], {}, tt("f32", (2, 3)), False, "result is bool (always bool)"),
    ("add", [tt("i8", (2,))] * 2, {"acc": dt.I32}, tt("i8", (2,)), False, "the accumulator i32"),
    ("add", [F32_23, F32_23], {}, tt("f32", (3, 2)), False, "declared with shape [3, 2] but the result has shape"),
    ("add", [tt("f32", (3,)), F32_23], {}, tt("f32", (3,)), True, "in-place broadcasting needs the in-place operand"),
    ("add", [F32_23, tt("f32", (4,))], {}, None, False, "incompatible broadcast dims 3 and 4"),
    ("min", [F32_23, tt("f32", (3,))], {}, None, False, "input shapes differ: [2, 3] and [3] (b); min does not"),
    ("matmul", [tt("f32", ()), F32_23], {}, None, False, "operands must have at least 1 dim"),
    ("matmul", [F32_23, F32_23], {}, None, False, "inner dims differ"),
    ("sum_axis", [F32_23], {"axes": []}, None, False, "`axes` must not be empty"),
    ("sum_axis", [F32_23], {"axes": [2]}, None, False, "axis 2 is out of range for a 2-d input (valid: -2..1)"),
    ("argmax_axis", [tt("f32", ())], {"axis": 0}, None, False, "a 0-d input has no axis 0"),
    ("argmax_axis", [tt("f32", (0, 2))], {"axis": 0}, None, False, "axis 0 is empty"),
    ("is_finite", [F32_23], {}, tt("bool", (3,)), False, "must be 0-d (all elements finite) or have the input's"),
    ("layer_norm", [F32_23, tt("f32", (2,))], {}, None, False, "`gamma` must have shape [3]"),
    ("rms_norm", [F32_23], {"eps": -1.0}, None, False, "eps must be >= 0"),
    ("transpose", [F32_23], {"perm": [0, 0]}, None, False, "is not a permutation"),
    ("reshape", [F32_23], {}, None, False, "the target shape comes from the declared output"),
    ("reshape", [F32_23], {}, tt("f32", (4,)), False, "cannot reshape [2, 3] (6 elements) into [4]"),
    ("concat", [F32_23, tt("f32", (3, 3))], {"axis": 1}, None, False, "input 1 has shape [3, 3]"),
    ("slice", [F32_23], {"starts": [0], "ends": [1, 2]}, None, False, "must have one length"),
    ("slice", [F32_23], {"starts": [0, 0], "ends": [1, 1], "axes": [0, -2]}, None, False, "repeat an axis"),
    ("slice", [F32_23], {"starts": [0], "ends": [1], "steps": [0]}, None, False, "steps must not be 0"),
    ("pad", [F32_23], {"pads": [1, 1]}, None, False, "pads must hold [before, after] for each of the 2 axes"),
    ("pad", [F32_23], {"pads": [0, 1, -1, 0]}, None, False, "must not be negative"),
    ("pad", [F32_23], {"pads": [0, 0, 0, 0], "mode": "wrap"}, None, False, "mode"),
    ("pad", [F32_23], {"pads": [0, 0, 3, 0], "mode": "reflect"}, None, False, "must be at most 2"),
    ("pad", [tt("f32", (0, 3))], {"pads": [1, 0, 0, 0], "mode": "edge"}, None, False, "axis 0 is empty"),
    ("resize", [F32_23], {"sizes": [4]}, None, False, "output size of each of x's 2 axes"),
    ("resize", [F32_23], {"sizes": [4, 0]}, None, False, "must be >= 1"),
    ("resize", [F32_23], {"sizes": [4, 5], "scales": [1, 2]}, None, False, "[numerator, denominator]"),
    ("resize", [tt("i8", (2, 3))], {"sizes": [4, 5], "mode": "linear"}, None, False, "not i8"),
    ("rope", [tt("f32", (2, 3)), tt("i32", ())], {}, None, False, "an even Dh"),
    ("rope", [tt("f32", (3, 2, 4)), tt("i32", (2,))], {}, None, False, "pos must be a scalar"),
    ("sdpa", [tt("f32", (4,))] * 3, {}, None, False, "need at least 2 dims"),
    ("sdpa", [F32_23, tt("f32", (2, 4)), F32_23], {}, None, False, "share the last dim D"),
    ("sdpa", [F32_23, F32_23, tt("f32", (4, 3))], {}, None, False, "same number of keys"),
    ("sdpa", [F32_23] * 3 + [tt("bool", (3, 3))], {}, None, False, "does not broadcast to [..., Sq, Sk]"),
    ("sdpa", [tt("f32", (3, 2, 4)), tt("f32", (2, 2, 4)), tt("f32", (2, 2, 4))], {}, None, False,
     "incompatible broadcast dims 2 and 3"),
    ("conv2d", [F32_23, F32_23], {}, None, False, "x must be [N, C, H, W]"),
    ("conv2d", [tt("f32", (1, 2, 5, 5)), tt("f32", (3, 2, 3, 3))], {"stride": [1, 2, 3]}, None, False,
     "`stride` must be an int, [h, w]"),
    ("conv1d", [tt("f32", (1, 2, 5)), tt("f32", (3, 2, 3))], {"padding": [1, 2, 3]}, None, False,
     "or [left, right]"),
    ("conv1d", [tt("f32", (1, 2, 5)), tt("f32", (3, 2, 3))], {"stride": 0}, None, False, "must be >= 1"),
    ("conv1d", [tt("f32", (1, 4, 5)), tt("f32", (3, 2, 3))], {"groups": 2}, None, False, "must divide by groups"),
    ("conv1d", [tt("f32", (1, 2, 5)), tt("f32", (3, 2, 3)), tt("f32", (2,))], {}, None, False,
     "bias must have shape [3]"),
    ("conv1d", [tt("f32", (1, 2, 2)), tt("f32", (3, 2, 3))], {}, None, False, "window (3) is larger"),
    ("max_pool2d", [F32_23], {"kernel": 2}, None, False, "x must be [N, C, H, W]"),
    ("max_pool2d", [tt("f32", (1, 1, 4, 4))], {"kernel": 2, "padding": 2}, None, False, "at most half the kernel"),
    ("avg_pool2d", [tt("f32", (1, 1, 4, 4))], {"kernel": 2, "stride": -1}, None, False, "must be >= 1"),
    ("lrn", [tt("f32", (5,))], {"size": 3}, None, False, "x must be [N, C, ...] (at least 2 dims), got [5]"),
    ("lrn", [F32_23], {"size": 0}, None, False, "size must be >= 1, got 0"),
    ("lrn", [F32_23], {}, None, False, "missing required attribute `size`"),
    ("lrn", [tt("i32", (2, 3))], {"size": 3}, None, False, "lrn does not support dtype i32"),
]


@pytest.mark.parametrize("op,ins,attrs,out,inplace,fragment", ERRORS, ids=[f"{e[0]}:{e[5][:30]}" for e in ERRORS])
def test_infer_errors(op, ins, attrs, out, inplace, fragment) -> None:
    with pytest.raises(OpTypeError) as err:
        get(op).infer(ins, attrs, out, output_name_is_input=inplace)
    assert fragment in f"{err.value} {err.value.hint}"


def test_error_hints() -> None:
    with pytest.raises(E) as err:
        get("add").infer([F32_23, tt("f16", (2, 3))], {})
    assert err.value.hint == "cast one input with `op cast(..., to=f32)`"
    with pytest.raises(E) as err:
        get("add").infer([F32_23, F32_23], {"accc": dt.F32})
    assert err.value.hint == "did you mean `acc`?"
    with pytest.raises(E) as err:
        get("matmull")
    assert str(err.value) == "unknown op `matmull`" and err.value.hint == "did you mean `matmul` or `mul`?"
    with pytest.raises(E) as err:
        get("add").infer([tt("i8", (2,))] * 2, {"acc": dt.U32})
    assert err.value.hint == "for i8 inputs add accumulates in i16 i32 i64"


def test_reference_errors() -> None:
    spec = get("gather")
    inf = spec.infer([tt("f32", (3, 2)), tt("i64", (2,))], {})
    with pytest.raises(OpRuntimeError, match=r"gather: index 3 is out of range for axis 0 of size 3 \(valid: -3..2\)"):
        run_kernel(spec, [np.zeros((3, 2), np.float32), np.array([0, 3])], inf.attrs, inf)
    inf = spec.infer([tt("f32", (3, 2)), tt("u8", (1,))], {})
    with pytest.raises(OpRuntimeError, match="index 200"):
        run_kernel(spec, [np.zeros((3, 2), np.float32), np.array([200], np.uint8)], inf.attrs, inf)
    with pytest.raises(OpRuntimeError, match="input 0 has shape"):
        run_kernel(spec, [np.zeros((2, 2), np.float32), np.array([0], np.uint8)], inf.attrs, inf)


def test_index_tuples_out_of_range_are_runtime_errors() -> None:
    spec = get("gather_nd")
    inf = spec.infer([tt("f32", (3, 4)), tt("i32", (2, 2))], {})
    with pytest.raises(OpRuntimeError, match=r"gather_nd: index -5 at \[1, 1\] is out of range for a dim of size 4 "
                                             r"\(valid: -4..3\)"):
        run_kernel(spec, [np.zeros((3, 4), np.float32), np.array([[2, 3], [-3, -5]], np.int32)], inf.attrs, inf)
    spec = get("scatter_nd")
    inf = spec.infer([tt("f32", (3, 4)), tt("u64", (1, 1)), tt("f32", (1, 4))], {})
    with pytest.raises(OpRuntimeError, match="index 18446744073709551615"):
        run_kernel(spec, [np.zeros((3, 4), np.float32), np.array([[2 ** 64 - 1]], np.uint64),
                          np.zeros((1, 4), np.float32)], inf.attrs, inf)


def test_reference_revalidates_changed_attrs() -> None:
    """Run-time attribute values (attribute variables) are checked again and completed."""
    spec = get("clamp")
    inf = spec.infer([tt("i8", (3,))], {"max": 0})
    x = np.array([-5, 3, 100], np.int8)
    assert run_kernel(spec, [x], {**inf.attrs, "max": 50}, inf).tolist() == [-5, 3, 50]
    with pytest.raises(OpTypeError, match="is a float"):
        run_kernel(spec, [x], {**inf.attrs, "max": 2.5}, inf)


def test_tensor_type_normalises_shapes() -> None:
    t = TensorType(dt.F32, [np.int64(2), 3])
    assert t.shape == (2, 3) and t.numel == 6 and str(t) == "f32[2, 3]" and hash(t) == hash(tt("f32", (2, 3)))
