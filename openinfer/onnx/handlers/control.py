"""ONNX control flow: If, whose then_branch and else_branch are subgraphs reading the outer
scope's values by name; Loop and Scan are refused (`REFUSED_OPS`).

- A condition known at import (a constant, or folded from shapes): the chosen branch's nodes are
  imported in place, its outputs become the If's; nothing of the other branch is emitted.
- A condition known at run time: each branch becomes a block of its own that computes its
  outputs and copies them into the If's outputs (volatile, declared once), and the If becomes
  `branch cond then_block else_block;` (the DSL calls the chosen block as a subroutine and goes
  on after it), the condition a bool scalar (reshaped from a 1-element tensor, cast from another
  dtype). Both branches must give each output the same dtype and shape.

A branch's nodes are imported by the driver (`subgraph`, openinfer/onnx/importer.py) as the
graph's are, without the fused patterns (openinfer/onnx/fusions.py matches the graph's own
nodes); the values they define are dropped after it (ONNX scopes them to the branch), so sibling
branches may reuse names. An If inside a branch is imported the same way (a block may branch
again).
"""

from __future__ import annotations

import numpy as np

from ...errors import OnnxImportError
from ..context import ImportState, NodeContext, Value, handler, quoted, sanitize
from ..problems import shape_problem

#: ONNX op types the importer knows and refuses: why, and what to do instead.
REFUSED_OPS = {
    "Loop": "Loop is not imported: its trip count and condition are evaluated while it runs and its "
            "body carries values from one iteration to the next. Export the model with the loop unrolled "
            "(torch.onnx.export traces a Python loop into straight-line ops; a torch.jit.script'ed loop "
            "becomes a Loop), or write the loop in the DSL by hand (`loop name (i in 0..n) { ... }`)",
    "Scan": "Scan is not imported: its body runs once per element of a sequence, carrying state between "
            "iterations. Export the model with the scan unrolled (traced, not scripted); recurrent layers "
            "exported as RNN, GRU or LSTM are imported (as a DSL `loop` over the time steps)",
}


def outer_reads(node) -> list[str]:
    """The values of the enclosing scopes that `node`'s subgraphs (an If's branches, at any
    depth) read by name, in order of first use; [] for a node without subgraphs."""
    reads: list[str] = []
    for a in node.attribute:
        for g in [a.g] if a.HasField("g") else list(a.graphs):
            defined = {t.name for t in g.initializer} | {i.name for i in g.input}
            for n in g.node:
                for x in [*n.input, *outer_reads(n)]:
                    if x and x not in defined and x not in reads:
                        reads.append(x)
                defined.update(n.output)
    return reads


@handler("If", note="a condition known at import: the chosen branch imported in place; at run time: "
                    "`branch cond then else` over two blocks writing the same outputs (same dtype and "
                    "shape from both branches); tensor outputs only")
def _if(c: NodeContext) -> None:
    c.allow("then_branch", "else_branch")
    (cond,) = c.inputs(1, 1)
    outs = list(c.node.output)
    branches = {"then_branch": c.attrs["then_branch"], "else_branch": c.attrs["else_branch"]}
    for where, g in branches.items():
        if len(g.output) != len(outs):
            c.fail(f"{where} has {len(g.output)} outputs for the If's {len(outs)}")
        for o in g.output:
            if not o.type.HasField("tensor_type") and o.type.WhichOneof("value") is not None:
                c.fail(f"{where} output `{o.name}` has {o.type.WhichOneof('value').replace('_', ' ')}: only tensor "
                       "outputs are imported")
    if int(np.prod(cond.shape)) != 1:
        c.fail(f"the condition has shape {list(cond.shape)}: ONNX's If takes a single element")
    if cond.const is not None:
        _folded(c, cond, branches, outs)
    else:
        _at_run_time(c, cond, branches, outs)


def _folded(c: NodeContext, cond: Value, branches: dict, outs: list[str]) -> None:
    """The branch the constant condition picks, imported in place: its outputs are the If's."""
    imp = c.imp
    where = "then_branch" if bool(cond.const.reshape(-1)[0]) else "else_branch"
    if cond.sized:                      # computed from the sizevars' import values: the choice holds for them
        for sv in sorted({sv for d in (*cond.dims, *(cond.elements or ())) for sv in d.sizevars}
                         or set(imp.sizevars)):
            imp.fixed.setdefault(sv, sanitize(c.node.input[0]))     # the condition, by its (ONNX) name
    g = branches[where]
    produced = {o for n in g.node for o in n.output}
    names = [imp.dsl_name(o) for o in outs]             # (outside the scope: they outlive it)
    with _Scope(imp) as scope:
        for name, inner in zip(names, (x.name for x in g.output), strict=True):
            if inner in produced and inner not in imp.onnx_to_dsl:
                imp.onnx_to_dsl[inner] = name           # the branch's node writes the If's output
        _import_branch(c, g, where)
        results = [scope.value(x.name, c, where) for x in g.output]
    for o, v in zip(outs, results, strict=True):
        c.result(o, v)


