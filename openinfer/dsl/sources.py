"""Where graphs come from: DSL text, `.oig` files, graph JSON files and Rust files with `graph!`."""

from __future__ import annotations

import os

from ..errors import DslError, GraphFileError
from ..files import read_text
from ..ir.json import graph_from_json
from ..ir.nodes import Graph
from .lexer import Source
from .parser import parse, parse_source
from .rust_source import find_graph_bodies


def graph(text: str, name: str = "<string>") -> Graph:
    """DSL text (the body of `graph! { ... }`) -> Graph. `name` is what errors call the source."""
    return parse(text, name)


def load_graph(path: str | os.PathLike, *, index: int = 0) -> Graph:
    """A Graph from a file, by extension:

    - `.json`: graph JSON in the original's format (`openinfer graph json` writes it);
    - `.rs`: the `index`-th `graph! { ... }` in a Rust source file (errors keep the file's line
      numbers);
    - anything else (normally `.oig`): DSL text.

    Raises DslError for content that does not parse, GraphFileError (a DslError) when the file
    cannot be read.
    """
    name = os.fspath(path)
    text = read_text(name, GraphFileError)
    ext = os.path.splitext(name)[1].lower()
    if ext == ".json":
        return graph_from_json(text, name)
    if ext == ".rs":
        return graph_from_rust(text, name, index=index)
    return parse(text, name)


def graph_from_rust(text: str, name: str = "<rust>", *, index: int = 0) -> Graph:
    """The `index`-th `graph! { ... }` body in Rust source text, parsed."""
    src = Source(text, name)
    bodies = find_graph_bodies(src)
    if not bodies:
        raise DslError(f"{name}: no `graph! {{ ... }}` found")
    if not 0 <= index < len(bodies):
        raise DslError(f"{name}: graph index {index} is out of range; the file has {len(bodies)} "
                       f"graph! invocation{'s' if len(bodies) != 1 else ''} (0..{len(bodies) - 1})")
    start, end = bodies[index]
    return parse_source(src, start, end)
