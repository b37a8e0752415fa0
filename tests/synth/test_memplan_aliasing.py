"""The memory plan never lets a buffer share memory with one it is computed from.

At the statement where an input is read for the last time and the output is written for the first,
both are live (openinfer/synth/memplan.py: a lifetime includes both ends). A plan that let them share
memory there would be right for element-wise ops (each element read before it is written) and wrong
for ops that read their input after writing part of their output: transpose, matmul, a reversing
slice, gather, softmax and layer_norm along the first axis. The graph chains such ops through
intermediates only the plan places (the host observes the last value alone), runs on
x86_64-generic and must equal the reference; a plan that shares memory at the boundary fails it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_c_conformance import REPO, cache_dir, empty_model

from openinfer.compare import compare, table
from openinfer.reference.executor import Reference
from openinfer.sim import Simulator
from openinfer.synth import memplan

#: f32[12, 12] values, so each op's output fits exactly where its input was
GRAPH = ("dynamic { x: f32[12, 12]; w: f32[12, 12]; idx: i32[12]; }\n"
         "volatile { a: f32[12, 12]; b: f32[12, 12]; c: f32[12, 12]; d: f32[12, 12]; e: f32[12, 12];"
         " f: f32[12, 12]; g: f32[12, 12]; y: f32[12, 12]; }\n"
         "block entry {\n"
         "  op relu(x) >> a;\n"
         "  op transpose(a) >> b;\n"
         "  op matmul(b, w) >> c;\n"
         "  op slice(c, starts=[-1], ends=[-100], axes=[1], steps=[-1]) >> d;\n"
         "  op gather(d, idx, axis=1) >> e;\n"
         "  op softmax(e, axis=0) >> f;\n"
         "  op layer_norm(f, axis=0) >> g;\n"
         "  op matmul(w, g) >> y;\n"
         "  return;\n}\n")


def test_a_chain_through_planned_buffers_matches_the_reference(tmp_path):
    rng = np.random.default_rng(5)
    inputs = {"x": rng.normal(0, 1, (12, 12)).astype(np.float32), "w": rng.normal(0, 1, (12, 12)).astype(np.float32),
              "idx": rng.permutation(12).astype(np.int32)}
    with cache_dir(tmp_path):
        model = empty_model()
        sim = Simulator(model, GRAPH, arch=Path(REPO) / "devices" / "x86_64-generic.json", outputs={"y"})
        ref = Reference(model, GRAPH).make_executor()
    plan = memplan.plan(sim.program)
    planned = [p for p in plan.placements.values() if p.region == "arena" and p.start >= 0]
    assert len(planned) >= 6, plan.table()           # the intermediates are the plan's to place
    ex = sim.make_executor()
    for e in (ref, ex):
        e.insert(**inputs)
        e.run_step()
    row = compare("y", sim.vars["y"].dtype, ref.fetch("y"), ex.fetch("y"))
    assert row.ok, table([row]) + "\n" + plan.table()
