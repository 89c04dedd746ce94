"""The notes a static check of the shipped chain leaves, and why: entries the block simulator does not take to
their end, so SHARED_BARRIER_MISSING / GLOBAL_RMW_RACE report them as not analysed instead of passing them in
silence (SHARED_UNINIT_READ with them); none now. A test that checks a variant of the chain allows these and nothing else: a new note (a kernel that
stopped being analysed) fails it, as an error or warning does."""

from __future__ import annotations

from audit.findings import Severity

#: none since the evening of 7 December 2026: the trade-outcome and trunk backwards' five notes (a branch on an optional pointer a
#: step binds, around a barrier) went when each launch's twin with the pointer given was run (docs/build.md)
KNOWN_NOTES: dict[tuple[str, str], str] = {}


def assert_clean_but_known_notes(result, also: dict[tuple[str, str], str] | None = None) -> None:
    """No error or warning, and no note but the shipped chain's known ones (and ``also``'s, a variant's own)."""
    problems = [f.message for f in result.findings if f.severity != Severity.NOTE]
    assert problems == [], problems
    notes = [f for f in result.findings if f.severity == Severity.NOTE]
    assert {(f.rule, f.subject) for f in notes} <= set(KNOWN_NOTES) | set(also or {}), [f.message for f in notes]


def errors_and_warnings(result) -> list[str]:
    """The rules of a result's findings that are not notes, in order."""
    return [f.rule for f in result.findings if f.severity != Severity.NOTE]
