"""Tail coverage: did the cases run both sides of every division in a launch's geometry?

A launch's grid, block and ``shared_bytes`` are dim expressions; every ``ceil_div(a, b)``, ``a // b`` and
``a % b`` in them is a *tail site*. A case where ``a % b != 0`` runs the partial last block (or warp, or
tile); a case where ``a % b == 0`` runs only full ones. A site whose ``a`` depends on the runtime dims
should have run both ways; :func:`tail_verdicts` says, per site, which sides the given environments
reached, and for a side none reached, why (the findings put the kernel and the expression in front):

    B * T * 32 is a multiple of 512 in every case because T = 64 is fixed; make T a runtime dim or give
    it test values.

A side no value of the runtime dims can reach, whatever the fixed dims are (``ceil_div(B * 512, 512)``),
is no tail at all and gets no verdict. Sites whose ``a`` does not depend on the runtime dims are constant
in every launch and are skipped.

>>> sites = kernel_sites(cs, kernel, wiring)                             # doctest: +SKIP
>>> [v.message for v in tail_verdicts(cs, kernel, wiring, sites, envs) if not v.covered]   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..cases import fill_derived, launch_env, probe_envs
from ..dims import divisions, eval_tree, tree_names, tree_text

if TYPE_CHECKING:
    from ..model import ContractSet, Kernel, Loc

GEOMETRY_FIELDS = ("grid", "block", "shared_bytes")
SEARCH_SPAN = 256  # runtime values 1..2b+1 (at most this many) are tried when a side's reachability is asked


@dataclass(frozen=True)
class TailSite:
    """One ``ceil_div(a, b)`` / ``a // b`` / ``a % b`` in a kernel's launch geometry."""

    kernel: str
    field: str  # "grid" | "block" | "shared_bytes"
    op: str  # "ceil_div" | "//" | "%"
    a: Any = field(repr=False)
    b: Any = field(repr=False)
    loc: Any = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        a, b = tree_text(self.a), tree_text(self.b)
        return f"ceil_div({a}, {b})" if self.op == "ceil_div" else f"{a} {self.op} {b}"

    @property
    def a_text(self) -> str:
        return tree_text(self.a)

    @property
    def b_text(self) -> str:
        return tree_text(self.b)

    def side(self, env: Mapping[str, int]) -> str | None:
        """``"exact"`` (a is a multiple of b), ``"tail"``, or None where it cannot be evaluated."""
        try:
            a, b = eval_tree(self.a, env), eval_tree(self.b, env)
        except (KeyError, ZeroDivisionError):
            return None
        if b == 0:
            return None
        return "exact" if a % b == 0 else "tail"


@dataclass
class TailVerdict:
    """Which sides of one site the cases reached; ``message`` says why a missing side was missed."""

    site: TailSite
    exact: int = 0  # cases with a % b == 0
    tail: int = 0  # cases with a % b != 0
    message: str = ""
    culprits: tuple[str, ...] = ()  # fixed dims that hide the missing side

    @property
    def covered(self) -> bool:
        return not self.message

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.site.kernel, "field": self.site.field, "expr": self.site.text, "exact": self.exact,
                "tail": self.tail, "covered": self.covered, "message": self.message}  # fmt: skip


def _memo(cs: ContractSet) -> dict[str, Any]:
    """Per contract set memos of this module (kept in its instance dict, like probe_envs)."""
    return cs.__dict__.setdefault("_tail_memo", {"closure": {}, "sites": {}})


def _runtime(cs: ContractSet) -> frozenset[str]:
    memo = _memo(cs)
    if "runtime" not in memo:
        memo["runtime"] = frozenset(d.name for d in cs.dim_map.values() if d.kind == "runtime")
    return memo["runtime"]


def _moving_derived(cs: ContractSet) -> list[Any]:
    """Derived dims whose value depends on a runtime dim (the others are the same in every case)."""
    memo = _memo(cs)
    if "moving" not in memo:
        runtime = _runtime(cs)
        memo["moving"] = [d for d in cs.dim_map.values() if d.kind == "derived" and d.expr is not None
                          and _derived_closure(cs, set(d.expr.names)) & runtime]  # fmt: skip
    return memo["moving"]


