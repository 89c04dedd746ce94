"""Verify rules: what ``wireup verify`` proves on the GPU, one rule per check, read from its facts.

The GPU runner (:mod:`audit.runtime`) records every check of every case (the checks, their rule IDs
and purposes are catalogued in :mod:`audit.verify_checks`); these rules turn the failed
ones into findings, one per rule and kernel or schedule (the first failing case is quoted, the others
counted). They need the ``verify`` fact, which only ``wireup verify`` gathers: anywhere else they report
"not run", never "passed".

>>> [r.id for r in rules()][:3]
['VERIFY_REFERENCE', 'VERIFY_UNWRITTEN_OUTPUT', 'VERIFY_OUT_OF_BOUNDS']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..findings import Severity
from ..verify_checks import CHECKS
from ._base import REGISTRY, CheckContext, Hit, Rule, rule


def _checker(rule_id: str) -> Callable[[CheckContext], Iterator[Hit]]:
    def check(ctx: CheckContext) -> Iterator[Hit]:
        run = ctx.fact("verify")
        backends = run.backends
        by_subject: dict[tuple[str, str], list] = {}
        for r in run.results:
            for c in r.checks:
                if c.verdict == "fail" and c.rule == rule_id:
                    by_subject.setdefault((r.kind, r.subject), []).append(c)
        for (kind, subject), fails in by_subject.items():
            first = fails[0]
            msg = first.message.rstrip(".")
            cases = list(dict.fromkeys(c.case for c in fails[1:] if c.case and c.case != first.case))
            if cases:
                shown = "; ".join(cases[:4]) + ("; ..." if len(cases) > 4 else "")
                msg += f" (and {len(cases)} more case(s): {shown})"
            failed_on = sorted({c.backend for c in fails})
            if len(backends) > 1:
                msg += f" [{', '.join(failed_on)}" + (" only]" if len(failed_on) < len(backends) else "]")
            loc = None
            if kind == "kernel" and subject in ctx.cs.kernel_map:
                loc = ctx.cs.kernel_map[subject].loc
            elif kind == "schedule" and subject in ctx.cs.schedule_map:
                loc = ctx.cs.schedule_map[subject].loc
            yield Hit(msg + ".", loc, subject)

    check.__name__ = f"check_{rule_id.lower()}"
    return check


for _check in CHECKS:  # one rule per check of the catalogue (audit.verify_checks), its purpose the check's
    if _check.rule not in REGISTRY:
        rule(_check.rule, _check.purpose, "verify")(_checker(_check.rule))


# read from the run's coverage facts rather than from failed checks: warnings, errors under --strict
_COVERAGE_RULES = ("VERIFY_TAIL_UNCOVERED", "VERIFY_NOT_VERIFIED")


def _subject_loc(ctx: CheckContext, kind: str, subject: str):
    if kind == "kernel" and subject in ctx.cs.kernel_map:
        return ctx.cs.kernel_map[subject].loc
    if kind == "schedule" and subject in ctx.cs.schedule_map:
        return ctx.cs.schedule_map[subject].loc
    return None


if "VERIFY_TAIL_UNCOVERED" not in REGISTRY:

    @rule("VERIFY_TAIL_UNCOVERED", "Every ceil_div, // and % of a launch's geometry that depends on a runtime dim ran both with a remainder and without one.", "verify", Severity.WARNING)
    def check_verify_tail_uncovered(ctx: CheckContext) -> Iterator[Hit]:
        run = ctx.fact("verify")
        seen: set[tuple[str, str, str, str]] = set()
        for r in run.results:
            for t in getattr(r, "tails", ()) or ():
                if t.get("covered", True):
                    continue
                key = (r.kind, r.subject, str(t.get("kernel")), str(t.get("message")))
                if key in seen:
                    continue
                seen.add(key)
                head = f'Kernel "{t.get("kernel")}"' if r.kind == "kernel" else f'Schedule "{r.subject}" launches kernel "{t.get("kernel")}" whose'
                yield Hit(f'{head} {t.get("field")} "{t.get("expr")}": {t.get("message")}', _subject_loc(ctx, r.kind, r.subject), r.subject)

    @rule("VERIFY_NOT_VERIFIED", "Every verified kernel was compared with its float64 reference (or gradient check), and every schedule with its reference chain, in at least one case.", "verify", Severity.WARNING)
    def check_verify_not_verified(ctx: CheckContext) -> Iterator[Hit]:
        run = ctx.fact("verify")
        seen: set[tuple[str, str]] = set()
        for r in run.results:
            if r.verdict != "not_run" or (r.kind, r.subject) in seen or not r.checks:
                continue
            seen.add((r.kind, r.subject))
            why = next((c.message for c in r.checks if c.verdict == "not_run" and c.check in ("reference", "chain", "gradcheck")), "")
            what = "its float64 reference" if r.kind == "kernel" else "its reference chain"
            noun = "Kernel" if r.kind == "kernel" else "Schedule"
            yield Hit(f'{noun} "{r.subject}" is not verified: no case compared it with {what}' + (f" ({why.rstrip('.')})." if why else "."),
                      _subject_loc(ctx, r.kind, r.subject), r.subject)  # fmt: skip


def rules() -> list[Rule]:
    """The verify rules in a stable order (the catalogue's, then the coverage rules)."""
    return [REGISTRY[c.rule] for c in CHECKS] + [REGISTRY[i] for i in _COVERAGE_RULES]
