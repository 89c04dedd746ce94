"""The engine: which rules a run selects, and running them over one :class:`CheckContext`.

It imports every rule module (each registers its rules in :data:`~audit.rules._base.REGISTRY` as it is
imported); the rule modules import only :mod:`._base`, so the registry has no import circle.

>>> [r.id for r in select_rules(["isv"])][:2]          # doctest: +SKIP
['DIVISOR_RESET_ZERO', 'ISV_ACCESS_DECLARED']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ..errors import UsageError
from ..findings import CheckResult, Finding, NotRun
from ..model import ContractSet
from . import (  # noqa: F401  (registration)
    build,
    evidence,
    invariants,
    isv,
    launchers,
    layout,
    schema,
    tails,
    verify,
    views,
    wiring,
)
from ._base import CATEGORIES, CONTRACT_ONLY, REGISTRY, RUN_ONLY, CheckContext, Rule, RuleNotRun
from ._parallel import jobs_for, run_split


def select_rules(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[Rule]:
    """Rules chosen by ID or category (``select`` empty means all), minus ``ignore``."""
    known = set(REGISTRY) | set(CATEGORIES)
    for token in (*select, *ignore):
        if token not in known:
            valid = ", ".join(sorted(CATEGORIES))
            raise UsageError(
                f'Unknown rule or category "{token}"; categories are {valid} and rule IDs are listed by "wireup rules".'
            )
    chosen = [
        r
        for r in REGISTRY.values()
        if r.replaced_by is None
        # the "verify" rules judge a GPU run (wireup verify); a static check never runs them
        and (r.id in select or r.category in select if r.category in RUN_ONLY else (not select or r.id in select or r.category in select))
        and r.id not in ignore
        and r.category not in ignore
    ]
    return chosen


def run_rules(ctx: CheckContext, rules: Sequence[Rule], jobs: int | None = 1, alongside: Callable[[], None] | None = None) -> CheckResult:
    """Run ``rules`` and collect findings, sorted by file, line and rule.

    ``jobs``: 1 runs them in this process; 2 or more, or None (automatic, see
    :func:`~audit.rules._parallel.jobs_for`), may run part of them in a forked child: same result.
    ``alongside``: the caller's work that reads no finding, called first, or in this process while a
    child runs its rules."""
    from ..hashing import closures_memoized
    from ..load import gc_paused

    result = CheckResult()
    universe = _subjects(ctx.cs)
    # what this run selected: a PTX rule notes a kernel it could not read only where the rule that reports
    # why (COMPILE_ERROR, ENTRY_MISSING) is not among them (:func:`audit.rules.build._unread_notes`)
    ctx.options["_selected"] = frozenset(r.id for r in rules)
    # the suppression check judges what the others found, so it runs last
    ordered = sorted(rules, key=lambda r: r.id == UNUSED_SUPPRESSION)
    body = [r for r in ordered if r.id != UNUSED_SUPPRESSION]
    # the wiring and the rules' facts are large, long-lived and acyclic; the sources' include closures
    # are walked once for every rule and fact of the run
    with gc_paused(), closures_memoized():
        if jobs != 1 and len(body) > 1 and jobs_for(ctx, jobs) > 1:
            outcomes = run_split(ctx, body, _run_one, alongside)
        else:
            if alongside is not None:
                alongside()
            outcomes = [_run_one(ctx, r) for r in body]
        for r, (found, reason) in zip(body, outcomes):
            _record(result, r, found, reason, universe)
        if len(body) < len(ordered):
            # a contract-only selection stays contract-only (and cacheable): the suppressions of rules that read
            # the build, the evidence or the launchers are judged by a check that selects them, or by
            # SUPPRESSION_UNUSED selected alone
            quick = bool(body) and all(r.category in CONTRACT_ONLY for r in body)
            _suppress(ctx, result, judge=True, contract_only=quick)
            r = ordered[-1]
            _record(result, r, *_run_one(ctx, r), universe)
        else:
            _suppress(ctx, result)
    result.findings.sort(key=Finding.sort_key)
    return result


def _run_one(ctx: CheckContext, r: Rule) -> tuple[list[Finding] | None, str | None]:
    """(the findings of ``r``, None), or (None, why it did not run)."""
    try:
        return r.run(ctx), None
    except RuleNotRun as exc:
        return None, str(exc)


def _record(result: CheckResult, r: Rule, found: list[Finding] | None, reason: str | None, universe: dict[str, list[str]]) -> None:
    if found is None:
        result.not_run.append(NotRun(r.id, reason or ""))
    else:
        result.findings.extend(found)
        result.ran.append(r.id)
        result.subjects[r.id] = universe.get(r.category, [])


UNUSED_SUPPRESSION = "SUPPRESSION_UNUSED"


def _suppress(ctx: CheckContext, result: CheckResult, judge: bool = False, contract_only: bool = False) -> None:
    """Move the findings a ``[[suppress]]`` entry covers to ``result.suppressed``; count each entry's hits
    for the SUPPRESSION_UNUSED check (the ``suppressions`` fact: entry -> hits, None where not judged, and
    the rules judged). A PTX rule's note that it did not read a kernel (its source does not compile) is
    never suppressed and counts for no entry; an entry of a rule that reads the build, covering a kernel
    that was not built (:func:`audit.rules.build.unread_kernels`), with no hit elsewhere, is not judged
    (None): what it accepted may be in the kernel no rule read.

    When ``judge`` (SUPPRESSION_UNUSED is selected), a static rule an entry names that this run did not
    select is run too, only to count what the entry still suppresses; its findings are not reported. With
    ``contract_only`` (the other rules selected read the contracts alone), only such rules are run so: an
    entry of a build, evidence or launcher rule is left unjudged there."""
    from .build import BUILD_FAILURE_RULES, is_unread_note, unread_kernels

    entries = ctx.cs.suppressions
    hits: dict = dict.fromkeys(entries, 0)
    kept = []
    for f in result.findings:
        # a PTX rule's note that it did not read a kernel: no entry takes it
        entry = None if is_unread_note(f) else next((s for s in entries if s.matches(f.rule, f.subject, f.message)), None)
        if entry is None:
            kept.append(f)
        else:
            hits[entry] += 1
            result.suppressed.append((f, entry.reason))
    result.findings[:] = kept
    judged = set(result.ran)
    if judge:
        extra = sorted({s.rule for s in entries} - judged - {UNUSED_SUPPRESSION})
        for rid in extra:
            r = REGISTRY.get(rid)
            if r is None or r.category in RUN_ONLY or r.replaced_by is not None or (contract_only and r.category not in CONTRACT_ONLY):
                continue
            try:
                found = r.run(ctx)
            except RuleNotRun:
                continue
            judged.add(rid)
            for f in found:
                entry = None if is_unread_note(f) else next((s for s in entries if s.matches(f.rule, f.subject, f.message)), None)
                if entry is not None:
                    hits[entry] += 1
    # an entry of a rule that reads the build, with no hit, covering a kernel that was not built: not judged
    idle = [e for e, n in hits.items() if n == 0 and e.rule in judged and e.rule not in BUILD_FAILURE_RULES
            and (r := REGISTRY.get(e.rule)) is not None and r.category == "build"]
    if idle:
        unread = {k.name for k in unread_kernels(ctx)}
        for e in idle:
            if (unread if e.subject is None else unread & {e.subject}):
                hits[e] = None
    ctx.facts["suppressions"] = (hits, frozenset(judged))


def _subjects(cs: ContractSet) -> dict[str, list[str]]:
    """What the rules of each category examine: the JUnit printer makes one testcase per pair."""
    kernels = [k.name for k in cs.kernels]
    schedules = [s.name for s in cs.schedules]
    return {
        "schema": kernels + schedules,
        "wiring": kernels + schedules,
        "isv": ["isv"],
        "layout": ["isv"],
        "invariants": [i.name for i in cs.invariants],
        "build": kernels,
        "evidence": kernels + schedules,
        "launchers": kernels,
    }


def iter_rules() -> Iterator[Rule]:
    yield from sorted(REGISTRY.values(), key=lambda r: (CATEGORIES.index(r.category), r.id))

