"""The synthesizer front door: device descriptor + model + graph -> a complete meson project.

    plan = Synthesizer.from_arch("devices/x86_64-avx2.json").synthesize(model, graph)
    plan.emit("build/out")          # writes only files whose content changed

Everything is rendered in memory first; only then are files written (each atomically, by
rename: openinfer/writetree.py), so a failure while generating leaves the previous output
untouched, and a re-run that changes nothing rewrites nothing (mtimes stay, ninja has no work).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .cross import CROSS_FILE, cross_file_text, is_foreign
from .dims import Dim, capacity, shape_sizevars
from .errors import SynthesisError
from .resources import hal_dir, templates_dir
from .synth.fusion import fold_elementwise, fold_norms, fold_pools, fold_rope, fold_transposes, fuse
from .synth.lower import lower
from .synth.memplan import MemoryPlan, plan
from .synth.prepack import prepack
from .synth.program import Program, dynamic_ranges
from .synth.table_views import table_reads_in_place, table_writes_in_place
from .synth.views import views
from .targets import devices
from .targets.base import PROGRAM_ABI_VERSION, Target, target_for
from .writetree import write_tree


def default_name(graph) -> str:
    stem = Path(graph.source_name).stem if getattr(graph, "source_name", None) else "model"
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return name if name and not name[0].isdigit() else f"m_{name}"


@dataclass
class SynthesisPlan:
    """A synthesized program ready to be written: `files` maps relative paths to contents."""

    program: Program
    memory: MemoryPlan
    device: devices.Device
    target: Target
    files: dict[str, bytes]
    inputs: list[Path] = field(default_factory=list)   # everything the output depends on (depfiles)

    @property
    def name(self) -> str:
        return self.program.name

    def source_files(self) -> dict[str, bytes]:
        """Just the program's C sources, with fixed names, for embedding into another build (the
        HAL comes from the build's own copy, e.g. OpenInfer's root meson.build):

        - C targets: NAME.h, NAME.c, NAME_kernels.h, NAME_kernels.c;
        - Vulkan targets: NAME.h, NAME.c, NAME_shaders.c — the shaders are compiled here with
          glslc and their SPIR-V written into NAME_shaders.c, so the build needs no shader step.
        """
        n = self.name
        out = {k: v for k, v in self.files.items() if k in self.target.source_names(n)}
        if f"{n}_shaders.c" in self.target.source_names(n):
            out[f"{n}_shaders.c"] = _inline_spirv(self.files, n)
        return out
    def emit(self, out_dir, *, sources_only: bool = False) -> list[Path]:
        """Write the project (or only its sources) into `out_dir`; returns the paths that changed."""
        if sources_only:
            return write_tree(Path(out_dir), self.source_files(), owner=self.name)
        return write_tree(Path(out_dir), self.files)


class Synthesizer:
    def __init__(self, device: devices.Device):
        self.device = device

    @classmethod
    def from_arch(cls, arch) -> Synthesizer:
        """`arch`: a descriptor path, a bundled descriptor's name, or an already loaded Device."""
        return cls(arch if isinstance(arch, devices.Device) else devices.load(arch))

    def synthesize(self, model, graph, *, name: str | None = None, sizevars: Mapping[str, int] | None = None,
                   dynamic: Mapping[str, int] | None = None, outputs: set[str] | None = None,
                   embed_weights: bool = False) -> SynthesisPlan:
        """`dynamic` ({"S": 512}): sizevars set at run time (`NAME_set_size`), at most their bound."""
        from .api import bind_inputs

        m, g, bound = bind_inputs(model, graph, sizevars, dynamic)
        name = name or default_name(g)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SynthesisError(f"program name {name!r} must be a C identifier")
        if outputs is not None:
            unknown = sorted(set(outputs) - set(bound.vars))
            if unknown:
                raise SynthesisError(f"--outputs names unknown variables: {', '.join(unknown)}")
        if embed_weights and m is None:
            raise SynthesisError("--embed-weights needs a model")
        prog = lower(bound, name=name, outputs=outputs)
        target = target_for(self.device)
        prefs = self.device.preferences
        if prefs.get("prefer_fusion", True) and target.fuses_elementwise():
            deps = dep_names(g)
            prog = fold_elementwise(prog, target.takes_prologue, dep_names=deps)
            prog = fuse(prog, max_ops=int(prefs.get("max_kernel_ops", 8)), dep_names=deps,
                        epilogue_ok=target.takes_epilogue)
            prog = fold_rope(prog, target.takes_rope_epilogue, dep_names=deps)
            prog = fold_pools(prog, target.pools_own_result, dep_names=deps)
            prog = fold_norms(prog, target.takes_prologue, dep_names=deps)
            prog = fold_transposes(prog, target.reads_transposed, dep_names=deps)
        prog = views(prog)
        if target.reads_tables_in_place():
            prog = table_reads_in_place(table_writes_in_place(prog))
        if prefs.get("prepack_weights", True):
            prog = prepack(prog, target.packed_inputs)
        mem = plan(prog)
        rendered = target.render(prog, mem, embed_weights=embed_weights)
        files = {k: v.encode() for k, v in rendered.files.items()}
        files[f"{name}.json"] = manifest(prog, mem, target, rendered.context_bytes).encode()
        files["memory-plan.txt"] = (mem.table() + "\n\n" + mem.diagram() + "\n").encode()
        for path in target.hal_sources():
            files[f"hal/{path.relative_to(hal_dir()).as_posix()}"] = path.read_bytes()
        if is_foreign(self.device) and self.device.toolchain is not None:
            # built here for another architecture: `openinfer build` cross-compiles with it
            files[CROSS_FILE] = cross_file_text(self.device).encode()
        inputs = []
        if embed_weights:
            files[f"{name}.oinf"] = Path(m.path).read_bytes()
        if m is not None:
            inputs.append(Path(m.path))
        if g.source_name and Path(g.source_name).exists():
            inputs.append(Path(g.source_name))
        if self.device.source and Path(self.device.source).exists():
            inputs.append(Path(self.device.source))
        inputs += sorted(p for p in templates_dir().rglob("*") if p.is_file())
        inputs += target.hal_sources()
        # the generator itself: a different OpenInfer may generate different code
        package = Path(__file__).resolve().parent.parent
        inputs += sorted(p for p in package.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts)
        return SynthesisPlan(prog, mem, self.device, target, files, inputs)


