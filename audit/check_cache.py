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

**Reuse by value.** Most edits change a file's text but not a value any rule reads: a comment, blank
lines, the layout of a table, a ``doc`` string. So a second entry, in ``<cache>/check/values/``, keys the
same result by what the text means instead: for each contract file the sha256 of its parsed value with
every ``doc`` string the loader read replaced by one marker (:func:`values_digest`; no contract-only rule
reads a doc: tests/test_check_cache.py changes every doc of the shipped contracts, a synthetic project
and each fixture and compares the full results). A per-folder index (``index-*.json`` there) keeps, for the
last :data:`INDEX_VERSIONS` texts of each file, the text digest, the value digest and the doc positions,
so that only the files whose text changed are parsed, and digested with the doc positions of each of
their earlier texts: where the new value differs anywhere else, or holds something else where a doc was,
no digest matches and the check runs in full. Two more things a result
depends on are validated before it is reused: the probes, as above, and every line the run asked of a
contract file (a finding's line, a line a message cites): the entry records them, and each is located
again in the current text of a changed file; any that moved is a miss. On a hit the result is also
stored under the text key, and the index takes the new texts.

A selection with any other rule (build, evidence, launchers, layout: they read the build, the evidence
records, the launcher sources or generated files) is not cached; neither is a result whose
``[[suppress]]`` entries name such a rule that SUPPRESSION_UNUSED judged (selected alone: a contract-only
selection leaves those unjudged, :func:`audit.rules._engine._suppress`), nor a load error. An
entry that cannot be read, does not parse or holds a value of the wrong type is ignored and rewritten.
The index, like the parsed-file cache, vouches for the values of texts it recorded (a value digest is
recomputed only for a text it does not know). The cache is trusted as much as the build cache beside it: a cache folder git tracks is not used at all
(:func:`cache_folder`), and a CI job should not restore a cache folder written by an untrusted pull request.

>>> store = CheckCache.open(cfg, rules, options)          # doctest: +SKIP
>>> store.lookup() or store.save(run_check(...))          # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._tomlpos import line_of, locate_lines
from .errors import ContractError
from .findings import CheckResult, Finding, NotRun, Severity
from . import load as _load
from .load import ContractTexts, parser_name, read_contract_files
from .rules import CONTRACT_ONLY, PROBES, REGISTRY, RUN_ONLY, Rule

if TYPE_CHECKING:
    from .api import CheckRun
    from .config import Config
    from .model import ContractSet

CHECK_FORMAT = "wireup-check-2"  # bump when the entry layout changes
INDEX_FORMAT = "wireup-check-values-2"  # bump when the index layout or the value digest changes
#: What a doc string the loader read is replaced by in a value digest: a tuple, which no TOML value is.
DOC_MARKER = ("doc",)
#: Texts of each contract file the index keeps (newest first): an edit undone, or a branch checked out
#: again, is recognised by value.
INDEX_VERSIONS = 4
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

    package = package_digest()
    if not package:
        return ""
    h = hashlib.sha256(f"{CHECK_FORMAT}\0{sys.version}\0{parser_name()}\0".encode())
    h.update(_shortest_path_code() or b"no networkx")
    h.update(package.encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """sha256 of every module of the ``audit`` package, by path and bytes ("" where one cannot be read):
    what a pure-Python analysis of given bytes (the static checks of ``wireup mutate``) is a function of,
    whichever interpreter runs it, so its results made here serve the GPU machine's other Python."""
    h = hashlib.sha256(b"wireup-package-1\0")
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
    """One check's entries (by text and by value): their keys, the contract files read, reading and writing them."""

    def __init__(self, cfg: Config, folder: Path, prefix: bytes, read: ContractTexts, shas: dict[str, str]) -> None:
        self.cfg = cfg
        self.folder = folder
        self.prefix = prefix  # wireup's code, the configuration, the options and the rules, hashed
        self.read = read  # the contract files, read once for the key and the load
        self.shas = shas  # relative path -> sha256 of its text
        h = hashlib.sha256(b"text\0" + prefix)
        for rel in sorted(shas):
            h.update(f"{len(rel)}:{rel}{shas[rel]}".encode("utf-8", "surrogatepass"))
        self.key = h.hexdigest()
        self.path = folder / "check" / f"{self.key}.json"
        scope = hashlib.sha256(f"{INDEX_FORMAT}\0{code_version()}\0{parser_name()}\0{cfg.contracts_dir.absolute()}\0".encode("utf-8", "surrogatepass"))
        self.index_path = folder / "check" / "values" / f"index-{scope.hexdigest()}.json"
        # relative path -> (text sha256, value digest, doc positions) of the texts the index did not know
        self._new: dict[str, tuple[str, str, list[tuple]]] | None = None
        self._index: dict[str, list[tuple[str, str, list[tuple]]]] | None = None

    def index(self) -> dict[str, list[tuple[str, str, list[tuple]]]]:
        """The index of this contracts folder as this check found it (read once)."""
        if self._index is None:
            self._index = _read_index(self.index_path)
        return self._index

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
        prefix = f"{version}\0{cfg!r}\0{root}\0{opts}\0".encode("utf-8", "surrogatepass")
        prefix += "\0".join(r.id for r in rules).encode() + b"\0"
        shas = {rel: hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() for rel, text in read.texts.items()}
        return cls(cfg, folder, prefix, read, shas)

    def lookup(self) -> CheckResult | None:
        """The cached result, or None where there is no valid entry or a probe answers otherwise now:
        first by the texts of the contract files, then by their values (see the module's docstring)."""
        data = self._valid(self.path, self.key)
        if data is not None:
            return _result(data["result"])
        index = self.index()
        digests: dict[str, str] = {}
        changed = {}
        for rel, text in self.read.texts.items():
            versions = index.get(rel)
            if not versions:
                return None
            sha = self.shas[rel]
            known = next((v for v in versions if v[0] == sha), None)
            if known is None:
                try:
                    value = _load._parse_toml(text.removeprefix("\ufeff"))
                except Exception:  # not TOML (the load reports it), too deep, a parser's own failure
                    return None
                if type(value) is not dict:
                    return None
                self.read.values[rel] = value  # parsed once: a load after a miss takes it from here
                known = next(((sha, d, pos) for _, d, pos in versions if values_digest(value, pos) == d), None)
                if known is None:
                    return None
                changed[rel] = [known, *(v for v in versions if v[0] != sha)][:INDEX_VERSIONS]
            digests[rel] = known[1]
        key = self._values_key(digests)
        data = self._valid(self._values_path(key), key)
        if data is None:
            return None
        try:
            result = _result(data["result"])
        except (KeyError, TypeError):
            return None
        index.update(changed)
        _write_index(self.index_path, index)
        # the next check of these texts reads it first; its lines were found where they are in them
        lines = [[rel, self.shas[rel], asked] for rel, _sha, asked in data["lines"]]
        _store(self.path, {**data, "key": self.key, "lines": lines})
        return result

    def _values_key(self, digests: dict[str, str]) -> str:
        h = hashlib.sha256(b"values\0" + self.prefix)
        for rel in sorted(digests):
            h.update(f"{len(rel)}:{rel}{digests[rel]}".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _values_path(self, key: str) -> Path:
        return self.index_path.parent / f"{key}.json"

    def _valid(self, path: Path, key: str) -> dict[str, Any] | None:
        """The entry at ``path`` where it is one of ``key`` whose probes answer and whose lines lie as
        recorded now (its result still to be typed by :func:`_result`); None otherwise."""
        try:
            data = json.loads(_read_entry(path))
            if not isinstance(data, dict) or data.get("format") != CHECK_FORMAT or data.get("key") != key:
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
            if not self._lines_hold(data["lines"]):
                return None
            _result(data["result"])
            return data
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # missing, damaged or forged
            return None

    def _lines_hold(self, recorded: Any) -> bool:
        """Whether every line the run asked of a contract file is where it was (files whose text is the
        one the run read are not looked at again)."""
        if type(recorded) is not list:
            return False
        for item in recorded:
            if type(item) is not list or len(item) != 3 or type(item[0]) is not str or type(item[1]) is not str or type(item[2]) is not list:
                return False
            rel, sha, asked = item
            if rel not in self.shas:
                return False
            if sha == self.shas[rel]:
                continue
            lines = locate_lines(self.read.texts[rel].removeprefix("\ufeff"))
            for pair in asked:
                if type(pair) is not list or len(pair) != 2 or _key_path(pair[0]) is None:
                    return False
                key, line = pair
                if (line is not None and type(line) is not int) or line_of(lines, tuple(key)) != line:
                    return False
        return True

    def save(self, run: CheckRun) -> None:
        """Store the result of ``run`` (a check of the rules this entry was opened for), unless a rule it
        judged reads more than the contracts (a suppression of such a rule, judged by SUPPRESSION_UNUSED)."""
        result = run.result
        if result.load_failed:
            return
        got = run.context.facts.get("suppressions")  # (hits, the rules SUPPRESSION_UNUSED judged), where it ran
        judged = got[1] if got else ()
        for rid in judged:
            r = REGISTRY.get(rid)
            if r is not None and r.category not in RUN_ONLY and r.replaced_by is None and not cacheable(r):
                return
        probes = [[kind, arg, answer] for (kind, arg), answer in run.context.probes.items()]
        lines = [
            [rel, self.shas[rel], [[list(key), line] for key, line in src.asked.items()]]
            for rel, src in self.read.sources.items()
            if src.asked and rel in self.shas
        ]
        data = {"format": CHECK_FORMAT, "key": self.key, "probes": probes, "lines": lines, "result": _plain(result)}
        _store(self.path, data)
        digests = self._index_values(run.contracts)
        if digests is not None:
            key = self._values_key(digests)
            _store(self._values_path(key), {**data, "key": key})

    def digest(self, cs: ContractSet) -> None:
        """Digest the parsed value of every contract file whose text the index does not know, from the
        load of ``cs``, and let the parsed values go (called once the model is built and before the
        rules run, so that the values are not held while they run)."""
        index = self.index()
        todo = {rel for rel, sha in self.shas.items() if not any(v[0] == sha for v in index.get(rel, ()))}
        positions = doc_positions(cs, todo, self.read.values) if todo else {}
        self._new = {}
        for rel in todo:
            value = self.read.values.get(rel)
            digest = values_digest(value, positions[rel]) if value is not None else None
            if digest is not None:
                self._new[rel] = (self.shas[rel], digest, positions[rel])
        self.read.values.clear()

    def _index_values(self, cs: ContractSet) -> dict[str, str] | None:
        """Bring the index up to this load's texts; the value digest of every contract file, or None
        where one has none (a value that could not be digested)."""
        if self._new is None:
            self.digest(cs)
        new = self._new or {}
        index = self.index()
        fresh: dict[str, list[tuple[str, str, list[tuple]]]] = {}
        digests = {}
        for rel, sha in self.shas.items():
            versions = index.get(rel, [])
            known = next((v for v in versions if v[0] == sha), None) or new.get(rel)
            if known is not None:
                fresh[rel] = [known, *(v for v in versions if v[0] != sha)][:INDEX_VERSIONS]
                digests[rel] = known[1]
            elif versions:
                fresh[rel] = versions
        if fresh != index:
            _write_index(self.index_path, fresh)
        return digests if len(digests) == len(self.shas) else None


# -- value digests ----------------------------------------------------------------------------------


def _described(cs: ContractSet, rels: set[str]) -> Iterator[Any]:
    """Every object of ``cs`` whose table may hold a ``doc`` string the loader reads (a kernel's
    parameters only where the kernel is declared in a file of ``rels``: they lie in its table)."""
    yield from cs.dims
    yield from cs.buffers
    for k in cs.kernels:
        yield k
        if k.loc.source is not None and k.loc.source.path in rels:
            yield from k.params
    if cs.isv is not None:
        yield from cs.isv.slots
    yield from cs.schedules


def doc_positions(cs: ContractSet, rels: set[str], values: dict[str, Any]) -> dict[str, list[tuple]]:
    """For each file of ``rels``: the key paths of the tables whose ``doc`` string the load of ``cs``
    read (a path whose table in the parsed value ``values[rel]`` holds another doc is left out).

    An object's location is its table, or a value in it (a fixed dim points at its ``value``): then the
    table is the one around that value."""
    out: dict[str, list[tuple]] = {rel: [] for rel in rels}
    for obj in _described(cs, rels):
        src = obj.loc.source
        if not obj.doc or src is None or src.path not in out:
            continue  # an empty doc is left in the value: editing it is a miss, which costs only time
        key = obj.loc.key
        value = values.get(src.path)
        table = _at(value, key)
        if type(table) is not dict and key:
            key = key[:-1]
            table = _at(value, key)
        if type(table) is dict and type(table.get("doc")) is str and table["doc"] == obj.doc:
            out[src.path].append(key)
    return {rel: list(dict.fromkeys(keys)) for rel, keys in out.items()}  # a table two objects share, once


def _at(value: Any, key: tuple) -> Any:
    for part in key:
        if type(part) is str and type(value) is dict:
            value = value.get(part)
        elif type(part) is int and type(value) is list and 0 <= part < len(value):
            value = value[part]
        else:
            return None
    return value


def values_digest(value: dict[str, Any], positions: list[tuple]) -> str | None:
    """sha256 of the parsed value of a contract file with the ``doc`` string of the table at each of
    ``positions`` replaced by :data:`DOC_MARKER`; None where a position holds no table with a doc string
    (then the value differs from the one the positions were found in).

    Two values with the same digest are equal but for doc strings at those positions: marshal's version 2
    writes no references, so its bytes are a function of the value, and decode back to it."""
    root = dict(value)
    copied = {id(root)}
    for key in positions:
        node: Any = root
        for part in key:
            if type(part) is str and type(node) is dict and part in node:
                child = node[part]
            elif type(part) is int and type(node) is list and 0 <= part < len(node):
                child = node[part]
            else:
                return None
            if id(child) not in copied and type(child) in (dict, list):
                child = dict(child) if type(child) is dict else list(child)
                copied.add(id(child))
                node[part] = child
            node = child
        if type(node) is not dict or type(node.get("doc")) is not str:
            return None
        node["doc"] = DOC_MARKER
    try:
        return hashlib.sha256(marshal.dumps(root, 2)).hexdigest()
    except (ValueError, RecursionError):
        return None


def _key_path(v: Any) -> tuple | None:
    """A key path from JSON (a list of strings and integers), or None."""
    if type(v) is not list or not all(type(p) is str or type(p) is int for p in v):
        return None
    return tuple(v)


def _read_index(path: Path) -> dict[str, list[tuple[str, str, list[tuple]]]]:
    """The index at ``path``: relative path -> its last :data:`INDEX_VERSIONS` texts, newest first, each
    (text sha256, value digest, doc positions); empty where it is missing, damaged or of another shape."""
    try:
        data = json.loads(_read_entry(path))
        if type(data) is not dict or data.get("format") != INDEX_FORMAT or type(data.get("files")) is not dict:
            return {}
        out = {}
        for rel, versions in data["files"].items():
            if type(versions) is not list or len(versions) > INDEX_VERSIONS:
                return {}
            out[rel] = []
            for v in versions:
                if type(v) is not list or len(v) != 3 or type(v[0]) is not str or type(v[1]) is not str or type(v[2]) is not list:
                    return {}
                positions = [_key_path(k) for k in v[2]]
                if any(k is None for k in positions):
                    return {}
                out[rel].append((v[0], v[1], positions))
        return out  # type: ignore[return-value]
    except (OSError, ValueError, RecursionError):
        return {}


def _write_index(path: Path, index: dict[str, list[tuple[str, str, list[tuple]]]]) -> None:
    files = {rel: [[sha, digest, [list(k) for k in positions]] for sha, digest, positions in versions] for rel, versions in sorted(index.items())}
    _store(path, {"format": INDEX_FORMAT, "files": files})


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
