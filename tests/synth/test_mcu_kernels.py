"""The Cortex-M wing's kernels (openinfer/targets/mcu/) under the Cortex-M4 firmware simulation
(openinfer/firmware.py), against the reference: the register-blocked f32 vecmat for every row
count it takes, at K and N around its column blocks (8, 6, 4 and 2 columns for 1 to 4 rows of x)
and its k steps (4 a statement for one row), and prime; and the 4 x 4 register-blocked GEMM at
every M % 4 and N % 4 (its row tail the vecmat's), K odd, even and 1. A descriptor this machine
cannot run is skipped by tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer.targets import devices
from openinfer.testing import assert_matches_reference

SIZES = (7, 8, 9, 15, 16, 17, 33, 100)
#: (M, K, N): every N with every M, K cycling through the sizes (a shift per M, so each M meets
#: each K too)
CASES = [(m, SIZES[(i + 3 * m) % len(SIZES)], n) for m in range(1, 5) for i, n in enumerate(SIZES)]
#: (M, K, N) of the GEMM: M from 5 on at each M % 4, each N % 4 (N < 4: no whole block), K = 1, 2,
#: odd, even and prime
GEMM_CASES = [(5, 1, 4), (6, 2, 9), (7, 3, 6), (8, 17, 7), (9, 16, 5), (12, 33, 8), (13, 7, 3), (23, 31, 13)]


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-cache")))
        yield


def test_cortex_m4_takes_the_cortex_m_family():
    assert devices.load("cortex-m4").isa == "cortex-m" and devices.load("cortex-m7").isa == "cortex-m"
    assert devices.load("cortex-m33").isa == "generic"          # Armv8-M: the portable kernels


def _matmul_program(cases, tmp_path, seed):
    """One program with a matmul of its own for each (M, K, N) of `cases`, simulated on the Cortex-M4
    (one firmware build and run) against the reference; the generated kernels' text."""
    decls = [(f"x{j}: f32[{m}, {k}];", f"w{j}: f32[{k}, {n}];", f"y{j}: f32[{m}, {n}];")
             for j, (m, k, n) in enumerate(cases)]
    text = (f"dynamic {{ {' '.join(d[0] for d in decls)} }}\nconstant {{ {' '.join(d[1] for d in decls)} }}\n"
            f"volatile {{ {' '.join(d[2] for d in decls)} }}\nblock entry {{\n"
            + "".join(f"  op matmul(x{j}, w{j}) >> y{j};\n" for j in range(len(cases))) + "  return;\n}\n")
    graph = oi.graph(text)
    rng = np.random.default_rng(seed)
    oi.write_oinf(tmp_path / "matmul.oinf",
                  {f"w{j}": rng.uniform(-1, 1, (k, n)).astype(np.float32) for j, (_, k, n) in enumerate(cases)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "matmul.oinf"), graph, arch="cortex-m4", steps=2)
    return "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))


def test_vecmat_matches_reference(tmp_path):
    kernels = _matmul_program(CASES, tmp_path, 7)
    for m, k, n in CASES:
        assert f"cortex-m vecmat: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)


def test_gemm_matches_reference(tmp_path):
    kernels = _matmul_program(GEMM_CASES, tmp_path, 11)
    for m, k, n in GEMM_CASES:
        assert f"cortex-m gemm: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)
        if m % 4:
            assert f"cortex-m vecmat: f32[{m % 4}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)
