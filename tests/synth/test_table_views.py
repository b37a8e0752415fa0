"""Cache reads as views (openinfer/synth/table_views.py): on a target whose kernels can read a
persistent table's rows in place (Vulkan), `cache.read T[i, ..] >> dst` becomes a marker and the
kernels reading dst read `T[i]`; a read whose table is written before dst's last use, whose dst
is changed after it, that reads part of the rows, or whose index may be out of range stays a
copy; C targets keep every read. (The GPU runs of these graphs: tests/vulkan/test_vulkan_table_views.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from example_modules import load_example
from test_c_conformance import empty_model

import openinfer as oi
from openinfer.synth import program as P
from openinfer.synth.table_views import table_reads_in_place
from openinfer.synthesizer import Synthesizer

REPO = Path(__file__).resolve().parents[2]
ADA_MOCK = REPO / "devices" / "ada_mock.json"
H200 = REPO / "devices" / "nvidia-h200.json"     # (rope needs f64; synthesis only, no device)

#: r1: a view (K[1]'s rows only read by the add); r2: not (K is written before kc2's last use);
#: r3: not (kc3 is changed in place after the read); r4: not (part of the rows);
#: r5: not (its index is a run-time value that may be out of range); r6 (in the loop): a view;
#: r7: not (a loop reads kc7 and writes K after it: the next iteration would see the new row)
GRAPH = """
dynamic { a: f32[4]; j: i32; }
volatile {
    kc1: f32[3, 4]; kc2: f32[3, 4]; kc3: f32[3, 4]; kc4: f32[2, 4]; kc5: f32[3, 4]; kc6: f32[3, 4];
    kc7: f32[3, 4];
    out1: f32[3, 4]; out2: f32[3, 4]; out3: f32[3, 4]; out4: f32[2, 4]; out5: f32[3, 4]; out6: f32[3, 4];
    out7: f32[3, 4];
}
persistent {
    K(l, t): f32[4] @table @fixed(l=2, t=3);
}
block entry {
    cache.write a >> K[1, 0];
    cache.write a >> K[0, 2];
    cache.read K[0, ..] >> kc2;          // r2
    cache.write a >> K[0, 1];
    op add(kc2, kc2) >> out2;
    cache.read K[1, ..] >> kc1;          // r1
    op add(kc1, kc1) >> out1;
    cache.read K[1, ..] >> kc3;          // r3
    op softmax(kc3, axis=1) >> kc3;
    op add(kc3, kc1) >> out3;
    cache.read K[1, 0..2] >> kc4;        // r4
    op add(kc4, kc4) >> out4;
    cache.read K[j, ..] >> kc5;          // r5
    op add(kc5, kc5) >> out5;
    op fill(out1, value=0.0) >> out6;
    loop layers (l in 0..2) {
        cache.read K[l, ..] >> kc6;      // r6
        op add(out6, kc6) >> out6;
    }
    op fill(out1, value=0.0) >> out7;
    cache.read K[0, ..] >> kc7;          // r7
    loop again (i in 0..2) {
        op add(out7, kc7) >> out7;
        cache.write a >> K[0, 0];
    }
    return;
}
"""
OUTPUTS = {"out1", "out2", "out3", "out4", "out5", "out6", "out7"}


def _statements(prog: P.Program) -> list[P.Statement]:
    """The entry block's statements, loop bodies included."""
    def visit(stmts):
        for s in stmts:
            yield s
            if isinstance(s, P.Loop):
                yield from visit(s.body)
    return list(visit(prog.blocks[prog.entry]))


def _reads(prog: P.Program) -> tuple[list[str], list[str]]:
    """(descriptions of the table reads left, of the view markers)."""
    stmts = _statements(prog)
    return ([s.desc for s in stmts if isinstance(s, P.TableRead)],
            [s.desc for s in stmts if isinstance(s, P.Marker) and s.kind == "view"])


def _calls(prog: P.Program) -> list[P.Call]:
    return [s for s in _statements(prog) if isinstance(s, P.Call)]


def _plan(arch, outputs=OUTPUTS):
    return Synthesizer.from_arch(arch).synthesize(empty_model(), oi.graph(GRAPH), outputs=outputs)


def test_reads_become_views_only_where_the_rows_stay_as_read():
    prog = _plan(ADA_MOCK).program
    reads, marks = _reads(prog)
    assert sorted(marks) == ["cache.read K[1,] >> kc1", "cache.read K[l,] >> kc6"], marks
    assert len(reads) == 5
    readers = {s.desc: s.inputs for s in _calls(prog)}
    assert readers["op add(kc1,kc1) >> out1"] == (P.Operand("K", (P.Lit(1),)),) * 2
    assert readers["op add(out6,kc6) >> out6"][1] == P.Operand("K", (P.LoopVar("l"),))
    assert readers["op add(kc2,kc2) >> out2"] == (P.Operand("kc2"),) * 2


