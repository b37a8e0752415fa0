"""Argument normalisation shared by the engines: models and graphs given as objects or paths."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike

from .ir.bind import bind
from .ir.bound import BoundGraph


def open_model(model):
    """An opened model from a model object, a path, or None."""
    if model is None or hasattr(model, "tensor_names"):
        return model
    from .oinf import ModelLoader

    return ModelLoader.open(model)


def load_graph_arg(graph):
    """A Graph from a Graph, DSL text, or a path to a .oig/.json/.rs file."""
    from .dsl import graph as parse_text
    from .dsl import load_graph
    from .ir.nodes import Graph

    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, PathLike) or (isinstance(graph, str) and "\n" not in graph and "{" not in graph):
        return load_graph(graph)
    return parse_text(graph)


def bind_inputs(model, graph, sizevars: Mapping[str, int] | None = None, dynamic: Mapping[str, int] | None = None):
    """(model, graph, bound graph) from user-facing arguments; `dynamic` maps sizevars chosen at
    run time to their bounds (openinfer/dims.py)."""
    m = open_model(model)
    g = load_graph_arg(graph)
    bound: BoundGraph = bind(g, m, sizevars, dynamic)
    return m, g, bound
