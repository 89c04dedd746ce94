"""Parsed contract files, cached on disk by their content: a file that did not change is not parsed again.

Parsing TOML is most of what loading a large contract set costs (1.1-1.6 s of the 9.6 MB of a
10,000-kernel project with the compiled tomli; about 0.2 s to read the same values back from this
cache). The value a parser returns for a text depends on that text alone, so it is kept under the
sha256 of :data:`PARSED_FORMAT`, the parser's name and the text. Building the model from the value is
not cached: it runs, with every check of :mod:`audit.load`, on whatever the entry holds, exactly as on a
freshly parsed file.

The values of one contracts folder are kept together, in :data:`SHARDS` files
``<cache>/parsed/<name>-<digit>.bin`` (the build cache folder, outside the tracked tree; ``name`` is the
sha256 of the folder's path, ``digit`` the first hex digit of the values' keys), each rewritten after a
load that parsed a value of it or left one of its entries unused, with exactly the values of that load:
a few writes instead of one per file (a cold load of 1,005 files spent more on writing entries than on
anything else this cache adds), after an edit of one file only the shards of its old and new value (not
all 9 MB of a 10,000-kernel project: rewriting them took ~0.1 s), and no entry outlives the file it was
parsed from.

Each file is ``PARSED_FORMAT``, a newline, the sha256 of the payload and the payload: a table of text keys
to values in :mod:`marshal` format. It is read only when the digest matches (a truncated or damaged file
is ignored), and a value is used only when every value in it is of a type TOML produces (a table with
string keys, an array, a string, an integer, a float, a boolean) nested at most :data:`MAX_NESTING` deep;
anything else (a code object, bytes, a set, a forged entry of another shape) is ignored and the file
parsed again. Nothing in an entry is executed. Values a parser returns that marshal cannot hold (TOML
dates and times) are not cached. The file is written to a temporary file and renamed into place.

>>> cache = ParsedCache(Path(".wireup-cache/parsed"), "tomli", "/repo/contracts")   # doctest: +SKIP
>>> cache.parse(text, tomllib.loads) == tomllib.loads(text)                        # doctest: +SKIP
True
>>> cache.save()                                                                   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
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
    """The parsed TOML values of the contract folder ``scope``, by the sha256 of their text, in ``folder``;
    ``parser`` names the parser (its values are cached under its name only). :meth:`save` writes what
    this load used.

    The values are spread over :data:`SHARDS` files by the first hex digit of their key
    (``<name>-<digit>.bin``), so that after an edit of one file only the shards holding its old and its
    new value are written again (about an eighth of the values, not all 9 MB at 10,000 kernels)."""

    def __init__(self, folder: Path, parser: str, scope: str) -> None:
        self.folder = folder
        self.parser = parser
        name = hashlib.sha256(PARSED_FORMAT + b"\0" + parser.encode() + b"\0" + scope.encode("utf-8", "surrogatepass"))
        self.name = name.hexdigest()
        self.hits = 0
        self.misses = 0
        self._stored: dict[str, dict[str, Any]] = {}  # shard -> its file's table, read on first use
        self._used: dict[str, dict[str, Any]] = {}
        self._fresh: set[str] = set()  # keys parsed by this load (not yet checked to be plain TOML)

    def shard_path(self, key: str) -> Path:
        """The file that holds the value of ``key`` (a :meth:`key`)."""
        return self.folder / f"{self.name}-{key[0]}.bin"

    def key(self, text: str) -> str:
        h = hashlib.sha256(PARSED_FORMAT + b"\0" + self.parser.encode() + b"\0")
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def parse(self, text: str, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """``parse(text)``, from the cache where it holds a valid value for ``text``, else computed (and
        kept for :meth:`save`). Whatever ``parse`` raises is raised (and nothing kept)."""
        key = self.key(text)
        stored = self._stored.get(key[0])
        if stored is None:
            stored = self._stored[key[0]] = _read(self.shard_path(key))
        value = stored.get(key)
        if value is not None and plain_toml(value):
            self.hits += 1
        else:
            self.misses += 1
            value = parse(text)
            self._fresh.add(key)
        self._used[key] = value
        return value

    def save(self) -> None:
        """Write the values this load used, where that differs from what the files hold: a shard that
        holds a value this load did not use, or lacks one it parsed, is written again (with exactly the
        values of this load); a shard with no value of this load is removed (best effort: a cache that
        cannot be written only costs the next load time)."""
        shards: dict[str, dict[str, Any]] = {digit: {} for digit in _DIGITS}
        for k, v in self._used.items():
            shards[k[0]][k] = v
        written = False
        for digit, used in shards.items():
            path = self.folder / f"{self.name}-{digit}.bin"
            if not used:
                try:
                    path.unlink()
                except OSError:
                    pass
                continue
            stored = self._stored.get(digit)
            if stored is not None and len(used) == len(stored) and not any(k in self._fresh for k in used):
                continue  # every value of the shard used, none parsed: as it is
            # what was read is plain TOML already; of what was parsed, dates and times are not kept
            table = {k: v for k, v in used.items() if k not in self._fresh or plain_toml(v)}
            try:
                payload = marshal.dumps(table)
            except (ValueError, RecursionError):
                continue
            _write(path, payload)
            written = True
        if written:  # the one file of the format before the shards
            try:
                (self.folder / f"{self.name}.bin").unlink()
            except OSError:
                pass


_DIGITS = "0123456789abcdef"
#: Number of shard files per contracts folder (one per hex digit of the keys).
SHARDS = len(_DIGITS)


def _read(path: Path, fmt: bytes = PARSED_FORMAT) -> dict[str, Any]:
    """The table of the file at ``path`` written as ``fmt``; empty where it is missing, damaged or of
    another shape (audit.evidence keeps its record summaries in files of its own format)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > ENTRY_LIMIT:
            return {}
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(ENTRY_LIMIT + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    head = len(fmt) + 1
    if len(data) < head + 32 or data[:head] != fmt + b"\n":
        return {}
    payload = memoryview(data)[head + 32 :]
    if hashlib.sha256(payload).digest() != data[head : head + 32]:
        return {}
    try:
        table = marshal.loads(payload)
    except (ValueError, EOFError, TypeError, RecursionError, MemoryError):
        return {}
    if type(table) is not dict or not all(type(k) is str for k in table):
        return {}
    return table


def _write(path: Path, payload: bytes, fmt: bytes = PARSED_FORMAT) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:12]}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(fmt + b"\n" + hashlib.sha256(payload).digest())
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
