"""Collection: the facts of one ``wireup check`` run turned into the report's view model.

The report is a view. :func:`collect_report` takes a :class:`~audit.api.CheckRun` -- its findings and
the facts its rules gathered (the build, the evidence freshness, the launcher scan, the layout
fingerprint) -- and computes none of those again. What no check knows is read here: mutation records
(``reports/mutation/``), git history, the layout diff against ``--base`` and the representative dims
the launch geometry is shown at. The objects it fills live in :mod:`audit.report.views`; turning them
into text is the business of the templates and :mod:`audit.report.filters`.

Nothing here reads the clock: dates come from evidence records and git only, and every list is in a
fixed order (contract order, phases in natural order, findings by file and line), so the same inputs give
the same report byte for byte. Parts that belong to other subsystems (the build, the layout diff,
mutation testing, the launcher scan) are optional: where one is missing or cannot run here the report
says so ("not built here", "not available", "not run") instead of failing.

>>> run = run_check(Path("."))                                   # doctest: +SKIP
>>> report = collect_report(run, ReportOptions())                 # doctest: +SKIP
>>> report.verdict.level                                          # doctest: +SKIP
'incomplete'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..dims import Expr, format_shape
from ..errors import UserError
from ..evidence import Freshness
from ..findings import Finding, NotRun, Severity
from ..graph import Wiring
from ..model import ContractSet, IsvParam, Kernel, ScalarParam, Schedule, TensorParam
from ..cases import case_matrix, launch_env, representative_env
from ..shapes import value_at
from .filters import anchor, format_bytes, percent
from .history import FileHistory, GitHistory
from .matrix import check_matrix
from .prototype import c_prototype
from .views import (
    BAD,
    NONE,
    OK,
    WARN,
    BuildView,
    CheckRow,
    EvidenceGap,
    EvidenceView,
    GeometryRow,
    HostRef,
    IsvView,
    KernelView,
    LayoutChangeRow,
    LayoutDiffView,
    MutationView,
    ParamRow,
    PhaseView,
    Report,
    ReportOptions,
    ScheduleView,
    SlotRow,
    Status,
    StepRow,
    Survivor,
    Verdict,
)

if TYPE_CHECKING:
    from ..api import CheckRun

__all__ = ["Report", "ReportOptions", "collect_report", "device_name", "phase_sort_key"]

# ---------------------------------------------------------------------------------------------------


def collect_report(run: CheckRun, options: ReportOptions = ReportOptions()) -> Report:
    """The report over one check run: its findings and facts, plus mutation records, history and dims."""
    from ..load import gc_paused

    with gc_paused():  # a large, long-lived, acyclic object graph (see audit.load.gc_paused)
        return _collect_report(run, options)


def _collect_report(run: CheckRun, options: ReportOptions) -> Report:
    cfg, cs, result = run.config, run.contracts, run.result
    wiring = run.context.wiring  # the one the check's rules used
    history = GitHistory.open(cfg.root, options.history)
    history.prefetch(sorted({k.source for k in cs.kernels} | {k.loc.file for k in cs.kernels if k.loc.file}))
    build, build_note, toolchain = _build(run)
    fresh = run.fact("evidence")
    no_evidence = fresh.reason if isinstance(fresh, NotRun) else ""
    if isinstance(fresh, NotRun):
        fresh = {}
    env, representative = _representative_env(cs, dict(options.at))
    scan = run.fact("launchers") if cfg.launchers else None
    launcher_note = _scrub(scan.reason, cfg.root) if isinstance(scan, NotRun) else ""
    if isinstance(scan, NotRun):
        scan = None
    mutation_dir = cfg.path(cfg.reports) / "mutation"

    findings_of: dict[str, list[Finding]] = {}  # subject -> its findings, in the result's order
    for f in result.findings:
        findings_of.setdefault(f.subject, []).append(f)
    kernels = [
        _kernel_view(cfg, cs, k, wiring, findings_of.get(k.name, []), history, build, fresh, env, scan, mutation_dir, no_evidence)
        for k in cs.kernel_map.values()
    ]
    phases: dict[str, list[KernelView]] = {}
    for kv in kernels:
        phases.setdefault(kv.phase or "unphased", []).append(kv)
    phase_views = [
        PhaseView(name, anchor(f"phase {name}"), phases[name]) for name in sorted(phases, key=phase_sort_key)
    ]
    ordered = [kv for p in phase_views for kv in p.kernels]
    schedules = [_schedule_view(cs, s, wiring, fresh, no_evidence) for s in cs.schedule_map.values()]
    isv = _isv_view(cfg, cs, options.base, run.fact("fingerprint"))
    errors = len(result.errors)
    warnings = sum(1 for f in result.findings if f.severity is Severity.WARNING)
    gaps = [
        EvidenceGap(f.kind, f.subject, f.status, f.reason)
        for _, f in sorted(fresh.items(), key=lambda kv: (kv[1].kind != "kernel", kv[1].subject))
        if f.status != "verified"
    ]
    units = _header_units(cfg, cs)  # read once: the header records' judges and the headers without a record
    report = Report(
        title="Wire-up audit",
        verdict=Verdict("", "", []),
        totals=[],
        phases=phase_views,
        kernels=ordered,
        schedules=schedules,
        isv=isv,
        findings=list(result.findings),
        suppressed=list(result.suppressed),
        not_run=sorted(result.not_run, key=lambda n: n.rule),
        errors=errors,
        warnings=warnings,
        rules_ran=len(result.ran),
        evidence_gaps=gaps,
        build_note=build_note,
        toolchain=toolchain,
        representative=representative,
        launchers=list(cfg.launchers),
        launcher_note=launcher_note,
        unaudited=scan.unaudited if scan is not None else [],
        history=history.available,
        inputs=_inputs(cfg),
        header_mutations=_header_mutations(mutation_dir, cfg.root, _header_judges(cfg, cs, units)),
    )
    recorded = {name for name, _ in report.header_mutations}
    report.header_mutation_missing = [h for h in _mutated_headers(cfg, cs, units) if h not in recorded]
    report.totals = _totals(report)
    report.verdict = _verdict(report, fresh)
    return report


# ---------------------------------------------------------------------------------------------------
# small helpers the templates use too


def phase_sort_key(name: str) -> tuple:
    """Natural order: A1, A2, ..., A10, B; kernels without a phase come last.

    >>> sorted(["B", "A10", "A2", "unphased", "A1"], key=phase_sort_key)
    ['A1', 'A2', 'A10', 'B', 'unphased']
    """
    if name == "unphased":
        return (1,)
    parts = re.split(r"(\d+)", name)
    return (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts if p))


def _scrub(text: str, root: Path) -> str:
    """``text`` with the project's absolute path cut out: the report must not depend on the checkout's place."""
    root_text = str(root.resolve())
    return text.replace(root_text + "/", "").replace(f'"{root_text}"', '"."').replace(root_text, ".")


def _inputs(cfg: Config) -> list[str]:
    return [f"{cfg.contracts}/", f"{cfg.kernels}/", f"{cfg.evidence}/", f"{cfg.reports}/mutation/"]


# ---------------------------------------------------------------------------------------------------
# dims


_representative_env = representative_env  # one module (audit.cases) builds every dim environment


def _values(exprs: Sequence[Expr], env: Mapping[str, int], slots: Mapping[str, int]) -> str:
    out = []
    for e in exprs:
        v = value_at(e, env, slots)
        out.append(str(v) if v is not None else e.text)
    return "[" + ", ".join(out) + "]"


def _bound_shape(shape: Sequence[Expr], env: Mapping[str, int]) -> str:
    """``[B, 256]`` for ``[B, SH2]``: fixed and derived dims as numbers, runtime and local ones as written."""
    return _values(shape, env, {})


# ---------------------------------------------------------------------------------------------------
# kernels


def _kernel_view(cfg, cs, k: Kernel, wiring: Wiring, own_findings: list[Finding], history: GitHistory, build, fresh, rep_env, scan, mutation_dir, no_evidence: str) -> KernelView:
    fixed = cs.fixed_env
    slots = cs.slot_indices
    params = []
    masks, saved, partials = [], [], []
    for i, p in enumerate(k.params):
        if isinstance(p, TensorParam):
            notes = []
            if p.mask is not None:
                text = f"mask: rows where {p.name} = {p.mask.skip_value} are skipped"
                if p.mask.zeroes:
                    text += "; their rows of " + ", ".join(p.mask.zeroes) + " are exactly zero"
                notes.append(text)
                masks.append(f"{p.name}: {text[6:]}")
            if p.saved:
                notes.append("saved for backward")
                saved.append(p.name)
            if p.partial_of:
                notes.append(f"per-sample partial of {p.partial_of}")
                partials.append(f"{p.name} → {p.partial_of}")
            if p.optional:
                notes.append("optional (may be NULL)")
            if p.write_range is not None:
                notes.append(f"writes {p.write_range.text} only; the rest is left as it was")
            alias = k.alias_of(p.name)
            if alias is not None:
                notes.append(f"aliased with {alias} (one pointer, in place)")
            if p.doc:
                notes.append(p.doc)
            shape = format_shape(p.shape)
            bound = _bound_shape(p.shape, fixed)
            params.append(ParamRow(i, p.name, "tensor", p.dtype, shape, bound if bound != shape else "", p.role, notes))
        elif isinstance(p, ScalarParam):
            if isinstance(p.value, Expr):
                v = value_at(p.value, fixed, slots)
                value = p.value.text + (f" = {v}" if v is not None and str(v) != p.value.text else "")
            elif p.value is None:
                value = "(no value)"
            elif hasattr(p.value, "slot"):  # isv(SLOT): a host-side read
                value = f"{p.value.text} (read on the host at launch time)"
            else:
                value = repr(p.value)
            params.append(ParamRow(i, p.name, "scalar", p.dtype, "", "", f"value {value}", [p.doc] if p.doc else []))
        elif isinstance(p, IsvParam):
            params.append(ParamRow(i, p.name, "isv", "f32", f"[{cs.isv.total_dim}]" if cs.isv else "", "", "ISV pointer", [p.doc] if p.doc else []))
    reads = [
        f"{r.slot} ({slots[r.slot]})" + (" — previous step's value" if r.previous_step else "") if r.slot in slots else r.slot
        for r in k.isv_reads
    ]
    writes = [f"{w} ({slots[w]})" if w in slots else w for w in k.isv_writes]

    expr_row = GeometryRow(
        "expression", format_shape(k.grid), format_shape(k.block), k.shared_bytes.text if k.shared_bytes else "0"
    )
    geometry, sites = _geometry(cs, k, wiring, rep_env)
    # evidence findings repeat what the GPU verification line says; the Findings section lists them all
    findings = [f for f in own_findings if f.category != "evidence"]
    ev = _evidence_view(fresh.get(k.name), no_evidence)
    build_view = _build_view(build, k)
    host = scan.references.get(k.name, []) if scan is not None else None
    host_refs = [HostRef(r.file, r.line, r.kind, r.text) for r in host] if host is not None else None
    mutation = _mutation_view(mutation_dir / f"{k.name}.json", cfg.root)

    return KernelView(
        name=k.name,
        anchor=anchor(k.name),
        phase=k.phase,
        stage=k.stage,
        doc=k.doc,
        source=k.source,
        symbol=k.symbol,
        contract=str(k.loc),
        contract_file=k.loc.file,
        prototype=c_prototype(k),
        params=params,
        masks=masks,
        isv_reads=reads,
        isv_writes=writes,
        saved=saved,
        partials=partials,
        geometry_expr=expr_row,
        geometry=geometry,
        launch_sites=sites,
        host_refs=host_refs,
        build=build_view,
        evidence=ev,
        mutation=mutation,
        source_history=history.of(k.source),
        contract_history=history.of(k.loc.file) if k.loc.file else FileHistory("", "not in git"),
        findings=findings,
        compiled=_compiled_status(build_view),
        checked=_checked_status(findings),
        wired=_wired_status(sites, host_refs, bool(cfg.launchers)),
        verified=_verified_status(ev),
    )


def _geometry(cs: ContractSet, k: Kernel, wiring: Wiring, env: dict[str, int]) -> tuple[list[GeometryRow], list[str]]:
    """Geometry values at the representative dims, one row per distinct launch configuration."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    sites = []
    slots = cs.slot_indices
    for sname, launch in wiring.launches_by_kernel.get(k.name, ()):  # indexed once, not a scan per kernel
        site = f"{sname} step {launch.step.index + 1}"
        sites.append(site)
        local_env = launch_env(cs, k, launch, env) if k.dims else env
        key = (
            _values(k.grid, local_env, slots),
            _values(k.block, local_env, slots),
            format_bytes(value_at(k.shared_bytes, local_env, slots)) if k.shared_bytes else "0 B",
        )
        rows.setdefault(key, []).append(site)
    if not rows:
        key = (_values(k.grid, env, slots), _values(k.block, env, slots),
               format_bytes(value_at(k.shared_bytes, env, slots)) if k.shared_bytes else "0 B")  # fmt: skip
        rows[key] = ["(not launched)"]
    out = [GeometryRow(_sites_text(where), grid, block, shared) for (grid, block, shared), where in rows.items()]
    return out, sites


