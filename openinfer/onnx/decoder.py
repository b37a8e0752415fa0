"""Decode steps with a KV cache: ONNX past/present key-values as persistent cache tables.

An exported decode step takes the keys and values of the tokens so far as inputs
(`past_key_values.0.key: [batch, heads, past, head_dim]`) and returns them with the new token's
appended (`present.0.key: [batch, heads, past + 1, head_dim]`): a Concat of the past input and the
new rows along the sequence axis, whose output is both a graph output and what attention reads.
Imported as is, `past` is one more size fixed at import: one build per length. Here each such
pair becomes what a hand-written decoder (examples/decoder.py) has instead:

- a persistent cache table per past input, `K(t): f32[batch, heads, head_dim] @table
  @fixed(t=CAPACITY)`, one row per token, and a persistent counter `pos` of the tokens so far
  (where the layers become one loop, openinfer/onnx/layers.py merges the layers' tables into one
  indexed by the layer: `K(l, t)`, accessed at `[l, ...]`);
- the Concat becomes an append and a read of the rows in use: `cache.write new >> K[posv];`
  then `cache.read K[0..pos] >> rows;` (after `cache.increment pos`), which sets the dynamic
  size `kv` (the keys attended to, past + 1) for everything after it; the rows are transposed
  back to the model's layout, so attention reads them as it read the Concat;
- the model's past length (Shape of a past input) is `kv - 1`: its shape arithmetic stays
  symbolic (dims/`Value.elements`), and where a value computed from it is needed as data (the
  position of the new token, a causal mask over the cached keys), it is computed at run time
  from `posv`, the counter read at the step's start (`runtime_input`).

The past and present tensors are then neither inputs nor outputs: the state lives in the step
(`openinfer generate` runs it: the model's metadata names its roles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dims import Poly, SizeVar
from .context import NUMPY_DTYPES, Dim, NodeContext, Value, dim_of, dsl_dim, quoted, sanitize

#: the dynamic size of the keys attended to (past + 1), set by each step's cache read
KV = "kv"
#: the persistent token counter and the scalar the step reads it into
POS, POSV, POSV64 = "pos", "posv", "posv_i64"


@dataclass(frozen=True)
class KvPair:
    past: str            # the graph input (ONNX name)
    present: str         # the graph output: Concat(past, new) along `axis`
    axis: int
    length: str          # the ONNX dim_param of the past length (one for every pair)
    table: str           # the DSL cache table


def find_kv_pairs(g) -> list[KvPair]:
    """The past/present pairs of a decode step: a graph input Concat'ed first along an axis whose
    dim is symbolic, the result a graph output."""
    inputs = {i.name: i for i in g.input}
    initializers = {t.name for t in g.initializer}
    outputs = {o.name for o in g.output}
    pairs = []
    for node in g.node:
        if node.op_type != "Concat" or len(node.input) != 2 or node.output[0] not in outputs:
            continue
        past = node.input[0]
        if past not in inputs or past in initializers:
            continue
        dims = inputs[past].type.tensor_type.shape.dim
        axis = next((int(a.i) for a in node.attribute if a.name == "axis"), None)
        if axis is None or not -len(dims) <= axis < len(dims) or not dims[axis].HasField("dim_param"):
            continue
        axis %= len(dims)
        pairs.append(KvPair(past, node.output[0], axis, dims[axis].dim_param, sanitize(f"cache_{past}")))
    return pairs


def past_dim(capacity: int) -> Dim:
    """The past length: kv - 1, imported at its largest (capacity - 1) as dynamic dims are."""
    return dim_of(capacity - 1, Poly.atom(SizeVar(KV, capacity)) + Poly.const(-1))


def declare_state(imp, capacity: int) -> None:
    """The counter and its reads at the step's start: `posv` (the past length) for the writes and
    for values computed from it, the count of this token (reads take rows 0..pos), and a read that
    sets `kv` before anything is computed at it (a causal mask over the cached keys comes before
    the first layer's cache read): one flag per token in a table of its own."""
    seen, yes, rows = imp.fresh("cache_tokens"), imp.fresh("cache_token_flag"), imp.fresh("cache_tokens_in_use")
    imp.decls["constant"].append((f"{yes}: bool @init(true);", "what each token writes into its row of cache_tokens"))
    imp.decls["persistent"].append((f"{POS}: i32 @init(0);", "tokens in the cache: each step appends one"))
    imp.decls["persistent"].append((f"{seen}(t): bool @table @fixed(t={capacity});", "a row per cached token"))
    imp.decls["volatile"].append((f"{POSV}: i32;", "the past length: this token's row in the cache"))
    imp.decls["volatile"].append((f"{POSV64}: i64;", "posv as ONNX's int64, for positions computed from it"))
    imp.decls["volatile"].append((f"{rows}: bool[{KV}];", f"read to set {KV}, the tokens attended to"))
    imp.volatile_nodes += [None, None, None]
    for line, note in ((f"cache.read {POS} >> {POSV};", "the tokens cached before this one"),
                       (f"op cast({POSV}, to=i64) >> {POSV64};", ""),
                       (f"cache.increment {POS};", "this token: the reads below take rows 0..pos"),
                       (f"cache.write {yes} >> {seen}[{POSV}];", ""),
                       (f"cache.read {seen}[0..{POS}] >> {rows};", f"sets {KV} = pos for this step")):
        imp.lines.append((line, note))
        imp.line_nodes.append(None)
    imp.used.update((POS, POSV, POSV64))


def append_and_read(c: NodeContext, pair: KvPair, capacity: int) -> None:
    """The Concat of `pair`: the new rows appended to its table, and the rows in use read back in
    the model's layout (the Concat's output, which attention reads)."""
    past, new = c.inputs(2, 2)
    (out,) = c.outputs()
    axis = pair.axis
    if new.dims[axis].size != 1 or new.dims[axis].expr is not None:
        c.fail(f"the new rows of `{pair.past}` are {new.dims[axis].text()} along axis {axis}: a decode step "
               "appends one token (export the step with one input token)")
    if any(d.expr is not None for d in new.dims):
        c.fail(f"the new rows of `{pair.past}` have a symbolic dim {[d.text() for d in new.dims]}: the cache "
               "tables' rows are static (export the decode step with static batch and heads)")
    entry = tuple(d for k, d in enumerate(new.dims) if k != axis)
    imp = c.imp
    shape = ", ".join(d.text() for d in entry)
    imp.decls["persistent"].append((f"{pair.table}(t): {new.dtype}[{shape}] @table @fixed(t={capacity});",
                                    f"the rows of ONNX {quoted(pair.past)}, one per token"))
    row = c.emit("reshape", [c.var(new, 1)], {}, new.dtype, entry, temp=f"{pair.table}_row")
    imp.lines.append((f"cache.write {row.var} >> {pair.table}[{POSV}];", f"{c.label}: the new token's row"))
    kv = Dim(capacity, Poly.atom(SizeVar(KV, capacity)))
    rows_dims = (kv, *entry)
    rows = imp.fresh(sanitize(f"{pair.table}_rows"))
    imp.declare("volatile", rows, new.dtype, rows_dims, None)
    imp.lines.append((f"cache.read {pair.table}[0..{POS}] >> {rows};", f"{c.label}: the rows in use (sets {KV})"))
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(new.dims)))
    dims = tuple(rows_dims[p] for p in perm)
    c.emit("transpose", [rows], {"perm": perm}, new.dtype, dims, out=out)


