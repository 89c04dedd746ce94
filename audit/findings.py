"""Findings: the one output of checking, rendered by the printers in :mod:`audit.printers`.

A finding is one sentence with quoted names and before -> after, ending in a period, pinned to a
contract file and (where it can be) the line of the key::

    contracts/schedules.toml:87: SHAPE_MISMATCH Kernel "aux_trunk_backward" parameter "dh_accum" ...

Rules that could not run (no nvcc, no build, no evidence) are reported as :class:`NotRun`, never as
passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from .errors import ContractProblem
from .model import Loc


class Severity(str, Enum):
    """How a finding counts: errors fail the check (exit 1), warnings and notes do not."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Finding:
    """One problem found by one rule."""

    rule: str
    severity: Severity
    message: str
    file: str = ""
    line: int | None = None
    subject: str = ""  # the kernel, schedule, slot or buffer the finding is about
    key: str = ""  # TOML key path, e.g. kernel[2].params[4].shape
    category: str = ""

    @property
    def location(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or "<contracts>"

    def sort_key(self) -> tuple:
        return (self.file, self.line or 0, self.rule, self.message)


@dataclass(frozen=True)
class NotRun:
    """A rule that did not run, and why (e.g. nvcc missing)."""

    rule: str
    reason: str


@dataclass
class CheckResult:
    """Findings plus the rules that ran and those that did not."""

    findings: list[Finding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    not_run: list[NotRun] = field(default_factory=list)
    subjects: dict[str, list[str]] = field(default_factory=dict)  # rule -> subjects it examined
    #: (finding, the [[suppress]] reason) for findings a contract suppresses; they do not count
    suppressed: list[tuple[Finding, str]] = field(default_factory=list)
    load_failed: bool = False  # the configuration or a contract did not load: nothing was checked

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def exit_code(self) -> int:
        if self.load_failed:
            return 2
        return 1 if self.errors else 0


# Not a rule of the registry (no check function runs on a model that failed to load): the loader's
# verdict, given an ID so that every printer can report it like a finding.
LOAD_ERROR = "LOAD_ERROR"
LOAD_ERROR_PURPOSE = "The configuration and every contract file load into a model: valid TOML and UTF-8, known keys, values of the right type."


def load_error_result(problems: Iterable[ContractProblem]) -> CheckResult:
    """The result of a check that stopped at loading: one ``LOAD_ERROR`` finding per problem, exit code 2.

    >>> load_error_result([ContractProblem("contracts/a.toml", 3, "kernel[0].dtype", 'expected "f32", found "TODO".')]).exit_code
    2
    """
    findings = [
        Finding(LOAD_ERROR, Severity.ERROR, f"{p.key}: {p.message}" if p.key else p.message, p.path, p.line, p.path, p.key, "schema")
        for p in problems
    ]
    return CheckResult(findings=findings, load_failed=True)


def make_finding(rule: str, severity: Severity, message: str, loc: Loc | None, subject: str = "", category: str = "") -> Finding:
    """A finding located at ``loc`` (its file, line and key path)."""
    if loc is None or loc.source is None:
        return Finding(rule, severity, message, "", None, subject, "", category)
    return Finding(rule, severity, message, loc.file, loc.line, subject, loc.key_text, category)