def _sites_text(sites: list[str]) -> str:
    """``aux_heads_backward steps 16, 18; aux_heads_backward_fused step 8`` for a list of launch sites."""
    per: dict[str, list[str]] = {}
    for site in sites:
        name, sep, step = site.rpartition(" step ")
        if not sep:
            return "; ".join(sites)
        per.setdefault(name, []).append(step)
    return "; ".join(f"{name} step{'s' if len(steps) > 1 else ''} {', '.join(steps)}" for name, steps in per.items())


def _compiled_status(b: BuildView) -> Status:
    if b.state == "ok":
        return Status(OK, f"code {format_bytes(b.code_size)}" if b.code_size is not None else "compiled")
    if b.state == "failed":
        return Status(BAD, "compile failed")
    return Status(NONE, b.text)


def _checked_status(findings: list[Finding]) -> Status:
    relevant = [f for f in findings if f.category != "launchers"]  # launchers have the "wired" column
    errors = sum(1 for f in relevant if f.severity is Severity.ERROR)
    warnings = sum(1 for f in relevant if f.severity is Severity.WARNING)
    if errors:
        return Status(BAD, f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        return Status(WARN, f"{warnings} warning{'s' if warnings != 1 else ''}")
    return Status(OK, "clean")


def _wired_status(sites: list[str], host_refs: list[HostRef] | None, scanned: bool) -> Status:
    if not sites:
        return Status(BAD, "dead code — no launcher (in no schedule)")
    if scanned and host_refs is not None and not any(r.kind == "launch" for r in host_refs):
        return Status(BAD, "dead code — no launcher (no host code launches it)")
    if len(sites) == 1:
        return Status(OK, sites[0])
    per_schedule: dict[str, int] = {}
    for site in sites:
        name = site.rsplit(" step ", 1)[0]
        per_schedule[name] = per_schedule.get(name, 0) + 1
    return Status(OK, ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in per_schedule.items()))


