"""Writing then reading: every dtype, metadata kind, quant mode, layout rule and value check."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from oinf_testlib import rich_model

import openinfer as oi
from openinfer import OinfError, numerics
from openinfer.dtypes import BY_NAME, TENSOR_DTYPES
from openinfer.oinf import (
    Bitset,
    ModelLoader,
    QuantParams,
    ScalarValue,
    TensorSpec,
    UninitializedTensor,
    encode_oinf,
    write_oinf,
)


def reopen(tmp_path, tensors=None, sizevars=None, metadata=None, version=2):
    path = tmp_path / "m.oinf"
    write_oinf(path, tensors, sizevars, metadata, version=version)
    return ModelLoader.open(path)


def sample(dt, shape, rng):
    """Random values that `dt` holds exactly, in its unpacked representation."""
    if dt.is_float:
        return numerics.round_float(rng.standard_normal(shape) * 3, dt)
    if dt.kind.name == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.name == "t1":
        return np.where(rng.integers(0, 2, shape) > 0, 1, -1).astype(np.int8)
    return rng.integers(dt.lo, dt.hi, shape, endpoint=True, dtype=dt.np_dtype if dt.bits >= 8 else np.int64
                        ).astype(dt.np_dtype)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (1,), (13,), (3, 5), (2, 3, 4), (0,), (4, 0)])
def test_every_tensor_dtype_round_trips(tmp_path, dt, shape, version):
    values = sample(dt, shape, np.random.default_rng(len(shape) + dt.code))
    with reopen(tmp_path, {"t": TensorSpec(values, dt)}, version=version) as m:
        info = m.info("t")
        assert (info.dtype, info.shape, info.has_data) == (dt, shape, True)
        assert info.data_nbytes == dt.storage_nbytes(values.size)
        got = m.tensor("t")
        assert got.dtype == dt.np_dtype and got.shape == shape
        np.testing.assert_array_equal(got, values)
        assert m.tensor_bytes("t").tobytes() == numerics.to_storage(values, dt)


def test_native_numpy_dtypes_are_inferred(tmp_path):
    arrays = {f"a{i}": (np.arange(6) % 2).astype(t).reshape(2, 3) for i, t in enumerate(
        [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
         np.float16, np.float32, np.float64, np.bool_])}
    with reopen(tmp_path, arrays) as m:
        for name, a in arrays.items():
            assert m.tensor(name).dtype == a.dtype
            np.testing.assert_array_equal(m.tensor(name), a)


def test_big_endian_and_non_contiguous_arrays(tmp_path):
    big = np.arange(12, dtype=">f4").reshape(3, 4)
    strided = np.arange(40, dtype=np.int16).reshape(5, 8)[::2, ::3]
    with reopen(tmp_path, {"big": big, "strided": strided, "packed": TensorSpec(strided % 8, "i4")}) as m:
        np.testing.assert_array_equal(m.tensor("big"), big)
        np.testing.assert_array_equal(m.tensor("strided"), strided)
        np.testing.assert_array_equal(m.tensor("packed"), strided % 8)


def test_numeric_tensors_are_zero_copy_read_only_views(tmp_path):
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    with reopen(tmp_path, {"a": a, "b": np.ones(3, np.float64), "c": np.array([True, False])}) as m:
        t = m.tensor("a")
        assert not t.flags.writeable and not t.flags.owndata
        assert np.shares_memory(t, m.tensor_bytes("a"))
        assert t.ctypes.data % 8 == 0            # every blob is 8-aligned
        with pytest.raises(ValueError):
            t[0, 0] = 1
        assert not m.tensor("c").flags.owndata
    # views outlive close(): the mapping goes when the last view does
    np.testing.assert_array_equal(t, a)


def test_raw_storage_access(tmp_path):
    v = np.array([[-8, 7, 3], [0, -1, 5]])
    f = np.array([1.0, -2.5, np.nan], np.float32)
    with reopen(tmp_path, {"p": TensorSpec(v, "i4"), "b": TensorSpec(f, "bf16"), "e": TensorSpec(f, "f8"),
                           "q": np.array([True, False])}) as m:
        assert m.tensor("p", raw=True).tobytes() == numerics.pack(v, BY_NAME["i4"])
        assert m.tensor("p", raw=True).shape == (3,)
        assert m.tensor("b", raw=True).dtype == np.uint16
        np.testing.assert_array_equal(m.tensor("b", raw=True), numerics.bf16_bits(f))
        np.testing.assert_array_equal(m.tensor("e", raw=True), [0x3C, 0xC1, 0x7D])
        assert m.tensor("q", raw=True).dtype == np.uint8


def test_f8_special_values_round_trip(tmp_path):
    x = np.array([0.0, -0.0, 1.875, 57344.0, 61439.0, np.inf, -np.inf, np.nan, 2.0**-16,
                  2.0**-17, 3 * 2.0**-17, 2.0**-14 * 0.875, -2.0**-15], np.float32)
    # hand-derived E5M2 codes: carry 1.875 -> 2.0, 61439 -> 57344 (below the tie), subnormal ties to even
    codes = [0x00, 0x80, 0x40, 0x7B, 0x7B, 0x7C, 0xFC, 0x7D, 0x01, 0x00, 0x02, 0x04, 0x82]
    with reopen(tmp_path, {"e": TensorSpec(x, "f8")}) as m:
        assert list(m.tensor("e", raw=True)) == codes
        got = m.tensor("e")
        assert np.isnan(got[7]) and not np.isinf(got[7])       # NaN stays NaN (the original gave inf)
        assert np.signbit(got[1]) and got[2] == 2.0 and got[5] == np.inf
    # finite values that round to inf (61440 ties to even, past the largest 57344) are refused
    for big in (61440.0, 1e6, -1e6):
        with pytest.raises(OinfError, match="beyond the f8 range"):
            write_oinf(tmp_path / "big.oinf", {"e": TensorSpec(np.array([1.0, big], np.float32), "f8")})


def test_bf16_rounding_and_specials(tmp_path):
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, np.inf, -np.inf, np.nan, -0.0, 3.389e38], np.float32)
    with reopen(tmp_path, {"b": TensorSpec(x, "bf16")}) as m:
        got = m.tensor("b")
        np.testing.assert_array_equal(got[:5], [1.0, 1.0, 1 + 2**-6, np.inf, -np.inf])  # ties to even
        assert np.isnan(got[5]) and np.signbit(got[6]) and got[7] == (2 - 2**-7) * 2.0**127   # the largest
    with pytest.raises(OinfError, match="beyond the bf16 range"):      # 3.4e38 rounds past it, to inf
        write_oinf(tmp_path / "big.oinf", {"b": TensorSpec(np.array([3.4e38], np.float32), "bf16")})


def test_f64_input_is_rounded_once(tmp_path):
    """f64 -> bf16/f8 must not double-round through f32."""
    x = np.array([1 + 2**-8 + 2**-30, 1.125 + 2**-40])
    with reopen(tmp_path, {"b": TensorSpec(x, "bf16"), "e": TensorSpec(x, "f8")}) as m:
        assert m.tensor("b")[0] == 1 + 2**-7
        assert m.tensor("e")[1] == 1.25


def test_bool_tensors_of_any_rank(tmp_path):
    b = np.random.default_rng(1).integers(0, 2, (3, 4, 2)).astype(bool)
    with reopen(tmp_path, {"b": b, "s": np.array(True)}) as m:
        np.testing.assert_array_equal(m.tensor("b"), b)
        assert m.tensor("s").shape == () and m.tensor("s").item() is True


def test_scalars_have_ndim_0(tmp_path):
    with reopen(tmp_path, {"x": np.float32(2.5), "y": 7, "z": TensorSpec(3, "u4")}) as m:
        assert m.info("x").shape == () and m.tensor("x").item() == 2.5
        assert m.info("y").dtype.name == "i64"        # a plain Python int keeps NumPy's default dtype
        assert m.tensor("z").item() == 3 and m.info("z").data_nbytes == 1


def test_uninitialized_tensors(tmp_path):
    with reopen(tmp_path, {"u": UninitializedTensor("bf16", (2, 3)), "d": np.ones(2, np.float32)}) as m:
        info = m.info("u")
        assert (info.has_data, info.data_offset, info.data_nbytes, info.shape) == (False, 0, 0, (2, 3))
        with pytest.raises(oi.OinfError, match="no data"):
            m.tensor("u")


def test_rich_model_round_trips_everything(tmp_path):
    tensors, sizevars, metadata = rich_model()
    with reopen(tmp_path, tensors, sizevars, metadata) as m:
        assert m.sizevars == sizevars
        for name, spec in tensors.items():
            info = m.info(name)
            if isinstance(spec, UninitializedTensor):
                assert not info.has_data and info.quant == spec.quant
                continue
            data = spec.data if isinstance(spec, TensorSpec) else spec
            want = numerics.from_storage(numerics.to_storage(np.asarray(data), info.dtype), info.dtype, info.shape) \
                if isinstance(spec, TensorSpec) else data
            np.testing.assert_array_equal(m.tensor(name), want)
            assert info.quant == (spec.quant if isinstance(spec, TensorSpec) else None)
        meta = m.metadata
        assert meta["m.bool"] is True and meta["m.str"] == "hello-world_1.0"
        assert meta["m.f32"] == np.float32(0.1) and meta["m.bf16"] == 3.140625
        assert meta["m.bitset"] == Bitset.from_bools([1, 0, 1, 1, 0, 0, 0, 1, 1, 1])
        assert m.metadata_info("m.nd_u4").element_dtype.name == "u4"
        np.testing.assert_array_equal(meta["m.nd_u4"], [[1, 2, 3], [15, 0, 7]])
        np.testing.assert_array_equal(meta["m.nd_t1"], [1, -1, -1])
        # decode -> re-encode reproduces the file exactly
        assert encode_oinf(**m.to_write_args()) == (tmp_path / "m.oinf").read_bytes()


def test_metadata_type_inference(tmp_path):
    meta = {"b": False, "s": "x", "u8": 255, "u16": 256, "u32": 2**16, "u64": 2**32, "i8": -128, "i16": -129,
            "i32": -2**15 - 1, "i64": -2**31 - 1, "f": 1.5, "np16": np.float16(1), "npi": np.int32(3),
            "npu": np.uint64(3), "npb": np.bool_(True), "lf": [1.0, 2.0], "li": [1, 2], "lneg": [-1, 300],
            "lb": [True, False], "arr": np.arange(3, dtype=np.uint16), "empty": [],
            "forced": ScalarValue(5, "i32"), "forced_list": ScalarValue([1, 2], "f16")}
    types = {"b": "bool", "s": "str", "f": "f32", "np16": "f16", "npi": "i32", "npu": "u64", "npb": "bool",
             "forced": "i32"}
    types |= {k: k for k in ("u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64")}
    elements = {"lf": "f32", "li": "i8", "lneg": "i16", "lb": "bool", "arr": "u16", "empty": "f32",
                "forced_list": "f16"}
    with reopen(tmp_path, metadata=meta) as m:
        for key, t in types.items():
            assert m.metadata_info(key).type.name == t, key
        for key, t in elements.items():
            info = m.metadata_info(key)
            assert (info.type.name, info.element_dtype.name) == ("ndarray", t), key
        assert isinstance(m.meta("u64"), int) and isinstance(m.meta("f"), float) and m.meta("npb") is True
        assert m.meta("empty").shape == (0,)


def test_metadata_value_nbytes_rules(tmp_path):
    meta = {"f": 1.0, "p": ScalarValue(3, "u2"), "b": True, "s": "abcde", "bits": Bitset(9, b"\xff\x01"),
            "nd": ScalarValue([1, 2, 3], "i4")}
    with reopen(tmp_path, metadata=meta) as m:
        nbytes = {k: m.metadata_info(k).value_nbytes for k in meta}
    # scalars unpadded; string, bitset and ndarray include their padding (digest §1.5)
    assert nbytes == {"f": 4, "p": 1, "b": 1, "s": 16, "bits": 16, "nd": 24}


def test_quant_modes_round_trip(tmp_path):
    w = np.arange(24).reshape(4, 6) % 8
    specs = {
        "sym_t": QuantParams.per_tensor(0.5),
        "asym_t": QuantParams.per_tensor(0.25, -3),
        "sym_c": QuantParams.per_channel(1, np.linspace(0.1, 0.6, 6)),
        "asym_c": QuantParams.per_channel(0, [1, 2, 3, 4], [0, -1, 2, 7]),
    }
    tensors = {k: TensorSpec(w, "i4", q) for k, q in specs.items()}
    with reopen(tmp_path, tensors) as m:
        for name, q in specs.items():
            got = m.info(name).quant
            assert got == q
            assert got.scales.dtype == np.float32 and got.zero_points.dtype == np.int32
            assert m.info(name).quant_nbytes == (48 + 4 * len(q.scales) + 4 * len(q.zero_points) + 7) // 8 * 8
    assert specs["asym_c"].scheme == "asymmetric" and specs["sym_c"].zp_mode == "none"


def test_interleaved_quant_tensors_offsets_match_blobs(tmp_path):
    """The original's bug: offsets computed interleaved, blobs written grouped (digest §1.8)."""
    rng = np.random.default_rng(3)
    tensors = {
        "a": TensorSpec(rng.integers(-8, 8, (4, 4)), "i4", QuantParams.per_tensor(0.1)),
        "b": rng.standard_normal(5).astype(np.float32),
        "c": TensorSpec(rng.integers(-8, 8, (2, 3)), "i4", QuantParams.per_channel(1, [1, 2, 3], [4, 5, 6])),
        "d": rng.standard_normal((2, 2)).astype(np.float32),
        "e": UninitializedTensor("i8", (3,), quant=QuantParams.per_tensor(2.0)),
    }
    path = tmp_path / "q.oinf"
    write_oinf(path, tensors)
    data = path.read_bytes()
    with ModelLoader.open(path) as m:
        infos = m.tensor_infos
        for name in ("a", "c", "e"):
            q = infos[name].quant
            head = struct.unpack_from("<IIIIQQQQ", data, infos[name].quant_offset)
            assert head[3] == 0 and head[5] == len(q.scales) and head[7] == len(q.zero_points)
        np.testing.assert_array_equal(m.tensor("b"), tensors["b"])
        np.testing.assert_array_equal(m.tensor("d"), tensors["d"])
        # data blobs first (sorted), then quant blobs (sorted): offsets strictly increase in that order
        order = [infos[n].data_offset for n in "abcd"] + [infos[n].quant_offset for n in "ace"]
        assert order == sorted(order) and order[0] == m.header.offset_data
        assert infos["e"].quant_offset + infos["e"].quant_nbytes == len(data)


