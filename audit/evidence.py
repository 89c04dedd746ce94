"""Evidence records: what a GPU verification run proved, keyed by the hashes of what it ran.

``wireup verify`` writes one JSON record per verified kernel or schedule and backend under
``reports/evidence/{kernels,schedules}/<name>.<backend>.json``. A record names the source hash (the
``.cu`` file and its local headers), the contract hash, the code hash of each cubin it ran
(:func:`audit.compile.code_hash`: the same in every checkout), the cubin hashes, the build flags and
architecture, the device, driver, CUDA and nvcc versions, the backend, seed and sizes, and every check
with its verdict and errors. Static checks read them back through :func:`freshness`, the one function
that decides whether a kernel or schedule is verified, stale, failed or missing (for ``wireup check``,
``wireup audit``, ``wireup report`` and the pytest plugin alike).

Records are written atomically as sorted, indented JSON so they diff well; the date inside comes from
the run, never from rendering.

>>> fresh = project_freshness(cfg, cs, build)               # doctest: +SKIP
>>> fresh["aux_trunk_forward"].status                      # doctest: +SKIP
'verified'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .atomic import write_text_atomic
from .compile import CODE_HASH_VERSION
from .hashing import canonical, files_hash, include_closure

FORMAT_VERSION = 3  # 2: code hashes (audit.compile.code_hash) of every source the subject ran; 3: input hashes


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
    code_hashes: dict[str, str] = field(default_factory=dict)  # source path -> code hash of its cubin
    code_hash_version: str = ""  # what the code hashes cover (audit.compile.CODE_HASH_VERSION)
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
    # the dim assignments that ran and the tail coverage of the launch geometry (absent from records
    # written before cases were dim assignments: read as empty, "not recorded")
    cases: list[dict[str, int]] = field(default_factory=list)
    tails: list[dict[str, Any]] = field(default_factory=list)
    # per case: how it was compared with the reference ("full", "sampled", "not run"); absent from records
    # written before sampled references (read as empty, "not recorded")
    references: list[str] = field(default_factory=list)
    # what the verification read outside the subject's own contract, part -> hash (:func:`kernel_inputs`,
    # :func:`schedule_inputs`); absent from records written before format 3 (read as empty, "not compared")
    inputs: dict[str, str] = field(default_factory=dict)

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

    def __getattr__(self, name: str) -> Any:
        # reached only where the attribute is not set: the checks of a record read from the summary cache
        # (:func:`load_records`), parsed from the record's bytes when first asked for
        if name == "checks":
            pending = self.__dict__.pop("_pending_checks", None)
            if pending is not None:
                raw = json.loads(pending).get("checks", [])
                self.checks = [CheckOutcome(**_typed(c, _CHECK_TYPES)) for c in raw]
                return self.checks
        raise AttributeError(name)


_TEXT = (str,)
_NUMBER = (int, float, type(None))
_CHECK_TYPES: dict[str, tuple] = {"name": _TEXT, "verdict": _TEXT, "detail": _TEXT, "size": _TEXT,
                                  "max_abs_err": _NUMBER, "max_rel_err": _NUMBER, "rel_norm_err": _NUMBER}  # fmt: skip
_RECORD_TYPES: dict[str, tuple] = {
    "subject": _TEXT, "kind": _TEXT, "backend": _TEXT, "verdict": _TEXT, "source_hash": _TEXT, "contract_hash": _TEXT,
    "cubin_hashes": (dict,), "build_flags": (list,), "arch": _TEXT, "device": (dict,), "versions": (dict,), "seed": (int,),
    "sizes": (list,), "checks": (list,), "date": _TEXT, "duration_s": _NUMBER, "format": (int,),
    "code_hashes": (dict,), "code_hash_version": _TEXT, "cases": (list,), "tails": (list,), "references": (list,),
    "inputs": (dict,),
}  # fmt: skip
_LISTS_OF_OBJECTS = ("checks", "cases", "tails")


def _typed(d: dict, types: Mapping[str, tuple]) -> dict:
    """``d`` when each known field has its type (bools are no numbers; dicts and lists hold strings)."""
    for key, value in d.items():
        want = types.get(key)
        if want is None:
            raise TypeError(f'unknown field "{key}"')
        # the common cases first (a record holds thousands of check outcomes): a string where text is
        # wanted, None or a float that is a number; each passes every test below exactly as here
        t = type(value)
        if want is _TEXT and t is str or want is _NUMBER and (value is None or t is float and value == value):
            continue
        if not isinstance(value, want) or isinstance(value, bool):
            raise TypeError(f'field "{key}" has the wrong type')
        if isinstance(value, float) and value != value:
            raise ValueError(f'field "{key}" is NaN')
        if isinstance(value, int) and abs(value) > 2**63:
            raise ValueError(f'field "{key}" is out of range')
        if isinstance(value, list) and key not in _LISTS_OF_OBJECTS and not all(isinstance(x, str) for x in value):
            raise TypeError(f'field "{key}" is a list of strings')
        if isinstance(value, list) and key in ("cases", "tails") and not all(isinstance(x, dict) for x in value):
            raise TypeError(f'field "{key}" is a list of objects')
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


#: Format of the record summaries kept in the build cache (bump when a summary's layout changes).
SUMMARY_FORMAT = b"wireup-evidence-summary-1"


def load_records(folder: Path, cache: Path | None = None) -> list[EvidenceRecord]:
    """Every readable record under ``folder`` (unreadable files are skipped, not fatal).

    With ``cache`` (a folder of the build cache), a record whose bytes were read and found valid before
    is built from its summary there, every field but its checks, which are parsed from the bytes when
    first asked for: the freshness of a record needs its hashes, flags and date, and reading and typing
    the ~22,700 check outcomes of the shipped records was most of the ~67 ms the evidence rules took in
    ``wireup check`` (docs/benchmarks.md section 1). The summaries are kept by the sha256 of the record's
    bytes, so an edited record is parsed and validated in full again; the file holds exactly the summaries
    of the last load (:class:`_Summaries`)."""
    out: list[EvidenceRecord] = []
    if not folder.is_dir():
        return out
    from .untrusted import RECORD_LIMIT, read_bytes

    store = _Summaries(cache, folder) if cache is not None else None
    root = folder.resolve()
    for path in sorted(folder.glob("*/*.json")):
        try:  # regular, bounded, inside the evidence folder; a record that is not valid is skipped
            data = read_bytes(path, root, RECORD_LIMIT)
            rec = store.record(data) if store is not None else None
            if rec is None:
                rec = EvidenceRecord.from_dict(json.loads(data))
                if store is not None:
                    store.keep(data, rec)
            out.append(rec)
        except (OSError, ValueError, TypeError, RecursionError):
            continue
    if store is not None:
        store.save()
    return out


_JSON_SCALARS = (str, int, float, bool, type(None))


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds only what :func:`json.loads` returns (a summary read back from marshal)."""
    t = type(value)
    if t in _JSON_SCALARS:
        return True
    if depth > 32:
        return False
    if t is list:
        return all(_plain_json(x, depth + 1) for x in value)
    return t is dict and all(type(k) is str and _plain_json(x, depth + 1) for k, x in value.items())


