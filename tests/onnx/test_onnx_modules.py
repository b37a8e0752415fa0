"""The structure of the ONNX front end (openinfer/onnx/), read from its source: the importer imports
the handlers, the handlers and the fusions import the context, and nothing imports back. No import
cycle among the openinfer.onnx modules (counting imports inside functions too, so none can hide a
cycle), no module imports another one's private (underscore) names, and every module-level import
comes before the module's code (none at the bottom, registering handlers late)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "openinfer" / "onnx"


def _modules() -> dict[str, Path]:
    """openinfer.onnx.* module name -> its file."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parents[1]).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None]]:
    """(openinfer.onnx module, the name taken from it or None for the module itself) for every
    import in the file, at any depth."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:          # a module, from its package
                    found.append((f"{target}.{alias.name}", None))
                elif target in modules:
                    found.append((target, alias.name))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph (its modules in order, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    return next((c for c in map(visit, sorted(graph)) if c), None)


def test_no_import_cycle_among_the_onnx_modules():
    modules = _modules()
    graph = {name: {target for target, _ in _imports(name, path, modules) if target != name}
             for name, path in modules.items()}
    assert graph["openinfer.onnx.context"] <= {"openinfer.onnx.problems"}
    assert "openinfer.onnx.handlers" in graph["openinfer.onnx.importer"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_no_module_imports_another_ones_private_names():
    modules = _modules()
    private = [f"{name} imports {target}.{taken}" for name, path in modules.items()
               for target, taken in _imports(name, path, modules) if taken is not None and taken.startswith("_")]
    assert private == []


def test_imports_come_before_the_code():
    late = []
    for name, path in _modules().items():
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]                                     # the docstring
        kinds = [isinstance(node, (ast.Import, ast.ImportFrom)) for node in body]
        if False in kinds and True in kinds[kinds.index(False):]:
            late.append(f"{name}: line {body[kinds.index(True, kinds.index(False))].lineno}")
    assert late == []
