"""Evidence records: what a GPU verification run proved, keyed by the hashes of what it ran.

``wireup verify`` writes one JSON record per verified kernel or schedule and backend under
``reports/evidence/{kernels,schedules}/<name>.<backend>.json``. A record names the source hash (the
``.cu`` file and its local headers), the contract hash, the cubin hash, the build flags, the device,
driver and CUDA versions, the backend, seed and sizes, and every check with its verdict and errors.
Static checks read them back: a kernel whose current source or contract has no passing record is
"changed since its last GPU verification".

Records are written atomically as sorted, indented JSON so they diff well; the date inside comes from
the run, never from rendering.

>>> recs = load_records(Path("reports/evidence"))          # doctest: +SKIP
>>> freshness(cs, cfg, recs)["aux_trunk_forward"].status   # doctest: +SKIP
'verified'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_text_atomic
from .hashing import contract_hash, files_hash, include_closure, source_hash

FORMAT_VERSION = 1


@dataclass
class CheckOutcome:
    """One check of a verification run: its name, verdict and the numbers behind it."""

    name: str
    verdict: str  # "pass" | "fail" | "not_run"
    detail: str = ""
    size: str = ""  # e.g. "B=4096 valid=3%"
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_norm_err: float | None = None


@dataclass
class EvidenceRecord:
    """The outcome of verifying one kernel or schedule on one backend."""

    subject: str
    kind: str  # "kernel" | "schedule"
    backend: str
    verdict: str  # "pass" | "fail"
    source_hash: str
    contract_hash: str
    cubin_hashes: dict[str, str] = field(default_factory=dict)  # source path -> sha256 of its cubin
    build_flags: list[str] = field(default_factory=list)
    arch: str = ""
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    sizes: list[str] = field(default_factory=list)
    checks: list[CheckOutcome] = field(default_factory=list)
    date: str = ""
    duration_s: float | None = None
    format: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvidenceRecord:
        d = dict(data)
        d["checks"] = [CheckOutcome(**c) for c in d.get("checks", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def failed_checks(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.verdict == "fail"]


def record_path(folder: Path, kind: str, subject: str, backend: str) -> Path:
    return folder / f"{kind}s" / f"{subject}.{backend}.json"


def write_record(folder: Path, record: EvidenceRecord) -> Path:
    """Write ``record`` atomically; returns its path."""
    path = record_path(folder, record.kind, record.subject, record.backend)
    write_text_atomic(path, record.to_json())
    return path


def load_records(folder: Path) -> list[EvidenceRecord]:
    """Every readable record under ``folder`` (unreadable files are skipped, not fatal)."""
    out = []
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*/*.json")):
        try:
            out.append(EvidenceRecord.from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return out


# ---------------------------------------------------------------------------------------------------
# current hashes of what a record must match


def kernel_source_hash(cs, cfg, kernel) -> str:
    root = cs.root
    return source_hash(root / kernel.source, [cfg.path(d) for d in cfg.include_dirs], root)


def schedule_hashes(cs, cfg, schedule) -> tuple[str, str]:
    """(source hash, contract hash) of a schedule: every kernel it launches plus the wiring itself."""
    root = cs.root
    kernels = [cs.kernel_map[s.launch] for s in schedule.launches if s.launch in cs.kernel_map]
    paths: dict[Path, None] = {}
    for k in kernels:
        for p in include_closure(root / k.source, [cfg.path(d) for d in cfg.include_dirs]):
            paths[p] = None
    src = files_hash(sorted(paths, key=lambda p: p.as_posix()), root)
    unique = {k.name: k for k in kernels}
    con = contract_hash([schedule, [unique[n] for n in sorted(unique)], cs.isv, [cs.buffer_map[b] for b in sorted(_buffers(schedule)) if b in cs.buffer_map]])
    return src, con


def _buffers(schedule) -> set[str]:
    out = set()
    for step in schedule.steps:
        if step.zero:
            out.add(step.zero)
        for _, b in step.bind:
            if b.buffer:
                out.add(b.buffer)
    return out


@dataclass
class Freshness:
    """Where a kernel or schedule stands against its evidence."""

    subject: str
    kind: str
    status: str  # "verified" | "stale" | "missing" | "failed"
    record: EvidenceRecord | None = None
    reason: str = ""


def freshness(cs, cfg, records: Iterable[EvidenceRecord], cubin_hashes: Mapping[str, str] | None = None) -> dict[str, Freshness]:
    """Status of every kernel and schedule: verified (a passing record matches the current hashes),
    failed (the matching record failed), stale (records exist for other hashes) or missing."""
    by_subject: dict[tuple[str, str], list[EvidenceRecord]] = {}
    for r in records:
        by_subject.setdefault((r.kind, r.subject), []).append(r)
    out: dict[str, Freshness] = {}
    for k in cs.kernels:
        if not (cs.root / k.source).is_file():
            continue
        src = kernel_source_hash(cs, cfg, k)
        con = contract_hash(k)
        cubin = (cubin_hashes or {}).get(k.source)
        out[k.name] = _status("kernel", k.name, by_subject.get(("kernel", k.name), []), src, con, cubin, k.source)
    for s in cs.schedules:
        try:
            src, con = schedule_hashes(cs, cfg, s)
        except OSError:
            continue
        out[f"schedule:{s.name}"] = _status("schedule", s.name, by_subject.get(("schedule", s.name), []), src, con, None, None)
    return out


def _status(kind, name, recs, src, con, cubin, source_path) -> Freshness:
    if not recs:
        return Freshness(name, kind, "missing", None, "no GPU verification record")
    matching = [r for r in recs if r.source_hash == src and r.contract_hash == con]
    if cubin is not None and source_path is not None:
        matching = [r for r in matching if r.cubin_hashes.get(source_path) in (None, cubin)]
    if not matching:
        newest = max(recs, key=lambda r: r.date)
        what = "source" if newest.source_hash != src else ("contract" if newest.contract_hash != con else "cubin")
        return Freshness(name, kind, "stale", newest, f"its {what} changed since its last GPU verification ({newest.date[:10]})")
    passing = [r for r in matching if r.verdict == "pass"]
    if passing:
        best = max(passing, key=lambda r: r.date)
        return Freshness(name, kind, "verified", best, "")
    worst = max(matching, key=lambda r: r.date)
    failed = ", ".join(c.name for c in worst.failed_checks[:3]) or "see the record"
    return Freshness(name, kind, "failed", worst, f"its last GPU verification failed ({failed})")


def evidence_facts(ctx) -> dict[str, Freshness]:
    """Fact provider for the evidence rules."""
    cfg = ctx.config
    if cfg is None:
        from .rules import RuleNotRun

        raise RuleNotRun("no project configuration")
    records = load_records(cfg.path(cfg.evidence))
    cubins = None
    if ctx.options.get("require_evidence"):
        build = ctx.facts.get("build")
        if build is None and "build" in ctx.providers:
            try:
                build = ctx.fact("build")
            except Exception:  # noqa: BLE001 - without a build the cubin check is skipped, not fatal
                build = None
        cubins = getattr(build, "cubin_hashes", None)
    return freshness(ctx.cs, cfg, records, cubins)
