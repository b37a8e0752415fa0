"""The graph DSL front end: lexer and recursive-descent parser producing the Graph IR.

Public entry points: `parse(text, source_name)`, `graph(text)`, `load_graph(path)` (.oig, .json
or .rs) and `graph_from_rust(text)`. docs/dsl.md describes the language.
"""

from .parser import parse
from .sources import graph, graph_from_rust, load_graph

__all__ = ["parse", "graph", "load_graph", "graph_from_rust"]
