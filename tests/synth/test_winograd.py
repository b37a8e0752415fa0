"""The NEON Winograd convolution F(4 x 4, 3 x 3) (openinfer/targets/arm/winograd.py) against the
reference, cross-built and run under qemu-aarch64 (natively on an AArch64 machine), at 1 and 2
threads: output sizes around the 4 x 4 tile and the 4-tile vector (a last tile row of 1 output row,
a last group of 1, 5 and 12 columns), channel counts around the 8-channel block (8, 9, 11, 17),
batch 2, no / symmetric / four-sided padding, with and without bias, epilogues of the sums,
weights packed by create() and on every call, and the non-finite path (NaN and infinities in the
input, an infinite weight) that must give the reference's NaN and infinities. Every build is
-Wall -Wextra -Werror at -O3, and the kernels also compile at -O2.

The transform matrices themselves are checked exactly, in rationals, when winograd.py is imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from compilers import compile_kernels_at  # noqa: E402
from test_avx_kernels import run, special  # noqa: E402
from test_neon_kernels import conv_program  # noqa: E402

from openinfer.targets.arm import winograd  # noqa: E402

#: name -> (x, w, attributes, bias, epilogue)
CASES = {
    "w32": ((1, 32, 14, 14), (32, 32, 3, 3), {"padding": 1}, True, "relu"),
    "w_odd": ((2, 11, 13, 17), (9, 11, 3, 3), {"padding": 1}, False, "gelu"),
    "w_nopad": ((1, 8, 9, 23), (17, 8, 3, 3), {"padding": 0}, True, None),
    "w_4side": ((1, 12, 10, 31), (8, 12, 3, 3), {"padding": [1, 0, 2, 1]}, True, None),
    "w_wide": ((1, 16, 28, 28), (32, 16, 3, 3), {"padding": 1}, True, "silu"),
    "w_dynw": ((1, 9, 7, 8), (8, 9, 3, 3), {"padding": 1}, True, None),
    "w_nan": ((1, 8, 6, 6), (8, 8, 3, 3), {"padding": 1}, True, "relu"),
    "w_infw": ((1, 8, 5, 7), (9, 8, 3, 3), {"padding": 1}, False, None),
}
#: convolutions whose weights are inputs: packed on every call (the others' by create())
WEIGHTS_AS_INPUTS = {"w_dynw", "w_infw"}


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("winograd-cache")))
        yield


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_winograd_conv(tmp_path):
    text, weights, inputs, outs = conv_program(CASES, np.random.default_rng(11), WEIGHTS_AS_INPUTS, scaled=True)
    special(inputs["w_nan_x"])                  # NaN, infinities, signed zeros: the direct sums
    inputs["w_infw_w"][3, 5, 1, 2] = np.inf     # an infinite weight: likewise
    sim = run(tmp_path, "aarch64-neon", text, weights, inputs, list(outs), threads=("1", "2"), only_outputs=True)
    source = next(sim.project.glob("*_kernels.c")).read_text()
    convs = [k for k in sim.program.kernels if k.op == "conv2d"]
    assert len(convs) == len(outs)
    # every one is Winograd's, its weights packed by create() unless an input
    assert source.count("_gemm(const float *restrict V,") == len(outs)
    assert source.count("_pack1(const float") == len(CASES) - len(WEIGHTS_AS_INPUTS)
    assert sum(k.epilogue is not None for k in convs) == sum(c[4] is not None for c in CASES.values())
    compile_kernels_at(sim.project, "-O2")


def test_covers_only_3x3_stride_1():
    """Which convolutions take Winograd's kernel, and which stay direct."""
    from openinfer.targets.geometry import ConvGeometry

    def geo(c, o, k, s, d, groups, oh):
        return ConvGeometry(n=1, c=c, h=oh, w=oh, o=o, cg=c // groups, og=o // groups, kh=k, kw=k, oh=oh, ow=oh,
                            sh=s, sw=s, dh=d, dw=d, pt=1, pl=1)

    class Req:
        op, pool = "conv2d", None
    assert winograd.winograd_covers(Req, geo(8, 8, 3, 1, 1, 1, 4))
    for g in (geo(7, 8, 3, 1, 1, 1, 8), geo(8, 7, 3, 1, 1, 1, 8), geo(8, 8, 5, 1, 1, 1, 8), geo(8, 8, 3, 2, 1, 1, 8),
              geo(8, 8, 3, 1, 2, 1, 8), geo(16, 16, 3, 1, 1, 2, 8), geo(8, 8, 3, 1, 1, 1, 3)):
        assert not winograd.winograd_covers(Req, g), g
