"""The op schema sits below the reference: openinfer/ops never imports openinfer/reference, directly
or through other openinfer modules, and the modules of the two packages import each other in no
circle.

Read from the source with `ast`: an import inside a function or under `if TYPE_CHECKING:` counts
the same as one at the top, so a circle cannot hide in either. The implicit import of a parent
package is not counted (openinfer/__init__.py imports the reference for its public API, which puts
every submodule on a circle through it).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import openinfer

ROOT = Path(openinfer.__file__).parent


@cache
def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


@cache
def _imports(name: str) -> frozenset[str]:
    """The openinfer modules that module `name` imports anywhere in its source."""
    modules = _modules()
    path, is_package = modules[name]

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    targets: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {known(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # `from . import cast` imports the submodule `cast`; `from .registry import get`, the module
            targets |= {known(f"{base}.{a.name}") if f"{base}.{a.name}" in modules else known(base)
                        for a in node.names}
    return frozenset(t for t in targets if t and t != name)


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_ops_package_never_reaches_the_reference() -> None:
    seen: dict[str, str] = {}                      # reached module -> the module that imports it
    todo = [m for m in _modules() if _in("openinfer.ops", m)]
    while todo:
        module = todo.pop()
        for target in _imports(module) - seen.keys():
            seen[target] = module
            todo.append(target)
    entries = sorted(f"{seen[m]} imports {m}" for m in seen
                     if _in("openinfer.reference", m) and not _in("openinfer.reference", seen[m]))
    assert not entries, entries


def test_no_import_circle_among_ops_and_reference_modules() -> None:
    ours = {m for m in _modules() if _in("openinfer.ops", m) or _in("openinfer.reference", m)}
    state: dict[str, str] = {}                     # "open" on the current path, "done" after

    def circle_from(module: str, path: list[str]) -> list[str] | None:
        path = path + [module]
        state[module] = "open"
        for target in sorted(_imports(module) & ours):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := circle_from(target, path)):
                return found
        state[module] = "done"
        return None

    for module in sorted(ours):
        if module not in state:
            found = circle_from(module, [])
            assert found is None, " -> ".join(found)
