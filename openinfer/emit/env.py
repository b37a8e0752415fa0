"""The jinja2 environment every renderer uses: templates/ from the package, strict undefined
variables (a missing value is a bug, not an empty string), and C-specific filters."""

from __future__ import annotations

import json
from functools import cache

import jinja2

from ..resources import templates_dir


def c_string(value) -> str:
    """A C string literal (JSON escaping is valid C for the ASCII we emit)."""
    return json.dumps(str(value), ensure_ascii=True)


def c_comment(value) -> str:
    """Text safe inside a C block comment."""
    return str(value).replace("*/", "* /")


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
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
