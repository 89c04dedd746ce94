"""The report's view model: plain objects the templates read, filled by :mod:`audit.report.collect`.

Values are data (numbers stay numbers, names stay unescaped); turning them into text is the templates'
and :mod:`audit.report.filters`' business, so every string reaches the page through a few filters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..findings import Finding, NotRun
from .history import FileHistory

OK, WARN, BAD, NONE = "ok", "warn", "bad", "none"


@dataclass(frozen=True)
class ReportOptions:
    """What the caller chose: ``base`` revision for the layout diff, runtime dim values, history."""

    base: str | None = None
    at: tuple[tuple[str, int], ...] = ()
    history: bool = True


@dataclass
class Status:
    """One cell of a kernel's status row: ``state`` is ok / warn / bad / none, ``text`` the words."""

    state: str
    text: str


@dataclass
class ParamRow:
    index: int
    name: str
    kind: str
    dtype: str
    shape: str = ""
    bound: str = ""
    role: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class GeometryRow:
    where: str
    grid: str
    block: str
    shared: str


@dataclass
class BuildView:
    state: str  # ok | failed | not_built | unavailable
    text: str
    cubin: str = ""
    code_size: int | None = None  # audit.compile.code_size: the same in every checkout, unlike the file's size
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    shared_static_bytes: int | None = None
    stack_frame: int | None = None


@dataclass
class CheckRow:
    """One check outcome of an evidence record, as recorded (errors formatted by the templates)."""

    name: str
    verdict: str
    size: str
    max_abs_err: float | None
    max_rel_err: float | None
    rel_norm_err: float | None
    detail: str


@dataclass
class MatrixCell:
    """The outcomes of one check at one size, folded: the worst verdict and the worst error.

    ``state`` is pass / fail / not_run / mixed (some not run, none failed) / "" (no such check at that
    size); ``worst`` the largest norm-relative error among them (the number the tolerance rule judges).
    """

    state: str
    outcomes: int = 0
    failed: int = 0
    not_run: int = 0
    worst: float | None = None


@dataclass
class MatrixRow:
    check: str
    cells: list[MatrixCell]


@dataclass
class CaseRow:
    """Every outcome of one check in one case (the size string less its sizes column), per column.

    ``detail`` is the row's most frequent detail; an outcome whose detail differs shows its own.
    """

    check: str
    case: str
    cells: list[list[CheckRow]]
    detail: str


@dataclass
class CheckMatrix:
    """A subject's evidence as checks x sizes (``rows``) and, losslessly, checks x cases x sizes (``cases``)."""

    columns: list[str]
    rows: list[MatrixRow]
    cases: list[CaseRow]
    outcomes: int
    failed: int
    not_run: int


@dataclass
class EvidenceView:
    status: str  # verified | stale | missing | failed
    reason: str = ""
    device: str = ""
    date: str = ""
    backend: str = ""
    sizes: list[str] = field(default_factory=list)
    checks: list[CheckRow] = field(default_factory=list)
    matrix: CheckMatrix | None = None
    # tail coverage of the launch geometry, one line a site: launch, expression, cases on each side, verdict
    tails: list[str] = field(default_factory=list)
    # the case matrix: whether the record names its cases (records written before cases were dim
    # assignments do not: "not recorded"), the dims, each dim's value per case, and per case how it was
    # compared with the float64 reference (empty where the record predates that: "not recorded")
    cases_recorded: bool = False
    case_dims: list[str] = field(default_factory=list)
    case_values: list[list[str]] = field(default_factory=list)
    case_references: list[str] = field(default_factory=list)
    # whether the record names what its run read outside the contract (evidence format 3 and later)
    inputs_compared: bool = True


@dataclass
class Survivor:
    id: str
    equivalent: bool
    reason: str
    diff: str


@dataclass
class MutationView:
    mutants: int
    caught: int
    score: str
    by_check: list[tuple[str, Any]]
    survivors: list[Survivor]
    device: str
    date: str
    counted: int | None = None  # the score's denominator: mutants - equivalent; None when not scored
    selected: int | None = None  # mutants the run selected (--max-mutants), where the record says
    generated: int | None = None  # mutants the operators made, where the record says
    stale: str = ""  # why the record no longer describes its source ("" where it does)
    judged_by: list[str] = field(default_factory=list)  # a header's record: the kernels that judged its mutants
    # the passes survivors went through after verify ("memcheck, perturb (not run: racecheck)"); "" where the
    # record does not say (older formats)
    passes: str = ""


@dataclass
class HostRef:
    file: str
    line: int
    kind: str
    text: str


@dataclass
class KernelView:
    """One kernel as the report shows it."""

    name: str
    anchor: str
    phase: str
    stage: str
    doc: str
    source: str
    symbol: str
    contract: str  # file:line of its [[kernel]] table
    contract_file: str
    prototype: str
    params: list[ParamRow]
    masks: list[str]
    isv_reads: list[str]
    isv_writes: list[str]
    saved: list[str]
    partials: list[str]
    geometry_expr: GeometryRow
    geometry: list[GeometryRow]
    launch_sites: list[str]
    host_refs: list[HostRef] | None
    build: BuildView
    evidence: EvidenceView
    mutation: MutationView | None
    source_history: FileHistory
    contract_history: FileHistory
    findings: list[Finding]
    compiled: Status
    checked: Status
    wired: Status
    verified: Status


@dataclass
class PhaseView:
    name: str
    anchor: str
    kernels: list[KernelView]


@dataclass
class StepRow:
    number: int
    what: str  # "launch" | "zero"
    target: str
    bindings: str


@dataclass
class ScheduleView:
    name: str
    anchor: str
    doc: str
    stream: str
    graph_capture: bool
    after: list[str]
    equivalent_to: str | None
    steps: list[StepRow]
    mermaid: str
    evidence: EvidenceView


@dataclass
class SlotRow:
    index: str
    name: str
    count: int
    dtype: str
    role: str
    resets: list[str]
    readers: list[str]
    writers: list[str]
    doc: str


@dataclass
class LayoutChangeRow:
    rule: str
    message: str
    old_index: str
    new_index: str
    slot: str


@dataclass
class LayoutDiffView:
    base: str
    state: str  # ok | unavailable | error
    text: str = ""  # why there is no diff (state != ok)
    lines: list[str] = field(default_factory=list)  # verdict, fingerprint old -> new, migrator
    changes: list[LayoutChangeRow] = field(default_factory=list)


@dataclass
class IsvView:
    buffer: str
    dtype: str
    total_dim: int
    events: list[str]
    slots: list[SlotRow]
    pinned: str
    computed: str  # "" when the layout package is not available
    fingerprint_note: str
    diff: LayoutDiffView | None


@dataclass
class EvidenceGap:
    kind: str
    name: str
    status: str
    reason: str


@dataclass
class Verdict:
    level: str  # pass | incomplete | fail
    headline: str
    reasons: list[str]


@dataclass
class Report:
    """The whole report; the templates in ``audit/report/templates`` render it."""

    title: str
    verdict: Verdict
    totals: list[tuple[str, Status]]
    phases: list[PhaseView]
    kernels: list[KernelView]
    schedules: list[ScheduleView]
    isv: IsvView | None
    findings: list[Finding]
    not_run: list[NotRun]
    errors: int
    warnings: int
    rules_ran: int
    evidence_gaps: list[EvidenceGap]
    build_note: str
    toolchain: str
    representative: str
    launchers: list[str]
    launcher_note: str  # why the launcher scan did not run ("" when it ran or none is configured)
    unaudited: list[HostRef]
    history: bool
    inputs: list[str]
    #: (finding, reason) of every finding a [[suppress]] entry covers: shown apart, never counted
    suppressed: list[tuple[Finding, str]] = field(default_factory=list)
    # the records of header mutants (reports/mutation/<header>.json), by header name: not any one kernel's
    header_mutations: list[tuple[str, MutationView]] = field(default_factory=list)
    header_mutation_missing: list[str] = field(default_factory=list)  # included headers with mutants but no record
