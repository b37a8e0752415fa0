"""Authoring from dataclasses (digest §1.12), .npz and .safetensors."""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
import pytest

from openinfer import OinfError
from openinfer.oinf import (
    Bitset,
    ModelLoader,
    ScalarValue,
    SizeVar,
    TensorSpec,
    UninitializedTensor,
    dataclass_contents,
    dataclass_to_oinf,
    encode_oinf,
    load_safetensors,
    pack_oinf,
    write_dataclass,
)


@dataclass
class Mlp:
    B: int = 4
    D: SizeVar = SizeVar(16)
    H: Annotated[int, "sizevar"] = 32
    w1: np.ndarray = field(default_factory=lambda: np.ones((16, 32), np.float32))
    wq: TensorSpec = field(default_factory=lambda: TensorSpec(np.zeros((2, 2)), "i4", name="attn.wq.0"))
    cache: UninitializedTensor = field(default_factory=lambda: UninitializedTensor("f16", (4, 16)))
    packed: Annotated[list, {"dtype": "u2"}] = field(default_factory=lambda: [0, 1, 2, 3])
    declared: Annotated[None, {"dtype": "bf16", "shape": (2,)}] = None
    forced_tensor: Annotated[list, "tensor"] = field(default_factory=lambda: [1.0, 2.0])
    n_layers: Annotated[int, "metadata"] = 2
    eps: float = 1e-5
    name: str = "mlp"
    use_bias: bool = True
    mask: Bitset = field(default_factory=lambda: Bitset.from_bools([1, 0, 1]))
    ids: list = field(default_factory=lambda: [1, 2, 3])
    scale: Annotated[float, {"dtype": "f16"}] = 0.5
    width: ScalarValue = field(default_factory=lambda: ScalarValue(7, "i32"))
    metadata: dict = field(default_factory=lambda: {"extra": "yes"})
    tensors: dict = field(default_factory=lambda: {"attn.wk.0": np.eye(2, dtype=np.float32)})


def test_dataclass_classification():
    c = dataclass_contents(Mlp())
    assert c["sizevars"] == {"B": 4, "D": SizeVar(16), "H": 32}
    assert set(c["tensors"]) == {"w1", "attn.wq.0", "cache", "packed", "declared", "forced_tensor", "attn.wk.0"}
    assert set(c["metadata"]) == {"n_layers", "eps", "name", "use_bias", "mask", "ids", "scale", "width", "extra"}


def test_dataclass_to_oinf_bytes_and_file(tmp_path):
    data = dataclass_to_oinf(Mlp())
    write_dataclass(tmp_path / "m.oinf", Mlp())
    assert (tmp_path / "m.oinf").read_bytes() == data
    with ModelLoader.open(tmp_path / "m.oinf") as m:
        assert m.sizevars == {"B": 4, "D": 16, "H": 32}
        assert m.info("packed").dtype.name == "u2" and m.info("declared").dtype.name == "bf16"
        assert not m.info("declared").has_data and not m.info("cache").has_data
        assert m.info("attn.wq.0").dtype.name == "i4" and m.info("forced_tensor").dtype.name == "f64"
        types = {k: m.metadata_info(k).type.name for k in m.metadata}
        assert types == {"eps": "f32", "extra": "str", "ids": "ndarray", "mask": "bitset", "n_layers": "u8",
                         "name": "str", "scale": "f16", "use_bias": "bool", "width": "i32"}
    assert dataclass_to_oinf(Mlp(), version=1)[5] == 1


def test_undeclared_attributes_are_never_dropped():
    @dataclass
    class Model:
        w: np.ndarray = field(default_factory=lambda: np.ones(2, np.float32))

    m = Model()
    m.metadata = {"note": "kept"}          # the original's pydantic rebuild silently dropped this
    m.sizevars = {"B": 2}
    c = dataclass_contents(m)
    assert c["metadata"] == {"note": "kept"} and c["sizevars"] == {"B": 2}
    m.other = 3
    with pytest.raises(OinfError, match="attribute 'other' is set .* not a declared field"):
        dataclass_contents(m)


def test_dataclass_errors():
    @dataclass
    class Bad:
        B: int = -1

    with pytest.raises(OinfError, match="0..2"):
        dataclass_to_oinf(Bad())

    @dataclass
    class Flag:
        B: int = True

    with pytest.raises(OinfError, match="sizevar 'B'"):
        dataclass_to_oinf(Flag())

    @dataclass
    class Nothing:
        x: object = None

    with pytest.raises(OinfError, match="is None"):
        dataclass_to_oinf(Nothing())

    @dataclass
    class Twice:
        a: np.ndarray = field(default_factory=lambda: np.ones(1))
        tensors: dict = field(default_factory=lambda: {"a": np.ones(1)})

    with pytest.raises(OinfError, match="'a' is given twice"):
        dataclass_to_oinf(Twice())

    with pytest.raises(OinfError, match="dataclass instance"):
        dataclass_to_oinf(Mlp)


