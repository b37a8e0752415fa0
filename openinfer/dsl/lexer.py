"""The DSL lexer: source text -> a list of tokens with positions.

The original DSL is a Rust proc-macro, so its tokens are Rust tokens: Rust identifiers (ASCII here),
Rust integer and float literals, Rust string literals and Rust comments (block comments nest).
Keywords that `syn` refuses as identifiers are lexed as `KW` tokens, so they can never be names;
the DSL's own words (`block`, `op`, `cache`, ...) are ordinary identifiers, as in the original.

A token keeps its start offset; line and column are computed on demand from a table of line
starts (most tokens never need them). Offsets index the *whole* text even when only a slice of
it is lexed, so a `graph! { ... }` body inside a `.rs` file reports positions in that file.
"""

from __future__ import annotations

import bisect
import re

from ..errors import DslError, SourceLoc

# Token kinds
IDENT = "ident"
KW = "keyword"
INT = "int"
FLOAT = "float"
STR = "string"
PUNCT = "punct"
EOF = "eof"

#: Words `syn` refuses as identifiers (Rust's strict and reserved keywords, plus `_`). `true` and
#: `false` become bool literals; `in`, `loop`, `ref`, `return`, `yield` and `await` are the DSL's
#: keyword tokens; the rest can only appear in an error.
KEYWORDS = frozenset("""
    _ abstract as async await become box break const continue crate do dyn else enum extern false
    final fn for if impl in let loop macro match mod move mut override priv pub ref return Self self
    static struct super trait true try type typeof unsafe unsized use virtual where while yield
""".split())

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", '"': '"', "'": "'"}

# The fast scan: one match per token, whitespace skipped in front of it. A name followed by `#` or
# `"` (a raw string `r"..."`) and an integer followed by `.` or a letter (a float, `0x1F`, `2D`)
# are left to `_SPECIAL_RE`, as are strings, block comments and anything unusual (`other`).
_TOKEN_RE = re.compile(r"""[ \t\r\n\x0b\x0c]*(?:
    (?P<ident>[A-Za-z_][A-Za-z0-9_]*+(?![\#"]))
  | (?P<punct>\.\.|>>|[;:,(){}\[\]=@*.>\-])
  | (?P<int>[0-9][0-9_]*+(?![0-9_A-Za-z]|\.(?!\.)))
  | (?P<line_comment>//[^\n]*)
  | (?P<other>.|$)
)""", re.VERBOSE | re.DOTALL)

_SPECIAL_RE = re.compile(r"""
    (?P<block_comment>/\*)
  | (?P<string>"|r\#*")
  | (?P<raw_ident>r\#[A-Za-z_])
  | (?P<based>0[xob][0-9A-Za-z_]*)
  | (?P<float>[0-9][0-9_]*(?:\.[0-9][0-9_]*(?:[eE][+-]?_*[0-9][0-9_]*)?
                            |[eE][+-]?_*[0-9][0-9_]*
                            |\.(?![.A-Za-z0-9_])))
  | (?P<int>[0-9][0-9_]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[!\#-&(-/:-@\[-^`{-~])
""", re.VERBOSE)

_BASES = {"x": (16, "0123456789abcdefABCDEF"), "o": (8, "01234567"), "b": (2, "01")}


#: A token is a plain tuple (kind, text, value, start, end), indexed with the constants below:
#: `text` is the token's source text; `value` an int for INT, a float for FLOAT, the decoded
#: string for STR, a bool for `true`/`false`, else the text; `start`/`end` are offsets into the
#: source. Plain tuples, not a NamedTuple: a large graph has ~50k tokens, and a tuple subclass
#: costs about twice as much to create, which was a third of the whole parse.
Token = tuple[str, str, object, int, int]
KIND, TEXT, VALUE, START, END = range(5)


class Source:
    """A text plus the file name its positions are reported against."""

    def __init__(self, text: str, name: str = "<string>"):
        self.text = text
        self.name = name
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.lines = tuple(line.rstrip("\r") for line in text.split("\n"))

    def loc(self, offset: int) -> SourceLoc:
        line = bisect.bisect_right(self._line_starts, offset)
        return SourceLoc(self.name, line, offset - self._line_starts[line - 1] + 1)

    def error(self, message: str, offset: int, length: int = 1, hint: str | None = None) -> DslError:
        loc = self.loc(offset)
        return DslError(message, loc, source_line=self.lines[loc.line - 1], hint=hint, length=length)