class _Summaries:
    """The record summaries of one evidence folder, in ``<cache>/evidence/<sha256 of its path>.bin``
    (:mod:`audit.toml_cache`'s file layout: a format line, the sha256 of the payload, a marshal table).
    An entry is used only when it is a table of JSON values whose fields type-check as a record's."""

    def __init__(self, cache: Path, folder: Path) -> None:
        from .toml_cache import _read

        name = hashlib.sha256(SUMMARY_FORMAT + b"\0" + str(folder.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
        self.path = cache / "evidence" / f"{name}.bin"
        self.stored = _read(self.path, SUMMARY_FORMAT)
        self.used: dict[str, dict[str, Any]] = {}
        self.changed = False

    @staticmethod
    def key(data: bytes) -> str:
        return hashlib.sha256(SUMMARY_FORMAT + b"\0" + data).hexdigest()

    def record(self, data: bytes) -> EvidenceRecord | None:
        key = self.key(data)
        summary = self.stored.get(key)
        if type(summary) is not dict or "checks" in summary or not _plain_json(summary):
            return None
        try:
            rec = EvidenceRecord.from_dict(summary)
        except (TypeError, ValueError):
            return None
        del rec.checks
        rec._pending_checks = data  # type: ignore[attr-defined]
        self.used[key] = summary
        return rec

    def keep(self, data: bytes, rec: EvidenceRecord) -> None:
        # the fields as parsed (JSON values already), not asdict's deep copy of every check
        summary = {f.name: getattr(rec, f.name) for f in fields(rec) if f.name != "checks"}
        self.used[self.key(data)] = summary
        self.changed = True

    def save(self) -> None:
        """Write the summaries of this load where the file holds others (best effort)."""
        if not self.changed and len(self.used) == len(self.stored):
            return
        import marshal

        from .toml_cache import _write

        try:
            payload = marshal.dumps(self.used)
        except (ValueError, RecursionError):
            return
        _write(self.path, payload, SUMMARY_FORMAT)


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


# ---------------------------------------------------------------------------------------------------
# what a verification reads outside the subject's own contract (record field "inputs")

#: part -> how a stale reason names it when it changed; compared in this order
INPUT_PARTS: dict[str, str] = {
    "dims": "the dims it is verified at",
    "isv": "the ISV layout",
    "launches": "the steps that launch it, the buffers they bind or the domains the writers of those buffers declare",
    "schedules": "the schedules it runs after or is equivalent to",
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _shared_inputs(cs, memo: dict) -> dict[str, str]:
    """The parts every subject reads: the dims (the sizes and variants verify draws) and the ISV layout
    (what a kernel's ISV parameter holds, perturbed per kernel)."""
    hit = memo.get("inputs:shared")
    if hit is None:
        hit = memo["inputs:shared"] = {
            "dims": _digest(json.dumps(canonical(list(cs.dims)), sort_keys=True, default=str)),
            "isv": _digest(_contract_text(memo, cs.isv)),
        }
    return hit


def _launch_index(cs, memo: dict):
    """(kernel name -> [(schedule, launch)], buffer -> the domain its first writer declares), once per
    contract set; None where the wiring cannot be resolved (a contract error the wiring rules report)."""
    if "inputs:launches" not in memo:
        try:
            from .cases import producer_domains
            from .graph import Wiring

            wiring = Wiring.of(cs)
            memo["inputs:launches"] = (wiring.launches_by_kernel, producer_domains(cs, wiring))
        except Exception:  # noqa: BLE001 - a broken contract set: the part is not compared, never a crash
            memo["inputs:launches"] = None
    return memo["inputs:launches"]


def kernel_inputs(cs, kernel) -> dict[str, str]:
    """What verifying ``kernel`` reads outside its own contract, part -> sha256: the dims, the ISV layout,
    and every step that launches it with the contracts of the buffers it binds and the domain each such
    buffer's writer declares (an input with no domain of its own is drawn from it). A part that cannot be
    worked out (the wiring does not resolve) is left out, so it is not compared."""
    memo = _memo(cs)
    key = ("inputs", id(kernel))
    hit = memo.get(key)
    if hit is not None and hit[0] is kernel:
        return dict(hit[1])
    out = dict(_shared_inputs(cs, memo))
    got = _launch_index(cs, memo)
    if got is not None:
        index, producers = got
        bmap = cs.buffer_map
        items = []
        for sname, ln in index.get(kernel.name, ()):
            binds = [[p.name, b.buffer, bmap.get(b.buffer or ""), producers.get(b.buffer or "")] for p, b in ln.bound()]
            items.append([sname, ln.step, binds])
        out["launches"] = _digest(json.dumps(canonical(items), sort_keys=True, default=str))
    memo[key] = (kernel, out)
    return dict(out)


def schedule_inputs(cs, schedule) -> dict[str, str]:
    """What verifying ``schedule`` reads outside its contract hash (which already holds its wiring, kernels,
    ISV layout and buffers), part -> sha256: the dims, and the contract hashes of the schedules it runs
    after (transitively) and of its equivalent twin, whose steps run in the same chain."""
    memo = _memo(cs)
    smap = cs.schedule_map
    related: dict[str, None] = {}

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in related or name in stack or name not in smap:
            return
        for dep in smap[name].after:
            visit(dep, (*stack, name))
        related[name] = None

    for dep in schedule.after:
        visit(dep, (schedule.name,))
    if schedule.equivalent_to:
        visit(schedule.equivalent_to, (schedule.name,))
    related.pop(schedule.name, None)
    parts = [[n, _schedule_contract_hash(cs, smap[n])] for n in sorted(related)]
    return {"dims": _shared_inputs(cs, memo)["dims"], "schedules": _digest(json.dumps(parts))}


def _inputs_mismatch(recorded: Mapping[str, str], current: Mapping[str, str]) -> str:
    """The first part (in :data:`INPUT_PARTS` order) both name whose hash differs ("" when none does)."""
    for part, words in INPUT_PARTS.items():
        then, now = recorded.get(part), current.get(part)
        if then is not None and now is not None and then != now:
            return words
    return ""


@dataclass
class Freshness:
    """Where a kernel or schedule stands against its evidence."""

    subject: str
    kind: str
    status: str  # "verified" | "stale" | "missing" | "failed"
    record: EvidenceRecord | None = None
    reason: str = ""
    code_compared: bool = False  # whether the compiled code (not only its inputs) was compared
    # whether the record names what its verification read outside the contract (format 3 and later): a
    # record written before is matched without it, and wireup audit says how many were
    inputs_compared: bool = True


@dataclass(frozen=True)
class CodeIdentity:
    """What the current checkout builds, as evidence is compared with it.

    A record matches when it names the same source-closure hash and contract hash as the tree, the same
    build flags and architecture as the configuration, and -- where the kernels were built here -- the
    same code hash (:func:`audit.compile.code_hash`: the cubin without its debug sections and toolchain
    notes) for every source the subject runs. The nvcc version is recorded and quoted, not compared: the
    code hash already says whether two toolkits produced the same code.

    >>> ident = CodeIdentity.of(cfg, build)            # doctest: +SKIP
    >>> ident.code_hashes["kernels/aux_trunk_kernel.cu"][:8], ident.nvcc_version   # doctest: +SKIP
    ('a2ff5b8f', '13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)')
    """

    flags: tuple[str, ...]
    arch: str
    code_hashes: Mapping[str, str] | None = None  # None: nothing was built here, code is not compared
    nvcc_version: str = ""
    not_compared: str = ""  # why code_hashes is None
    packages: Mapping[str, str] | None = None  # include_packages distribution -> version the build used

    @classmethod
    def of(cls, cfg, build=None, not_built: str = "") -> CodeIdentity:
        """The identity of ``cfg``'s build; ``build`` is a :class:`audit.compile.BuildResult` or None."""
        from .compile import effective_flags

        flags, arch = tuple(effective_flags(cfg)), cfg.arch
        if build is None:
            return cls(flags, arch, None, "", not_built or "the kernels were not built here")
        return cls(tuple(build.flags), build.arch, dict(build.code_hashes), build.nvcc_version or "", packages=dict(getattr(build, "packages", None) or {}))


def freshness(cs, cfg, records: Iterable[EvidenceRecord], build=None, not_built: str = "") -> dict[str, Freshness]:
    """Status of every kernel and schedule: verified (a passing record matches the current identity),
    failed (the matching record failed), stale (records exist for another identity) or missing.

    The one place that decides: ``wireup check`` (the EVIDENCE_* rules), ``wireup audit``, ``wireup
    report`` and the pytest plugin all come here. ``build`` is the current
    :class:`audit.compile.BuildResult` (or a :class:`CodeIdentity`); without one the code is not compared
    (``not_built`` says why) and a record matches on its source, contract, flags and architecture.
    """
    ident = build if isinstance(build, CodeIdentity) else CodeIdentity.of(cfg, build, not_built)
    by_subject: dict[tuple[str, str], list[EvidenceRecord]] = {}
    for r in records:
        by_subject.setdefault((r.kind, r.subject), []).append(r)
    out: dict[str, Freshness] = {}
    files = _SourceMemo(cs, cfg)
    for k in cs.kernels:
        if not files.is_file(k.source):
            continue
        current = _Current(files.kernel(k), _kernel_contract_hash(cs, k), (k.source,), kernel_inputs(cs, k))
        out[k.name] = _status("kernel", k.name, by_subject.get(("kernel", k.name), []), current, ident)
    for s in cs.schedules:
        try:
            src, con = files.schedule(s), _schedule_contract_hash(cs, s)
        except OSError:
            continue
        sources = tuple(sorted({cs.kernel_map[st.launch].source for st in s.steps if st.launch in cs.kernel_map}))
        out[f"schedule:{s.name}"] = _status("schedule", s.name, by_subject.get(("schedule", s.name), []), _Current(src, con, sources, schedule_inputs(cs, s)), ident)
    return out


def project_freshness(cfg, cs, build=None, not_built: str = "") -> dict[str, Freshness]:
    """:func:`freshness` of the records in the project's evidence folder."""
    from .check_cache import cache_folder

    cache = cache_folder(cfg)
    return freshness(cs, cfg, load_records(cfg.path(cfg.evidence), cache), build, not_built)


@dataclass(frozen=True)
class _Current:
    source_hash: str
    contract_hash: str
    sources: tuple[str, ...]  # the kernel sources whose code the subject runs
    inputs: Mapping[str, str] = field(default_factory=dict)  # kernel_inputs / schedule_inputs


def _mismatch(r: EvidenceRecord, cur: _Current, ident: CodeIdentity) -> str:
    """Why ``r`` does not cover the current build ("" when it does), worded to follow "has no GPU
    verification of its current build: "."""
    when = f"({r.date[:10]})" if r.date else "(undated)"
    if r.source_hash != cur.source_hash:
        return f"its source changed since the last one {when}"
    if r.contract_hash != cur.contract_hash:
        return f"its contract changed since the last one {when}"
    changed = _inputs_mismatch(r.inputs, cur.inputs)
    if changed:
        return f"{changed} changed since the last one {when}"
    if list(r.build_flags) != list(ident.flags):
        return f'its build flags changed since the last one {when}: "{" ".join(r.build_flags)}" then, "{" ".join(ident.flags)}" now'
    if r.arch != ident.arch:
        return f'its architecture changed since the last one {when}: "{r.arch}" then, "{ident.arch}" now'
    if not r.code_hashes or r.code_hash_version != CODE_HASH_VERSION:
        return (
            f"the last one {when} recorded no {CODE_HASH_VERSION} code hash, only cubin hashes, which older builds "
            "made depend on the checkout's path and file times: verify it again"
        )
    if ident.code_hashes is None:
        return ""
    for source in cur.sources:
        now = ident.code_hashes.get(source)
        if now is None:
            return f'"{source}" did not compile here, so its code cannot be compared with the last one {when}'
        if r.code_hashes.get(source) != now:
            then_nvcc, now_nvcc = r.versions.get("nvcc", ""), ident.nvcc_version
            toolkits = f"; nvcc {then_nvcc or 'unknown'} then, {now_nvcc or 'unknown'} now" if then_nvcc != now_nvcc else ""
            for pkg, now_v in sorted((ident.packages or {}).items()):  # CUTLASS upgraded, say
                then_v = r.versions.get(pkg, "")
                if then_v != now_v:
                    toolkits += f"; {pkg} {then_v or 'not recorded'} then, {now_v} now"
            return f'the code built from "{source}" differs from the code the last one ran {when}{toolkits}'
    return ""


def _status(kind, name, recs, cur: _Current, ident: CodeIdentity) -> Freshness:
    compared = ident.code_hashes is not None
    if not recs:
        return Freshness(name, kind, "missing", None, "no GPU verification record", compared)
    matching = [r for r in recs if not _mismatch(r, cur, ident)]
    if not matching:
        newest = max(recs, key=lambda r: r.date)
        return Freshness(name, kind, "stale", newest, _mismatch(newest, cur, ident), compared)
    passing = [r for r in matching if r.verdict == "pass"]
    if passing:
        best = max(passing, key=lambda r: r.date)
        return Freshness(name, kind, "verified", best, "", compared, bool(best.inputs))
    worst = max(matching, key=lambda r: r.date)
    failed = ", ".join(c.name for c in worst.failed_checks[:3]) or "see the record"
    return Freshness(name, kind, "failed", worst, f"its last GPU verification failed ({failed})", compared, bool(worst.inputs))


def evidence_facts(ctx) -> dict[str, Freshness]:
    """Fact provider for the evidence rules: :func:`freshness` against the build the other rules read
    (the same with or without ``--require-evidence``, which only turns warnings into errors)."""
    cfg = ctx.config
    if cfg is None:
        from .rules import RuleNotRun

        raise RuleNotRun("no project configuration")
    build, not_built = None, ""
    if "build" in ctx.providers or "build" in ctx.facts:
        try:
            build = ctx.fact("build")
        except Exception as exc:  # noqa: BLE001 - RuleNotRun (no nvcc): the code is not compared, said so
            not_built = str(exc)
    if build is not None and getattr(build, "overrides", None):
        build, not_built = None, "the build replaces kernel sources"
    return project_freshness(cfg, ctx.cs, build, not_built)
