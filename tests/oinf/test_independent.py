"""Checks that do not trust our own writer or numerics: hand-assembled files and brute-force rounding."""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
import pytest
from oinf_testlib import assemble, quant_blob, sstr

from openinfer import numerics
from openinfer.oinf import Bitset, ModelLoader, QuantParams, encode_oinf


def open_bytes(tmp_path, data: bytes):
    path = tmp_path / "hand.oinf"
    path.write_bytes(data)
    return ModelLoader.open(path)


def test_hand_assembled_v1_file(tmp_path):
    data = assemble(version=1, sizevars=[("N", 3), ("batch", 2**40)], tensors=[
        ("w", 10, (2, 3), struct.pack("<6f", 1, 2, 3, 4, 5, 6), None),
        ("p", 18, (3,), bytes([0x8F, 0x07]), None),                 # i4: -1, -8, 7 (LSB first)
        ("t", 25, (10,), bytes([0b10110001, 0b10]), None),         # t1: bit 0 -> -1, 1 -> +1
        ("s", 9, (), struct.pack("<e", -1.5), None),
        ("u", 16, (4, 4), None, None),
    ])
    with open_bytes(tmp_path, data) as m:
        assert m.version == 1 and m.sizevars == {"N": 3, "batch": 2**40}
        np.testing.assert_array_equal(m.tensor("w"), [[1, 2, 3], [4, 5, 6]])
        np.testing.assert_array_equal(m.tensor("p"), [-1, -8, 7])
        np.testing.assert_array_equal(m.tensor("t"), [1, -1, -1, -1, 1, 1, -1, 1, -1, 1])
        assert m.tensor("s").dtype == np.float16 and m.tensor("s").item() == -1.5
        assert not m.info("u").has_data and m.info("u").dtype.name == "bf16"
        # tensor entries are not multiples of 8: later fields sit at offsets = 4 mod 8
        assert m.info("p").entry_offset % 8 == 4


def test_hand_assembled_v2_metadata_and_quant(tmp_path):
    q = quant_blob(2, 2, 2, 0, [0.5, 0.25], 0, [3, -4])
    meta = sorted([                                                 # sorted, as our writer sorts
        ("flag", 12, b"\x01"),
        ("name", 14, sstr("gelu-tanh")),
        ("eps", 11, struct.pack("<d", 1e-5)),
        ("h", 16, struct.pack("<H", 0x3FC0)),                     # bf16 1.5
        ("e", 17, bytes([0x7D])),                                  # f8 NaN
        ("tern", 24, bytes([0b11])),                               # t2 -1
        ("mask", 13, struct.pack("<II", 10, 2) + bytes([0xFF, 0x02]) + b"\x00" * 6),
        ("ids", 15, struct.pack("<IIQQ", 21, 2, 2, 3) + bytes([0x21, 0x43, 0x05]) + b"\x00" * 5),  # u4 2x3
    ])
    data = assemble(version=2, metadata=meta, tensors=[
        ("a", 12, (2, 2), bytes([1, 0, 0, 1]), None),
        ("x", 1, (2, 2), bytes([1, 2, 3, 0xFF]), q),
    ])
    with open_bytes(tmp_path, data) as m:
        md = m.metadata
        assert md["flag"] is True and md["name"] == "gelu-tanh" and md["eps"] == 1e-5 and md["h"] == 1.5
        assert np.isnan(md["e"]) and md["tern"] == -1
        assert md["mask"] == Bitset(10, bytes([0xFF, 0x02]))
        np.testing.assert_array_equal(md["ids"], [[1, 2, 3], [4, 5, 0]])
        assert m.metadata_info("ids").element_dtype.name == "u4"
        assert m.info("x").quant == QuantParams.per_channel(0, [0.5, 0.25], [3, -4])
        np.testing.assert_array_equal(m.tensor("x"), [[1, 2], [3, -1]])
        assert m.tensor("a").dtype == np.bool_ and m.tensor("a").tolist() == [[True, False], [False, True]]
        # our writer lays the same contents out exactly like this hand-made (spec-ordered) file
        assert encode_oinf(**m.to_write_args()) == data


def test_reader_accepts_unsorted_tables_and_a_non_canonical_layout(tmp_path):
    # entries in reverse order and blobs in reverse order: valid, if not what our writer makes
    data = assemble(version=2, sizevars=[("z", 1), ("a", 2)],
                    tensors=[("b", 10, (1,), struct.pack("<f", 2.0), None),
                             ("a", 10, (1,), struct.pack("<f", 1.0), None)])
    with open_bytes(tmp_path, data) as m:
        assert m.tensor_names == ["b", "a"] and list(m.sizevars) == ["z", "a"]
        assert m.tensor("a")[0] == 1.0 and m.tensor("b")[0] == 2.0


