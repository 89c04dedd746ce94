"""Mutants of one kernel: generated deterministically from its source, each with a stable id, its
unified diff and the mutated source.

A mutant's id is ``<operator>:<line>:<column>:<ordinal>``: the operator, where the mutated token sits in
the original source, and its rank among the mutants that operator makes there (``const`` makes two per
literal: x10 is ordinal 0, /10 ordinal 1). The same source always gives the same mutants in the same
order. Two operators that would produce the same text keep only the first (in registry order).

>>> ms = mutants_of_source(Path("kernels/strided_gather_kernel.cu").read_text(), "strided_gather",
...                        "kernels/strided_gather_kernel.cu")                      # doctest: +SKIP
>>> ms[0].id, ms[0].summary                                                          # doctest: +SKIP
('aor:11:30:0', 'b = blockIdx.x * blockDim.x + threadIdx.x -> b = blockIdx.x / blockDim.x + threadIdx.x')
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ._operators import OPERATOR_MAP, OPERATORS, Context, Edit
from ..cuda.scope import Source


@dataclass(frozen=True)
class Mutant:
    """One mutation of one kernel's source (see the module docstring)."""

    kernel: str
    source: str  # the kernel's source file, relative to the project root
    operator: str
    line: int
    col: int
    ordinal: int
    what: str
    edits: tuple[Edit, ...]
    original: str  # the whole original source text
    mutated: str  # the whole mutated source text
    judged_by: tuple[str, ...] = ()  # a header mutant: every kernel that includes the header (empty: ``kernel`` itself)

    @property
    def kernels(self) -> tuple[str, ...]:
        """The kernels whose checks judge this mutant: those including its header, else its own kernel."""
        return self.judged_by or (self.kernel,)

    @property
    def is_header(self) -> bool:
        return bool(self.judged_by)

    @property
    def id(self) -> str:
        return f"{self.operator}:{self.line}:{self.col}:{self.ordinal}"

    @property
    def key(self) -> str:
        """Unique across kernels: ``<kernel>/<id>``."""
        return f"{self.kernel}/{self.id}"

    @property
    def file_stem(self) -> str:
        return f"{self.operator}-{self.line}-{self.col}-{self.ordinal}"

    @property
    def diff(self) -> str:
        """Unified diff of the original against the mutant (one line of context)."""
        lines = difflib.unified_diff(
            self.original.splitlines(keepends=True), self.mutated.splitlines(keepends=True),
            f"a/{self.source}", f"b/{self.source}", n=1,
        )  # fmt: skip
        return "".join(x if x.endswith("\n") else x + "\n" for x in lines)

    @property
    def before_after(self) -> tuple[str, str]:
        """The changed lines of the original and of the mutant, whitespace-trimmed and joined by one space:
        what an equivalence record quotes to show it still describes this mutant."""
        old = self.original.splitlines()
        new = self.mutated.splitlines()
        sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        a, b = [], []
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag != "equal":
                a += old[i1:i2]
                b += new[j1:j2]
        return " ".join(x.strip() for x in a if x.strip()), " ".join(x.strip() for x in b if x.strip())

    @property
    def summary(self) -> str:
        """``before -> after`` around the change, at most about 60 characters of each side.

        >>> m = Mutant("k", "k.cu", "aor", 1, 9, 0, "", (), "x = a + b;\n", "x = a - b;\n")
        >>> m.summary
        'x = a + b; -> x = a - b;'
        """
        a, b = self.before_after
        a, b = _window(a, b)
        return f"{a} -> {b or '(deleted)'}"


def _window(a: str, b: str, context: int = 24, width: int = 60) -> tuple[str, str]:
    """The two strings cut to their differing middle plus ``context`` characters either side."""
    if len(a) <= width and len(b) <= width:
        return a, b
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    lo = max(0, p - context)

    def cut(x: str) -> str:
        hi = min(len(x), max(len(x) - s + context, lo + 1))
        out = x[lo:hi]
        if len(out) > width + 2 * context:
            out = out[: width + 2 * context] + "..."
        return ("..." if lo > 0 else "") + out + ("..." if hi < len(x) else "")

    return cut(a), cut(b)


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    out = text
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        out = out[: e.start] + e.text + out[e.end :]
    return out


