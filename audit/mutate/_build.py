"""Compiling mutants: each one through the build cache, in parallel; stillborn and identical ones found.

A mutant's source is written to ``<cache>/mutate/<kernel>/<operator>-<line>-<col>-<ordinal>.cu`` (a
stable path, so a rerun finds every unchanged mutant in the build cache) next to ``original.cu``, an
unmutated copy compiled the same way. A mutant that does not compile is *stillborn*. One whose PTX
equals the copy's (after line information, comments and debug sections are dropped, and the other
kernels of the file left out) is *identical*: the compiler proved it equivalent, so it is neither run
nor counted (trivial compiler equivalence; ``b + 0`` -> ``b - 0`` is one). A mutant in code other kernels
of the same source run too is identical only where their entries' PTX is unchanged as well.

>>> builds = build_mutants(cfg, cs, mutants, arch="sm_90", jobs=16)      # doctest: +SKIP
>>> builds[mutants[0].key].status                                       # doctest: +SKIP
'compiled'
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ._mutants import Mutant
from ._siblings import sibling_kernels

_INTERNAL = re.compile(r"\d+_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+")
_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)")


@dataclass(frozen=True)
class MutantBuild:
    """``status`` is ``compiled``, ``stillborn`` or ``identical``; ``detail`` the first compile error;
    ``path`` the mutant's source."""

    status: str
    path: Path
    detail: str = ""
    nvcc: str = ""  # the compiler's version
    ptx: Path | None = None  # the compiled PTX (in the build cache), for the static checks
    # a header mutant: per including kernel, the copy of its source compiled with the mutated header and its PTX
    overrides: dict[str, Path] = field(default_factory=dict)
    ptxs: dict[str, Path] = field(default_factory=dict)
    # the build cache entries it took (``<cache>/build/<arch>/<key>/``): its own source's, or one per kernel
    # including a header; what ``wireup mutate --build-only --archive`` packs
    keys: tuple[str, ...] = ()


from ._paths import _write_if_changed, mutant_dir  # noqa: E402  (shared with the header mutants)


def write_mutant(cfg: Any, m: Mutant) -> Path:
    """Write the mutant's source (only when it changed) and return its path."""
    path = mutant_dir(cfg, m.kernel) / f"{m.file_stem}.cu"
    _write_if_changed(path, m.mutated)
    return path


def normalized_ptx(text: str, symbol: str) -> str:
    """The PTX of entry ``symbol`` and everything but the file's other entries, without comments, line
    information, debug sections, or the path-derived names of internal-linkage symbols."""
    out: list[str] = []
    other_entry = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(".section"):
            break  # the debug sections (-lineinfo) come last
        m = _ENTRY.match(line)
        if m:
            other_entry = m.group(1) != symbol
        if other_entry:
            if line.startswith("}"):
                other_entry = False
            continue
        if not s or s.startswith(("//", ".loc", ".file")):
            continue
        out.append(_INTERNAL.sub("_INTERNAL_", line))
    return "\n".join(out)


