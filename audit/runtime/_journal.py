"""A journal of finished verification units, so that a run cut short loses nothing it had finished.

``wireup mutate`` verifies hundreds of variants; on a machine lent for ten minutes a call that runs past
its limit used to record nothing. With a journal, every unit that ends with a verdict is appended as one
JSON line (flushed and synced) the moment it ends; the next run of the same units takes those outcomes
instead of running them again, and runs only the rest.

A unit is taken from the journal only when its *identity* matches: the sha256 of the journal format,
the wireup version, the job's settings (backends, seed, sizes, first-failure mode, launch limits), the
contracts and configuration (:func:`audit.hashing.contracts_digest`: every contract file's path and bytes), the unit
itself (its subjects and modules) and the bytes of every cubin it loads. Any change of source, flags,
contracts (a tolerance, a domain, a buffer's values) or tool version gives a new identity, and the unit
runs again. Not in it: the reference modules' Python code (a changed reference needs ``--fresh``). Outcomes
with an internal error (no verdict) are never journaled. A damaged or forged line is skipped, never
trusted: the journal lives in the build cache, outside the repository, like the rest of the cache.

>>> j = Journal(path)                                             # doctest: +SKIP
>>> done = j.load()                                               # identity -> (UnitOutcome, environments)

The compute-sanitizer passes of ``wireup mutate`` (each survivor run again under memcheck, then racecheck:
a minute a run for a CUTLASS kernel under racecheck) keep their own journal beside it,
:class:`VerdictJournal`: one line per finished sanitizer run, its tool's reports (the rule and message of
each error), under an identity the caller derives from the run's builds and settings (see
``audit.mutate._run``). Runs whose findings were not the tool's own (inconclusive) are not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._results import EnvironmentInfo, SubjectResult
from ._supervisor import UnitOutcome

FORMAT = 1
LINE_LIMIT = 64 << 20  # a journal line is one unit's results; anything longer is not ours


def unit_identity(base: Mapping[str, Any], unit: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """The identity of ``unit`` of a job with ``base`` and ``settings`` (see the module docstring)."""
    from .. import __version__

    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "version": __version__, "base": dict(base), "unit": dict(unit), "settings": dict(settings)},
                        sort_keys=True, default=str).encode())  # fmt: skip
    for mod in sorted((unit.get("modules") or {}).items()):
        cubin = mod[1].get("cubin") if isinstance(mod[1], Mapping) else None
        if cubin:
            try:
                h.update(hashlib.sha256(Path(cubin).read_bytes()).digest())
            except OSError:
                h.update(b"missing:" + str(cubin).encode())
    return h.hexdigest()


class Journal:
    """The journal file at ``path`` (its folder is made on the first append)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, tuple[UnitOutcome, dict[str, EnvironmentInfo]]]:
        """Identity -> (outcome, the environments of the worker that ran it), of every valid line."""
        out: dict[str, tuple[UnitOutcome, dict[str, EnvironmentInfo]]] = {}
        try:
            with open(self.path, "rb") as fh:
                for raw in fh:
                    if len(raw) > LINE_LIMIT:
                        continue
                    got = _parse(raw)
                    if got is not None:
                        out[got[0]] = got[1:]
        except OSError:
            return {}
        return out

    def append(self, identity: str, unit_id: str, outcome: UnitOutcome, environments: Mapping[str, EnvironmentInfo]) -> None:
        """One line for a unit that ended with a verdict (an outcome with an internal error is skipped)."""
        if outcome.error is not None:
            return
        line = json.dumps({
            "format": FORMAT, "identity": identity, "unit": unit_id, "seconds": float(outcome.seconds), "notes": list(outcome.notes),
            "results": [r.to_dict() for r in outcome.results], "environments": {n: e.to_dict() for n, e in environments.items()},
        }, sort_keys=True)  # fmt: skip
        _append_line(self.path, line)

    def remove(self) -> None:
        _remove(self.path)


def _parse(raw: bytes) -> tuple[str, UnitOutcome, dict[str, EnvironmentInfo]] | None:
    try:
        d = json.loads(raw)
        if not isinstance(d, dict) or d.get("format") != FORMAT or type(d.get("identity")) is not str:
            return None
        results = [SubjectResult.from_dict(r) for r in d["results"]]
        notes = d.get("notes", [])
        if not isinstance(notes, list) or not all(type(n) is str for n in notes) or type(d.get("seconds")) not in (int, float):
            return None
        envs = {str(n): EnvironmentInfo.from_dict(e) for n, e in d.get("environments", {}).items()}
        return d["identity"], UnitOutcome(results, float(d["seconds"]), notes), envs
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


class VerdictJournal:
    """The journal of finished sanitizer runs at ``path``: identity -> the (rule, message) errors of each."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        try:
            with open(self.path, "rb") as fh:
                for raw in fh:
                    if len(raw) > LINE_LIMIT:
                        continue
                    try:
                        d = json.loads(raw)
                        if not isinstance(d, dict) or d.get("format") != FORMAT or type(d.get("identity")) is not str:
                            continue
                        errors = [(str(r), str(m)) for r, m in d["errors"]]
                    except (ValueError, KeyError, TypeError, RecursionError):
                        continue
                    out[d["identity"]] = errors
        except OSError:
            return {}
        return out

    def append(self, identity: str, unit_id: str, errors: list[tuple[str, str]]) -> None:
        _append_line(self.path, json.dumps({"format": FORMAT, "identity": identity, "unit": unit_id,
                                            "errors": [list(e) for e in errors]}, sort_keys=True))

    def remove(self) -> None:
        _remove(self.path)


def _append_line(path: Path, line: str) -> None:
    """Append one line to the journal at ``path`` (its folder made on the first), flushed and synced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def sanitizer_journal_path(journal: Path) -> Path:
    """The sanitizer passes' journal beside the verification journal ``journal`` (``K.jsonl`` -> ``K.sanitizers.jsonl``)."""
    journal = Path(journal)
    return journal.with_name(journal.stem + ".sanitizers.jsonl")
