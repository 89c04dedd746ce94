"""A subject's GPU evidence as a matrix: checks x sizes, each cell the worst of the check's cases there.

An evidence record lists one outcome per check per case, the case named by its size string
(``B=37 (K=2, all-skip)``). :func:`split_case` cuts that into a sizes column (``B=37``) and the case at
that size (``K=2, all-skip``); :func:`check_matrix` folds the outcomes into one row per check and one
column per size, and keeps every outcome, by check and case, for the folded table below it.

>>> m = check_matrix([CheckRow("finite", "pass", "B=37", None, None, None, "no NaN/Inf")])
>>> m.columns, [c.state for c in m.rows[0].cells]
(['B=37'], ['pass'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .views import CaseRow, CheckMatrix, CheckRow, MatrixCell, MatrixRow

_SIZE_COLUMN = re.compile(r"\w+=[^\s,()]+(?:[ ,]\w+=[^\s,()]+)*")  # a case of several dims is one column


def split_case(size: str) -> tuple[str, str]:
    """A recorded size as (its sizes column, the rest: the case at that size).

    >>> split_case("B=37 (K=2, all-skip)"), split_case("B=1 (K=2), optional pointers NULL")
    (('B=37', 'K=2, all-skip'), ('B=1', '(K=2), optional pointers NULL'))
    >>> split_case("B=4096"), split_case("B=1, optional pointers NULL"), split_case("whole chain")
    (('B=4096', ''), ('B=1', 'optional pointers NULL'), ('whole chain', ''))
    >>> split_case("B=4,T=17 (all-skip)"), split_case("B=4,T=17, optional pointers NULL")
    (('B=4,T=17', 'all-skip'), ('B=4,T=17', 'optional pointers NULL'))
    """
    m = _SIZE_COLUMN.match(size)
    if m is None:
        return size, ""
    rest = size[m.end():].lstrip(",").strip()
    if rest.startswith("(") and rest.endswith(")") and "(" not in rest[1:-1] and ")" not in rest[1:-1]:
        rest = rest[1:-1]
    return m.group(0), rest


def _column_key(column: str) -> tuple:
    """Sizes in natural order (B=1, B=16, B=37, B=300), text without numbers after them."""
    parts = re.split(r"(\d+)", column)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def check_matrix(checks: Sequence[CheckRow]) -> CheckMatrix | None:
    """Checks x sizes, each cell the worst outcome of the check's cases at that size; and every outcome
    by check, case and size. Rows keep the order in which the record first names a check or case."""
    if not checks:
        return None
    columns = sorted({split_case(c.size)[0] for c in checks}, key=_column_key)
    col = {c: i for i, c in enumerate(columns)}
    by_check: dict[str, list[list[CheckRow]]] = {}
    by_case: dict[tuple[str, str], list[list[CheckRow]]] = {}
    for c in checks:
        column, case = split_case(c.size)
        by_check.setdefault(c.name, [[] for _ in columns])[col[column]].append(c)
        by_case.setdefault((c.name, case), [[] for _ in columns])[col[column]].append(c)
    rows = [MatrixRow(name, [_fold(cell) for cell in cells]) for name, cells in by_check.items()]
    cases = []
    for (name, case), cells in by_case.items():
        details: dict[str, int] = {}
        for c in (c for cell in cells for c in cell):
            details[c.detail] = details.get(c.detail, 0) + 1
        common = max(details, key=lambda d: details[d])  # the first of the most frequent
        cases.append(CaseRow(name, case, cells, common))
    failed = sum(1 for c in checks if c.verdict == "fail")
    not_run = sum(1 for c in checks if c.verdict not in ("pass", "fail"))
    return CheckMatrix(columns, rows, cases, len(checks), failed, not_run)


def _fold(outcomes: list[CheckRow]) -> MatrixCell:
    if not outcomes:
        return MatrixCell("")
    failed = sum(1 for c in outcomes if c.verdict == "fail")
    not_run = sum(1 for c in outcomes if c.verdict not in ("pass", "fail"))
    errors = [c.rel_norm_err for c in outcomes if c.rel_norm_err is not None]
    if failed:
        state = "fail"
    elif not_run:
        state = "not_run" if not_run == len(outcomes) else "mixed"
    else:
        state = "pass"
    return MatrixCell(state, len(outcomes), failed, not_run, max(errors) if errors else None)