def _inline_spirv(files: Mapping[str, bytes], name: str) -> bytes:
    """NAME_shaders.c with every `#include "X.spv.h"` replaced by the SPIR-V glslc makes of
    shaders/X.comp (the same command line as the emitted meson.build)."""
    import shutil
    import subprocess

    glslc = shutil.which("glslc")
    if glslc is None:
        raise SynthesisError("glslc (shaderc) is required to compile Vulkan shaders for --emit sources: "
                             "apt install glslc")
    text = files[f"{name}_shaders.c"].decode()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, data in files.items():
            if rel.startswith("shaders/"):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(data)
        for match in sorted(set(re.findall(r'#include "([A-Za-z0-9_]+)\.spv\.h"', text))):
            source = root / "shaders" / f"{match}.comp"
            target = root / f"{match}.spv.h"
            run = subprocess.run([glslc, "--target-env=vulkan1.2", "-mfmt=c", "-o", str(target), str(source)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise SynthesisError(f"glslc failed on {match}.comp:\n{run.stderr.strip()}")
            text = text.replace(f'#include "{match}.spv.h"', target.read_text().strip())
    return text.encode()


def dep_names(graph) -> set[str]:
    """Every name a `dep` node mentions: nodes it names are kept apart by fusion."""
    from .ir import nodes as ir

    names: set[str] = set()
    for block in graph.blocks.values():
        for n in ir.walk(block.nodes):
            if isinstance(n, ir.Dep):
                names.update((n.after, n.before))
    return names


def manifest(prog: Program, mem: MemoryPlan, target: Target, context_bytes: int) -> str:
    """`<name>.json`: what a loader (the simulator, a user's tool) needs to know about the ABI."""
    device = target.device
    doc = {
        "openinfer": __version__,
        "name": prog.name,
        "prefix": f"oi_{prog.name}",
        "abi_version": PROGRAM_ABI_VERSION,
        "device": device.name,
        "target": target.label,
        "arena_bytes": mem.arena_bytes,
        "persistent_bytes": mem.persistent_bytes,
        "weight_bytes": prog.weight_bytes,
        # the memory create_in() takes from its caller: the context object, then arena and persistent
        "context_bytes": context_bytes,
        # shapes and byte counts are capacities; `dims` names the dynamic ones (`S`, `64*S`)
        "vars": [{"id": v.id, "name": v.name, "kind": v.kind, "dtype": v.dtype.name, "shape": list(capacity(v.shape)),
                  "nbytes": v.nbytes, "settable": v.settable, "gettable": v.gettable,
                  "dynamic_shape": v.dynamic_shape,
                  **({"dims": [d.pretty() if isinstance(d, Dim) else d for d in v.shape]}
                     if shape_sizevars(v.shape) else {})} for v in prog.vars],
        # the dynamic sizes (NAME_set_size), in their enum's order
        "sizes": [{"name": k, "min": lo, "max": hi} for k, (lo, hi, _) in dynamic_ranges(prog).items()],
        "nodes": {str(i): loc for i, loc in sorted(prog.node_locations.items())},
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
