"""The NEON wing's fixed-point steps in lanes against hal/include/oi_quant.h on adversarial values,
compiled for AArch64 (the undefined-behaviour sanitizer on) and run under qemu-aarch64, each
harness rendering the SAME macros the kernels do.

The requantization of 4 channels in lanes (templates/arm/qdot.c.j2 `requant_vec`,
which the int8 kernels templates/arm/qconv.c.j2 use) against hal/include/oi_quant.h on
adversarial values, compiled for AArch64 (the undefined-behaviour sanitizer on) and run under
qemu-aarch64: the harness renders the SAME macros the kernels do (with the scalar table of
templates/mcu/qrequant.c.j2 they build on), reads groups of 4 (acc, multiplier, shift), builds
the 4 channels' scalar and lane tables as a kernel call does, and writes per lane whether the
lanes take the group (`_vq_table`: every shift a right shift of 1 to 31) and, where they do, the
lanes' result next to oi_q_requantize's: once with y_zero 0 and no clamp (the bare
requantization) and once with a y_zero and int8 bounds (the kernels' output step).

The values are tests/synth/test_mcu_qrequant.py's (accumulators at INT32_MIN / INT32_MAX and next
to them, multipliers INT32_MIN, -1, 0, 1, 2^30, INT32_MAX and random ones of both signs, every
accumulator on and next to each rounding's ties: srdhm's at 2^30 mod 2^31, rdbpot's at 2^(e-1)
mod 2^e) for every shift the lanes accept (-31 to -1), plus random ones, shuffled so that each
group mixes shifts and multipliers; and groups with one shift the lanes do not take (0 to 8,
-32), which must go to the scalar table.

The rounding multiply of qadd / qsub (templates/arm/qfixed.c.j2 `rounding_mul_fn`: SQRDMULH, the
SQADD fix-up, SRSHR) against oi_q_rdbpot(oi_q_srdhm(x, m), e) for each (m, e) of the same values
with shifts -31 to 0 (e = 0 to 31), one rendered function each, all of their x (the extremes,
INT32_MIN x INT32_MIN, the ties of both roundings)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from test_mcu_qrequant import I32_MAX, I32_MIN, _requant_cases

from openinfer.resources import hal_dir
from openinfer.targets.env import environment

CC, QEMU = "aarch64-linux-gnu-gcc", "qemu-aarch64"

pytestmark = pytest.mark.skipif(shutil.which(QEMU) is None or shutil.which(CC) is None,
                                reason=f"needs {QEMU} and {CC}")

#: the output step's y_zero and bounds in the second rendering (the first: 0, no clamp)
Y_ZERO, ACT_MIN, ACT_MAX = -7, -128, 127

HARNESS = r"""
#include <arm_neon.h>
#include <stdint.h>
#include <stdio.h>
#include "oi_quant.h"
{{ requant_table("t", 0, -2147483648, 2147483647) }}
{{ requant_vec("t", 0, -2147483648, 2147483647) }}
{{ requant_table("u", y_zero, act_min, act_max) }}
{{ requant_vec("u", y_zero, act_min, act_max) }}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    int32_t acc[4], mult[4], shift[4], vm[4], vn[4], got_t[4], got_u[4];
    int64_t vc[4];
    t_rq rq_t[4];
    u_rq rq_u[4];
    for (;;) {
        long long a, b, c;
        int n = 0;
        while (n < 4 && fscanf(in, " %lld %lld %lld", &a, &b, &c) == 3) {
            acc[n] = (int32_t)a, mult[n] = (int32_t)b, shift[n] = (int32_t)c;
            ++n;
        }
        if (n == 0) break;
        if (n != 4) return 3;
        t_rq_table(rq_t, mult, shift, 4);
        const int lanes = t_vq_table(rq_t, vc, vm, vn, 4);
        if (lanes) {
            vst1q_s32(got_t, t_vrequant(vld1q_s32(acc), t_vq_load(vc, vm, vn)));
            u_rq_table(rq_u, mult, shift, 4);
            if (!u_vq_table(rq_u, vc, vm, vn, 4)) return 4;
            vst1q_s32(got_u, u_vrequant(vld1q_s32(acc), u_vq_load(vc, vm, vn)));
        }
        for (int i = 0; i < 4; ++i) {
            if (!lanes || shift[i] < -31 || shift[i] > -1) {      /* no reference to compare with */
                fprintf(out, "%d 0 0 0 0\n", lanes);
                continue;
            }
            const int32_t ref = oi_q_requantize(acc[i], mult[i], shift[i]);
            fprintf(out, "1 %ld %ld %ld %ld\n", (long)got_t[i], (long)ref, (long)got_u[i],
                    (long)oi_q_clamp_i8(oi_q_add({{ y_zero }}, ref), {{ act_min }}, {{ act_max }}));
        }
    }
    fclose(in);
    fclose(out);
    return 0;
}
"""


def _lane_cases(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """(acc, mult, shift) with shifts the lanes take, shuffled, a multiple of 4 long."""
    cases = [c for c in _requant_cases(rng) if -31 <= c[2] <= -1]
    count = 8000 + (-len(cases)) % 4
    cases += [(int(a), int(m), int(s)) for a, m, s in zip(rng.integers(I32_MIN, I32_MAX, count, endpoint=True),
                                                          rng.integers(I32_MIN, I32_MAX, count, endpoint=True),
                                                          rng.integers(-31, 0, count), strict=True)]
    return [cases[i] for i in rng.permutation(len(cases))]


def _scalar_groups(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """Groups of 4 with one shift the lanes do not take (0 to 8: a left shift or none; -32: e > 31),
    in each lane position."""
    cases = []
    for other in [*range(0, 9), -32]:
        for at in range(4):
            for i in range(4):
                shift = other if i == at else int(rng.integers(-31, 0))
                cases.append((int(rng.integers(-2**20, 2**20)), int(rng.integers(2**30, 2**31)), shift))
    return cases


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("neon_qrequant")
    src = environment().from_string('{% from "mcu/qrequant.c.j2" import requant_table %}'
                                    '{% from "arm/qdot.c.j2" import requant_vec %}' + HARNESS)
    (tmp / "h.c").write_text(src.render(y_zero=Y_ZERO, act_min=ACT_MIN, act_max=ACT_MAX))
    subprocess.run([CC, "-std=c11", "-O2", "-march=armv8-a", "-Wall", "-Wextra", "-Werror", "-static",
                    "-fsanitize=undefined", "-fno-sanitize-recover=undefined", f"-I{hal_dir() / 'include'}",
                    str(tmp / "h.c"), "-o", str(tmp / "h")], check=True)
    return tmp


def _run(tmp, cases: list[tuple[int, int, int]]) -> list[tuple[int, ...]]:
    (tmp / "in.txt").write_text("".join(f"{a} {m} {s}\n" for a, m, s in cases))
    subprocess.run([QEMU, str(tmp / "h"), str(tmp / "in.txt"), str(tmp / "out.txt")], check=True)
    return [tuple(map(int, line.split())) for line in (tmp / "out.txt").read_text().splitlines()]


def test_lane_requantization_is_oi_quant(harness):
    cases = _lane_cases(np.random.default_rng(4))
    got = _run(harness, cases)
    assert len(got) == len(cases) > 40_000
    assert sum(1 for a, m, _ in cases if a in (I32_MIN, I32_MAX) and m in (2**30, I32_MAX, I32_MIN)) > 100
    not_in_lanes = [c for c, g in zip(cases, got, strict=True) if g[0] != 1]
    assert not not_in_lanes, not_in_lanes[:10]
    bad = [(c, g) for c, g in zip(cases, got, strict=True) if g[1] != g[2] or g[3] != g[4]]
    assert not bad, bad[:10]


def test_other_shifts_take_the_scalar_table(harness):
    cases = _scalar_groups(np.random.default_rng(5))
    got = _run(harness, cases)
    assert len(got) == len(cases)
    in_lanes = [c for c, g in zip(cases, got, strict=True) if g[0] != 0]
    assert not in_lanes, in_lanes[:10]


FIXED_HARNESS = r"""
#include <arm_neon.h>
#include <stdint.h>
#include <stdio.h>
#include "oi_quant.h"
{% for m, e in pairs %}
{{ rounding_mul_fn("f%d" % loop.index0, m, e) }}
{% endfor %}
static int32x4_t (*const fns[])(int32x4_t) = {
{% for _ in pairs %}
    f{{ loop.index0 }},
{% endfor %}
};
static const int32_t mults[] = {
{% for m, _ in pairs %}
    {{ m }},
{% endfor %}
};
static const int es[] = {
{% for _, e in pairs %}
    {{ e }},
{% endfor %}
};
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    long long k, x[4];
    while (fscanf(in, " %lld %lld %lld %lld %lld", &k, &x[0], &x[1], &x[2], &x[3]) == 5) {
        const int32_t xs[4] = {(int32_t)x[0], (int32_t)x[1], (int32_t)x[2], (int32_t)x[3]};
        int32_t got[4];
        vst1q_s32(got, fns[k](vld1q_s32(xs)));
        for (int i = 0; i < 4; ++i)
            fprintf(out, "%ld %ld\n", (long)got[i], (long)oi_q_rdbpot(oi_q_srdhm(xs[i], mults[k]), es[k]));
    }
    fclose(in);
    fclose(out);
    return 0;
}
"""


def test_rounding_multiply_is_oi_quant(tmp_path):
    by_pair: dict[tuple[int, int], list[int]] = {}
    for acc, m, shift in _requant_cases(np.random.default_rng(6)):
        if -31 <= shift <= 0:
            by_pair.setdefault((m, -shift), []).append(acc)
    pairs = sorted(by_pair)
    assert {e for _, e in pairs} == set(range(32))
    src = environment().from_string('{% from "arm/qfixed.c.j2" import rounding_mul_fn %}' + FIXED_HARNESS)
    (tmp_path / "h.c").write_text(src.render(pairs=pairs))
    subprocess.run([CC, "-std=c11", "-O2", "-march=armv8-a", "-Wall", "-Wextra", "-Werror", "-static",
                    "-fsanitize=undefined", "-fno-sanitize-recover=undefined", f"-I{hal_dir() / 'include'}",
                    str(tmp_path / "h.c"), "-o", str(tmp_path / "h")], check=True)
    cases, lines = [], []
    for k, pair in enumerate(pairs):
        xs = by_pair[pair]
        xs += xs[:(-len(xs)) % 4]
        for i in range(0, len(xs), 4):
            lines.append(f"{k} {' '.join(map(str, xs[i:i + 4]))}\n")
            cases += [(x, *pair) for x in xs[i:i + 4]]
    (tmp_path / "in.txt").write_text("".join(lines))
    subprocess.run([QEMU, str(tmp_path / "h"), str(tmp_path / "in.txt"), str(tmp_path / "out.txt")], check=True)
    got = [tuple(map(int, line.split())) for line in (tmp_path / "out.txt").read_text().splitlines()]
    assert len(got) == len(cases) > 30_000
    assert any(x == m == I32_MIN for x, m, _ in cases)
    bad = [(c, g) for c, g in zip(cases, got, strict=True) if g[0] != g[1]]
    assert not bad, bad[:10]
