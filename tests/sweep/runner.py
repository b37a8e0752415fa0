"""Running sweep cases: many cases assembled into one program (each case's names prefixed
`c<k>_`), built for a target with one toolchain, run at 1 and 3 pool threads, every output
compared with the NumPy reference's. The reference of each case is computed once per process
and shared by every target and toolchain.

A failure names the case (op or fused path, dtypes, shapes, settings), the target, the toolchain
and the thread count, and ends with the one-line command that reproduces it alone
(tests/sweep/repro.py).
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import openinfer as oi
from openinfer.compare import compare
from openinfer.dtypes import lookup
from openinfer.reference.executor import Reference

from .case import SweepCase

REPO = Path(__file__).resolve().parents[2]
#: pool threads each program runs at: one (the serial paths) and an odd count (uneven claims)
THREADS = ("1", "3")


@dataclass(frozen=True)
class Failure:
    case: SweepCase
    target: str
    toolchain: str
    threads: str
    detail: str

    def __str__(self) -> str:
        return (f"{self.case.id} ({self.case.desc}) on {self.target} [{self.toolchain}] at {self.threads} "
                f"thread(s): {self.detail}\n    reproduce: {repro_command(self.case, self.target, self.toolchain)}")


def repro_command(case: SweepCase, target: str, toolchain: str) -> str:
    cc, opt = toolchain.rsplit("-O", 1)
    compiler = "" if cc == "cross" else f" --cc {cc}"          # a cross target's own compiler
    return f".venv/bin/python tests/sweep/repro.py {shlex.quote(case.id)} --arch {target}{compiler} -O{opt}"


def program(cases: list[SweepCase]) -> tuple[str, dict[str, np.ndarray], dict[str, np.ndarray], list[str]]:
    """(DSL text, inputs, model tensors, the names the host reads) of one program running `cases`."""
    sections: dict[str, list[str]] = {"dynamic": [], "constant": [], "volatile": []}
    body, inputs, consts, reads = [], {}, {}, []
    for k, case in enumerate(cases):
        names = {v.name: f"c{k}_{v.name}" for v in case.vars}
        for v in case.vars:
            name = names[v.name]
            section = {"in": "dynamic", "inout": "dynamic", "const": "constant"}.get(v.role, "volatile")
            sections[section].append(f"{name}: {v.dtype}[{', '.join(map(str, v.shape))}];")
            if v.role in ("in", "inout"):
                inputs[name] = v.value
            elif v.role == "const":
                consts[name] = v.value
            if v.role in ("out", "inout"):
                reads.append(name)
        body += [s.format(**names) for s in case.body]
    text = "".join(f"{sec} {{\n  " + "\n  ".join(decls) + "\n}\n" for sec, decls in sections.items() if decls)
    text += "block entry {\n  " + "\n  ".join(body) + "\n  return;\n}\n"
    return text, inputs, consts, reads


def write_model(path: Path, consts: dict[str, np.ndarray], dtypes: dict[str, str]) -> oi.ModelLoader:
    """The program's model file: its constants (an unused tensor where it has none)."""
    from openinfer.oinf import TensorSpec

    tensors = {n: TensorSpec(v, dtypes[n]) for n, v in consts.items()} or {"unused": np.zeros(1, np.float32)}
    oi.write_oinf(path, tensors)
    return oi.ModelLoader.open(path)


class References:
    """Each case's reference outputs (and, for sums, the sums of the magnitudes of their terms:
    the reference run again on |inputs|), computed once and kept by case id."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self._lock = threading.Lock()
        self._outputs: dict[str, dict[str, np.ndarray]] = {}
        self._magnitudes: dict[str, dict[str, np.ndarray]] = {}

    def of(self, cases: list[SweepCase]) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, np.ndarray]]]:
        with self._lock:
            missing = [c for c in cases if c.id not in self._outputs]
            if missing:
                self._run(missing)
            return ({c.id: self._outputs[c.id] for c in cases}, {c.id: self._magnitudes.get(c.id, {}) for c in cases})

    def _run(self, cases: list[SweepCase]) -> None:
        for absolute in (False, True):
            todo = cases if not absolute else [c for c in cases if c.sums]
            if not todo:
                continue
            text, inputs, consts, reads = program(todo)
            if absolute:
                inputs = {n: _magnitude(v) for n, v in inputs.items()}
                consts = {n: _magnitude(v) for n, v in consts.items()}
            tag = "abs" if absolute else "ref"
            model = write_model(self.workdir / f"{tag}-{todo[0].id}.oinf", consts, _dtypes(todo))
            ex = Reference(model, oi.graph(text)).make_executor()
            ex.insert(**inputs)
            with np.errstate(all="ignore"):
                ex.run_step()
            for k, case in enumerate(todo):
                got = {v.name: np.array(ex.fetch(f"c{k}_{v.name}")) for v in case.outputs}
                (self._magnitudes if absolute else self._outputs)[case.id] = got


def _magnitude(x: np.ndarray) -> np.ndarray:
    return np.abs(x) if x.dtype.kind == "f" else x


def _dtypes(cases: list[SweepCase]) -> dict[str, str]:
    return {f"c{k}_{v.name}": v.dtype for k, c in enumerate(cases) for v in c.vars}


def run(cases: list[SweepCase], target: str, toolchain, refs: References, workdir: Path,
        name: str) -> tuple[list[Failure], object]:
    """Build `cases` as one program for `target` with `toolchain` (tests/compilers.py; the caller
    has it active, once around any threads), run it at each of THREADS, compare with the
    reference. Returns the failures and the Simulator."""
    from openinfer.sim import Simulator

    expected, magnitudes = refs.of(cases)
    text, inputs, consts, _ = program(cases)
    model = write_model(workdir / f"{name}.oinf", consts, _dtypes(cases))
    reads = {f"c{k}_{v.name}" for k, c in enumerate(cases) for v in c.outputs}
    arch = REPO / "devices" / f"{target}.json"
    sim = Simulator(model, oi.graph(text), arch=arch, outputs=reads, build_options=toolchain.build_options)
    failures = []
    for threads in THREADS:
        ex = _executor(sim, threads)
        ex.insert(**inputs)
        ex.run_step()
        for k, case in enumerate(cases):
            for v in case.outputs:
                got = np.array(ex.fetch(f"c{k}_{v.name}"))
                with np.errstate(all="ignore"):
                    row = compare(v.name, lookup(v.dtype), expected[case.id][v.name], got,
                                  magnitudes[case.id].get(v.name))
                if not row.ok:
                    failures.append(Failure(case, target, toolchain.name, threads,
                                            f"{v.name}: max |d| {row.max_abs:.3g}; {row.detail}"))
    return failures, sim


def _executor(sim, threads: str):
    saved = os.environ.get("OI_NUM_THREADS")
    os.environ["OI_NUM_THREADS"] = threads          # read when the model is created
    try:
        return sim.make_executor()
    finally:
        if saved is None:
            os.environ.pop("OI_NUM_THREADS", None)
        else:
            os.environ["OI_NUM_THREADS"] = saved
