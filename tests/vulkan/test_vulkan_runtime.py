"""The Vulkan target's behaviour beyond matching numbers: refusals of what a descriptor lacks, the
validation-message counter, first-diverging-node bisection, a missing glslc, device selection,
kernel-side errors, the workgroup (shared-memory) kernels and the Vulkan device probe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import openinfer as oi
from openinfer import dtypes as dt
from openinfer.errors import BuildError, ExecutionError, SimulationError, SynthesisError
from openinfer.resources import hal_sources
from openinfer.sim import Simulator
from openinfer.synthesizer import Synthesizer

from .conftest import ADA_MOCK, LAVAPIPE, REPO

TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def _graph(text: str):
    return oi.graph(text)


def _model():
    """An empty .oinf, for the programs without model data."""
    from synth.test_c_conformance import empty_model

    return empty_model()


# --------------------------------------------------------------------------- descriptor features

@pytest.mark.parametrize("decl, op, var, feature, field", [
    ("x: f32[4, 8]; } volatile { i: i64[4];", "op argmax_axis(x, axis=1) >> i;", "i", "shaderInt64",
     "features.int64"),
    ("x: f64[4, 8]; } volatile { y: f64[4, 8];", "op exp(x) >> y;", "x", "shaderFloat64", "features.fp64"),
    ("x: f32[8]; idx: u64[3]; } volatile { y: f32[3];", "op gather(x, idx) >> y;", "idx", "shaderInt64",
     "features.int64"),
])
def test_ada_mock_refuses_what_it_lacks(decl, op, var, feature, field):
    g = _graph(f"dynamic {{ {decl} }}\nblock entry {{\n    {op}\n    return;\n}}\n")
    with pytest.raises(SynthesisError) as err:
        Synthesizer.from_arch(ADA_MOCK).synthesize(None, g)
    text = str(err.value)
    for fragment in (f"`{var}`", feature, field, "ada_mock.json", "<string>:"):
        assert fragment in text, text


def test_missing_storage_features_are_refused(tmp_path):
    """A descriptor without 8/16-bit storage refuses bool / f16 data, naming the field."""
    import json

    doc = json.loads(ADA_MOCK.read_text())
    doc["features"].update(fp16=False, int8=False)
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(doc))
    g = _graph("dynamic { a: f16[4]; b: f16[4]; } volatile { y: f16[4]; }\n"
               "block entry {\n    op add(a, b) >> y;\n    return;\n}\n")
    with pytest.raises(SynthesisError, match=r"`a` \(f16\) needs 16-bit storage .*features.fp16"):
        Synthesizer.from_arch(path).synthesize(None, g)
    g = _graph("dynamic { a: f32[4]; b: f32[4]; } volatile { y: bool[4]; }\n"
               "block entry {\n    op lt(a, b) >> y;\n    return;\n}\n")
    with pytest.raises(SynthesisError, match=r"`y` \(bool\) needs 8-bit storage .*features.int8"):
        Synthesizer.from_arch(path).synthesize(None, g)


def test_descriptor_with_unusable_alignment_is_refused(tmp_path):
    import json

    doc = json.loads(LAVAPIPE.read_text())
    doc["limits"]["min_storage_buffer_offset_alignment"] = 128
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    g = _graph("dynamic { a: f32[4]; } volatile { y: f32[4]; }\nblock entry {\n    op exp(a) >> y;\n    return;\n}\n")
    with pytest.raises(SynthesisError, match="min_storage_buffer_offset_alignment"):
        Synthesizer.from_arch(path).synthesize(None, g)


def test_tensor_larger_than_a_binding_is_refused(tmp_path):
    import json

    doc = json.loads(LAVAPIPE.read_text())
    doc["limits"]["max_storage_buffer_range_bytes"] = 1024
    path = tmp_path / "small.json"
    path.write_text(json.dumps(doc))
    g = _graph("dynamic { a: f32[512]; } volatile { y: f32[512]; }\n"
               "block entry {\n    op exp(a) >> y;\n    return;\n}\n")
    with pytest.raises(SynthesisError, match=r"`a` takes 2048 bytes.*max_storage_buffer_range_bytes = 1024"):
        Synthesizer.from_arch(path).synthesize(None, g)


# --------------------------------------------------------------------------- validation layer

def test_validation_messenger_counts_messages(tmp_path):
    """The HAL's messenger counts what the layer reports: a deliberately invalid command (a fill at
    an unaligned offset) must be counted, a valid one not."""
    src = tmp_path / "bad.c"
    src.write_text(r'''
#include <stdio.h>
#include "oi_hal_vulkan.h"
int main(void) {
    oi_vk_context c;
    if (oi_vk_create("mesa", "llvmpipe", 256, 65536, 1, 1, &c) != OI_OK) return 2;
    oi_vk_buffer b;
    if (oi_vk_buffer_create(&c, 1024, &b) != OI_OK) return 3;
    oi_vk_fill(&c, b.buffer, 0, 64, 0);
    oi_vk_flush(&c);
    unsigned long long clean = oi_vk_validation_messages();
    oi_vk_fill(&c, b.buffer, 2, 64, 0);          /* VUID-vkCmdFillBuffer-dstOffset-00025 */
    oi_vk_flush(&c);
    printf("%llu %llu\n", clean, (unsigned long long)oi_vk_validation_messages());
    oi_vk_buffer_destroy(&c, &b);
    oi_vk_destroy(&c);
    return 0;
}
''')
    exe = tmp_path / "bad"
    subprocess.run(["cc", "-std=c11", "-I", str(REPO / "hal" / "include"), str(src), *hal_sources(),
                    str(REPO / "hal/src/oi_hal_vulkan.c"), "-lvulkan", "-lpthread", "-lm", "-o", str(exe)],
                   check=True, capture_output=True, timeout=120)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OI_VK_VALIDATION="1"))
    assert proc.returncode == 0, proc.stderr
    clean, after = (int(x) for x in proc.stdout.split())
    assert clean == 0 and after >= 1, proc.stdout + proc.stderr
    assert "[vulkan validation]" in proc.stderr and "dstOffset" in proc.stderr


# --------------------------------------------------------------------------- bisection

def test_bisect_names_the_first_diverging_node_on_vulkan(example, monkeypatch):
    """A wrong relu kernel (x + 1 instead of relu) is injected into the GLSL emitter: the step
    mismatches and bisection through the trace hook names the relu node."""
    from openinfer.bisect import bisect
    from openinfer.targets.vulkan.glsl import elementwise

    def wrong_relu(c):
        return [], f"({c.xs[0]} + {c.lit(1)})", c.ct

    monkeypatch.setitem(elementwise._DELTAS, "relu", wrong_relu)
    model, graph = example("mlp_regression")
    sim = Simulator(model, graph, arch=LAVAPIPE)
    report = bisect(sim.bound, sim, seed=5, step=1)
    assert report.first is not None, report.text()
    assert report.first.node_index == 2 and report.first.desc == "op relu(h) >> h", report.text()
    assert report.first.location.endswith("mlp_regression.oig:23:5"), report.text()
    assert sim.validation_messages() == 0


# --------------------------------------------------------------------------- build and run errors

def test_missing_glslc_is_a_configure_error(tmp_path, example):
    """meson setup with no glslc on PATH stops at configure with a clear message."""
    from openinfer.build import build

    model, graph = example("mlp_regression")
    plan = Synthesizer.from_arch(LAVAPIPE).synthesize(model, graph)
    project = tmp_path / "proj"
    plan.emit(project)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    path_dirs = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and (Path(d) / "glslc").exists():
            for f in Path(d).iterdir():       # everything that directory offers except glslc
                if f.name != "glslc" and not (bindir / f.name).exists():
                    (bindir / f.name).symlink_to(f)
        elif d:
            path_dirs.append(d)
    mp = pytest.MonkeyPatch()
    mp.setenv("PATH", os.pathsep.join([str(bindir), *path_dirs]))
    try:
        with pytest.raises(BuildError, match=r"glslc \(shaderc\) is required to compile the Vulkan shaders"):
            build(project)
    finally:
        mp.undo()
    assert not (project / "build" / "libmlp_regression.so").exists()


def test_gather_index_out_of_range_is_a_status(tmp_path):
    """A kernel-side failure (gather index outside [-n, n)) makes step() fail with
    OI_ERR_INDEX_OUT_OF_RANGE naming the node; the next valid step works."""
    from conformance.cases import ConformanceCase
    from synth.test_c_conformance import case_graph, empty_model

    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    case = ConformanceCase("gather/oob", "gather", "normal", (table, np.array([1, 5], np.int32)),
                           (dt.F32, dt.I32), {"axis": 0}, dt.F32, (2, 3))
    sim = Simulator(empty_model(), case_graph([case], "vk_gather_oob"), arch=LAVAPIPE, sizevars={})
    ex = sim.make_executor()
    for idx, ok in (([1, -5], True), ([1, 5], False), ([-6, 0], False), ([4, -1], True)):
        ex.insert(c0_x0=table, c0_x1=np.array(idx, np.int32))
        if ok:
            ex.run_step()
            np.testing.assert_array_equal(ex.fetch("c0_y"), np.take(table, idx, axis=0))
        else:
            with pytest.raises(ExecutionError, match=r"in `op gather\(c0_x0,c0_x1\) >> c0_y`: .*out of range"):
                ex.run_step()
    assert sim.validation_messages() == 0


def test_index_tuples_out_of_range_are_a_status(tmp_path):
    """gather_nd and scatter_nd as the C targets (tests/synth/test_c_conformance.py): the status word."""
    from synth.test_c_conformance import case_graph, check_index_tuples_out_of_range, empty_model, index_tuple_cases

    sim = Simulator(empty_model(), case_graph(index_tuple_cases(), "vk_nd_oob"), arch=LAVAPIPE, sizevars={})
    check_index_tuples_out_of_range(sim)
    assert sim.validation_messages() == 0


def test_device_selection(example, monkeypatch):
    """OI_VK_DEVICE picks a device by index or name; one that does not exist is a clear error."""
    model, graph = example("mlp_regression")
    sim = Simulator(model, graph, arch=LAVAPIPE)
    x = np.ones((4, 16), np.float32)
    results = []
    for sel in ("0", "llvmpipe"):
        monkeypatch.setenv("OI_VK_DEVICE", sel)
        ex = sim.make_executor()
        ex.insert(x=x)
        ex.run_step()
        results.append(ex.fetch("y"))
    np.testing.assert_array_equal(results[0], results[1])
    monkeypatch.setenv("OI_VK_DEVICE", "no-such-gpu")
    with pytest.raises(SimulationError, match="device"):
        sim.make_executor()


def test_create_in_is_refused(example):
    """A GPU program has no heap-free variant: create_in returns OI_ERR_INVALID_ARGUMENT."""
    import cffi

    model, graph = example("mlp_regression")
    sim = Simulator(model, graph, arch=LAVAPIPE)
    ffi = cffi.FFI()
    ffi.cdef("int oi_mlp_regression_create_in(void *, void *, void *, const void *, size_t, void **);")
    lib = ffi.dlopen(str(sim.library))
    out = ffi.new("void **")
    buf = ffi.new("char[]", 1 << 16)
    assert lib.oi_mlp_regression_create_in(buf, buf, buf, buf, 16, out) == 1 and out[0] == ffi.NULL


# --------------------------------------------------------------------------- workgroup kernels

@pytest.mark.parametrize("subgroups", [True, False])
def test_workgroup_reductions_and_tiled_matmul(subgroups, tmp_path):
    """The shared-memory paths (one workgroup per output of a long reduction, with or without
    subgroup arithmetic; tiled matmul) that the small conformance shapes do not reach."""
    import json

    doc = json.loads(LAVAPIPE.read_text())
    doc["features"]["subgroup_ops"] = subgroups
    arch = tmp_path / "lavapipe.json"
    arch.write_text(json.dumps(doc))
    g = _graph("""
