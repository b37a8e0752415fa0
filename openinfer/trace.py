"""Trace events: one per executed node, in the original's JSON format, plus Chrome/Perfetto export.

The original's event (digest §3.9) has `block_name, node_index, node_uuid, kind, params, output,
micros` with `micros = [ms, us, ns]` (the duration split into its millisecond, microsecond and
nanosecond parts). The original always left `params`/`output` empty; ours name the node's inputs
and outputs. `desc` and `start_ns`/`duration_ns` are kept in Python for printing and timelines and
are not part of the original's JSON (they go into the Chrome export instead).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

KINDS = ("Assign", "OpExecute", "CacheRead", "CacheWrite", "CacheIncrement", "CacheDecrement", "CacheReset",
         "Barrier", "Dep", "Transfer", "Yield", "Await", "Branch", "Loop", "Return")


@dataclass(frozen=True)
class TraceEvent:
    kind: str
    node_index: int
    node_uuid: str
    block_name: str
    desc: str
    op_name: str | None = None
    params: tuple[str, ...] = ()
    output: tuple[str, ...] = ()
    start_ns: int = 0
    duration_ns: int = 0
    step: int = 0
    #: short per-output value summaries, recorded in OPENINFER_TRACE=full mode
    values: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def micros(self) -> list[int]:
        ns = self.duration_ns
        return [ns // 1_000_000, (ns // 1000) % 1000, ns % 1000]

    def to_json(self) -> dict:
        """The original's serde form (keys as its TraceEvent serializes them)."""
        return {"block_name": self.block_name, "kind": self.kind, "micros": self.micros,
                "node_index": self.node_index, "node_uuid": self.node_uuid,
                "output": list(self.output), "params": list(self.params)}

    def line(self) -> str:
        """The original's printed form: `{idx} {uuid} [{block}] -- {desc} -- ({N}ms {N}us {N}ns)`."""
        ms, us, ns = self.micros
        text = f"{self.node_index} {self.node_uuid} [{self.block_name}] -- {self.desc} -- ({ms}ms {us}us {ns}ns)"
        if self.values:
            text += "".join(f"\n    {k} = {v}" for k, v in self.values.items())
        return text


def trace_mode() -> str | None:
    """`OPENINFER_TRACE`: "1" traces, "full" also records output values; anything else is off."""
    value = os.environ.get("OPENINFER_TRACE", "")
    return value if value in ("1", "full") else None


def emit_line(event: TraceEvent) -> None:
    print(event.line(), file=sys.stderr)


def to_json(events) -> str:
    return json.dumps([e.to_json() for e in events], indent=2, sort_keys=True)


def to_chrome(events, *, process_name: str = "openinfer") -> dict:
    """Chrome trace-event JSON (loadable by chrome://tracing and ui.perfetto.dev).

    One complete ("X") event per node; each block gets its own track (thread id) so consumers of
    a yield show beside the entry block.
    """
    tids: dict[str, int] = {}
    out = [{"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": process_name}}]
    for e in events:
        if e.block_name not in tids:
            tids[e.block_name] = len(tids) + 1
            out.append({"ph": "M", "pid": 1, "tid": tids[e.block_name], "name": "thread_name",
                        "args": {"name": e.block_name}})
        out.append({
            "ph": "X", "pid": 1, "tid": tids[e.block_name], "name": e.desc, "cat": e.kind,
            "ts": e.start_ns / 1000.0, "dur": max(e.duration_ns, 1) / 1000.0,
            "args": {"node_index": e.node_index, "node_uuid": e.node_uuid, "step": e.step,
                     "params": list(e.params), "output": list(e.output), **e.values},
        })
    return {"traceEvents": out, "displayTimeUnit": "ns"}