def _verified_status(ev: EvidenceView) -> Status:
    if ev.status == "verified":
        return Status(OK, f"{ev.device or 'GPU'}, {ev.date[:10]}" if ev.date else (ev.device or "verified"))
    if ev.status == "failed":
        return Status(BAD, "failed" + (f" ({ev.date[:10]})" if ev.date else ""))
    if ev.status == "stale":
        return Status(WARN, "stale" + (f" (last {ev.date[:10]})" if ev.date else ""))
    return Status(WARN, "missing")


# ---------------------------------------------------------------------------------------------------
# build


def _build(run: CheckRun) -> tuple[Any, str, str]:
    """(the check run's build or None, why there is none, toolchain line)."""
    if "build" not in run.context.providers and "build" not in run.context.facts:
        return None, "build support is not available in this installation", ""
    result = run.fact("build")
    if isinstance(result, NotRun):  # nvcc missing, and other problems the user can fix
        return None, f"not built here: {_scrub(result.reason, run.config.root)}", ""
    return result, "", f"nvcc {result.nvcc_version}, arch {result.arch}, flags {' '.join(result.flags)}"


def _build_view(build: Any, k: Kernel) -> BuildView:
    cubin = PurePosixPath(k.source).with_suffix(".cubin").name
    if build is None:
        return BuildView("not_built", "not built here", cubin)
    try:
        source_build, entry = build.kernel(k)
    except KeyError:  # its source does not exist (SOURCE_MISSING says so)
        return BuildView("not_built", "no build result", cubin)
    if not source_build.ok:
        return BuildView("failed", "compile failed", cubin)
    view = BuildView("ok", "compiled", cubin, source_build.code_bytes())
    if entry is not None:
        view.registers = entry.registers
        view.spill_stores = entry.spill_stores
        view.spill_loads = entry.spill_loads
        view.shared_static_bytes = entry.shared_static_bytes
        view.stack_frame = entry.stack_frame
    return view


