"""Find the bodies of `graph! { ... }` invocations in a Rust source file.

The original wrote graphs inline in Rust; this lets those files be used as they are. The scan
understands just enough Rust to match brackets: line and (nesting) block comments, string, byte
and raw string literals, and char literals (told apart from lifetimes). Bodies are returned as
offsets into the file, so the parser reports errors at the file's own line numbers.
"""

from __future__ import annotations

import re

from .lexer import Source

_SCAN = re.compile(r"""//|/\*|[bc]?r\#*"|[bc]?"|'|\bgraph\b|[{}()\[\]]""")
_CLOSERS = {"{": "}", "(": ")", "[": "]"}
_GAP = re.compile(r"(?:\s|//[^\n]*|/\*.*?\*/)*", re.DOTALL)


def find_graph_bodies(src: Source) -> list[tuple[int, int]]:
    """(start, end) offsets of each `graph! { ... }` body, in file order (any delimiter)."""
    text = src.text
    bodies = []
    pos = 0
    while (m := _SCAN.search(text, pos)) is not None:
        word = m.group()
        if word == "graph":
            after_bang = _after_gap(text, m.end())
            if text.startswith("!", after_bang):
                opener = _after_gap(text, after_bang + 1)
                if opener < len(text) and text[opener] in _CLOSERS:
                    close = _matching(src, opener)
                    bodies.append((opener + 1, close))
                    pos = close + 1
                    continue
            pos = m.end()
        else:
            pos = _skip(src, m.start(), word) or m.end()
    return bodies


def _after_gap(text: str, pos: int) -> int:
    return _GAP.match(text, pos).end()


def _skip(src: Source, start: int, word: str) -> int | None:
    """End of the comment, string or char literal starting at `start`, or None for other tokens."""
    text = src.text
    if word == "//":
        end = text.find("\n", start)
        return len(text) if end < 0 else end
    if word == "/*":
        depth, pos = 0, start
        while True:
            opened, closed = text.find("/*", pos), text.find("*/", pos)
            if closed < 0:
                raise src.error("unterminated block comment", start, 2)
            if 0 <= opened < closed:
                depth, pos = depth + 1, opened + 2
            else:
                depth, pos = depth - 1, closed + 2
                if depth == 0:
                    return pos
    if word.endswith('"'):
        if "r" in word:
            hashes = word.count("#")
            end = text.find('"' + "#" * hashes, start + len(word))
            if end < 0:
                raise src.error("unterminated raw string", start, len(word))
            return end + 1 + hashes
        pos = start + len(word)
        while pos < len(text):
            if text[pos] == "\\":
                pos += 2
            elif text[pos] == '"':
                return pos + 1
            else:
                pos += 1
        raise src.error("unterminated string", start)
    if word == "'":
        # 'x' and '\n' are char literals; 'a (no closing quote right after) is a lifetime
        if text.startswith("\\", start + 1):
            end = text.find("'", start + 3)
            return None if end < 0 else end + 1
        if text.startswith("'", start + 2):
            return start + 3
    return None


def _matching(src: Source, opener: int) -> int:
    """Offset of the bracket closing the one at `opener`, skipping comments and literals."""
    text = src.text
    stack = [_CLOSERS[text[opener]]]
    pos = opener + 1
    while (m := _SCAN.search(text, pos)) is not None:
        word = m.group()
        if word in _CLOSERS:
            stack.append(_CLOSERS[word])
        elif word in ")]}":
            if word != stack[-1]:
                raise src.error(f"mismatched `{word}` in the graph! body", m.start(), hint=f"expected `{stack[-1]}`")
            stack.pop()
            if not stack:
                return m.start()
        else:
            skipped = _skip(src, m.start(), word)
            if skipped is not None:
                pos = skipped
                continue
        pos = m.end()
    raise src.error(f"unclosed `{text[opener]}` of graph!", opener,
                    hint=f"expected a matching `{_CLOSERS[text[opener]]}`")