def _derived_closure(cs: ContractSet, names: set[str]) -> set[str]:
    """``names`` with the names of every derived dim among them, transitively."""
    key = frozenset(names)
    cache = _memo(cs)["closure"]
    hit = cache.get(key)
    if hit is not None:
        return hit
    cache[key] = out = _closure(cs, names)
    return out


def _closure(cs: ContractSet, names: set[str]) -> set[str]:
    dims = cs.dim_map
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out.add(n)
        d = dims.get(n)
        if d is not None and d.kind == "derived" and d.expr is not None:
            todo += list(d.expr.names)
    return out


def launch_envs(cs: ContractSet, kernel: Kernel, wiring: Any) -> Callable[[Mapping[str, int]], list[dict[str, int]]]:
    """A function from a base environment to the environments of every launch of ``kernel`` (its local
    dims bound as each launch binds them); the base environment itself where no schedule launches it."""
    launches = [ln for _, ln in wiring.launches_by_kernel.get(kernel.name, ())] if wiring is not None else []

    def envs(base: Mapping[str, int]) -> list[dict[str, int]]:
        if not launches or not (kernel.dims or any(ln.step.dims for ln in launches)):
            return [dict(base)]
        out, seen = [], set()
        for ln in launches:
            e = launch_env(cs, kernel, ln, base)
            key = tuple(sorted(e.items()))
            if key not in seen:
                seen.add(key)
                out.append(e)
        return out

    return envs


def kernel_sites(cs: ContractSet, kernel: Kernel, wiring: Any) -> list[TailSite]:
    """The tail sites of ``kernel`` whose dividend depends on a runtime dim (directly, through a derived
    dim, or through a local dim a launch binds to one)."""
    runtime = _runtime(cs)
    exprs = [("grid", e) for e in kernel.grid] + [("block", e) for e in kernel.block]
    if kernel.shared_bytes is not None:
        exprs.append(("shared_bytes", kernel.shared_bytes))
    # the divisions of a geometry and whether they move with the runtime dims, memoized by the identities
    # of its expressions (equal texts share one Expr): a large contract set repeats a few geometries
    key = (tuple(id(e) for _, e in exprs), kernel.dims)
    cache = _memo(cs)["sites"]
    found = cache.get(key)
    if found is None:
        found = []
        for fname, e in exprs:
            for op, a, b in divisions(e):
                names = _derived_closure(cs, tree_names(a) | tree_names(b))
                found.append((fname, op, a, b, bool(names & runtime), bool(names & set(kernel.dims))))
        cache[key] = (exprs, found)  # the expressions stay alive with the memo, so their ids stay theirs
    else:
        found = found[1]
    out: list[TailSite] = []
    probes: list[dict[str, int]] | None = None
    for fname, op, a, b, moves, local in found:
        if not moves:
            if not local:
                continue
            if probes is None:
                at = launch_envs(cs, kernel, wiring)
                probes = [e for p in probe_envs(cs)[:3] for e in at(p)]
            if len({(_value(a, env), _value(b, env)) for env in probes}) < 2:
                continue  # a local dim, but bound to the same value at every runtime size
        site = TailSite(kernel.name, fname, op, a, b, kernel.loc)
        if site not in out:
            out.append(site)
    return out


def _value(t: Any, env: Mapping[str, int]) -> int | None:
    try:
        return eval_tree(t, env)
    except (KeyError, ZeroDivisionError):
        return None


def tail_verdicts(cs: ContractSet, kernel: Kernel, wiring: Any, sites: Sequence[TailSite],
                  envs: Sequence[Mapping[str, int]], what: str = "case") -> list[TailVerdict]:  # fmt: skip
    """One verdict per site over ``envs`` (the full environments of the cases that ran, local dims bound)."""
    out = []
    for site in sites:
        v = TailVerdict(site)
        for env in envs:
            s = site.side(env)
            if s == "exact":
                v.exact += 1
            elif s == "tail":
                v.tail += 1
        if envs and (v.exact == 0 or v.tail == 0):
            missing = "tail" if v.tail == 0 else "exact"
            v.message, v.culprits = _why(cs, kernel, wiring, site, missing, envs, what)
        out.append(v)
    return [v for v in out if v.message != "-"]