def tokenize(src: Source, start: int = 0, end: int | None = None) -> list[Token]:
    """Tokens of `src.text[start:end]`, ending with one EOF token at `end`.

    The common tokens (names, punctuation, plain integers) come straight from one regex scan;
    everything else (block comments, strings, floats, stray characters) drops to `_special`,
    after which the scan resumes. The fast path is most of the lexing time of a large graph.
    """
    text = src.text
    end = len(text) if end is None else end
    tokens: list[Token] = []
    append = tokens.append
    pos = start
    while pos < end:
        for m in _TOKEN_RE.finditer(text, pos, end):
            kind = m.lastgroup
            tok_start = m.start(kind)
            if kind == "ident":
                word = m.group(kind)
                if word in KEYWORDS:
                    append(_word(word, tok_start, m.end()))
                else:
                    append((IDENT, word, word, tok_start, m.end()))
            elif kind == "punct":
                word = m.group(kind)
                append((PUNCT, word, word, tok_start, m.end()))
            elif kind == "int":
                word = m.group(kind)
                append((INT, word, _int_value(src, word, tok_start), tok_start, m.end()))
            elif kind == "other":
                if tok_start == end:   # only whitespace was left
                    pos = end
                else:
                    pos = _special(src, tok_start, end, append)
                break
        else:
            pos = end
    tokens.append((EOF, "", None, end, end))
    return tokens


def _word(word: str, start: int, end: int) -> Token:
    """A keyword token; `true` and `false` carry their bool value."""
    return (KW, word, word == "true" if word in ("true", "false") else word, start, end)


def _special(src: Source, pos: int, end: int, append) -> int:
    """Lex the token at `pos` that the fast scan does not handle; return the offset after it."""
    text = src.text
    m = _SPECIAL_RE.match(text, pos, end)
    if m is None:
        raise _bad_char(src, pos)
    kind = m.lastgroup
    tok_end = m.end()
    word = m.group()
    if kind == "ident":
        append(_word(word, pos, tok_end) if word in KEYWORDS else (IDENT, word, word, pos, tok_end))
    elif kind == "punct":
        append((PUNCT, word, word, pos, tok_end))
    elif kind == "int":
        _check_suffix(src, pos, tok_end, end)
        append((INT, word, _int_value(src, word, pos), pos, tok_end))
    elif kind == "float":
        _check_suffix(src, pos, tok_end, end)
        value = float(word.replace("_", ""))
        if value == float("inf"):
            raise src.error(f"float literal `{word}` is out of range", pos, tok_end - pos,
                            hint="the largest finite value is about 1.8e308; write `inf` where infinity is meant")
        append((FLOAT, word, value, pos, tok_end))
    elif kind == "based":
        append(_based_int(src, word, pos, tok_end))
    elif kind == "string":
        tok_end = _string_end(src, pos, end, raw=word != '"')
        append((STR, text[pos:tok_end], _string_value(src, pos, tok_end), pos, tok_end))
    elif kind == "block_comment":
        tok_end = _block_comment_end(src, pos, end)
    else:  # raw_ident
        word = re.match(r"r#\w*", text[pos:end]).group()
        raise src.error(f"raw identifiers such as `{word}` are not supported", pos, len(word),
                        hint="choose a name that is not a Rust keyword")
    return tok_end


def _bad_char(src: Source, pos: int) -> DslError:
    ch = src.text[pos]
    if ch == "'":
        return src.error("unexpected `'`", pos, hint='strings use double quotes: "text"')
    if ord(ch) > 127:
        return src.error(f"unexpected non-ASCII character {ch!r} (U+{ord(ch):04X})", pos,
                         hint="names are ASCII letters, digits and `_`; other text belongs in strings or comments")
    return src.error(f"unexpected character U+{ord(ch):04X}", pos)


def _check_suffix(src: Source, start: int, end: int, limit: int) -> None:
    """Rust would read `2D` or `5i32` as a literal with a suffix; the DSL has no use for suffixes."""
    text = src.text
    if end < limit and (text[end].isalnum() or text[end] == "_") and text[end].isascii():
        stop = end
        while stop < limit and text[stop].isascii() and (text[stop].isalnum() or text[stop] == "_"):
            stop += 1
        raise src.error(f"invalid number `{text[start:stop]}`", start, stop - start,
                        hint="identifiers cannot start with a digit, and literal suffixes such as "
                             "`5i32` are not supported (the variable's dtype decides the type)")