def mutants_of_source(
    text: str,
    symbol: str,
    source: str,
    kernel: str | None = None,
    operators: Sequence[str] | None = None,
    runtime_dims: Sequence[str] = ("B",),
) -> list[Mutant]:
    """Every mutant of the entry ``symbol`` in ``text`` (and of what it reaches in the same file), in
    source order; ``operators`` restricts them to those operator ids."""
    src = Source.parse(text)
    entry = src.entry(symbol)
    if entry is None:
        check_operators(operators)
        return []
    params = _entry_params(src, entry)
    ctx = Context(src, src.body_indices(symbol), tuple(runtime_dims), frozenset(params))
    return mutants_in(text, ctx, kernel or symbol, source, operators)


def mutants_in(text: str, ctx: Context, kernel: str, source: str, operators: Sequence[str] | None = None,
               judged_by: tuple[str, ...] = ()) -> list[Mutant]:  # fmt: skip
    """Every mutant the operators make at the mutable token indices of ``ctx``, in source order (a
    header's mutants carry ``judged_by``, the kernels including it)."""
    chosen = check_operators(operators)
    seen_texts = {text}
    out: list[Mutant] = []
    for op in OPERATORS:
        if op.id not in chosen:
            continue
        per_site: dict[tuple[int, int], int] = {}
        for site in op.sites(ctx):
            mutated = apply_edits(text, site.edits)
            pos = (site.token.line, site.token.col)
            ordinal = per_site.get(pos, 0)
            per_site[pos] = ordinal + 1
            if mutated in seen_texts:
                continue
            seen_texts.add(mutated)
            out.append(Mutant(kernel, source, op.id, pos[0], pos[1], ordinal, site.what, site.edits, text, mutated, judged_by))
    order = {op.id: n for n, op in enumerate(OPERATORS)}
    return sorted(out, key=lambda m: (m.line, m.col, order[m.operator], m.ordinal))


def _entry_params(src: Source, entry) -> list[str]:
    """Parameter names of the entry: the identifier before each top-level ``,`` or the closing ``)``."""
    toks = src.tokens
    k = entry.open - 1
    while k > 0 and toks[k].text != ")":
        k -= 1
    open_ = src.match.get(k)
    if open_ is None:
        return []
    names = []
    depth = 0
    for j in range(open_ + 1, k + 1):
        x = toks[j].text
        if x in ("(", "["):
            depth += 1
        elif x in (")", "]") and j != k:
            depth -= 1
        if depth == 0 and (x == "," or j == k) and toks[j - 1].kind == "ident":
            names.append(toks[j - 1].text)
    return names


def check_operators(operators: Sequence[str] | None) -> set[str]:
    """The operator ids to use; raises :class:`UsageError` naming the valid ones for an unknown id."""
    if not operators:
        return set(OPERATOR_MAP)
    unknown = [o for o in operators if o not in OPERATOR_MAP]
    if unknown:
        valid = ", ".join(f'"{o.id}"' for o in OPERATORS)
        raise UsageError(f'--operators "{unknown[0]}" is not a mutation operator; the operators are {valid}.')
    return set(operators)


def select_mutants(mutants: Sequence[Mutant], cap: int | None) -> list[Mutant]:
    """At most ``cap`` mutants, chosen deterministically: operators take turns (registry order), each
    contributing its next mutant in an order fixed by a hash of the mutant's key, so every operator that
    applies is represented and the picks spread over the source. Returned in source order.

    >>> select_mutants([], 3)
    []
    """
    if cap is None or cap >= len(mutants):
        return list(mutants)
    by_op: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_op.setdefault(m.operator, []).append(m)
    for ms in by_op.values():
        ms.sort(key=lambda m: hashlib.sha256(m.key.encode()).hexdigest())
    picked: list[Mutant] = []
    queues = [by_op[op.id] for op in OPERATORS if op.id in by_op]
    while len(picked) < cap and any(queues):
        for q in queues:
            if q and len(picked) < cap:
                picked.append(q.pop(0))
    keep = {m.key for m in picked}
    return [m for m in mutants if m.key in keep]
