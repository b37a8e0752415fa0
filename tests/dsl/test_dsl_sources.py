"""Graph sources: `openinfer.graph(text)`, and `load_graph` for .oig, .json and .rs files."""

from __future__ import annotations

import pytest

import openinfer as oi
from openinfer.dsl import graph_from_rust
from openinfer.ir.json import graph_to_json

RUST = '''\
use openinfer::{graph, Simulator};

// graph! { not this one: it is in a comment }
/* nor /* this */ graph! { block x { } } */

fn helper<'a>(s: &'a str) -> char {
    let _q = "graph! { in a string }";
    let _r = r#"graph! { "raw" }"#;
    '{'
}

fn main() -> anyhow::Result<()> {
    let g = openinfer::graph! {
        dynamic {
            x: f32[B];   // a comment with a } brace
        }
        volatile {
            y: f32[B] @init(5.0);
        }
        block entry {
            op add(x, y) >> y;
            return;
        }
    };
    let h = graph!(
        block entry { barrier; return; }
    );
    let bad = graph! [
        block entry {
            op relu(x) >> ;
        }
    ];
    Ok(())
}
'''

OIG = """\
dynamic {
    x: f32[B];   // a comment with a } brace
}
volatile {
    y: f32[B] @init(5.0);
}
block entry {
    op add(x, y) >> y;
    return;
}
"""


def test_graph_function_matches_load_graph(tmp_path):
    path = tmp_path / "g.oig"
    path.write_text(OIG)
    assert oi.load_graph(path) == oi.graph(OIG)
    assert oi.load_graph(str(path)).source_name == str(path)


def test_rust_first_graph_is_the_default(tmp_path):
    path = tmp_path / "example.rs"
    path.write_text(RUST)
    g = oi.load_graph(path)
    assert graph_to_json(g) == graph_to_json(oi.graph(OIG))
    # positions are those of the Rust file
    assert g.vars["x"].loc.line == 15 and g.blocks["entry"].nodes[0].loc.line == 21
    assert g.line(g.vars["x"].loc).strip().startswith("x: f32[B];")


def test_rust_graph_by_index_any_delimiter(tmp_path):
    path = tmp_path / "example.rs"
    path.write_text(RUST)
    second = oi.load_graph(path, index=1)
    assert [type(n).__name__ for n in second.blocks["entry"].nodes] == ["Barrier", "Return"]


def test_rust_error_points_into_the_rust_file(tmp_path):
    path = tmp_path / "example.rs"
    path.write_text(RUST)
    with pytest.raises(oi.DslError) as info:
        oi.load_graph(path, index=2)
    assert str(info.value).startswith(f"{path}:30:27: syntax error: expected the op's output variable")
    assert "op relu(x) >> ;" in str(info.value)


def test_rust_index_out_of_range_and_no_graph():
    with pytest.raises(oi.DslError, match=r"graph index 3 is out of range; the file has 3 graph! invocations"):
        graph_from_rust(RUST, "x.rs", index=3)
    with pytest.raises(oi.DslError, match="no `graph! { ... }` found"):
        graph_from_rust("fn main() { let graph = 1; }", "y.rs")


@pytest.mark.parametrize("text, message", [
    ("let g = graph! { block entry { return; }", "unclosed `{` of graph!"),
    ("let g = graph! { block entry ( return; } }", "mismatched `}`"),
    ('let s = "open', "unterminated string"),
    ("let s = r#\"open", "unterminated raw string"),
    ("/* open", "unterminated block comment"),
])
def test_rust_scan_errors(text, message):
    with pytest.raises(oi.DslError, match=message):
        graph_from_rust(text, "z.rs")


def test_rust_char_literals_and_lifetimes():
    text = "fn f<'a>(c: char) { let b = '}'; let e = '\\''; let g = graph! { block entry { return; } }; }"
    assert "entry" in graph_from_rust(text).blocks


def test_load_json(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(graph_to_json(oi.graph(OIG)))
    assert oi.load_graph(path) == oi.graph(OIG)


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.oig"
    bad.write_bytes(b"dynamic { x: f32; }\xff")
    with pytest.raises(oi.DslError, match="not UTF-8"):
        oi.load_graph(bad)
    with pytest.raises(oi.DslError, match="missing.oig: cannot read: No such file or directory"):
        oi.load_graph(tmp_path / "missing.oig")
    bom = tmp_path / "bom.oig"
    bom.write_bytes(b"\xef\xbb\xbf" + OIG.encode())
    assert oi.load_graph(bom) == oi.graph(OIG)
