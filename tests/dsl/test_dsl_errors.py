"""Every DSL error: its full text (file:line:col, the line, the caret, the hint) against a golden file.

Each case is a small source that triggers one error; tests/dsl/golden/errors/<name>.txt holds what
`str(DslError)` prints (OI_UPDATE_GOLDEN=1 rewrites). The first group reproduces every error of the
original's parse tests (digest §2) with the original's wording.
"""

from __future__ import annotations

import pytest
from dsl_golden import golden

import openinfer as oi
from openinfer.dsl import parse

# name -> (source, a phrase the message must contain)
ORIGINAL_PARSE_TESTS = {
    "orig_top_level": ("foo { }", "expected memory section or block"),
    "orig_duplicate_init": ("volatile { x: f32 @init(true) @init(false); }\nblock entry { return; }",
                            "duplicate @init attribute"),
    "orig_dim_expression": ("dynamic { x: f32[B*]; }\nblock entry { return; }",
                            "expected identifier or integer for dimension expression"),
    "orig_positional_after_setting": ("dynamic { x: f32[B]; }\nblock entry { op add(x, alpha=1, y) >> x; }",
                                      "positional args must come before settings"),
    "orig_minus_identifier": ("persistent { table(i): f32 @table; }\nblock entry { cache.read table[-i] >> x; }",
                              "unexpected '-' before identifier"),
    "orig_branch_two_names": ("dynamic { x: f32; }\nblock entry { branch cond ok; }",
                              "branch expects condition and two target blocks"),
    "orig_loop_range": ("dynamic { x: f32; }\nblock entry { loop i (idx in ..3) { return; } }",
                        "expected identifier or integer for loop range"),
    "orig_auto_dim_empty": ("volatile { x: f32 @auto_dim(); }\nblock entry { return; }",
                            "@auto_dim requires at least one index"),
    "orig_cache_operation": ("dynamic { x: f32; }\nblock entry { cache.foo x; }", "unsupported cache operation"),
}

