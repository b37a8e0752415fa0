"""The jinja2 environment every renderer uses: templates/ from the package, strict undefined
variables (a missing value is a bug, not an empty string), and C-specific filters."""

from __future__ import annotations

from functools import cache

import jinja2

from ..dims import Dim, capacity
from ..resources import templates_dir


def c_string(value) -> str:
    """A C string literal holding `value`'s UTF-8 bytes, valid C for any Python str.

    Printable ASCII stands for itself; every other byte is a three-digit octal escape (an octal
    escape ends after three digits, so a following digit cannot extend it as it would a `\\x`
    escape). `?` is escaped so that no trigraph (`??/` is a backslash under -std=c11) forms. A
    str that is not Unicode text (lone surrogates) keeps its undecodable bytes (as `os.fsdecode`
    made them) or, failing that, their `\\udXXX` spelling."""
    try:
        data = str(value).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = str(value).encode("utf-8", "backslashreplace")
    out = []
    for byte in data:
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def c_comment(value) -> str:
    """Text safe inside a C block comment: `*/` broken, control characters but newline and tab
    escaped (as in a Python string: a NUL would be a compiler warning), and lone surrogates
    written as `\\udXXX`, so that the file stays valid UTF-8."""
    text = str(value).replace("*/", "* /")
    text = "".join(ch.encode("unicode_escape").decode("ascii") if ch < " " and ch not in "\n\t" or ch == "\x7f"
                   else ch for ch in text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["c_string"] = c_string
    env.filters["c_comment"] = c_comment
    # dynamic sizes (openinfer/dims.py): `x is dynamic` where an extent is only known at run time
    # (str() renders its C expression), `x | capacity` its bound (what scratch arrays are sized for)
    env.tests["dynamic"] = lambda x: isinstance(x, Dim)
    env.filters["capacity"] = capacity
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
