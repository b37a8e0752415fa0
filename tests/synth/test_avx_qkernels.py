"""The x86 wing's int8 kernels (openinfer/targets/x86/quantized.py, templates/x86/qconv.c.j2,
qlinear.c.j2) built and run natively, bit-exact against the reference: ONE program per target
with a qconv2d or qlinear of its own per case, over two steps of random int8 inputs.

qconv2d: the Cortex-M kernel test's cases (test_mcu_qconv.py: channels 1, 3, 4, 5, 7, 8, 9, 17, 64;
1 x 1, 3 x 3, 10 x 4, 5 x 3 kernels; strides 1 and 2; VALID, SAME and uneven paddings, outputs of
only padding; dilation; a batch of 2; depthwise multiplier 1 and 2, grouped; x_zero -128, 0, 83;
bias or not; activation bounds) and channels C and O at 7, 8, 9, 15, 16, 17, 31, 32, 33 (and 63,
64, 65): every vector width of the kernels +-1 (8 / 16 int32 lanes of the depthwise kernel, 16 /
32 int16 lanes of a window's vector, the 4 output channels of a block) and odd position counts
(the 2 / 4 positions of a block). qlinear: the Cortex-M test's cases and K, N around the 16 / 32
int16 lanes and the 4 rows of a block, w_zero folded or not. Layers large enough to split over
the pool (PARALLEL_CONV_CASES, PARALLEL_LINEAR_CASES) run at 1, 2 and 3 threads.

The AVX-512 programs run only where the CPU has AVX-512F/BW/VL/DQ (and VNNI for the descriptor
that lists it; skipped elsewhere); every program is also built with -Werror on any x86-64 host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from compilers import Toolchain  # noqa: E402
from qkernel_programs import int8_program  # noqa: E402
from sanitized import SANITIZE, run_sanitized  # noqa: E402

import openinfer as oi  # noqa: E402
from openinfer.api import bind_inputs  # noqa: E402
from openinfer.build import build  # noqa: E402
from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.sim import Simulator  # noqa: E402
from openinfer.synthesizer import Synthesizer  # noqa: E402
from openinfer.testing import assert_matches_reference, skip_unless_runs_here  # noqa: E402
from openinfer.writetree import write_tree  # noqa: E402

#: (x [N, H, W, C], w [O, KH, KW, C / groups], stride, padding [top, left, bottom, right], dilation,
#: groups, x_zero, bias?, (act_min, act_max))
CONV_CASES = [
    ((1, 5, 4, 1), (3, 1, 1, 1), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),       # pointwise C = 1, K = 1
    ((1, 6, 5, 3), (5, 1, 1, 3), 1, [0, 0, 0, 0], 1, 1, 0, False, (-128, 127)),
    ((1, 3, 7, 4), (4, 1, 1, 4), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),         # odd positions
    ((1, 4, 4, 5), (7, 1, 1, 5), 1, [0, 0, 0, 0], 1, 1, -128, True, (-100, 90)),
    ((1, 5, 5, 7), (8, 1, 1, 7), 2, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),          # stride 2
    ((1, 3, 5, 8), (9, 1, 1, 8), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),
    ((1, 4, 3, 9), (17, 1, 1, 9), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 3, 17), (64, 1, 1, 17), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 5, 5, 64), (64, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),    # KWS's pointwise
    ((2, 3, 3, 64), (3, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),       # a batch
    ((1, 3, 5, 15), (7, 1, 1, 15), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),        # C, O around the widths
    ((1, 3, 3, 16), (15, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 2, 5, 31), (16, 1, 1, 31), 1, [0, 0, 0, 0], 1, 1, -128, False, (-128, 127)),
    ((1, 3, 3, 32), (31, 1, 1, 32), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 1, 7, 33), (32, 1, 1, 33), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 3, 3, 63), (33, 1, 1, 63), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((1, 2, 3, 65), (8, 1, 1, 65), 1, [0, 0, 0, 0], 1, 1, 0, True, (-128, 127)),
    ((1, 3, 2, 16), (17, 1, 1, 16), 1, [0, 0, 0, 0], 1, 1, 83, True, (-128, 127)),
    ((1, 7, 6, 3), (8, 3, 3, 3), 2, [0, 0, 1, 1], 1, 1, -128, True, (-128, 127)),       # VWW's first: SAME, stride 2
    ((1, 6, 6, 4), (5, 3, 3, 4), 1, [1, 1, 1, 1], 1, 1, 0, True, (-128, 127)),          # SAME
    ((1, 5, 7, 5), (4, 3, 3, 5), 1, [0, 0, 0, 0], 1, 1, 83, False, (-128, 127)),        # VALID
    ((1, 6, 5, 8), (9, 3, 3, 8), 2, [1, 1, 1, 1], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 5, 16), (16, 3, 3, 16), 1, [1, 1, 1, 1], 2, 1, 0, True, (-128, 127)),       # dilation 2
    ((1, 4, 5, 7), (3, 3, 3, 7), 1, [3, 2, 4, 3], 1, 1, 83, True, (-128, 127)),         # outputs of only padding
    ((1, 12, 6, 1), (64, 10, 4, 1), 2, [4, 1, 5, 1], 1, 1, 83, True, (-128, 127)),      # KWS's first (K = 40)
    ((1, 9, 7, 1), (5, 10, 4, 1), 1, [4, 1, 5, 2], 1, 1, -128, False, (-128, 127)),
    ((1, 6, 5, 9), (3, 5, 3, 9), 1, [2, 1, 2, 1], 1, 1, 0, True, (0, 127)),             # K = 135
    ((1, 6, 6, 17), (33, 3, 3, 17), 2, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127)),      # ResNet-like, odd widths
    ((1, 5, 4, 32), (32, 3, 3, 32), 1, [1, 1, 1, 1], 1, 1, -128, True, (-128, 127)),
    ((1, 5, 5, 1), (1, 3, 3, 1), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127)),         # depthwise C = 1: groups 1
    ((1, 6, 5, 3), (3, 3, 3, 1), 1, [1, 1, 1, 1], 1, 3, -128, True, (-128, 127)),
    ((1, 5, 6, 4), (4, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 0, False, (-128, 127)),
    ((1, 7, 7, 5), (5, 3, 3, 1), 2, [0, 0, 1, 1], 1, 5, 83, True, (-128, 127)),
    ((1, 5, 5, 8), (8, 3, 3, 1), 1, [0, 0, 0, 0], 1, 8, -128, True, (-128, 127)),       # VALID
    ((1, 6, 6, 9), (9, 3, 3, 1), 2, [1, 1, 1, 1], 1, 9, 0, True, (-20, 127)),
    ((1, 5, 4, 17), (17, 3, 3, 1), 1, [2, 2, 2, 2], 2, 17, 83, True, (-128, 127)),      # dilation 2
    ((1, 5, 5, 64), (64, 3, 3, 1), 1, [1, 1, 1, 1], 1, 64, -128, True, (-128, 127)),    # KWS's depthwise
    ((2, 4, 3, 7), (7, 3, 3, 1), 1, [3, 3, 3, 3], 1, 7, 0, True, (-128, 127)),          # padding past the taps
    ((1, 4, 5, 15), (15, 3, 3, 1), 1, [1, 1, 1, 1], 1, 15, 83, False, (-128, 127)),     # C around the lanes
    ((1, 5, 4, 16), (16, 3, 3, 1), 2, [1, 1, 1, 1], 1, 16, -128, True, (-128, 127)),
    ((1, 4, 4, 31), (31, 3, 3, 1), 1, [1, 1, 1, 1], 1, 31, 0, True, (-128, 127)),
    ((1, 3, 5, 32), (32, 3, 3, 1), 1, [1, 1, 1, 1], 1, 32, 83, True, (-128, 127)),
    ((1, 4, 3, 33), (33, 3, 3, 1), 1, [0, 1, 2, 1], 1, 33, -128, True, (-128, 127)),
    ((1, 3, 3, 65), (65, 3, 3, 1), 1, [1, 1, 1, 1], 1, 65, 0, True, (-128, 127)),
    ((1, 5, 5, 4), (8, 3, 3, 1), 1, [1, 1, 1, 1], 1, 4, 83, True, (-128, 127)),         # multiplier 2: portable
    ((1, 5, 5, 8), (4, 3, 3, 4), 1, [1, 1, 1, 1], 1, 2, -128, True, (-128, 127)),       # 2 groups: portable
]
#: the kernel each case takes (groups 1, or depthwise with multiplier 1), by its comment's kind
CONV_KIND = ["pointwise"] * 18 + ["regular"] * 12 + ["depthwise"] * 14 + [None] * 2

#: (rows, K, N, x_zero, w_zero, bias?, (act_min, act_max))
LINEAR_CASES = [
    (1, 1, 3, -128, 0, True, (-128, 127)),
    (1, 3, 1, 0, 0, False, (-128, 127)),
    (2, 4, 2, 89, 0, True, (-128, 127)),
    (1, 5, 8, -128, 3, True, (-128, 127)),
    (3, 13, 9, 0, 0, True, (0, 127)),
    (1, 33, 128, 89, 0, True, (-128, 127)),
    (1, 640, 128, -128, 0, True, (-128, 127)),      # AD's first layer
    (1, 128, 8, 0, -7, True, (-128, 127)),
    (2, 8, 9, 89, 0, False, (-60, 100)),
    (1, 15, 7, 0, 0, True, (-128, 127)),            # K around 16 / 32 lanes, N around 4 rows
    (1, 16, 5, -128, 0, True, (-128, 127)),
    (2, 17, 4, 89, 2, True, (-128, 127)),
    (1, 31, 3, 0, 0, False, (-128, 127)),
    (1, 32, 17, -128, 0, True, (-128, 127)),
    (1, 63, 15, 89, 0, True, (-128, 127)),
    (1, 64, 16, 0, -1, True, (-128, 127)),
    (1, 65, 33, -128, 0, True, (-128, 127)),
    (1, 640, 9, 0, 1, True, (-128, 127)),
]


#: Layers past the kernels' _PAR_MACS (openinfer/targets/x86/quantized.py) that split over the
#: pool: a groups-1 convolution and a pointwise one whose rows hold an odd number of positions (the
#: pool's units then start on whole blocks of 2 / 4 positions; the last unit ends on a single one),
#: a depthwise one with a batch of 2 and C past a vector, fully connected layers of one row of x (its
#: units split w's rows, N % 4 last ones in the last unit) and of 37 rows (units crossing rows).
PARALLEL_CONV_CASES = [
    ((1, 17, 9, 32), (33, 3, 3, 32), 1, [1, 1, 1, 1], 1, 1, 83, True, (-128, 127)),
    ((1, 23, 15, 64), (67, 1, 1, 64), 1, [0, 0, 0, 0], 1, 1, -128, True, (-128, 127)),
    ((2, 20, 19, 65), (65, 3, 3, 1), 1, [1, 1, 1, 1], 1, 65, 0, True, (-128, 127)),
]
PARALLEL_CONV_KIND = ["regular", "pointwise", "depthwise"]
PARALLEL_LINEAR_CASES = [
    (1, 1000, 301, -128, 0, True, (-128, 127)),
    (37, 129, 70, 89, 3, True, (-128, 127)),
]


def _program(rng: np.random.Generator, conv_cases=CONV_CASES, linear_cases=LINEAR_CASES):
    """Convolution and fully connected cases (by default CONV_CASES and LINEAR_CASES) as one
    program: (graph text, weights, two steps' inputs)."""
    prog = int8_program(rng, conv_cases, linear_cases)
    return prog.text(), prog.weights, prog.feeds()


def _vnni_descriptor(tmp_path: Path) -> Path:
    """x86_64-avx512 with AVX512-VNNI listed (a Cascade Lake, Ice Lake or Zen 4 class CPU): the
    VPDPBUSD kernels."""
    doc = json.loads((Path(__file__).resolve().parents[2] / "devices" / "x86_64-avx512.json").read_text())
    doc["device"]["name"] = "x86-64-v4 with AVX512-VNNI"
    doc["isa"]["features"].append("avx512_vnni")
    doc["compiler"]["cflags"].append("-mavx512vnni")
    path = tmp_path / "x86_64-avx512-vnni.json"
    path.write_text(json.dumps(doc))
    return path


def _check(tmp_path: Path, arch: str | Path, isa: str) -> None:
    skip_unless_runs_here(arch)
    text, weights, feeds = _program(np.random.default_rng(11))
    oi.write_oinf(tmp_path / "q.oinf", weights)
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "q.oinf"), oi.graph(text), arch=arch, feeds=feeds)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    _check_kernels(kernels, isa, CONV_CASES, CONV_KIND, LINEAR_CASES)
    vnni = isinstance(arch, Path)
    assert kernels.count("VPDPBUSD") == vnni * (CONV_KIND.count("pointwise") + CONV_KIND.count("regular")
                                                + len(LINEAR_CASES))
    assert "oi_pool_parallel_for" not in kernels            # all small enough for the calling thread


