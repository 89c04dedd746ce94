"""The static prediction of tail coverage: launch-geometry tails no runtime value can reach.

For every ``ceil_div(a, b)``, ``a // b`` and ``a % b`` in a kernel's grid, block or ``shared_bytes``
whose ``a`` depends on a runtime dim, both sides (``a % b == 0`` and ``!= 0``) should be reachable by
some value of the runtime dims, or ``wireup verify`` can never run the partial last block, warp or tile
(it reports VERIFY_TAIL_UNCOVERED). When only a fixed dim hides a side (``B * T * 32`` with ``T = 64``
is always a multiple of 512), the contracts most likely fix a dim that varies in production, at the value
of one test: this rule says so before any GPU run. A side no dims can reach (``ceil_div(B * 512, 512)``)
is no tail and is not reported.

>>> [r.id for r in REGISTRY.values() if r.id == "TAIL_UNREACHABLE"]
['TAIL_UNREACHABLE']
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..cases import DimCase, make_env
from ..findings import Severity
from ..search.coverage import kernel_sites, launch_envs, tail_verdicts
from ._base import REGISTRY, CheckContext, Hit, rule


@rule("TAIL_UNREACHABLE", "Every ceil_div, // and % of a launch's geometry that depends on a runtime dim can run both with a remainder and without one at some value of the runtime dims.", "wiring", Severity.WARNING)
def check_tail_unreachable(ctx: CheckContext) -> Iterator[Hit]:
    cs, wiring = ctx.cs, ctx.wiring
    runtime = [d for d in cs.dim_map.values() if d.kind == "runtime" and d.min is not None]
    if not runtime:
        return
    # the prediction starts from every runtime dim at its smallest value (the search moves one dim at a time
    # from there) and the first values of the dims the kernel's [kernel.verify] dims varies: the culprits
    # are fixed dims, the same in every variant
    base = {d.name: max(d.min or 1, 1) for d in runtime}
    # kernels that bind no local dim get the same verdicts from the same geometry: a large contract set
    # repeats a few geometries, so those are judged once (keyed by the expressions' identities, which
    # equal texts share, and kept alive with the memo)
    memo: dict[tuple, tuple[object, list[tuple[str, str, str]]]] = {}
    launches = wiring.launches_by_kernel
    for k in cs.kernels:
        variant = {name: values[0] for name, values in k.verify.dims if values}
        exprs = (*k.grid, *k.block, k.shared_bytes)
        plain = not k.dims and not any(ln.step.dims for _, ln in launches.get(k.name, ()))
        key = (tuple(map(id, exprs)), tuple(sorted(variant.items())))
        hit = memo.get(key) if plain else None
        if hit is None:
            found = []
            sites = kernel_sites(cs, k, wiring)
            if sites:
                envs = launch_envs(cs, k, wiring)(make_env(cs, DimCase.of(base), variant))
                for v in tail_verdicts(cs, k, wiring, sites, envs, what="case"):
                    if not v.covered and v.culprits:  # a side runtime values reach is verify's to cover
                        found.append((v.site.field, v.site.text, v.message))
            hit = (exprs, found)
            if plain:
                memo[key] = hit
        for field, text, message in hit[1]:
            yield Hit(f'Kernel "{k.name}" {field} "{text}": {message}', k.loc.child(field), k.name)


@rule("FIXED_DIM_TAIL", "A kernel's code for the values of a fixed dim other than the contract's (the scalar side of an H % 4 test, the partial last chunk of a loop over H) runs when it is verified: a [kernel.verify] dims variant gives that dim a value off the divisor.", "build", Severity.WARNING)
def check_fixed_dim_tail(ctx: CheckContext) -> Iterator[Hit]:
    """Reads each kernel's source and the local headers it includes (within the project) for ``ARG % C``
    tests and ``v < ARG; v += C`` loops over a scalar argument bound to a fixed dim; needs no compiler."""
    reported: set[tuple[str, str, int]] = set()
    for s in _fixed_sites(ctx):
        if s.site.compare or (s.kernel.name, s.dim, s.divisor) in reported or any(v % s.divisor for v in s.verified):
            continue
        reported.add((s.kernel.name, s.dim, s.divisor))
        shown_values = ", ".join(str(x) for x in sorted(s.verified))
        what = f'"{s.site.text}"' + (f" (chunks of {s.divisor})" if s.site.per_block else "")
        if s.local:
            first = _first_binding(s)
            first[s.dim] += 1
            fix = ", ".join(f"{d} = {x}" for d, x in first.items())
            yield Hit(f'Kernel "{s.kernel.name}" passes its local dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} has {what}: every verified '
                      f"{s.dim} ({shown_values}, from the schedules' launches and [kernel.verify] bindings) is a multiple of {s.divisor}, "
                      f"so the code for the other values never runs; if the kernel takes other shapes, verify one too: "
                      f"[kernel.verify] bindings = [{{ {fix} }}].",
                      s.kernel.loc, s.kernel.name)  # fmt: skip
            continue
        v = s.value
        yield Hit(f'Kernel "{s.kernel.name}" passes the fixed dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} has {what}: every verified '
                  f"{s.dim} ({shown_values}) is a multiple of {s.divisor}, so the code for the other values never runs; if the kernel "
                  f"takes other values of {s.dim}, verify one too: [kernel.verify] dims = {{ {s.dim} = [{v}, {v + 1}] }}.",
                  s.kernel.loc, s.kernel.name)  # fmt: skip


@rule("FIXED_DIM_ONE_CHUNK", "A chunk loop over a fixed dim (for (j0 = 0; j0 < H; j0 += C)) runs a second chunk in some verification: a [kernel.verify] dims variant or binding gives that dim a value above the chunk.", "build", Severity.WARNING)
def check_fixed_dim_one_chunk(ctx: CheckContext) -> Iterator[Hit]:
    """A loop in chunks of ``C`` over an argument every verified value of which is at most ``C`` runs its
    body once per thread: the code that carries state from one chunk to the next (the second pass's
    offsets, accumulators kept across chunks, a barrier between passes) never runs. Found on the shipped
    trade-outcome backward: with SH2 and H at most 256 its 256-wide column and hidden-unit loops never
    took a second step, and 19 mutants of those loops survived a full mutation run."""
    reported: set[tuple[str, str, int]] = set()
    for s in _fixed_sites(ctx):
        if not s.site.loop or (s.kernel.name, s.dim, s.divisor) in reported or max(s.verified) > s.divisor:
            continue
        reported.add((s.kernel.name, s.dim, s.divisor))
        shown_values = ", ".join(str(x) for x in sorted(s.verified))
        what = f'"{s.site.text}"' + (f" (chunks of {s.divisor}: the launch's block)" if s.site.per_block else "")
        wider = s.divisor + 1
        if s.local:
            first = _first_binding(s)
            first[s.dim] = wider
            fix = ", ".join(f"{d} = {x}" for d, x in first.items())
            yield Hit(f'Kernel "{s.kernel.name}" passes its local dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} loops {what}: every verified '
                      f"{s.dim} ({shown_values}, from the schedules' launches and [kernel.verify] bindings) is at most {s.divisor}, "
                      f"so the loop's second chunk never runs; if the kernel takes larger shapes, verify one too: "
                      f"[kernel.verify] bindings = [{{ {fix} }}].",
                      s.kernel.loc, s.kernel.name)  # fmt: skip
            continue
        yield Hit(f'Kernel "{s.kernel.name}" passes the fixed dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} loops {what}: every verified '
                  f"{s.dim} ({shown_values}) is at most {s.divisor}, so the loop's second chunk never runs; if the kernel takes larger "
                  f"values of {s.dim}, verify one too: [kernel.verify] dims = {{ {s.dim} = [{s.value}, {wider}] }}.",
                  s.kernel.loc, s.kernel.name)  # fmt: skip


@rule("FIXED_DIM_BOUNDARY", "A comparison of a fixed dim with a constant (K <= AUX_K_MAX, M <= kSkinnyM) is verified at that constant, where a < for <= (or > for >=) would change the result.", "build", Severity.WARNING)
def check_fixed_dim_boundary(ctx: CheckContext) -> Iterator[Hit]:
    """``K <= 8`` and ``K < 8`` differ only at K = 8, ``K >= 1`` and ``K > 1`` only at K = 1: a kernel
    verified at K = 2, 3 never tells them apart, so an off-by-one at the edge of the range it accepts (or
    of the choice between two code paths) passes. Found on the shipped trade-outcome backward, whose
    ``K >= 1 && K <= AUX_K_MAX`` survived both mutations in a full mutation run (verified at K = 3, 2).
    Constants below 1 are not asked for (no dim takes them); ``==`` and ``!=`` also want a value off the
    constant."""
    reported: set[tuple[str, str, int]] = set()
    for s in _fixed_sites(ctx):
        op = s.site.compare
        if not op or (s.kernel.name, s.dim, s.divisor) in reported:
            continue
        c = s.divisor
        missing = [v for v in ([c] if op not in ("==", "!=") else [c, c + 1]) if v not in s.verified]
        if op in ("==", "!=") and any(v != c for v in s.verified):
            missing = [v for v in missing if v == c]
        if not missing:
            continue
        reported.add((s.kernel.name, s.dim, c))
        shown_values = ", ".join(str(x) for x in sorted(s.verified))
        want = " and ".join(str(v) for v in missing)
        if s.local:
            first = _first_binding(s)
            first[s.dim] = missing[0]
            fix = ", ".join(f"{d} = {x}" for d, x in first.items())
            yield Hit(f'Kernel "{s.kernel.name}" passes its local dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} compares "{s.site.text}": no verified '
                      f"{s.dim} ({shown_values}, from the schedules' launches and [kernel.verify] bindings) is {want}, where an off-by-one "
                      f"in that comparison would show; verify it: [kernel.verify] bindings = [{{ {fix} }}].",
                      s.kernel.loc, s.kernel.name)  # fmt: skip
            continue
        values = ", ".join(str(v) for v in [s.value, *[v for v in missing if v != s.value]])
        yield Hit(f'Kernel "{s.kernel.name}" passes the fixed dim {s.dim} as "{s.site.name}", and {s.file}:{s.site.line} compares "{s.site.text}": no verified '
                  f"{s.dim} ({shown_values}) is {want}, where an off-by-one in that comparison would show; if the kernel takes {s.dim} = {want}, "
                  f"verify it: [kernel.verify] dims = {{ {s.dim} = [{values}] }}.",
                  s.kernel.loc, s.kernel.name)  # fmt: skip


@rule("OPTIONAL_UNDECLARED", "A pointer parameter the kernel tests against NULL (p != nullptr, if (!p), p ? a : b, in its body or a device function it passes the pointer to) is declared optional, so its code for a NULL pointer is verified and analysed too.", "build", Severity.WARNING)
def check_optional_undeclared(ctx: CheckContext) -> Iterator[Hit]:
    """A kernel written to take an optional buffer (``if (mean != nullptr)``) under a contract that does not
    say ``optional = true``: ``wireup verify`` passes a buffer every time and the block runs take it as
    given, so the code the kernel runs for NULL (the other branch, an early return) is never run by either,
    and a schedule cannot bind it ``"NULL"``. Reads the sources (:mod:`audit.cuda.nulltests`); needs no
    compiler. A test inside ``assert(...)`` is not a use of NULL."""
    from ..model import TensorParam
    from .build import _analysis_cache

    cfg, cs = ctx.config, ctx.cs
    if cfg is None:
        return
    cache = _analysis_cache(ctx)
    closures: dict[str, list[str | bytes] | None] = {}  # kernels share sources: each closure is read once
    for k in cs.kernels:
        params = list(k.params)
        if not any(isinstance(p, TensorParam) and not p.optional for p in params):
            continue
        said: set[int] = set()
        for param, index, line, text, shown, function, local in _null_tests(cfg, cs, k, cache, closures):
            if index in said or index >= len(params):
                continue
            p = params[index]
            if not isinstance(p, TensorParam) or p.optional:
                continue
            said.add(index)
            where = f"{shown}:{line}" + (f' (in {function}, as "{local}")' if local else "")
            named = f'"{p.name}"' if p.name == param else f'"{p.name}" ("{param}" in the source)'
            yield Hit(f'Kernel "{k.name}" tests its pointer {named} against NULL at {where}, "{text}", but its contract does not declare '
                      f"it optional: wireup verify always passes a buffer and the block runs take it as given, so the kernel's code for a NULL "
                      f'{p.name} never runs; if the host may pass NULL, declare it: {{ name = "{p.name}", ..., optional = true }}.',
                      p.loc, k.name)  # fmt: skip


def _null_tests(cfg: Any, cs: Any, k: Any, cache: Any, closures: dict[str, list[str | bytes] | None]) -> list[list[Any]]:
    """:func:`audit.cuda.headers.entry_null_tests` of ``k`` as rows ``[param, index, line, text, file as
    shown, function, local]``, through the analysis cache (keyed by the entry and its source closure's
    paths and bytes, read once per source into ``closures``: tokenizing the sources costs more than the
    rest of a warm check's rule)."""
    from pathlib import Path

    from ..cuda.headers import entry_null_tests, source_closure
    from ..untrusted import SOURCE_LIMIT, read_regular

    root = Path(cs.root).resolve()

    def compute() -> list[list[Any]]:
        try:
            tests = entry_null_tests(cfg, cs, k.name)
        except (OSError, ValueError, RecursionError):
            return []
        out = []
        for t in tests:
            try:
                shown = Path(t.file).resolve().relative_to(root).as_posix()
            except (TypeError, ValueError):
                shown = str(t.file)
            out.append([t.param, t.index, t.line, t.text, shown, t.function, t.local])
        return out

    def check(v: Any) -> list[list[Any]]:
        kinds = (str, int, int, str, str, str, str)
        if not isinstance(v, list) or not all(isinstance(r, list) and len(r) == 7 and all(type(x) is c for x, c in zip(r, kinds)) for r in v):
            raise ValueError("null tests")
        return v

    if cache is None:
        return compute()
    if k.source not in closures:
        try:
            closures[k.source] = [x for f in source_closure(cfg, k.source) for x in (str(f), read_regular(f, SOURCE_LIMIT))]
        except OSError:
            closures[k.source] = None
    parts = closures[k.source]
    if parts is None:
        return compute()
    return cache.value("nulltests", [k.symbol, *parts], check, compute)


@dataclass(frozen=True)
class _Site:
    """One ``%`` test or chunk loop (``site``) of ``file`` over an argument of ``kernel`` bound to ``dim``,
    every value of which verify runs (``verified``); ``divisor`` resolved for the launch's block where the
    site steps by it; ``local``: the kernel's local dims' launch values, where ``dim`` is one of them;
    ``value``: the fixed dim's contract value (0 for a local dim)."""

    kernel: Any
    dim: str
    site: Any
    file: str
    divisor: int
    verified: frozenset[int]
    local: dict[str, set[int]]
    value: int
    low: dict[str, int] = field(default_factory=dict)  # every local dim's smallest launch value at the runtime dims' low end


def _first_binding(s: _Site) -> dict[str, int]:
    """The binding a message suggests starts from: each local dim's smallest launch value (a local dim
    whose value moves with the runtime dims, such as a chunk count derived from B, at their low end)."""
    return {d: min(s.local[d]) if d in s.local else s.low.get(d, 1) for d in s.kernel.dims}


def _fixed_sites(ctx: CheckContext) -> Iterator[_Site]:
    """Every ``%`` test and chunk loop of every kernel's source closure (within the project) over a scalar
    argument bound to a fixed dim, or to a local dim the launches bind to fixed values (results memoised
    on the context: two rules read them)."""
    memo = getattr(ctx, "_fixed_sites", None)
    if memo is None:
        memo = list(_find_fixed_sites(ctx))
        try:
            ctx._fixed_sites = memo  # type: ignore[attr-defined]
        except AttributeError:  # a slotted context: computed per rule
            pass
    return iter(memo)


def _find_fixed_sites(ctx: CheckContext) -> Iterator[_Site]:
    from pathlib import Path

    from ..cuda.static import launch_extents, source_fixed_tails
    from ..cases import binding_neighbours, dims_neighbours
    from ..hashing import include_closure
    from ..model import ScalarParam
    from .build import _analysis_cache

    cfg, cs = ctx.config, ctx.cs
    if cfg is None:
        return
    root = Path(cs.root).resolve()
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    fixed = {d.name: d.value for d in cs.dim_map.values() if d.kind == "fixed" and d.value}
    memo: dict[Path, list] = {}
    closures: dict[str, list[Path]] = {}  # kernels share sources: each closure is walked once
    cache = _analysis_cache(ctx)
    for k in cs.kernels:
        bound: dict[str, str] = {}  # argument -> the fixed dim (or local dim bound to fixed values) it passes
        local, low = _local_values(cs, k, ctx.wiring) if k.dims else ({}, {})
        for p in k.params:
            text = getattr(p.value, "text", None) if isinstance(p, ScalarParam) and getattr(p.value, "names", None) else None
            if text in fixed or text in local:
                bound[p.name] = text  # type: ignore[assignment]
        if not bound:
            continue
        verified = {d: ({fixed[d]} if d in fixed else set(local[d])) for d in bound.values()}
        for name, values in k.verify.dims:
            if name in verified:
                verified[name] |= set(values)
        for name, value in dims_neighbours(k):  # the values verify's search adds: they run too
            if name in verified:
                verified[name].add(value)
        for binding in [*map(dict, k.verify.bindings), *binding_neighbours(k)]:  # the search's bindings run too
            for name, value in binding.items():
                if name in verified:
                    verified[name].add(value)
        files = closures.get(k.source)
        if files is None:
            path = cfg.path(k.source)
            first = path.resolve()
            files = closures[k.source] = [first, *(h for h in include_closure(path, dirs) if h != first)] if path.is_file() else []
        block_x: int | None | bool = False  # False: not asked yet
        reached: dict[Path, list[tuple[int, int]]] | None = None  # the entry's function bodies, by file
        for f in files:
            try:
                shown = f.relative_to(root).as_posix()
            except ValueError:
                continue  # a header outside the project is not its code to judge
            hits = memo.get(f)
            if hits is None:
                hits = memo[f] = source_fixed_tails(f, dirs, cache)
            for h in hits:
                dim = bound.get(h.name)
                if dim is None:
                    continue
                if reached is None:  # a source holding several entries: only the code this one runs counts
                    reached = _reached(cfg, cs, k, files, root, cache)
                if not any(a <= h.line <= b for a, b in reached.get(f, ())):
                    continue
                divisor = h.divisor
                if h.per_block:
                    if block_x is False:
                        block_x = launch_extents(cs, ctx.wiring, k)[0][0]
                    if not block_x:
                        continue  # launches disagree on the block: no one chunk size to judge
                    divisor *= int(block_x)
                if divisor < (1 if h.compare else 2):
                    continue
                yield _Site(k, dim, h, shown, divisor, frozenset(verified[dim]), local if dim in local else {}, fixed.get(dim, 0), low)


def _reached(cfg: Any, cs: Any, k: Any, files: list[Any], root: Any, cache: Any) -> dict[Any, list[tuple[int, int]]]:
    """Per file of ``k``'s source closure, the line spans of the functions its entry reaches, through the
    analysis cache (keyed by the entry and the closure's paths and bytes: parsing the sources costs more
    than the rest of the rule)."""
    from ..cuda.headers import reached_lines
    from ..untrusted import SOURCE_LIMIT, read_regular

    def compute() -> dict[str, list[list[int]]]:
        try:
            got = reached_lines(cfg, cs, k.name)
        except (OSError, ValueError, RecursionError):
            return {}
        out: dict[str, list[list[int]]] = {}
        for q, lines in got.items():
            try:
                out[q.resolve().relative_to(root).as_posix()] = [[a, b] for a, b in lines]
            except ValueError:
                continue
        return out

    def check(v: Any) -> dict[str, list[list[int]]]:
        if not isinstance(v, dict) or not all(isinstance(x, str) and isinstance(y, list) for x, y in v.items()):
            raise ValueError("reached lines")
        for spans in v.values():
            if not all(isinstance(ab, list) and len(ab) == 2 and all(type(n) is int for n in ab) for ab in spans):
                raise ValueError("reached lines")
        return v

    value: dict[str, list[list[int]]] | None = None
    if cache is not None:
        try:
            parts: list[str | bytes] = [k.symbol]
            for f in files:
                parts += [str(f), read_regular(f, SOURCE_LIMIT)]
            value = cache.value("reached", parts, check, compute)
        except OSError:
            value = None
    if value is None:
        value = compute()
    return {(root / name).resolve(): [(a, b) for a, b in spans] for name, spans in value.items()}


def _local_values(cs, k, wiring) -> tuple[dict[str, set[int]], dict[str, int]]:  # type: ignore[no-untyped-def]
    """The values the schedules' launches bind each local dim of ``k`` to, for the local dims whose values
    do not move with the runtime dims (those the size sweep varies, which is verify's to cover); and every
    local dim's smallest launch value at the runtime dims' low end."""
    from ..cases import local_bindings

    runtime = [d for d in cs.dim_map.values() if d.kind == "runtime"]
    lows = {d.name: max(d.min or 1, 1) for d in runtime}
    highs = {d.name: min(d.max, 4103) if d.max is not None else 4103 for d in runtime}
    seen: list[dict[str, set[int]]] = []
    for values in (lows, {n: max(v, lows[n]) for n, v in highs.items()}):
        bindings, _ = local_bindings(cs, k, make_env(cs, DimCase.of(values)), wiring)
        got: dict[str, set[int]] = {}
        for lb in bindings:
            for d, v in lb.values.items():
                got.setdefault(d, set()).add(int(v))
        seen.append(got)
    return {d: vals for d, vals in seen[0].items() if seen[1].get(d) == vals}, {d: min(vals) for d, vals in seen[0].items()}


assert {"TAIL_UNREACHABLE", "FIXED_DIM_ONE_CHUNK", "FIXED_DIM_BOUNDARY"} <= set(REGISTRY)