CASES = {
    # lexical
    "lex_raw_identifier": ("dynamic {\n    r#type: f32;\n}", "raw identifiers"),
    "lex_char_quote": ("constant {\n    w: f32 @ref('w');\n}", "unexpected `'`"),
    "lex_non_ascii": ("dynamic {\n    café: f32;\n}", "non-ASCII"),
    "lex_control_char": ("dynamic {\n    x: f32;\x01\n}", "unexpected character U+0001"),
    "lex_number_suffix": ("dynamic {\n    x: f32[2D];\n}", "invalid number `2D`"),
    "lex_int_suffix": ("volatile {\n    x: i32 @init(5i32);\n}", "invalid number `5i32`"),
    "lex_float_range": ("block entry {\n    op f(x, a=1e400) >> y;\n}", "out of range"),
    "lex_bad_hex": ("dynamic {\n    x: f32[0x];\n}", "invalid base-16 integer"),
    "lex_bad_binary": ("dynamic {\n    x: f32[0b102];\n}", "invalid base-2 integer"),
    "lex_unterminated_string": ('constant {\n    w: f32 @ref("w.0);\n}', "unterminated string"),
    "lex_unterminated_raw_string": ('constant {\n    w: f32 @ref(r#"w.0");\n}', "unterminated raw string"),
    "lex_bad_x_escape": ('constant {\n    w: f32 @ref("\\xZZ");\n}', "invalid `\\x` escape"),
    "lex_bad_unicode_escape": ('constant {\n    w: f32 @ref("\\u{110000}");\n}', "invalid unicode escape"),
    "lex_unknown_escape": ('constant {\n    w: f32 @ref("a\\qb");\n}', "unknown escape"),
    "lex_unterminated_comment": ("dynamic {\n    /* x: f32;\n}", "unterminated block comment"),
    "lex_unterminated_nested_comment": ("/* outer /* inner */\nblock entry { return; }", "unterminated block comment"),
    # top level, sections, blocks
    "top_constants": ("constants {\n    w: f32[D];\n}", "expected memory section or block"),
    "top_macro_call": ("graph! {\n    dynamic { x: f32; }\n}", "expected memory section or block"),
    "top_stray_brace": ("dynamic { x: f32; }\n}", "expected memory section or block"),
    "top_literal": ('"text"', "expected memory section or block"),
    "section_brace": ("dynamic x: f32;", "expected `{` after `dynamic`"),
    "section_unclosed": ("dynamic {\n    x: f32;\n", "to close the `dynamic` section"),
    "block_name_keyword": ("block loop { return; }", "keyword"),
    "block_unclosed": ("block entry {\n    return;\n", "to close block `entry`"),
    "block_duplicate": ("block entry { return; }\nblock entry { return; }", "duplicate block `entry`"),
    "block_missing_brace_before": ("block entry {\n    return;\nblock next { return; }", "unsupported node"),
    # declarations
    "decl_duplicate_var": ("dynamic {\n    x: f32;\n}\nvolatile {\n    x: f32;\n}", "duplicate variable `x`"),
    "decl_equals": ("dynamic {\n    x = f32[B];\n}", "expected `:`"),
    "decl_missing_close_brace": ("dynamic {\n    x: f32;\nblock entry { return; }", "expected `:`"),
    "decl_missing_semicolon": ("dynamic {\n    x: f32[B]\n    y: f32;\n}", "expected `;`"),
    "decl_missing_semicolon_same_line": ("dynamic { x: f32[B] y: f32; }", "expected `;`"),
    "decl_empty_table": ("constant {\n    W(): f32;\n}", "prefix table must declare at least one index"),
    "decl_dtype_unknown": ("dynamic {\n    x: f31[B];\n}", "unsupported dtype `f31`"),
    "decl_dtype_far": ("dynamic {\n    x: tensor[B];\n}", "unsupported dtype `tensor`"),
    "decl_dtype_missing": ("dynamic {\n    x: [B];\n}", "expected a dtype"),
    "decl_dims_unclosed": ("dynamic {\n    x: f32[B, D", "unclosed `[`"),
    "decl_dims_two_stars": ("dynamic {\n    x: f32[A*B*C];\n}", "at most one `*`"),
    "decl_dims_negative": ("dynamic {\n    x: f32[-3];\n}", "dimension expression"),
    "decl_dims_plus": ("dynamic {\n    x: f32[B+1];\n}", "dimension expression"),
    "decl_dims_keyword": ("dynamic {\n    x: f32[type];\n}", "keyword"),
    "decl_integer_too_large": ("volatile {\n    x: u64 @init(18446744073709551616);\n}", "out of range"),
    # attributes
    "attr_unknown": ("dynamic {\n    x: f32 @foo;\n}", "unsupported attribute `@foo`"),
    "attr_reference": ('constant {\n    w: f32[D] @reference("w.0");\n}', "unsupported attribute `@reference`"),
    "attr_flat": ("constant {\n    w: f32[D] @flat;\n}", "unsupported attribute `@flat`"),
    "attr_close_typo": ("constant {\n    w: f32[D] @patern(\"w\");\n}", "unsupported attribute"),
    "attr_no_name": ("dynamic {\n    x: f32 @(1);\n}", "expected an attribute name"),
    "attr_missing_at": ('constant {\n    W(l): f32[D] pattern("w.{l}");\n}', "missing its `@`"),
    "attr_duplicate_table": ("persistent {\n    A(i): f32 @table @table;\n}", "duplicate @table attribute"),
    "attr_duplicate_fixed": ("persistent {\n    A(i): f32 @table @fixed(i=1) @fixed(i=2);\n}", "duplicate @fixed"),
    "attr_pattern_not_string": ("constant {\n    W(l): f32 @pattern(w);\n}", "expected a pattern string"),
    "attr_ref_missing": ("constant {\n    w: f32 @ref();\n}", "expected the model tensor name"),
    "attr_fixed_old_form": ("persistent {\n    A(i): f32 @table @fixed(1024, 256);\n}", "expected an index name"),
    "attr_fixed_no_equals": ("persistent {\n    A(i): f32 @table @fixed(i 4);\n}", "expected `=`"),
    "attr_fixed_bad_size": ("persistent {\n    A(i): f32 @table @fixed(i=-4);\n}", "non-negative integer size"),
    "attr_fixed_duplicate_index": ("persistent {\n    A(i): f32 @table @fixed(i=4, i=5);\n}", "duplicate index"),
    "attr_fixed_empty": ("persistent {\n    A(i): f32 @table @fixed();\n}", "@fixed requires at least one entry"),
    "attr_auto_dim_unclosed": ("persistent {\n    A(i): f32 @auto_dim(i", "expected `)`"),
    # @init type rules
    "init_float_on_int": ("volatile {\n    n: i32 @init(5.0);\n}", "float init requires a float dtype"),
    "init_int_on_float": ("volatile {\n    n: f32 @init(5);\n}", "integer init requires"),
    "init_bool_on_float": ("volatile {\n    n: f32 @init(true);\n}", "bool init requires bool dtype"),
    "init_float_on_bool": ("volatile {\n    n: bool @init(1.0);\n}", "float init requires"),
    "init_bool_range": ("volatile {\n    n: bool @init(2);\n}", "bool init must be 0 or 1"),
    "init_i4_range": ("volatile {\n    n: i4 @init(8);\n}", "i4 init out of range"),
    "init_u4_negative": ("volatile {\n    n: u4 @init(-1);\n}", "u4 init out of range"),
    "init_i8_range": ("volatile {\n    n: i8 @init(-129);\n}", "i8 init out of range"),
    "init_bitset_range": ("volatile {\n    n: bitset @init(256);\n}", "bitset init out of range"),
    "init_t1_zero": ("volatile {\n    n: t1 @init(0);\n}", "t1 init must be -1 or 1"),
    "init_t2_range": ("volatile {\n    n: t2 @init(2);\n}", "t2 init out of range"),
    "init_negative_bool": ("volatile {\n    n: bool @init(-true);\n}", "boolean init cannot be negative"),
    "init_not_literal": ("volatile {\n    n: f32 @init(x);\n}", "expected numeric or boolean literal for init"),
    # nodes
    "node_unknown": ("block entry {\n    frobnicate;\n}", "unsupported node"),
    "node_typo": ("block entry {\n    ops relu(x) >> y;\n}", "unsupported node"),
    "node_decl_in_block": ("block entry {\n    x: f32;\n}", "unsupported node"),
    "node_call_without_op": ("block entry {\n    relu(x) >> y;\n}", "unsupported node"),
    "node_if": ("block entry {\n    if c { return; }\n}", "unsupported node"),
    "node_for": ("block entry {\n    for i in 0..4 { }\n}", "unsupported node"),
    "node_literal": ("block entry {\n    42;\n}", "unsupported node"),
    "return_value": ("block entry {\n    return h;\n}", "return takes no value"),
    "assign_missing_colon": ("block entry {\n    assign t f32;\n}", "expected `:`"),
    "barrier_semicolon": ("block entry {\n    barrier\n}", "expected `;`"),
    "transfer_arrow": ("block entry {\n    transfer a b;\n}", "expected `>>`"),
    # ops
    "op_name_missing": ("block entry {\n    op (x) >> y;\n}", "expected an op name"),
    "op_open_paren": ("block entry {\n    op relu >> y;\n}", "expected `(`"),
    "op_args_unclosed": ("block entry {\n    op relu(x", "to close the op's arguments"),
    "op_arrow_missing": ("block entry {\n    op relu(x) y;\n}", "expected `>>`"),
    "op_two_outputs": ("block entry {\n    op f(x) >> y, z;\n}", "exactly one output"),
    "op_indexed_output": ("block entry {\n    op f(x) >> W[l];\n}", "plain variable name"),
    "op_output_missing": ("block entry {\n    op f(x) >> ;\n}", "output variable"),
    "op_duplicate_setting": ("block entry {\n    op relu(x, alpha=1.0, alpha=2.0) >> y;\n}", "duplicate setting"),
    "op_to_not_dtype": ("block entry {\n    op cast(x, to=3) >> y;\n}", "to must be a dtype identifier"),
    "op_to_unknown_dtype": ("block entry {\n    op cast(x, to=f31) >> y;\n}", "unsupported dtype"),
    "op_acc_int": ("block entry {\n    op matmul(x, w, acc=3) >> y;\n}", "acc must be a dtype list"),
    "op_acc_name": ("block entry {\n    op matmul(x, w, acc=i33) >> y;\n}", "acc must be a dtype list"),
    "op_acc_int_list": ("block entry {\n    op matmul(x, w, acc=[1, 2]) >> y;\n}", "acc must be a dtype list"),
    "op_acc_empty_list": ("block entry {\n    op matmul(x, w, acc=[]) >> y;\n}", "acc must be a dtype list"),
    "op_minus_identifier": ("block entry {\n    op relu(x, alpha=-x) >> y;\n}", "unexpected '-' before identifier"),
    "op_minus_bool": ("block entry {\n    op f(x, a=-true) >> y;\n}", "unexpected '-' before bool literal"),
    "op_minus_string": ('block entry {\n    op f(x, a=-"s") >> y;\n}', "unexpected '-' before string literal"),
    "op_minus_nothing": ("block entry {\n    op f(x, a=-) >> y;\n}", "expected a number after '-'"),
    "op_setting_value": ("block entry {\n    op f(x, a=) >> y;\n}", "expected literal or identifier"),
    "op_setting_keyword": ("block entry {\n    op f(x, a=self) >> y;\n}", "keyword"),
    "op_mixed_list": ("block entry {\n    op f(x, a=[1, f32]) >> y;\n}", "expected an integer in the list"),
    "op_dtype_list_int": ("block entry {\n    op f(x, a=[f32, 1]) >> y;\n}", "expected a dtype in the dtype list"),
    "op_dtype_list_unknown": ("block entry {\n    op f(x, a=[f32, f99]) >> y;\n}", "unsupported dtype `f99`"),
    "op_list_unclosed": ("block entry {\n    op f(x, a=[1, 2", "unclosed `[`"),
    "lex_int_5000_digits": ("dynamic {\n    x: f32[" + "9" * 5000 + "];\n}", "(5000 digits) is out of range"),
    "lex_int_over_u64": ("dynamic {\n    x: f32[18446744073709551616];\n}", "integers are at most 2^64 - 1"),
    "lex_hex_over_u64": ("block entry {\n    cache.read A[0x1_0000_0000_0000_0000] >> x;\n}", "out of range"),
    "long_line_window": ("dynamic { x: f32[2]; }" + " " * 300 + "blok { }", "did you mean `block`"),
    "op_int_too_large": ("block entry {\n    op f(x, a=9223372036854775808) >> y;\n}", "out of range"),
    "op_input_literal": ("block entry {\n    op f(1.5) >> y;\n}", "expected an input variable"),
    "op_input_slice": ("block entry {\n    op f(W[0..2]) >> y;\n}", "expected identifier or integer index"),
    "op_input_empty_index": ("block entry {\n    op f(W[]) >> y;\n}", "prefix access must include at least one index"),
    "op_input_negative_index": ("block entry {\n    op f(W[-1]) >> y;\n}", "expected identifier or integer index"),
    "op_input_unclosed_index": ("block entry {\n    op f(W[l", "unclosed `[`"),
    # cache
    "cache_missing_dot": ("block entry {\n    cache read A >> x;\n}", "expected `.`"),
    "cache_typo": ("block entry {\n    cache.reed A >> x;\n}", "unsupported cache operation"),
    "cache_read_arrow": ("block entry {\n    cache.read A x;\n}", "expected `>>`"),
    "cache_increment_negative": ("block entry {\n    cache.increment -1 t;\n}", "cannot be negative"),
    "cache_increment_indexed": ("block entry {\n    cache.increment K[0];\n}", "plain scalar variable"),
    "cache_access_unclosed": ("block entry {\n    cache.reset A[0", "unclosed `[`"),
    "cache_index_float": ("block entry {\n    cache.read A[1.5] >> x;\n}",
                          "expected identifier or integer for cache index"),
    "cache_slice_minus_name": ("block entry {\n    cache.read A[0..-n] >> x;\n}", "unexpected '-' before identifier"),
    # control flow
    "branch_missing_else": ("block entry {\n    branch c ok;\n}", "branch expects condition and two target blocks"),
    "branch_four_names": ("block entry {\n    branch c a b d;\n}", "expected `;`"),
    "dep_missing_after": ("block entry {\n    dep (a) before(b);\n}", "expected `after(...)`"),
    "dep_two_names": ("block entry {\n    dep after(relu x) before(y);\n}", "expected `)`"),
    "dep_missing_before": ("block entry {\n    dep after(a);\n}", "expected `before(...)`"),
    "loop_missing_in": ("block entry {\n    loop l (i 0..4) { }\n}", "expected `in`"),
    "loop_inclusive": ("block entry {\n    loop l (i in 0..=4) { }\n}", "loop range"),
    "loop_negative": ("block entry {\n    loop l (i in -1..4) { }\n}", "loop range"),
    "loop_float": ("block entry {\n    loop l (i in 0..4.5) { }\n}", "loop range"),
    "loop_step": ("block entry {\n    loop l (i in 0..4, 2) { }\n}", "expected `)`"),
    "loop_body_missing": ("block entry {\n    loop l (i in 0..4) return;\n}", "expected `{`"),
    "loop_body_unclosed": ("block entry {\n    loop l (i in 0..4) {\n        return;\n}", "to close block `entry`"),
    "loop_keyword_index": ("block entry {\n    loop l (in in 0..4) { }\n}", "keyword"),
    "yield_empty": ("block entry {\n    yield;\n}", "yield expects at least one variable"),
    "await_empty": ("block entry {\n    await ;\n}", "await expects at least one variable"),
    "yield_without_commas": ("block entry {\n    yield a b;\n}", "expected `;`"),
    "await_literal": ("block entry {\n    await 1;\n}", "expected a variable to await"),
}

