"""The incremental check: the findings of the contract-only rules, reused while nothing they read changed.

The rules of the categories in :data:`~audit.rules.CONTRACT_ONLY` (schema, wiring, isv, invariants)
read the contracts, the configuration and the options, and ask the project's files only through
recorded probes (:data:`~audit.rules.PROBES`: does a kernel's source exist, lie inside the root, pass
the safety checks). So when ``wireup check`` selects only such rules, its whole result is a function of

* wireup's own code (the sha256 of every module of the ``audit`` package), the Python version and the
  shortest-path code of networkx (which of several shortest paths a message names depends on it),
* the configuration (every resolved value, the root's path included), the selected rules and the options,
* the contract files: each relative path and its text,
* the answers of the probes the run asked, which are asked again before an entry is used.

The first four make the key of an entry in ``<cache>/check/<key>.json``, beside the build cache; the
entry holds the result (findings, the rules that ran and did not, the suppressed findings, the subjects
the JUnit printer lists) and the probes with their answers. A check with an entry whose probes all
answer as recorded prints that result without building the model: at 10,000 kernels that skips parsing
(~1.2 s), building the model (~1 s) and ~40 rules (~1.5 s; docs/benchmarks.md section 2). Any change to
a contract file, the configuration, wireup or a probed file (a source created, removed, made a link,
or a header it includes changed in a way the safety checks see) misses, and the check runs in full, with
the parsed-file cache (:mod:`audit.toml_cache`) sparing the parse of every file that did not change.

A selection with any other rule (build, evidence, launchers, layout: they read the build, the evidence
records, the launcher sources or generated files) is not cached; neither is a result whose
``[[suppress]]`` entries name such a rule while SUPPRESSION_UNUSED judges them, nor a load error. An
entry that cannot be read, does not parse or holds a value of the wrong type is ignored and rewritten.
The cache is trusted as much as the build cache beside it: a cache folder git tracks is not used at all
(:func:`cache_folder`), and a CI job should not restore a cache folder written by an untrusted pull request.

>>> store = CheckCache.open(cfg, rules, options)          # doctest: +SKIP
>>> store.lookup() or store.save(run_check(...))          # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ContractError
from .findings import CheckResult, Finding, NotRun, Severity
from .load import ContractTexts, parser_name, read_contract_files
from .rules import CONTRACT_ONLY, PROBES, REGISTRY, RUN_ONLY, Rule

if TYPE_CHECKING:
    from .api import CheckRun
    from .config import Config

CHECK_FORMAT = "wireup-check-1"  # bump when the entry layout changes
#: Largest entry read (bytes).
ENTRY_LIMIT = 256 << 20


def cache_folder(cfg: Config) -> Path | None:
    """The build cache folder of ``cfg``, or None where git tracks files in it (a committed cache is
    not trusted, as for the build: see :func:`audit.compile._compile.committed_cache_files`)."""
    from .compile import committed_cache_files

    folder = cfg.path(cfg.cache)
    return None if committed_cache_files(folder, cfg.root.resolve()) else folder


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 of :data:`CHECK_FORMAT`, the Python version, the TOML parser and every module of the
    ``audit`` package ("" where one cannot be read: then nothing is cached)."""
    from .rules.invariants import _shortest_path_code

    h = hashlib.sha256(f"{CHECK_FORMAT}\0{sys.version}\0{parser_name()}\0".encode())
    h.update(_shortest_path_code() or b"no networkx")
    package = Path(__file__).parent
    try:
        for path in sorted(package.rglob("*.py")):
            h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return ""
    return h.hexdigest()


def cacheable(rule: Rule) -> bool:
    """Whether the findings of ``rule`` depend on the contracts, configuration, options and probes only."""
    return rule.category in CONTRACT_ONLY


