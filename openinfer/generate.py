"""Token generation with a decode-step graph: the loop `openinfer generate` runs.

A decode-step graph reads one token id per step from a dynamic input, appends the token's keys and
values to its KV cache (persistent tables that outlive the step) and writes the next token's
logits (examples/decoder.py is one; so is an imported decoder). Generating is then a loop on the
host: each prompt id is fed in turn (the cache fills), and from the last prompt step on, the next
id is chosen from the logits and fed back, until `max_new_tokens` ids are chosen.

What the loop needs to know of the graph are its *roles*:
- `token_input`: the dynamic integer input holding the token id (one element);
- `logits`: the variable holding the next token's logits (its last dim is the vocabulary);
- `capacity`: how many tokens the cache holds, so that a generation that would overflow it is
  refused before it starts, not at the step that overflows.

They come from the model's metadata (`generate.input`, `generate.logits`, `generate.capacity`,
written by the importer and by examples/decoder.py), then from the caller (`--input`,
`--logits`, `--capacity`), else they are inferred where the graph leaves one choice: the one
integer dynamic input with one element, a volatile named `logits`, and the smallest @fixed size of
a persistent table's last index (the position index of a KV cache table).

Choosing a token: greedy (the largest logit, the lowest id among equal ones), or with a
temperature > 0 sampled from softmax(logits / temperature) restricted to the `top_k` largest, with
NumPy's default_rng(seed), so a run is reproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import OpenInferError
from .ir.nodes import MemoryKind

#: model metadata keys naming the roles (the importer and examples/decoder.py write them)
ROLE_KEYS = {"token_input": "generate.input", "logits": "generate.logits", "capacity": "generate.capacity"}


@dataclass(frozen=True)
class GenerationRoles:
    token_input: str
    logits: str
    capacity: int
    token_shape: tuple[int, ...] = (1,)     # the token input's shape (one element: [1], [1, 1])
    token_dtype: str = "int64"              # its NumPy dtype


@dataclass(frozen=True)
class Sampling:
    """temperature 0: greedy; else softmax(logits / temperature) over the `top_k` largest (0: all)."""

    temperature: float = 0.0
    top_k: int = 0
    seed: int = 0

    def __post_init__(self):
        if not self.temperature >= 0:
            raise OpenInferError(f"temperature {self.temperature}: expected a number >= 0")
        if self.top_k < 0:
            raise OpenInferError(f"top-k {self.top_k}: expected an integer >= 0 (0: no limit)")


@dataclass(frozen=True)
class Generation:
    ids: tuple[int, ...]           # the new token ids
    prompt_s: float                # the time of the prompt's steps
    decode_s: float                # the time of the steps that chose new ids (after the prompt's last)

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of decoding (the prompt's steps not counted)."""
        return len(self.ids) / self.decode_s if self.decode_s > 0 else float("inf")


def roles_of(bound, metadata, *, token_input: str | None = None, logits: str | None = None,
             capacity: int | None = None) -> GenerationRoles:
    """The graph's roles: given, else the model's metadata, else inferred (see the module doc)."""
    meta = {role: metadata.get(key) for role, key in ROLE_KEYS.items()}
    token_input = token_input or meta["token_input"] or _only(
        [n for n, v in bound.vars.items() if v.kind is MemoryKind.DYNAMIC and v.dtype.np_dtype.kind in "iu"
         and int(np.prod(v.shape)) == 1], "integer dynamic input of one element", "--input", ROLE_KEYS["token_input"])
    logits = logits or meta["logits"] or _only(
        [n for n, v in bound.vars.items() if n == "logits" and v.kind is MemoryKind.VOLATILE],
        "volatile named `logits`", "--logits", ROLE_KEYS["logits"])
    if capacity is None:
        capacity = meta["capacity"]
    if capacity is None:
        sizes = [v.table.fixed[v.table.indices[-1]] for v in bound.vars.values()
                 if v.kind is MemoryKind.PERSISTENT and v.table is not None and v.table.indices
                 and v.table.indices[-1] in v.table.fixed]
        if not sizes:
            raise OpenInferError("the graph has no persistent @table with a @fixed last index to take the cache "
                                 "capacity from: give it with --capacity N")
        capacity = min(sizes)
    for name, what in ((token_input, "token input"), (logits, "logits")):
        if name not in bound.vars:
            raise OpenInferError(f"the {what} `{name}` is not a variable of the graph")
    var = bound.vars[token_input]
    if var.kind is not MemoryKind.DYNAMIC or var.dtype.np_dtype.kind not in "iu" or int(np.prod(var.shape)) != 1:
        raise OpenInferError(f"the token input `{token_input}` must be a dynamic integer input of one element "
                             f"(it is {var.kind.name.lower() if var.kind else 'a temporary'} "
                             f"{var.dtype.name}{list(var.shape)}): generate feeds one token per step")
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise OpenInferError(f"cache capacity {capacity!r}: expected an integer >= 1")
    return GenerationRoles(token_input, logits, int(capacity), tuple(int(n) for n in var.shape),
                           var.dtype.np_dtype.name)


