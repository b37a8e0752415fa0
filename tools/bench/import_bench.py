"""Time `openinfer import` end to end on a ~100 MB transformer-like ONNX model (not a test; run it by hand).

    python3 tools/bench/import_bench.py [OUT.json] [--layers 8] [--hidden 512] [--external] [--repeat 3]
                                        [--profile FILE.prof] [--keep DIR]

The model is built with onnx.helper (no torch): `--layers` encoder layers of LayerNormalization,
Q/K/V MatMul + Add, scores MatMul with a Transpose, Softmax, output projection, residual Add, and
an MLP (MatMul + Add, Relu, MatMul + Add); nodes are named as PyTorch exports name them
(`/encoder/layer.3/attention/query/MatMul`). The default, 8 layers of hidden 512, holds 25.2 M f32
weights (about 101 MB). `--external` stores them as ONNX external data beside the model.

Each run is `openinfer import MODEL -o DIR` in a fresh subprocess (parse, fold, write .oig/.oinf,
the bind check; the interpreter's start and imports included), best wall and CPU (user + system)
time of `--repeat` (CPU time is the steadier figure on a shared machine), then the
import's phases in-process. `--profile` writes a cProfile of one in-process import. The figures
and the machine go into OUT.json (default: print only).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import REPO, machine  # noqa: E402


def build_model(layers: int, hidden: int, seq: int = 16, seed: int = 0):
    """The encoder stack as an onnx.ModelProto with random f32 weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def weight(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape, np.float32) * 0.02), name))
        return name

    def node(op: str, path: str, inputs: list[str], **attrs) -> str:
        out = f"{path}_output_0"
        nodes.append(helper.make_node(op, inputs, [out], name=path, **attrs))
        return out

    def linear(x: str, prefix: str, n_in: int, n_out: int) -> str:
        mm = node("MatMul", f"{prefix}/MatMul", [x, weight(f"{prefix[1:].replace('/', '.')}.weight", n_in, n_out)])
        return node("Add", f"{prefix}/Add", [mm, weight(f"{prefix[1:].replace('/', '.')}.bias", n_out)])

    def layer_norm(x: str, prefix: str) -> str:
        return node("LayerNormalization", f"{prefix}/LayerNormalization",
                    [x, weight(f"{prefix[1:].replace('/', '.')}.gamma", hidden),
                     weight(f"{prefix[1:].replace('/', '.')}.beta", hidden)], axis=-1, epsilon=1e-5)

    x = "x"
    for i in range(layers):
        p = f"/encoder/layer.{i}"
        h = layer_norm(x, f"{p}/attention/norm")
        q = linear(h, f"{p}/attention/query", hidden, hidden)
        k = linear(h, f"{p}/attention/key", hidden, hidden)
        v = linear(h, f"{p}/attention/value", hidden, hidden)
        kt = node("Transpose", f"{p}/attention/Transpose", [k], perm=[1, 0])
        scores = node("MatMul", f"{p}/attention/scores/MatMul", [q, kt])
        probs = node("Softmax", f"{p}/attention/Softmax", [scores], axis=-1)
        ctx = node("MatMul", f"{p}/attention/context/MatMul", [probs, v])
        attn = linear(ctx, f"{p}/attention/output", hidden, hidden)
        x = node("Add", f"{p}/attention/residual/Add", [x, attn])
        h = layer_norm(x, f"{p}/mlp/norm")
        h = node("Relu", f"{p}/mlp/Relu", [linear(h, f"{p}/mlp/up", hidden, 4 * hidden)])
        x = node("Add", f"{p}/mlp/residual/Add", [x, linear(h, f"{p}/mlp/down", 4 * hidden, hidden)])
    nodes.append(helper.make_node("Identity", [x], ["y"], name="/output/Identity"))
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, hidden])], inits)
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", help="write the figures as JSON here")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--external", action="store_true", help="store the weights as ONNX external data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", metavar="FILE.prof", help="write a cProfile of one in-process import")
    ap.add_argument("--keep", metavar="DIR", help="build the model and write the import here (kept)")
    args = ap.parse_args()

    import onnx

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="oi-import-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    model = build_model(args.layers, args.hidden)
    weights = sum(int(onnx.numpy_helper.to_array(t).size) for t in model.graph.initializer)
    path = work / "encoder.onnx"
    onnx.save(model, str(path), save_as_external_data=args.external, all_tensors_to_one_file=True,
              location="encoder.onnx.data", size_threshold=1024)
    onnx_bytes = sum(p.stat().st_size for p in work.glob("encoder.onnx*"))
    print(f"model: {args.layers} layers, hidden {args.hidden}, {len(model.graph.node)} nodes, "
          f"{weights / 1e6:.1f} M f32 weights, {onnx_bytes / 1e6:.1f} MB on disk"
          f"{' (external data)' if args.external else ''}")

    cmd = [sys.executable, "-m", "openinfer", "import", str(path), "-o", str(work / "out")]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    walls, cpus = [], []
    for _ in range(args.repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"openinfer import (subprocess, end to end): best {min(walls):.2f} s wall, {min(cpus):.2f} s CPU "
          f"of {args.repeat} (wall {', '.join(f'{w:.2f}' for w in walls)}; load {machine()['load']:.1f})")

    sys.path.insert(0, str(REPO))
    from openinfer.onnx import import_onnx

    phases = {}
    t = time.perf_counter()
    result = import_onnx(path)
    phases["import_onnx (load, fold, print, bind check)"] = time.perf_counter() - t
    t = time.perf_counter()
    result.write(work / "out2")
    phases["write .oig + .oinf"] = time.perf_counter() - t
    for what, seconds in phases.items():
        print(f"  {what}: {seconds:.2f} s")
    if args.profile:
        import cProfile

        cProfile.runctx("import_onnx(path).write(work / 'out3')", globals(), {"import_onnx": import_onnx,
                        "path": path, "work": work}, args.profile)
        print(f"profile written to {args.profile}")

    figures = {"machine": machine(), "layers": args.layers, "hidden": args.hidden, "external": args.external,
               "nodes": len(model.graph.node), "weights": weights, "onnx_bytes": onnx_bytes,
               "end_to_end_s": walls, "end_to_end_cpu_s": cpus, "phases_s": phases}
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    if not args.keep:
        import shutil

        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
