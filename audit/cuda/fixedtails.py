"""Tail paths in kernel code that a fixed dim hides: ``H % 4`` tests and ``for (...; j < H; j += 128)``
loops over a scalar argument the contracts bind to a fixed dim.

A kernel usually takes a "fixed" width as an argument and has code for every value of it: a float4 path
chosen by ``H % 4 == 0`` and a scalar one for the rest, a loop over chunks of ``kBN`` whose last chunk is
partial, and whose second chunk runs only when ``H > kBN``. When the contracts fix ``H = 128``, every
verification runs one side only, so a bug on the other side (and every mutant there) is invisible until
someone changes the width. This module finds those sites in a source (and, by the caller, the local
headers it includes) from its tokens: the divisor or step must be an integer literal, a named integer
constant the file or its headers define, a product or sum of those (``4 * kQuads``), or such a multiple
of the block's x extent (``blockDim.x``, or a local ``nt`` initialised from it), which the caller knows
from the launches.

>>> src = "if (H % 4 == 0) {}\\nfor (int j = 0; j < H; j += kBN) {}\\nfor (int i = tid % 2; i < H; i += 2) {}"
>>> [(h.name, h.divisor, h.line, h.text) for h in fixed_dim_tails(src, {"H"}, {"kBN": 128})]
[('H', 4, 1, 'H % 4'), ('H', 128, 2, 'j < H; j += kBN')]
>>> src = "const int nt = blockDim.x;\\nfor (int j0 = 0; j0 < H; j0 += nt) {}\\nfor (int i = 0; i < S; i += 4 * kQ) {}"
>>> [(h.name, h.divisor, h.per_block, h.loop) for h in fixed_dim_tails(src, None, {"kQ": 64})]
[('H', 1, True, True), ('S', 256, False, True)]
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
    loop: bool = False  # a chunk loop (its chunks: ``divisor``), not a ``%`` test
    per_block: bool = False  # the divisor counts blocks' x extents (``j0 += 2 * blockDim.x``)
    compare: str = ""  # a comparison with a constant (``K <= AUX_K_MAX``: "<="; ``divisor``: the constant)


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


_COMPARE = ("<", "<=", ">", ">=", "==", "!=")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
# an operand next to one of these is part of a larger expression (``K * 4 <= C``, ``C <= K + 1``,
# ``x.K``, ``C <= f(K)``): not judged
_BINDS_TIGHTER = ("*", "/", "%", "+", "-", "<<", ">>", ".", "->", "::", "!", "~", "&", "|", "^")
_CALLS = ("(", "[")


def _step(toks: list[Token], constants: Mapping[str, int], block: frozenset[str]) -> tuple[int, bool] | None:
    """The value of a loop step's tokens as ``(c, per_block)`` (``c`` or ``c * blockDim.x``), or None
    for anything but products and sums of integer constants, with at most one block-extent factor."""
    pos = 0

    def atom() -> tuple[int, int] | None:
        nonlocal pos
        if pos >= len(toks):
            return None
        t = toks[pos]
        if t.text == "(":
            pos += 1
            v = expr()
            if v is None or pos >= len(toks) or toks[pos].text != ")":
                return None
            pos += 1
            return v
        if t.text == "blockDim" and pos + 2 < len(toks) and toks[pos + 1].text == "." and toks[pos + 2].text == "x":
            pos += 3
            return (1, 1)
        if t.kind == "ident" and t.text in block:
            pos += 1
            return (1, 1)
        c = _value(t, constants)
        if c is None:
            return None
        pos += 1
        return (c, 0)

    def term() -> tuple[int, int] | None:
        nonlocal pos
        v = atom()
        while v is not None and pos < len(toks) and toks[pos].text == "*":
            pos += 1
            w = atom()
            if w is None or v[1] + w[1] > 1:
                return None
            v = (v[0] * w[0], v[1] + w[1])
        return v

    def expr() -> tuple[int, int] | None:
        nonlocal pos
        v = term()
        while v is not None and pos < len(toks) and toks[pos].text in ("+", "-"):
            sign = 1 if toks[pos].text == "+" else -1
            pos += 1
            w = term()
            if w is None or v[1] or w[1]:  # a sum with a block extent is no fixed multiple of it
                return None
            v = (v[0] + sign * w[0], 0)
        return v

    got = expr()
    if got is None or pos != len(toks) or abs(got[0]) > 1 << 40:
        return None
    return got[0], bool(got[1])


def _block_aliases(toks: list[Token]) -> frozenset[str]:
    """Identifiers initialised from ``blockDim.x`` alone (``const int nt = blockDim.x;``)."""
    out = set()
    for i in range(1, len(toks) - 5):
        if toks[i].text == "=" and toks[i - 1].kind == "ident" and [t.text for t in toks[i + 1 : i + 5]] == ["blockDim", ".", "x", ";"]:
            out.add(toks[i - 1].text)
    return frozenset(out)


def fixed_dim_tails(text: str, names: Collection[str] | None, constants: Mapping[str, int]) -> list[FixedTail]:
    """The ``name % C`` and ``v < name; v += C`` sites of ``text`` for the identifiers in ``names`` (every
    identifier when None), with ``C > 1`` a literal or one of ``constants``; raises TokenizeError on text
    the tokenizer rejects."""
    toks = tokenize(text)
    out: list[FixedTail] = []
    block: frozenset[str] | None = None  # the block-extent aliases, found at the first loop
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
        # name <op> C, or C <op> name: a comparison with a constant (not a loop bound ``v < name``)
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        if nxt in _COMPARE and i + 2 < len(toks):
            after = toks[i + 3].text if i + 3 < len(toks) else ""
            c = _value(toks[i + 2], constants)
            if c is not None and after not in _BINDS_TIGHTER + _CALLS and prev not in _BINDS_TIGHTER:
                out.append(FixedTail(t.text, c, t.line, f"{t.text} {nxt} {toks[i + 2].text}", compare=nxt))
        elif prev in _COMPARE and i >= 2 and nxt not in _BINDS_TIGHTER:
            before2 = toks[i - 3].text if i >= 3 else ""
            c = _value(toks[i - 2], constants)
            if c is not None and before2 not in _BINDS_TIGHTER:
                out.append(FixedTail(t.text, c, t.line, f"{toks[i - 2].text} {prev} {t.text}", compare=_FLIP[prev]))
        # for (...; v < name; v += C)   (also <=)
        if i >= 2 and toks[i - 1].text in ("<", "<=") and toks[i - 2].kind == "ident" and i + 4 < len(toks) and toks[i + 1].text == ";":
            v = toks[i - 2].text
            before = toks[i - 3].text if i >= 3 else ""
            # a chunk loop from 0 (``for (int n0 = 0; n0 < H; n0 += kBN)``): its last chunk is partial when
            # H % C != 0, its second chunk runs when H > C; a thread-strided loop (``j = tid % 2``) only
            # moves which thread runs the last step
            init = [x.text for x in toks[max(0, i - 7) : i - 3]]
            from_zero = init[-3:] == [v, "=", "0"]
            if not (before == ";" and from_zero and toks[i + 2].text == v and toks[i + 3].text == "+="):
                continue
            depth, end = 0, None
            for j in range(i + 4, min(len(toks), i + 40)):
                if toks[j].text == "(":
                    depth += 1
                elif toks[j].text == ")":
                    if depth == 0:
                        end = j
                        break
                    depth -= 1
            if end is None or end == i + 4:
                continue
            if block is None:
                block = _block_aliases(toks)
            step = _step(toks[i + 4 : end], constants, block)
            if step is not None and (step[0] > 1 or (step[1] and step[0] >= 1)):
                shown = " ".join(x.text for x in toks[i + 4 : end]).replace(" . ", ".")
                out.append(FixedTail(t.text, step[0], t.line, f"{v} {toks[i - 1].text} {t.text}; {v} += {shown}", loop=True, per_block=step[1]))
    return out
