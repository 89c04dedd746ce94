"""Tail paths in kernel code that a fixed dim hides: ``H % 4`` tests and ``for (...; j < H; j += 128)``
loops over a scalar argument the contracts bind to a fixed dim.

A kernel usually takes a "fixed" width as an argument and has code for every value of it: a float4 path
chosen by ``H % 4 == 0`` and a scalar one for the rest, a loop over chunks of ``kBN`` whose last chunk is
partial. When the contracts fix ``H = 128``, every verification runs one side only, so a bug on the
other side (and every mutant there) is invisible until someone changes the width. This module finds those
sites in a source (and, by the caller, the local headers it includes) from its tokens: the divisor or step
must be an integer literal or a named integer constant the file or its headers define.

>>> src = "if (H % 4 == 0) {}\\nfor (int j = 0; j < H; j += kBN) {}\\nfor (int i = tid % 2; i < H; i += 2) {}"
>>> [(h.name, h.divisor, h.line, h.text) for h in fixed_dim_tails(src, {"H"}, {"kBN": 128})]
[('H', 4, 1, 'H % 4'), ('H', 128, 2, 'j < H; j += kBN')]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from .tokens import Token, tokenize


@dataclass(frozen=True)
class FixedTail:
    """One site: ``name`` (the argument) is divided by ``divisor`` (``H % 4``) or stepped through in
    chunks of it (``j < H; j += 128``), at ``line`` of the file; ``text`` quotes it."""

    name: str
    divisor: int
    line: int
    text: str


def _value(tok: Token, constants: Mapping[str, int]) -> int | None:
    if tok.kind == "number":
        digits = tok.text.rstrip("uUlL")
        try:
            return int(digits, 0) if len(digits) <= 20 else None
        except ValueError:
            return None
    if tok.kind == "ident":
        return constants.get(tok.text)
    return None


def fixed_dim_tails(text: str, names: Collection[str] | None, constants: Mapping[str, int]) -> list[FixedTail]:
    """The ``name % C`` and ``v < name; v += C`` sites of ``text`` for the identifiers in ``names`` (every
    identifier when None), with ``C > 1`` a literal or one of ``constants``; raises TokenizeError on text
    the tokenizer rejects."""
    toks = tokenize(text)
    out: list[FixedTail] = []
    for i, t in enumerate(toks):
        if t.kind != "ident" or (names is not None and t.text not in names):
            continue
        # name % C (not part of a longer product such as a->H or x.H)
        prev = toks[i - 1].text if i else ""
        if prev in (".", "->", "::"):
            continue
        if i + 2 < len(toks) and toks[i + 1].text == "%":
            c = _value(toks[i + 2], constants)
            if c is not None and c > 1:
                out.append(FixedTail(t.text, c, t.line, f"{t.text} % {toks[i + 2].text}"))
        # for (...; v < name; v += C)   (also <=)
        if i >= 2 and toks[i - 1].text in ("<", "<=") and toks[i - 2].kind == "ident" and i + 5 < len(toks) and toks[i + 1].text == ";":
            v = toks[i - 2].text
            before = toks[i - 3].text if i >= 3 else ""
            inc = toks[i + 2 : i + 5]
            # a chunk loop from 0 (``for (int n0 = 0; n0 < H; n0 += kBN)``): its last chunk is partial when
            # H % C != 0; a thread-strided loop (``j = tid % 2``) only moves which thread runs the last step
            init = [x.text for x in toks[max(0, i - 7) : i - 3]]
            from_zero = init[-3:] == [v, "=", "0"]
            if before == ";" and from_zero and inc[0].text == v and inc[1].text == "+=" and toks[i + 5].text == ")":
                c = _value(inc[2], constants)
                if c is not None and c > 1:
                    out.append(FixedTail(t.text, c, t.line, f"{v} {toks[i - 1].text} {t.text}; {v} += {inc[2].text}"))
    return out