def _check_kernels(kernels: str, isa: str, conv_cases, conv_kind, linear_cases) -> None:
    """Each case took the kernel its kind says (None: the portable one)."""
    for (xs, ws, *_), kind in zip(conv_cases, conv_kind, strict=True):
        line = f"x[{', '.join(map(str, xs))}] * w[{', '.join(map(str, ws))}]"
        taken = [k for k in ("pointwise", "regular", "depthwise") if f"{isa} qconv2d {k}: {line}" in kernels]
        assert taken == ([kind] if kind else []), (xs, ws, taken)
    for rows, k, n, *_ in linear_cases:
        assert f"{isa} qlinear: x[{rows}, {k}] * w[{n}, {k}]" in kernels, (rows, k, n)


@pytest.mark.parametrize(("arch", "isa"), [("x86_64-avx2", "avx2"), ("x86_64-avx512", "avx512")])
def test_int8_kernels_match_reference(tmp_path, monkeypatch, arch, isa):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    _check(tmp_path, arch, isa)


def test_int8_vnni_kernels_match_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    _check(tmp_path, _vnni_descriptor(tmp_path), "avx512")


@pytest.mark.parametrize(("arch", "isa"), [("x86_64-avx2", "avx2"), ("x86_64-avx512", "avx512"),
                                           ("x86_64-avx512-vnni", "avx512")])
