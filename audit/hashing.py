"""Content hashes that tie build outputs and GPU evidence to the exact sources they came from.

A kernel's *source hash* covers its ``.cu`` file and every header it includes with ``#include "..."``
(found next to the including file or in the include folders) or ``#include <...>`` found in the project's
include folders (a header the project ships under a system header's name, a stand-in ``<cublas_v2.h>``),
recursively, by relative path and bytes.
A *contract hash* covers the kernel's contract as loaded (its canonical JSON form), so editing a shape or
a tolerance also invalidates evidence.

>>> source_hash(Path("kernels/aux_trunk_kernel.cu"), [Path("kernels")], root=Path("."))   # doctest: +SKIP
'3f2a...'
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

_INCLUDE = re.compile(rb'^\s*#\s*include\s*(?:"([^"]+)"|<([^<>]+)>)', re.MULTILINE)


# Within one check the build, the evidence freshness and the source rules each walk the include closure
# of every source (92 walks for the 11 shipped sources); closures_memoized() lets them share one walk per
# source for the length of the check, which reads the project as of its start.
_CLOSURES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("include_closures", default=None)


@contextlib.contextmanager
def closures_memoized() -> Iterator[None]:
    """Every :func:`include_closure` inside the block is walked once per (source, include folders)."""
    token = _CLOSURES.set({}) if _CLOSURES.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _CLOSURES.reset(token)


def include_closure(source: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """``source`` and every local header it includes, transitively, in a stable order (``<x.h>`` where an
    include folder holds it)."""
    memo = _CLOSURES.get()
    if memo is None:
        return _include_closure(source, include_dirs)
    key = (source, tuple(include_dirs))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _include_closure(source, include_dirs)
    return list(hit)


def _include_closure(source: Path, include_dirs: Sequence[Path]) -> list[Path]:
    from .untrusted import SOURCE_LIMIT, read_regular, resolve

    seen: dict[Path, None] = {}
    stack = [p] if (p := resolve(source)) is not None else []
    while stack:
        path = stack.pop()
        if path in seen or not path.is_file():
            continue
        seen[path] = None
        try:  # a regular file of bounded size only: a header that is a FIFO or /dev/zero would never end
            data = read_regular(path, SOURCE_LIMIT)
        except OSError:
            continue
        for m in _INCLUDE.finditer(data):
            # "x.h": next to the including file, then the include folders; <x.h>: the include folders only
            # (nvcc searches them before the toolkit's; a toolkit header is not found there and not hashed)
            quoted = m.group(1) is not None
            name = (m.group(1) if quoted else m.group(2)).decode("utf-8", "replace")
            for d in ((path.parent,) if quoted else ()) + tuple(include_dirs):
                cand = resolve(d / name)
                if cand is not None and cand.is_file():
                    stack.append(cand)
                    break
    return sorted(seen, key=lambda p: p.as_posix())


def contracts_digest(cfg: Any) -> str:
    """sha256 of every contract file (its path relative to the root, and its bytes) and of the
    configuration: what verify draws its inputs from and judges them by (shapes, domains, masks, buffers,
    ISV slots, tolerances). Where a file cannot be read, a text naming the error (no digest equals it).
    The identity of a journaled verification (:mod:`audit.runtime._journal`) and of ``wireup mutate``'s static
    findings."""
    contracts = cfg.path(cfg.contracts)
    paths = sorted(contracts.rglob("*.toml")) if contracts.is_dir() else [contracts]
    try:
        return files_hash(paths, cfg.root, [json.dumps(getattr(cfg, "__dict__", {}), sort_keys=True, default=str)])
    except OSError as exc:
        return f"unreadable: {exc}"


def files_hash(paths: Iterable[Path], root: Path, extra: Iterable[str] = ()) -> str:
    """sha256 over (relative path, bytes) of each file, plus ``extra`` strings (flags, versions)."""
    h = hashlib.sha256()
    root = root.resolve()
    for p in paths:
        try:
            rel = p.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = p.name
        h.update(rel.encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    for e in extra:
        h.update(e.encode() + b"\0")
    return h.hexdigest()


def source_hash(source: Path, include_dirs: Sequence[Path], root: Path) -> str:
    """Hash of a kernel source and its local headers."""
    return files_hash(include_closure(source, include_dirs), root)


def canonical(obj: Any) -> Any:
    """A JSON-ready form of a model object with locations dropped (they are not part of meaning)."""
    if hasattr(obj, "text") and hasattr(obj, "tree"):  # dims.Expr: its text is its meaning
        return obj.text
    if isinstance(obj, (set, frozenset)):  # sorted: set order depends on the interpreter's hash seed
        return sorted(canonical(x) for x in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in fields(obj):
            if f.name == "loc" or not f.compare:
                continue
            value = getattr(obj, f.name)
            if f.metadata.get("hash_omit_default") and value == f.default:
                continue  # a key added to the format later: absent, it leaves existing hashes (and evidence) as they were
            out[f.name] = canonical(value)
        out["__type__"] = type(obj).__name__
        return out
    if isinstance(obj, (list, tuple)):
        return [canonical(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in obj.items()}
    return obj


def contract_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of a model object (a kernel, a schedule...)."""
    return hashlib.sha256(json.dumps(canonical(obj), sort_keys=True, default=str).encode()).hexdigest()
