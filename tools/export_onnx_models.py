"""Exports the whole-model test data: small transformer and CNN models, random weights, no download.

    python tools/export_onnx_models.py [--out tests/data/onnx]     # re-export the committed models
    python tools/export_onnx_models.py --full                      # check a full-size encoder (not written)

Needs torch, torchvision, transformers, onnx and onnxruntime (a separate environment: the tests
themselves need only onnx and onnxruntime). Each model is built from a `transformers` config (or
torchvision's BasicBlock) with random initialisation under a fixed seed, exported with
`torch.onnx.export` (dynamo) with symbolic batch and sequence dims, and written as NAME.onnx beside
NAME.npz, which holds the inputs (`in/NAME`), the sizevars they were made for (`sizevar/NAME`)
and PyTorch's own outputs (`torch/NAME`) so a test can check that the ONNX still says what the
framework computed. The transformers use their default attention implementation ("sdpa"), as a
user's export would: the ONNX holds torch's decomposition of F.scaled_dot_product_attention
(the importer's fusion tests cover the eager MatMul/Softmax pattern).

`--full` exports a full-size encoder (6 layers, hidden 384, 12 heads: the shape of
all-MiniLM-L6-v2) to a temporary folder, imports it, generates and builds C for the host's best
target, and prints import/build/run times and the errors against onnxruntime (docs/onnx.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OPSET = 18


def _seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch


def _perturbed(model):
    """`model` with its biases and norm weights moved off the 0 and 1 that initialisation gives
    them, so that the test data exercises every parameter."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def bert(layers: int = 2, hidden: int = 64, heads: int = 4, intermediate: int = 128, vocab: int = 256):
    """A BERT encoder (BertModel: embeddings, post-LN layers with Erf-GELU, attention mask input)."""
    from transformers import BertConfig, BertModel

    _seeded(1)
    config = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=128, type_vocab_size=2)
    return _perturbed(BertModel(config, add_pooling_layer=False)).eval()


def gpt2():
    """A GPT-2 decoder (GPT2LMHeadModel: pre-LN, causal attention, tanh-GELU, tied LM head)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _seeded(2)
    config = GPT2Config(vocab_size=256, n_positions=128, n_embd=64, n_layer=2, n_head=4, use_cache=False)
    return _perturbed(GPT2LMHeadModel(config)).eval()


def llama():
    """A LLaMA decoder (LlamaForCausalLM: RMSNorm, RoPE, SwiGLU MLP, grouped-query attention 4/2)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _seeded(3)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         use_cache=False)
    return _perturbed(LlamaForCausalLM(config)).eval()


def resnet():
    """A ResNet-style CNN: torchvision's BasicBlock at widths 16/32/64 (conv-BN-ReLU stem, max pool,
    three stages with strided downsampling shortcuts, global average pool, linear head)."""
    torch = _seeded(4)
    from torch import nn
    from torchvision.models.resnet import BasicBlock, conv1x1

    def stage(cin: int, cout: int, stride: int) -> nn.Sequential:
        down = None if stride == 1 and cin == cout else nn.Sequential(conv1x1(cin, cout, stride), nn.BatchNorm2d(cout))
        return nn.Sequential(BasicBlock(cin, cout, stride, down), BasicBlock(cout, cout))

    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
        stage(16, 16, 1), stage(16, 32, 2), stage(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    for m in net.modules():             # non-trivial batch-norm statistics, so the folding is exercised
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return net.eval(), torch


def _wrap(model, output: str, masked: bool):
    """A Hugging Face model as a module of plain tensor inputs (input_ids, and attention_mask where
    `masked`) and one output, the form the exporters take."""
    import torch

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask), output)

    class Plain(Masked):
        def forward(self, input_ids):
            return getattr(self.model(input_ids=input_ids), output)

    return (Masked if masked else Plain)().eval()


def _text_inputs(seed: int, batch: int, seq: int, vocab: int, mask: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64)}
    if mask:
        m = np.ones((batch, seq), np.int64)
        m[-1, seq - 3:] = 0                     # the last sequence padded: the mask matters
        inputs["attention_mask"] = m
    return inputs


