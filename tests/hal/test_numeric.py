"""hal/include/oi_numeric.h rounds exactly like openinfer/numerics.py (and NumPy's f16): the
compiled program and the reference store narrow floats bit-identically."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from openinfer import numerics
from openinfer.resources import hal_dir

HARNESS = r"""
#include "oi_numeric.h"
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    uint32_t x;
    while (fread(&x, 4, 1, in) == 1) {
        float f = oi_bits_f32(x);
        uint16_t h = oi_f32_to_f16(f), b = oi_f32_to_bf16(f);
        uint8_t e = oi_f32_to_f8(f);
        float back[3] = {oi_f16_to_f32(h), oi_bf16_to_f32(b), oi_f8_to_f32(e)};
        fwrite(&h, 2, 1, out); fwrite(&b, 2, 1, out); fwrite(&e, 1, 1, out); fwrite(back, 4, 3, out);
    }
    fclose(in); fclose(out);
    return 0;
}
"""

PACKED = r"""
#include "oi_numeric.h"
#include <stdio.h>
int main(void) {
    uint8_t buf[16] = {0};
    static const unsigned bits[3] = {1, 2, 4};
    for (int b = 0; b < 3; ++b) {
        int64_t lo = -(1 << (bits[b] - 1)), hi = (1 << bits[b]) - 1;
        for (int64_t k = 0; k < 20; ++k) oi_packed_set(buf, k, bits[b], lo + (k * 7) % (hi - lo + 1));
        for (int64_t k = 0; k < 20; ++k) printf("%d %u ", oi_packed_get_s(buf, k, bits[b]), oi_packed_get_u(buf, k, bits[b]));
        for (int i = 0; i < 16; ++i) printf("%02x", buf[i]);
        printf("\n");
    }
    return 0;
}
"""


def _compile(tmp_path, source: str, name: str):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    f"-I{hal_dir() / 'include'}", str(src), "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("numeric")
    exe = _compile(tmp, HARNESS, "conv")
    rng = np.random.default_rng(0)
    bits = np.concatenate([
        rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32),
        (rng.standard_normal(200_000) * np.exp2(rng.integers(-30, 20, 200_000))).astype(np.float32).view(np.uint32),
        # ties and boundaries: half-way points of f16 / f8 subnormals and normals, overflow edges
        np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x33000000, 0x33000001, 0x37000000,
                  0x37000001, 0x38800000, 0x477FF000, 0x477FEFFF, 0x47700000, 0x476FFFFF, 0x3FF00000,
                  0x3F700000], np.uint32),
    ])
    (tmp / "in.bin").write_bytes(bits.tobytes())
    subprocess.run([str(exe), str(tmp / "in.bin"), str(tmp / "out.bin")], check=True)
    rec = np.frombuffer((tmp / "out.bin").read_bytes(),
                        dtype=np.dtype([("h", "<u2"), ("b", "<u2"), ("e", "u1"), ("back", "<f4", (3,))]))
    return bits.view(np.float32), rec


def test_f16_matches_numpy(conversions):
    f, rec = conversions
    nan = np.isnan(f)
    with np.errstate(over="ignore"):   # values past 65504 round to inf, as they should
        want = f[~nan].astype(np.float16).view(np.uint16)
    assert np.array_equal(rec["h"][~nan], want)
    assert np.isnan(rec["h"][nan].view(np.float16)).all()


def test_bf16_and_f8_match_the_python_numerics(conversions):
    f, rec = conversions
    assert np.array_equal(rec["b"], numerics.bf16_bits(f))
    assert np.array_equal(rec["e"], numerics.f8_bits(f))


def test_decoding_matches(conversions):
    f, rec = conversions
    want = np.stack([rec["h"].view(np.float16).astype(np.float32), numerics.bf16_decode(rec["b"]),
                     numerics.f8_decode(rec["e"])], axis=1)
    same = (rec["back"].view(np.uint32) == want.view(np.uint32)) | (np.isnan(rec["back"]) & np.isnan(want))
    assert same.all()


def test_packed_get_set_roundtrip_matches_python(tmp_path):
    from openinfer.dtypes import BY_NAME

    out = subprocess.run([str(_compile(tmp_path, PACKED, "packed"))], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    for line, bits in zip(out, (1, 2, 4), strict=True):
        fields = line.split()
        raw = bytes.fromhex(fields[-1])
        signed = [int(v) for v in fields[0:-1:2]]
        dt = BY_NAME[{1: "i1", 2: "i2", 4: "i4"}[bits]]
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
        wanted = [numerics.wrap_int(np.int64(lo + (k * 7) % (hi - lo + 1)), dt) for k in range(20)]
        assert signed == [int(w) for w in wanted]
        assert np.array_equal(numerics.unpack(raw, dt, 20), np.array(wanted, np.int8))
