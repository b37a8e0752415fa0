"""One-line node descriptions, exactly as the original's `describe_node` writes them.

Traces print them (`0 <uuid> [entry] -- op add(x,a) >> t0 -- (0ms 12us 0ns)`), bind and run-time
errors quote them ("block entry node op add(x,a) >> t0"), and the parser derives each node's
stable UUID from its index and description.

The original's quirks are kept on purpose so traces compare line for line: op inputs are joined
with "," but yield/await names with ", "; an increment or decrement by 1 omits the amount; a full
slice `..` in a cache access prints as nothing (`K[l, ..]` -> `K[l,]`); `assign` names only the
variable.
"""

from __future__ import annotations

import hashlib

from .nodes import (
    Assign,
    Await,
    Barrier,
    Branch,
    CacheDecrement,
    CacheIncrement,
    CacheRead,
    CacheReset,
    CacheWrite,
    Dep,
    Loop,
    Node,
    Op,
    Return,
    Transfer,
    Yield,
)


def describe(node: Node) -> str:
    """The original's description of `node`, e.g. `op add(x,a) >> t0` or `loop l (i in 0..4)`."""
    return _DESCRIBE[type(node)](node)


def node_uuid(index: int, description: str) -> str:
    """A UUID shaped like a v4 one, derived from the node's index and description.

    The original drew random v4 UUIDs; deriving them instead makes parsing the same text twice
    give identical JSON and traces, and keeps them independent of the graph's file name.
    """
    raw = bytearray(hashlib.sha256(f"{index}:{description}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40   # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80   # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _step(verb: str, amount: int, target: str) -> str:
    return f"cache.{verb} {target}" if amount == 1 else f"cache.{verb} {amount} {target}"


def _branch(n: Branch) -> str:
    if n.cond is not None and n.else_block is not None:
        return f"branch {n.cond} {n.then_block} {n.else_block}"
    return f"branch {n.then_block}"


_DESCRIBE = {
    Assign: lambda n: f"assign {n.name}",
    Op: lambda n: f"op {n.op}({','.join(str(i) for i in n.inputs)}) >> {n.output}",
    CacheRead: lambda n: f"cache.read {n.src} >> {n.dst}",
    CacheWrite: lambda n: f"cache.write {n.src} >> {n.dst}",
    CacheIncrement: lambda n: _step("increment", n.amount, n.target),
    CacheDecrement: lambda n: _step("decrement", n.amount, n.target),
    CacheReset: lambda n: f"cache.reset {n.target}",
    Yield: lambda n: f"yield {', '.join(n.vars)}",
    Await: lambda n: f"await {', '.join(n.vars)}",
    Loop: lambda n: f"loop {n.name} ({n.var} in {n.start}..{n.end})",
    Branch: _branch,
    Barrier: lambda n: "barrier",
    Dep: lambda n: f"dep after({n.after}) before({n.before})",
    Return: lambda n: "return",
    Transfer: lambda n: f"transfer {n.src} >> {n.dst}",
}
