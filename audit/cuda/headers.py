"""The local headers the kernels include, and which of their functions each kernel reaches: what header
mutants (``wireup mutate``, :mod:`audit.mutate._headers`) are made of, and what the report counts them
against.

A *header unit* is a local header (a file inside the project root in some kernel's include closure,
other than a kernel's own source), named by its file name (``aux_common.cuh``), with its *including
kernels*: every kernel whose include closure holds it, directly or through another header.

>>> units = header_units(cfg, cs)                                 # doctest: +SKIP
>>> units["aux_head_forward.cuh"].kernels                         # doctest: +SKIP
('aux_next_bar_forward', 'aux_trade_outcome_forward')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HeaderUnit:
    """A local header and the kernels (contract order) whose include closure holds it."""

    name: str  # the unit's name: the header's file name (its root-relative path with "_" for "/" when two share a name)
    source: str  # root-relative path
    path: Path  # resolved
    kernels: tuple[str, ...]


def include_dirs(cfg: Any) -> list[Path]:
    return [cfg.path(d) for d in cfg.include_dirs]


def source_closure(cfg: Any, source: str) -> list[Path]:
    from ..hashing import include_closure

    return include_closure(cfg.path(source), include_dirs(cfg))


def header_units(cfg: Any, cs: Any) -> dict[str, HeaderUnit]:
    """Every local header some kernel includes (directly or through another header), by unit name, in
    path order."""
    from ..untrusted import resolve

    root = resolve(cfg.root) or cfg.root
    found: dict[Path, list[str]] = {}
    for k in cs.kernels:
        own = resolve(cfg.path(k.source))
        for h in source_closure(cfg, k.source):
            if h == own or any(h == resolve(cfg.path(o.source)) for o in cs.kernels):
                continue
            try:
                h.relative_to(root)
            except ValueError:
                continue  # a header outside the project (a toolkit header found through an include folder)
            found.setdefault(h, [])
            if k.name not in found[h]:
                found[h].append(k.name)
    paths = sorted(found, key=lambda p: p.relative_to(root).as_posix())
    names = [p.name for p in paths]
    out: dict[str, HeaderUnit] = {}
    for p in paths:
        rel = p.relative_to(root).as_posix()
        name = p.name if names.count(p.name) == 1 else rel.replace("/", "_")
        out[name] = HeaderUnit(name, rel, p, tuple(found[p]))
    return out


def reached_bodies(cfg: Any, cs: Any, kernel: str, header: Path) -> list[tuple[int, int]]:
    """The ``(open, close)`` body braces of the functions of ``header`` that ``kernel``'s entry reaches:
    through the functions of its own file and of every header in its include closure, by name (and by
    owning struct and through type aliases, as :meth:`audit.cuda.scope.Source.reachable_bodies` does within
    one file)."""
    return reached_functions(cfg, cs, kernel).get(header, ([], None))[0]


def reached_lines(cfg: Any, cs: Any, kernel: str) -> dict[Path, list[tuple[int, int]]]:
    """Per file of ``kernel``'s source closure, the ``(first, last)`` lines of the function bodies its
    entry reaches (a file none of whose functions it reaches is absent)."""
    out: dict[Path, list[tuple[int, int]]] = {}
    for path, (bodies, src) in reached_functions(cfg, cs, kernel).items():
        out[path] = [(src.tokens[a].line, src.tokens[b].line) for a, b in bodies]
    return out


def reached_functions(cfg: Any, cs: Any, kernel: str) -> dict[Path, tuple[list[tuple[int, int]], Any]]:
    """Per file of ``kernel``'s source closure whose functions its entry reaches: the ``(open, close)``
    body braces of those functions, sorted, and the parsed file. The entry is where :func:`entry_file`
    finds it: a kernel defined in an included header (its source only includes that header) reaches from
    there, and the header's entry body is among what it reaches."""
    from ..cuda.scope import reach

    found = _entry(cfg, cs, kernel)
    if found is None:
        return {}
    parsed, where, entry = found
    return {p: ([(f.open, f.close) for f in fs], parsed[p]) for p, fs in reach(parsed, where, entry).items()}