def _only(names: list[str], what: str, flag: str, key: str) -> str:
    if len(names) != 1:
        found = f" ({', '.join(sorted(names))})" if names else ""
        raise OpenInferError(f"the graph has {len(names) or 'no'} {what}{found}: name it with {flag} "
                             f"(or the model's `{key}` metadata)")
    return names[0]


def choose(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    """The next id from one row of logits."""
    row = np.asarray(logits, np.float64).reshape(-1)
    if not np.all(np.isfinite(row)):
        raise OpenInferError(f"the logits hold {'NaN' if np.isnan(row).any() else 'inf'}: no token can be chosen")
    if sampling.temperature == 0 or sampling.top_k == 1:
        return int(np.argmax(row))
    keep = np.argsort(-row, kind="stable")[:sampling.top_k or row.size]
    z = row[keep] / sampling.temperature
    p = np.exp(z - z.max())
    return int(keep[rng.choice(keep.size, p=p / p.sum())])


def generate(executor, roles: GenerationRoles, prompt: Sequence[int], max_new_tokens: int, *,
             sampling: Sampling = Sampling(), progress: Callable[[int], None] | None = None) -> Generation:
    """Feeds `prompt` one id per step to `executor` (a reference or compiled executor, fresh: its
    cache empty), then chooses and feeds back `max_new_tokens` ids."""
    if not prompt:
        raise OpenInferError("the prompt holds no token id: give at least one (--prompt-ids 1,2,3)")
    if max_new_tokens < 1:
        raise OpenInferError(f"--max-new-tokens {max_new_tokens}: expected at least 1")
    # the last new id is chosen from the step before it, never fed: prompt + new - 1 cache rows
    needed = len(prompt) + max_new_tokens - 1
    if needed > roles.capacity:
        raise OpenInferError(f"{len(prompt)} prompt ids + {max_new_tokens} new tokens need {needed} cache rows, "
                             f"more than its capacity {roles.capacity}")
    token_dtype = np.dtype(roles.token_dtype)
    info = np.iinfo(token_dtype)
    rng = np.random.default_rng(sampling.seed)

    def step(token: int) -> int:
        if not info.min <= token <= info.max:
            raise OpenInferError(f"token id {token} does not fit the token input's {token_dtype.name}")
        executor.insert(**{roles.token_input: np.full(roles.token_shape, token, token_dtype)})
        executor.run_step()
        logits = executor.fetch(roles.logits)
        return choose(logits.reshape(-1, logits.shape[-1])[-1], sampling, rng)     # the last position's row

    t0 = time.perf_counter()
    for token in prompt[:-1]:
        step(int(token))
    t1 = time.perf_counter()
    ids = [step(int(prompt[-1]))]
    for _ in range(max_new_tokens - 1):
        if progress is not None:
            progress(len(ids))
        ids.append(step(ids[-1]))
    return Generation(tuple(ids), t1 - t0, time.perf_counter() - t1)
