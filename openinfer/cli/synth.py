"""`openinfer gen`, `build`, `sim` and `plan`: synthesis from the command line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..bisect import bisect
from ..build import build, project_compiler
from ..compare import compare, table
from ..errors import OpenInferError
from ..files import check_output_path, write_text
from ..footprint import bare_metal_footprint
from ..inputs import input_feed, outputs_of, save_outputs
from ..reference.executor import ReferenceExecutor
from ..sim import Simulator
from ..synthesizer import Synthesizer
from ..triton import ServingOptions, write_repository
from .args import add_graph_args, add_io_args, check_io_args, dynamic, input_files, load, sizevars

GEN_HELP = """\
Synthesize GRAPH on MODEL for the device described by --arch into a complete meson project
in --out: <name>.h (the C ABI), <name>.c (host schedule), <name>_kernels.c, meson.build, the HAL
sources, <name>.json (ABI manifest) and memory-plan.txt; for a CPU of another architecture than
this machine's (aarch64 here on x86-64), meson-cross.ini, the cross file `openinfer build` uses
(from the descriptor's `toolchain`). Only files whose content changed are rewritten, so a build
over the output only redoes what changed.

examples:
  openinfer gen examples/mlp_regression.oig --model mlp.oinf --arch devices/x86_64-avx2.json -o out/mlp
  openinfer gen g.oig -m m.oinf --arch x86_64-avx512 -o out/g --outputs y --depfile out/g.d
  openinfer gen examples/mlp_regression.oig -m mlp.oinf --arch x86_64-generic --dynamic B=64 \
      --emit triton -o repo      # then: tritonserver --model-repository repo (docs/serving.md)"""

BUILD_HELP = """\
Configure (meson setup, once) and build (ninja) a project written by `openinfer gen`, showing
progress; compiler errors are listed as file:line:col: message. The C compiler is the one meson
takes: the CC environment variable, else cc. A project with a meson-cross.ini (generated for
another architecture) is cross-built with it: its compiler is the descriptor's toolchain
compiler, which CC, when set, replaces (as for a native build). The project builds at -O3
(meson's release buildtype); -D passes a meson option (-Doptimization=2). Another CC, a new
version of the compiler behind it, or other options configure the build directory afresh.

examples:
  openinfer build out/mlp                      # -> out/mlp/build/libmlp_regression.so
  CC=clang openinfer build out/mlp -Doptimization=2
  openinfer build out/mlp-arm                  # generated for aarch64-neon: aarch64-linux-gnu-gcc"""

SIM_HELP = """\
Generate, build and load GRAPH for --arch, run --steps steps beside the NumPy reference with the
same inputs (see `openinfer run --help`), and print a per-output comparison table for every step.
Exits 1 on any mismatch. On a mismatch (or with --bisect) the failing step is replayed node by
node on both engines and the first node whose output diverges is reported with its source
location. --inputs FILE.npz feeds both engines your inputs instead of random ones (`x` for every
step or `step0/x`, ... per step, checked as `openinfer run --help` describes); --save-outputs
FILE.npz writes the generated program's outputs (`y`, or `step0/y`, ... for several steps).
A CPU descriptor of another architecture (aarch64-neon, armv7-generic on an x86-64 machine) is
cross-built with its toolchain and run under its QEMU emulator (QEMU_CPU picks the emulated CPU),
compared and bisected the same way.

examples:
  openinfer sim examples/mlp_regression.oig --model mlp.oinf --arch devices/x86_64-avx512.json --steps 3
  openinfer sim g.oig --model m.oinf --arch x86_64-avx2 --inputs in.npz --save-outputs out.npz
  QEMU_CPU=cortex-a76 openinfer sim g.oig --model m.oinf --arch aarch64-v82"""


def register(sub) -> None:
    g = sub.add_parser("gen", help="synthesize C (or GLSL+Vulkan) source and a meson project",
                       description=GEN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(g)
    _target_args(g)
    g.add_argument("--out", "-o", required=True, metavar="DIR", help="output directory")
    g.add_argument("--emit", choices=("project", "sources", "triton"), default="project",
                   help="project: a complete meson project (default); sources: only NAME.h, NAME.c, "
                        "NAME_kernels.h, NAME_kernels.c, for a build that compiles them itself; triton: a "
                        "Triton Inference Server model repository, DIR/NAME/ (the project built, config.pbtxt, "
                        "a Python-backend model.py, the weights; docs/serving.md)")
    g.add_argument("--triton-sequences", type=int, default=ServingOptions.sequences, metavar="N",
                   help="--emit triton, a graph with persistent state: sequences served at once by each model "
                        f"instance (a program context each; default {ServingOptions.sequences}); more wait in "
                        "Triton's backlog")
    g.add_argument("--triton-idle", type=float, default=ServingOptions.sequence_idle_s, metavar="SECONDS",
                   help="--emit triton: an idle sequence is released (its state freed) after this long "
                        f"(default {ServingOptions.sequence_idle_s:g})")
    g.add_argument("--triton-instances", type=int, default=ServingOptions.instances, metavar="N",
                   help=f"--emit triton: model instances, processes of their own (default {ServingOptions.instances})")
    g.add_argument("--triton-batch-delay", type=int, default=ServingOptions.batch_delay_us, metavar="MICROSECONDS",
                   help="--emit triton, a graph batched along a dynamic size: how long Triton may hold a request "
                        "to run it with later ones (default 0: only with those already waiting)")
    g.add_argument("--depfile", metavar="FILE",
                   help="write a make-style depfile listing every input (build-system mode: the outputs' "
                        "mtimes are then refreshed on every run, so the build tool sees them up to date)")
    g.add_argument("--embed-weights", action="store_true", help="compile the .oinf into the library")
    g.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    g.set_defaults(handler=gen)

    b = sub.add_parser("build", help="meson setup + ninja over a generated project",
                       description=BUILD_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("project", metavar="DIR", help="directory written by `openinfer gen`")
    b.add_argument("--builddir", metavar="DIR", help="build directory (default DIR/build)")
    b.add_argument("--sanitize", action="store_true", help="build with AddressSanitizer + UBSan")
    b.add_argument("--debug", action="store_true", help="debug build (-O0 -g)")
    b.add_argument("-D", dest="meson_options", metavar="OPTION=VALUE", action="append", default=[],
                   help="a meson option for the configuration (repeatable): -Doptimization=2, -Db_lto=true")
    b.set_defaults(handler=build_cmd)

    s = sub.add_parser("sim", help="generate, build and compare with the NumPy reference",
                       description=SIM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(s)
    _target_args(s)
    add_io_args(s)
    s.add_argument("--bisect", action="store_true", help="always replay the last step node by node")
    s.set_defaults(handler=sim)

    p = sub.add_parser("plan", help="print the memory plan of a graph for a device",
                       description="Lower GRAPH for --arch and print its memory plan: each buffer's region, "
                                   "offset, size and lifetime, then a lifetime diagram of the shared arena.")
    add_graph_args(p)
    _target_args(p)
    p.set_defaults(handler=plan_cmd)


def _target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", "-a", required=True, metavar="DEVICE.json",
                   help="device descriptor: a path or a bundled name (`openinfer devices list`)")
    p.add_argument("--name", metavar="NAME", help="program name (C identifier; default: the graph file's stem)")
    p.add_argument("--outputs", metavar="A,B", help="volatile variables the host may fetch (default: all); "
                   "the others' memory is shared by the planner")


def _synth(args):
    model, graph, _ = load(args)
    outputs = set(args.outputs.split(",")) if args.outputs else None
    synth = Synthesizer.from_arch(args.arch)
    return synth.synthesize(model, graph, name=args.name, sizevars=sizevars(args), dynamic=dynamic(args),
                            outputs=outputs,
                            embed_weights=getattr(args, "embed_weights", False))


def gen(args) -> int:
    t0 = time.perf_counter()
    if not args.out:
        raise OpenInferError("--out: the folder's path is empty")
    check_output_path(args.depfile, "--depfile", inputs=input_files(args))
    plan = _synth(args)
    sources_only = args.emit == "sources"
    if args.emit == "triton":
        if args.depfile is not None:
            raise OpenInferError("--depfile lists a project's files: not with --emit triton")
        options = ServingOptions(args.triton_sequences, args.triton_idle, args.triton_instances,
                                 args.triton_batch_delay)
        changed = write_repository(plan, Path(args.out), args.model, source=Path(args.graph).name, options=options,
                                   progress=None if args.quiet else lambda line: print(f"  {line}", flush=True))
        if not args.quiet:
            print(f"{plan.name}: Triton model repository {args.out} ({len(changed)} files changed) in "
                  f"{time.perf_counter() - t0:.2f} s; serve it with `tritonserver --model-repository {args.out}`")
        return 0
    changed = plan.emit(args.out, sources_only=sources_only)
    if args.depfile is not None:
        outputs = sorted(plan.source_files() if sources_only else plan.files)
        targets = " ".join(_make_escape(str(Path(args.out) / rel)) for rel in outputs)
        deps = " \\\n  ".join(_make_escape(str(p)) for p in plan.inputs)
        write_text(args.depfile, f"{targets}: \\\n  {deps}\n")
        # Unchanged outputs keep their old mtime (gen writes only what changed), which a build
        # tool would take as "still out of date" forever: refresh them all in this mode.
        for rel in outputs:
            os.utime(Path(args.out) / rel)
    if not args.quiet:
        mem = plan.memory
        written = plan.source_files() if sources_only else plan.files
        print(f"{plan.name}: {len(written)} files in {args.out} ({len(changed)} changed) "
              f"in {time.perf_counter() - t0:.2f} s")
        print(f"  target {plan.device.name}; {len(plan.program.kernels)} kernels; arena {mem.arena_bytes} B, "
              f"persistent {mem.persistent_bytes} B, weights {plan.program.weight_bytes} B")
    return 0


def _make_escape(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "\\ ").replace("#", "\\#")


def build_cmd(args) -> int:
    cc = project_compiler(Path(args.project))
    print(f"C compiler: {cc.command or 'none found'}" + (f" ({cc.version})" if cc.version else ""), flush=True)
    opts = []
    if args.sanitize:
        opts += ["-Db_sanitize=address,undefined", "-Db_lundef=false"]
    if args.debug:
        opts += ["--buildtype=debug"]
    opts += [f"-D{o}" for o in args.meson_options]
    out = build(Path(args.project), Path(args.builddir) if args.builddir else None, options=opts,
                progress=lambda line: print(line, flush=True))
    print(f"built in {out}")
    footprint = bare_metal_footprint(Path(args.project), out)
    if footprint is not None:
        print(f"footprint on the microcontroller (openinfer/footprint.py):\n{footprint.table()}")
    return 0


def plan_cmd(args) -> int:
    plan = _synth(args)
    print(plan.memory.table())
    print()
    print(plan.memory.diagram())
    return 0


def sim(args) -> int:
    check_io_args(args)
    model, graph, bound = load(args)
    steps, inputs = input_feed(bound, seed=args.seed, steps=args.steps, path=args.inputs)
    outputs = set(args.outputs.split(",")) if args.outputs else None
    t0 = time.perf_counter()
    simulator = Simulator(model, graph, arch=args.arch, sizevars=sizevars(args), dynamic=dynamic(args),
                          outputs=outputs, progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    print(f"built {simulator.library} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    ref = ReferenceExecutor(bound)
    ex = simulator.make_executor()
    if bound.dynamic:
        ex.set_sizes(**ref.sizes())
    names = [n for n in outputs_of(bound) if outputs is None or n in outputs]
    failed_step = None
    saved = []
    for step in range(steps):
        step_inputs = inputs(step)
        ref.insert(**step_inputs)
        ex.insert(**step_inputs)
        ref.run_step()
        ex.run_step()
        generated = {n: ex.fetch(n) for n in names}
        rows = [compare(n, bound.vars[n].dtype, ref.fetch(n), generated[n]) for n in names]
        print(f"step {step}:")
        print(table(rows))
        if failed_step is None and not all(r.ok for r in rows):
            failed_step = step
        saved.append(generated)
    if args.save_outputs is not None:
        save_outputs(args.save_outputs, saved)
    if failed_step is not None or args.bisect:
        step = failed_step if failed_step is not None else steps - 1
        report = bisect(bound, simulator, args.seed, step, inputs=inputs)
        print(report.text())
    if failed_step is not None:
        print(f"MISMATCH at step {failed_step}")
        return 1
    print(f"all {len(names)} output(s) match the reference over {steps} step(s)")
    return 0
