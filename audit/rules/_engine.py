"""The engine: which rules a run selects, and running them over one :class:`CheckContext`.

It imports every rule module (each registers its rules in :data:`~audit.rules._base.REGISTRY` as it is
imported); the rule modules import only :mod:`._base`, so the registry has no import circle.

>>> [r.id for r in select_rules(["isv"])][:2]          # doctest: +SKIP
['DIVISOR_RESET_ZERO', 'ISV_ACCESS_DECLARED']
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
    verify,
    wiring,
)
from ._base import CATEGORIES, REGISTRY, RUN_ONLY, CheckContext, Rule, RuleNotRun


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


def run_rules(ctx: CheckContext, rules: Sequence[Rule]) -> CheckResult:
    """Run ``rules`` and collect findings, sorted by file, line and rule."""
    from ..load import gc_paused

    result = CheckResult()
    universe = _subjects(ctx.cs)
    with gc_paused():  # the wiring and the rules' facts are large, long-lived and acyclic
        for r in rules:
            try:
                result.findings.extend(r.run(ctx))
                result.ran.append(r.id)
                result.subjects[r.id] = universe.get(r.category, [])
            except RuleNotRun as exc:
                result.not_run.append(NotRun(r.id, str(exc)))
    result.findings.sort(key=Finding.sort_key)
    return result


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