def test_int8_kernels_split_over_the_pool(tmp_path, monkeypatch, arch, isa):
    """PARALLEL_CONV_CASES and PARALLEL_LINEAR_CASES, each kernel split over the pool, bit-exact
    with the reference at 1, 2 and 3 threads (3: uneven shares, more threads than this host's
    CPUs may have; each worker copies its windows or rows of x into its own scratch)."""
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    if arch.endswith("-vnni"):
        arch = _vnni_descriptor(tmp_path)
    skip_unless_runs_here(arch)
    text, weights, feeds = _program(np.random.default_rng(5), PARALLEL_CONV_CASES, PARALLEL_LINEAR_CASES)
    oi.write_oinf(tmp_path / "q.oinf", weights)
    model, graph = oi.ModelLoader.open(tmp_path / "q.oinf"), oi.graph(text)
    sim = Simulator(model, graph, arch=arch)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    _check_kernels(kernels, isa, PARALLEL_CONV_CASES, PARALLEL_CONV_KIND, PARALLEL_LINEAR_CASES)
    assert kernels.count("oi_pool_parallel_for") == len(PARALLEL_CONV_CASES) + len(PARALLEL_LINEAR_CASES)
    ref = Reference(model, graph).make_executor()
    names = [f"yc{j}" for j in range(len(PARALLEL_CONV_CASES))] + [f"yf{j}" for j in range(len(PARALLEL_LINEAR_CASES))]
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("OI_NUM_THREADS", threads)      # read when the program's context is created
        ex = sim.make_executor()
        for step, inputs in enumerate(feeds):
            for e in (ref, ex):
                e.insert(**inputs)
                e.run_step()
            for name in names:
                np.testing.assert_array_equal(ex.fetch(name), ref.fetch(name), err_msg=f"{threads} threads, {step = }")


