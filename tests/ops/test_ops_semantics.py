"""The reference kernels on the semantics the digest and decisions.md single out, with exact expectations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openinfer import dtypes as dt
from openinfer.numerics import bf16_bits, f8_bits
from openinfer.ops import get
from openinfer.reference.kernels import run_kernel

from .helpers import f_bits, run, tt

NAN, INF = math.nan, math.inf
I64_MIN, I64_MAX = -(2 ** 63), 2 ** 63 - 1


def same(actual: np.ndarray, expected: list) -> bool:
    """Equal including NaN positions and the sign of zero."""
    e = np.asarray(expected, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    equal = (a == e) & (np.signbit(a) == np.signbit(e))
    return a.shape == e.shape and bool(np.all(equal | (np.isnan(a) & np.isnan(e))))


# --------------------------------------------------------------------------- division

def test_float_division_by_zero_is_the_mask_nan_by_default() -> None:
    a, b = ("f32", [1.0, -1.0, 0.0, 6.0]), ("f32", [0.0, -0.0, 0.0, 4.0])
    assert same(run("div", a, b), [NAN, NAN, NAN, 1.5])
    assert same(run("div", a, b, div_by_zero_mask=INF), [INF, INF, INF, 1.5])
    assert same(run("recip", ("f64", [0.0, -0.0, 4.0])), [NAN, NAN, 0.25])
    assert same(run("recip", ("f16", [0.0, 2.0]), div_by_zero_mask=-1.0), [-1.0, 0.5])


def test_integer_division_truncates_and_wraps() -> None:
    a = ("i8", [-7, 7, -7, -128, 5, 0])
    b = ("i8", [2, -2, -2, -1, 0, 0])
    assert run("div", a, b).tolist() == [-3, -3, 3, -128, 0, 0]
    assert run("div", a, b, div_by_zero_mask=9).tolist() == [-3, -3, 3, -128, 9, 9]
    assert run("floor_div", a, b).tolist() == [-4, -4, 3, -128, 0, 0]
    assert run("floor_div", a, b, div_by_zero_mask=-1).tolist()[-2:] == [-1, -1]
    assert run("rem", a, b).tolist() == [-1, 1, -1, 0, 0, 0]
    assert run("div", ("i64", [I64_MIN, I64_MAX]), ("i64", [-1, -1])).tolist() == [I64_MIN, -I64_MAX]
    assert run("rem", ("i64", [I64_MIN]), ("i64", [-1])).tolist() == [0]
    assert run("div", ("u64", [2 ** 64 - 1, 7]), ("u64", [2, 0])).tolist() == [2 ** 63 - 1, 0]
    assert run("div", ("i4", [-8, 7]), ("i4", [-1, 2])).tolist() == [-8, 3]


# --------------------------------------------------------------------------- integer wrap and packed types

def test_integer_wrap_and_int_min_cases() -> None:
    assert run("abs", ("i8", [-128, -5, 5])).tolist() == [-128, 5, 5]
    assert run("abs", ("i8", [-128, -5]), acc=dt.I16).tolist() == [128, 5]
    assert run("neg", ("i4", [-8, 3])).tolist() == [-8, -3]
    assert run("add", ("i32", [2 ** 31 - 1]), ("i32", [1])).tolist() == [-(2 ** 31)]
    assert run("sub", ("u8", [0]), ("u8", [1])).tolist() == [255]
    assert run("mul", ("u64", [2 ** 63]), ("u64", [2])).tolist() == [0]


def test_packed_values_compute_unpacked_and_wrap_to_width() -> None:
    assert run("add", ("i4", [7, -8]), ("i4", [1, -1])).tolist() == [-8, 7]
    assert run("add", ("u2", [3, 2]), ("u2", [1, 1])).tolist() == [0, 3]
    assert run("mul", ("i2", [-2, 1]), ("i2", [-1, -2])).tolist() == [-2, -2]
    assert run("add", ("u1", [1]), ("u1", [1])).tolist() == [0]
    assert run("not", ("u2", [1, 0])).tolist() == [2, 3]
    assert run("not", ("i4", [0, -8])).tolist() == [-1, 7]
    assert run("popcount", ("i4", [-1, -8, 5])).tolist() == [4, 1, 2]
    assert run("popcount", ("i8", [-1])).tolist() == [8]
    assert run("popcount", ("i64", [-1])).tolist() == [64]
    assert run("matmul", ("i4", [[7, 7]]), ("i4", [[7], [7]])).tolist() == [[2]]  # 98 wraps to 2 in i4


def test_bool_and_bitset_arithmetic() -> None:
    a, b = ("bool", [True, True, False, False]), ("bool", [True, False, True, False])
    assert run("add", a, b).tolist() == [True, True, True, False]
    assert run("mul", a, b).tolist() == [True, False, False, False]
    assert run("matmul", ("bool", [[True, False]]), ("bool", [[False], [True]])).tolist() == [[False]]
    assert run("add", ("bitset", [200, 1]), ("bitset", [100, 2])).tolist() == [44, 3]
    assert run("mul", ("bitset", [16]), ("bitset", [32])).tolist() == [0]


def test_shifts_are_64_bit_wrapping_then_truncated() -> None:
    assert run("shl", ("i4", [1, 3]), bits=3).tolist() == [-8, -8]
    assert run("shr", ("i4", [-8, 7]), bits=1).tolist() == [-4, 3]
    assert run("shr", ("u8", [200]), bits=3).tolist() == [25]
    assert run("shl", ("i8", [1]), bits=64).tolist() == [1]        # 64 & 63 == 0
    assert run("shl", ("i8", [1]), bits=8).tolist() == [0]
    assert run("shl", ("u64", [3]), bits=63).tolist() == [2 ** 63]
    assert run("shr", ("i64", [-(2 ** 63)]), bits=63).tolist() == [-1]
    assert run("shr", ("i8", [-128]), bits=-1).tolist() == [-1]     # -1 & 63 == 63


# --------------------------------------------------------------------------- floats

def test_round_on_store_is_bit_exact() -> None:
    assert run("add", ("f16", [2048.0, 2048.0]), ("f16", [1.0, 3.0])).tolist() == [2048.0, 2052.0]
    r = run("add", ("bf16", [256.0, 256.0]), ("bf16", [1.0, 3.0]))
    assert r.tolist() == [256.0, 260.0] and bf16_bits(r).tolist() == [0x4380, 0x4382]
    r = run("add", ("f8", [1.75, 1.5]), ("f8", [0.125, 0.125]))
    assert r.tolist() == [2.0, 1.5] and f8_bits(r).tolist() == [0x40, 0x3E]   # 1.875 -> 2.0 (carry kept)
    assert run("mul", ("f8", [57344.0]), ("f8", [1.25])).tolist() == [INF]
    assert f_bits(run("neg", ("f16", [0.0]))) == [0x8000]
    assert run("fill", ("f16", [0.0]), value=0.1).tolist() == [np.float16(0.1)]


def test_low_precision_matmul_rounds_every_add_unless_acc_says_otherwise() -> None:
    a, b = ("f16", [[2048.0, 1.0, 1.0]]), ("f16", [[1.0], [1.0], [1.0]])
    assert run("matmul", a, b).tolist() == [[2048.0]]                    # 2049 -> 2048 after each add
    assert run("matmul", a, b, acc=dt.F32).tolist() == [[2050.0]]
    r = run("matmul", a, b, acc=[dt.F32], out="f16")
    assert r.dtype == np.float16 and r.tolist() == [[2050.0]]
    assert run("sum_axis", ("f16", [2048.0, 1.0, 1.0]), axes=[0]).tolist() == 2048.0
    assert run("sum_axis", ("f16", [2048.0, 1.0, 1.0]), axes=[0], acc=[dt.F32, dt.F32]).tolist() == 2050.0


def test_min_max_and_clamp_follow_ieee_2019() -> None:
    a, b = ("f32", [-0.0, 0.0, NAN, 1.0]), ("f32", [0.0, -0.0, 1.0, NAN])
    assert same(run("max", a, b), [0.0, 0.0, NAN, NAN])
    assert same(run("min", a, b), [-0.0, -0.0, NAN, NAN])
    assert same(run("max_axis", ("f32", [[-0.0, 0.0, -1.0]]), axes=[1]), [0.0])
    assert same(run("min_axis", ("f32", [[0.0, -0.0, 1.0]]), axes=[-1]), [-0.0])
    assert same(run("clamp", ("f32", [-0.0, NAN, -5.0, 5.0]), min=0.0, max=2.0), [0.0, NAN, 0.0, 2.0])
    assert run("clamp", ("i8", [-128, 0, 127])).tolist() == [-128, 0, 127]
    assert run("clamp", ("u8", [0, 9]), min=3, max=5).tolist() == [3, 5]


def test_rounding_ops() -> None:
    x = ("f32", [0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.4, INF, NAN])
    assert same(run("round", x), [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, -0.0, INF, NAN])
    assert same(run("floor", ("f64", [-0.5, -0.0, 1.5])), [-1.0, -0.0, 1.0])
    assert same(run("ceil", ("f64", [-0.5, 0.2])), [-0.0, 1.0])
    assert same(run("trunc", ("bf16", [-1.5, 2.5])), [-1.0, 2.0])


def test_sign_and_predicates() -> None:
    r = run("sign", ("f32", [NAN, -0.0, -2.0, 3.0]))
    assert r.dtype == np.int8 and r.tolist() == [0, 0, -1, 1]
    assert run("is_neg", ("f32", [-0.0, NAN, -INF, -1e-30])).tolist() == [False, False, True, True]
    assert run("is_neg", ("u8", [0, 255])).tolist() == [False, False]
    assert run("filter", ("f32", [1.0, 1.0, 1.0]), ("f32", [2.0, 2.0, 2.0]), ("f32", [0.0, -0.0, NAN])).tolist() \
        == [2.0, 2.0, 1.0]


def test_is_finite_scalar_or_elementwise() -> None:
    x = ("f32", [[1.0, INF], [NAN, 2.0]])
    r = run("is_finite", x)
    assert r.shape == () and not r
    assert run("is_finite", ("f32", [1.0, 2.0])).tolist() is True
    r = run("is_finite", x, out=tt("bool", (2, 2)))
    assert r.tolist() == [[True, False], [False, True]]


def test_relu_variants() -> None:
    x = ("f32", [-2.0, -0.0, 3.0, 10.0, NAN])
    assert same(run("relu", x), [-0.0, -0.0, 3.0, 10.0, NAN])
    assert same(run("relu", x, alpha=0.5, clamp_max=6.0), [-1.0, -0.0, 3.0, 6.0, NAN])
    assert same(run("relu", x, negative_slope=0.5, clamp_min=-0.5), [-0.5, -0.0, 3.0, 10.0, NAN])
    assert run("relu", ("i8", [-3, -128, 100]), alpha=0.5).tolist() == [-1, -64, 100]
    assert run("relu", ("i8", [-100]), alpha=2.0).tolist() == [-128]           # saturates like cast
    assert run("relu", ("i4", [7, -8]), clamp_max=6).tolist() == [6, 0]


# --------------------------------------------------------------------------- cast

def test_cast_rounding_modes_saturation_and_nan() -> None:
    x = ("f32", [2.5, -2.5, 3.5, NAN, INF, -INF, 300.0, -300.0, -0.7])
    assert run("cast", x, to=dt.I8).tolist() == [2, -2, 3, 0, 127, -128, 127, -128, 0]
    assert run("cast", x, to=dt.I8, rounding_mode="nearest").tolist() == [2, -2, 4, 0, 127, -128, 127, -128, -1]
    assert run("cast", x, to=dt.I8, rounding_mode="floor").tolist() == [2, -3, 3, 0, 127, -128, 127, -128, -1]
    assert run("cast", x, to=dt.I8, rounding_mode="ceil").tolist() == [3, -2, 4, 0, 127, -128, 127, -128, 0]
    assert run("cast", x, to=dt.I8, saturate=False).tolist() == [2, -2, 3, 0, 0, 0, 44, -44, 0]
    assert run("cast", ("f64", [2.0 ** 63, -1.0, 1e300]), to=dt.U64).tolist() == [2 ** 63, 0, 2 ** 64 - 1]
    assert run("cast", ("f64", [-1.0, 2.0 ** 64 + 2 ** 12]), to=dt.U64, saturate=False).tolist() == \
        [2 ** 64 - 1, 2 ** 12]
    assert run("cast", ("f64", [2.0 ** 63, -(2.0 ** 63) - 2048]), to=dt.I64).tolist() == [I64_MAX, I64_MIN]


def test_cast_to_floats() -> None:
    assert run("cast", ("i32", [65519, 65520, -1]), to=dt.F16).tolist() == [65504.0, INF, -1.0]
    assert run("cast", ("u64", [2 ** 64 - 1]), to=dt.F32).tolist() == [2.0 ** 64]
    assert run("cast", ("i64", [2 ** 53 + 1]), to=dt.F64).tolist() == [2.0 ** 53]
    assert run("cast", ("i8", [-8, 9]), to=dt.F8).tolist() == [-8.0, 8.0]          # 9: a tie, to even
    assert run("cast", ("f64", [1.0 + 2 ** -11 + 2 ** -40]), to=dt.F16).tolist() == [1.0 + 2 ** -10]
    assert run("cast", ("u4", [15]), to=dt.U64).tolist() == [15]
    assert run("cast", ("i2", [-2]), to=dt.I64).tolist() == [-2]


def test_cast_to_and_from_bool() -> None:
    x = ("f32", [0.0, -0.0, 2.5, -1e-30, NAN, INF])
    assert run("cast", x, to=dt.BOOL).tolist() == [False, False, True, True, True, True]   # x != 0, as NumPy
    assert run("cast", ("i4", [-8, 0, 7]), to=dt.BOOL).tolist() == [True, False, True]
    assert run("cast", ("u64", [0, 2 ** 64 - 1]), to=dt.BOOL).tolist() == [False, True]
    b = ("bool", [True, False, True])
    assert run("cast", b, to=dt.F16).tolist() == [1.0, 0.0, 1.0]
    assert run("cast", b, to=dt.I64).tolist() == [1, 0, 1]
    assert run("cast", b, to=dt.U8).dtype == np.uint8


# --------------------------------------------------------------------------- comparisons

def test_comparisons_broadcast_like_numpy() -> None:
    a = ("f32", [[1.0, NAN, 3.0], [4.0, 5.0, -0.0]])
    got = run("lt", a, ("f32", [3.0, 3.0, 0.0]))
    assert got.tolist() == (np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -0.0]]) < np.array([3.0, 3.0, 0.0])).tolist()
    assert run("eq", a, ("f32", 3.0)).tolist() == [[False, False, True], [False, False, False]]   # a scalar
    assert run("ge", ("i8", [[1], [-2]]), ("i8", [0, 1, -2])).tolist() == [[True, True, True], [False, False, True]]


# --------------------------------------------------------------------------- arange

def test_arange_counts_along_an_axis() -> None:
    assert run("arange", ("i32", [9, 9, 9, 9])).tolist() == [0, 1, 2, 3]
    assert run("arange", ("i8", [0] * 4), start=126, step=1).tolist() == [126, 127, -128, -127]   # wraps
    assert run("arange", ("u8", [0] * 3), start=5, step=250).tolist() == [5, 255, 249]
    got = run("arange", ("f32", [0.0] * 5), start=0.1, step=0.1)
    assert got.tolist() == (0.1 + np.arange(5) * 0.1).astype(np.float32).tolist()   # f64, then one rounding
    assert run("arange", ("i64", [[0] * 3] * 2), axis=0, start=-1, step=-2).tolist() == [[-1, -1, -1],
                                                                                           [-3, -3, -3]]
    assert run("arange", ("f16", [[0.0] * 3] * 2), start=1.0).tolist() == [[1.0, 2.0, 3.0]] * 2


# --------------------------------------------------------------------------- reductions

def test_argmax_ties_and_nan() -> None:
    x = ("f32", [[1.0, 3.0, 3.0, 0.0], [NAN, 1.0, NAN, 5.0]])
    assert run("argmax_axis", x, axis=1).tolist() == [1, 0]
    assert run("argmax_axis", x, axis=1, select_first=False).tolist() == [2, 2]
    assert run("argmin_axis", ("i8", [[2, 0, 0]]), axis=-1, select_first=False, keepdims=True).tolist() == [[2]]
    assert run("argmin_axis", x, axis=0).dtype == np.int64


def test_accumulation_wraps_to_the_accumulator() -> None:
    assert run("add", ("i8", [127, -128]), ("i8", [127, -128]), acc=dt.I16).tolist() == [254, -256]
    assert run("mul", ("i4", [7, -8]), ("i4", [7, -8]), acc=[dt.I8]).tolist() == [49, 64]
    assert run("sum_axis", ("u8", [[255, 255, 255]]), axes=[1], acc=dt.U16).tolist() == [765]
    assert run("sum_axis", ("u8", [[255, 255, 255]]), axes=[1]).tolist() == [253]
    assert run("prod_axis", ("i8", [[100, 100, 100]]), axes=[1], acc=dt.I16).tolist() == [(10 ** 6 + 2 ** 15) % 2 ** 16
                                                                                         - 2 ** 15]
    assert run("mean_axis", ("i8", [[-3, -4], [127, 127]]), axes=[1]).tolist() == [-3, 127]
    assert run("mean_axis", ("i64", [[I64_MAX, I64_MAX]]), axes=[1]).tolist() == [I64_MAX]
    a, b = ("i8", [[100, 100]]), ("i8", [[100], [1]])
    assert run("matmul", a, b, acc=dt.I32).tolist() == [[10100]]
    assert run("matmul", a, b, acc=[dt.I8, dt.I32]).tolist() == [[16 + 100]]    # 10000 wraps in the i8 product


def test_reductions_of_an_empty_batch_and_the_mean_of_no_elements() -> None:
    """A batch of 0 (an empty kept axis) gives an empty result: the reference's reshape of it
    failed. The mean of no elements (an empty reduced axis) is NaN for floats, 0 / 0 as numpy.mean
    gives it, and an integer one, which has no value, is refused when the graph is bound."""
    from openinfer.ops.registry import OpTypeError

    batch = np.zeros((0, 8))
    for op in ("sum_axis", "mean_axis", "prod_axis", "max_axis", "min_axis"):
        assert run(op, ("f32", batch), axes=[1]).shape == (0,), op
    assert run("mean_axis", ("f32", batch), axes=[1], keepdims=True).shape == (0, 1)
    assert run("mean_axis", ("f32", np.zeros((2, 0, 3))), axes=[2]).shape == (2, 0)
    for dtype in ("f16", "f32", "f64"):
        assert same(run("mean_axis", (dtype, batch), axes=[0]), [NAN] * 8), dtype
    assert same(run("mean_axis", ("f16", batch), axes=[0], acc=dt.F32), [NAN] * 8)
    assert run("sum_axis", ("f32", batch), axes=[0]).tolist() == [0.0] * 8
    for dtype in ("i8", "u32", "i64"):
        with pytest.raises(OpTypeError, match=f"mean_axis: the {dtype} mean of no elements \\(axes \\[0\\] of "
                                              "\\[0, 8\\] are empty\\) has no value"):
            get("mean_axis").infer([tt(dtype, (0, 8))], {"axes": [0]})


# --------------------------------------------------------------------------- real-model ops

def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_sdpa_matches_the_textbook_formula_and_kv_cache_decode() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=s) for s in [(2, 4, 8), (2, 4, 8), (2, 4, 3)])
    full = run("sdpa", ("f64", q), ("f64", k), ("f64", v), causal=True)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(8) + np.triu(np.full((4, 4), -np.inf), 1)
    np.testing.assert_allclose(full, _softmax(s) @ v, rtol=1e-12)
    last = run("sdpa", ("f64", q[:, 3:]), ("f64", k), ("f64", v), causal=True)   # decode: 1 query, 4 keys
    np.testing.assert_allclose(last, full[:, 3:], rtol=1e-12)
    keep = np.ones((4, 4), bool)
    keep[1] = False
    r = run("sdpa", ("f64", q), ("f64", k), ("f64", v), ("bool", keep))
    assert np.all(r[:, 1] == 0)


def test_sdpa_gqa_groups_query_heads() -> None:
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 3, 8)), rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    r = run("sdpa", ("f64", q), ("f64", k), ("f64", v))
    ref = _softmax(q @ np.repeat(k, 2, 0).transpose(0, 2, 1) / math.sqrt(8)) @ np.repeat(v, 2, 0)
    np.testing.assert_allclose(r, ref, rtol=1e-12)


def test_rope_rotates_pairs() -> None:
    x = np.arange(8, dtype=np.float64).reshape(1, 1, 8)   # [S=1, H=1, Dh=8]
    r = run("rope", ("f64", x), ("i32", [3]))
    freq = 10000.0 ** (-np.arange(4) * 2 / 8)
    c, s = np.cos(3 * freq), np.sin(3 * freq)
    a, b = x[..., :4], x[..., 4:]
    np.testing.assert_allclose(r, np.concatenate([a * c - b * s, b * c + a * s], -1), rtol=1e-12)
    r = run("rope", ("f64", x[0]), ("i64", 3), interleaved=True)
    np.testing.assert_allclose(r[0, 0::2], x[0, 0, 0::2] * c - x[0, 0, 1::2] * s, rtol=1e-12)


def test_norms_gelu_conv_pool_against_numpy() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6))
    g = rng.normal(size=(6,))
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(run("layer_norm", ("f64", x), ("f64", g)), ln, rtol=1e-12)
    rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(run("rms_norm", ("f64", x), ("f64", g)), rms, rtol=1e-12)
    gelu = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(run("gelu", ("f64", x)), gelu, rtol=1e-12)
    img = rng.normal(size=(1, 1, 4, 4))
    w = rng.normal(size=(1, 1, 2, 2))
    conv = np.array([[(img[0, 0, i:i + 2, j:j + 2] * w[0, 0]).sum() for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(run("conv2d", ("f64", img), ("f64", w))[0, 0], conv, rtol=1e-12)
    pooled = img[0, 0].reshape(2, 2, 2, 2).max(axis=(1, 3))
    assert np.array_equal(run("max_pool2d", ("f64", img), kernel=2)[0, 0], pooled)
    avg = run("avg_pool2d", ("f64", img), kernel=3, stride=1, padding=1)[0, 0, 0, 0]
    assert avg == pytest.approx(img[0, 0, :2, :2].mean())
    avg = run("avg_pool2d", ("f64", img), kernel=3, stride=1, padding=1, count_include_pad=True)[0, 0, 0, 0]
    assert avg == pytest.approx(img[0, 0, :2, :2].sum() / 9)


def test_layout_ops() -> None:
    t = np.arange(12).reshape(4, 3)
    assert run("gather", ("i32", t), ("i64", [[3, -1], [0, 0]])).tolist() == [[t[3].tolist(), t[3].tolist()],
                                                                            [t[0].tolist(), t[0].tolist()]]
    assert run("slice", ("i4", [[1, 2, 3], [4, 5, 6]]), starts=[-1], ends=[-100], axes=[1], steps=[-2]).tolist() \
        == [[3, 1], [6, 4]]
    assert run("concat", ("u2", [1, 2]), ("u2", [3]), axis=-1).tolist() == [1, 2, 3]
    assert run("reshape", ("bool", [True, False, True, False]), out=tt("bool", (2, 2))).tolist() == \
        [[True, False], [True, False]]
    assert run("transpose", ("f8", [[1.0, 2.0]])).tolist() == [[1.0], [2.0]]


def test_gather_nd_is_numpy_advanced_indexing() -> None:
    """Random data of odd shapes; index tuples with negative entries; batch_dims 0 and 1."""
    rng = np.random.default_rng(7)
    data = rng.normal(size=(5, 7, 3)).astype(np.float32)
    idx = np.stack([rng.integers(-5, 5, (4, 3)), rng.integers(-7, 7, (4, 3))], axis=-1)
    want = data[idx[..., 0], idx[..., 1]]
    assert np.array_equal(run("gather_nd", ("f32", data), ("i64", idx)), want)
    rows = rng.integers(-7, 7, (5, 2, 1))
    want = np.stack([data[b][rows[b, :, 0]] for b in range(5)])
    assert np.array_equal(run("gather_nd", ("f32", data), ("i16", rows), batch_dims=1), want)


@pytest.mark.parametrize("reduction, ufunc", [("add", np.add), ("mul", np.multiply), ("max", np.maximum),
                                              ("min", np.minimum)])
def test_scatter_nd_reductions_are_numpy_ufunc_at(reduction, ufunc) -> None:
    """Repeated index tuples combine in order (f64, so the order cannot change a sum); none: last wins."""
    rng = np.random.default_rng(11)
    data = rng.normal(size=(7, 5, 3))
    idx = np.stack([rng.integers(-7, 7, 13), rng.integers(0, 5, 13)], axis=-1)
    idx[5] = idx[2] = idx[0]
    upd = rng.normal(size=(13, 3))
    want = data.copy()
    ufunc.at(want, (idx[:, 0], idx[:, 1]), upd)
    assert np.array_equal(run("scatter_nd", ("f64", data), ("i32", idx), ("f64", upd), reduction=reduction), want)
    want = data.copy()
    for j in range(13):
        want[idx[j, 0], idx[j, 1]] = upd[j]
    assert np.array_equal(run("scatter_nd", ("f64", data), ("i32", idx), ("f64", upd)), want)


def test_scatter_nd_reductions_are_the_elementwise_ops() -> None:
    """Integers wrap, bool add is OR and mul AND, f16 rounds after every row, NaN propagates in max."""
    assert run("scatter_nd", ("i8", [100, 1]), ("i64", [[0], [0]]), ("i8", [100, 27]), reduction="add").tolist() \
        == [-29, 1]
    assert run("scatter_nd", ("bool", [True, False]), ("u8", [[1], [0]]), ("bool", [True, False]),
               reduction="mul").tolist() == [False, False]
    assert run("scatter_nd", ("f16", [2048.0]), ("i64", [[0], [0]]), ("f16", [1.0, 1.0]), reduction="add").tolist() \
        == [2048.0]
    assert same(run("scatter_nd", ("f32", [1.0, -0.0]), ("i64", [[0], [1]]), ("f32", [NAN, 0.0]), reduction="max"),
                [NAN, 0.0])


def test_in_place_gives_the_normal_result() -> None:
    spec = get("add")
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    normal = spec.infer([tt("f32", (2, 3)), tt("f32", (3,))], {})
    inplace = spec.infer([tt("f32", (2, 3)), tt("f32", (3,))], {}, normal.out, output_name_is_input=True)
    assert inplace.mode == "inplace" and inplace.broadcast
    assert np.array_equal(run_kernel(spec, [a, b], None, normal), run_kernel(spec, [a, b], None, inplace))