def usable_cpus() -> int:
    """The CPU cores this process may run on (its affinity mask: ``taskset`` and container limits count),
    not every core of the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_original(cfg: Any, cs: Any, name: str, text: str, arch: str) -> MutantBuild:
    """Write and compile the unmutated copy of kernel ``name``'s source (``original.cu`` beside its
    mutants, compiled exactly as they are; a cached build starts no compiler).

    Raises :class:`UsageError` when it does not compile from there (a header found only through a path
    given on nvcc's command line elsewhere, say), since then no mutant could."""
    from ..compile import build_kernels

    k = cs.kernel(name)
    path = mutant_dir(cfg, name) / "original.cu"
    _write_if_changed(path, text)
    result = build_kernels(cfg, cs, arch=arch, jobs=1, sources=[name], source_overrides={name: path})
    sb, entry = result.kernel(k)
    if not sb.ok or entry is None or sb.ptx is None:
        first = sb.first_error.render() if sb.first_error else "no entry point " + k.symbol
        raise UsageError(
            f'The unmutated copy of "{k.source}" at "{path}" does not compile ({first}); mutants are compiled from '
            f'that folder, so every header a kernel includes must be found next to its source or through the include folders ("include" in wireup.toml).'
        )
    return MutantBuild("compiled", path, nvcc=result.nvcc_version, ptx=sb.ptx, keys=(sb.key,))


def build_mutants(
    cfg: Any,
    cs: Any,
    mutants: Sequence[Mutant],
    arch: str,
    jobs: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    siblings: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, MutantBuild]:
    """Compile every mutant (``jobs`` at a time); one :class:`MutantBuild` per mutant key. ``siblings``
    (mutant key -> the other kernels of its source that run its line) where the caller has them already.

    Raises :class:`UsageError` when a kernel's unmutated copy does not compile from the mutant folder
    (a header found only relative to the kernel's own folder, say), since then no mutant could."""
    from ..compile import build_kernels

    progress = progress or (lambda ev: None)
    lock = threading.Lock()
    workers = max(1, jobs or usable_cpus())
    headers = [m for m in mutants if m.is_header]
    mutants = [m for m in mutants if not m.is_header]
    originals = {m.kernel: m.original for m in mutants}
    # a mutant in code other kernels of its source run too is identical only where every one of their
    # entries compiles to the unmutated PTX (dead code in one instantiation of a template, say, is live in
    # another's, and the other kernel judges the mutant: see audit.mutate._siblings)
    if siblings is None:
        siblings = sibling_kernels(cfg, cs, mutants)
    judges: dict[str, list[str]] = {name: [name] for name in originals}
    for m in mutants:
        judges[m.kernel] += [k for k in siblings.get(m.key, ()) if k not in judges[m.kernel]]

    def baseline(name: str) -> tuple[str, dict[str, str]]:
        b = build_original(cfg, cs, name, originals[name], arch)
        assert b.ptx is not None
        text = b.ptx.read_text()
        return name, {k: normalized_ptx(text, cs.kernel(k).symbol) for k in judges[name]}

    def unchanged(m: Mutant, ptx: str, symbol: str) -> bool:
        return normalized_ptx(ptx, symbol) == baselines[m.kernel][m.kernel] and all(
            normalized_ptx(ptx, cs.kernel(k).symbol) == baselines[m.kernel][k] for k in siblings.get(m.key, ()))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mutant-build") as pool:
        baselines = dict(pool.map(baseline, originals))

    def one(m: Mutant) -> tuple[str, MutantBuild]:
        k = cs.kernel(m.kernel)
        path = write_mutant(cfg, m)
        result = build_kernels(cfg, cs, arch=arch, jobs=1, sources=[m.kernel], source_overrides={m.kernel: path})
        sb, entry = result.kernel(k)
        if not sb.ok or sb.cubin is None:
            first = sb.first_error
            out = MutantBuild("stillborn", path, first.render() if first else "the compiler failed", result.nvcc_version, keys=(sb.key,))
        elif entry is None:
            out = MutantBuild("stillborn", path, f'its cubin has no entry point "{k.symbol}"', result.nvcc_version, keys=(sb.key,))
        elif sb.ptx is not None and unchanged(m, sb.ptx.read_text(), entry.symbol):
            out = MutantBuild("identical", path, nvcc=result.nvcc_version, ptx=sb.ptx, keys=(sb.key,))
        else:
            out = MutantBuild("compiled", path, nvcc=result.nvcc_version, ptx=sb.ptx, keys=(sb.key,))
        with lock:
            progress({"event": "mutant_built", "mutant": m.key, "status": out.status, "cached": sb.cached})
        return m.key, out

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mutant-build") as pool:
        out = dict(pool.map(one, mutants))
    if headers:
        out.update(build_header_mutants(cfg, cs, headers, arch, workers, progress))
    return out


def _unit(cfg: Any, m: Mutant) -> Any:
    from ..untrusted import resolve
    from ._headers import HeaderUnit

    path = cfg.path(m.source)
    return HeaderUnit(m.kernel, m.source, resolve(path) or path, m.kernels)


def _build_tree(cfg: Any, cs: Any, overrides: dict[str, Path], arch: str) -> tuple[dict[str, Any], str, bool]:
    """Build each kernel of ``overrides`` from its copy: kernel -> (source build, entry), the compiler's
    version, and whether every build came from the cache."""
    from ..compile import build_kernels

    result = build_kernels(cfg, cs, arch=arch, jobs=1, sources=list(overrides), source_overrides=overrides)
    return {k: result.kernel(cs.kernel(k)) for k in overrides}, result.nvcc_version, all(result.kernel(cs.kernel(k))[0].cached for k in overrides)


def build_header_original(cfg: Any, cs: Any, m: Mutant, arch: str) -> MutantBuild:
    """Write and compile the unmutated tree of ``m``'s header unit (``<cache>/mutate/<header>/original/``:
    the header, the other local headers and each including kernel's source), exactly as its mutants are.

    Raises :class:`UsageError` when some including kernel does not compile from there."""
    from ._headers import write_header_tree

    unit = _unit(cfg, m)
    overrides = write_header_tree(cfg, cs, unit, "original", m.original)
    built, nvcc, _ = _build_tree(cfg, cs, overrides, arch)
    ptxs: dict[str, Path] = {}
    for kernel, (sb, entry) in built.items():
        if not sb.ok or entry is None or sb.ptx is None:
            first = sb.first_error.render() if sb.first_error else "no entry point " + cs.kernel(kernel).symbol
            raise UsageError(
                f'The unmutated copy of header "{m.source}" does not compile into kernel "{kernel}" at "{overrides[kernel]}" ({first}); '
                f'header mutants are compiled from that folder, so every header must be found beside the kernel\'s source or through the include folders ("include" in wireup.toml).'
            )
        ptxs[kernel] = sb.ptx
    first_kernel = m.kernels[0]
    return MutantBuild("compiled", unit.path, nvcc=nvcc, ptx=ptxs[first_kernel], overrides=overrides, ptxs=ptxs,
                       keys=tuple(sb.key for sb, _entry in built.values()))


def build_header_mutants(cfg: Any, cs: Any, mutants: Sequence[Mutant], arch: str, workers: int,
                         progress: Callable[[dict[str, Any]], None]) -> dict[str, MutantBuild]:  # fmt: skip
    """Compile each header mutant into every kernel that includes its header: *stillborn* when one of
    those builds fails, *identical* when every including kernel's PTX equals its unmutated build's."""
    from ._headers import write_header_tree

    lock = threading.Lock()
    firsts: dict[str, Mutant] = {}
    for m in mutants:
        firsts.setdefault(m.kernel, m)

    def baseline(unit: str) -> tuple[str, dict[str, str]]:
        b = build_header_original(cfg, cs, firsts[unit], arch)
        return unit, {k: normalized_ptx(p.read_text(), cs.kernel(k).symbol) for k, p in b.ptxs.items()}

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mutant-build") as pool:
        baselines = dict(pool.map(baseline, firsts))

    def one(m: Mutant) -> tuple[str, MutantBuild]:
        unit = _unit(cfg, m)
        overrides = write_header_tree(cfg, cs, unit, m.file_stem, m.mutated)
        header = overrides and next(iter(overrides.values())).parent / unit.path.name
        built, nvcc, cached = _build_tree(cfg, cs, overrides, arch)
        keys = tuple(sb.key for sb, _entry in built.values())
        ptxs: dict[str, Path] = {}
        out: MutantBuild | None = None
        same = True
        for kernel, (sb, entry) in built.items():
            if not sb.ok or sb.cubin is None:
                first = sb.first_error
                out = MutantBuild("stillborn", header or unit.path, f'in kernel "{kernel}": ' + (first.render() if first else "the compiler failed"), nvcc, keys=keys)
                break
            if entry is None:
                out = MutantBuild("stillborn", header or unit.path, f'in kernel "{kernel}": its cubin has no entry point "{cs.kernel(kernel).symbol}"', nvcc, keys=keys)
                break
            if sb.ptx is not None:
                ptxs[kernel] = sb.ptx
            if sb.ptx is None or normalized_ptx(sb.ptx.read_text(), entry.symbol) != baselines[m.kernel][kernel]:
                same = False
        if out is None:
            status = "identical" if same else "compiled"
            out = MutantBuild(status, header or unit.path, nvcc=nvcc, ptx=ptxs.get(m.kernels[0]), overrides=overrides, ptxs=ptxs, keys=keys)
        with lock:
            progress({"event": "mutant_built", "mutant": m.key, "status": out.status, "cached": cached})
        return m.key, out

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mutant-build") as pool:
        return dict(pool.map(one, mutants))