def _sanitized_child(work: str) -> int:
    """Runs in a child interpreter with gcc's ASan runtime preloaded (tests/sanitized.py): both
    programs (every case; the layers that split over the pool, at 3 threads) built for the host's
    AVX2 kernels with -fsanitize=address,undefined, every output equal to the reference's over two
    steps. Exit status 0 when all match (an ASan or UBSan report aborts the child)."""
    os.environ["OI_CACHE_DIR"], os.environ["OI_NUM_THREADS"] = str(Path(work) / "cache"), "3"
    for name, conv, linear in (("serial", CONV_CASES, LINEAR_CASES),
                               ("split", PARALLEL_CONV_CASES, PARALLEL_LINEAR_CASES)):
        text, weights, feeds = _program(np.random.default_rng(13), conv, linear)
        oi.write_oinf(Path(work) / f"{name}.oinf", weights)
        model, graph = oi.ModelLoader.open(Path(work) / f"{name}.oinf"), oi.graph(text)
        ex = Simulator(model, graph, arch="x86_64-avx2", build_options=SANITIZE).make_executor()
        ref = Reference(model, graph).make_executor()
        names = [f"yc{j}" for j in range(len(conv))] + [f"yf{j}" for j in range(len(linear))]
        for step, inputs in enumerate(feeds):
            for e in (ref, ex):
                e.insert(**inputs)
                e.run_step()
            for out in names:
                np.testing.assert_array_equal(ex.fetch(out), ref.fetch(out), err_msg=f"{name}, {step = }")
    print("sanitized int8 kernels: ok")
    return 0


