"""Graphviz DOT for a Graph: one cluster per block, nodes labelled by their trace description.

Edges:
- control flow (solid): node to node in order inside a block and a loop body; a loop to the first
  node of its body ("body") and the body's last node back to the loop ("repeat"); a `branch` to
  the first node of its target blocks ("then", "else", or "call" when unconditional). Nothing
  continues after a `return`.
- yield/await (dotted): from a `yield` in the entry block to each consumer's `await` of a shared
  variable, and from each consumer's `yield` back to the entry block's `await`.
- data (dashed, grey): from the node that last produced a variable to each node that reads it,
  in text order within a block. A `branch` counts as producing what its target blocks write, and
  a read in a branch target with no producer before it in that block links from the producer
  the caller had at the branch. Values passed by yield/await show as the dotted edges only.

The output depends only on the graph: blocks are drawn `entry` first, then by name, so a graph
renders the same whether it was read from DSL text (declaration order) or JSON (sorted order).
"""

from __future__ import annotations

from .describe import describe
from .nodes import (
    Assign,
    Await,
    Branch,
    CacheDecrement,
    CacheIncrement,
    CacheRead,
    CacheReset,
    CacheWrite,
    Graph,
    Loop,
    Node,
    Op,
    Return,
    Transfer,
    Yield,
    walk,
)

_SHAPES = {Branch: "diamond", Loop: "hexagon", Yield: "cds", Await: "cds", Return: "oval"}


