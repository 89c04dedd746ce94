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

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_text_atomic
from .hashing import canonical, files_hash, include_closure

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
        """A record from its JSON form; TypeError or ValueError for a field of the wrong type (records
        are files in the repository, which a pull request can edit)."""
        if not isinstance(data, Mapping):
            raise TypeError("an evidence record is a JSON object")
        d = dict(data)
        raw = d.get("checks", [])
        if not isinstance(raw, list) or not all(isinstance(c, Mapping) for c in raw):
            raise TypeError('"checks" is a list of objects')
        d["checks"] = [CheckOutcome(**_typed(c, _CHECK_TYPES)) for c in raw]
        known = set(cls.__dataclass_fields__)
        return cls(**_typed({k: v for k, v in d.items() if k in known}, _RECORD_TYPES))

    @property
    def failed_checks(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.verdict == "fail"]


_TEXT = (str,)
_NUMBER = (int, float, type(None))
_CHECK_TYPES: dict[str, tuple] = {"name": _TEXT, "verdict": _TEXT, "detail": _TEXT, "size": _TEXT,
                                  "max_abs_err": _NUMBER, "max_rel_err": _NUMBER, "rel_norm_err": _NUMBER}  # fmt: skip
_RECORD_TYPES: dict[str, tuple] = {
    "subject": _TEXT, "kind": _TEXT, "backend": _TEXT, "verdict": _TEXT, "source_hash": _TEXT, "contract_hash": _TEXT,
    "cubin_hashes": (dict,), "build_flags": (list,), "arch": _TEXT, "device": (dict,), "versions": (dict,), "seed": (int,),
    "sizes": (list,), "checks": (list,), "date": _TEXT, "duration_s": _NUMBER, "format": (int,),
}  # fmt: skip


def _typed(d: dict, types: Mapping[str, tuple]) -> dict:
    """``d`` when each known field has its type (bools are no numbers; dicts and lists hold strings)."""
    for key, value in d.items():
        want = types.get(key)
        if want is None:
            raise TypeError(f'unknown field "{key}"')
        if not isinstance(value, want) or isinstance(value, bool):
            raise TypeError(f'field "{key}" has the wrong type')
        if isinstance(value, float) and value != value:
            raise ValueError(f'field "{key}" is NaN')
        if isinstance(value, int) and abs(value) > 2**63:
            raise ValueError(f'field "{key}" is out of range')
        if isinstance(value, list) and not all(isinstance(x, str) for x in value) and key != "checks":
            raise TypeError(f'field "{key}" is a list of strings')
        if isinstance(value, dict) and key != "device" and not all(isinstance(x, str) for x in value.values()):
            raise TypeError(f'field "{key}" maps strings to strings')
        if key == "device" and not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value.values()):
            raise TypeError('field "device" maps strings to strings or numbers')
    return d


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
    from .untrusted import RECORD_LIMIT, read_bytes

    root = folder.resolve() if folder.is_dir() else folder
    for path in sorted(folder.glob("*/*.json")):
        try:  # regular, bounded, inside the evidence folder; a record that is not valid is skipped
            out.append(EvidenceRecord.from_dict(json.loads(read_bytes(path, root, RECORD_LIMIT))))
        except (OSError, ValueError, TypeError, RecursionError):
            continue
    return out


# ---------------------------------------------------------------------------------------------------
# current hashes of what a record must match


def kernel_source_hash(cs, cfg, kernel) -> str:
    return _SourceMemo(cs, cfg).kernel(kernel)


def schedule_hashes(cs, cfg, schedule) -> tuple[str, str]:
    """(source hash, contract hash) of a schedule: every kernel it launches plus the wiring itself."""
    return _SourceMemo(cs, cfg).schedule(schedule), _schedule_contract_hash(cs, schedule)


# The values above are defined by audit/hashing.py (files_hash over include closures, contract_hash over
# canonical JSON) and must never move: records are keyed by them. What follows only avoids computing the
# same thing twice. Contract hashes depend on nothing but the (immutable) loaded model, so they are
# memoized on the ContractSet for as long as it lives; file contents can change between two calls, so
# include closures and source hashes are memoized for one call (one freshness() or one schedule) only.