def test_int8_kernels_under_asan_and_ubsan(tmp_path):
    """The AVX2 int8 kernels (window copies, widened weights, per-worker scratch, vector
    requantization) read and write only their buffers and do nothing undefined."""
    skip_unless_runs_here("x86_64-avx2")
    assert "ok" in run_sanitized(__file__, "_sanitized_child", str(tmp_path))


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512-vnni"])
def test_int8_kernels_compile_clean(tmp_path, isa):
    """The program's generated C builds with -Werror (meson's warning_level 2: -Wall -Wextra),
    with GCC and with Clang (where installed; the shape sweep builds with both), on any x86-64
    host whether or not its CPU could run it: the AVX-512 kernels are checked here (parametrised
    by family, not descriptor, so that tests/conftest.py does not skip it)."""
    arch = _vnni_descriptor(tmp_path) if isa == "avx512-vnni" else f"x86_64-{isa}"
    isa = isa.removesuffix("-vnni")
    conv_kind = CONV_KIND + PARALLEL_CONV_KIND
    text, weights, _ = _program(np.random.default_rng(11), CONV_CASES + PARALLEL_CONV_CASES,
                                LINEAR_CASES + PARALLEL_LINEAR_CASES)
    oi.write_oinf(tmp_path / "q.oinf", weights)
    model, graph, _ = bind_inputs(oi.ModelLoader.open(tmp_path / "q.oinf"), oi.graph(text), None, None)
    plan = Synthesizer.from_arch(arch).synthesize(model, graph)
    kernels = b"".join(v for k, v in plan.files.items() if k.endswith("_kernels.c")).decode()
    assert kernels.count(f"{isa} qconv2d ") == len([k for k in conv_kind if k])
    assert kernels.count(f"{isa} qlinear: ") == len(LINEAR_CASES) + len(PARALLEL_LINEAR_CASES)
    assert kernels.count("VPDPBUSD") == isinstance(arch, Path) * (len([k for k in conv_kind if k in (
        "pointwise", "regular")]) + len(LINEAR_CASES) + len(PARALLEL_LINEAR_CASES))
    assert kernels.count("oi_pool_parallel_for") == len(PARALLEL_CONV_CASES) + len(PARALLEL_LINEAR_CASES)
    compilers = [t for t in (Toolchain("gcc", "2"), Toolchain("clang", "2")) if not t.missing()]
    for toolchain in compilers:
        project = tmp_path / toolchain.name
        write_tree(project, dict(plan.files))
        with toolchain.active():
            build(project, options=["-Dwerror=true", *toolchain.build_options])


