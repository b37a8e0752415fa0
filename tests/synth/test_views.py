"""Reshapes as views (openinfer/synth/views.py): a reshape (or a transpose that only moves axes of size
1) whose output can share its input's buffer becomes a marker, and one that cannot (a value still
needed, a value carried across loop iterations, an observable output) stays a copy; every program
computes what the reference does."""

from __future__ import annotations

import numpy as np
import pytest
from example_modules import load_example
from test_c_conformance import empty_model

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synth.views import views
from openinfer.synthesizer import Synthesizer

#: r1: a view (t dead after it); r2: not (t is read again after u, its view, was changed);
#: r3: not (inside the loop, w's previous value is read before the reshape writes it);
#: r4: a view, and r5, the reshape back, a marker (k -> k3 -> changed -> k); r6 and t1 (a transpose
#: that moves only the axis of size 1): views; t2 (a transpose that reorders the bytes): a copy
GRAPH = """
dynamic { a: f32[2, 6]; }
volatile {
    t: f32[2, 6]; u: f32[3, 4]; s: f32[2, 6]; v: f32[3, 4]; w: f32[3, 4]; acc: f32[3, 4];
    k: f32[2, 6]; k3: f32[3, 4]; out1: f32[3, 4]; out2: f32[3, 4]; out3: f32[2, 6];
    m2: f32[2, 6]; p: f32[2, 1, 6]; pt: f32[1, 2, 6]; out4: f32[1, 2, 6]; m3: f32[2, 6]; r: f32[6, 2];
    out5: f32[6, 2];
}
block entry {
    op add(a, a) >> t;
    op reshape(t) >> u;                  // r1
    op mul(u, u) >> out1;
    op add(a, a) >> s;
    op reshape(s) >> v;                  // r2
    op mul(v, v) >> v;
    op reshape(s) >> w;
    op add(v, w) >> out2;
    op fill(out1, value=0.0) >> acc;
    loop steps (i in 0..3) {
        op add(acc, w) >> acc;
        op add(a, a) >> s;
        op reshape(s) >> w;              // r3
    }
    op add(a, a) >> k;
    op reshape(k) >> k3;                 // r4
    op add(k3, out1) >> k3;
    op reshape(k3) >> k;                 // r5
    op add(k, a) >> out3;
    op add(acc, out2) >> out2;
    op add(a, a) >> m2;
    op reshape(m2) >> p;                 // r6
    op transpose(p, perm=[1, 0, 2]) >> pt;   // t1
    op add(pt, pt) >> out4;
    op mul(a, a) >> m3;
    op transpose(m3, perm=[1, 0]) >> r;  // t2
    op add(r, r) >> out5;
    return;
}
"""
OUTPUTS = {"out1", "out2", "out3", "out4", "out5"}


def _reshape_descs(prog: P.Program) -> tuple[list[str], list[str]]:
    """(descriptions of the reshape and transpose calls left, of the view markers)."""
    calls, marks = [], []

    def visit(stmts):
        for s in stmts:
            if isinstance(s, P.Call) and prog.kernels[s.kernel].op in ("reshape", "transpose"):
                calls.append(s.desc)
            elif isinstance(s, P.Marker) and s.kind == "view":
                marks.append(s.desc)
            elif isinstance(s, P.Loop):
                visit(s.body)
    visit(prog.blocks[prog.entry])
    return calls, marks


def _plan(arch: str = "x86_64-generic", outputs=OUTPUTS):
    return Synthesizer.from_arch(arch).synthesize(empty_model(), oi.graph(GRAPH), outputs=outputs)


def test_views_only_where_the_values_never_differ():
    plan = _plan()
    calls, marks = _reshape_descs(plan.program)
    assert sorted(marks) == ["op reshape(k) >> k3", "op reshape(k3) >> k", "op reshape(m2) >> p", "op reshape(t) >> u",
                             "op transpose(p) >> pt"]
    assert sorted(calls) == ["op reshape(s) >> v", "op reshape(s) >> w", "op reshape(s) >> w", "op transpose(m3) >> r"]
    entry = plan.program.frames["entry"]
    assert entry["u"] == entry["t"] and entry["k3"] == entry["k"] and entry["m2"] == entry["p"] == entry["pt"]
    assert len({entry["s"], entry["v"], entry["w"]}) == 3
    assert "reshape" not in plan.files[f"{plan.name}_kernels.c"].decode() or calls


def test_observable_outputs_stay_copies():
    calls, marks = _reshape_descs(_plan(outputs=None).program)     # every volatile observable
    assert not marks and len(calls) == 9


def test_the_pass_is_idempotent():
    prog = _plan().program
    assert views(prog) == prog


@pytest.mark.parametrize("arch", ["x86_64-generic", "x86_64-avx512"])
def test_results_equal_the_reference(arch):
    g = oi.graph(GRAPH)
    x = np.arange(12, dtype=np.float32).reshape(2, 6) / 7
    ref = oi.Reference(None, g).make_executor()
    sim = oi.Simulator(empty_model(), g, arch=arch, outputs=OUTPUTS).make_executor()
    for ex in (ref, sim):
        ex.insert(a=x)
        ex.run_step()
    for name in sorted(OUTPUTS):
        np.testing.assert_allclose(sim.fetch(name), ref.fetch(name), rtol=1e-6, err_msg=name)


def test_decoder_layer_reshapes_are_views(tmp_path):
    decoder = load_example("decoder")
    graph, model = decoder.write(decoder.SIZES["test"], tmp_path)
    plan = Synthesizer.from_arch("x86_64-generic").synthesize(str(model), str(graph), outputs={"next"})
    calls, marks = _reshape_descs(plan.program)
    # the cache's [seq, heads, d] -> [heads, seq, d] reorders bytes; the query's and the
    # attention's transposes move only the axis of size 1
    assert sorted(calls) == ["op transpose(kc3) >> kt", "op transpose(vc3) >> vt"] and len(marks) == 8