def specs(full: bool = False):
    """(name, module, inputs, output name, dynamic axes) of each model to export."""
    if full:
        model = bert(layers=6, hidden=384, heads=12, intermediate=1536, vocab=30522)
        return [("bert_full", _wrap(model, "last_hidden_state", True),
                 _text_inputs(5, 2, 128, 30522, True), "last_hidden_state", {0: "batch", 1: "seq"})]
    out = [("bert", _wrap(bert(), "last_hidden_state", True),
            _text_inputs(1, 2, 16, 256, True), "last_hidden_state", {0: "batch", 1: "seq"}),
           ("gpt2", _wrap(gpt2(), "logits", False), _text_inputs(2, 2, 16, 256, False), "logits",
            {0: "batch", 1: "seq"}),
           ("llama", _wrap(llama(), "logits", False), _text_inputs(3, 2, 16, 256, False), "logits",
            {0: "batch", 1: "seq"})]
    net, _ = resnet()
    image = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
    out.append(("resnet", net, {"image": image}, "logits", {0: "batch"}))
    return out


def export(name: str, module, inputs: dict[str, np.ndarray], output: str, dynamic: dict[int, str],
           out_dir: Path) -> tuple[Path, np.ndarray]:
    """Exports `module` to OUT_DIR/NAME.onnx; returns its path and PyTorch's output on `inputs`."""
    import torch

    args = tuple(torch.from_numpy(a) for a in inputs.values())
    with torch.no_grad():
        expected = module(*args).numpy()
    path = out_dir / f"{name}.onnx"
    dims = {i: torch.export.Dim(n, min=2, max=512) if n == "seq" else torch.export.Dim(n, min=1, max=64)
            for i, n in dynamic.items()}
    torch.onnx.export(module, args, str(path), input_names=list(inputs), output_names=[output],
                      dynamic_shapes=tuple(dims for _ in inputs), opset_version=OPSET, dynamo=True,
                      external_data=False, optimize=True)
    import onnx

    model = onnx.load(str(path))
    model.producer_name, model.producer_version = "openinfer tools/export_onnx_models.py", f"torch {torch.__version__}"
    model.doc_string = ""
    onnx.save(model, str(path))
    return path, expected


def _ops(path: Path) -> dict[str, int]:
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(str(path)).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


def write_models(out_dir: Path) -> None:
    import onnxruntime as ort

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, module, inputs, output, dynamic in specs():
        path, expected = export(name, module, inputs, output, dynamic, out_dir)
        got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
        error = float(np.max(np.abs(got - expected)))
        sizevars = dict(zip(dynamic.values(), next(iter(inputs.values())).shape, strict=False))
        np.savez_compressed(out_dir / f"{name}.npz", **{f"in/{k}": v for k, v in inputs.items()},
                            **{f"sizevar/{k}": np.int64(v) for k, v in sizevars.items()},
                            **{f"torch/{output}": expected})
        print(f"{name}: {path.stat().st_size / 1e6:.2f} MB, onnxruntime vs torch max abs {error:.2e}; ops {_ops(path)}")


def check_full() -> int:
    """Exports the full-size encoder, imports, builds and runs it; prints the figures for docs/onnx.md."""
    sys.path.insert(0, str(ROOT))
    import onnxruntime as ort

    import openinfer as oi
    from openinfer.targets.devices import best_host_target

    ((name, module, inputs, output, dynamic),) = specs(full=True)
    with tempfile.TemporaryDirectory(prefix="oi-full-") as tmp:
        tmp = Path(tmp)
        path, expected = export(name, module, inputs, output, dynamic, tmp)
        size, onnx_ops = path.stat().st_size, _ops(path)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = session.run(None, inputs)[0]
        t_ort = _best_of(3, lambda: session.run(None, inputs))
        t = time.perf_counter()
        imported = oi.import_onnx(path, sizevars={"batch": inputs["input_ids"].shape[0],
                                                  "seq": inputs["input_ids"].shape[1]})
        t_import = time.perf_counter() - t
        graph, oinf = imported.write(tmp / "out")
        ops = sorted({line.split("(")[0].split()[-1] for line in imported.text.splitlines()
                      if line.strip().startswith("op ")})
        target = best_host_target()
        os.environ["OI_CACHE_DIR"] = str(tmp / "cache")      # a cold build: nothing cached
        t = time.perf_counter()
        sim = oi.Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=target)
        executor = sim.make_executor()
        t_build = time.perf_counter() - t
        feed = {imported.renamed.get(k, k): v for k, v in inputs.items()}

        def step() -> None:          # a step consumes its dynamic inputs: each one sets them
            executor.insert(**feed)
            executor.run_step()

        step()
        got = executor.fetch(imported.renamed.get(output, output))
        t_run = _best_of(3, step)
    abs_err = float(np.max(np.abs(got - want)))
    rel_err = abs_err / float(np.max(np.abs(want)))
    print(f"{name}: {size / 1e6:.1f} MB ONNX, ops {onnx_ops}")
    print(f"  imported graph ops: {', '.join(ops)}")
    print(f"  import {t_import:.2f} s; generate+build ({target}) {t_build:.1f} s; one step {t_run * 1e3:.0f} ms "
          f"(best of 3 after a first; onnxruntime {t_ort * 1e3:.0f} ms, likewise)")
    print(f"  vs onnxruntime: max abs {abs_err:.2e}, max abs / max |ref| {rel_err:.2e}; "
          f"onnxruntime vs torch max abs {float(np.max(np.abs(want - expected))):.2e}")
    return 0