SCALE = 1100   # every finite f8 value and every float64 is an integer multiple of 2^-1100


def _scaled(x: float) -> int:
    """x * 2^SCALE as an exact integer."""
    n, d = float(x).as_integer_ratio()
    return n * ((1 << SCALE) // d)


def _f8_table():
    """Every finite E5M2 code with its exact value, computed from the bit fields by hand."""
    table = []
    for code in range(256):
        sign, exp, mant = code >> 7, (code >> 2) & 31, code & 3
        if exp == 31:
            continue
        if exp == 0:
            value = Fraction(mant, 4) * Fraction(1, 2**14)
        else:
            value = (1 + Fraction(mant, 4)) * Fraction(2) ** (exp - 15)
        table.append((code, -value if sign else value))
    return table


F8_SCALED = [(code, int(v * (1 << SCALE))) for code, v in _f8_table()]


def _f8_brute_force(x: float) -> int:
    """Nearest E5M2 code by exhaustive search over every finite code of x's sign; ties to the even
    code; at or past max + ulp/2 (61440) -> inf."""
    sign = 0x80 if np.signbit(x) else 0
    if np.isnan(x):
        return 0x7D
    if abs(x) >= 61440 or np.isinf(x):
        return sign | 0x7C
    sx = _scaled(x)
    return min((abs(sx - v), code & 1, code) for code, v in F8_SCALED if (code & 0x80) == sign)[2]


def test_f8_encoding_matches_brute_force_nearest_even():
    positive = sorted({float(v) for _, v in _f8_table() if v >= 0})
    # every code, every midpoint between neighbours (the ties), and points just off the midpoints
    mids = [(a + b) / 2 for a, b in zip(positive, positive[1:], strict=False)]
    probes = positive + mids + [np.nextafter(m, 0) for m in mids] + [np.nextafter(m, np.inf) for m in mids]
    probes += [61440.0, np.nextafter(61440.0, 0), 1e9, np.inf, np.nan, 2.0**-17, 2.0**-25, 1.875]
    rng = np.random.default_rng(0)
    probes += list(np.exp(rng.uniform(np.log(2.0**-20), np.log(7e4), 3000)))
    x = np.array(probes + [-p for p in probes], dtype=np.float64)
    x32 = x.astype(np.float32).astype(np.float64)      # and the f32 path, on f32-exact inputs
    for inputs in (x, x32, x32.astype(np.float32)):
        got = numerics.f8_bits(inputs)
        want = np.array([_f8_brute_force(v) for v in inputs.astype(np.float64)], dtype=np.uint8)
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, [(inputs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_f8_decode_is_exact_for_every_code():
    decoded = numerics.f8_decode(np.arange(256, dtype=np.uint8))
    for code, value in _f8_table():
        assert Fraction(float(decoded[code])) == value, hex(code)
    for code in (0x7C, 0xFC):
        assert np.isinf(decoded[code])
    assert np.isnan(decoded[[0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]]).all()


def test_bf16_encoding_matches_exact_nearest_even():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-30, 30, 5000),
                        (np.arange(1, 200) * 2.0**-8 + 1.0)])           # includes exact ties
    got = numerics.bf16_bits(x)
    for v, g in zip(x, got, strict=True):
        f32 = Fraction(float(v))
        bits32 = int(np.float64(v).astype(np.float32).view(np.uint32))
        lo_bits = bits32 >> 16
        # candidates: the two bf16 values around v (exact arithmetic on the candidates' values)
        cands = {c for c in (lo_bits - 1, lo_bits, lo_bits + 1) if 0 <= c < 0xFFFF}
        val = {c: Fraction(float(np.array([c << 16], np.uint32).view(np.float32)[0])) for c in cands}
        want = min(cands, key=lambda c: (abs(val[c] - f32), c & 1))
        assert g == want, (v, hex(g), hex(want))


@pytest.mark.parametrize("dt", ["i4", "i2", "i1", "u4", "u2", "u1", "t2", "t1"])
def test_packing_is_lsb_first(dt):
    from openinfer.dtypes import BY_NAME
    d = BY_NAME[dt]
    values = np.array([d.lo, d.hi] * 5)[:9] if dt != "t1" else np.array([-1, 1] * 5)[:9]
    packed = numerics.pack(values, d)
    bits = "".join(format(b, "08b")[::-1] for b in packed)     # LSB first, byte by byte
    for k, v in enumerate(values):
        field = int(bits[k * d.bits:(k + 1) * d.bits][::-1], 2)
        expect = (1 if v > 0 else 0) if dt == "t1" else v & ((1 << d.bits) - 1)
        assert field == expect
