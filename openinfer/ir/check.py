"""What a bound graph resolved to, as `openinfer check` prints it: sizevars, each variable's
shape and data source, then each block's nodes with the op mode and output type."""

from __future__ import annotations

from . import nodes as ir
from .bound import BoundGraph
from .describe import describe


def summary(bound: BoundGraph) -> str:
    g = bound.graph
    lines = [f"graph {g.source_name or '<string>'}: OK"]
    if bound.sizevars:
        lines.append("sizevars: " + ", ".join(f"{k}={v}" for k, v in sorted(bound.sizevars.items())))
    lines.append("variables:")
    width = max((len(v.name) for v in bound.vars.values()), default=4)
    for v in bound.vars.values():
        kind = v.kind.section if v.kind else "assign"
        source = ""
        if v.model_key:
            source = f"  <- model \"{v.model_key}\""
        elif v.prefix_keys:
            keys = sorted(v.prefix_keys.items())
            source = f"  <- {len(keys)} model tensors \"{keys[0][1]}\" .. \"{keys[-1][1]}\""
        elif v.init is not None:
            source = f"  = {v.init}"
        table = ""
        if v.table is not None:
            idx = ", ".join(f"{i}={v.table.fixed.get(i, '*')}" for i in v.table.indices + v.table.auto_dim)
            table = f"  {'auto_dim' if v.table.is_auto_dim else 'table'}({idx})"
        lines.append(f"  {v.name:<{width}}  {kind:<10} {v.dtype.name}{list(v.shape)}{table}{source}")
    for name, block in g.blocks.items():
        role = "entry" if name == bound.entry else ("consumer" if name in bound.async_blocks else "branch target")
        lines.append(f"block {name} ({role}):")
        _nodes(bound, block.nodes, lines, "  ")
    return "\n".join(lines)


def _nodes(bound: BoundGraph, nodes, lines: list[str], pad: str) -> None:
    for n in nodes:
        text = f"{pad}#{n.index} {describe(n)}"
        if isinstance(n, ir.Op):
            inf = bound.ops[n.index].inference
            text += f"    [{inf.mode}] -> {inf.out_dtype.name}{list(inf.out_shape)}"
        lines.append(text)
        if isinstance(n, ir.Loop):
            _nodes(bound, n.body, lines, pad + "  ")
