"""Parsed contract files, cached on disk by their content: a file that did not change is not parsed again.

Parsing TOML is most of what loading a large contract set costs (1.1-1.6 s of the 9.6 MB of a
10,000-kernel project with the compiled tomli; 0.1 s to read the same values back from this cache). The
value a parser returns for a text depends on that text alone, so it is kept in
``<cache>/parsed/<key>.bin`` (the build cache folder, outside the tracked tree), where ``key`` is the
sha256 of :data:`PARSED_FORMAT`, the parser's name and the text. Building the model from the value is
not cached: it runs, with every check of :mod:`audit.load`, on whatever the entry holds, exactly as on a
freshly parsed file.

An entry is ``PARSED_FORMAT``, a newline, the sha256 of the payload and the payload: the value in
:mod:`marshal` format. It is read only when the digest matches (a truncated or damaged entry is
ignored), and used only when every value in it is of a type TOML produces (a table with string keys,
an array, a string, an integer, a float, a boolean) nested at most :data:`MAX_NESTING` deep; anything
else (a code object, bytes, a set, a forged entry of another shape) is ignored and the file parsed
again. Nothing in an entry is executed. Values a parser returns that marshal cannot hold (TOML dates and
times) are not cached. Entries are written to a temporary file and renamed into place.

>>> cache = ParsedCache(Path(".wireup-cache/parsed"), "tomli")                  # doctest: +SKIP
>>> cache.parse(text, tomllib.loads) == tomllib.loads(text)                     # doctest: +SKIP
True
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PARSED_FORMAT = b"wireup-parsed-toml-1"  # bump when the entry layout changes
#: Deepest nesting of tables and arrays an entry may hold (contracts nest about six levels).
MAX_NESTING = 64
#: Largest entry read (bytes); a contract file is at most 64 MiB.
ENTRY_LIMIT = 256 << 20

_SCALARS = frozenset((str, int, float, bool))


def plain_toml(value: Any) -> bool:
    """Whether ``value`` holds only what a TOML parser returns for contracts (a table with string keys
    at the top; tables, arrays, strings, integers, floats, booleans below), nested at most
    :data:`MAX_NESTING` deep."""
    return type(value) is dict and _plain_table(value, 0)


# two small mutually recursive walks (the nesting is bounded): about twice as fast as one loop over a
# stack, which matters at 10,000 kernels (1.1 M values)
def _plain_table(v: dict, depth: int) -> bool:
    if depth >= MAX_NESTING:
        return False
    for k, x in v.items():
        if type(k) is not str:
            return False
        t = type(x)
        if t in _SCALARS:
            continue
        if not (_plain_table(x, depth + 1) if t is dict else t is list and _plain_array(x, depth + 1)):
            return False
    return True


def _plain_array(v: list, depth: int) -> bool:
    if depth >= MAX_NESTING:
        return False
    for x in v:
        t = type(x)
        if t in _SCALARS:
            continue
        if not (_plain_table(x, depth + 1) if t is dict else t is list and _plain_array(x, depth + 1)):
            return False
    return True


class ParsedCache:
    """Parsed TOML values by the sha256 of their text, in ``folder``; ``parser`` names the parser (its
    values are cached under its name only)."""

    def __init__(self, folder: Path, parser: str) -> None:
        self.folder = folder
        self.parser = parser
        self.hits = 0
        self.misses = 0

    def key(self, text: str) -> str:
        h = hashlib.sha256(PARSED_FORMAT + b"\0" + self.parser.encode() + b"\0")
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def parse(self, text: str, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """``parse(text)``, read from the cache where an entry for ``text`` is valid, else computed and
        stored. Whatever ``parse`` raises is raised (and nothing stored)."""
        key = self.key(text)
        path = self.folder / f"{key}.bin"
        value = _read(path)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        value = parse(text)
        _write(path, value)
        return value


def _read(path: Path) -> dict[str, Any] | None:
    """The value of the entry at ``path``, or None where it is missing, damaged or not plain TOML."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > ENTRY_LIMIT:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(ENTRY_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    head = len(PARSED_FORMAT) + 1
    if len(data) < head + 32 or data[:head] != PARSED_FORMAT + b"\n":
        return None
    payload = memoryview(data)[head + 32 :]
    if hashlib.sha256(payload).digest() != data[head : head + 32]:
        return None
    try:
        value = marshal.loads(payload)
    except (ValueError, EOFError, TypeError, RecursionError, MemoryError):
        return None
    return value if plain_toml(value) else None


def _write(path: Path, value: dict[str, Any]) -> None:
    """Store ``value`` (best effort: a cache that cannot be written only costs the next run time)."""
    if not plain_toml(value):
        return  # dates and times (which marshal cannot hold), or nesting deeper than an entry may be
    try:
        payload = marshal.dumps(value)
    except (ValueError, RecursionError):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:12]}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(PARSED_FORMAT + b"\n" + hashlib.sha256(payload).digest())
                fh.write(payload)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass
