"""Formatting of values for the report's templates: numbers, marks and anchors.

Contract-provided text goes through the text filters of :mod:`audit.report.render` (``md`` for prose and
table cells, ``code`` for inline code, ``fence`` for blocks; HTML templates autoescape); numbers and marks
go through these (:func:`err`, :func:`errors`, :func:`format_bytes`, :func:`verdict_mark`,
:func:`cell_mark`), so a template never formats a value by hand.

>>> err(3.1e-07), format_bytes(25392), verdict_mark("not_run")
('3.10e-07', '25,392 B (24.8 KiB)', '➖')
"""

from __future__ import annotations

import re
from typing import Any

#: A check outcome's mark: passed, failed, not run (anything else a record may hold reads as not run).
VERDICT_MARKS = {"pass": "✅", "fail": "❌", "not_run": "➖"}


def anchor(text: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.

    >>> anchor("Phase A1")
    'phase-a1'
    """
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def percent(fraction: float) -> str:
    """``fraction`` as a whole percentage, except that anything short of all is never shown as 100 % nor
    anything above none as 0 %: 1582 of 1587 is "99.7%", not "100%" (a score with survivors must not read as
    complete)."""
    text = f"{100.0 * fraction:.0f}"
    if text == "100" and fraction < 1.0:
        text = f"{int(1000.0 * fraction) / 10.0:.1f}"  # floored: 0.99968 -> "99.9"
    elif text == "0" and fraction > 0.0:
        text = "<1"
    return text + "%"


def format_bytes(n: int | None) -> str:
    """``25,392 B (24.8 KiB)``; small sizes in bytes only."""
    if n is None:
        return "n/a"
    if n < 1024:
        return f"{n} B"
    return f"{n:,} B ({n / 1024:.1f} KiB)"


def err(x: Any) -> str:
    """An error as three significant digits (``3.10e-07``); "" when there is none."""
    if x is None:
        return ""
    try:
        return f"{float(x):.2e}"
    except (TypeError, ValueError):
        return str(x)



def errors(outcome: Any) -> str:
    """An outcome's max abs / max rel / rel norm errors, "—" for one it lacks; "" when it has none.

    >>> from audit.report.views import CheckRow
    >>> errors(CheckRow("chain", "pass", "B=37", 5.6e-07, None, 4.2e-07, "")), errors(CheckRow("finite", "pass", "B=1", None, None, None, ""))
    ('5.60e-07 / — / 4.20e-07', '')
    """
    values = (outcome.max_abs_err, outcome.max_rel_err, outcome.rel_norm_err)
    if all(v is None for v in values):
        return ""
    return " / ".join(err(v) if v is not None else "—" for v in values)


def verdict_mark(verdict: str) -> str:
    """The mark of one check outcome's verdict."""
    return VERDICT_MARKS.get(verdict, "➖")


def cell_mark(cell: Any) -> str:
    """One cell of a check matrix: its mark, how many of its outcomes failed or did not run, its worst error.

    >>> from audit.report.views import MatrixCell
    >>> cell_mark(MatrixCell("pass", 3, 0, 0, 2.5e-9)), cell_mark(MatrixCell("mixed", 4, 0, 1, None))
    ('✅ 2.50e-09', '➖ 1 of 4 not run')
    >>> cell_mark(MatrixCell("fail", 2, 1, 0, 0.5)), cell_mark(MatrixCell("not_run", 1, 0, 1)), cell_mark(MatrixCell(""))
    ('❌ 1 of 2 failed · 5.00e-01', '➖ not run', '')
    """
    if not cell.state:
        return ""
    if cell.state == "fail":
        head = "❌ failed" if cell.failed == cell.outcomes else f"❌ {cell.failed} of {cell.outcomes} failed"
    elif cell.state in ("not_run", "mixed"):
        head = "➖ not run" if cell.not_run == cell.outcomes else f"➖ {cell.not_run} of {cell.outcomes} not run"
    else:
        head = "✅"
    tail = [f"{cell.not_run} not run"] if cell.failed and cell.not_run else []
    if cell.worst is not None:
        tail.append(err(cell.worst))
    if not tail:
        return head
    return head + (" " if head == "✅" else " · ") + " · ".join(tail)


VALUE_FILTERS = {"err": err, "errors": errors, "verdict_mark": verdict_mark, "cell_mark": cell_mark}