def _why(cs: ContractSet, kernel: Kernel, wiring: Any, site: TailSite, missing: str,
         envs: Sequence[Mapping[str, int]], what: str) -> tuple[str, tuple[str, ...]]:  # fmt: skip
    """The sentence for a missing side, or ``"-"`` when no dims can reach it (no tail exists)."""
    a, b = site.a_text, site.b_text
    head = f"{a} is a multiple of {b} in every {what}" if missing == "tail" else f"{a} is not a multiple of {b} in any {what}"
    base = dict(envs[0])
    found = reach(cs, kernel, wiring, site, missing, base)
    if found is not None:
        example = ",".join(f"{k}={v}" for k, v in found.items())
        ran = f"the one {what} that ran" if len(envs) == 1 else f"all {len(envs)} {what}s that ran"
        state = f"is a multiple of {b} in {ran}" if missing == "tail" else f"is not a multiple of {b} in any of the {len(envs)} {what}s that ran"
        if missing == "exact" and len(envs) == 1:
            state = f"is not a multiple of {b} in {ran}"
        return f"{a} {state}; add a case where it {'is not' if missing == 'tail' else 'is'}, such as {example}.", ()
    fixed = sorted(n for n in _derived_closure(cs, tree_names(site.a) | tree_names(site.b))
                   if n in cs.dim_map and cs.dim_map[n].kind == "fixed" and n in base)  # fmt: skip
    culprits = []
    for name in fixed:
        for alt in (base[name] + 1, base[name] + 2, base[name] * 2 + 1, 1, 3):
            if alt > 0 and reach(cs, kernel, wiring, site, missing, base, {name: alt}) is not None:
                culprits.append(name)
                break
    if not culprits:
        return "-", ()
    fixed_text = " and ".join(f"{n} = {base[n]}" for n in culprits)
    verb = "is" if len(culprits) == 1 else "are"
    them = culprits[0] if len(culprits) == 1 else "them"
    return f"{head} because {fixed_text} {verb} fixed; make {them} a runtime dim or give it test values.", tuple(culprits)


def reach(cs: ContractSet, kernel: Kernel, wiring: Any, site: TailSite, side: str, base: Mapping[str, int],
          fixed: Mapping[str, int] | None = None) -> dict[str, int] | None:  # fmt: skip
    """Runtime-dim values at which ``site`` takes ``side`` (with ``fixed`` overriding fixed dims), or None.

    One runtime dim moves at a time over 1..2b+1 (capped at :data:`SEARCH_SPAN` values) and its range
    ends, the others staying at their values in ``base``: enough to reach either side of a product.
    """
    ranges = {d.name: (d.min or 1, d.max or (d.min or 1)) for d in cs.dim_map.values() if d.kind == "runtime"}
    at = launch_envs(cs, kernel, wiring)
    # the derived dims to recompute: those that move with the runtime dims, and with a fixed override all
    derived = _moving_derived(cs) if not fixed else [d for d in cs.dim_map.values() if d.kind == "derived" and d.expr is not None]
    start = dict(base)
    for d in derived:
        start.pop(d.name, None)
    for n in kernel.dims:  # bound again by each launch
        start.pop(n, None)
    start.update(fixed or {})
    bval = _value(site.b, {**base, **(fixed or {})})
    span = min(SEARCH_SPAN, 2 * abs(bval) + 2) if bval else SEARCH_SPAN
    for name, (lo, hi) in ranges.items():
        likely = ([abs(bval), abs(bval) + 1, 2 * abs(bval), abs(bval) - 1] if bval else []) + [lo, hi]
        for v in dict.fromkeys([*(x for x in likely if lo <= x <= hi), *range(lo, min(hi, lo + span) + 1)]):
            env = fill_derived({**start, name: v}, derived)
            for e in at(env):
                if site.side(e) == side:
                    return {n: env[n] for n in ranges}
    return None
