"""The Cortex-M DSP kernels' requantizations (templates/mcu/qrequant.c.j2) compiled on the host
(with the undefined-behaviour sanitizer) against hal/include/oi_quant.h, on adversarial values:
the per-channel table's one multiply-add and shift against oi_q_requantize for every shift from
-31 to 8, multipliers at the extremes (INT32_MIN, -1, 0, 2^30, INT32_MAX) and random ones,
accumulators at the extremes and on and next to the ties of both roundings (srdhm's at 2^30 mod
2^31, rdbpot's at 2^(e-1) mod 2^e); and the integer emulation of round((double)acc * scale)
against the double product and oi_q_round_f64 on scales of every exponent of its range and
outside it (zero, subnormal, huge, infinite, NaN, negative), with accumulators whose exact
product lies just under a half-integer by at most half the double's spacing (the double rounds
it onto the tie: a result the exact product would not give), on it and next to it."""

from __future__ import annotations

import struct
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from openinfer.resources import hal_dir
from openinfer.targets.env import environment

HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "oi_quant.h"
{{ requant_table("t", 0, -128, 127) }}
{{ round_scaled("u", 0, -128, 127) }}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    char kind;
    long long a, b, c;
    while (fscanf(in, " %c %lld %lld %lld", &kind, &a, &b, &c) == 4) {
        if (kind == 'r') {
            const int32_t mult = (int32_t)b, shift = (int32_t)c;
            t_rq q;
            t_rq_table(&q, &mult, &shift, 1);
            fprintf(out, "%ld %ld\n", (long)t_requant((int32_t)a, &q), (long)oi_q_requantize((int32_t)a, mult, shift));
        } else {
            const uint64_t bits = (uint64_t)b << 32 | (uint64_t)c;
            double scale;
            memcpy(&scale, &bits, sizeof scale);
            fprintf(out, "%ld %ld\n", (long)u_scaled((int32_t)a, &scale),
                    (long)oi_q_round_f64((double)(int32_t)a * scale));
        }
    }
    fclose(in);
    fclose(out);
    return 0;
}
"""

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _requant_cases(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """(acc, mult, shift): each shift with extreme and random multipliers and accumulators, and
    accumulators on and around each rounding's ties."""
    cases = []
    extremes = [I32_MIN, I32_MIN + 1, -(2**30), -2, -1, 0, 1, 2, 2**30, I32_MAX - 1, I32_MAX]
    for shift in range(-31, 9):
        e = max(-shift, 0)
        mults = extremes + [int(v) for v in rng.integers(2**30, 2**31, 6)]
        mults += [int(v) for v in rng.integers(I32_MIN, 0, 2)]
        for m in mults:
            accs = extremes + [int(v) for v in rng.integers(I32_MIN, I32_MAX, 8)]
            accs += [int(v) for v in rng.integers(-3000, 3000, 8)]
            if m != 0:
                for _ in range(6):          # p = acc m next to (k + 1/2) 2^31, and h next to (j + 1/2) 2^e
                    span = 2**(31 - e) if e < 31 else 1
                    h = int(rng.integers(-span, span)) * 2**e + 2**max(e - 1, 0)
                    for target in (h * 2**31 - 2**30, (2 * int(rng.integers(-2**20, 2**20)) + 1) * 2**30):
                        base = round(Fraction(target, m))
                        accs += [base + d for d in (-2, -1, 0, 1, 2)]
            for acc in accs:
                if I32_MIN <= acc <= I32_MAX:
                    cases.append((acc, m, shift))
    return cases


