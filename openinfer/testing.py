"""Golden-output testing for users' own test suites (also a pytest plugin).

In a test:

    from openinfer.testing import assert_golden, assert_matches_reference

    def test_my_model(golden_update):
        sim = openinfer.Simulator("m.oinf", "g.oig", arch="devices/x86_64-avx2.json")
        ex = sim.make_executor(); ex.insert(x=x); ex.run_step()
        assert_golden({"y": ex.fetch("y")}, "tests/golden/my_model.oinf", update=golden_update)

A test of a CPU target first asks whether this machine may run it (code for an ISA the CPU lacks
must never run):

    def test_avx512(tmp_path):
        skip_unless_runs_here("x86_64-avx512")   # pytest.skip naming what the CPU lacks

Golden values are stored as a `.oinf` file (deterministic bytes, so an update that changes
nothing leaves the file untouched and a real change shows up as a diff to review). They change
only on purpose: run pytest with `--update-golden` (or OI_UPDATE_GOLDEN=1) to rewrite them.
Floats compare within openinfer.compare's per-dtype tolerance, integers exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .compare import compare, table
from .dtypes import BY_NAME, DTypeInfo

_NUMPY_TO_DTYPE = {"float64": "f64", "float32": "f32", "float16": "f16", "int8": "i8", "int16": "i16",
                   "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
                   "bool": "bool"}


def update_requested() -> bool:
    return os.environ.get("OI_UPDATE_GOLDEN") == "1"


def _dtype_of(a: np.ndarray, given: DTypeInfo | None) -> DTypeInfo:
    if given is not None:
        return given
    try:
        return BY_NAME[_NUMPY_TO_DTYPE[a.dtype.name]]
    except KeyError:
        raise TypeError(f"no OpenInfer dtype for NumPy {a.dtype}; pass dtypes=") from None


def assert_golden(outputs: Mapping[str, np.ndarray], golden: str | os.PathLike, *, update: bool | None = None,
                  dtypes: Mapping[str, DTypeInfo] | None = None) -> None:
    """Compare `outputs` with the values stored in `golden` (a .oinf), or store them when updating.

    Raises AssertionError (with a comparison table) on a mismatch, a missing golden file, or a
    different set of names.
    """
    from . import ModelLoader, write_oinf
    from .oinf import TensorSpec

    path = Path(golden)
    update = update_requested() if update is None else update
    dtypes = dict(dtypes or {})
    arrays = {k: np.asarray(v) for k, v in outputs.items()}
    if update:
        tensors = {k: TensorSpec(a, dtype=_dtype_of(a, dtypes.get(k)).name) for k, a in arrays.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        new = path.with_suffix(path.suffix + ".new")
        write_oinf(new, tensors=tensors)
        if path.exists() and path.read_bytes() == new.read_bytes():
            new.unlink()
        else:
            new.replace(path)
        return
    if not path.exists():
        raise AssertionError(f"golden file {path} does not exist; run with --update-golden (or OI_UPDATE_GOLDEN=1) "
                             "to create it")
    stored = ModelLoader.open(path)
    if sorted(stored.tensor_names) != sorted(arrays):
        raise AssertionError(f"{path}: golden holds {sorted(stored.tensor_names)}, got {sorted(arrays)}")
    rows = [compare(k, stored.info(k).dtype, stored.tensor(k), arrays[k]) for k in sorted(arrays)]
    if not all(r.ok for r in rows):
        raise AssertionError(f"outputs differ from {path} (update with --update-golden after review):\n"
                             + table(rows))


def assert_matches_reference(model, graph, *, arch, steps: int = 1, seed: int = 0,
                             sizevars: Mapping[str, int] | None = None,
                             feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
                             names: Sequence[str] | None = None, outputs: Sequence[str] | None = None):
    """Generate, build and run `graph` for `arch` beside the NumPy reference and assert the
    outputs match after every step. `feeds` gives each step's inputs (default: `steps` steps of
    openinfer.inputs.random_inputs); `outputs` the variables the host may observe (default: all,
    as `openinfer gen` without --outputs; fewer let more calls fuse); `names` the outputs
    compared (default: `outputs`, or every volatile). Returns the Simulator (a Vulkan one also
    counts validation messages)."""
    from .inputs import outputs_of, random_inputs
    from .reference.executor import Reference
    from .sim import Simulator

    ref = Reference(model, graph, sizevars=sizevars)
    ex_ref = ref.make_executor()
    sim = Simulator(ref.model, ref.graph, arch=arch, sizevars=sizevars,
                    outputs=set(outputs) if outputs is not None else None)
    ex_sim = sim.make_executor()
    names = list(names) if names is not None else sorted(outputs) if outputs is not None else outputs_of(ref.bound)
    for step, inputs in enumerate(feeds if feeds is not None else
                                  (random_inputs(ref.bound, seed, s) for s in range(steps))):
        for ex in (ex_ref, ex_sim):
            ex.insert(**inputs)
            ex.run_step()
        rows = [compare(n, ref.bound.vars[n].dtype, ex_ref.fetch(n), ex_sim.fetch(n)) for n in names]
        if not all(r.ok for r in rows):
            raise AssertionError(f"step {step}: {arch} differs from the reference:\n{table(rows)}")
    return sim


def missing_here(arch) -> str | None:
    """Why this machine may not run code for `arch` (a descriptor path or bundled name), or None.
    OI_HOST_ISA=avx2 / generic makes it answer as a smaller CPU would. A CPU of another
    architecture runs under emulation (openinfer/emulate.py): what is missing is then a tool."""
    from .cross import is_foreign
    from .emulate import unavailable
    from .targets import devices

    device = devices.load(arch)
    if is_foreign(device):
        return unavailable(device)
    missing = device.missing_on_host()
    if not missing:
        return None
    cap = devices.host_isa_cap()
    return f"this CPU lacks {', '.join(missing)}" + (f" (OI_HOST_ISA={cap})" if cap else "")


def skip_unless_runs_here(arch) -> None:
    """pytest.skip the calling test, with the reason, when this machine may not run `arch`'s code."""
    import pytest

    reason = missing_here(arch)
    if reason:
        pytest.skip(f"{arch}: {reason}")


# ------------------------------------------------------------------------------ pytest plugin

def pytest_addoption(parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite OpenInfer golden outputs instead of comparing (review the diff)")


def _fixture():
    import pytest

    @pytest.fixture
    def golden_update(request) -> bool:
        """True when golden files should be rewritten (--update-golden or OI_UPDATE_GOLDEN=1)."""
        return bool(request.config.getoption("--update-golden", default=False)) or update_requested()

    return golden_update


try:
    golden_update = _fixture()
except ImportError:   # pytest is optional: the assert helpers work without it
    pass
