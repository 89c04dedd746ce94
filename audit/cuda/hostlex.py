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
    code = "".join(out)
    if language == "c" and ("<< <" in code or "<<\t<" in code):
        code = _spaced_chevrons(code)
    return lits, code


_SPACED_OPEN = re.compile(r"<<[ \t]+<")
_SPACED_CLOSE = re.compile(r">>[ \t]+>")


def _spaced_chevrons(code: str) -> str:
    """``code`` with each launch written ``k << <grid, block >> > (args)`` (which nvcc accepts, and Visual
    Studio's formatter writes: diff-gaussian-rasterization's every launch) as ``k  <<<grid, block >>>  (args)``,
    the same length, so offsets and line numbers stay (the configuration starts where it did). A ``>> >`` is
    rewritten only after an opening one.

    >>> _spaced_chevrons("k << <(P + 255) / 256, 256 >> > (P, x);")
    'k  <<<(P + 255) / 256, 256 >>>  (P, x);'
    """
    out, last = [], 0
    for m in _SPACED_OPEN.finditer(code):
        if m.start() < last:
            continue
        close = _SPACED_CLOSE.search(code, m.end())
        if close is None:
            break
        out.append(code[last : m.start()] + " " * (m.end() - m.start() - 3) + "<<<" + code[m.end() : close.start()]
                   + ">>>" + " " * (close.end() - close.start() - 3))  # fmt: skip
        last = close.end()
    return "".join(out) + code[last:]


_DEFINED = re.compile(r"^!?\s*defined\s*\(?\s*([A-Za-z_]\w*)\s*\)?$")


def inactive_blanked(text: str, defined: frozenset[str] | set[str] = frozenset()) -> str:
    """``text`` (C/C++/CUDA) with the lines of conditional blocks that are certainly compiled out blanked
    (newlines kept, so offsets and line numbers stay): ``#if 0``, ``#ifndef X`` / ``#if !defined(X)`` where
    ``X`` is defined (``defined``: the ``-D`` names of the build, and the file's own ``#define``s above the
    test, less its ``#undef``s), their ``#else`` where the test certainly holds, and so on through
    ``#elif``. A test the reader cannot decide (``#ifdef X`` with ``X`` not known, an expression) keeps
    both branches, as before: a launch is never dropped on a guess.

    >>> inactive_blanked('#define BF16\\n#ifndef BF16\\nk<<<1, 1>>>();\\n#endif\\n')
    '#define BF16\\n#ifndef BF16\\n\\n#endif\\n'
    """
    if "#" not in text:
        return text
    names = set(defined)
    # frames: (this branch's state: "live" | "dead" | "unknown", some earlier branch certainly taken, any unknown)
    stack: list[list] = []
    out: list[str] = []
    lines = text.split("\n")

    def test(kind: str, arg: str) -> str:
        arg = arg.split("//")[0].split("/*")[0].strip()
        if kind == "ifdef" or kind == "ifndef":
            name = arg.split()[0] if arg.split() else ""
            if name in names:
                return "live" if kind == "ifdef" else "dead"
            return "unknown"
        if arg in ("0", "(0)"):
            return "dead"
        if arg in ("1", "(1)"):
            return "live"
        m = _DEFINED.match(arg)
        if m and m.group(1) in names:
            return "dead" if arg.startswith("!") else "live"
        return "unknown"

    for line in lines:
        m = re.match(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$", line)
        dead_now = any(f[0] == "dead" for f in stack)
        if m:
            kind, arg = m.group(1), m.group(2)
            if kind in ("if", "ifdef", "ifndef"):
                state = test(kind, arg)
                stack.append([state, state == "live", state == "unknown"])
            elif kind == "elif" and stack:
                f = stack[-1]
                if f[1]:
                    f[0] = "dead"
                else:
                    state = test("if", arg)
                    f[0] = "unknown" if (state == "live" and f[2]) else state
                    f[1] = f[1] or (state == "live" and not f[2])
                    f[2] = f[2] or state == "unknown"
            elif kind == "else" and stack:
                f = stack[-1]
                f[0] = "dead" if f[1] else ("unknown" if f[2] or f[0] == "unknown" else "live")
                f[1] = True
            elif kind == "endif" and stack:
                stack.pop()
            elif kind in ("define", "undef") and not dead_now:
                name = arg.split("(")[0].split()[0] if arg.split() else ""
                if kind == "define":
                    names.add(name)
                else:
                    names.discard(name)
            out.append(line)
            continue
        out.append("" if dead_now else line)
    return "\n".join(out)


def flag_defines(flags: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The names ``-D`` options of a compiler command line define (``-DENABLE_BF16``, ``-D N=4``, ``--define-macro=X``)."""
    out: set[str] = set()
    it = iter(flags)
    for f in it:
        value = None
        if f in ("-D", "--define-macro"):
            value = next(it, "")
        elif f.startswith("--define-macro="):
            value = f.split("=", 1)[1]
        elif f.startswith("-D"):
            value = f[2:]
        if value:
            out.add(value.split("=", 1)[0].strip())
    return frozenset(out)