def test_deterministic_layout_and_sorting(tmp_path):
    tensors = {"b": np.ones(3, np.float32), "B": np.ones(1, np.float32), "_x": np.ones(1), ".a": np.ones(1),
               "0": np.ones(1), "a": np.ones(1)}
    path1, path2 = tmp_path / "1.oinf", tmp_path / "2.oinf"
    write_oinf(path1, tensors, {"z": 1, "A": 2}, {"k2": 1, "k1": "v"})
    write_oinf(path2, dict(reversed(list(tensors.items()))), {"A": 2, "z": 1}, {"k1": "v", "k2": 1})
    assert path1.read_bytes() == path2.read_bytes()
    with ModelLoader.open(path1) as m:
        assert m.tensor_names == [".a", "0", "B", "_x", "a", "b"]      # code-point order
        assert list(m.sizevars) == ["A", "z"] and list(m.metadata) == ["k1", "k2"]
        h = m.header
        assert h.offset_sizevars == 72 and h.offset_data % 8 == 0
        # metadata blobs come first in the data section, then tensor data in name order
        assert m.metadata_info("k1").value_offset == h.offset_data
        offsets = [m.info(n).data_offset for n in m.tensor_names]
        assert offsets == sorted(offsets) and offsets[0] > m.metadata_info("k2").value_offset


