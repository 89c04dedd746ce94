"""Header mutants: mutations of the shared headers the kernels include, each judged against every kernel
that includes the header.

A *header unit* is a local header (a file inside the project root in some kernel's include closure,
other than a kernel's own source), named by its file name (``aux_common.cuh``; its path relative to the
root, ``kernels/aux_common.cuh``, names it too, see :func:`unit_named`). Its mutants are made in the
functions of the header that some including kernel reaches from its entry (through the functions of its
own file and of every header it includes), with the operators of a kernel's own mutants; their id is
``<operator>:<line>:<column>:<ordinal>`` in the header and their key ``<header>/<id>``. A kernel whose
entry is itself defined in the header (its source a small ``.cu`` including it) reaches from there, so the
entry's body is the unit's too. Each mutant is listed once and compiled into every including kernel; it
is caught when any of those kernels' checks catches it and survives only when all of them pass.

>>> units = header_units(cfg, cs)                                 # doctest: +SKIP
>>> units["aux_common.cuh"].kernels[:2]                           # doctest: +SKIP
('aux_heads_loss_ema_update', 'aux_label_scale_ema_update')
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cuda.headers import HeaderUnit, entry_file, source_closure, include_dirs, header_units, judge_hashes, reached_bodies
from ..errors import UsageError

__all__ = ["HeaderUnit", "header_mutants", "header_units", "judge_hashes", "reached_bodies", "unit_named", "write_header_tree"]


def unit_named(cfg: Any, units: dict[str, HeaderUnit], name: str) -> HeaderUnit | None:
    """The header unit ``name`` names: by unit name (``1_naive.cuh``) or by the header's path, relative to
    the project root or absolute (``src/kernels/1_naive.cuh``); None when it names none.

    >>> unit_named(cfg, header_units(cfg, cs), "kernels/aux_common.cuh").name      # doctest: +SKIP
    'aux_common.cuh'
    """
    from ..untrusted import resolve

    if name in units:
        return units[name]
    path = resolve(cfg.path(name))
    return next((u for u in units.values() if u.path == path), None) if path is not None else None


def header_mutants(cfg: Any, cs: Any, unit: HeaderUnit, operators: Sequence[str] | None = None) -> list[Any]:
    """Every mutant of ``unit``: in the header functions any including kernel reaches, listed once, each
    judged by every kernel that includes the header (``Mutant.judged_by``)."""
    from ..cuda.scope import Source
    from ._mutants import _entry_params, mutants_in
    from ._operators import Context

    try:
        text = unit.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f'Header "{unit.source}" cannot be read ({getattr(exc, "strerror", None) or exc}).') from None
    indices: set[int] = set()
    for kernel in unit.kernels:
        for open_, close in reached_bodies(cfg, cs, kernel, unit.path):
            indices.update(range(open_ + 1, close))
    if not indices:
        return []
    dims = [d.name for d in cs.dim_map.values() if d.kind == "runtime"] or ["B"]
    src = Source.parse(text)
    # the parameters of the entries defined here, as a kernel's own mutants have its entry's (`norm`'s
    # batch-size divisor); headers that only hold device code have none
    params: set[str] = set()
    for kernel in unit.kernels:
        if entry_file(cfg, cs, kernel) == unit.path and (entry := src.entry(cs.kernel(kernel).symbol)) is not None:
            params.update(_entry_params(src, entry))
    ctx = Context(src, sorted(indices), tuple(dims), frozenset(params))
    return mutants_in(text, ctx, unit.name, unit.source, operators, judged_by=unit.kernels)


def header_copy_dir(cfg: Any, unit: str, stem: str) -> Path:
    """Where one header mutant (or the unit's unmutated copy, ``stem`` "original") is compiled from: the
    header, every other local header of the including kernels' closures, and a copy of each including
    kernel's source, side by side, so each quoted include finds the copy first."""
    from ._paths import mutant_dir

    return mutant_dir(cfg, unit) / stem


def write_header_tree(cfg: Any, cs: Any, unit: HeaderUnit, stem: str, header_text: str) -> dict[str, Path]:
    """Write the tree of :func:`header_copy_dir` with ``header_text`` as the unit's header; returns the
    copy of each including kernel's source, by kernel name (the build's source overrides)."""
    from ..untrusted import SOURCE_LIMIT, read_regular, resolve
    from ._paths import _write_if_changed

    d = header_copy_dir(cfg, unit.name, stem)
    overrides: dict[str, Path] = {}
    for kernel in unit.kernels:
        k = cs.kernel(kernel)
        own = resolve(cfg.path(k.source))
        if own is None:
            continue
        base = own.parent
        for h in source_closure(cfg, k.source):
            if h == own:
                continue
            rel = _relative(h, [base, *[resolve(x) or x for x in include_dirs(cfg)]])
            if rel is None:
                continue
            text = header_text if h == unit.path else read_regular(h, SOURCE_LIMIT).decode("utf-8", "replace")
            _write_if_changed(d / rel, text)
        copy = d / own.name
        _write_if_changed(copy, read_regular(own, SOURCE_LIMIT).decode("utf-8", "replace"))
        overrides[kernel] = copy
    return overrides


def _relative(path: Path, bases: Sequence[Path]) -> Path | None:
    for b in bases:
        try:
            return path.relative_to(b)
        except ValueError:
            continue
    return None
