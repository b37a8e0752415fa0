"""The package's structure, from its source: no import cycle between the packages of openinfer/
(each stage imports only the stages before it), no module over 1,000 lines, no renderer or
target probed with getattr, and docs/contributing.md's file lists naming files that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "openinfer"


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The openinfer modules `path` imports (anywhere in it: function-local imports count)."""
    tree = ast.parse(path.read_text())
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("openinfer"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("openinfer"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
    return out


def _unit(module: str) -> str:
    """The package a module belongs to for layering: openinfer.<package>, or the top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_import_cycle_between_packages():
    modules = {_module(p): p for p in PKG.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        src = _unit(name)
        for target in _imports(path):
            while target and target not in modules:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            dst = _unit(target) if target else ""
            if dst and dst != src and dst != "openinfer":       # (openinfer/__init__ re-exports the API)
                edges.setdefault(src, set()).add(dst)
    # Tarjan: strongly connected components of more than one package are cycles
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_no_module_over_a_thousand_lines():
    long = {str(p.relative_to(REPO)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 1000}
    assert not long, long


def test_no_getattr_probing_of_targets():
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"getattr\([^)]*(renderer|target|Renderer|Target)", text), path


def test_contributing_names_files_that_exist():
    text = (REPO / "docs" / "contributing.md").read_text()
    paths = set(re.findall(r"`((?:openinfer|templates|hal|devices|tests|tools)/[\w/.]+\.(?:py|yaml|json|h|c|md))`",
                           text))
    paths |= set(re.findall(r"\b((?:tests|tools)/[\w/]+\.py)\b", text))
    assert len(paths) > 15
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, missing
    wings = sorted(p.name for p in (PKG / "targets").iterdir() if (p / "__init__.py").exists())
    for wing in wings:
        assert f"`{wing}/`" in text, wing
        assert (REPO / "templates" / wing).is_dir(), wing
