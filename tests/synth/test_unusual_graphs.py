"""Valid graphs at the edges of what the DSL allows generate C that builds under -Wall -Wextra
-Werror and computes what the reference does: a graph of nothing but `return`, names far longer
than the library's error buffer, graph files whose names hold non-ASCII, control and C-special
characters. Their C string literals, comments and error messages must stay valid C for any name."""

from __future__ import annotations

import numpy as np
import pytest

import openinfer as oi
from openinfer.sim import Simulator
from openinfer.targets.env import c_comment, c_string
from openinfer.testing import assert_matches_reference

ARCH = "x86_64-generic"      # portable C: runs on any host


@pytest.fixture(autouse=True)
def sim_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "sim-cache"))


def test_a_graph_of_only_return_builds_and_steps():
    """No node can fail, so the failure helper is never called: -Wunused-function must not fire."""
    sim = Simulator(None, "block entry { return; }", arch=ARCH)
    ex = sim.make_executor()
    ex.run_step()
    ex.run_step()


def test_names_longer_than_the_error_buffer_build_and_compute():
    """A 350-character name and three of 130 in one op: the messages that quote them are longer
    than the library's 384-byte error buffer, and are cut there (never a -Wformat-truncation)."""
    long = "v" + "x" * 349
    a, b, c = ("a" * 130, "b" * 130, "c" * 130)
    graph = (f"dynamic {{ {long}: f32[3]; {a}: f32[3]; {b}: f32[3]; }}\n"
             f"volatile {{ {c}: f32[3]; y: f32[3]; }}\n"
             f"block entry {{\n    op add({a}, {b}) >> {c};\n    op mul({long}, {c}) >> y;\n    return;\n}}\n")
    sim = assert_matches_reference(None, graph, arch=ARCH, steps=1)
    ex = sim.make_executor()
    with pytest.raises(oi.ExecutionError) as info:
        ex.run_step()                                   # no input set: the message names the first one
    full = f"<string>:1:11: dynamic variable `{long}` not set before this step"
    assert str(info.value).endswith(" — " + full[:383])        # cut to the buffer, terminated


@pytest.mark.parametrize("stem", ["😀", "tab\there\x01ctl", "quote\"back\\slash??=tri??'*", "é1ab"])
def test_graph_files_with_any_name_build_and_report_their_location(tmp_path, stem):
    """The file name reaches C in every node location and in comments: emoji (whose UTF-16
    escapes `\\ud83d` are not C), control characters, quotes, backslashes, trigraphs (`??=` is `#`
    under -std=c11), and an escape followed by hex digits (`é` then `1ab`)."""
    path = tmp_path / f"{stem}.oig"
    path.write_text("dynamic {\n    x: f32[4];\n}\nvolatile {\n    y: f32[4];\n}\n"
                    "block entry {\n    op add(x, x) >> y;\n    return;\n}\n")
    x = np.array([1.5, -2.0, 0.25, 3.0], np.float32)
    assert_matches_reference(None, str(path), arch=ARCH, feeds=[{"x": x}])
    ex = Simulator(None, str(path), arch=ARCH).make_executor()
    with pytest.raises(oi.ExecutionError) as info:
        ex.run_step()
    assert str(info.value).endswith(f" — {path.name}:2:5: dynamic variable `x` not set before this step")


def _c_string_value(literal: str) -> bytes:
    """The bytes a C string literal made of printable ASCII, simple and octal escapes denotes
    (the subset c_string writes), decoded independently of it."""
    assert literal[0] == literal[-1] == '"'
    body, out, i = literal[1:-1], bytearray(), 0
    simple = {'"': b'"', "\\": b"\\", "?": b"?"}
    while i < len(body):
        ch = body[i]
        assert 0x20 <= ord(ch) < 0x7F, f"{literal!r}: raw character {ch!r}"
        if ch == '"':
            raise AssertionError(f"{literal!r}: unescaped quote")
        if ch != "\\":
            assert not (ch == "?" and body[i + 1:i + 2] == "?"), f"{literal!r}: a trigraph can form"
            out += ch.encode()
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in simple:
            out += simple[nxt]
            i += 2
        else:
            digits = body[i + 1:i + 4]
            assert len(digits) == 3 and all(d in "01234567" for d in digits), f"{literal!r}: bad escape at {i}"
            out.append(int(digits, 8))
            i += 4
    return bytes(out)


@pytest.mark.parametrize("text", ["plain", "😀.oig", "a\tb\x01c\x7f", 'q"b\\??/?', "é1ab\x008", "\udc80raw", "\ud83d"])
def test_c_string_denotes_the_utf8_bytes_of_any_str(text):
    literal = c_string(text)
    try:
        expected = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        expected = text.encode("utf-8", "backslashreplace")
    assert _c_string_value(literal) == expected


def test_c_comment_cannot_end_the_comment_or_hold_control_bytes():
    text = c_comment("a*/b\x00c\x01d\ud83d*/")
    assert "*/" not in text and "\x00" not in text and "\x01" not in text
    text.encode("utf-8")            # valid UTF-8 (no lone surrogate)


def test_an_empty_batch_and_the_mean_of_no_elements_compute_what_the_reference_does():
    """B = 0: reductions over the kept batch are empty, and the float mean over it is NaN in the C
    (its 0 / 0) as in the reference (numpy.mean's)."""
    graph = ("dynamic { x: f32[B, 8]; }\nvolatile { m: f32[B]; m0: f32[8]; s: f32[B]; }\n"
             "block entry {\n    op mean_axis(x, axes=[1]) >> m;\n    op mean_axis(x, axes=[0]) >> m0;\n"
             "    op sum_axis(x, axes=[1]) >> s;\n    return;\n}\n")
    sim = assert_matches_reference(None, graph, arch=ARCH, sizevars={"B": 0})
    ex = sim.make_executor()
    ex.insert(x=np.zeros((0, 8), np.float32))
    ex.run_step()
    assert ex.fetch("m").shape == (0,) and np.isnan(ex.fetch("m0")).all()