# ---------------------------------------------------------------------------------------------------
# evidence and mutation


def device_name(device: Any) -> str:
    """The device's name from an evidence record's ``device`` table."""
    if isinstance(device, Mapping):
        for key in ("name", "device", "model"):
            if device.get(key):
                return str(device[key])
        return ""
    return str(device or "")


def _evidence_view(f: Freshness | None, no_evidence: str = "") -> EvidenceView:
    if f is None:
        return EvidenceView("missing", no_evidence or "no source file to verify")
    rec = f.record
    if rec is None:
        return EvidenceView(f.status, f.reason)
    checks = [CheckRow(c.name, c.verdict, c.size, c.max_abs_err, c.max_rel_err, c.rel_norm_err, c.detail) for c in rec.checks]
    tails = [f"{t.get('kernel')} {t.get('field')} {t.get('expr')}: " + (f"{t.get('exact', 0)} case(s) without a remainder, {t.get('tail', 0)} with one" if t.get("covered")
             else f"not covered ({t.get('message', '')})") for t in getattr(rec, "tails", [])]  # fmt: skip
    view = EvidenceView(f.status, f.reason, device_name(rec.device), rec.date, rec.backend, list(rec.sizes), checks, check_matrix(checks), tails)
    view.inputs_compared = f.inputs_compared
    cases = list(getattr(rec, "cases", []) or [])
    if cases:
        dims, rows = case_matrix(cases)
        refs = list(getattr(rec, "references", []) or [])
        view.cases_recorded = True
        view.case_dims = dims
        view.case_values = [["—" if v is None else str(v) for v in row] for row in rows]
        view.case_references = refs if len(refs) == len(cases) else []
    return view


