"""Generated C under the compilers users have (tests/compilers.py: GCC and Clang, -O2 and -O3).

GCC 12.2 at -O3 -mavx2 miscompiled the padded copy of the tiled convolution (a nested row-copy
loop): a 3x3 convolution with padding 1 on a 14x14 input was 74-100% off on the AVX targets, and
one padded on H only (3x1 with pads [1, 0], Inception's 7x1 with [3, 0]) off by up to 25. The
copy is memset / memcpy now (templates/c/ops/conv_tiled.c.j2). Here:
- the 30-line reduction of the old pattern (tests/data/c/pad_rows_o3_reduction.c) still shows the
  miscompile on the compiler it was made for, so the checks below run where the bug lives;
- the emitted padding is memset / memcpy, not a loop over elements;
- those convolutions match the reference on every CPU target the host runs, built with every
  toolchain (one program per target and toolchain).
- the row kernels (softmax, log_softmax, layer / RMS norm over rows of every vector width +-1)
  build and match under every toolchain: GCC 12 at -O2 refused to build a softmax over rows of
  16 (-Werror=aggressive-loop-optimizations on the sum's tail loop), found by the shape sweep.
The shape sweep (tests/sweep/) runs every op under the same matrix; the C conformance cases and
the examples take a sample of it too (tests/synth/test_c_conformance.py,
tests/synth/test_examples_targets.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from compilers import TOOLCHAINS  # noqa: E402
from sweep.catalog import catalogue  # noqa: E402
from sweep.runner import References, run  # noqa: E402

from openinfer.targets import devices  # noqa: E402
from openinfer.targets.c import CRenderer  # noqa: E402
from openinfer.targets.devices import host_features  # noqa: E402

REDUCTION = TESTS / "data" / "c" / "pad_rows_o3_reduction.c"
DEVICES = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")
#: the portable C kernels, as emitted for x86_64-generic
PORTABLE = CRenderer.for_kernels(devices.load("x86_64-generic"))


def _build_and_run(cc: str, flags: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    exe = tmp_path / f"reduction-{cc}-{'-'.join(f.strip('-') for f in flags)}"
    subprocess.run([cc, *flags, "-Wall", "-Wextra", "-Werror", str(REDUCTION), "-o", str(exe)], check=True,
                   capture_output=True, timeout=120)
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)


def test_the_reduction_still_shows_the_miscompile(tmp_path):
    """On Debian 12's GCC (12.2) with AVX2 the old pattern is wrong at -O3 and right at -O2: the
    compiler the matrix must keep the generated code right under."""
    version = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    if version != "12.2.0":
        pytest.skip(f"the reduction was made for GCC 12.2.0 (this is {version or 'no gcc'})")
    if "avx2" not in host_features():
        pytest.skip("this CPU cannot run -mavx2 code")
    assert _build_and_run("gcc", ["-O3", "-mavx2"], tmp_path).returncode == 1
    assert _build_and_run("gcc", ["-O2", "-mavx2"], tmp_path).returncode == 0


def _cases() -> list:
    """The sweep's cases of ResNet's / VGG's 3x3 convolution with padding 1 on 14x14 (wrong for
    every channel count before) and of convolutions padded on one axis only."""
    def wanted(c) -> bool:
        return c.ops == ("conv2d",) and (re.search(r"^conv2d f32\[1,\d+,14,14\]", c.desc) is not None
                                         or re.search(r"padding=\[(0, [1-9]|[1-9], 0)\] ", c.desc) is not None)
    cases = [c for c in catalogue() if wanted(c)]
    assert len(cases) >= 15, [c.desc for c in cases]
    return cases


def test_the_emitted_padding_is_memset_and_memcpy():
    """The padded copy of a stride-1 convolution has no per-element loop for the vectorizer to
    rewrite: every run of zeros is a memset, every copied run a memcpy."""
    from openinfer.dtypes import lookup
    from openinfer.ops import TensorType, get
    from openinfer.synth.program import KernelRequest
    from openinfer.targets.c.kernels import emit_kernel

    t = lookup("f32")
    for shapes, attrs in (([(1, 8, 14, 14), (8, 8, 3, 3)], {"padding": 1}), ([(1, 4, 11, 9), (5, 4, 3, 1)],
                                                                              {"padding": [1, 0]})):
        types = tuple(TensorType(t, s) for s in shapes)
        inf = get("conv2d").infer(list(types), dict(attrs))
        req = KernelRequest("conv2d", "normal", types, inf.out, tuple(sorted(inf.attrs.items())), (), None, False)
        src = emit_kernel(req, "k", PORTABLE).definition
        pad = re.search(r"static void k_pad\(.*?\n}\n", src, re.S).group(0)
        assert "memcpy(" in pad and "memset(" in pad, pad
        assert not re.search(r"for \(int64_t q", pad), pad


@pytest.mark.parametrize("toolchain", TOOLCHAINS, ids=lambda t: t.name)
@pytest.mark.parametrize("device", DEVICES)
def test_padded_convs_match_the_reference_under_every_toolchain(device, toolchain, tmp_path, monkeypatch):
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    failures, _ = run(_cases(), device, toolchain, References(tmp_path), tmp_path, "padded")
    assert not failures, "\n".join(map(str, failures))


@pytest.mark.parametrize("toolchain", TOOLCHAINS, ids=lambda t: t.name)
def test_row_kernels_build_and_match_under_every_toolchain(toolchain, tmp_path, monkeypatch):
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path / "cache"))
    cases = [c for c in catalogue() if c.family == "rows"]
    assert any(c.desc == "softmax f32[1,16] inplace" for c in cases)     # the one that did not build
    failures, _ = run(cases, "x86_64-generic", toolchain, References(tmp_path), tmp_path, "rows")
    assert not failures, "\n".join(map(str, failures))