def _at_run_time(c: NodeContext, cond: Value, branches: dict, outs: list[str]) -> None:
    """`branch cond then else;` over two new blocks, each computing its branch's outputs into the If's."""
    imp = c.imp
    flag = c.var(cond, 0)
    if cond.dims:
        flag = c.emit("reshape", [flag], {}, cond.dtype, (), temp=f"{c.node.input[0]}_scalar").var
    if cond.dtype != "bool":
        flag = c.emit("cast", [flag], {"to": "bool"}, "bool", (), temp=f"{c.node.input[0]}_bool").var
    base = sanitize(c.node.name or outs[0])
    names = [imp.dsl_name(o) for o in outs]
    at = len(imp.blocks)                    # (before the blocks of an If inside a branch)
    made = {}
    for where, g in branches.items():
        block = imp.fresh(f"{base}_{where.split('_')[0]}")
        made[where] = block, *_block(c, g, where, names)
    for o, name, a, b in zip(outs, names, made["then_branch"][2], made["else_branch"][2], strict=True):
        if a.dtype != b.dtype or a.dims != b.dims:
            c.fail(f"output {quoted(o)} is {_typed(a)} from then_branch and {_typed(b)} from else_branch: "
                   "both branches must give the same dtype and shape when the condition is known only at run time")
        problem = shape_problem(list(a.shape), a.dtype, imp.sizevars)
        if problem:
            c.fail(problem)
        imp.declare("volatile", name, a.dtype, a.dims, o)
        c.result(o, Value(a.dtype, a.dims, var=name))
    imp.blocks[at:at] = [(block, lines) for block, lines, _ in made.values()]
    imp.lines.append((f"branch {flag} {made['then_branch'][0]} {made['else_branch'][0]};",
                      f"{c.label} (If): the condition known at run time"))


def _block(c: NodeContext, g, where: str, names: list[str]) -> tuple[list, list[Value]]:
    """The lines of one branch's block, which leave its outputs in the variables `names`, and the
    branch's output values. The node computing an output writes the If's variable itself; an
    output the branch does not compute (a constant, an outer value) is copied into it."""
    imp = c.imp
    produced = {o for n in g.node for o in n.output}
    outer = [v for v in imp.values.values() if v.var is None]
    declared = len(imp.decls["volatile"])
    saved = imp.lines, imp.line_nodes
    imp.lines, imp.line_nodes = [], []
    try:
        with _Scope(imp) as scope:
            for name, x in zip(names, g.output, strict=True):
                if x.name in produced and x.name not in imp.onnx_to_dsl:
                    imp.onnx_to_dsl[x.name] = name
            _import_branch(c, g, where)
            results = [scope.value(x.name, c, where) for x in g.output]
            for name, v, x in zip(names, results, g.output, strict=True):
                if v.var is None and imp.onnx_to_dsl.get(x.name) == name:
                    imp.onnx_to_dsl[x.name] = imp.fresh(sanitize(x.name))     # folded: a constant of its own
                src = imp.tensor(v, x.name)
                if src != name:
                    imp.lines.append((f"op reshape({src}) >> {name};",
                                      f"{c.label} {where}: its output {quoted(x.name)}"))
        lines = imp.lines
    finally:
        imp.lines, imp.line_nodes = saved
    # the If declares its outputs once, for both blocks
    for k in reversed(range(declared, len(imp.decls["volatile"]))):
        if imp.decls["volatile"][k][0].split(":", 1)[0] in names:
            del imp.decls["volatile"][k]
            del imp.volatile_nodes[k:k + 1]
    # an outer value the branch made a variable of (a constant filled at its run-time size) is
    # filled before the branch: the outer scope's later nodes read it too
    filled = {v.var for v in outer if v.var is not None}
    hoisted = [line for line in lines if line[0].rsplit(">>", 1)[-1].strip(" ;") in filled]
    imp.lines += hoisted
    return [line for line in lines if line not in hoisted], results


def _typed(v: Value) -> str:
    return f"{v.dtype}{list(v.shape)}"


def _import_branch(c: NodeContext, g, where: str) -> None:
    try:
        c.imp.subgraph(g, f"{c.label}/{where}")
    except OnnxImportError as exc:
        c.fail(f"{where}: {exc}")


class _Scope:
    """The values (and their DSL names) a branch defines, dropped when it ends: ONNX scopes them
    to the branch, and a sibling branch may define the same names."""

    def __init__(self, imp: ImportState):
        self.imp = imp

    def __enter__(self):
        self.values, self.names = set(self.imp.values), set(self.imp.onnx_to_dsl)
        return self

    def value(self, name: str, c: NodeContext, where: str) -> Value:
        if name not in self.imp.values:
            c.fail(f"{where} output `{name}` is computed by no node")
        return self.imp.values[name]

    def __exit__(self, *exc) -> None:
        for k in set(self.imp.values) - self.values:
            del self.imp.values[k]
        for k in set(self.imp.onnx_to_dsl) - self.names:
            del self.imp.onnx_to_dsl[k]
