"""Runs the ONNX backend node tests (the cases `onnx.backend.test.case.node.collect_testcases`
builds in memory) and the model tests of the package's `pytorch-converted` and `pytorch-operator`
data folders through `import_onnx` and an openinfer engine, and tabulates the outcome per op.

Used by tests/onnx/test_onnx_node_cases.py and by `tools/onnx_node_table.py`, which writes the table
into docs/onnx.md; the test checks that the table there is the one this run produces.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import OnnxImportError, OpenInferError
from .context import CONSTANT_INPUTS, SUPPORTED_OPS
from .importer import import_onnx

#: Outcomes of one case.
REFUSED = "refused"          # the importer refused it with its OnnxImportError
PASSED = "passed"
FAILED = "failed"            # imported, but an engine's outputs differ (or it raised)


@dataclass
class CaseResult:
    name: str
    ops: tuple[str, ...]
    outcome: str
    detail: str = ""
    dsl_ops: tuple[str, ...] = ()        # the DSL ops of the imported graph, and its `branch` and `loop` nodes


def collect_cases() -> list:
    """The node test cases of the installed onnx package (about 10 s for onnx 1.23's 1,884)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # some case builders overflow casts on purpose
        return [c for c in collect_testcases(None) if c.model is not None and c.kind == "node"]


#: Supported cases that fail on the reference, and why (docs/onnx.md says the same): the test
#: checks that exactly these fail.
EXPLAINED_FAILURES = {
    "test_attention_4d_causal_fp16_expanded":
        "two outputs one f16 ulp (2**-11 = 0.00049 just below 0.5) from the expected, where the case's rtol "
        "1e-3 is less than one ulp: the expanded function's f16 intermediates (scaled Q and K, the masked "
        "scores, softmax) round where the case's NumPy evaluation rounds differently",
}

#: The model-test folders inside the onnx package (`onnx/backend/test/data/KIND/test_*/`: a
#: model.onnx and test_data_set_*/input_*.pb, output_*.pb), run as the node cases are.
FOLDER_KINDS = ("pytorch-converted", "pytorch-operator")


def collect_folder_cases(kind: str) -> list:
    """The model tests of one data folder of the installed onnx package, with their models and
    data sets loaded, sorted by name."""
    import onnx
    import onnx.numpy_helper as nh
    from onnx.backend.test.loader import load_model_tests

    def tensors(directory: Path, prefix: str) -> list[np.ndarray]:
        files = sorted(directory.glob(f"{prefix}_*.pb"), key=lambda f: int(f.stem.split("_")[-1]))
        return [nh.to_array(onnx.load_tensor(str(f))) for f in files]

    cases = []
    for case in sorted(load_model_tests(kind=kind), key=lambda c: c.name):
        folder = Path(case.model_dir)
        data = [(tensors(d, "input"), tensors(d, "output"))
                for d in sorted(folder.glob("test_data_set_*"), key=lambda d: int(d.name.split("_")[-1]))]
        cases.append(dataclasses.replace(case, model=onnx.load(str(folder / "model.onnx")), data_sets=data))
    return cases


def case_ops(case) -> tuple[str, ...]:
    return tuple(sorted({n.op_type for n in case.model.graph.node}))


def supported_cases(cases: Iterable) -> list:
    """The cases whose every op the importer has in its table."""
    return [c for c in cases if all(op in SUPPORTED_OPS for op in case_ops(c))]


def with_constant_inputs(case):
    """The case with the graph inputs that feed an input the importer needs as a constant (a
    Reshape's shape, Clip's bounds, BatchNormalization's statistics) made initializers holding the
    data set's values, as an exported model holds them; the case itself where there are none."""
    import copy

    import onnx.numpy_helper as nh

    graph = case.model.graph
    feeding = {node.input[k] for node in graph.node for k in CONSTANT_INPUTS.get(node.op_type, ())
               if k < len(node.input) and node.input[k]}
    initializers = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    promote = [n for n in inputs if n in feeding]
    if not promote or len(case.data_sets) != 1:
        return case
    values = dict(zip(inputs, case.data_sets[0][0], strict=True))
    model = copy.deepcopy(case.model)
    keep = [i for i in model.graph.input if i.name not in promote]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.graph.initializer.extend(nh.from_array(np.asarray(values[n]), n) for n in promote)
    data = [([values[n] for n in inputs if n not in promote], case.data_sets[0][1])]
    return dataclasses.replace(case, model=model, data_sets=data)


def with_arrays(case):
    """The case with its data given as NumPy arrays (a few cases hold TensorProtos)."""
    import onnx
    import onnx.numpy_helper as nh

    def array(v):
        return nh.to_array(v) if isinstance(v, onnx.TensorProto) else v

    data = [([array(v) for v in inputs], [array(v) for v in outputs]) for inputs, outputs in case.data_sets]
    return dataclasses.replace(case, data_sets=data)


def run_case(case, engine: Callable | None = None) -> CaseResult:
    """Imports `case.model` and runs each of its data sets on the reference (or on the engine
    `engine(model_path, graph_text)` returns), comparing with the expected outputs at the case's
    tolerances."""
    from ..oinf import ModelLoader
    from ..reference.executor import Reference

    ops = case_ops(case)
    case = with_constant_inputs(with_arrays(case))
    graph = case.model.graph
    initializers = {t.name for t in graph.initializer}
    input_names = [i.name for i in graph.input if i.name not in initializers]
    output_names = [o.name for o in graph.output]
    try:
        first_inputs = case.data_sets[0][0] if case.data_sets else []
        sizevars = _symbolic_sizes(graph, input_names, first_inputs)
        imported = import_onnx(case.model, name="case", sizevars=sizevars)
    except OnnxImportError as exc:
        return CaseResult(case.name, ops, REFUSED, str(exc).splitlines()[0])
    dsl = {n: imported.renamed.get(n, n) for n in input_names + output_names}
    lines = [line.split() for line in imported.text.splitlines()]
    dsl_ops = tuple(sorted({words[1].split("(")[0] if words[0] == "op" else words[0] for words in lines
                            if words and words[0] in ("op", "branch", "loop")}))
    try:
        with tempfile.TemporaryDirectory(prefix="oi-onnx-case-") as tmp:
            graph_path, model_path = imported.write(tmp)
            model = ModelLoader.open(model_path)
            try:
                runner = (engine or (lambda m, g: Reference(m, g).make_executor()))(model, graph_path)
                for inputs, expected in case.data_sets:
                    runner.insert(**{dsl[n]: np.asarray(v) for n, v in zip(input_names, inputs, strict=True)})
                    runner.run_step()
                    for n, want in zip(output_names, expected, strict=True):
                        got = runner.fetch(dsl[n])
                        _compare(np.asarray(want), got, case.rtol, case.atol, n)
            finally:
                del runner
                model.close()
    except (AssertionError, OpenInferError) as exc:
        return CaseResult(case.name, ops, FAILED, " ".join(str(exc).split())[:300], dsl_ops)
    return CaseResult(case.name, ops, PASSED, "", dsl_ops)


def _symbolic_sizes(graph, input_names: list[str], inputs) -> dict[str, int]:
    """Values of the inputs' symbolic dims, from the data set's arrays."""
    sizes: dict[str, int] = {}
    by_name = {i.name: i for i in graph.input}
    for name, array in zip(input_names, inputs, strict=False):
        for d, n in zip(by_name[name].type.tensor_type.shape.dim, np.shape(array), strict=False):
            if d.HasField("dim_param"):
                sizes[d.dim_param] = int(n)
    return sizes


def _compare(want: np.ndarray, got: np.ndarray, rtol: float, atol: float, name: str) -> None:
    if got.shape != want.shape:
        raise AssertionError(f"output {name}: shape {list(got.shape)}, expected {list(want.shape)}")
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"output {name}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"output {name}")


def c_label(target: str) -> str:
    """How the docs table names a target of the C runs: the host's best CPU target by that role
    (the table is the same on every host), x86_64-generic beside it by name (`every_c` runs)."""
    from ..targets.devices import best_host_target

    return "the host's best CPU target" if target == best_host_target() else target


def tabulate(results: list[CaseResult], all_cases: int, c_results: dict[str, dict[str, CaseResult]]) -> str:
    """The per-op table of docs/onnx.md (Markdown), from a run; `c_results` holds the cases run
    through the generated C by target, a column each."""
    rows = []
    for op in sorted(SUPPORTED_OPS):
        mine = [r for r in results if op in r.ops]
        imported = [r for r in mine if r.outcome != REFUSED]
        passed = [r for r in mine if r.outcome == PASSED]
        cells = []
        for ran in c_results.values():
            c_mine = [r for r in ran.values() if op in r.ops]
            cells.append(f"{sum(r.outcome == PASSED for r in c_mine)} / {len(c_mine)}")
        rows.append(f"| {op} | {len(mine)} | {len(imported)} | {len(passed)} | {' | '.join(cells)} |")
    refused = sum(r.outcome == REFUSED for r in results)
    failed = sum(r.outcome == FAILED for r in results)
    passed = sum(r.outcome == PASSED for r in results)
    on_targets = ", ".join(f"{sum(r.outcome == PASSED for r in ran.values())} of the {len(ran)} run through the "
                           f"generated C pass on {c_label(target)}" for target, ran in c_results.items())
    head = [f"{all_cases} node test cases; {len(results)} use only supported ops: {passed} pass on the reference, "
            f"{failed} fail, {refused} are refused by the importer. {on_targets[0].upper()}{on_targets[1:]}.",
            "",
            "| op | cases | imported | reference passed | "
            + " | ".join(f"generated C ({c_label(target)}) passed / run" for target in c_results) + " |",
            "|---|---|---|---|" + "---|" * len(c_results)]
    return "\n".join(head + rows) + "\n"


def tabulate_folders(results: dict[str, list[CaseResult]], all_cases: dict[str, int]) -> str:
    """The table of the pytorch-converted and pytorch-operator folders in docs/onnx.md: per folder
    the counts, then per op."""
    head = []
    for kind, mine in results.items():
        head.append(f"- `{kind}`: {all_cases[kind]} models; {len(mine)} use only supported ops: "
                    f"{sum(r.outcome == PASSED for r in mine)} pass on the reference, "
                    f"{sum(r.outcome == FAILED for r in mine)} fail, "
                    f"{sum(r.outcome == REFUSED for r in mine)} are refused by the importer.")
    every = [r for mine in results.values() for r in mine]
    rows = []
    for op in sorted({op for r in every for op in r.ops}):
        mine = [r for r in every if op in r.ops]
        rows.append(f"| {op} | {len(mine)} | {sum(r.outcome != REFUSED for r in mine)} "
                    f"| {sum(r.outcome == PASSED for r in mine)} |")
    return "\n".join(head + ["", "| op | cases | imported | reference passed |", "|---|---|---|---|"] + rows) + "\n"


def c_subset(cases: list, results: list[CaseResult], every: bool = False) -> list:
    """The cases run through the generated C, among those that pass on the reference: all of them
    with `every`; else few that together use every DSL op (and `branch`, `loop`) the imported
    graphs use (greedily, the case adding the most ops not yet covered, the first in collection
    order on a tie), so every op the importer emits is built and run at least once in ~26 builds.
    In collection order."""
    passed = {r.name: r for r in results if r.outcome == PASSED}
    if every:
        return [c for c in cases if c.name in passed]
    order = [r for r in (passed.get(c.name) for c in cases) if r is not None]
    needed = set().union(*(r.dsl_ops for r in order)) if order else set()
    covered: set[str] = set()
    chosen: set[str] = set()
    while covered != needed:
        best = max(order, key=lambda r: len(set(r.dsl_ops) - covered))
        chosen.add(best.name)
        covered |= set(best.dsl_ops)
    return [c for c in cases if c.name in chosen]


def write_table(doc: Path, table: str, marker: str = "node-table") -> None:
    """Replaces the text between the `marker` markers of `doc` with `table`."""
    text = doc.read_text()
    start, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    a, b = text.index(start) + len(start), text.index(end)
    doc.write_text(text[:a] + table + text[b:])


def table_in(doc: Path, marker: str = "node-table") -> str:
    """The text between the `marker` markers of `doc`."""
    text = doc.read_text()
    start = f"<!-- {marker}:start -->\n"
    return text[text.index(start) + len(start):text.index(f"<!-- {marker}:end -->")]


def c_engine(arch: str) -> Callable:
    """An engine for `run_case`: the generated C for `arch`, built and run by the simulator."""
    def engine(model, graph):
        from ..sim import Simulator

        return Simulator(model, graph, arch=arch).make_executor()
    return engine


@dataclass
class Run:
    """A whole run, as the test checks it and the docs tables are written from it."""

    cases: list
    results: list[CaseResult]
    c_results: dict[str, dict[str, CaseResult]]        # target -> case name -> result
    folder_cases: dict[str, list]                      # data folder -> its cases
    folder_results: dict[str, list[CaseResult]]        # data folder -> results of its supported cases


def run_all(every_c: bool = False) -> Run:
    """Every supported node case on the reference, the C subset through the generated C for the
    host's best CPU target (with `every_c`: every passing case, on x86_64-generic too), and every
    supported model of the pytorch data folders on the reference. (The default leaves
    x86_64-generic out: its portable kernels run every C conformance case.)"""
    from ..targets.devices import best_host_target

    cases = collect_cases()
    supported = supported_cases(cases)
    results = [run_case(c) for c in supported]
    c_cases = c_subset(supported, results, every=every_c)
    targets = dict.fromkeys(("x86_64-generic", best_host_target()) if every_c else (best_host_target(),))
    c_results = {arch: {c.name: run_case(c, c_engine(arch)) for c in c_cases} for arch in targets}
    folder_cases = {kind: collect_folder_cases(kind) for kind in FOLDER_KINDS}
    folder_results = {kind: [run_case(c) for c in supported_cases(mine)] for kind, mine in folder_cases.items()}
    return Run(cases, results, c_results, folder_cases, folder_results)
