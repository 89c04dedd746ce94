"""A small C/CUDA tokenizer: enough to find operators, calls and statements without touching comments,
string literals or preprocessor lines.

Comments and whitespace are dropped; a preprocessor directive (``#include``, ``#pragma unroll``,
``#define`` with its continuation lines) is dropped whole, so no mutation ever lands in one. Every token
keeps its byte offsets and its 1-based line and column in the source, which is what a mutation edits
and what a mutant's id quotes.

>>> [t.text for t in tokenize('a += b; // c\\n#pragma unroll\\nx = "s+t";')]
['a', '+=', 'b', ';', 'x', '=', '"s+t"', ';']
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

# longest first within each length, so a greedy match takes ">>=" before ">>" before ">"
_PUNCT = sorted(
    {
        "...", "<<=", ">>=", "->*",
        "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=",
        "&=", "|=", "^=", "::", ".*",
        *"{}[]()<>;:,.?~!+-*/%^&|=#",
    },
    key=lambda p: -len(p),
)  # fmt: skip


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is ``ident``, ``number``, ``string``, ``char`` or ``punct``; offsets index the source."""

    kind: str
    text: str
    start: int
    end: int
    line: int
    col: int


class TokenizeError(ValueError):
    """The source cannot be tokenized (an unterminated comment or literal); the message names the line."""


def tokenize(src: str) -> list[Token]:
    """The tokens of ``src`` (see the module docstring); a text is tokenized once per process (the
    analyses, their headers and ``#define`` expressions ask for the same texts many times)."""
    return list(_tokenize(src))


@functools.lru_cache(maxsize=256)
def _tokenize(src: str) -> tuple[Token, ...]:
    return tuple(_scan(src))


def _scan(src: str) -> list[Token]:
    line_starts = [0] + [i + 1 for i, ch in enumerate(src) if ch == "\n"]

    def where(pos: int) -> tuple[int, int]:
        ln = bisect.bisect_right(line_starts, pos)
        return ln, pos - line_starts[ln - 1] + 1

    out: list[Token] = []
    n = len(src)
    i = 0
    at_line_start = True  # only whitespace since the last newline: a '#' here starts a directive
    while i < n:
        ch = src[i]
        if ch == "\n":
            at_line_start = True
            i += 1
            continue
        if ch in " \t\r\f\v":
            i += 1
            continue
        if ch == "\\" and i + 1 < n and src[i + 1] == "\n":  # a line splice outside a directive
            i += 2
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise TokenizeError(f"unterminated /* comment starting at line {where(i)[0]}")
            i = j + 2
            continue
        if ch == "#" and at_line_start:
            i = _directive_end(src, i)
            continue
        at_line_start = False
        start = i
        if ch.isalpha() or ch == "_":
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            word = src[i:j]
            if j < n and src[j] in "\"'" and word in ("L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"):
                j = _literal_end(src, j, raw=word.endswith("R"), where=where)
                kind = "string" if src[j - 1] == '"' or word.endswith("R") else "char"
                out.append(Token(kind, src[start:j], start, j, *where(start)))
                i = j
                continue
            out.append(Token("ident", word, start, j, *where(start)))
            i = j
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and src[i + 1].isdigit()):
            j = i + 1
            hexa = src.startswith(("0x", "0X"), i)
            while j < n:
                c = src[j]
                signed_exp = j + 1 < n and src[j + 1] in "+-" and (c in "pP" or (c in "eE" and not hexa))
                if signed_exp:
                    j += 2
                elif c.isalnum() or c in "._":
                    j += 1
                elif c == "'" and j + 1 < n and src[j + 1].isalnum():  # C++14 digit separator
                    j += 2
                else:
                    break
            out.append(Token("number", src[i:j], start, j, *where(start)))
            i = j
            continue
        if ch in "\"'":
            j = _literal_end(src, i, raw=False, where=where)
            out.append(Token("string" if ch == '"' else "char", src[i:j], start, j, *where(start)))
            i = j
            continue
        for p in _PUNCT:
            if src.startswith(p, i):
                out.append(Token("punct", p, start, i + len(p), *where(start)))
                i += len(p)
                break
        else:
            out.append(Token("punct", ch, start, i + 1, *where(start)))
            i += 1
    return out


def _directive_end(src: str, i: int) -> int:
    """End of the preprocessor directive starting at ``i`` (continuation lines and comments included)."""
    n = len(src)
    while i < n:
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            return n if j < 0 else j
        ch = src[i]
        if ch == "\\" and i + 1 < n and src[i + 1] == "\n":
            i += 2
            continue
        if ch == "\n":
            return i
        if ch in "\"'":
            j = src.find(ch, i + 1)
            while j > 0 and src[j - 1] == "\\":
                j = src.find(ch, j + 1)
            if j < 0 or "\n" in src[i:j]:
                i += 1  # an apostrophe in a #error text, say: not a literal
                continue
            i = j + 1
            continue
        i += 1
    return n


def _literal_end(src: str, i: int, raw: bool, where) -> int:
    """End offset (exclusive) of the string or character literal whose quote is at ``i``."""
    quote = src[i]
    n = len(src)
    if raw and quote == '"':
        paren = src.find("(", i)
        delim = src[i + 1 : paren]
        close = src.find(")" + delim + '"', paren)
        if paren < 0 or close < 0:
            raise TokenizeError(f"unterminated raw string literal at line {where(i)[0]}")
        return close + len(delim) + 2
    j = i + 1
    while j < n:
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            break
        j += 1
    raise TokenizeError(f"unterminated {'string' if quote == chr(34) else 'character'} literal at line {where(i)[0]}")


def define_value(value: str) -> str:
    """A ``#define``'s value as the preprocessor sees it: its ``/* */`` and ``//`` comments dropped (a
    comment left open runs to the end of the line here), stripped.

    >>> define_value("2          // COLS / 64"), define_value("(W * 4) /* warps */ + 1")
    ('2', '(W * 4)   + 1')
    """
    value = re.sub(r"/\*.*?(?:\*/|$)", " ", value)
    cut = value.find("//")
    return (value if cut < 0 else value[:cut]).strip()