def test_version_1_files(tmp_path):
    with reopen(tmp_path, {"w": TensorSpec(np.arange(4) - 2, "i2")}, {"N": 4}, version=1) as m:
        assert m.version == 1
        np.testing.assert_array_equal(m.tensor("w"), [-2, -1, 0, 1])
    with pytest.raises(oi.OinfError, match="version 1 files cannot hold quant"):
        encode_oinf({"w": TensorSpec([1], "i8", QuantParams.per_tensor(1.0))}, version=1)


def test_empty_model(tmp_path):
    with reopen(tmp_path) as m:
        assert m.file_size == 72 and m.tensor_names == [] and m.sizevars == {} and m.metadata == {}


def test_public_names_and_lookups(tmp_path):
    with reopen(tmp_path, {"w1": np.eye(2, dtype=np.float32)}, {"B": 4}, {"n_layers": 2}) as m:
        assert m.size_of("B") == 4 and m.meta("n_layers") == 2
        assert isinstance(m.sizevars, dict) and isinstance(m.metadata, dict) and m.tensor_names == ["w1"]
        assert m.path == tmp_path / "m.oinf" and not m.closed
        for call in (lambda: m.size_of("X"), lambda: m.meta("X"), lambda: m.tensor("X"), lambda: m.info("X")):
            with pytest.raises(oi.OinfError):
                call()
    assert m.closed
    with pytest.raises(oi.OinfError, match="closed"):
        m.tensor("w1")
    assert oi.ModelLoader is ModelLoader and oi.write_oinf is write_oinf