REQUANT_HARNESS = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include "oi_quant.h"
{{ requant8("t") }}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
    int32_t acc[8], mult[8], shift[8], got[8];
    int n = 0;
    long long a, b, c;
    for (;;) {
        const int more = fscanf(in, " %lld %lld %lld", &a, &b, &c) == 3;
        if (more) {
            acc[n] = (int32_t)a, mult[n] = (int32_t)b, shift[n] = (int32_t)c;
            ++n;
        }
        if (n == 8 || (!more && n)) {
            for (int i = n; i < 8; ++i) acc[i] = mult[i] = shift[i] = 0;
            _mm256_storeu_si256((__m256i *)got, t_requant8(_mm256_loadu_si256((const __m256i *)acc),
                                                           _mm256_loadu_si256((const __m256i *)mult),
                                                           _mm256_loadu_si256((const __m256i *)shift)));
            for (int i = 0; i < n; ++i)
                fprintf(out, "%ld %ld\n", (long)got[i], (long)oi_q_requantize(acc[i], mult[i], shift[i]));
            n = 0;
        }
        if (!more) break;
    }
    fclose(in);
    fclose(out);
    return 0;
}
"""


def test_vector_requantization_is_oi_quant(tmp_path):
    """templates/x86/qrequant.c.j2's 8-lane oi_q_requantize, compiled on the host (undefined-behaviour
    sanitizer on), against oi_quant.h on the adversarial values of test_mcu_qrequant.py (every shift
    from -31 to 8, the extremes, INT32_MIN x INT32_MIN, both roundings' ties) and shifts to 31, each
    lane with its own multiplier and shift."""
    skip_unless_runs_here("x86_64-avx2")
    from test_mcu_qrequant import _requant_cases

    from openinfer.resources import hal_dir
    from openinfer.targets.env import environment

    rng = np.random.default_rng(3)
    cases = _requant_cases(rng)
    cases += [(int(a), int(m), int(s)) for a, m, s in zip(rng.integers(-2**31, 2**31, 4000),
                                                             rng.integers(-2**31, 2**31, 4000),
                                                             rng.integers(9, 32, 4000), strict=True)]
    order = rng.permutation(len(cases))             # neighbours in a vector with other shifts and multipliers
    cases = [cases[i] for i in order]
    src = environment().from_string('{% from "x86/qrequant.c.j2" import requant8 %}' + REQUANT_HARNESS)
    (tmp_path / "h.c").write_text(src.render())
    subprocess.run(["cc", "-std=c11", "-O2", "-mavx2", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=undefined", f"-I{hal_dir() / 'include'}", str(tmp_path / "h.c"),
                    "-o", str(tmp_path / "h")], check=True)
    (tmp_path / "in.txt").write_text("".join(f"{a} {m} {s}\n" for a, m, s in cases))
    subprocess.run([str(tmp_path / "h"), str(tmp_path / "in.txt"), str(tmp_path / "out.txt")], check=True)
    got = [tuple(map(int, line.split())) for line in (tmp_path / "out.txt").read_text().splitlines()]
    assert len(got) == len(cases) > 40_000
    bad = [(c, g) for c, g in zip(cases, got, strict=True) if g[0] != g[1]]
    assert not bad, bad[:10]