def _bits(scale: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", scale))[0]


def _round_half_away(v: Fraction) -> int:
    whole = int(v)                               # toward zero
    return whole + (1 if v - whole >= Fraction(1, 2) else -1 if v - whole <= Fraction(-1, 2) else 0)


def _scaled_cases(rng: np.random.Generator) -> tuple[list[tuple[int, int]], int]:
    """(acc, scale's bits), and how many cases the double's rounding changes from the exact product's."""
    cases, double_rounded = [], 0
    # double rounding onto a tie: a odd, P = a M = q 2^S + 2^(S-1) - r, 0 < r <= 2^(d-1) (d the bits
    # P has past 53): P rounds up to the half-integer, round() then away from zero
    while double_rounded < 400:
        a = int(rng.integers(2**20, 2**31)) | 1
        s = int(rng.integers(53, 90))
        d = a.bit_length() + 52 - 53 + int(rng.integers(0, 2))
        r = int(rng.choice([1, 2, 2**max(d - 2, 0), 2**max(d - 1, 0) - 1, 2**max(d - 1, 0), 2**max(d - 1, 0) + 1]))
        low = 2**(s - 1) - r
        q = (-low * pow(2**s, -1, a)) % a
        p = q * 2**s + low
        mant = p // a
        if not 2**52 <= mant < 2**53:
            continue
        scale = mant * 2.0**-s
        for acc in (a, -a, a - 1, a + 1):
            cases.append((acc, _bits(scale)))
            exact = _round_half_away(acc * Fraction(scale))
            double = _round_half_away(Fraction(acc * scale))
            double_rounded += exact != double and abs(exact) < 2**31
    specials = [0.0, -0.0, 5e-324, 2.0**-1022, 2.0**-43, 2.0**-44, 2.0**-43 * (1 - 2.0**-53), 2.0**21 * (1 - 2.0**-53),
                2.0**21, 2.0**40, float("inf"), float("-inf"), float("nan"), 0.5, 1.5, 1.0, -0.5, 2.0**-31, 3.0,
                0.5 * (1 - 2.0**-53), 2.0**-32, 2.0**-32 * (1 - 2.0**-53), -2.0**-32]   # the short code's ends
    scales = specials + [float(m) * 2.0**e
                         for m, e in zip(rng.uniform(1, 2, 300), rng.integers(-44, 22, 300), strict=True)]
    scales += [-s for s in scales[len(specials):len(specials) + 40]]
    for scale in scales:
        accs = [I32_MIN, I32_MIN + 1, -1, 0, 1, I32_MAX] + [int(v) for v in rng.integers(I32_MIN, I32_MAX, 20)]
        accs += [int(v) for v in rng.integers(-70000, 70000, 20)]
        if scale != 0 and np.isfinite(scale):
            for _ in range(10):                  # next to (k + 1/2) / scale
                k = int(rng.integers(-2**31, 2**31)) if rng.random() < 0.5 else int(rng.integers(-300, 300))
                base = (Fraction(2 * k + 1, 2) / Fraction(scale)).__round__()
                accs += [base + dd for dd in (-1, 0, 1)]
        cases += [(acc, _bits(scale)) for acc in accs if I32_MIN <= acc <= I32_MAX]
    return cases, double_rounded


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qrequant")
    src = environment().from_string('{% from "mcu/qrequant.c.j2" import requant_table, round_scaled %}' + HARNESS)
    (tmp / "h.c").write_text(src.render())
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=undefined", f"-I{hal_dir() / 'include'}", str(tmp / "h.c"),
                    "-o", str(tmp / "h")], check=True)
    return tmp


def _run(tmp, lines: list[str]) -> list[tuple[int, int]]:
    (tmp / "in.txt").write_text("\n".join(lines) + "\n")
    subprocess.run([str(tmp / "h"), str(tmp / "in.txt"), str(tmp / "out.txt")], check=True)
    return [tuple(map(int, line.split())) for line in (tmp / "out.txt").read_text().splitlines()]


def test_requant_table_matches_oi_quant(harness):
    cases = _requant_cases(np.random.default_rng(1))
    got = _run(harness, [f"r {a} {m} {s}" for a, m, s in cases])
    assert len(got) == len(cases) > 40_000
    bad = [(c, g) for c, g in zip(cases, got, strict=True) if g[0] != g[1]]
    assert not bad, bad[:10]


def test_round_scaled_matches_double(harness):
    cases, double_rounded = _scaled_cases(np.random.default_rng(2))
    assert double_rounded >= 400
    got = _run(harness, [f"s {a} {b >> 32} {b & 0xFFFFFFFF}" for a, b in cases])
    assert len(got) == len(cases) > 10_000
    bad = [(a, struct.unpack("<d", struct.pack("<Q", b))[0], g) for (a, b), g in zip(cases, got, strict=True)
           if g[0] != g[1]]
    assert not bad, bad[:10]