TOO_DEEP = "block entry {\n" + "loop l (i in 0..2) {\n" * 65 + "}\n" * 65 + "}"


@pytest.mark.parametrize("name", sorted({**ORIGINAL_PARSE_TESTS, **CASES}))
def test_error_text(name):
    source, phrase = {**ORIGINAL_PARSE_TESTS, **CASES}[name]
    with pytest.raises(oi.DslError) as info:
        parse(source, f"{name}.oig")
    text = str(info.value)
    assert phrase in text
    assert text.startswith(f"{name}.oig:")
    golden(f"errors/{name}.txt", text + "\n")


def test_loops_nested_too_deep():
    with pytest.raises(oi.DslError, match="nested more than 64 deep"):
        parse(TOO_DEEP)


def test_error_carries_location_and_length():
    with pytest.raises(oi.DslError) as info:
        parse("dynamic {\n    x: f31[B];\n}", "g.oig")
    err = info.value
    assert (err.loc.file, err.loc.line, err.loc.col, err.length) == ("g.oig", 2, 8, 3)
    assert err.source_line == "    x: f31[B];" and "f32" in err.hint
    assert isinstance(err, oi.OpenInferError)


def test_caret_under_tabs_and_crlf():
    with pytest.raises(oi.DslError) as info:
        parse("dynamic {\r\n\tx: f31;\r\n}")
    assert str(info.value).splitlines()[1:3] == ["     x: f31;", "        ^^^"]