class CheckCache:
    """One check's entry: its key, the contract files it read, and reading or writing the entry."""

    def __init__(self, cfg: Config, folder: Path, key: str, read: ContractTexts) -> None:
        self.cfg = cfg
        self.path = folder / "check" / f"{key}.json"
        self.key = key
        self.read = read  # the contract files, read once for the key and the load

    @classmethod
    def open(cls, cfg: Config, rules: Sequence[Rule], options: dict[str, Any]) -> CheckCache | None:
        """The entry of a check of ``rules`` with ``options`` on the project of ``cfg``, or None where the
        result cannot be cached (another rule selected, no cache folder, files that do not read)."""
        if not rules or not all(cacheable(r) for r in rules):
            return None
        version = code_version()
        folder = cache_folder(cfg)
        if not version or folder is None:
            return None
        root = cfg.root.resolve()
        try:
            read = read_contract_files(cfg.contracts_dir, root)
        except ContractError:
            return None  # the load reports it
        if read.problems:
            return None
        try:
            opts = json.dumps(options, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            return None
        h = hashlib.sha256(f"{version}\0{cfg!r}\0{root}\0{opts}\0".encode("utf-8", "surrogatepass"))
        h.update("\0".join(r.id for r in rules).encode() + b"\0")
        for rel in sorted(read.texts):
            data = read.texts[rel].encode("utf-8", "surrogatepass")
            h.update(f"{len(rel)}:{rel}{len(data)}:".encode("utf-8", "surrogatepass") + data)
        return cls(cfg, folder, h.hexdigest(), read)

    def lookup(self) -> CheckResult | None:
        """The cached result, or None where there is no valid entry or a probe answers otherwise now."""
        try:
            data = json.loads(_read_entry(self.path))
            if not isinstance(data, dict) or data.get("format") != CHECK_FORMAT or data.get("key") != self.key:
                return None
            probes = data["probes"]
            if not isinstance(probes, list):
                return None
            root = self.cfg.root.resolve()
            for item in probes:
                if not isinstance(item, list) or len(item) != 3 or type(item[0]) is not str or type(item[1]) is not str:
                    return None
                kind, arg, answer = item
                if kind not in PROBES or PROBES[kind](root, self.cfg, arg) != answer:
                    return None
            return _result(data["result"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # missing, damaged or forged
            return None

    def save(self, run: CheckRun) -> None:
        """Store the result of ``run`` (a check of the rules this entry was opened for), unless a rule it
        judged reads more than the contracts (a suppression of such a rule, judged by SUPPRESSION_UNUSED)."""
        result = run.result
        if result.load_failed:
            return
        judged = {s.rule for s in run.contracts.suppressions}
        for rid in judged:
            r = REGISTRY.get(rid)
            if r is not None and r.category not in RUN_ONLY and r.replaced_by is None and not cacheable(r):
                return
        probes = [[kind, arg, answer] for (kind, arg), answer in run.context.probes.items()]
        _store(self.path, {"format": CHECK_FORMAT, "key": self.key, "probes": probes, "result": _plain(result)})


def _plain(result: CheckResult) -> dict[str, Any]:
    """``result`` as JSON values; subject lists that several rules share are stored once."""
    lists: list[list[str]] = []
    index: dict[int, int] = {}
    subjects = {}
    for rid, names in result.subjects.items():
        if id(names) not in index:
            index[id(names)] = len(lists)
            lists.append(list(names))
        subjects[rid] = index[id(names)]
    return {
        "findings": [_finding(f) for f in result.findings],
        "ran": list(result.ran),
        "not_run": [[n.rule, n.reason] for n in result.not_run],
        "lists": lists,
        "subjects": subjects,
        "suppressed": [[_finding(f), reason] for f, reason in result.suppressed],
    }


def _finding(f: Finding) -> list[Any]:
    return [f.rule, f.severity.value, f.message, f.file, f.line, f.subject, f.key, f.category]


_SEVERITIES = {s.value: s for s in Severity}


def _str(v: Any) -> str:
    if type(v) is not str:
        raise TypeError("expected a string")
    return v


def _strs(v: Any) -> list[str]:
    if type(v) is not list:
        raise TypeError("expected a list")
    return [_str(x) for x in v]


def _unplain_finding(v: Any) -> Finding:
    if type(v) is not list or len(v) != 8:
        raise TypeError("a finding is a list of 8 values")
    rule, sev, message, file, line, subject, key, category = v
    if line is not None and type(line) is not int:
        raise TypeError("a line is an integer")
    return Finding(_str(rule), _SEVERITIES[_str(sev)], _str(message), _str(file), line, _str(subject), _str(key), _str(category))


def _result(v: Any) -> CheckResult:
    """A :class:`CheckResult` from :func:`_plain`'s values, or TypeError/KeyError for any other shape."""
    if type(v) is not dict:
        raise TypeError("a result is a table")
    lists = v["lists"]
    if type(lists) is not list:
        raise TypeError("expected a list")
    shared = [_strs(x) for x in lists]
    subjects = v["subjects"]
    if type(subjects) is not dict:
        raise TypeError("expected a table")
    findings = v["findings"]
    not_run = v["not_run"]
    suppressed = v["suppressed"]
    if type(findings) is not list or type(not_run) is not list or type(suppressed) is not list:
        raise TypeError("expected a list")
    out = CheckResult(
        findings=[_unplain_finding(f) for f in findings],
        ran=_strs(v["ran"]),
        not_run=[NotRun(*_strs(n)) if type(n) is list and len(n) == 2 else _bad() for n in not_run],
        subjects={_str(rid): shared[i] if type(i) is int and 0 <= i < len(shared) else _bad() for rid, i in subjects.items()},
        suppressed=[(_unplain_finding(s[0]), _str(s[1])) if type(s) is list and len(s) == 2 else _bad() for s in suppressed],
    )
    return out


def _bad() -> Any:
    raise TypeError("a value of the wrong shape")


def _read_entry(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o170000 != 0o100000 or st.st_size > ENTRY_LIMIT:
            raise ValueError("not a regular file of a bounded size")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(ENTRY_LIMIT + 1)
    finally:
        os.close(fd)


def _store(path: Path, data: dict[str, Any]) -> None:
    """Write an entry (best effort: a cache that cannot be written only costs the next run time)."""
    try:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return  # a probe answer that is no JSON value: not cached
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:12]}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except (OSError, UnicodeError):
        pass