# ---------------------------------------------------------------------------------------------
# values computed from the past length, at run time


def depends_on_kv(v: Value) -> bool:
    return any(KV in d.sizevars for d in (*v.dims, *(v.elements or ())))


#: ops whose fold keeps each element's size expression (`Value.elements`): shape arithmetic, which
#: stays symbolic; any other op reading a value computed from the past length reads it at run time
_ELEMENT_OPS = {"Shape", "Size", "Squeeze", "Unsqueeze", "Reshape", "Concat", "Slice", "Cast", "Add", "Sub", "Mul",
                "Div", "Range", "Expand", "ConstantOfShape"}


def runtime_inputs(c: NodeContext) -> None:
    """Replaces the inputs of `c` that were folded from the past length by run-time variables,
    unless the node is shape arithmetic on their elements (then it folds symbolically)."""
    op = c.node.op_type
    # arithmetic keeps the elements' expressions only on integer vectors (openinfer/onnx/handlers/elementwise.py)
    sizes = not (op in ("Add", "Sub", "Mul", "Div") and any(
        v is not None and (v.dtype not in ("i32", "i64") or len(v.dims) > 1) for v in c.ins))
    for k, v in enumerate(c.ins):
        if v is None or not v.runtime or v.const is None:
            continue
        if sizes and op in _ELEMENT_OPS and (v.elements is not None or op in ("Shape", "Size", "Expand",
                                                                             "ConstantOfShape")):
            continue
        if op == "Gather" and k == 1 and c.ins[0] is not None and c.ins[0].elements is not None:
            continue
        c.ins[k] = Value(v.dtype, v.dims, var=_computed(c, v, c.node.input[k]))


