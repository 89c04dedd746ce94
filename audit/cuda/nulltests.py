"""Where a kernel tests a pointer parameter against NULL: the code it runs for a pointer the host may leave out.

A kernel written to take an optional buffer says so in its body: ``if (mean != nullptr)``, ``bias ? bias[o] :
0.f``, ``if (!dW_partial) return;``. A contract that does not declare such a parameter ``optional`` has
``wireup verify`` pass a buffer every time and the block runs take it as given, so the kernel's code for the
NULL pointer never runs under either (OPTIONAL_UNDECLARED says so; ``wireup init`` scaffolds ``optional =
true`` from the same reading).

Read from the entry's own body (the parameter's name is the entry's): a comparison with ``nullptr``,
``NULL`` or ``0`` (either side, ``==`` or ``!=``), a logical not (``!p``), or the pointer alone as a
condition (``if (p)``, ``while (p)``, ``p && ...``, ``... || p``, ``p ? a : b``). A pointer passed on to a
device function that tests it there is not followed; a member (``s.p``, ``s->p``) or a local that shadows
the parameter after its declaration is not the parameter.

>>> src = Source.parse("__global__ void k(float* y, const float* b, int n) {\\n"
...                    "  float v = b ? b[0] : 0.f;\\n  if (y != nullptr) y[0] = v; }")
>>> [(t.param, t.index, t.line, t.text) for t in null_tests({None: src}, None, src.entry("k"))]
[('b', 1, 2, 'b ? ... : ...'), ('y', 0, 3, 'y != nullptr')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from .scope import Function, Source

K = TypeVar("K")

_NULLS = frozenset({"nullptr", "NULL", "0", "0L", "0l", "0LL", "0ll", "0u", "0U", "0ul", "0UL", "0ull", "0ULL"})
#: what may precede a pointer that stands alone as a condition (``if (p``, ``&& p``, ``= p ?`` ...)
_COND_BEFORE = frozenset({"(", "&&", "||", "!", "?", ":", "=", ",", "return"})
#: what may follow it (``p)``, ``p &&``, ``p ?`` ...)
_COND_AFTER = frozenset({")", "&&", "||", "?"})


@dataclass(frozen=True)
class NullTest:
    """A test against NULL of the entry's pointer parameter ``param`` (at ``index`` in its signature): in
    file ``file`` (the key of the sources it was read from) at ``line``, in function ``function`` (the entry's
    own name, or a device function the pointer was passed on to, there named ``local``)."""

    param: str
    index: int
    line: int
    text: str  # the test as written ("mean != nullptr", "!p", "if (p)", "b ? ... : ...", "p && ...")
    file: Any = None
    function: str = ""
    local: str = ""


def signature_names(src: Source, fn: Function) -> list[str | None]:
    """The names of ``fn``'s parameters, in order (None for an unnamed one); empty when its parameter
    list is not found (or is ``(void)``)."""
    return [_param_name(words) for words in _parameters(src, fn)]


def _pointers(src: Source, fn: Function) -> set[int]:
    """The positions of ``fn``'s parameters declared as pointers (a ``*`` among their words, or ``[]``)."""
    return {n for n, words in enumerate(_parameters(src, fn)) if "*" in words or words[-2:] == ["[", "]"]}


def _parameters(src: Source, fn: Function) -> list[list[str]]:
    """The token texts of each of ``fn``'s parameters (the list before its body), in order; empty when the
    list is not found or is empty."""
    toks = src.tokens
    j = fn.open - 1
    while j >= 0 and toks[j].text != ")":
        j -= 1
    if j < 0 or j not in src.match or j - src.match[j] <= 1:
        return []
    return _split_args(src, src.match[j], j)