def test_observable_destinations_stay_copies():
    reads, marks = _reads(_plan(ADA_MOCK, outputs=None).program)      # kc1.. observable too
    assert not marks and len(reads) == 7


@pytest.mark.parametrize("arch", ["x86_64-generic", "x86_64-avx2"])
def test_c_targets_keep_every_read(arch):
    reads, marks = _reads(_plan(arch).program)
    assert len(reads) == 7 and not marks


def test_the_pass_is_idempotent():
    prog = _plan(ADA_MOCK).program
    assert table_reads_in_place(prog) == prog


def test_decoder_attention_reads_the_cache_tables(tmp_path):
    """The decoder's per-layer cache reads (`Kc[l, ..]`, `Vc[l, ..]`) and the mask read before
    the layers' loop (`valid[]`) go away: sdpa binds the table rows of layer l, through the
    reshape and transpose views, and the whole mask table."""
    decoder = load_example("decoder")
    graph, model = decoder.write(decoder.SIZES["test"], tmp_path)
    plan = Synthesizer.from_arch(H200).synthesize(str(model), str(graph), outputs={"next"})
    reads, marks = _reads(plan.program)
    assert not reads
    assert {"cache.read Kc[l,] >> kc", "cache.read Vc[l,] >> vc", "cache.read valid[] >> mask"} <= set(marks)
    sdpa = [s for s in _calls(plan.program) if plan.program.kernels[s.kernel].op in ("sdpa", "fused")
            and any(o.var == "Kc" for o in s.inputs)]
    assert len(sdpa) == 1
    assert {o for o in sdpa[0].inputs if o.var in plan.program.tables} == {
        P.Operand("Kc", (P.LoopVar("l"),)), P.Operand("Vc", (P.LoopVar("l"),)), P.Operand("valid")}


#: w1: in kernel (x's producer stores the row); w2: not (y is read after the write);
#: w3: not (W is read between z's producer and the write: the read would see the new row);
#: w4: not (u is computed before the loop that writes it, once per iteration)
GRAPH_W = """
dynamic { a: f32[4]; }
volatile {
    x: f32[4]; y: f32[4]; z: f32[4]; u: f32[4];
    out1: f32[3, 4]; out2: f32[4]; out3: f32[3, 4]; out4: f32[3, 4]; out5: f32[3, 4];
}
persistent {
    n: i32 @init(0);
    K(t): f32[4] @table @fixed(t=3);
    V(t): f32[4] @table @fixed(t=3);
    W(t): f32[4] @table @fixed(t=3);
    U(t): f32[4] @table @fixed(t=3);
}
block entry {
    op mul(a, a) >> x;
    cache.write x >> K[n];           // w1
    op add(a, a) >> y;
    cache.write y >> V[n];           // w2
    op add(y, a) >> out2;
    op neg(a) >> z;
    cache.read W[] >> out3;
    cache.write z >> W[n];           // w3
    op exp(a) >> u;
    loop twice (i in 0..2) {
        cache.write u >> U[i];       // w4
    }
    cache.read K[] >> out1;
    cache.read V[] >> out4;
    cache.read U[] >> out5;
    cache.increment n;
    return;
}
"""
OUTPUTS_W = {"out1", "out2", "out3", "out4", "out5"}


def _writes(prog: P.Program) -> tuple[list[str], list[str]]:
    """(descriptions of the writes made by their source's kernel, of the writes left)."""
    stmts = _statements(prog)
    return ([s.desc for s in stmts if isinstance(s, P.Marker) and s.kind == "in kernel"],
            [s.desc for s in stmts if isinstance(s, P.TableWrite)])


def test_writes_go_into_the_kernel_only_where_no_one_sees_the_difference():
    prog = Synthesizer.from_arch(ADA_MOCK).synthesize(empty_model(), oi.graph(GRAPH_W), outputs=OUTPUTS_W).program
    written, kept = _writes(prog)
    assert written == ["cache.write x >> K[n]"] and len(kept) == 3, (written, kept)
    producer = next(s for s in _calls(prog) if s.desc == "op mul(a,a) >> x")
    assert producer.output == P.Operand("K", (P.ScalarOf("n"),))
    c_prog = Synthesizer.from_arch("x86_64-generic").synthesize(empty_model(), oi.graph(GRAPH_W),
                                                                outputs=OUTPUTS_W).program
    assert _writes(c_prog) == ([], ["cache.write x >> K[n]", "cache.write y >> V[n]", "cache.write z >> W[n]",
                                    "cache.write u >> U[i]"])