def graph_to_dot(graph: Graph, name: str = "graph") -> str:
    return _DotWriter(graph).render(name)


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _DotWriter:
    def __init__(self, graph: Graph):
        self.blocks = sorted(graph.blocks.values(), key=lambda b: (b.name != "entry", b.name))
        self.ids: dict[int, str] = {}          # id(node) -> DOT node id
        self.block_of: dict[int, str] = {}     # id(node) -> block name
        self.lines: list[str] = []
        self.edges: list[str] = []
        self.anchors: dict[str, str] = {}      # block name -> DOT id of its first node (or placeholder)
        self.drawn: set[tuple[int, int, str]] = set()   # data edges already drawn
        for block in self.blocks:
            for node in walk(block.nodes):
                self.ids[id(node)] = f"n{len(self.ids)}"
                self.block_of[id(node)] = block.name

    def render(self, name: str) -> str:
        self.lines += [f"digraph {_q(name)} {{", "  rankdir=TB;",
                       '  node [shape=box, fontname="Helvetica", fontsize=10];',
                       '  edge [fontname="Helvetica", fontsize=9];']
        for block in self.blocks:
            self.cluster(block.name, block.nodes)
        for block in self.blocks:
            self.control(block.nodes)
        self.async_edges()
        self.data_edges()
        return "\n".join(self.lines + self.edges + ["}"]) + "\n"

    # -- nodes and clusters

    def cluster(self, name: str, nodes: tuple[Node, ...]) -> None:
        self.lines += [f"  subgraph {_q('cluster_' + name)} {{", f"    label={_q('block ' + name)};"]
        if nodes:
            self.anchors[name] = self.ids[id(nodes[0])]
        else:
            self.anchors[name] = _q(f"empty_{name}")
            self.lines.append(f"    {self.anchors[name]} [label=\"(empty)\", shape=plaintext];")
        self.node_lines(nodes, "    ")
        self.lines.append("  }")

    def node_lines(self, nodes: tuple[Node, ...], indent: str) -> None:
        for node in nodes:
            shape = _SHAPES.get(type(node), "box")
            label = f"[{node.index}] {describe(node)}"
            self.lines.append(f"{indent}{self.ids[id(node)]} [label={_q(label)}, shape={shape}];")
            if isinstance(node, Loop):
                self.lines += [f"{indent}subgraph {_q(f'cluster_loop_{self.ids[id(node)]}')} {{",
                               f"{indent}  label={_q(f'loop {node.name} body')};", f"{indent}  style=dashed;"]
                self.node_lines(node.body, indent + "  ")
                self.lines.append(f"{indent}}}")

    # -- control flow

    def edge(self, a: str, b: str, **attrs: str) -> None:
        extra = ", ".join(f"{k}={_q(v)}" for k, v in attrs.items())
        self.edges.append(f"  {a} -> {b}" + (f" [{extra}];" if extra else ";"))

    def control(self, nodes: tuple[Node, ...]) -> None:
        for prev, node in zip(nodes, nodes[1:], strict=False):
            if not isinstance(prev, Return):
                self.edge(self.ids[id(prev)], self.ids[id(node)])
        for node in nodes:
            me = self.ids[id(node)]
            if isinstance(node, Loop) and node.body:
                self.edge(me, self.ids[id(node.body[0])], label="body")
                if not isinstance(node.body[-1], Return):
                    self.edge(self.ids[id(node.body[-1])], me, label="repeat", constraint="false")
                self.control(node.body)
            elif isinstance(node, Branch):
                targets = [("then", node.then_block), ("else", node.else_block)] if node.cond is not None \
                    else [("call", node.then_block)]
                for label, target in targets:
                    if target is not None:
                        self.edge(me, self.target_anchor(target), label=label, color="blue", fontcolor="blue")

    def target_anchor(self, block: str) -> str:
        if block in self.anchors:
            return self.anchors[block]
        missing = f"missing_{block}"
        self.anchors[block] = _q(missing)
        self.lines.append(f"  {_q(missing)} [label={_q(f'block {block} (undefined)')}, color=red, style=dashed];")
        return self.anchors[block]

    def async_edges(self) -> None:
        nodes = [n for b in self.blocks for n in walk(b.nodes)]
        awaits = [n for n in nodes if isinstance(n, Await)]
        for y in (n for n in nodes if isinstance(n, Yield)):
            for a in awaits:
                shared = [v for v in y.vars if v in a.vars]
                # values pass between the entry block and the consumers, never consumer to consumer
                if shared and (self.block_of[id(y)] == "entry") != (self.block_of[id(a)] == "entry"):
                    self.edge(self.ids[id(y)], self.ids[id(a)], label=", ".join(shared), style="dotted",
                              constraint="false")

    # -- data dependencies

    def data_edges(self) -> None:
        # Variables each block writes, so that a branch node stands for what its targets produce.
        writes = {b.name: {v for n in walk(b.nodes) for v in _writes(n)} for b in self.blocks}
        callers: dict[str, list[dict[str, Node]]] = {}   # target block -> producers seen at each call
        pending: list[tuple[str, Node, str]] = []         # reads with no producer earlier in their block
        for block in self.blocks:
            last: dict[str, Node] = {}
            for node in walk(block.nodes):
                for var in _reads(node):
                    if var in last:
                        self.data_edge(last[var], node, var)
                    else:
                        pending.append((block.name, node, var))
                if isinstance(node, Branch):
                    targets = [t for t in (node.then_block, node.else_block) if t is not None]
                    for target in targets:
                        callers.setdefault(target, []).append(dict(last))
                    for var in set().union(*(writes.get(t, set()) for t in targets)):
                        last[var] = node
                for var in _writes(node):
                    last[var] = node
        for block_name, node, var in pending:
            for producers in callers.get(block_name, ()):
                if var in producers:
                    self.data_edge(producers[var], node, var)

    def data_edge(self, src: Node, dst: Node, var: str) -> None:
        key = (id(src), id(dst), var)
        if src is not dst and key not in self.drawn:
            self.drawn.add(key)
            self.edge(self.ids[id(src)], self.ids[id(dst)], label=var, style="dashed", color="gray50",
                      fontcolor="gray50", constraint="false")


def _reads(node: Node) -> list[str]:
    if isinstance(node, Op):
        return list(dict.fromkeys(i.name for i in node.inputs))
    if isinstance(node, CacheRead):
        return [node.src.base]
    if isinstance(node, (CacheWrite, Transfer)):
        return [node.src.name]
    if isinstance(node, (CacheIncrement, CacheDecrement)):
        return [node.target]
    if isinstance(node, Branch):
        return [node.cond] if node.cond is not None else []
    if isinstance(node, Loop):
        return [b for b in (node.start, node.end) if isinstance(b, str)]
    if isinstance(node, Yield):
        return list(node.vars)
    return []


def _writes(node: Node) -> list[str]:
    if isinstance(node, Op):
        return [node.output]
    if isinstance(node, (CacheRead, Transfer)):
        return [node.dst.name]
    if isinstance(node, Assign):
        return [node.name]
    if isinstance(node, CacheWrite):
        return [node.dst.base]
    if isinstance(node, (CacheIncrement, CacheDecrement)):
        return [node.target]
    if isinstance(node, CacheReset):
        return [node.target.base]
    if isinstance(node, Await):
        return list(node.vars)
    return []
