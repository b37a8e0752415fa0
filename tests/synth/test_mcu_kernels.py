"""The Cortex-M wing's kernels (openinfer/targets/mcu/) under the Cortex-M4 firmware simulation
(openinfer/firmware.py), against the reference: the register-blocked f32 vecmat for every row
count it takes, at K and N around its column blocks (8, 6, 4 and 2 columns for 1 to 4 rows of x)
and its k steps (4 a statement for one row), and prime; a descriptor this machine cannot
run is skipped by tests/conftest.py."""

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


@pytest.fixture(scope="module", autouse=True)
def sim_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OI_CACHE_DIR", str(tmp_path_factory.mktemp("mcu-cache")))
        yield


def test_cortex_m4_takes_the_cortex_m_family():
    assert devices.load("cortex-m4").isa == "cortex-m" and devices.load("cortex-m7").isa == "cortex-m"
    assert devices.load("cortex-m33").isa == "generic"          # Armv8-M: the portable kernels


def test_vecmat_matches_reference(tmp_path):
    """Every case one matmul of its own in one program: one firmware build and run."""
    decls = [(f"x{j}: f32[{m}, {k}];", f"w{j}: f32[{k}, {n}];", f"y{j}: f32[{m}, {n}];")
             for j, (m, k, n) in enumerate(CASES)]
    text = (f"dynamic {{ {' '.join(d[0] for d in decls)} }}\nconstant {{ {' '.join(d[1] for d in decls)} }}\n"
            f"volatile {{ {' '.join(d[2] for d in decls)} }}\nblock entry {{\n"
            + "".join(f"  op matmul(x{j}, w{j}) >> y{j};\n" for j in range(len(CASES))) + "  return;\n}\n")
    graph = oi.graph(text)
    rng = np.random.default_rng(7)
    oi.write_oinf(tmp_path / "vecmat.oinf",
                  {f"w{j}": rng.uniform(-1, 1, (k, n)).astype(np.float32) for j, (_, k, n) in enumerate(CASES)})
    sim = assert_matches_reference(oi.ModelLoader.open(tmp_path / "vecmat.oinf"), graph, arch="cortex-m4", steps=2)
    kernels = "".join(p.read_text() for p in Path(sim.project).glob("*_kernels.c"))
    for m, k, n in CASES:
        assert f"cortex-m vecmat: f32[{m}, {k}] @ f32[{k}, {n}]" in kernels, (m, k, n)
