"""Hash every generated tree: the bundled examples (the .oig examples, the CNNs, the decoder in
its variants, the encoder static and dynamic) synthesized for every bundled target, in memory.

A restructuring of the generator must leave its output byte-identical; run this before and after
and compare:

    .venv/bin/python tools/tree_hashes.py > before.json     # on the old commit
    .venv/bin/python tools/tree_hashes.py > after.json
    .venv/bin/python tools/tree_hashes.py --diff before.json after.json

Prints JSON: {"<example>@<target>": {"<file>": sha256}}, and for each manifest NAME.json also the
hash of its content without the fields that name the ABI version and the target. `--diff` lists
every tree and file that differs. Nothing is built or written outside a temporary folder (the example models are written
there).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))       # the checkout this script is in, not an installed openinfer
TARGETS = ("x86_64-generic", "x86_64-avx2", "x86_64-avx512", "aarch64-generic", "aarch64-neon", "aarch64-v82",
           "cortex-m4", "cortex-m55", "lavapipe")
MANIFEST_LABELS = ("abi_version", "target")
MANIFEST_REST = " without " + ", ".join(MANIFEST_LABELS)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"tree_hashes_{name}", REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cases(tmp: Path) -> list[tuple[str, Path, Path, dict]]:
    """(label, graph, model, synthesize keywords) for every example. (Dynamic sizes come from the
    models' `dynamic.*` metadata.)"""
    models = _example("models")
    out = []
    for name in models.MODELS:
        model = tmp / f"{name}.oinf"
        models.write_model(name, model, 1 if name == "quantized_linear" else 2)
        out.append((name, REPO / "examples" / f"{name}.oig", model, {}))
        if name == "mlp_regression":
            out.append((f"{name}+embed", REPO / "examples" / f"{name}.oig", model, {"embed_weights": True}))
    for name, (graph, model) in _example("cnn").write(tmp / "cnn").items():
        out.append((f"cnn/{name}", graph, model, {}))
    decoder = _example("decoder")
    for weights in ("f32", "i8", "i4"):
        cfg = decoder.with_weights(decoder.SIZES["test"], weights)
        for variant, kw in (("", {}), ("-unrolled", {"unrolled": True}), ("-window", {"window": True})):
            if variant and weights != "f32":
                continue
            graph, model = decoder.write(cfg, tmp / f"decoder-{weights}{variant}", **kw)
            out.append((f"decoder/{weights}{variant}", graph, model, {}))
    encoder = _example("encoder")
    cfg = encoder.SIZES["test"]
    for variant, dynamic in (("static", False), ("dynamic", True)):
        graph, model = encoder.write(cfg, tmp / f"encoder-{variant}", dynamic=dynamic)
        out.append((f"encoder/{variant}", graph, model, {}))
    return out


def hashes() -> dict[str, dict[str, str]]:
    from openinfer.synthesizer import Synthesizer

    result: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, graph, model, kw in cases(Path(tmp)):
            for target in TARGETS:
                plan = Synthesizer.from_arch(target).synthesize(model, graph, **kw)
                tree = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(plan.files.items())}
                # the manifest apart from the fields that name the ABI version and the target,
                # so that a change of those alone shows as such
                doc = json.loads(plan.files[f"{plan.name}.json"])
                rest = {k: v for k, v in doc.items() if k not in MANIFEST_LABELS}
                tree[f"{plan.name}.json{MANIFEST_REST}"] = hashlib.sha256(
                    json.dumps(rest, sort_keys=True).encode()).hexdigest()
                result[f"{label}@{target}"] = tree
                print(f"{label}@{target}: {len(plan.files)} files", file=sys.stderr)
    return result


def diff(before: dict, after: dict) -> list[str]:
    lines = []
    for tree in sorted(set(before) | set(after)):
        a, b = before.get(tree), after.get(tree)
        if a is None or b is None:
            lines.append(f"{tree}: only {'after' if a is None else 'before'}")
            continue
        for rel in sorted(set(a) | set(b)):
            if a.get(rel) != b.get(rel):
                what = "added" if rel not in a else "removed" if rel not in b else "differs"
                lines.append(f"{tree}: {rel} {what}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                    help="compare two outputs of this tool; exit 1 if any file differs")
    args = ap.parse_args(argv)
    if args.diff:
        lines = diff(*(json.loads(p.read_text()) for p in args.diff))
        print("\n".join(lines) if lines else "identical")
        return 1 if lines else 0
    print(json.dumps(hashes(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