def judge_hashes(cfg: Any, cs: Any, unit: HeaderUnit) -> dict[str, str]:
    """Each kernel including ``unit``: the sha256 of its source closure without the header itself (its own
    source and every other local header it includes), what a header record keeps as ``judged_sources`` so
    the report can tell when the kernels that judged the header's mutants have changed since."""
    from ..hashing import files_hash

    out: dict[str, str] = {}
    for kernel in unit.kernels:
        try:
            paths = [p for p in source_closure(cfg, cs.kernel(kernel).source) if p != unit.path]
            out[kernel] = files_hash(paths, cfg.root)
        except (OSError, KeyError, ValueError):
            continue
    return out


def entry_file(cfg: Any, cs: Any, kernel: str) -> Path | None:
    """The file of ``kernel``'s source closure that defines its entry (resolved): its own source when that
    defines it, else the first file of the closure, in path order, defining a ``__global__`` function of
    that name (a kernel written in a header that a small ``.cu`` includes); None when no file does.

    >>> entry_file(cfg, cs, "sgemm_naive")                          # doctest: +SKIP
    PosixPath('/src/SGEMM_CUDA/src/kernels/1_naive.cuh')
    """
    from ..cuda.scope import Source
    from ..untrusted import SOURCE_LIMIT, read_regular, resolve

    own = resolve(cfg.path(cs.kernel(kernel).source))
    try:  # the usual case, one file parsed: the kernel's own source defines it
        if own is not None and Source.parse(read_regular(own, SOURCE_LIMIT).decode("utf-8", "replace")).entry(cs.kernel(kernel).symbol) is not None:
            return own
    except OSError:
        return None
    found = _entry(cfg, cs, kernel)
    return None if found is None else found[1]


def entry_null_tests(cfg: Any, cs: Any, kernel: str) -> list[Any]:
    """The tests against NULL of ``kernel``'s pointer parameters in the code its entry runs
    (:func:`audit.cuda.nulltests.null_tests` over its source closure: the entry's body and the device
    functions it passes a pointer on to), each with ``file`` the resolved path it is in."""
    from ..cuda.nulltests import null_tests

    found = _entry(cfg, cs, kernel)
    if found is None:
        return []
    parsed, where, entry = found
    return null_tests(parsed, where, entry)


def _entry(cfg: Any, cs: Any, kernel: str) -> tuple[dict[Path, Any], Path, Any] | None:
    """The parsed source closure of ``kernel``, the file defining its entry and the entry (see
    :func:`entry_file`), or None."""
    from ..cuda.scope import Source
    from ..untrusted import SOURCE_LIMIT, read_regular, resolve

    k = cs.kernel(kernel)
    own = resolve(cfg.path(k.source))
    parsed: dict[Path, Source] = {}
    for p in source_closure(cfg, k.source):
        try:
            parsed[p] = Source.parse(read_regular(p, SOURCE_LIMIT).decode("utf-8", "replace"))
        except OSError:
            continue
    if own not in parsed:
        return None
    if (entry := parsed[own].entry(k.symbol)) is not None:
        return parsed, own, entry
    # a header's own function of that name must be the kernel itself: a host wrapper of the same name is not
    for p, src in parsed.items():
        if p != own and (entry := src.entry(k.symbol)) is not None and entry.is_global:
            return parsed, p, entry
    return None


def reached_headers(cfg: Any, cs: Any, units: dict[str, HeaderUnit] | None = None) -> list[str]:
    """The header units some including kernel reaches a function of, in path order: the headers
    ``wireup mutate --all`` mutates. ``units``: :func:`header_units` where the caller has them."""
    units = header_units(cfg, cs) if units is None else units
    return [name for name, unit in units.items() if any(reached_bodies(cfg, cs, k, unit.path) for k in unit.kernels)]
