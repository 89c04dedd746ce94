"""What a verification run produces: one :class:`CheckRecord` per check per case, grouped per subject.

These are plain data that cross the worker boundary as JSON lines (``to_dict`` / ``from_dict``); the
verify rules (:mod:`audit.rules.verify`) turn failed records into findings and
:mod:`audit.runtime._evidence` turns each :class:`SubjectResult` into an evidence record.

>>> r = CheckRecord("reference", "fail", "aux_trunk_forward", "kernel", "pycuda", "B=37",
...                 message='Kernel "aux_trunk_forward" fails VERIFY_REFERENCE at B=37: ...')
>>> r.rule
'VERIFY_REFERENCE'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..verify_checks import ANCHORS, VerifyCheck, check_named



@dataclass
class CheckRecord:
    """One check of one case: verdict ``pass`` / ``fail`` / ``not_run`` and the numbers behind it.

    ``message`` is the finding sentence for a failure, the reason for ``not_run``, a short note for a pass.
    ``check`` is the name of a check of the catalogue (:mod:`audit.verify_checks`); any other name is an
    :class:`~audit.verify_checks.UnknownCheck` error, here and where a record crosses the worker boundary.
    """

    check: str
    verdict: str
    subject: str
    kind: str  # "kernel" | "schedule"
    backend: str
    case: str = ""  # "B=4096 K=3 mask=mixed"
    message: str = ""
    output: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_norm_err: float | None = None

    def __post_init__(self) -> None:
        check_named(self.check)

    @property
    def rule(self) -> str:
        return check_named(self.check).rule

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckRecord:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class SubjectResult:
    """Every check of one kernel or schedule on one backend, with timings and notes."""

    subject: str
    kind: str
    backend: str
    checks: list[CheckRecord] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)  # seconds per phase
    duration_s: float = 0.0
    sizes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. how sampled rows call the reference
    # case label -> the fastest launch of the kernel in that case, in seconds (the backend's timer: CUDA
    # events on the GPU backends); what ``wireup mutate`` compares a mutant's cost with. Never evidence.
    launch_seconds: dict[str, float] = field(default_factory=dict)
    cases: list[dict[str, int]] = field(default_factory=list)  # the dim assignments that ran, in order
    tails: list[dict[str, Any]] = field(default_factory=list)  # tail coverage verdicts (search.coverage.TailVerdict.to_dict)
    # per case of ``cases``: how its outputs were compared with the reference ("full", "sampled" rows or
    # elements, "not run"; the least thorough of the case's dims variants and bindings)
    references: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[CheckRecord]:
        return [c for c in self.checks if c.verdict == "fail"]

    @property
    def passed(self) -> list[CheckRecord]:
        return [c for c in self.checks if c.verdict == "pass"]

    @property
    def not_run(self) -> list[CheckRecord]:
        return [c for c in self.checks if c.verdict == "not_run"]

    @property
    def verdict(self) -> str:
        """``fail`` when any check failed; ``pass`` when none failed and the subject was compared with
        its reference (kernels) or its reference chain (schedules) at least once; else ``not_run``."""
        if self.failed:
            return "fail"
        anchor = {c.name for c in ANCHORS["kernel" if self.kind == "kernel" else "schedule"]}
        if any(c.verdict == "pass" and c.check in anchor for c in self.checks):
            return "pass"
        return "not_run"

    def add(self, check: VerifyCheck, verdict: str, case: str = "", message: str = "", **numbers: Any) -> CheckRecord:
        """Record one case of ``check`` (an entry of :mod:`audit.verify_checks`, never a bare name)."""
        if not isinstance(check, VerifyCheck):
            raise TypeError(f"SubjectResult.add takes a check of audit.verify_checks, not {check!r}")
        rec = CheckRecord(check.name, verdict, self.subject, self.kind, self.backend, case, message, **numbers)
        self.checks.append(rec)
        return rec

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["checks"] = [c.to_dict() for c in self.checks]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubjectResult:
        out = cls(d["subject"], d["kind"], d["backend"])
        out.checks = [CheckRecord.from_dict(c) for c in d.get("checks", [])]
        out.timing = dict(d.get("timing", {}))
        out.duration_s = float(d.get("duration_s", 0.0))
        out.sizes = list(d.get("sizes", []))
        out.notes = list(d.get("notes", []))
        out.launch_seconds = {str(k): float(v) for k, v in d.get("launch_seconds", {}).items()}
        out.cases = [{str(k): int(v) for k, v in c.items()} for c in d.get("cases", [])]
        out.tails = [dict(t) for t in d.get("tails", [])]
        out.references = [str(m) for m in d.get("references", [])]
        return out


@dataclass
class EnvironmentInfo:
    """The device and software a run used (recorded in every evidence record)."""

    backend: str
    backend_version: str = ""
    device: dict[str, Any] = field(default_factory=dict)  # name, compute_capability, memory_bytes
    driver_version: str = ""
    runtime_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvironmentInfo:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class VerifyRun:
    """The facts of one ``wireup verify`` run: every subject result, environment and timing."""

    results: list[SubjectResult] = field(default_factory=list)
    environments: dict[str, EnvironmentInfo] = field(default_factory=dict)  # backend -> info
    timing: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    sizes: list[int] = field(default_factory=list)
    build: Any = None  # audit.compile.BuildResult, where one was made
    notes: list[str] = field(default_factory=list)
    plans: list[dict[str, Any]] = field(default_factory=list)  # the size sweep of each subject (search.sizes.SizePlan.to_dict)

    def subjects(self, kind: str | None = None) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.results:
            if kind is None or r.kind == kind:
                seen.setdefault(r.subject, None)
        return list(seen)

    @property
    def backends(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.results:
            seen.setdefault(r.backend, None)
        return list(seen) or list(self.environments)
