"""`openinfer gen --emit triton`: a model repository NVIDIA's Triton Inference Server loads.

    repo/NAME/config.pbtxt          the model's configuration (inputs, outputs, batching, sequences)
    repo/NAME/1/model.py            the Python backend (templates/triton/model.py, the same for
                                    every program: it reads NAME.json and drives NAME.h's C ABI
                                    through ctypes, so it needs numpy and nothing of OpenInfer)
    repo/NAME/1/libNAME.so          the program, built here from repo/NAME/project
    repo/NAME/1/NAME.json           the ABI manifest (variables, dims, dynamic sizes, the memory
                                    create_in takes) plus what serving adds (batch size, sequences)
    repo/NAME/1/NAME.oinf           the weights, read once per model instance
    repo/NAME/project/              the meson project `openinfer gen` writes, kept for audit and
                                    rebuilds (Triton ignores a version folder whose name is not a number)

How the graph maps (docs/serving.md): the inputs are the graph's `dynamic` variables and the
outputs its fetchable `volatile` ones, under their DSL names. When every input and output leads
with the same dynamic size B, Triton batches requests along it (`max_batch_size` = B's bound,
`dynamic_batching`) and model.py runs a batch as one step at B = the rows it holds. A graph with
persistent state gets the sequence batcher instead (its `oldest` strategy: with
`max_batch_size: 0`, `direct` would give one sequence slot per model instance, a process each):
up to `max_candidate_sequences` sequences live on each instance at once, each with a program
context of its own (from `create_in` over the instance's one copy of the weights) kept under its
correlation ID, reset on START, freed on END or when Triton releases the sequence after
`max_sequence_idle_microseconds` idle; further sequences wait in Triton's backlog.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .build import build, library_path
from .errors import SynthesisError
from .resources import templates_dir
from .writetree import write_tree

#: The Triton data type of each OpenInfer dtype that has one with the same bytes (config.pbtxt's
#: TYPE_*; the KServe v2 protocol's name is the part after TYPE_). bf16 and f8 have no NumPy type
#: the Python backend could hand over, the packed integers and bitset no Triton type at all.
TRITON_TYPES = {"f32": "TYPE_FP32", "f16": "TYPE_FP16", "f64": "TYPE_FP64", "i8": "TYPE_INT8", "i16": "TYPE_INT16",
                "i32": "TYPE_INT32", "i64": "TYPE_INT64", "u8": "TYPE_UINT8", "u16": "TYPE_UINT16",
                "u32": "TYPE_UINT32", "u64": "TYPE_UINT64", "bool": "TYPE_BOOL"}

#: The version folder Triton serves (a repository written again replaces it in place).
VERSION = "1"


@dataclass(frozen=True)
class ServingOptions:
    """What `openinfer gen --emit triton` takes beside the program."""

    #: live sequences of a stateful graph on each model instance (each a program context)
    sequences: int = 4
    #: seconds after which Triton releases an idle sequence (and model.py frees its context)
    sequence_idle_s: float = 60.0
    #: model instances (each a process with its own program contexts and copy of the weights)
    instances: int = 1
    #: how long Triton may hold a request to batch it with later ones (0: only those already queued)
    batch_delay_us: int = 0


@dataclass(frozen=True)
class Tensor:
    """One Triton input or output: the program variable behind it."""

    name: str
    var: int
    dtype: str
    dims: tuple       # ints and size names or expressions ("B", "2*S"), as NAME.json writes them


def serving_signature(manifest: dict) -> tuple[list[Tensor], list[Tensor], str | None, bool]:
    """(inputs, outputs, batch size name or None, stateful) of a program's manifest."""
    def tensor(v) -> Tensor:
        if v["dtype"] not in TRITON_TYPES:
            raise SynthesisError(f"`{v['name']}` is {v['dtype']}, which Triton cannot carry (its types: "
                                 f"{', '.join(TRITON_TYPES)}): cast it in the graph")
        return Tensor(v["name"], v["id"], v["dtype"], tuple(v.get("dims", v["shape"])))

    inputs = [tensor(v) for v in manifest["vars"] if v["kind"] == "dynamic"]
    outputs = [tensor(v) for v in manifest["vars"] if v["kind"] == "volatile" and v["gettable"]]
    if not outputs:
        raise SynthesisError("the graph has no fetchable volatile variable for Triton to return")
    stateful = any(v["kind"] == "persistent" for v in manifest["vars"])
    sizes = {s["name"] for s in manifest["sizes"]}
    leads = {t.dims[0] if t.dims else None for t in inputs + outputs}
    batch = None
    if not stateful and inputs and len(leads) == 1:
        lead = leads.pop()
        batch = lead if lead in sizes else None
    return inputs, outputs, batch, stateful