dynamic { a: f32[3, 4096]; b: i32[2, 2048]; w: f32[40, 48]; v: f32[48, 36]; }
volatile { s: f32[3]; mx: f32[3]; t: i32[2]; p: i32[2]; mm: f32[40, 36]; }
block entry {
    op sum_axis(a, axes=[1]) >> s;
    op max_axis(a, axes=[1]) >> mx;
    op sum_axis(b, axes=[1]) >> t;
    op prod_axis(b, axes=[1]) >> p;
    op matmul(w, v) >> mm;
    return;
}
""")
    rng = np.random.default_rng(7)
    a = rng.normal(0, 1, (3, 4096)).astype(np.float32)
    a[1, 1000] = np.nan
    a[2, :] = -0.0
    a[2, 17] = 0.0
    b = rng.integers(-2 ** 31, 2 ** 31 - 1, (2, 2048), dtype=np.int64).astype(np.int32)
    w = rng.normal(0, 1, (40, 48)).astype(np.float32)
    v = rng.normal(0, 1, (48, 36)).astype(np.float32)
    ref = oi.Reference(None, g).make_executor()
    sim = Simulator(_model(), g, arch=arch)
    src = sim.plan.files
    assert b"shared float oi_part" in src[next(k for k in src if k.endswith("sum_axis.comp"))]
    assert (b"subgroupAdd" in src[next(k for k in src if k.endswith("sum_axis.comp"))]) == subgroups
    assert b"shared vec4 oi_as" in src[next(k for k in src if k.endswith("matmul.comp"))]   # register-blocked GEMM
    ex = sim.make_executor()
    for e in (ref, ex):
        e.insert(a=a, b=b, w=w, v=v)
        e.run_step()
    np.testing.assert_allclose(ex.fetch("s"), ref.fetch("s"), rtol=1e-4, atol=1e-3)
    mx = ex.fetch("mx")
    assert np.isnan(mx[1]) and mx[0] == ref.fetch("mx")[0] and mx[2] == 0.0 and not np.signbit(mx[2])
    np.testing.assert_array_equal(ex.fetch("t"), ref.fetch("t"))
    np.testing.assert_array_equal(ex.fetch("p"), ref.fetch("p"))
    np.testing.assert_allclose(ex.fetch("mm"), ref.fetch("mm"), rtol=1e-4, atol=1e-4)
    assert sim.validation_messages() == 0


# --------------------------------------------------------------------------- probe

def test_devices_probe_describes_vulkan_devices(tmp_path):
    from openinfer.cli import main
    from openinfer.targets.devices import load, probe_vulkan

    gpus = probe_vulkan()
    lava = [g for g in gpus if "llvmpipe" in g["device"]["name"]]
    assert lava and lava[0]["device"]["vendor"] == "mesa"
    assert lava[0]["features"]["int64"] and lava[0]["limits"]["max_push_constants_bytes"] >= 128
    assert main(["devices", "probe", "--vulkan-out", str(tmp_path)]) == 0
    probed = [load(p) for p in sorted(tmp_path.glob("vulkan-*.json"))]
    assert len(probed) == len(gpus) and all(not d.is_cpu for d in probed)
    # a probed descriptor is a target like any other
    g = _graph("dynamic { a: f32[4]; } volatile { y: f32[4]; }\nblock entry {\n    op exp(a) >> y;\n    return;\n}\n")
    dev = next(d for d in probed if "llvmpipe" in d.name)
    sim = Simulator(_model(), g, arch=dev)
    ex = sim.make_executor()
    ex.insert(a=np.arange(4, dtype=np.float32))
    ex.run_step()
    np.testing.assert_allclose(ex.fetch("y"), np.exp(np.arange(4, dtype=np.float32)), rtol=1e-6)


# --------------------------------------------------------------------------- fusion

FUSED_GRAPH = """
dynamic { a: f16[8, 16]; b: f16[16]; c: i32[8, 16]; }
volatile { t: f16[8, 16]; u: f32[8, 16]; y: i32[8, 16]; }
block entry {
    op add(a, b) >> t;
    op exp(t) >> t;
    op cast(t, to=f32) >> u;
    op mul(u, u) >> u;
    op mul(c, c) >> y;
    op shl(y, bits=3) >> y;
    op neg(y) >> y;
    return;
}
"""


def test_fused_elementwise_chains(example):
    """Element-wise chains are fused on Vulkan as on the CPU (openinfer/synth/fusion.py: one
    `fused` kernel per chain, or a matmul's epilogue) and match the reference on lavapipe:
    intermediates of other dtypes are rounded / wrapped between the steps exactly as stored
    values would be."""
    from openinfer.compare import compare, table

    rng = np.random.default_rng(2)
    cases = [(example("mlp_regression"), None, None),
             ((_model(), _graph(FUSED_GRAPH)), {"u", "y"},
              {"a": rng.normal(0, 2, (8, 16)).astype(np.float16), "b": rng.normal(0, 1, 16).astype(np.float16),
               "c": rng.integers(-2 ** 31, 2 ** 31 - 1, (8, 16), dtype=np.int64).astype(np.int32)})]
    for (model, graph), outputs, inputs in cases:
        sim = Simulator(model, graph, arch=LAVAPIPE, outputs=outputs)
        assert sum(k.op == "fused" or k.epilogue is not None for k in sim.program.kernels) >= \
            (1 if outputs is None else 2)
        assert sim.program.fused_nodes
        ref = oi.Reference(model, graph).make_executor()
        ex = sim.make_executor()
        if inputs is None:
            inputs = {"x": rng.normal(0, 1, (4, 16)).astype(np.float32)}
        for e in (ref, ex):
            e.insert(**inputs)
            e.run_step()
        names = sorted(outputs or {"y"})
        rows = [compare(n, sim.bound.vars[n].dtype, ref.fetch(n), ex.fetch(n)) for n in names]
        assert all(r.ok for r in rows), table(rows)
        assert sim.validation_messages() == 0


# --------------------------------------------------------------------------- host schedule

HOST_GRAPH = """
dynamic { v: f32[2]; a: i32; b: i32; go: bool; n: i32; x: f32[4]; }
volatile { all: f32[2, 3, 2]; win: f32[2, 2]; acc: f32[4]; cnt_v: i32; }
persistent {
    G(p, q): f32[2] @table @fixed(p=2, q=3);
    cnt: i32 @init(5);
    h: f16 @init(1.5);
}
block entry {
    cache.write v >> G[a, b];
    cache.decrement 2 cnt;
    cache.increment h;
    branch go wipe keep;
    cache.read G[] >> all;
    cache.read G[a, 0..2] >> win;
    op fill(acc, value=0.0) >> acc;
    loop l (i in 0..n) {
        op add(acc, x) >> acc;
    }
    cache.read cnt >> cnt_v;
    return;
}
block wipe {
    cache.reset G[1, ..];
    cache.reset cnt;
}
block keep { return; }
"""


def test_host_schedule_tables_counters_loops_and_resets():
    """Cache writes at run-time indices, a prefix reset, a scalar reset, host-side increments of
    i32 and f16 counters, a loop bound from an input, a branch: all against the reference."""
    g = _graph(HOST_GRAPH)
    sim = Simulator(_model(), g, arch=LAVAPIPE)
    ref = oi.Reference(None, g).make_executor()
    ex = sim.make_executor()
    steps = [(0, 0, False, 2), (1, 2, False, 0), (0, 1, True, 3), (1, 1, False, 1), (0, 2, True, 4)]
    for k, (a, b, go, n) in enumerate(steps):
        inputs = {"v": np.array([k + 1, -k], np.float32), "a": np.int32(a), "b": np.int32(b), "go": go,
                  "n": np.int32(n), "x": np.arange(4, dtype=np.float32) * (k + 1)}
        for e in (ref, ex):
            e.insert(**inputs)
            e.run_step()
        for name in ("all", "win", "acc", "cnt_v", "h", "cnt"):
            np.testing.assert_array_equal(ex.fetch(name), ref.fetch(name), err_msg=f"{name} at step {k}")
    ex.insert(v=np.zeros(2, np.float32), a=np.int32(2), b=np.int32(0), go=False, n=np.int32(0),
              x=np.zeros(4, np.float32))
    with pytest.raises(ExecutionError, match=r"cache table G index exceeds fixed size 2"):
        ex.run_step()
    ex.reset()
    ref_fresh = oi.Reference(None, g).make_executor()
    for e in (ref_fresh, ex):
        e.insert(v=np.ones(2, np.float32), a=np.int32(0), b=np.int32(0), go=False, n=np.int32(1),
                 x=np.ones(4, np.float32))
        e.run_step()
    for name in ("all", "cnt", "h"):
        np.testing.assert_array_equal(ex.fetch(name), ref_fresh.fetch(name))
    assert sim.validation_messages() == 0


def test_installed_package_generates_vulkan_projects(tmp_path, example_models):
    """A wheel install carries the GLSL emitters, the Vulkan/GLSL templates, the Vulkan HAL and
    lavapipe.json: `openinfer gen` works from it without the source tree."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(REPO)], check=True, cwd=tmp_path, timeout=600)
    pkg = target / "openinfer"
    for rel in ("targets/vulkan/glsl/elementwise.py", "targets/vulkan/renderer.py",
                "templates/vulkan/glsl/oi_common.glsl", "templates/vulkan/glsl/kernel.comp.j2",
                "templates/vulkan/model.c.j2", "templates/vulkan/meson.build.j2",
                "hal/src/oi_hal_vulkan.c", "hal/include/oi_hal_vulkan.h", "devices/lavapipe.json"):
        assert (pkg / rel).is_file(), f"{rel} missing from the installed package"
    env = dict(os.environ, PYTHONPATH=str(target))
    out = tmp_path / "gen"
    argv = [sys.executable, str(target / "bin" / "openinfer"), "gen", str(REPO / "examples" / "mlp_regression.oig"),
            "--model", str(example_models / "mlp_regression.oinf"), "--arch", "lavapipe", "-o", str(out)]
    subprocess.run(argv, check=True, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert (out / "shaders" / "oi_common.glsl").is_file() and (out / "mlp_regression_shaders.c").is_file()


def test_create_without_model_file_when_no_tensor_is_read():
    """As on the CPU: a program that reads no model tensor runs with create(NULL)."""
    g = _graph("dynamic { a: f32[4]; } volatile { y: f32[4]; }\nblock entry {\n    op sqrt(a) >> y;\n    return;\n}\n")
    sim = Simulator(None, g, arch=LAVAPIPE)
    ex = sim.make_executor()
    ex.insert(a=np.array([4, 9, -1, 0], np.float32))
    ex.run_step()
    np.testing.assert_array_equal(ex.fetch("y"), [2, 3, np.nan, 0])


def test_graphs_at_the_edges_of_the_dsl_build_and_compute(tmp_path):
    """As tests/synth/test_unusual_graphs.py for C: a graph of only `return` (no node can fail),
    a 350-character name, and a graph file named with an emoji and a tab."""
    from openinfer.testing import assert_matches_reference

    Simulator(None, "block entry { return; }", arch=LAVAPIPE).make_executor().run_step()
    long = "v" + "x" * 349
    assert_matches_reference(None, f"dynamic {{ {long}: f32[3]; }}\nvolatile {{ y: f32[3]; }}\n"
                                   f"block entry {{\n    op add({long}, {long}) >> y;\n    return;\n}}\n",
                             arch=LAVAPIPE)
    path = tmp_path / "😀\tgraph.oig"
    path.write_text("dynamic {\n    x: f32[4];\n}\nvolatile {\n    y: f32[4];\n}\n"
                    "block entry {\n    op add(x, x) >> y;\n    return;\n}\n")
    assert_matches_reference(None, str(path), arch=LAVAPIPE)
