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


# read from the run's coverage facts rather than from failed checks: warnings, errors under --strict (the
# set audit.runtime._verify.judge escalates)
COVERAGE_RULES = ("VERIFY_TAIL_UNCOVERED", "VERIFY_NOT_VERIFIED", "VERIFY_FIXED_DIM_ONE_VALUE")


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


if "VERIFY_FIXED_DIM_ONE_VALUE" not in REGISTRY:

    @rule("VERIFY_FIXED_DIM_ONE_VALUE", "Every fixed dim a verified kernel takes as a scalar argument ran at two or more values ([kernel.verify] dims), so code for its other values runs and a kernel that ignores the argument is caught.", "verify", Severity.WARNING)
    def check_verify_fixed_dim_one_value(ctx: CheckContext) -> Iterator[Hit]:
        """A fixed dim is one value in production, but the kernel that takes it as an argument has code for
        others (and a kernel that hard-codes the production value where it should read the argument passes
        every check at that value). Judged per verified kernel from its contract: the values its
        ``[kernel.verify] dims`` lists are the values the run gave the dim."""
        from ..model import ScalarParam

        run = ctx.fact("verify")
        fixed = {d.name: d.value for d in ctx.cs.dim_map.values() if d.kind == "fixed"}
        others = {d.name for d in ctx.cs.dim_map.values() if d.kind != "fixed"}
        seen: set[str] = set()
        for r in run.results:
            k = ctx.cs.kernel_map.get(r.subject) if r.kind == "kernel" else None
            if k is None or r.subject in seen or r.verdict == "not_run":
                continue
            seen.add(r.subject)
            listed = {name: set(values) for name, values in k.verify.dims}
            told: set[str] = set()
            for p in k.params:
                names = set(getattr(p.value, "names", None) or ()) if isinstance(p, ScalarParam) else set()
                if names & others or names & set(k.dims):  # it moves with a runtime or local dim: no one value to hard-code
                    continue
                for d in sorted(names & set(fixed)):
                    if d in told or len(listed.get(d, ())) >= 2:
                        continue
                    told.add(d)
                    v = next(iter(listed[d])) if d in listed else fixed[d]
                    arg = f'its argument "{p.name}"' + (f' (= {p.value.text})' if p.value.text != d else "")
                    yield Hit(f'Kernel "{k.name}" takes the fixed dim {d} as {arg} and ran at {d} = {v} only: its code for other values of {d} '
                              f"never ran, and a kernel that ignores the argument (using {v} where it should read {p.name}) passes; list a second "
                              f"value it takes in [kernel.verify] dims = {{ {d} = [{v}, {v + 1}] }}, and the search adds the values around them.",
                              _verify_loc(k), k.name)  # fmt: skip


def _verify_loc(k):  # type: ignore[no-untyped-def]
    """The kernel's ``[kernel.verify] dims`` key, else its verify table, else the kernel."""
    if k.verify.loc.source is None:
        return k.loc
    return k.verify.loc.child("dims") if k.verify.dims else k.verify.loc


def rules() -> list[Rule]:
    """The verify rules in a stable order (the catalogue's, then the coverage rules)."""
    return [REGISTRY[c.rule] for c in CHECKS] + [REGISTRY[i] for i in COVERAGE_RULES]