# -- values the writer refuses ----------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"tensors": {"bad name": np.ones(1)}}, "invalid tensor name"),
    ({"tensors": {"": np.ones(1)}}, "invalid tensor name"),
    ({"tensors": {"é": np.ones(1)}}, "invalid tensor name"),
    ({"sizevars": {"a/b": 1}}, "invalid sizevar name"),
    ({"metadata": {"k": "two words"}}, "invalid string value"),
    ({"sizevars": {"B": -1}}, "0..2"),
    ({"sizevars": {"B": True}}, "non-negative int"),
    ({"sizevars": {"B": 4.0}}, "non-negative int"),
    ({"sizevars": {"B": 2**64}}, "0..2"),
    ({"tensors": {"x": TensorSpec([8], "i4")}}, "out of the i4 range"),
    ({"tensors": {"x": TensorSpec([-1], "u2")}}, "out of the u2 range"),
    ({"tensors": {"x": TensorSpec([0], "t1")}}, "t1 holds only"),
    ({"tensors": {"x": TensorSpec([2], "t2")}}, "out of the t2 range"),
    ({"tensors": {"x": TensorSpec([300], "u8")}}, "out of the u8 range"),
    ({"tensors": {"x": TensorSpec([1.5], "i32")}}, "not all integral"),
    ({"tensors": {"x": TensorSpec([2], "bool")}}, "out of the bool range"),
    ({"tensors": {"x": TensorSpec([1], "bitset")}}, "not a tensor type"),
    ({"tensors": {"x": TensorSpec([1], "str")}}, "not a tensor type"),
    ({"tensors": {"x": TensorSpec([1], 15)}}, "not a tensor type"),
    ({"tensors": {"x": TensorSpec([1], "f12")}}, "unknown dtype"),
    ({"tensors": {"x": np.array(["a"])}}, "numbers or bools"),
    ({"tensors": {"x": np.ones(2, np.complex64)}}, "numbers or bools"),
    ({"tensors": {"x": UninitializedTensor("f32", (-1,))}}, "shape"),
    ({"tensors": {"x": TensorSpec(np.ones((2, 3)), "f32", QuantParams.per_channel(1, [1, 2]))}}, "count 2 != dim 1"),
    ({"tensors": {"x": TensorSpec(np.ones((2, 3)), "f32", QuantParams.per_channel(2, [1, 2]))}}, "out of range"),
    ({"tensors": {"x": TensorSpec(np.ones(2), "f32", name="y")}}, "differs from its key"),
    ({"tensors": {"x": TensorSpec(b"\x00\x02", "bool", shape=(2,), storage=True)}}, "must be 0 or 1"),
    ({"tensors": {"x": TensorSpec(b"\x00", "f32", shape=(1,), storage=True)}}, "stored in 4 bytes"),
    ({"metadata": {"k": 2**64}}, "does not fit in 64 bits"),
    ({"metadata": {"k": None}}, "cannot store a NoneType"),
    ({"metadata": {"k": ScalarValue(16, "u4")}}, "out of the u4 range"),
    ({"metadata": {"k": ScalarValue("x", "i8")}}, "numbers or bools"),
    ({"metadata": {"k": ScalarValue(1, "str")}}, "must be a str"),
    ({"metadata": {"k": [1, "a"]}}, "numbers or bools"),
    ({"version": 3}, "unsupported version"),
])
def test_writer_refuses_invalid_input(kwargs, match):
    with pytest.raises(oi.OinfError, match=match):
        encode_oinf(**kwargs)


