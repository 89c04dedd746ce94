"""Lexing host sources (C/C++/CUDA, Rust, Python): string literals, and the code with comments and literal
contents blanked, so that calls and brackets can be matched with plain regular expressions.

Used by the launcher scan (:mod:`audit.launchers`), the launch reader (:mod:`audit.cuda.launches`) and
``wireup init`` (:mod:`audit.scaffold`).

>>> lits, code = lex('f("a(b", x) // "c"', "rust")
>>> [l.value for l in lits], code
(['a(b'], 'f("   ", x)       ')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Literal:
    """A string literal of a host source: its text (between the quotes) and where it starts."""

    value: str
    start: int
    end: int
    line: int



def language_of(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".rs":
        return "rust"
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix in (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh"):
        return "c"
    return "generic"


_RUST_CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]{1,6}\}|\\.|[^\\'\n])'")
_RUST_RAW = re.compile(r'b?r(#*)"')
_CPP_RAW = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(')
_C_CHAR = re.compile(r"'(?:\\.|[^\\'\n])*'")


def lex(text: str, language: str) -> tuple[list[Literal], str]:
    """String literals of ``text`` and the code with comments and literal contents blanked.

    Blanked characters become spaces (newlines are kept), so offsets and line numbers stay valid and
    parentheses inside strings or comments do not count when calls are matched.

    >>> lits, code = lex('f("a(b", x) // "c"', "rust")
    >>> [l.value for l in lits], code
    (['a(b'], 'f("   ", x)       ')
    """
    out = list(text)
    lits: list[Literal] = []
    i, n = 0, len(text)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def blank(a: int, b: int) -> None:
        for j in range(a, b):
            if out[j] != "\n":
                out[j] = " "

    def literal(q_start: int, c_start: int, c_end: int, q_end: int) -> None:
        lits.append(Literal(text[c_start:c_end], q_start, q_end, line_of(q_start)))
        blank(c_start, c_end)

    line_comment = "#" if language == "python" else ("//" if language in ("rust", "c") else None)
    while i < n:
        c = text[i]
        if line_comment and text.startswith(line_comment, i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if language in ("rust", "c") and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if language == "rust" and text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
            continue
        if language == "rust" and c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _RUST_RAW.match(text, i)
            if m:
                close = '"' + m.group(1)
                j = text.find(close, m.end())
                j = n if j < 0 else j
                literal(i, m.end(), j, min(n, j + len(close)))
                i = j + len(close)
                continue
        if language == "c" and c in "uULR" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _CPP_RAW.match(text, i)
            if m:
                close = ")" + m.group(1) + '"'
                j = text.find(close, m.end())
                j = n if j < 0 else j
                literal(i, m.end(), j, min(n, j + len(close)))
                i = j + len(close)
                continue
        if c == "'" and language == "rust":
            m = _RUST_CHAR.match(text, i)
            i = m.end() if m else i + 1  # a char literal, or the quote of a lifetime
            continue
        if c == "'" and language == "c":
            m = _C_CHAR.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == '"' or (c == "'" and language in ("python", "generic")):
            # String prefixes (r, b, f) are lexed as code; a backslash skips the next character even in
            # a raw Python string (r"\"" is one string), which is all that finding its end needs.
            quote = text[i : i + 3] if language == "python" and text[i : i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if len(quote) == 1 and text[j] == "\n" and language != "rust":
                    break  # unterminated single-line string: stop at the line end
                j += 1
            literal(i, i + len(quote), min(j, n), min(n, j + len(quote)))
            i = j + len(quote)
            continue
        i += 1
    return lits, "".join(out)