def _computed(c: NodeContext, v: Value, onnx_name: str) -> str:
    """A variable computing `v` at run time from posv: elements linear in the past length
    (positions: a * posv + b), a count from 0 (a Range to past + 1) or one value throughout."""
    imp = c.imp
    if v.var is not None and v.const is None:
        return v.var
    base = sanitize(f"{onnx_name}_at_run_time")
    dims_text = ", ".join(d.text() for d in v.dims)
    if any(d.expr is not None and not dsl_dim(d) for d in v.dims):
        c.fail(f"the value {quoted(onnx_name)}, computed from the past length, has dims [{dims_text}] the DSL "
               "cannot write")
    if v.elements is not None and v.dtype != "bool":
        # each element a * (kv) + b with kv = posv + 1: a * posv + (a + b)
        slope, offset = [], []
        for e in v.elements:
            terms = dict(e.expr.terms) if e.expr is not None else {(): e.size}
            kv_terms = {m: k for m, k in terms.items() if m}
            if any(len(m) != 1 or m[0].name != KV for m in kv_terms):
                c.fail(f"the value {quoted(onnx_name)} is {e.expr.pretty()}: only sizes linear in the cache length "
                       "can be computed at run time")
            a = sum(kv_terms.values())
            slope.append(a)
            offset.append(terms.get((), 0) + a)
        shape = v.shape
        np_dtype = NUMPY_DTYPES[v.dtype]
        scalar = _posv_as(c, v.dtype)
        if not any(slope):
            return imp.tensor(Value(v.dtype, v.dims, const=np.asarray(offset, np_dtype).reshape(shape)), onnx_name)
        a = imp.new_constant(np.asarray(slope, np_dtype).reshape(shape), f"{base}_slope", f"{c.label}: per past token")
        b = imp.new_constant(np.asarray(offset, np_dtype).reshape(shape), f"{base}_offset", f"{c.label}: at posv 0")
        scaled = c.emit("mul", [a, scalar], {}, v.dtype, v.dims, temp=f"{base}_scaled").var
        return c.emit("add", [scaled, b], {}, v.dtype, v.dims, temp=base).var
    if v.prefix is not None and v.prefix[0] is None:      # 0, 1, ..., kv - 1 along an axis
        var = imp.fresh(base)
        imp.declare("volatile", var, v.dtype, v.dims, None)
        imp.lines.append((f"op arange({var}, start=0, axis={v.prefix[1]}) >> {var};",
                          f"{c.label}: positions 0.. of the cached tokens"))
        return var
    c.fail(f"the value {quoted(onnx_name)} depends on the past length in a way the importer cannot compute at "
           "run time")


def _posv_as(c: NodeContext, dtype: str) -> str:
    """posv in `dtype` (a cast emitted once, at the step's start, for other than i32 / i64)."""
    if dtype in ("i32", "i64"):
        return POSV if dtype == "i32" else POSV64
    imp = c.imp
    name = f"posv_{dtype}"
    if name not in imp.used:
        imp.used.add(name)
        imp.decls["volatile"].append((f"{name}: {dtype};", f"posv as {dtype}"))
        imp.volatile_nodes.append(None)
        at = next(k for k, (line, _) in enumerate(imp.lines) if line.startswith(f"op cast({POSV},")) + 1
        imp.lines.insert(at, (f"op cast({POSV}, to={dtype}) >> {name};", ""))
        imp.line_nodes.insert(at, None)
    return name
