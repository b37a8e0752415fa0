"""Divergence bisection: replay a step on the reference and a compiled program node by node and
report the first node whose output differs.

Both engines replay the earlier steps with the same inputs, then run the failing step with a
per-node observer: the reference through `iterate()`, the compiled program through its trace
hook. After each node, the variables it writes are fetched on both sides; nodes are matched by
(graph node index, how many times that node ran so far), so loops and branches line up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .compare import Comparison, compare, table
from .inputs import random_inputs
from .ir.bound import BoundGraph
from .reference.executor import ReferenceExecutor


@dataclass(frozen=True)
class Divergence:
    node_index: int
    occurrence: int
    desc: str
    location: str
    rows: tuple[Comparison, ...]


@dataclass(frozen=True)
class BisectReport:
    step: int
    nodes_compared: int
    first: Divergence | None

    def text(self) -> str:
        if self.first is None:
            return f"bisect: step {self.step}: all {self.nodes_compared} node outputs match the reference"
        d = self.first
        return (f"bisect: step {self.step}: first diverging node is #{d.node_index} `{d.desc}` at {d.location}"
                f" (execution {d.occurrence + 1} of that node)\n" + table(list(d.rows)))


def bisect(bound: BoundGraph, simulator, seed: int, step: int, *,
           inputs: Callable[[int], Mapping] | None = None) -> BisectReport:
    """Replay steps 0..`step` on both engines, `step` node by node. Each step's inputs come from
    `inputs(step)` when given (`openinfer sim --inputs`), else `random_inputs` from `seed`."""
    feed = inputs if inputs is not None else (lambda s: random_inputs(bound, seed, s))
    ref = ReferenceExecutor(bound)
    ex = simulator.make_executor()
    for s in range(step):
        step_inputs = feed(s)
        for engine in (ref, ex):
            engine.insert(**step_inputs)
            engine.run_step()
    observable = {v.name for v in simulator.program.vars if v.gettable}

    def snapshot(engine, node_index: int) -> dict:
        return {v: engine.fetch(v) for v in simulator.node_outputs.get(node_index, []) if v in observable}

    step_inputs = feed(step)
    ref_records: dict[tuple[int, int], dict] = {}
    order: list[tuple[int, int]] = []
    counts: dict[int, int] = {}
    ref.insert(**step_inputs)
    for event in ref.iterate():
        k = counts.get(event.node_index, 0)
        counts[event.node_index] = k + 1
        ref_records[(event.node_index, k)] = snapshot(ref, event.node_index)
        order.append((event.node_index, k))

    sim_records: dict[tuple[int, int], dict] = {}
    sim_counts: dict[int, int] = {}

    def observe(node_index: int) -> None:
        k = sim_counts.get(node_index, 0)
        sim_counts[node_index] = k + 1
        sim_records[(node_index, k)] = snapshot(ex, node_index)

    ex.observe(observe)
    ex.insert(**step_inputs)
    try:
        ex.run_step()
    finally:
        ex.observe(None)

    compared = 0
    for key in order:
        want = ref_records[key]
        if not want or key[0] in simulator.program.fused_nodes:   # fused nodes leave no value behind
            continue
        got = sim_records.get(key)
        node = simulator.nodes[key[0]]
        loc = str(node.loc) if node.loc else f"node {key[0]}"
        if got is None:
            return BisectReport(step, compared, Divergence(key[0], key[1], _desc(node), loc, ()))
        rows = tuple(compare(v, bound.vars[v].dtype, want[v], got[v]) for v in want)
        compared += 1
        if not all(r.ok for r in rows):
            return BisectReport(step, compared, Divergence(key[0], key[1], _desc(node), loc, rows))
    return BisectReport(step, compared, None)


def _desc(node) -> str:
    from .ir.describe import describe

    return describe(node)
