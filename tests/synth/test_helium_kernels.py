"""The Cortex-M wing's Helium kernels (openinfer/targets/mcu/helium.py) under the Cortex-M55
firmware simulation (openinfer/firmware.py: mps3-an547, whose QEMU emulates MVE with floating
point), against the reference with random operands: for each kernel one program holds every
case, so one firmware build and run covers them, and the generated kernels must carry the
Helium kernel's comment line for each case (a silent fallback to the portable kernel fails).
A descriptor this machine cannot run is skipped by tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.targets import devices
from openinfer.testing import assert_matches_reference

#: rows of x: 1 to 4 (the GEMVs' 1 x 6, 2 x 3 tiles), 3 and its multiples +-1 (the GEMM's 3 x 2
#: tiles and the remainders of 1 and 2 rows)
ROWS = (1, 2, 3, 4, 5, 7)
#: columns: the last partial vector alone (1, 3), a vector +-1, each tile's width +-1 (8, 12, 24
#: columns for 3, 2, 1 rows) and primes
COLS = (1, 3, 4, 5, 7, 8, 9, 12, 13, 23, 24, 25, 29)
#: depths: the asm statement's 4 k steps +-1, its pairs, one step alone, primes
DEPTHS = (1, 2, 3, 4, 5, 7, 8, 9, 17)
#: (M, K, N): every N with every M, K cycling through the depths (a shift per M), and two GEMMs
#: of many row blocks
MATMULS = [(m, DEPTHS[(i + 2 * j) % len(DEPTHS)], n) for j, m in enumerate(ROWS) for i, n in enumerate(COLS)] + \
    [(13, 37, 29), (16, 64, 50)]


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("helium-cache")))
        yield


def _kernels(sim) -> str:
    return "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))


def test_cortex_m55_takes_the_helium_family():
    dev = devices.load("cortex-m55")
    assert dev.isa == "helium" and dev.family.includes == ("arm_mve.h",)


def test_matmul_matches_reference(tmp_path):
    """Every case one matmul of its own in one program (W a constant: a layer's weight)."""
    decls = [(f"x{j}: f32[{m}, {k}];", f"w{j}: f32[{k}, {n}];", f"y{j}: f32[{m}, {n}];")
             for j, (m, k, n) in enumerate(MATMULS)]
    text = (f"dynamic {{ {' '.join(d[0] for d in decls)} }}\nconstant {{ {' '.join(d[1] for d in decls)} }}\n"
            f"volatile {{ {' '.join(d[2] for d in decls)} }}\nblock entry {{\n"
            + "".join(f"  op matmul(x{j}, w{j}) >> y{j};\n" for j in range(len(MATMULS))) + "  return;\n}\n")
    rng = np.random.default_rng(11)
    oi.write_oinf(tmp_path / "matmul.oinf",
                  {f"w{j}": rng.uniform(-1, 1, (k, n)).astype(np.float32) for j, (_, k, n) in enumerate(MATMULS)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "matmul.oinf"), oi.graph(text), arch="cortex-m55",
                                   steps=2)
    kernels = _kernels(sim)
    for m, k, n in MATMULS:
        assert f"helium matmul: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)
