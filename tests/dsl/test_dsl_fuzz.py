"""Fuzzing: no input makes the parser (or the JSON reader) raise anything but DslError.

Two generators: token soup drawn from the DSL's own vocabulary (plus the lexer's trouble makers),
and random edits of valid sources (the examples and the golden cases). Whatever parses must also
survive JSON, description and DOT; whatever fails must be a DslError that prints.

The budget is set for CI (~15 s in all); `OI_FUZZ_EXAMPLES=N` runs N examples per test instead.

A third campaign takes mutants all the way: parse, bind (against the example's model) and one
reference step with random inputs. Every failure must be an OpenInferError; any other exception
fails the test. It uses a fixed seed and 250 mutants; `OI_SLOW=1` runs 100k and prints the counts
(docs/dsl.md records such a run).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openinfer import ModelLoader
from openinfer.dsl import parse
from openinfer.errors import DslError, OpenInferError
from openinfer.inputs import random_inputs
from openinfer.ir.describe import describe
from openinfer.ir.dot import graph_to_dot
from openinfer.ir.json import graph_from_json, graph_to_json
from openinfer.ir.nodes import walk
from openinfer.reference.executor import Reference

EXAMPLES = int(os.environ.get("OI_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=EXAMPLES or 700, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_ROOT = Path(__file__).resolve().parents[2]
SEEDS = [p.read_text() for p in sorted((_ROOT / "examples").glob("*.oig"))] + [
    "persistent { A(i, j): f32[D] @table @auto_dim(i) @fixed(i=2, j=3); t: i32 @init(-1); }\n"
    "block entry { cache.read A[1, .., 2.., ..3, 4..-5] >> x; cache.increment 5 t; cache.reset A[t, ..];\n"
    "  loop l (i in 0..N) { loop m (j in a..4) { yield a, b; await a; return; } }\n"
    "  dep after(relu) before(cache.write); transfer W[l, 0] >> w; branch c a b; branch a; barrier; }\n"
    'block a { op f(x, W[l], a=-inf, b=1e-5, c=[1 -2,], d=[f32 i8], acc=i32, to=f16, s="q\\n", v=t) >> y; }\n',
]

VOCAB = (
    # DSL words and Rust keywords
    "dynamic volatile constant persistent block assign op cache . read write increment decrement reset branch "
    "barrier dep after before loop in yield await transfer return init ref pattern table auto_dim fixed "
    "true false inf type fn self _ acc to alpha "
    # dtypes and names
    "f32 f16 bf16 f8 f64 i4 i8 i32 u8 u1 t1 t2 bitset bool f8e5m2 x y W A B D entry "
    # punctuation
    "{ } ( ) [ ] ; : , .. ... ..= >> > = @ * - + / # ! < & | ? "
    # literals and lexer edge cases
    "0 1 -1 42 3.5 1e-5 2.5E3 1. 0x1F 0b2 0o7 1_000 1e400 5i32 2D 9223372036854775808 "
    '"s" "a\\"b" "\\q" "\\x41" "\\u{263A}" r"raw" r#"h"# "open r#x '
    "// /* */ /*/**/*/ ' é \x00 \t \r\n"
).split(" ")


def check(text: str) -> None:
    try:
        graph = parse(text, "fuzz.oig")
    except DslError as exc:
        assert str(exc).startswith(("fuzz.oig:", "syntax error"))
        if exc.loc is not None:
            assert 1 <= exc.loc.line <= text.count("\n") + 1
        return
    json_text = graph_to_json(graph)
    again = graph_from_json(json_text)
    assert again == graph and graph_to_json(again) == json_text
    for block in graph.blocks.values():
        for node in walk(block.nodes):
            describe(node)
    graph_to_dot(graph)


@FUZZ
@given(st.lists(st.sampled_from(VOCAB), max_size=80), st.lists(st.sampled_from([" ", "\n", "", "  "]),
                                                               min_size=80, max_size=80))
def test_token_soup(words, gaps):
    check("".join(w + g for w, g in zip(words, gaps, strict=False)))


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = min(len(text), i + draw(st.integers(0, 12)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate", "replace", "swap_char"]))
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "insert":
            text = text[:i] + draw(st.sampled_from(VOCAB)) + text[i:]
        elif action == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif action == "replace":
            text = text[:i] + draw(st.sampled_from(VOCAB)) + text[j:]
        else:
            text = text[:i] + draw(st.characters(codec="utf-8")) + text[i + 1:]
    return text


@FUZZ
@given(mutated())
def test_mutated_sources(text):
    check(text)


@settings(max_examples=EXAMPLES or 300, deadline=None)
@given(st.sampled_from(SEEDS[:4]), st.data())
def test_mutated_json(seed, data):
    """Edits of valid graph JSON: the JSON reader also fails only with DslError."""
    text = graph_to_json(parse(seed))
    i = data.draw(st.integers(0, len(text) - 1))
    j = min(len(text), i + data.draw(st.integers(0, 8)))
    piece = data.draw(st.sampled_from(['"', "1", "-1", "null", "[]", "{}", '"x"', "1.5", '"inf"', ",", ":", "",
                                       '"F32"', '"Op"', "true", '{"Lit": 1}', '"W[l,"', "1e999"]))
    try:
        graph = graph_from_json(text[:i] + piece + text[j:], "fuzz.json")
    except DslError as exc:
        str(exc)
        return
    graph_to_json(graph)


def edit(rng: random.Random, text: str) -> str:
    """One or two random edits of `text` (those of `mutated`, plus numbers changed; seeded RNG)."""
    for _ in range(rng.randint(1, 2)):
        if not text:
            break
        i = rng.randrange(len(text))
        j = min(len(text), i + rng.randint(0, 12))
        action = rng.choice(["delete", "insert", "duplicate", "replace", "swap_char", "digit"])
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "insert":
            text = text[:i] + rng.choice(VOCAB) + " " + text[i:]
        elif action == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif action == "replace":
            text = text[:i] + rng.choice(VOCAB) + text[j:]
        elif action == "swap_char":
            text = text[:i] + chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)])) + text[i + 1:]
        else:                                    # a number changed: dims, indices, attributes, bounds
            text = text[:i] + rng.choice(["0", "1", "2", "3", "-1", "4096", "65536", "0.5", "1e30"]) + text[i + 1:]
    return text


def run_to_a_step(text: str, model) -> str:
    """How far a source gets: 'parse', 'bind' or 'step' (the stage whose OpenInferError stopped
    it), or 'ran'. Any other exception propagates."""
    try:
        graph = parse(text, "fuzz.oig")
    except OpenInferError:
        return "parse"
    try:
        reference = Reference(model, graph)
    except OpenInferError:
        return "bind"
    try:
        ex = reference.make_executor()
        ex.insert(**random_inputs(reference.bound, 0, 0))
        ex.run_step()
    except OpenInferError:
        return "step"
    return "ran"


def campaign(mutants: int, seed: int, model_dir: Path) -> dict[str, int]:
    """`mutants` mutants of the example graphs (each bound against its model in `model_dir`)
    through parse, bind and one reference step; how many stopped at each stage. Raises
    AssertionError naming the mutant on any exception that is not an OpenInferError."""
    seeds = []
    for path in sorted((_ROOT / "examples").glob("*.oig")):
        model_path = model_dir / f"{path.stem}.oinf"
        seeds.append((path.read_text(), ModelLoader.open(model_path) if model_path.exists() else None))
    rng = random.Random(seed)
    counts = {"parse": 0, "bind": 0, "step": 0, "ran": 0}
    for n in range(mutants):
        text, model = seeds[rng.randrange(len(seeds))]
        mutant = edit(rng, text)
        try:
            with np.errstate(all="ignore"):      # random inputs may overflow: that is the graph's business
                counts[run_to_a_step(mutant, model)] += 1
        except Exception as exc:                 # noqa: BLE001 - anything but OpenInferError is a finding
            raise AssertionError(f"mutant {n} (seed {seed}) raised {type(exc).__name__}: {exc}\n"
                                 f"--- source ---\n{mutant}") from exc
    return counts


def test_mutants_through_parse_bind_and_a_reference_step(example_models):
    """Mutants of every example graph (with its model) go through parse, bind and one reference
    step; every failure is an OpenInferError."""
    mutants = 100_000 if os.environ.get("OI_SLOW") == "1" else 250
    counts = campaign(mutants, 16, example_models)
    print(f"\ndsl fuzz: {mutants} mutants: {counts['parse']} refused by parse, {counts['bind']} by bind, "
          f"{counts['step']} by the reference step, {counts['ran']} ran a step; 0 other exceptions")
    assert sum(counts.values()) == mutants and counts["bind"] > 0 and counts["ran"] > 0   # past the parser
