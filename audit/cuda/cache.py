"""Results of the source and PTX analyses, cached on disk by the content they read.

LOCAL_ARRAY_BOUNDS, LOCAL_UNINIT_READ and STORE_RACE read nothing but text (a kernel source with its
local headers, or a PTX module), yet they are most of what a ``wireup check`` costs: about 1 s of CPU on
the shipped kernels even with the analyses memoized in process. Their results depend on that text, a
few launch extents and the code of the analyses only, so they are kept in
``<cache>/analysis/<kind>/<key>.json`` (the build cache folder, git-ignored, outside the tracked tree),
where ``key`` is the sha256 of:

* :data:`ANALYSIS_FORMAT` and the source code of every module of :mod:`audit.cuda` (an edit to an
  analysis invalidates every entry, with no version number to forget),
* the kind (``bounds``, ``uninit``, ``races``) and the texts and arguments the analysis reads.

Paths are not part of the key: a finding's file is named by its caller, so a fresh clone at another path
reuses the entries. An entry that cannot be read, does not parse, or holds a field of the wrong type is
ignored and recomputed (and rewritten). Entries are written to a temporary file and renamed into place,
so a concurrent check never reads half an entry. An entry is trusted as much as the build cache beside
it, whose PTX STORE_RACE reads anyway.

>>> cache = AnalysisCache(Path(".wireup-cache/analysis"))                         # doctest: +SKIP
>>> cache.results("bounds", [text, *headers], Overrun, lambda: find_overruns(text))  # doctest: +SKIP
[]
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

ANALYSIS_FORMAT = "wireup-analysis-1"  # bump when the entry layout changes

T = TypeVar("T")

# The field types an entry may hold, by the annotation text of the result classes' fields.
_INT, _STR, _BOOL = "int", "str", "bool"
_FIELD_TYPES: dict[str, Any] = {
    "int": _INT,
    "str": _STR,
    "bool": _BOOL,
    "int | None": (None, _INT),
    "str | None": (None, _STR),
    "tuple[str, ...]": [_STR],
    "tuple[int, ...]": [_INT],
    "tuple[tuple[str, int, int, int], ...]": [(tuple, _STR, _INT, _INT, _INT)],
}


class _Bad(ValueError):
    """An entry's value does not have its field's type."""


@functools.lru_cache(maxsize=1)
def analysis_version() -> str:
    """sha256 of :data:`ANALYSIS_FORMAT` and the source of every module of this package, or "" where
    a module's source cannot be read (then nothing is cached)."""
    h = hashlib.sha256(ANALYSIS_FORMAT.encode() + b"\0")
    try:
        for path in sorted(Path(__file__).parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return ""
    return h.hexdigest()


class AnalysisCache:
    """The results of one kind of analysis by content hash, in ``folder`` (None: no caching)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0

    def key(self, kind: str, parts: Sequence[str | bytes]) -> str | None:
        """The entry key of ``kind`` over ``parts`` (texts and arguments), or None without a version."""
        version = analysis_version()
        if not version:
            return None
        h = hashlib.sha256(f"{version}\0{kind}\0".encode())
        for p in parts:
            data = p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass")
            h.update(str(len(data)).encode() + b":" + data)  # length-prefixed: no two part lists collide
        return h.hexdigest()

    def results(self, kind: str, parts: Sequence[str | bytes], cls: type[T], compute: Callable[[], list[T]]) -> list[T]:
        """The cached results of ``kind`` over ``parts``; ``compute()`` (whose results are instances of
        the frozen dataclass ``cls``) where there is no valid entry, then stored."""
        key = self.key(kind, parts) if self.folder is not None else None
        if key is None or self.folder is None:
            return compute()
        path = self.folder / kind / f"{key}.json"
        hit = _read(path, key, cls)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        out = compute()
        _write(path, key, out)
        return out


    def value(self, kind: str, parts: Sequence[str | bytes], check: Callable[[Any], Any], compute: Callable[[], Any]) -> Any:
        """Like :meth:`results` for a plain JSON value: ``check(stored)`` returns it (converted) or raises
        ValueError/TypeError for a value of the wrong shape, which is then recomputed."""
        key = self.key(kind, parts) if self.folder is not None else None
        if key is None or self.folder is None:
            return compute()
        path = self.folder / kind / f"{key}.json"
        try:
            data = json.loads(path.read_bytes())
            if isinstance(data, dict) and data.get("format") == ANALYSIS_FORMAT and data.get("key") == key:
                out = check(data["value"])
                self.hits += 1
                return out
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            pass
        self.misses += 1
        out = compute()
        _store(path, {"format": ANALYSIS_FORMAT, "key": key, "value": out})
        return out


def _read(path: Path, key: str, cls: type[T]) -> list[T] | None:
    try:
        data = json.loads(path.read_bytes())
        if not isinstance(data, dict) or data.get("format") != ANALYSIS_FORMAT or data.get("key") != key:
            return None
        items = data["results"]
        if not isinstance(items, list):
            return None
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        out = []
        for item in items:
            if not isinstance(item, list) or len(item) != len(fields):
                return None
            out.append(cls(*(_typed(v, _FIELD_TYPES[str(f.type)]) for f, v in zip(fields, item))))
        return out
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # missing, damaged or forged: recompute
        return None


def _typed(value: Any, spec: Any) -> Any:
    """``value`` (from JSON) as the field type ``spec`` says, or :class:`_Bad`."""
    if spec == _INT:
        if type(value) is not int:
            raise _Bad(spec)
        return value
    if spec == _STR or spec == _BOOL:
        if type(value) is not (str if spec == _STR else bool):
            raise _Bad(spec)
        return value
    if isinstance(spec, list):  # tuple[X, ...]
        if not isinstance(value, list):
            raise _Bad(spec)
        return tuple(_typed(v, spec[0]) for v in value)
    if spec[0] is None:  # X | None
        return None if value is None else _typed(value, spec[1])
    if not isinstance(value, list) or len(value) != len(spec) - 1:  # a fixed tuple
        raise _Bad(spec)
    return tuple(_typed(v, s) for v, s in zip(value, spec[1:]))


def _write(path: Path, key: str, results: list[Any]) -> None:
    """Store an entry (best effort: a cache that cannot be written only costs the next run time)."""
    _store(path, {"format": ANALYSIS_FORMAT, "key": key, "results": [list(dataclasses.astuple(r)) for r in results]})


def _store(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:12]}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
    except OSError:
        pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