def _header_units(cfg: Config, cs: Any) -> dict[str, Any] | None:
    """The included headers and the kernels including each (:func:`audit.cuda.headers.header_units`), read
    once for the report; None where the includes cannot be read."""
    from ..cuda.headers import header_units

    try:
        return header_units(cfg, cs)
    except (UserError, OSError, ValueError):
        return None


def _mutated_headers(cfg: Config, cs: Any, units: dict[str, Any] | None = None) -> list[str]:
    """The included headers ``wireup mutate --all`` mutates (none where they cannot be read)."""
    from ..cuda.headers import reached_headers

    try:
        return reached_headers(cfg, cs, units)
    except (UserError, OSError, ValueError):
        return []


def _header_judges(cfg: Config, cs: Any, units: dict[str, Any] | None = None) -> dict[str, tuple[list[str], dict[str, str]]] | None:
    """Each included header: the kernels including it now and their sources' hashes without it
    (:func:`audit.cuda.headers.judge_hashes`); None where the includes cannot be read."""
    from ..cuda.headers import judge_hashes

    units = _header_units(cfg, cs) if units is None else units
    if units is None:
        return None
    try:
        return {name: (list(u.kernels), judge_hashes(cfg, cs, u)) for name, u in units.items()}
    except (UserError, OSError, ValueError):
        return None


def _header_mutations(folder: Path, root: Path | None = None,
                      judges: Mapping[str, tuple[list[str], dict[str, str]]] | None = None) -> list[tuple[str, MutationView]]:  # fmt: skip
    """The header mutants' records in ``folder`` (``"header": true``), by header name, in name order. With
    ``judges`` (:func:`_header_judges`) a record is stale too where the kernels that judged its mutants are
    not those that include the header now, or their sources changed since the run."""
    out: list[tuple[str, MutationView]] = []
    try:
        paths = sorted(p for p in folder.glob("*.json") if p.is_file())
    except OSError:
        return out
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, Mapping) and data.get("header") is True:
            name = str(data.get("kernel", path.stem))
            view = _mutation_view(path, root, None if judges is None else judges.get(name, ([], {})))
            if view is not None:
                out.append((name, view))
    return out


def _mutation_view(path: Path, root: Path | None = None, judges: tuple[list[str], dict[str, str]] | None = None) -> MutationView | None:
    """The record at ``path``; with ``root``, its score is marked stale where the source it was made from (the
    record's ``source``, under ``root``) no longer has the record's ``source_sha256``: the score is of other code."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        mutants = int(data.get("mutants", 0))
        caught = int(data.get("caught", 0))
        equivalent = int(data.get("equivalent") or 0)
        selected = int(data["selected"]) if data.get("selected") is not None else None
        generated = int(data["generated"]) if data.get("generated") is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    # the run's score is caught / (mutants - equivalent); a record without one (an older format) is caught / mutants
    counted: int | None = mutants - equivalent if "score" in data else mutants
    baseline = data.get("baseline", "pass")
    if baseline != "pass":
        rules = ", ".join(dict.fromkeys(str(f).split(":", 1)[0] for f in data.get("baseline_findings") or [])) or baseline
        score, counted = f"not scored: the unmutated kernel fails its checks in that run ({rules})", None
    elif "score" in data and data["score"] is None:
        score, counted = "not scored (no mutant counts)" if mutants - equivalent <= 0 else "not scored", None
    elif counted:
        eq = f"; {equivalent} equivalent mutant{'s' if equivalent != 1 else ''} not counted" if "score" in data and equivalent else ""
        sample = f"; a sample: {selected} of its {generated} mutants run" if selected is not None and generated is not None and selected < generated else ""
        score = f"{caught} of {counted} caught ({percent(caught / counted)}{eq}{sample})"
    else:
        score = "no mutants"
    stale = _stale_source(data, root) or (_stale_judges(data, *judges) if judges is not None else "")
    if stale:
        score += f"; stale: {stale}"
    by_check = sorted((str(k), v) for k, v in (data.get("by_check") or {}).items())
    survivors = [
        Survivor(str(s.get("id", "")), bool(s.get("equivalent", False)), str(s.get("reason", "")), str(s.get("diff", "")))
        for s in data.get("survivors") or []
        if isinstance(s, Mapping)
    ]
    judged = [str(k) for k in data.get("judged_by") or []] if isinstance(data.get("judged_by"), list) else []
    return MutationView(mutants, caught, score, by_check, survivors, device_name(data.get("device")), str(data.get("date", "")), counted,
                        selected, generated, stale, judged, _passes_text(data))  # fmt: skip


#: the passes ``wireup mutate`` can put survivors through after verify, in its order (audit.mutate's PASSES;
#: a test keeps the two equal: the report does not import the mutation layer)
MUTATION_PASSES = ("memcheck", "racecheck", "perturb")


def _passes_text(data: Mapping[str, Any]) -> str:
    """``memcheck, perturb (not run: racecheck)`` from a record's ``settings.sanitizers`` (the passes the run
    chose), "" where the record names none (a format before passes were recorded)."""
    settings = data.get("settings")
    ran = settings.get("sanitizers") if isinstance(settings, Mapping) else None
    if not isinstance(ran, Mapping):
        return ""
    names = [str(k) for k in ran]
    missing = [p for p in MUTATION_PASSES if p not in names]
    text = ", ".join(names) or "none"
    return text + (f" (not run: {', '.join(missing)})" if missing else "")


def _stale_source(data: Mapping[str, Any], root: Path | None) -> str:
    """Why a mutation record no longer describes its source ("" where it does, or where it cannot tell: no
    root, or a record without ``source``/``source_sha256``)."""
    import hashlib

    source, want = data.get("source"), data.get("source_sha256")
    if root is None or not isinstance(source, str) or not isinstance(want, str):
        return ""
    when = str(data.get("date", ""))[:10]
    try:
        text = (Path(root) / source).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return f"{source} cannot be read"
    if hashlib.sha256(text.encode()).hexdigest() != want:
        return f"{source} changed since this run" + (f" ({when})" if when else "")
    return ""


def _stale_judges(data: Mapping[str, Any], now: Sequence[str], hashes: Mapping[str, str]) -> str:
    """Why a header record no longer describes the kernels that judge its mutants ("" where it does): the
    kernels including the header now are not those the run judged against (``judged_by``), or a record
    that kept their sources' hashes (``judged_sources``) names one that changed since."""
    was = [str(k) for k in data.get("judged_by") or []]
    when = str(data.get("date", ""))[:10]
    at = f" ({when})" if when else ""
    gone = [k for k in was if k not in now]
    new = [k for k in now if k not in was]
    parts = []
    if gone:
        parts.append(f"judged against {', '.join(gone)}, which no longer include{'s' if len(gone) == 1 else ''} it")
    if new:
        parts.append(f"not against {', '.join(new)}, which include{'s' if len(new) == 1 else ''} it now")
    if parts:
        return "its mutants were " + ", and ".join(parts) + at
    kept = data.get("judged_sources")
    if isinstance(kept, Mapping):
        changed = [k for k in now if k in kept and kept[k] != hashes.get(k)]
        if changed:
            return f"the sources of {', '.join(changed)}, which judged its mutants, changed since this run{at}"
    return ""


# ---------------------------------------------------------------------------------------------------
# launchers


# ---------------------------------------------------------------------------------------------------
# schedules


def _schedule_view(cs: ContractSet, s: Schedule, wiring: Wiring, fresh: Mapping[str, Freshness], no_evidence: str) -> ScheduleView:
    from ..draw import mermaid

    steps = []
    for st in s.steps:
        if st.zero:
            steps.append(StepRow(st.index + 1, "zero", st.zero, ""))
            continue
        binds = []
        for pname, b in st.bind:
            target = "NULL" if b.is_null else (b.buffer or "")
            if b.offset is not None:
                target += f"[{b.offset.text}:]"  # a slice of the flat buffer from that element
            if b.view is not None:
                target += f" as {format_shape(b.view)}"
            binds.append(f"{pname} = {target}")
        binds += [f"{n} = {e.text}" for n, e in st.dims]
        steps.append(StepRow(st.index + 1, "launch", st.launch or "", ", ".join(binds)))
    return ScheduleView(
        name=s.name,
        anchor=anchor(f"schedule {s.name}"),
        doc=s.doc,
        stream=s.stream,
        graph_capture=s.graph_capture,
        after=list(s.after),
        equivalent_to=s.equivalent_to,
        steps=steps,
        mermaid=mermaid(cs, s.name, wiring),
        evidence=_evidence_view(fresh.get(f"schedule:{s.name}"), no_evidence),
    )