def test_quant_params_validate_themselves():
    with pytest.raises(oi.OinfError, match="symmetric quantization cannot have zero points"):
        QuantParams("symmetric", "per_tensor", "per_tensor", 0, [1.0], 0, [3])
    with pytest.raises(oi.OinfError, match="per-tensor scale needs axis 0 and count 1"):
        QuantParams("symmetric", "per_tensor", "none", 0, [1.0, 2.0])
    with pytest.raises(oi.OinfError, match="scheme must be one of"):
        QuantParams("weird", "per_tensor", "none", 0, [1.0])
    with pytest.raises(oi.OinfError, match="int32"):
        QuantParams.per_tensor(1.0, 2**31)
    q = QuantParams.per_channel(0, [1, 2], [3, 4])
    assert q == QuantParams.per_channel(0, np.array([1.0, 2.0]), [3, 4]) and q != QuantParams.per_channel(0, [1, 2])
    assert not q.scales.flags.writeable


def test_bitset_value():
    b = Bitset.from_bools([True, False, True, True, False, False, False, False, True])
    assert (b.bit_count, b.bytes) == (9, b"\x0d\x01") and len(b) == 9 and b[0] and not b[1] and b[-1]
    np.testing.assert_array_equal(b.to_bools(), [1, 0, 1, 1, 0, 0, 0, 0, 1])
    with pytest.raises(oi.OinfError):
        Bitset(9, b"\x00")
