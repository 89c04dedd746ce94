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
    from pathlib import Path

    from ..cuda.static import source_fixed_tails
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
        local = _local_values(cs, k, ctx.wiring) if k.dims else {}
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
        for binding in k.verify.bindings:
            for name, value in binding:
                if name in verified:
                    verified[name].add(value)
        files = closures.get(k.source)
        if files is None:
            path = cfg.path(k.source)
            first = path.resolve()
            files = closures[k.source] = [first, *(h for h in include_closure(path, dirs) if h != first)] if path.is_file() else []
        reported: set[tuple[str, int]] = set()
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
                if (dim, h.divisor) in reported or any(v % h.divisor for v in verified[dim]):
                    continue
                reported.add((dim, h.divisor))
                shown_values = ", ".join(str(x) for x in sorted(verified[dim]))
                if dim in local:
                    first = {d: min(local[d]) for d in k.dims}
                    first[dim] += 1
                    fix = ", ".join(f"{d} = {x}" for d, x in first.items())
                    yield Hit(f'Kernel "{k.name}" passes its local dim {dim} as "{h.name}", and {shown}:{h.line} has "{h.text}": every verified '
                              f"{dim} ({shown_values}, from the schedules' launches and [kernel.verify] bindings) is a multiple of {h.divisor}, "
                              f"so the code for the other values never runs; if the kernel takes other shapes, verify one too: "
                              f"[kernel.verify] bindings = [{{ {fix} }}].",
                              k.loc, k.name)  # fmt: skip
                    continue
                v = fixed[dim]
                yield Hit(f'Kernel "{k.name}" passes the fixed dim {dim} as "{h.name}", and {shown}:{h.line} has "{h.text}": every verified '
                          f"{dim} ({shown_values}) is a multiple of {h.divisor}, so the code for the other values never runs; if the kernel "
                          f"takes other values of {dim}, verify one too: [kernel.verify] dims = {{ {dim} = [{v}, {v + 1}] }}.",
                          k.loc, k.name)  # fmt: skip


def _local_values(cs, k, wiring) -> dict[str, set[int]]:  # type: ignore[no-untyped-def]
    """The values the schedules' launches bind each local dim of ``k`` to, for the local dims whose values
    do not move with the runtime dims (those the size sweep varies, which is verify's to cover)."""
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
    return {d: vals for d, vals in seen[0].items() if seen[1].get(d) == vals}


assert "TAIL_UNREACHABLE" in REGISTRY
