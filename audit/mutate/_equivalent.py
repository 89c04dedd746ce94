"""Equivalence records: surviving mutants a human has shown to compute what the original computes.

A survivor is either a missing check or an equivalent mutant, and only a person can tell which. The
proof goes into a checked-in TOML file, one ``[[equivalent]]`` table per mutant::

    [[equivalent]]
    kernel = "aux_trade_outcome_backward"
    id = "guard:101:9:0"
    code = "if (vec) {"
    reason = "Deleting the float4 branch runs the scalar branch, which computes the same dh ..."

``code`` is the original source line at the mutant's line, whitespace-trimmed. It ties the record to
the code it argues about: when the kernel is edited and the id now names another change (or nothing),
the record is *stale*, reported, and the survivor counts as unclassified again. Code that no launch the
contracts admit ever runs (a fallback path for other dims) is recorded once for a range of lines:
``lines = [156, 184]`` instead of ``id``, with ``code`` quoting the first line of the range. The default file is
``audit/mutate/equivalent.toml`` (the shipped kernels' records); ``wireup mutate --equivalent FILE``
reads another one. See docs/mutation.md.

>>> recs = parse_records('[[equivalent]]\\nkernel = "k"\\nid = "ror:3:9:0"\\ncode = "x"\\nreason = "r"\\n', "e.toml")
>>> recs[0].id, recs[0].line
('ror:3:9:0', 1)
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._tomlpos import line_of, locate_lines
from ..errors import UsageError
from ._mutants import Mutant

DEFAULT_FILE = Path(__file__).with_name("equivalent.toml")
_KEYS = ("kernel", "code", "reason")
_KEY_HELP = '"kernel", "id" (e.g. "ror:58:22:0") or "lines" ([first, last]), "code" (the original line, trimmed) and "reason"'


@dataclass(frozen=True)
class EquivalenceRecord:
    """One ``[[equivalent]]`` table: which mutant, the line it changes, why it is equivalent."""

    kernel: str
    id: str  # "" for a range record
    code: str
    reason: str
    file: str = ""
    line: int | None = None
    lines: tuple[int, int] | None = None  # a range record: every mutant on these source lines

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def label(self) -> str:
        return self.id or f"lines {self.lines[0]}-{self.lines[1]}"

    def covers(self, m: Mutant) -> bool:
        if self.lines is not None:
            return self.lines[0] <= m.line <= self.lines[1]
        return m.id == self.id


@dataclass(frozen=True)
class Classification:
    """How one survivor is classified: equivalent (with the record's reason) or not."""

    equivalent: bool
    reason: str


def load_records(path: Path, name: str | None = None) -> list[EquivalenceRecord]:
    """The records of ``path``; a missing file has none. Raises :class:`UsageError` (file and line) for a
    file that is not TOML or a record without a required string key. ``name`` is how messages name the
    file (default: ``path`` as given)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UsageError(f'The equivalence file "{path}" cannot be read ({exc.strerror}).') from None
    return parse_records(text, name or str(path))


def parse_records(text: str, name: str) -> list[EquivalenceRecord]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f'{name}: not valid TOML ({exc}).') from None
    lines = None
    unknown = [k for k in data if k != "equivalent"]
    if unknown:
        lines = locate_lines(text)
        raise UsageError(f'{name}:{line_of(lines, (unknown[0],)) or 1}: unknown key "{unknown[0]}"; the file holds only [[equivalent]] tables.')
    tables = data.get("equivalent", [])
    if not isinstance(tables, list):
        raise UsageError(f'{name}: "equivalent" must be an array of tables ([[equivalent]]).')
    out = []
    for n, t in enumerate(tables):
        lines = lines or locate_lines(text)
        where = line_of(lines, ("equivalent", n))
        for key in _KEYS:
            if not isinstance(t.get(key), str) or not t[key].strip():
                raise UsageError(f'{name}:{where}: equivalent[{n}] needs a non-empty string "{key}"; the keys are {_KEY_HELP}.')
        extra = [k for k in t if k not in (*_KEYS, "id", "lines")]
        if extra:
            raise UsageError(f'{name}:{where}: equivalent[{n}] has unknown key "{extra[0]}"; the keys are {_KEY_HELP}.')
        rid, span = t.get("id"), t.get("lines")
        if (rid is None) == (span is None):
            raise UsageError(f'{name}:{where}: equivalent[{n}] needs exactly one of "id" and "lines"; the keys are {_KEY_HELP}.')
        if rid is not None and (not isinstance(rid, str) or rid.count(":") != 3):
            raise UsageError(f'{name}:{where}: equivalent[{n}] has id {rid!r}; a mutant id reads "<operator>:<line>:<column>:<ordinal>", e.g. "ror:58:22:0".')
        if span is not None and not (isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) and x > 0 for x in span) and span[0] <= span[1]):
            raise UsageError(f'{name}:{where}: equivalent[{n}] has lines {span!r}; expected [first, last] with 0 < first <= last.')
        out.append(EquivalenceRecord(t["kernel"], rid or "", t["code"].strip(), t["reason"].strip(), name, where, tuple(span) if span else None))
    return out


def source_line(m: Mutant) -> str:
    """The original line the mutant's id points at, trimmed (what a record's ``code`` must equal)."""
    lines = m.original.splitlines()
    return lines[m.line - 1].strip() if 0 < m.line <= len(lines) else ""


def match_records(kernel: str, mutants: Sequence[Mutant], records: Sequence[EquivalenceRecord]) -> tuple[dict[str, EquivalenceRecord], list[str]]:
    """Mutant id -> the record of ``kernel`` that still describes it (checked against ``code``), and one
    sentence per stale record. An id record wins over a range record covering the same mutant."""
    by_id = {m.id: m for m in mutants}
    text = mutants[0].original.splitlines() if mutants else []
    matched: dict[str, EquivalenceRecord] = {}
    stale: list[str] = []
    for r in sorted((r for r in records if r.kernel == kernel), key=lambda r: r.lines is None):
        if r.lines is not None:
            first = text[r.lines[0] - 1].strip() if r.lines[0] <= len(text) else None
            if first != r.code:
                now = f'line {r.lines[0]} now reads "{first}"' if first is not None else f"the source has only {len(text)} lines"
                stale.append(f'{r.where}: equivalence record for lines {r.lines[0]}-{r.lines[1]} of kernel "{kernel}" quotes "{r.code}" but {now}; the source changed, so the record is ignored until it is re-checked.')
                continue
            for m in mutants:
                if r.covers(m):
                    matched[m.id] = r
            continue
        m = by_id.get(r.id)
        if m is None:
            stale.append(f'{r.where}: equivalence record "{r.id}" of kernel "{kernel}" names no mutant of its current source; re-check it against `wireup mutate {kernel} --list`.')
        elif source_line(m) != r.code:
            stale.append(
                f'{r.where}: equivalence record "{r.id}" of kernel "{kernel}" quotes "{r.code}" but line {m.line} now reads '
                f'"{source_line(m)}"; the source changed, so the record is ignored until it is re-checked.'
            )
        else:
            matched[r.id] = r
    return matched, stale



def refuted_records(kernel: str, matched: dict[str, EquivalenceRecord], caught: dict[str, Sequence[str]]) -> list[str]:
    """One sentence per record that covers a mutant a run caught by running it: the record claimed that no
    launch the contracts admit tells the mutant apart, and a verify or sanitizer check found one (typically
    at a value a widened contract now verifies, such as a second value of a fixed dim; or MUTATE_UNSTABLE:
    other values under a sanitizer's timing). A mutant caught only by a static rule (a code pattern) or by
    MUTATE_SLOWDOWN (same results, more time) does not refute a record: it can compute the same values and
    still be flagged."""
    hits: dict[EquivalenceRecord, list[tuple[str, str]]] = {}
    for mid, rules in sorted(caught.items()):
        r = matched.get(mid)
        behavioural = [x for x in rules if x.startswith(("VERIFY_", "SANITIZER_")) or x == "MUTATE_UNSTABLE"]
        if r is not None and behavioural:
            hits.setdefault(r, []).append((mid, behavioural[0]))
    out = []
    for r, ms in sorted(hits.items(), key=lambda kv: (kv[0].line or 0, kv[0].label)):
        shown = ", ".join(f"{mid} ({rule})" for mid, rule in ms[:3]) + (f" and {len(ms) - 3} more" if len(ms) > 3 else "")
        out.append(f'{r.where}: equivalence record "{r.label}" of kernel "{kernel}" is refuted: the run caught {shown}, so its argument '
                   f"no longer holds (it relies on a value the verification no longer fixes); delete or narrow the record.")
    return out
