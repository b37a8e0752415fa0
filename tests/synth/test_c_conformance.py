"""Every conformance case through the generated C kernels, on the x86-64 C targets.

Each case (tests/conformance/cases.py) becomes one `Op` node of a graph built directly in the
Graph IR: its inputs are `dynamic` variables, its output a `volatile` one (in-place cases write
back into input 0, which is then fetched; accumulate cases pass attrs["acc"]). Cases are grouped
into a few graphs ("chunks") so the number of meson builds stays small; the chunks of one device
are built in parallel, once per session, and each test checks the cases of one op against the
oracle (tests/conformance/oracle.py) with the cases' own tolerances. The programs run on an empty
.oinf (the generated `*_create` needs a model path even when no weights are read).

Beside the cases: paths their small shapes miss (sdpa's vector dot and online softmax, wide
integer -> float casts), attributes passed as run-time variables, fused element-wise chains, the
gather index check, and a build under AddressSanitizer + UBSan (run in a child Python with libasan
preloaded: an ASan runtime cannot be loaded into a running interpreter).

    OI_SLOW=1             run every case on every target (default: on x86_64-generic each
                          shape variant of each op and mode once per dtype kind, packing and
                          float width (`variant_sample`); on x86_64-avx2 / x86_64-avx512 the
                          vector kernels' cases and one case per op, mode and dtype kind),
                          and every case on every device under every toolchain of the compiler
                          matrix (tests/compilers.py; default: `matrix_cases` on the host's
                          widest target)
    OI_C_CONF_CHUNK=N     cases per chunk (default 400)
    OI_C_CONF_CACHE=DIR   keep builds in DIR between sessions (default: a session tmp dir)
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from openinfer import dtypes as dt
from openinfer.dtypes import DTypeInfo
from openinfer.ir import nodes as ir
from openinfer.targets.devices import best_host_target

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from compilers import PRIMARY, TOOLCHAINS, Toolchain  # noqa: E402
from conformance.cases import (  # noqa: E402
    ConformanceCase,
    assert_matches,
    dtype_and_mode_sample,
    generate_cases,
    variant_sample,
)
from conformance.oracle import expected  # noqa: E402
from sanitized import SANITIZE, run_sanitized  # noqa: E402

REPO = TESTS.parent
DEVICES = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512")
SLOW = os.environ.get("OI_SLOW") == "1"
CHUNK = int(os.environ.get("OI_C_CONF_CHUNK", "400"))

CASES = generate_cases()
VARIANTS = variant_sample(CASES)
OPS = list(dict.fromkeys(c.op for c in CASES))


# --------------------------------------------------------------------------- graphs

def _attr_value(v) -> ir.AttrValue:
    if isinstance(v, DTypeInfo):
        return ir.AttrDType(v)
    if isinstance(v, bool | np.bool_):
        return ir.AttrBool(bool(v))
    if isinstance(v, int | np.integer):
        return ir.AttrInt(int(v))
    if isinstance(v, float | np.floating):
        return ir.AttrDouble(float(v))
    if isinstance(v, str):
        return ir.AttrStr(v)
    if isinstance(v, list | tuple):
        if v and all(isinstance(x, DTypeInfo) for x in v):
            return ir.AttrDTypeList(tuple(v))
        return ir.AttrIntList(tuple(int(x) for x in v))
    raise TypeError(f"attribute value {v!r}")


def case_graph(cases: list[ConformanceCase], name: str) -> ir.Graph:
    """One graph running `cases`: case k reads c{k}_x{j} and writes c{k}_y (in place: c{k}_x0)."""
    decls: dict[str, ir.VarDecl] = {}
    nodes = []
    for k, case in enumerate(cases):
        refs = []
        for j, (x, d) in enumerate(zip(case.inputs, case.input_dtypes, strict=True)):
            v = f"c{k}_x{j}"
            decls[v] = ir.VarDecl(v, ir.MemoryKind.DYNAMIC, d, tuple(str(n) for n in x.shape))
            refs.append(ir.VarRef(v))
        if case.mode == "inplace":
            out = f"c{k}_x0"
        else:
            out = f"c{k}_y"
            decls[out] = ir.VarDecl(out, ir.MemoryKind.VOLATILE, case.out_dtype, tuple(str(n) for n in case.out_shape))
        attrs = tuple(ir.Attr(a, _attr_value(v)) for a, v in case.attrs.items() if v is not None)
        nodes.append(ir.Op(k, f"case-{k}", None, case.op, tuple(refs), attrs, out))
    return ir.Graph(decls, {"entry": ir.Block("entry", tuple(nodes))}, len(nodes), source_name=name)


def output_var(k: int, case: ConformanceCase) -> str:
    return f"c{k}_x0" if case.mode == "inplace" else f"c{k}_y"


def run_chunk(cases: list[ConformanceCase], name: str, device: str,
              build_options: list[str] | None = None) -> dict[str, np.ndarray | BaseException]:
    """Build `cases` as one program for `device`, run one step; case id -> output (or the error
    that stopped the whole chunk). Builds go to $OI_CACHE_DIR (see `cache_dir`)."""
    from openinfer.sim import Simulator

    try:
        sim = Simulator(empty_model(), case_graph(cases, name), arch=REPO / "devices" / f"{device}.json",
                        sizevars={}, build_options=build_options)
        ex = sim.make_executor()
        for k, case in enumerate(cases):
            ex.insert(**{f"c{k}_x{j}": x for j, x in enumerate(case.inputs)})
        ex.run_step()
        return {case.id: ex.fetch(output_var(k, case)) for k, case in enumerate(cases)}
    except Exception as exc:  # noqa: BLE001  (reported per case by the tests)
        return {case.id: exc for case in cases}


def empty_model():
    """A model without tensors. (The generated `*_create` wants an .oinf path even when the program
    reads no weights, so the cases run on an empty one instead of model=None.)"""
    from openinfer.oinf import ModelLoader
    from openinfer.oinf.writer import write_oinf

    path = Path(os.environ.get("OI_CACHE_DIR", "/tmp")) / "empty.oinf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_oinf(path, tensors={})
    return ModelLoader.open(path)


class cache_dir:
    """Point $OI_CACHE_DIR (where Simulator builds) at `path` for a `with` block."""

    def __init__(self, path: Path):
        self.path, self.saved = path, None

    def __enter__(self):
        self.saved = os.environ.get("OI_CACHE_DIR")
        os.environ["OI_CACHE_DIR"] = str(self.path)

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("OI_CACHE_DIR", None)
        else:
            os.environ["OI_CACHE_DIR"] = self.saved


def chunks(cases: list[ConformanceCase], size: int = CHUNK) -> list[list[ConformanceCase]]:
    """Consecutive groups of at most `size` cases (op order kept)."""
    return [cases[i:i + size] for i in range(0, len(cases), size)]


def vector_cases(cases: list[ConformanceCase]) -> list[ConformanceCase]:
    """The cases the AVX wing renders with kernels of its own (openinfer/targets/x86/renderer.py):
    f32 operands, and matmuls of f16 / bf16. Its other requests fall back to the portable
    kernels x86_64-generic builds for every case."""
    return [c for c in cases if c.input_dtypes[0].name == "f32"
            or (c.op == "matmul" and c.input_dtypes[0].name in ("f16", "bf16"))]


def device_cases(device: str) -> list[ConformanceCase]:
    """On x86_64-generic `variant_sample` (each shape variant of each op and mode once per kind of
    dtype, packing and float width: the integer widths share their shapes); on the AVX targets
    the vector kernels' cases and, for the portable kernels they fall back to (built with the
    target's flags), `matrix_cases` (each op, mode and kind of dtype once). `OI_SLOW=1`: every
    case everywhere."""
    if SLOW:
        return CASES
    if device == "x86_64-generic":
        return VARIANTS
    sample = {c.id for c in vector_cases(CASES)} | {c.id for c in matrix_cases()}
    return [c for c in CASES if c.id in sample]


def matrix_cases() -> list[ConformanceCase]:
    """What each toolchain of the compiler matrix checks in the default suite: every op and mode
    once per kind of input dtype (float, signed, unsigned, bool, ...) and packing (sub-byte types
    or not): each kernel family and type path once (OI_SLOW=1: every case)."""
    if SLOW:
        return CASES
    seen: set[tuple] = set()
    out = []
    for c in CASES:
        d = c.input_dtypes[0]
        key = (c.op, c.mode, d.kind, d.is_packed)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


# --------------------------------------------------------------------------- session results

class _Results:
    """Lazily built and run, once per device per session."""

    def __init__(self, cache: Path):
        self.cache = cache
        self.by_device: dict[str, dict[str, np.ndarray | BaseException]] = {}
        self.timing: dict[str, float] = {}
        self._expected: dict[str, np.ndarray] = {}

    def results(self, device: str, toolchain: Toolchain | None = None) -> dict[str, np.ndarray | BaseException]:
        """The cases of `device` (or, with a toolchain of the matrix, `matrix_cases`) built with
        the project's own options and the environment's CC, or with `toolchain`."""
        key = device if toolchain is None else f"{device}/{toolchain.name}"
        if key not in self.by_device:
            start = time.monotonic()
            groups = chunks(device_cases(device) if toolchain is None else matrix_cases())
            options = None if toolchain is None else toolchain.build_options
            merged: dict[str, np.ndarray | BaseException] = {}
            with cache_dir(self.cache), (toolchain.active() if toolchain else nullcontext()), \
                    ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
                futures = [pool.submit(run_chunk, g, f"conf_{i}", device, options) for i, g in enumerate(groups)]
                for f in futures:
                    merged.update(f.result())
            self.by_device[key] = merged
            self.timing[key] = time.monotonic() - start
        return self.by_device[key]

    def expected(self, case: ConformanceCase) -> np.ndarray:
        if case.id not in self._expected:
            self._expected[case.id] = expected(case)
        return self._expected[case.id]


@pytest.fixture(scope="session")
def c_results(tmp_path_factory) -> _Results:
    cache = Path(os.environ["OI_C_CONF_CACHE"]) if os.environ.get("OI_C_CONF_CACHE") else \
        tmp_path_factory.mktemp("oicache")
    return _Results(cache)


# --------------------------------------------------------------------------- tests

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("device", DEVICES)
def test_c_kernels_match_oracle(device: str, op: str, c_results: _Results) -> None:
    _check(c_results, [c for c in device_cases(device) if c.op == op], c_results.results(device),
           f"{op} cases fail on {device}")


#: the default suite leaves out GCC -O3, the project's own level: test_c_kernels_match_oracle builds
#: every matrix case with it on every target (`device_cases`)
MATRIX = TOOLCHAINS if SLOW else tuple(t for t in TOOLCHAINS if t != PRIMARY)


@pytest.mark.parametrize("toolchain", MATRIX, ids=lambda t: t.name)
@pytest.mark.parametrize("device", DEVICES if SLOW else (best_host_target(),))
def test_c_kernels_under_the_compiler_matrix(device: str, toolchain: Toolchain, c_results: _Results) -> None:
    if toolchain.missing():
        pytest.skip(toolchain.missing())
    _check(c_results, matrix_cases(), c_results.results(device, toolchain),
           f"cases fail on {device} [{toolchain.name}]")


def _check(c_results: _Results, cases: list[ConformanceCase], results, what: str) -> None:
    failures, errors = [], {}
    for case in cases:
        got = results[case.id]
        if isinstance(got, BaseException):   # a chunk that did not build or run: report it once
            errors.setdefault(id(got), (got, []))[1].append(case.id)
            continue
        try:
            assert_matches(case, got, c_results.expected(case))
        except AssertionError as exc:
            failures.append(str(exc))
    for exc, ids in errors.values():
        failures.append(f"{len(ids)} cases ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}) did not run: "
                        f"{type(exc).__name__}: {exc}")
    assert not failures, f"{len(failures)} of {len(cases)} {what}:\n" + "\n".join(failures[:25])


def test_gather_index_out_of_range_is_a_status(tmp_path) -> None:
    """A gather index outside [-n, n) makes step() fail with OI_ERR_INDEX_OUT_OF_RANGE."""
    from openinfer.errors import ExecutionError
    from openinfer.sim import Simulator

    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    case = ConformanceCase("gather/oob", "gather", "normal", (table, np.array([1, 5], np.int32)),
                           (dt.F32, dt.I32), {"axis": 0}, dt.F32, (2, 3))
    with cache_dir(tmp_path):
        sim = Simulator(empty_model(), case_graph([case], "gather_oob"), arch=REPO / "devices" / "x86_64-generic.json",
                        sizevars={})
    ex = sim.make_executor()
    for idx, ok in (([1, -5], True), ([1, 5], False), ([-6, 0], False), ([4, -1], True)):
        ex.insert(c0_x0=table, c0_x1=np.array(idx, np.int32))
        if ok:
            ex.run_step()
            np.testing.assert_array_equal(ex.fetch("c0_y"), np.take(table, idx, axis=0))
        else:
            with pytest.raises(ExecutionError, match="index"):
                ex.run_step()


def index_tuple_cases() -> list[ConformanceCase]:
    """gather_nd and scatter_nd (reduction add) of a [5, 3] table by two index tuples of one entry."""
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[1], [5]], np.int64)
    return [ConformanceCase("gather_nd/oob", "gather_nd", "normal", (table, idx), (dt.F32, dt.I64), {}, dt.F32, (2, 3)),
            ConformanceCase("scatter_nd/oob", "scatter_nd", "normal", (table, idx, np.ones((2, 3), np.float32)),
                            (dt.F32, dt.I64, dt.F32), {"reduction": "add"}, dt.F32, (5, 3))]


def check_index_tuples_out_of_range(sim) -> None:
    """Index tuples outside [-n, n) make step() fail with OI_ERR_INDEX_OUT_OF_RANGE naming the
    node; valid ones (negative too) then run as the oracle says."""
    from openinfer.errors import ExecutionError

    cases = index_tuple_cases()
    ex = sim.make_executor()
    ok, fine = [[1], [-5]], [[0], [0]]          # per step: (gather_nd's tuples, scatter_nd's), the failing node
    steps = (((ok, ok), None), (([[1], [5]], fine), 0), ((fine, [[-6], [0]]), 1), (([[4], [-1]],) * 2, None))
    for tuples, bad in steps:
        tuples = [np.array(t, np.int64) for t in tuples]
        for k, case in enumerate(cases):
            ex.insert(**{f"c{k}_x{j}": tuples[k] if j == 1 else x for j, x in enumerate(case.inputs)})
        if bad is None:
            ex.run_step()
            for k, case in enumerate(cases):
                want = expected(replace(case, inputs=(case.inputs[0], tuples[k], *case.inputs[2:])))
                np.testing.assert_array_equal(ex.fetch(f"c{k}_y"), want)
        else:
            with pytest.raises(ExecutionError, match=rf"in `op {cases[bad].op}\(.*\) >> c{bad}_y`: .*out of range"):
                ex.run_step()


def test_index_tuples_out_of_range_are_a_status(tmp_path) -> None:
    from openinfer.sim import Simulator

    with cache_dir(tmp_path):
        sim = Simulator(empty_model(), case_graph(index_tuple_cases(), "nd_oob"),
                        arch=REPO / "devices" / "x86_64-generic.json", sizevars={})
        check_index_tuples_out_of_range(sim)


def extra_cases() -> list[ConformanceCase]:
    """Code paths the generated cases' small shapes do not reach, checked against the oracle too:
    sdpa's 8-lane q.k dot (D >= 8, with a remainder), wide u64/i64 -> f32 rounding."""
    from conformance.cases import as_type, tolerance

    from openinfer.ops import TensorType, get

    rng = np.random.default_rng(7)
    out = []
    for t in (dt.F32, dt.F64):
        def v(*shape, t=t):
            return as_type(rng.normal(0, 1, shape), t)
        keep = rng.random((3, 9)) < 0.7
        keep[1] = False
        for tag, ins, attrs in (("lanes", [v(2, 3, 12), v(2, 9, 12), v(2, 9, 5)], {}),
                                ("lanes_causal_mask", [v(2, 3, 16), v(2, 9, 16), v(2, 9, 5), keep], {"causal": True}),
                                ("lanes_gqa", [v(1, 4, 2, 8), v(1, 2, 3, 8), v(1, 2, 3, 8)], {"scale": 0.2})):
            types = tuple(dt.BOOL if x.dtype == np.bool_ else t for x in ins)
            in_types = [TensorType(d, x.shape) for d, x in zip(types, ins, strict=True)]
            shape = get("sdpa").infer(in_types, attrs).out_shape
            out.append(ConformanceCase(f"sdpa/{t.name}/extra/{tag}", "sdpa", "normal", tuple(ins), types, attrs, t,
                                       shape, tolerance("sdpa", t)))
    wide = {dt.U64: [2 ** 64 - 1, 2 ** 63 + 2 ** 40 + 1, 2 ** 40 + 2 ** 16 + 1, 2 ** 24 + 1, 0],
            dt.I64: [-(2 ** 63), 2 ** 63 - 1, -(2 ** 40 + 2 ** 16 + 1), 2 ** 24 + 3, -1]}
    for src, vals in wide.items():
        x = np.array(vals, dtype=src.np_dtype)
        for to in (dt.F32, dt.F16, dt.BF16, dt.F8, dt.F64):
            out.append(ConformanceCase(f"cast/{src.name}/extra/{to.name}", "cast", "normal", (x,), (src,), {"to": to},
                                       to, x.shape, tolerance("cast", to)))
    return out