# ---------------------------------------------------------------------------------------------------
# ISV


def _format_reset(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    f = float(value)
    return repr(0.0 if f == 0.0 else f)


def _isv_view(cfg: Config, cs: ContractSet, base: str | None, computed: str | NotRun) -> IsvView | None:
    isv = cs.isv
    if isv is None:
        return None
    readers: dict[str, set[str]] = {}
    writers: dict[str, set[str]] = {}
    for k in cs.kernels:
        for r in k.isv_reads:
            readers.setdefault(r.slot, set()).add(k.name)
        for w in k.isv_writes:
            writers.setdefault(w, set()).add(k.name)
    rows = []
    for s in sorted(isv.slots, key=lambda s: (s.index, s.name)):
        index = str(s.index) if s.count == 1 else f"{s.index}–{s.index + s.count - 1}"
        rows.append(SlotRow(
            index, s.name, s.count, s.dtype, s.role, [_format_reset(s.reset_value(ev)) for ev in isv.reset_events],
            sorted(readers.get(s.name, ())), sorted(writers.get(s.name, ())), s.doc,
        ))  # fmt: skip
    computed = computed if isinstance(computed, str) else ""  # the check run's fact
    pinned = isv.fingerprint or ""
    if not computed:
        note = "the check run computed no fingerprint here, so it is not shown"
    elif not pinned:
        note = "no fingerprint is pinned in the contract"
    elif pinned == computed:
        note = "the pinned fingerprint matches the layout"
    else:
        note = f"the pinned fingerprint {pinned} differs from the layout's {computed}"
    diff = _layout_diff(cfg, cs, base) if base else None
    return IsvView(isv.buffer, isv.dtype, isv.total_dim, list(isv.reset_events), rows, pinned, computed, note, diff)


def _layout_diff(cfg: Config, cs: ContractSet, base: str) -> LayoutDiffView:
    try:
        from ..layout import diff_layouts, load_layout_at_revision
    except ImportError:
        return LayoutDiffView(base, "unavailable", "the layout diff is not available in this installation")
    try:
        old = load_layout_at_revision(base, cfg.root, cfg.contracts)
    except UserError as exc:  # an unknown revision, no layout there, contracts that do not load
        return LayoutDiffView(base, "error", _scrub(" ".join(str(exc).split()), cfg.root).rstrip("."))
    d = diff_layouts(old, cs.isv)
    changes = [
        LayoutChangeRow(c.rule, c.message, _idx(c.old_index), _idx(c.new_index), c.slot or "") for c in d.changes
    ]
    return LayoutDiffView(base, "ok", "", d.summary_lines(), changes)


def _idx(v: Any) -> str:
    return "—" if v is None else str(v)


# ---------------------------------------------------------------------------------------------------
# totals and verdict


def _count(kernels: list[KernelView], attr: str, state: str) -> int:
    return sum(1 for kv in kernels if getattr(kv, attr).state == state)


def _totals(r: Report) -> list[tuple[str, Status]]:
    ks = r.kernels
    n = len(ks)
    out = []
    built = _count(ks, "compiled", OK)
    failed = _count(ks, "compiled", BAD)
    if r.build_note:
        out.append(("compiled", Status(NONE, r.build_note)))
    else:
        out.append(("compiled", Status(BAD if failed else OK, f"{built} of {n}" + (f", {failed} failed" if failed else "") + (f" ({r.toolchain})" if r.toolchain else ""))))
    clean = _count(ks, "checked", OK)
    # evidence warnings have a row of their own; they do not make the contract check any less clean
    contract_warnings = sum(1 for f in r.findings if f.severity is Severity.WARNING and f.category != "evidence")
    state = BAD if r.errors else (WARN if clean < n or contract_warnings else OK)
    out.append(("contract checked", Status(state, f"{clean} of {n} kernels clean; wireup check: {r.errors} error(s), {r.warnings} warning(s)")))
    wired = _count(ks, "wired", OK)
    out.append(("wired", Status(OK if wired == n else BAD, f"{wired} of {n} launched" + (f", {n - wired} dead code" if wired < n else ""))))
    verified = _count(ks, "verified", OK)
    stale = sum(1 for kv in ks if kv.evidence.status == "stale")
    missing = sum(1 for kv in ks if kv.evidence.status == "missing")
    vfailed = sum(1 for kv in ks if kv.evidence.status == "failed")
    state = BAD if vfailed else (OK if verified == n else WARN)
    older = sum(1 for kv in ks if kv.evidence.status == "verified" and not kv.evidence.inputs_compared)
    note = (f"; {older} verified before records named their inputs: an edited dim, ISV layout, bound buffer or writer's domain "
            "is not seen for them") if older else ""  # fmt: skip
    out.append(("GPU-verified", Status(state, f"{verified} of {n} ({stale} stale, {missing} missing, {vfailed} failed){note}")))
    mutated = [kv for kv in ks if kv.mutation is not None]
    heads = [v for _, v in r.header_mutations]
    if mutated or heads:
        scored = [kv.mutation for kv in mutated if kv.mutation.counted is not None]
        unscored = len(mutated) - len(scored)
        caught = sum(m.caught for m in scored)
        total = sum(m.counted or 0 for m in scored)
        score = f"{caught} of {total} mutants caught" + (f" ({percent(caught / total)})" if total else "")
        text = f"{score} over {len(scored)} of {n} kernels" + (f"; {unscored} not scored" if unscored else "")
        stale = sum(1 for m in [kv.mutation for kv in mutated] + heads if m.stale)
        if stale:
            text += f"; {stale} stale record{'s' if stale != 1 else ''} (of an older source, or of a header judged by other kernels than now)"
        full = caught == total and not unscored and not stale
        if heads:
            hscored = [m for m in heads if m.counted is not None]
            hcaught, htotal = sum(m.caught for m in hscored), sum(m.counted or 0 for m in hscored)
            text += (f"; header mutants: {hcaught} of {htotal} caught over {len(hscored)} of {len(heads)} headers"
                     " (each judged against every kernel including it)")  # fmt: skip
            full = full and hcaught == htotal and len(hscored) == len(heads)
        if r.header_mutation_missing:
            text += "; header mutants not run for " + ", ".join(r.header_mutation_missing)
            full = False
        views = [kv.mutation for kv in mutated] + heads
        if all(m.selected is not None and m.generated is not None for m in views):
            selected, generated = sum(m.selected or 0 for m in views), sum(m.generated or 0 for m in views)
            if selected < generated:
                # a sample is not a full score: it says nothing about the mutants not run
                text += f"; a sample, not a full score: {selected} of {generated} generated mutants run"
                full = False
        else:
            full = False  # a record without its generated count (an older format) may be a sample
        out.append(("mutation score", Status(OK if full else WARN, text)))
    else:
        out.append(("mutation score", Status(NONE, "not run")))
    return out


def _verdict(r: Report, fresh: Mapping[str, Freshness]) -> Verdict:
    reasons_fail, reasons_open = [], []
    n = len(r.kernels)
    if r.errors:
        reasons_fail.append(f"wireup check reports {r.errors} error(s)")
    failed_ev = sorted(f.subject for f in fresh.values() if f.status == "failed")
    if failed_ev:
        reasons_fail.append("GPU verification failed for " + ", ".join(failed_ev))
    build_failed = [kv.name for kv in r.kernels if kv.compiled.state == BAD]
    if build_failed:
        reasons_fail.append("compile failed for " + ", ".join(build_failed))
    dead = [kv.name for kv in r.kernels if kv.wired.state != OK]
    if dead:
        reasons_open.append(f"{len(dead)} kernel(s) are dead code with no launcher: " + ", ".join(dead))
    unverified = [kv for kv in r.kernels if kv.evidence.status in ("stale", "missing")]
    if unverified:
        stale = sum(1 for kv in unverified if kv.evidence.status == "stale")
        reasons_open.append(f"{len(unverified)} of {n} kernels lack current GPU evidence ({stale} stale, {len(unverified) - stale} missing)")
    if r.build_note:
        reasons_open.append(f"the build facts are missing ({r.build_note})")
    if reasons_fail:
        return Verdict("fail", "not wired up", reasons_fail + reasons_open)
    if reasons_open:
        return Verdict("incomplete", "statically sound, not yet fully proven", reasons_open)
    return Verdict("pass", "wired up and GPU-verified", [f"all {n} kernels compile, pass the contract check, are launched and have current GPU evidence"])
