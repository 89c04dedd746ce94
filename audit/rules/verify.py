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


def rules() -> list[Rule]:
    """The verify rules in a stable order (the catalogue's)."""
    return [REGISTRY[c.rule] for c in CHECKS]
