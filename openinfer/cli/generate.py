"""`openinfer generate`: run a decode-step graph as a token generator (openinfer/generate.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..errors import OpenInferError
from ..generate import Sampling, generate, roles_of
from ..reference.executor import ReferenceExecutor
from .args import add_graph_args, dynamic, load, sizevars

HELP = """\
Generate tokens with a decode-step graph (one token in, the next token's logits out, the KV
cache in persistent tables): the prompt ids are fed one per step, then each new id is chosen from
the logits and fed back. Runs on the NumPy reference, or with --arch on code generated and built
for that target (as `openinfer sim` builds it). Prints the new ids and the decode speed (new
tokens per second, the prompt's steps not counted); --json prints one object
{"ids": [...], "tokens_per_s": ...} on stdout instead.

The graph's roles (the token input, the logits, the cache capacity) come from the model's
metadata (generate.input, generate.logits, generate.capacity: the importer and
examples/decoder.py write them), else from --input/--logits/--capacity, else from the graph where
it leaves one choice. A prompt plus new tokens that would overflow the cache is refused first.

examples:
  python examples/decoder.py --size test --out build/decoder
  openinfer generate build/decoder/decoder_test.oig -m build/decoder/decoder_test.oinf \\
      --prompt-ids 1,2,3 --max-new-tokens 8
  openinfer generate build/decoder/decoder_test.oig -m build/decoder/decoder_test.oinf \\
      --arch devices/x86_64-avx2.json --prompt-ids 1,2,3 --max-new-tokens 8 --json"""


def register(sub) -> None:
    p = sub.add_parser("generate", help="generate tokens with a decode-step graph (greedy or sampled)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(p)
    p.add_argument("--arch", metavar="DEVICE.json", help="run generated code for this target (default: the reference)")
    p.add_argument("--prompt-ids", required=True, metavar="ID,ID,...", help="the prompt's token ids, comma-separated")
    p.add_argument("--max-new-tokens", type=int, default=16, metavar="N", help="new tokens to generate (default 16)")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 (default): greedy; else sample from softmax(logits / T)")
    p.add_argument("--top-k", type=int, default=0, metavar="K", help="sample among the K largest logits (0: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    p.add_argument("--input", metavar="NAME", help="the token-id input (default: from the model or the graph)")
    p.add_argument("--logits", metavar="NAME", help="the logits variable (default: from the model or `logits`)")
    p.add_argument("--capacity", type=int, metavar="N", help="the cache's capacity in tokens (default: from the "
                   "model, or the smallest @fixed last index of a persistent table)")
    p.add_argument("--json", action="store_true", help='print {"ids": [...], "tokens_per_s": ...} only')
    p.set_defaults(handler=run_generate)


def _ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise OpenInferError(f"--prompt-ids {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if not ids:
        raise OpenInferError("--prompt-ids: give at least one token id")
    return ids


def run_generate(args) -> int:
    prompt = _ids(args.prompt_ids)
    sampling = Sampling(args.temperature, args.top_k, args.seed)
    model, graph, bound = load(args)
    roles = roles_of(bound, getattr(model, "metadata", {}) or {}, token_input=args.input, logits=args.logits,
                     capacity=args.capacity)
    if args.arch is None:
        executor, where = ReferenceExecutor(bound), "reference"
    else:
        from ..sim import Simulator

        t0 = time.perf_counter()
        simulator = Simulator(model, graph, arch=args.arch, sizevars=sizevars(args), dynamic=dynamic(args),
                              outputs={roles.logits},
                              progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        print(f"built {simulator.library} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        executor, where = simulator.make_executor(), args.arch
    result = generate(executor, roles, prompt, args.max_new_tokens, sampling=sampling)
    if args.json:
        print(json.dumps({"ids": list(result.ids), "tokens_per_s": round(result.tokens_per_s, 3)}))
        return 0
    print(f"prompt: {len(prompt)} ids in {result.prompt_s * 1e3:.1f} ms")
    print("new ids: " + " ".join(map(str, result.ids)))
    print(f"{len(result.ids)} new tokens in {result.decode_s:.3f} s: {result.tokens_per_s:.1f} tokens/s ({where})")
    return 0