def test_extra_paths_match_oracle(tmp_path) -> None:
    cases = extra_cases()
    with cache_dir(tmp_path):
        res = run_chunk(cases, "extra_paths", "x86_64-generic")
    for case in cases:
        got = res[case.id]
        if isinstance(got, BaseException):
            raise got
        assert_matches(case, got, expected(case))


def test_sdpa_online_softmax_path(tmp_path, monkeypatch) -> None:
    """Rows longer than SDPA_STACK_KEYS use the online softmax: run every sdpa case through it."""
    from openinfer.targets.c.kernels import nn

    monkeypatch.setattr(nn, "SDPA_STACK_KEYS", 0)
    cases = [c for c in CASES if c.op == "sdpa"]
    with cache_dir(tmp_path):
        res = run_chunk(cases, "sdpa_online", "x86_64-generic")
    for case in cases:
        got = res[case.id]
        if isinstance(got, BaseException):
            raise got
        assert_matches(case, got, expected(case))


RUNTIME_SRC = """
dynamic {
    x: f32[3, 5]; xh: f16[3, 5]; xi: i16[3, 5]; xu: u8[3, 5];
    a: f32; af: f64; n: i32; sh: i64; big: f64;
    q: f32[2, 3, 4]; k: f32[2, 5, 4]; v: f32[2, 5, 3]; pos: i32[3]; r: f32[3, 2, 4];
}
volatile {
    y1: f32[3, 5]; y2: f16[3, 5]; y3: i16[3, 5]; y4: f32[3, 5]; y5: i16[3, 5]; y6: f32[3, 5];
    y7: u8[3, 5]; y8: f16[3, 5]; y9: i16[3, 5]; y10: f32[2, 3, 3]; y11: f32[3, 2, 4]; y12: f32[3, 5];
    y13: u8[3, 5]; y14: f32[3, 5];
}
block entry {
    op clamp(x, min=a, max=2.0) >> y1;
    op relu(xh, alpha=af, clamp_max=a) >> y2;
    op clamp(xi, min=n, max=sh) >> y3;
    op fill(x, value=af) >> y4;
    op shl(xi, bits=sh) >> y5;
    op recip(x, div_by_zero_mask=af) >> y6;
    op clamp(xu, min=n) >> y7;
    op fill(xh, value=big) >> y8;
    op relu(xi, alpha=af, clamp_min=n) >> y9;
    op sdpa(q, k, v, scale=a) >> y10;
    op rope(r, pos, theta=af) >> y11;
    op layer_norm(x, eps=af) >> y12;
    op fill(xu, value=sh) >> y13;
    op div(x, x, div_by_zero_mask=a) >> y14;
    return;
}
"""