def _split_args(src: Source, open_at: int, close_at: int) -> list[list[str]]:
    """The comma-separated parts between the parentheses at ``open_at`` and ``close_at``, each as its token
    texts (commas inside (), [], {} or a template's <> do not split)."""
    parts: list[list[str]] = [[]]
    depth = 0
    for i in range(open_at + 1, close_at):
        t = src.tokens[i]
        if t.kind == "punct" and (t.text in "([{" or t.text == "<" and i in src.template_brackets):
            depth += 1
        elif t.kind == "punct" and (t.text in ")]}" or t.text == ">" and i in src.template_brackets):
            depth -= 1
        elif t.text == "," and depth == 0:
            parts.append([])
            continue
        parts[-1].append(t.text)
    return parts


def _param_name(words: list[str]) -> str | None:
    if words == ["void"]:
        return None
    if "=" in words:  # a default argument
        words = words[: words.index("=")]
    if words and words[-1] == "]" and "[" in words:  # an array parameter (float x[4]): its name is before the brackets
        words = words[: words.index("[")]
    last = words[-1] if words else ""
    return last if last.isidentifier() and len(words) > 1 and last not in ("const", "__restrict__", "restrict", "volatile") else None


def null_tests(files: dict[K, Source], own: K, entry: Function | None, depth: int = 4) -> list[NullTest]:
    """Every test of one of ``entry``'s pointer parameters (``entry`` a function of ``files[own]``) against NULL, in
    its own body and in the bodies of the device functions of ``files`` it passes the pointer on to as a
    whole argument (``f(p, n)``, ``f<true>(p)``: the callee's parameter of that position, by name and arity,
    up to ``depth`` calls deep), in the order found; one per parameter, file and line."""
    if entry is None or entry.close <= entry.open:
        return []
    names = signature_names(files[own], entry)
    pointers = _pointers(files[own], entry)
    by_name: dict[str, list[tuple[K, Function]]] = {}
    for key, src in files.items():
        for f in src.functions:
            if f.close > f.open and not f.is_global:
                by_name.setdefault(f.name, []).append((key, f))
    out: list[NullTest] = []
    seen: set[tuple[str, Any, int]] = set()
    visited: set[tuple[Any, int, tuple]] = set()
    todo = [(own, entry, {n: (n, i) for i, n in enumerate(names) if n and i in pointers}, depth)]
    while todo:
        key, fn, alias, left = todo.pop(0)
        mark = (key, fn.open, tuple(sorted(alias.items())))
        if mark in visited:
            continue
        visited.add(mark)
        src = files[key]
        for t, line, text in _tests(src, fn, alias):
            param, index = alias[t]
            if (param, key, line) not in seen:
                seen.add((param, key, line))
                out.append(NullTest(param, index, line, text, key, fn.name, "" if t == param else t))
        if left <= 0:
            continue
        for callee, args in _calls(src, fn, by_name.keys()):
            passed = {pos: alias[a[0]] for pos, a in enumerate(args) if len(a) == 1 and a[0] in alias}
            if not passed:
                continue
            for q, g in by_name[callee]:
                gnames = signature_names(files[q], g)
                if len(gnames) != len(args):
                    continue  # another overload (or a default argument left out: not followed)
                galias = {gnames[pos]: v for pos, v in passed.items() if gnames[pos]}
                if galias:
                    todo.append((q, g, galias, left - 1))
    return out


def _calls(src: Source, fn: Function, names) -> list[tuple[str, list[list[str]]]]:
    """The calls in ``fn``'s body of a function named in ``names``: (its name, its arguments' tokens)."""
    toks = src.tokens
    out = []
    for i in range(fn.open + 1, fn.close):
        t = toks[i]
        if t.kind != "ident" or t.text not in names or toks[i - 1].text in (".", "->"):
            continue
        k = i + 1
        if k < fn.close and toks[k].text == "<" and k in src.template_brackets:  # f<true>(...)
            depth = 0
            while k < fn.close:
                if toks[k].text == "<" and k in src.template_brackets:
                    depth += 1
                elif toks[k].text == ">" and k in src.template_brackets:
                    depth -= 1
                    if depth == 0:
                        break
                elif toks[k].text == ">>" and depth <= 2:
                    depth -= 2
                    if depth <= 0:
                        break
                k += 1
            k += 1
        if k < fn.close and toks[k].text == "(" and k in src.match:
            out.append((t.text, _split_args(src, k, src.match[k])))
    return out


