"""What a mutation run found: per mutant its status and the checks that caught it, per kernel the
counts the score is made of.

A compiled mutant is *caught* when verification reports any failed check (the rule IDs are recorded),
*survived* otherwise. A survivor is *equivalent* when an equivalence record proves it (its reason is
kept), else it is a *missing check (or unproven equivalent)*. Mutants that do not compile
(*stillborn*) or compile to the original's code (*identical*) are listed but not counted; an *error*
(wireup itself failed while verifying the mutant) is no verdict and is reported on its own.

Each kernel's *baseline*, the unmutated kernel verified with the same settings in the same run, must
pass: a check that fails without any mutation "catches" every mutant trivially. When it fails (or cannot
be verified) the kernel is not scored: its verified mutants are *not_scored*, none counts, and the score
is None.

The score is ``caught / (mutants - equivalent)``, where ``mutants`` counts the caught and surviving
mutants.

>>> km = KernelMutation("k", "k.cu", "", 0, {}, [])
>>> km.score is None
True
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ._equivalent import EquivalenceRecord
from ._mutants import Mutant
from ._operators import OPERATORS

STATUSES = ("caught", "survived", "stillborn", "identical", "error", "not_scored")
BASELINES = ("pass", "fail", "error")  # the unmutated kernel: passed, failed a check, or could not be verified


def not_scored_reason(baseline: str, findings: list[str]) -> str:
    """Why a kernel whose baseline is ``baseline`` is not scored ("" when it passed).

    >>> not_scored_reason("fail", ["VERIFY_REFERENCE: off", "VERIFY_NAN: nan"])
    'not scored (the unmutated kernel fails these checks: VERIFY_REFERENCE, VERIFY_NAN)'
    """
    if baseline == "pass":
        return ""
    if baseline == "error":
        return "not scored (wireup failed while verifying the unmutated kernel)"
    rules = list(dict.fromkeys(f.split(":", 1)[0] for f in findings)) or ["?"]
    return "not scored (the unmutated kernel fails these checks: " + ", ".join(rules) + ")"


@dataclass
class MutantOutcome:
    """One mutant's fate (``status`` is one of :data:`STATUSES`)."""

    mutant: Mutant
    status: str
    checks: tuple[str, ...] = ()  # rule IDs that failed (caught)
    detail: str = ""  # the first finding, the compile error, or the internal error
    equivalent: EquivalenceRecord | None = None
    seconds: float = 0.0

    @property
    def unclassified(self) -> bool:
        """A survivor no equivalence record explains: a missing check or an unproven equivalent."""
        return self.status == "survived" and self.equivalent is None


@dataclass
class KernelMutation:
    """Every selected mutant of one kernel and what became of it."""

    kernel: str
    source: str
    source_sha256: str
    generated: int  # mutants the operators made, before --max-mutants
    generated_by_operator: dict[str, int]
    outcomes: list[MutantOutcome]
    stale: list[str] = field(default_factory=list)  # stale equivalence records, one sentence each
    baseline: str = "pass"  # one of BASELINES: the unmutated kernel's verdict at the run's settings
    baseline_findings: list[str] = field(default_factory=list)  # "RULE: message" per failed check of the baseline
    judged_by: list[str] = field(default_factory=list)  # a header: every kernel including it (its mutants are judged against all)
    # a header: each including kernel's source closure without the header, hashed (audit.cuda.headers.judge_hashes)
    judged_sources: dict[str, str] = field(default_factory=dict)

    @property
    def is_header(self) -> bool:
        return bool(self.judged_by)

    @property
    def scored(self) -> bool:
        """False when the unmutated kernel itself fails (or could not be verified): no mutant counts."""
        return self.baseline == "pass"

    @property
    def not_scored_reason(self) -> str:
        """Why the kernel is not scored ("" when it is)."""
        return not_scored_reason(self.baseline, self.baseline_findings)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def selected(self) -> int:
        return len(self.outcomes)

    @property
    def mutants(self) -> int:
        """Mutants that count: compiled to new code and verified (caught or survived)."""
        return self.count("caught") + self.count("survived")

    @property
    def caught(self) -> int:
        return self.count("caught")

    @property
    def survivors(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.status == "survived"]

    @property
    def equivalent(self) -> int:
        return sum(1 for o in self.survivors if o.equivalent is not None)

    @property
    def unclassified(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.unclassified]

    @property
    def errors(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.status == "error"]

    @property
    def score(self) -> float | None:
        """caught / (mutants - equivalent), or None when no mutant counts or the kernel is not scored."""
        if not self.scored:
            return None
        n = self.mutants - self.equivalent
        return self.caught / n if n > 0 else None

    @property
    def by_check(self) -> dict[str, int]:
        """Per rule ID, how many caught mutants it caught (a mutant counts under every rule that failed)."""
        c: Counter[str] = Counter()
        for o in self.outcomes:
            if o.status == "caught":
                c.update(set(o.checks))
        return dict(sorted(c.items()))

    @property
    def by_operator(self) -> dict[str, dict[str, int]]:
        """Per operator: generated, selected, and how many of those were caught, survived, stillborn, identical."""
        out: dict[str, dict[str, int]] = {}
        for op in OPERATORS:
            mine = [o for o in self.outcomes if o.mutant.operator == op.id]
            gen = self.generated_by_operator.get(op.id, 0)
            if not gen:
                continue
            row = {"generated": gen, "selected": len(mine)}
            for s in STATUSES:
                row[s] = sum(1 for o in mine if o.status == s)
            out[op.id] = row
        return out


@dataclass
class MutationRun:
    """A whole ``wireup mutate`` run: every kernel, the settings, and the facts of the run."""

    kernels: list[KernelMutation]
    settings: dict
    device: dict = field(default_factory=dict)  # name, compute_capability, memory_bytes
    backend: str = ""
    versions: dict = field(default_factory=dict)  # wireup, nvcc, backend, driver, runtime
    date: str = ""
    timing: dict = field(default_factory=dict)  # seconds: generate, compile, verify, wall

    @property
    def exit_code(self) -> int:
        """1 when a survivor is unclassified, a mutant could not be verified or a kernel's unmutated baseline
        fails, else 0."""
        return 1 if any(k.unclassified or k.errors or not k.scored for k in self.kernels) else 0