def _best_of(n: int, run) -> float:
    """The fastest of n timed calls, in seconds."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


# ---------------------------------------------------------------------------------------------
# decode steps with a KV cache (issue 42): one token in, past/present key-values per layer


def decoders():
    """Small decoders for the decode-step exports: GPT-2, LLaMA (RoPE, GQA 4/2) and a Qwen2-style
    decoder (q/k/v biases, RoPE, GQA 4/2), hidden 32, vocab 128, random weights."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    _seeded(6)
    gpt2 = _perturbed(GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4)))
    _seeded(7)
    llama = _perturbed(LlamaForCausalLM(LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64)))
    _seeded(8)
    qwen = _perturbed(Qwen2ForCausalLM(Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64)))
    return {"gpt2_step": gpt2.eval(), "llama_step": llama.eval(), "qwen_step": qwen.eval()}


def _decode_step(model, layers: int):
    """The model as one decode step of plain tensors: (input_ids, past k0, v0, k1, v1, ...) ->
    (logits, present k0, v0, ...), the cache rebuilt from the tensors each call."""
    import torch
    from transformers import DynamicCache

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, past):
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers[:layers] for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    return Step().eval()


def write_decode_steps(out_dir: Path, prompt=(5, 17, 42, 9, 77), new_tokens: int = 32) -> None:
    """NAME.onnx (a decode step: input_ids [1, 1], past key/values [1, kv_heads, past, head_dim]) and
    NAME.npz holding the prompt and torch's own greedy generation (`generate`, do_sample=False) of
    `new_tokens` ids after it (`prompt`, `torch_ids`)."""
    import onnx
    import torch

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, model in decoders().items():
        cfg = model.config
        layers = cfg.num_hidden_layers
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = cfg.hidden_size // cfg.num_attention_heads
        with torch.no_grad():
            ids = model.generate(torch.tensor([list(prompt)]), max_new_tokens=new_tokens, do_sample=False,
                                 min_new_tokens=new_tokens, pad_token_id=0)[0, len(prompt):].numpy()
        step = _decode_step(model, layers)
        past = tuple(torch.zeros(1, kv_heads, 3, head_dim) for _ in range(2 * layers))
        names = ["input_ids"] + [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
        outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
        past_len = torch.export.Dim("past", min=1, max=60)
        path = out_dir / f"{name}.onnx"
        torch.onnx.export(step, (torch.tensor([[prompt[0]]]), past), str(path), input_names=names,
                          output_names=outputs, dynamic_shapes=({}, tuple({2: past_len} for _ in past)),
                          opset_version=OPSET, dynamo=True, external_data=False, optimize=True)
        exported = onnx.load(str(path))
        exported.producer_name, exported.producer_version = ("openinfer tools/export_onnx_models.py",
                                                             f"torch {torch.__version__}")
        exported.doc_string = ""
        onnx.save(exported, str(path))
        np.savez_compressed(out_dir / f"{name}.npz", prompt=np.asarray(prompt, np.int64),
                            torch_ids=ids.astype(np.int64))
        print(f"{name}: {path.stat().st_size / 1e3:.0f} KB; torch greedy {ids.tolist()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "onnx")
    parser.add_argument("--full", action="store_true", help="check a full-size encoder instead (writes nothing)")
    parser.add_argument("--decode-steps", action="store_true", help="export only the decode steps")
    args = parser.parse_args(argv)
    if args.full:
        return check_full()
    if args.decode_steps:
        write_decode_steps(args.out)
        return 0
    write_models(args.out)
    write_decode_steps(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