# -- .npz and .safetensors --------------------------------------------------------------------
def test_pack_from_npz(tmp_path):
    np.savez(tmp_path / "w.npz", a=np.arange(4, dtype=np.int16), b=np.ones((2, 2), np.float64))
    pack_oinf(tmp_path / "m.oinf", tmp_path / "w.npz", sizevars={"N": 4}, metadata={"k": 1})
    with ModelLoader.open(tmp_path / "m.oinf") as m:
        assert m.tensor("a").dtype == np.int16 and m.tensor("b").dtype == np.float64 and m.size_of("N") == 4


def test_npz_errors(tmp_path):
    np.savez(tmp_path / "o.npz", o=np.array([object()], dtype=object))
    with pytest.raises(OinfError, match="cannot read .npz"):
        pack_oinf(tmp_path / "m.oinf", tmp_path / "o.npz")
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(OinfError, match="cannot read .npz"):
        pack_oinf(tmp_path / "m.oinf", tmp_path / "x.npz")
    np.savez(tmp_path / "n.npz", **{"bad name": np.ones(1)})
    with pytest.raises(OinfError, match="invalid tensor name"):
        pack_oinf(tmp_path / "m.oinf", tmp_path / "n.npz")


def write_safetensors(path, tensors: dict, metadata=None) -> None:
    """A .safetensors file by hand: (dtype, shape, raw bytes) per tensor."""
    header, blob = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob)


def test_safetensors_from_the_library(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, -2], np.int64),
              "h": np.ones(3, np.float16), "m": np.array([True, False])}
    st.save_file(arrays, str(tmp_path / "w.safetensors"), metadata={"format": "pt"})
    pack_oinf(tmp_path / "m.oinf", tmp_path / "w.safetensors")
    with ModelLoader.open(tmp_path / "m.oinf") as m:
        for name, a in arrays.items():
            assert m.tensor(name).dtype == a.dtype
            np.testing.assert_array_equal(m.tensor(name), a)
        assert m.meta("format") == "pt"


def test_safetensors_bf16_and_f8_are_bit_exact(tmp_path):
    bf16 = np.array([0x3F80, 0x7FC1, 0xC049, 0x0001], np.uint16)      # 1.0, a NaN payload, -3.14, tiny
    f8 = np.array([0x3C, 0x7E, 0x01, 0xFC], np.uint8)
    write_safetensors(tmp_path / "w.safetensors",
                      {"b": ("BF16", (2, 2), bf16.tobytes()), "e": ("F8_E5M2", (4,), f8.tobytes())}, {"arch": "x-1"})
    tensors, meta = load_safetensors(tmp_path / "w.safetensors")
    assert meta == {"arch": "x-1"}
    pack_oinf(tmp_path / "m.oinf", tmp_path / "w.safetensors", source_metadata=False)
    with ModelLoader.open(tmp_path / "m.oinf") as m:
        assert m.metadata == {}
        np.testing.assert_array_equal(m.tensor("b", raw=True).reshape(-1), bf16)
        np.testing.assert_array_equal(m.tensor("e", raw=True), f8)
        assert m.tensor("b")[0, 0] == 1.0 and np.isnan(m.tensor("e")[1])
    pack_oinf(tmp_path / "m2.oinf", tmp_path / "w.safetensors", dtypes={"b": "f32", "e": "f16"},
              source_metadata=False)
    with ModelLoader.open(tmp_path / "m2.oinf") as m:
        assert m.info("b").dtype.name == "f32" and m.tensor("b")[1, 0] == np.float32(-3.140625)
        assert m.info("e").dtype.name == "f16" and np.isnan(m.tensor("e")[1])


@pytest.mark.parametrize("content, match", [
    (b"\x01", "too short"),
    (struct.pack("<Q", 2**40) + b"{}", "runs past the end"),
    (struct.pack("<Q", 3) + b"{{{", "not JSON"),
    (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
])
def test_bad_safetensors_headers(tmp_path, content, match):
    (tmp_path / "b.safetensors").write_bytes(content)
    with pytest.raises(OinfError, match=match):
        load_safetensors(tmp_path / "b.safetensors")


@pytest.mark.parametrize("entry, match", [
    (("F8_E4M3", (1,), b"\x00"), "supported"),
    (("F32", (2,), b"\x00" * 4), "do not hold"),
    (("F32", (-1,), b""), "invalid shape"),
])
def test_bad_safetensors_tensors(tmp_path, entry, match):
    write_safetensors(tmp_path / "b.safetensors", {"t": entry})
    with pytest.raises(OinfError, match=match):
        load_safetensors(tmp_path / "b.safetensors")


def test_safetensors_offsets_outside_data(tmp_path):
    path = tmp_path / "b.safetensors"
    text = json.dumps({"t": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\x00\x00")
    with pytest.raises(OinfError, match="outside the data section"):
        load_safetensors(path)


def test_encode_accepts_every_input_kind():
    data = encode_oinf({"a": [1, 2], "b": 3.5, "c": TensorSpec.from_storage(b"\x01\x02", "u8", (2,))})
    assert data[:5] == b"OINF\x00"
    assert dataclasses.is_dataclass(TensorSpec)