class _SourceMemo:
    """Include closures and source hashes of one call: each distinct source is read and hashed once."""

    def __init__(self, cs, cfg):
        self.root = cs.root
        self.dirs = [cfg.path(d) for d in cfg.include_dirs]
        self.closures: dict[str, list[Path]] = {}
        self.hashes: dict[str, str] = {}
        self.exists: dict[str, bool] = {}
        self.kernel_map = cs.kernel_map

    def is_file(self, source: str) -> bool:
        hit = self.exists.get(source)
        if hit is None:
            hit = self.exists[source] = (self.root / source).is_file()
        return hit

    def closure(self, source: str) -> list[Path]:
        hit = self.closures.get(source)
        if hit is None:
            hit = self.closures[source] = include_closure(self.root / source, self.dirs)
        return hit

    def kernel(self, kernel) -> str:
        """``source_hash(root / kernel.source, include dirs, root)``."""
        hit = self.hashes.get(kernel.source)
        if hit is None:
            hit = self.hashes[kernel.source] = files_hash(self.closure(kernel.source), self.root)
        return hit

    def schedule(self, schedule) -> str:
        cs_kernels = self.kernel_map
        paths: dict[Path, None] = {}
        for s in schedule.steps:
            k = cs_kernels.get(s.launch) if s.launch else None
            if k is not None:
                for p in self.closure(k.source):
                    paths[p] = None
        return files_hash(sorted(paths, key=lambda p: p.as_posix()), self.root)


def _memo(cs) -> dict:
    """The contract-hash memo of one loaded contract set (kept in its instance dict, like probe_envs)."""
    try:
        return cs.__dict__.setdefault("_evidence_memo", {})
    except AttributeError:  # not a ContractSet: no memo
        return {}


def _contract_text(memo: dict, obj) -> str:
    """``json.dumps(canonical(obj), sort_keys=True, default=str)``, the text contract_hash hashes."""
    hit = memo.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    text = json.dumps(canonical(obj), sort_keys=True, default=str)
    memo[id(obj)] = (obj, text)  # the object is kept alive with its text, so its id is not reused
    return text


def _kernel_contract_hash(cs, kernel) -> str:
    """``contract_hash(kernel)``."""
    memo = _memo(cs)
    return hashlib.sha256(_contract_text(memo, kernel).encode()).hexdigest()


def _schedule_contract_hash(cs, schedule) -> str:
    """``contract_hash([schedule, [its kernels by name], cs.isv, [its buffers by name]])``.

    json.dumps writes a list as "[" + ", ".join(items) + "]", each item exactly as it dumps alone, so the
    text of the list is assembled from the memoized texts of its parts: the ISV layout (the largest part)
    is turned into JSON once per contract set instead of once per schedule.
    """
    memo = _memo(cs)
    key = ("schedule", id(schedule))
    hit = memo.get(key)
    if hit is not None and hit[0] is schedule:
        return hit[1]
    kmap = cs.kernel_map
    unique = {}
    for s in schedule.steps:
        if s.launch and s.launch in kmap:
            k = kmap[s.launch]
            unique[k.name] = k
    bmap = cs.buffer_map
    kernels = ", ".join(_contract_text(memo, unique[n]) for n in sorted(unique))
    buffers = ", ".join(_contract_text(memo, bmap[b]) for b in sorted(_buffers(schedule)) if b in bmap)
    h = hashlib.sha256()
    for part in ("[", _contract_text(memo, schedule), ", [", kernels, "], ", _contract_text(memo, cs.isv), ", [", buffers, "]]"):
        h.update(part.encode())
    digest = h.hexdigest()
    memo[key] = (schedule, digest)
    return digest


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
    files = _SourceMemo(cs, cfg)
    for k in cs.kernels:
        if not files.is_file(k.source):
            continue
        src = files.kernel(k)
        con = _kernel_contract_hash(cs, k)
        cubin = (cubin_hashes or {}).get(k.source)
        out[k.name] = _status("kernel", k.name, by_subject.get(("kernel", k.name), []), src, con, cubin, k.source)
    for s in cs.schedules:
        try:
            src, con = files.schedule(s), _schedule_contract_hash(cs, s)
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