def test_runtime_attributes_match_reference(tmp_path) -> None:
    """Attributes given as scalar variables reach the kernels as run-time parameters."""
    from openinfer.reference.executor import Reference
    from openinfer.sim import Simulator

    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, (3, 5)).astype(np.float32)
    x[0, :3] = [0.0, -0.0, np.nan]
    vals = dict(x=x, xh=x.astype(np.float16), xi=rng.integers(-300, 300, (3, 5)).astype(np.int16),
                xu=rng.integers(0, 255, (3, 5)).astype(np.uint8), a=np.float32(-0.75), af=np.float64(0.3),
                n=np.int32(-7), sh=np.int64(3), big=np.float64(1 + 2 ** -11 + 2 ** -40),
                q=rng.normal(size=(2, 3, 4)).astype(np.float32), k=rng.normal(size=(2, 5, 4)).astype(np.float32),
                v=rng.normal(size=(2, 5, 3)).astype(np.float32), pos=np.array([0, 3, 11], np.int32),
                r=rng.normal(size=(3, 2, 4)).astype(np.float32))
    with cache_dir(tmp_path):
        model = empty_model()
        ref = Reference(model, RUNTIME_SRC).make_executor()
        sim = Simulator(model, RUNTIME_SRC, arch=REPO / "devices" / "x86_64-generic.json")
    ex = sim.make_executor()
    for e in (ref, ex):
        e.insert(**vals)
        e.run_step()
    for i in range(1, 15):
        want, got = ref.fetch(f"y{i}"), ex.fetch(f"y{i}")
        assert got.dtype == want.dtype, f"y{i}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6,
                                   err_msg=f"y{i}")