def _tests(src: Source, fn: Function, alias) -> list[tuple[str, int, str]]:
    """(name, line, the test as written) for each test against NULL of a name in ``alias`` in ``fn``'s body."""
    toks = src.tokens
    out: list[tuple[str, int, str]] = []
    shadowed: set[str] = set()
    for i in range(fn.open + 1, fn.close):
        t = toks[i]
        if t.kind != "ident" or t.text not in alias or t.text in shadowed:
            continue
        prev = toks[i - 1].text if i - 1 > fn.open else ""
        nxt = toks[i + 1].text if i + 1 < fn.close else ""
        if prev in (".", "->", "::"):
            continue  # a member of the same name
        if _declares(toks, i, fn.open):
            shadowed.add(t.text)  # a local of the same name from here on (float* y = ...;)
            continue
        text = None
        if nxt in ("==", "!=") and i + 2 < fn.close and toks[i + 2].text in _NULLS:
            text = f"{t.text} {nxt} {toks[i + 2].text}"
        elif prev in ("==", "!=") and i - 2 > fn.open and toks[i - 2].text in _NULLS:
            text = f"{toks[i - 2].text} {prev} {t.text}"
        elif prev == "!" and nxt in _COND_AFTER | {";", ","}:
            text = f"!{t.text}"
        elif prev in _COND_BEFORE and nxt in _COND_AFTER and prev != "!" and (nxt != ")" or _condition(src, i)):
            if nxt == "?":
                text = f"{t.text} ? ... : ..."
            elif nxt in ("&&", "||"):
                text = f"{t.text} {nxt} ..."
            elif prev in ("&&", "||"):
                text = f"... {prev} {t.text}"
            else:  # if (p), while (p)
                text = f"{toks[i - 2].text} ({t.text})" if toks[i - 2].text in ("if", "while") else f"({t.text})"
        if text is not None and not _asserted(toks, i, fn.open):  # assert(p != nullptr): NULL traps, it is not taken
            out.append((t.text, t.line, text))
    return out


def _condition(src: Source, i: int) -> bool:
    """Whether the name at ``i``, followed by ``)``, is a condition of its own: ``if (p)``, ``while (p)``,
    ``(... && p)``, ``(... || p)`` (not a call's last argument, ``f(a, p)``, or a cast's operand)."""
    toks = src.tokens
    prev = toks[i - 1].text
    if prev in ("&&", "||"):
        return True
    if prev != "(":
        return False
    k = i - 1
    before = toks[k - 1].text if k > 0 else ""
    return before in ("if", "while", "!", "&&", "||")


def _asserted(toks, i: int, start: int) -> bool:
    """Whether the token at ``i`` is inside the parentheses of an ``assert(...)`` (back to its statement's start)."""
    depth = 0
    for j in range(i - 1, start, -1):
        text = toks[j].text
        if text in (";", "{", "}"):
            return False
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0 and j > start and toks[j - 1].text in ("assert", "static_assert", "CUDA_KERNEL_ASSERT"):
                return True
            depth = max(depth - 1, 0)
    return False


_KEYWORDS = frozenset({"return", "case", "goto", "else", "do", "throw", "delete", "new", "sizeof", "co_return"})


def _declares(toks, i: int, start: int) -> bool:
    """Whether the name at ``i`` is declared there: a type (or ``*``/``&`` after one) before it and ``=``,
    ``;``, ``,``, ``(``, ``{`` or ``[`` after it, at the start of a statement."""
    if i + 1 >= len(toks) or toks[i + 1].text not in ("=", ";", ",", "[", "{"):
        return False
    j = i - 1
    while j > start and toks[j].text in ("*", "&", "const", "__restrict__", "volatile"):
        j -= 1
    if toks[j].kind != "ident" or toks[j].text in _KEYWORDS:
        return False
    while j > start and (toks[j].kind == "ident" or toks[j].text in ("::", "<", ">", "*", "&")):
        j -= 1
    return toks[j].text in (";", "{", "}", "(", ")") or j <= start
