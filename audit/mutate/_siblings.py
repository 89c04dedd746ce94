"""The *siblings* of a mutant: the other kernels of the contracts built from the same source whose entries run
the mutated line (two instantiations of one template, two entries sharing a device function). A mutant there is
judged by them too (step 6 of :mod:`audit.mutate._run`), and is identical only where their PTX is unchanged as
well (:func:`audit.mutate._build.build_mutants`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._mutants import Mutant


def sibling_kernels(cfg: Any, cs: Any, mutants: Sequence[Mutant]) -> dict[str, tuple[str, ...]]:
    """Per mutant key (a kernel's own mutants; a header's are judged by every including kernel already):
    the *other* kernels of the contracts whose source is the mutated file, whose entry is defined in it,
    and whose entry reaches the mutated line. Such a line is code those kernels run too (two entries of one
    file sharing a template or a device function), so a mutant there is caught when any of them catches
    it, as a header's mutant is; kernels without a sibling are left out."""
    from ..cuda.headers import entry_file, reached_lines
    from ..untrusted import resolve

    by_file: dict[Any, list[str]] = {}
    for k in cs.kernels:
        path = resolve(cfg.path(k.source))
        if entry_file(cfg, cs, k.name) == path:
            by_file.setdefault(path, []).append(k.name)
    lines: dict[str, list[tuple[int, int]]] = {}
    out: dict[str, tuple[str, ...]] = {}
    for m in mutants:
        if m.is_header:
            continue
        path = resolve(cfg.path(m.source))
        judges = []
        for other in by_file.get(path, []):
            if other == m.kernel:
                continue
            if other not in lines:
                lines[other] = reached_lines(cfg, cs, other).get(path, [])
            if any(a <= m.line <= b for a, b in lines[other]):
                judges.append(other)
        if judges:
            out[m.key] = tuple(judges)
    return out