def _based_int(src: Source, word: str, start: int, end: int) -> Token:
    base, digits = _BASES[word[1]]
    body = word[2:].replace("_", "")
    if not body or any(c not in digits for c in body):
        raise src.error(f"invalid base-{base} integer `{word}`", start, end - start)
    return (INT, word, _int_value(src, word, start, body, base), start, end)


#: The largest integer literal: no value the DSL holds (dims, indices, attributes, inits) is wider
#: than u64, and Python's int() refuses decimal strings of more than 4300 digits with a ValueError.
U64_MAX = (1 << 64) - 1


def _int_value(src: Source, word: str, start: int, body: str | None = None, base: int = 10) -> int:
    """The value of an integer literal, or a DslError at it when it exceeds `U64_MAX`."""
    if body is None and len(word) <= 19:        # the common case: a decimal that fits a u64
        return int(word.replace("_", ""))
    digits = (word.replace("_", "") if body is None else body).lstrip("0")
    if len(digits) <= 64 and int(digits or "0", base) <= U64_MAX:
        return int(digits or "0", base)
    shown = f"`{word}`" if len(word) <= 40 else f"`{word[:20]}...{word[-8:]}` ({len(digits)} digits)"
    raise src.error(f"integer literal {shown} is out of range", start, len(word),
                    hint=f"integers are at most 2^64 - 1 = {U64_MAX}")


def _string_end(src: Source, start: int, limit: int, raw: bool) -> int:
    text = src.text
    if raw:
        hashes = text.index('"', start) - start - 1
        close = text.find('"' + "#" * hashes, start + hashes + 2, limit)
        if close < 0:
            raise src.error("unterminated raw string", start, hashes + 2)
        return close + 1 + hashes
    pos = start + 1
    while pos < limit:
        ch = text[pos]
        if ch == '"':
            return pos + 1
        pos += 2 if ch == "\\" else 1
    raise src.error("unterminated string", start, hint='close the string with `"`')


def _string_value(src: Source, start: int, end: int) -> str:
    text = src.text
    if text[start] == "r":
        hashes = text.index('"', start) - start - 1
        return text[start + hashes + 2:end - 1 - hashes]
    out: list[str] = []
    pos, stop = start + 1, end - 1
    while pos < stop:
        ch = text[pos]
        if ch != "\\":
            out.append(ch)
            pos += 1
            continue
        esc = text[pos + 1]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            pos += 2
        elif esc in "\r\n":  # line continuation: skip the newline and the next line's indentation
            pos += 2
            while pos < stop and text[pos] in " \t\r\n":
                pos += 1
        elif esc == "x":
            code = text[pos + 2:pos + 4]
            if len(code) != 2 or not all(c in "0123456789abcdefABCDEF" for c in code) or int(code, 16) > 0x7F:
                raise src.error("invalid `\\x` escape: expected two hex digits up to 7F", pos, 4)
            out.append(chr(int(code, 16)))
            pos += 4
        elif esc == "u":
            close = text.find("}", pos, stop)
            digits = text[pos + 3:close].replace("_", "") if text[pos + 2:pos + 3] == "{" and close > 0 else ""
            if not (1 <= len(digits) <= 6) or not all(c in "0123456789abcdefABCDEF" for c in digits) \
                    or int(digits, 16) > 0x10FFFF or 0xD800 <= int(digits, 16) <= 0xDFFF:
                raise src.error("invalid unicode escape: expected `\\u{XXXX}`", pos, 2)
            out.append(chr(int(digits, 16)))
            pos = close + 1
        else:
            raise src.error(f"unknown escape `\\{esc}` in string", pos, 2,
                            hint="valid escapes: \\n \\r \\t \\\\ \\0 \\\" \\' \\x7F \\u{263A}")
    return "".join(out)


def _block_comment_end(src: Source, start: int, limit: int) -> int:
    """End of a `/* ... */` comment starting at `start`; Rust block comments nest."""
    text = src.text
    depth, pos = 0, start
    while True:
        opened = text.find("/*", pos, limit)
        closed = text.find("*/", pos, limit)
        if closed < 0:
            raise src.error("unterminated block comment", start, 2, hint="close it with `*/` (block comments nest)")
        if 0 <= opened < closed:
            depth += 1
            pos = opened + 2
        else:
            depth -= 1
            pos = closed + 2
            if depth == 0:
                return pos
