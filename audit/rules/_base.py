"""The rule object, the registry and the engine that runs selected rules over a contract set.

A rule is one declarative object: a stable SCREAMING_SNAKE ``id``, a one-sentence ``purpose``, a
``category`` and a default ``severity``, plus a check function that takes a :class:`CheckContext` and
yields :class:`Hit` s. Rules are registered with the :func:`rule` decorator in the modules of this
package; :data:`REGISTRY` lists them all. Configuration and the CLI select and ignore rules by ID or by
category.

>>> @rule("DEAD_KERNEL", "A kernel in no schedule has no launcher.", "wiring")
... def check_dead_kernels(ctx):
...     for k in ctx.cs.kernels:
...         if k.name not in ctx.wiring.launched:
...             yield Hit(f'Kernel "{k.name}" is in no schedule.', k.loc, k.name)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RuleNotRun as RuleNotRun
from ..findings import Finding, NotRun, Severity, make_finding
from ..model import ContractSet, Loc, SourceFile

if TYPE_CHECKING:
    from ..config import Config
    from ..graph import Wiring

CATEGORIES = ("schema", "wiring", "isv", "layout", "invariants", "build", "evidence", "launchers", "verify")
RUN_ONLY = ("verify",)  # categories judged only by the command that gathers their facts


@dataclass(frozen=True)
class Hit:
    """What a check function yields: a message, where it points, and what it is about."""

    message: str
    loc: Loc | None = None
    subject: str = ""
    severity: Severity | None = None  # overrides the rule's default


@dataclass(frozen=True)
class Rule:
    """One check: stable ID, one-sentence purpose, category, default severity and check function."""

    id: str
    purpose: str
    category: str
    severity: Severity
    check: Callable[[CheckContext], Iterable[Hit]] = field(repr=False)
    replaced_by: str | None = None  # retired IDs keep their name and point at their replacement

    def run(self, ctx: CheckContext) -> list[Finding]:
        out = []
        for hit in self.check(ctx):
            sev = hit.severity or self.severity
            if self.id in ctx.escalate:
                sev = Severity.ERROR
            out.append(make_finding(self.id, sev, hit.message, hit.loc, hit.subject, self.category))
        return out


REGISTRY: dict[str, Rule] = {}

#: Categories whose rules read nothing but the contracts, the configuration, the options and
#: :data:`PROBES` (no fact, no other file of the project): their findings are a function of those, which
#: :mod:`audit.check_cache` keys them by. tests/test_check_cache.py holds every rule of them to it.
CONTRACT_ONLY = ("schema", "wiring", "isv", "invariants")

#: What a rule of :data:`CONTRACT_ONLY` may ask of the project's files: kind -> function of (the
#: resolved root, the configuration, an argument such as a kernel's source path) whose answer (a string,
#: a boolean or None) is all the rule uses. Registered with :func:`probe`.
PROBES: dict[str, Callable[[Path, Config | None, str], Any]] = {}


def probe(kind: str) -> Callable:
    """Register the decorated function as the probe ``kind`` (see :data:`PROBES`)."""

    def register(fn: Callable[[Path, Config | None, str], Any]) -> Callable:
        if kind in PROBES:
            raise ValueError(f"probe {kind} registered twice")
        PROBES[kind] = fn
        return fn

    return register


def rule(id: str, purpose: str, category: str, severity: Severity = Severity.ERROR) -> Callable:
    """Register the decorated check function as a rule."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown rule category {category!r}")

    def register(fn: Callable[[CheckContext], Iterable[Hit]]) -> Callable:
        if id in REGISTRY:
            raise ValueError(f"rule {id} registered twice")
        REGISTRY[id] = Rule(id, purpose, category, severity, fn)
        return fn

    return register


@dataclass
class CheckContext:
    """What a check function may look at. Facts the rule needs but nobody gathered raise RuleNotRun."""

    cs: ContractSet
    config: Config | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # "build", "evidence", "launchers", ...
    options: dict[str, Any] = field(default_factory=dict)
    escalate: frozenset[str] = frozenset()  # rule IDs whose warnings count as errors for this run
    providers: dict[str, Callable[[CheckContext], Any]] = field(default_factory=dict)
    # files several rules read within one check (the PTX of a compiled source), by path
    texts: dict[Any, str] = field(default_factory=dict)
    # (probe kind, argument) -> answer: what the rules asked of the project's files (see :func:`probe`)
    probes: dict[tuple[str, str], Any] = field(default_factory=dict)
    # the contract files the model's locations point into, by relative path, where the caller keeps them
    # (the check cache reads which lines the rules located): a forked rule runner sends its back
    sources: dict[str, SourceFile] = field(default_factory=dict)

    @functools.cached_property
    def wiring(self) -> Wiring:
        from ..graph import Wiring

        return Wiring.of(self.cs)

    def probe(self, kind: str, arg: str) -> Any:
        """The answer of the probe ``kind`` (see :data:`PROBES`) for ``arg``, asked once per check and
        recorded, so that a cached result can be re-validated by asking again (:mod:`audit.check_cache`)."""
        key = (kind, arg)
        if key not in self.probes:
            self.probes[key] = PROBES[kind](self.cs.root, self.config, arg)
        return self.probes[key]

    def fact(self, name: str) -> Any:
        """A gathered fact (build results, evidence...), computed on first use by its provider."""
        if name not in self.facts and name in self.providers:
            try:
                self.facts[name] = self.providers[name](self)
            except RuleNotRun as exc:
                self.facts[name] = NotRun("", str(exc))
        value = self.facts.get(name)
        if isinstance(value, NotRun) or value is None:
            reason = value.reason if isinstance(value, NotRun) else f"no {name} facts were gathered"
            raise RuleNotRun(reason)
        return value