FUSED_SRC = """
dynamic { h: f16[3, 5]; b: f16[5]; xb: bf16[3, 5]; q: i8[3, 5]; qb: i8[5]; u: u4[3, 5]; f: f32[3, 5]; g: f32[5]; }
volatile {
    y2: bf16[3, 5]; t: bf16[3, 5]; s: i8[3, 5]; y3: i8[3, 5]; y4: u4[3, 5]; y5: f32[3, 5]; z: f32[3, 5];
    k: i16[3, 5]; y7: i16[3, 5]; a: f64[3, 5]; y8: f16[3, 5];
}
block entry {
    op add(h, b) >> h;
    op relu(h, alpha=0.1) >> h;
    op mul(h, h) >> h;
    op neg(xb) >> t;
    op fma(t, xb, xb) >> y2;
    op sub(q, qb) >> s;
    op abs(s) >> s;
    op shl(s, bits=3) >> y3;
    op not(u) >> u;
    op add(u, u) >> y4;
    op mul(f, g) >> z;
    op filter(z, f, z) >> y5;
    op cast(q, to=i16) >> k;
    op mul(k, k) >> y7;
    op cast(f, to=f64) >> a;
    op cast(a, to=f16) >> y8;
    return;
}
"""


def test_fused_chains_match_reference(tmp_path) -> None:
    """`fused` kernels (openinfer/synth/fusion.py) round every step to its dtype: bit-equal to the
    unfused ops. x86_64-generic prefers fusion, so the pipeline itself must fuse these chains: a
    program that is not fused, or a fusion that raises, fails here (never a skip)."""
    from openinfer.numerics import round_float
    from openinfer.reference.executor import Reference
    from openinfer.sim import Simulator

    rng = np.random.default_rng(3)
    vals = dict(h=rng.normal(0, 3, (3, 5)).astype(np.float16), b=rng.normal(0, 3, 5).astype(np.float16),
                xb=round_float(rng.normal(0, 3, (3, 5)), dt.BF16), q=rng.integers(-128, 128, (3, 5)).astype(np.int8),
                qb=rng.integers(-128, 128, 5).astype(np.int8), u=rng.integers(0, 16, (3, 5)).astype(np.uint8),
                f=rng.normal(0, 3, (3, 5)).astype(np.float32), g=rng.normal(0, 3, 5).astype(np.float32))
    vals["f"][0, :2] = [np.nan, -0.0]
    outs = {"h", "y2", "y3", "y4", "y5", "y7", "y8"}
    with cache_dir(tmp_path):
        model = empty_model()
        sim = Simulator(model, FUSED_SRC, arch=REPO / "devices" / "x86_64-generic.json", outputs=outs)
        ref = Reference(model, FUSED_SRC).make_executor()
    assert sim.program.fused_nodes, "the x86_64-generic pipeline fused none of the chains"
    assert any(k.op == "fused" for k in sim.program.kernels)
    ex = sim.make_executor()
    for e in (ref, ex):
        e.insert(**vals)
        e.run_step()
    for v in sorted(outs):
        want, got = ref.fetch(v), ex.fetch(v)
        assert got.dtype == want.dtype, v
        np.testing.assert_array_equal(got, want, err_msg=v)