def _dims_text(dims) -> str:
    return "[ " + ", ".join(str(d) if isinstance(d, int) else "-1" for d in dims) + " ]"


def config_text(name: str, manifest: dict, source: str, options: ServingOptions) -> str:
    """config.pbtxt (protobuf text format) of the program `manifest` describes."""
    inputs, outputs, batch, stateful = serving_signature(manifest)
    bound = {s["name"]: s["max"] for s in manifest["sizes"]}
    lines = [f"# Generated by OpenInfer {__version__} from {source} for {manifest['device']} by",
             "# `openinfer gen --emit triton`; written again by the next such run (docs/serving.md).",
             f'name: "{name}"', 'backend: "python"', f"max_batch_size: {bound[batch] if batch else 0}"]
    for word, group in (("input", inputs), ("output", outputs)):
        lines.append(f"{word} [")
        for k, t in enumerate(group):
            dims = t.dims[1:] if batch else t.dims
            end = "," if k < len(group) - 1 else ""
            lines.append(f'  {{ name: "{t.name}" data_type: {TRITON_TYPES[t.dtype]} dims: {_dims_text(dims)} }}{end}')
        lines.append("]")
    if batch:
        delay = options.batch_delay_us
        lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {delay} }}" if delay
                     else "dynamic_batching { }")
    if stateful:
        # a sequence keeps its candidate slot (and so its program context) until END or idle
        # release; START/END as 0/1 and the correlation ID arrive as the control inputs
        lines += ["sequence_batching {",
                  f"  max_sequence_idle_microseconds: {round(options.sequence_idle_s * 1e6)}",
                  f"  oldest {{ max_candidate_sequences: {options.sequences} }}",
                  "  control_input [",
                  '    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },',
                  '    { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },',
                  '    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }',
                  "  ]", "}"]
    lines.append(f"instance_group [ {{ count: {options.instances} kind: KIND_CPU }} ]")
    lines.append(f'parameters {{ key: "openinfer_manifest" value: {{ string_value: "{name}.json" }} }}')
    return "\n".join(lines) + "\n"


def write_repository(plan, out: Path, model_path: str | Path, *, source: str, options: ServingOptions,
                     progress=None) -> list[Path]:
    """Write `plan`'s project under out/NAME/project, build it, and write the Triton model
    out/NAME (config.pbtxt, VERSION/); returns the files that changed."""
    for what, value, least in (("sequences", options.sequences, 1), ("instances", options.instances, 1),
                               ("batch-delay", options.batch_delay_us, 0)):
        if value < least:
            raise SynthesisError(f"--triton-{what} {value}: at least {least}")
    if not options.sequence_idle_s > 0:
        raise SynthesisError(f"--triton-idle {options.sequence_idle_s}: a number of seconds above 0")
    name = plan.name
    manifest = json.loads(plan.files[f"{name}.json"])
    inputs, outputs, batch, stateful = serving_signature(manifest)
    model_dir = Path(out) / name
    project = model_dir / "project"
    changed = plan.emit(project)
    build_dir = build(project, progress=progress)
    library = library_path(build_dir, name)
    serving = {**manifest, "serving": {
        "library": library.name, "weights": f"{name}.oinf",
        "batch": batch, "stateful": stateful, "sequences": options.sequences,
        "sequence_idle_s": options.sequence_idle_s,
        "inputs": [t.name for t in inputs], "outputs": [t.name for t in outputs]}}
    files = {
        "config.pbtxt": config_text(name, manifest, source, options).encode(),
        f"{VERSION}/model.py": (templates_dir() / "triton" / "model.py").read_bytes(),
        f"{VERSION}/{name}.json": (json.dumps(serving, indent=2, sort_keys=True) + "\n").encode(),
        f"{VERSION}/{library.name}": library.read_bytes(),
        f"{VERSION}/{name}.oinf": Path(model_path).read_bytes(),
    }
    return changed + write_tree(model_dir, files)
