"""The reference kernels agree with the registry: one kernel for every registry op, none for a name
the registry does not know.

The registry (openinfer/ops) is the one list of ops; the kernel table (openinfer/reference/kernels)
is checked against it here, never read by it. The family modules are found by walking the package,
so a family left out of kernels/__init__.py is caught too.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter

from openinfer.ops import all_ops
from openinfer.reference import kernels


def _family_tables() -> dict[str, dict]:
    """Each kernel family module's own `KERNELS` table, by module name."""
    tables = {}
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"{kernels.__name__}.{info.name}")
        if hasattr(module, "KERNELS"):
            tables[info.name] = module.KERNELS
    return tables


def test_every_registry_op_has_exactly_one_kernel() -> None:
    defined = Counter(name for table in _family_tables().values() for name in table)
    missing = [op.name for op in all_ops() if op.name not in defined]
    twice = sorted(name for name, n in defined.items() if n > 1)
    assert not missing, f"registry ops without a reference kernel: {missing}"
    assert not twice, f"ops with a kernel in more than one family: {twice}"


def test_no_kernel_for_an_op_the_registry_does_not_know() -> None:
    known = {op.name for op in all_ops()}
    unknown = {family: names for family, table in _family_tables().items() if (names := sorted(set(table) - known))}
    assert not unknown, f"kernels for unknown ops: {unknown}"


def test_the_table_is_the_family_tables_merged() -> None:
    merged = {name: kernel for table in _family_tables().values() for name, kernel in table.items()}
    assert kernels.KERNELS == merged