# --------------------------------------------------------------------------- sanitizers

def sanitizer_cases() -> list[ConformanceCase]:
    """Each (op, input dtype) once and each mode of an op once per kind of input dtype and packing
    (`dtype_and_mode_sample`): every kernel family, type path and mode, once."""
    return dtype_and_mode_sample(CASES)


def _sanitizer_child(cache: str) -> int:
    """Runs in the child interpreter (libasan preloaded): build, run, compare; exit status.
    -O0: the host schedule of 1,104 nodes compiles 4x faster, and the checks are the same."""
    groups = chunks(sanitizer_cases(), 500)
    res: dict[str, np.ndarray | BaseException] = {}
    with cache_dir(Path(cache)), ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for part in pool.map(lambda ig: run_chunk(ig[1], f"conf_asan_{ig[0]}", "x86_64-generic", SANITIZE),
                             enumerate(groups)):
            res.update(part)
    bad = 0
    for case in sanitizer_cases():
        got = res[case.id]
        try:
            if isinstance(got, BaseException):
                raise got
            assert_matches(case, got, expected(case))
        except Exception as exc:  # noqa: BLE001
            bad += 1
            print(f"FAIL {case.id}: {exc}", flush=True)
    print(f"sanitized cases: {len(res)}, failing: {bad}", flush=True)
    return 1 if bad else 0


def test_kernels_clean_under_asan_and_ubsan(tmp_path) -> None:
    """One case per (op, dtype, mode) built with -fsanitize=address,undefined: no report, same results."""
    run_sanitized(__file__, "_sanitizer_child", str(tmp_path))
