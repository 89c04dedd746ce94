"""The size sweep: which dim assignments a subject is verified at, chosen to hunt tails.

From the contracts (and, where it can read it, the kernel source) the sweep collects every tiling
constant a case should straddle: block sizes, the divisors of ``ceil_div(a, b)``, ``a // b`` and
``a % b`` in the launch geometry, the multipliers of ``shared_bytes``, and the strides of constant-step
loops and the ``TILE``/``ROWS``/``WARPS``-named constants of the source. Each runtime dim the subject uses
gets candidate values in this order: its contract ``test`` values, the base values (1, 37, 300, 4096,
4103, 65536: a prime, a non-power of two, a power of two, its tail above a 1024-thread pass, the range
end; those in range and within the memory budget), then for each constant ``c`` the values ``c`` and
``c + 1`` (a multiple and a tail), small primes, and ``c - 1``.

Cases are then chosen greedily from the product of those values (a seeded sample of it when large): each
next case is the one that newly covers the most, weighing a missed tail side (``a % b`` zero or not, for
every tail site) over a dim value never used over a pair of values of two dims never used together. So
within the budget every tail side is covered first, then every value, then every pair: a pairwise
covering array where the budget allows one, never the full product. Runs are deterministic: the same
contracts and seed give the same cases. Cases run smallest first.

>>> plan = plan_kernel(cs, cs.kernel_map["aux_trunk_forward"], wiring)      # doctest: +SKIP
>>> [c.label for c in plan.cases][:4]                                        # doctest: +SKIP
['B=1', 'B=37', 'B=128', 'B=129']
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cases import DimCase, make_env, runtime_dims
from ..dims import divisions, eval_tree, literals
from ..model import assumed, assumptions
from .coverage import TailSite, kernel_sites, launch_envs

if TYPE_CHECKING:
    from ..model import ContractSet, Kernel, Schedule

BASE_VALUES = (1, 37, 300, 4096, 4103, 65536)
BASE_CHAIN_VALUES = (37, 300, 4096)
LARGE_CHAIN_VALUE = 65536  # the most a schedule's one large case sets a runtime dim to
# the large case's budgets: elements of every buffer the chain (and its equivalent twin, which runs at the
# same case) allocates on the device (4 GiB of float32), and elements of its external inputs, which the host
# draws (for the eager run and each graph-replay state) and the float64 reference chain reads: the host's
# work grows with them, and the whole shipped verify must stay within its 30 s (docs/benchmarks.md)
MAX_CHAIN_ELEMENTS = 1 << 30
MAX_LARGE_HOST_ELEMENTS = 1 << 21
SMALL_PRIMES = (3, 7, 13)
MAX_KERNEL_CASES = 12  # cases per kernel and dims variant of the default sweep
MAX_CHAIN_CASES = 6  # cases per schedule (a chain case runs every kernel of it and its predecessors)
MAX_CASE_ELEMENTS = 1 << 26  # elements of one case's tensors (the runtime's input budget)
MAX_CANDIDATES = 4096  # the product of candidate values is sampled (seeded) beyond this
MAX_VALUES_PER_DIM = 16
SOURCE_BYTES = 1 << 20  # at most this much of a kernel source is read for its loop tiles
_LOOP_STEP = re.compile(r"\bfor\s*\([^;{}]*;[^;{}]*;\s*\w+\s*\+=\s*(\d+)\s*\)")
_TILE_CONST = re.compile(r"(?:\bconstexpr|\bconst|#\s*define)\s+(?:(?:unsigned|int|long|size_t|static)\s+)*(\w*(?:TILE|ROWS|WARPS|THREADS|BLOCK|PER)\w*)\s*=?\s*(\d+)\b", re.I)

W_TAIL, W_VALUE, W_PAIR = 1000.0, 10.0, 1.0


@dataclass
class SizePlan:
    """The cases chosen for one subject and what they were chosen from."""

    kind: str  # "kernel" | "schedule"
    subject: str
    cases: list[DimCase]
    dims: list[str]  # the runtime dims the subject uses (the others stay at one value)
    values: dict[str, list[int]] = field(default_factory=dict)  # candidates per dim, in priority order
    constants: list[int] = field(default_factory=list)
    pairs: tuple[int, int] = (0, 0)  # (pairs of values covered, pairs there are)
    tails: tuple[int, int] = (0, 0)  # (tail sides covered, tail sides there are)
    notes: list[str] = field(default_factory=list)
    large: DimCase | None = None  # a schedule's one large case (beyond the base values), if one fits the budget

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "subject": self.subject, "cases": [c.as_dict() for c in self.cases], "dims": self.dims,
               "constants": self.constants, "pairs": list(self.pairs), "tails": list(self.tails)}  # fmt: skip
        if self.large is not None:
            out["large"] = self.large.as_dict()
        return out


def tiling_constants(cs: ContractSet, kernels: Iterable[Kernel], root: Path | None = None) -> list[int]:
    """Every tiling constant of ``kernels``: block extents, divisors in the geometry, ``shared_bytes``
    multipliers, and (where ``root`` is given and the source readable) loop steps and tile constants."""
    env = cs.fixed_env
    out: set[int] = set()
    for k in kernels:
        for e in k.block:
            v = _const(e.tree, env)
            if v:
                out.add(v)
        exprs = [*k.grid, *k.block] + ([k.shared_bytes] if k.shared_bytes is not None else [])
        for e in exprs:
            for _, _, b in divisions(e):
                v = _const(b, env)
                if v:
                    out.add(v)
        if k.shared_bytes is not None:
            out |= {v for v in literals(k.shared_bytes) if v > 1}
        if root is not None:
            out |= source_tiles(root / k.source)
    return sorted(v for v in out if 1 < v <= 1 << 20)


def _const(tree: Any, env: Mapping[str, int]) -> int | None:
    try:
        v = eval_tree(tree, env)
    except (KeyError, ZeroDivisionError):
        return None
    return abs(v) if v else None


def source_tiles(path: Path) -> set[int]:
    """Steps of constant-step loops and ``TILE``/``ROWS``/``WARPS``-named constants in a kernel source."""
    try:
        if not path.is_file():
            return set()
        with path.open("rb") as fh:
            text = fh.read(SOURCE_BYTES).decode("utf-8", "replace")
    except OSError:
        return set()
    out = {int(m.group(1)) for m in _LOOP_STEP.finditer(text)}
    out |= {int(m.group(2)) for m in _TILE_CONST.finditer(text)}
    return {v for v in out if 1 < v <= 1 << 16}


def used_runtime_dims(cs: ContractSet, kernels: Iterable[Kernel], buffers: Iterable[Any] = ()) -> list[str]:
    """The runtime dims the kernels' shapes, geometry and scalar values (and ``buffers``) use, directly or
    through derived dims, in declaration order."""
    names: set[str] = set()
    for k in kernels:
        for p in k.params:
            for e in getattr(p, "shape", ()) or ():
                names |= set(e.names)
            v = getattr(p, "value", None)
            if hasattr(v, "names"):
                names |= set(v.names)
        for e in [*k.grid, *k.block] + ([k.shared_bytes] if k.shared_bytes is not None else []):
            names |= set(e.names)
    for b in buffers:
        for e in b.shape:
            names |= set(e.names)
    dims = cs.dim_map
    todo = list(names)
    while todo:
        n = todo.pop()
        d = dims.get(n)
        if d is not None and d.kind == "derived" and d.expr is not None:
            for m in d.expr.names:
                if m not in names:
                    names.add(m)
                    todo.append(m)
    return [n for n in runtime_dims(cs) if n in names]


def candidate_values(lo: int, hi: int, test: Sequence[int], base: Sequence[int], constants: Sequence[int]) -> list[int]:
    """A dim's candidates in priority order: test values, base values, then per constant ``c``: ``c`` and
    ``c + 1``, small primes, then ``c - 1``; each inside ``lo..hi``, once."""
    order: list[int] = [*test, lo, *base]
    order += [v for c in constants for v in (c, c + 1)]
    order += list(SMALL_PRIMES)
    order += [c - 1 for c in constants]
    out: list[int] = []
    for v in order:
        if lo <= v <= hi and v not in out:
            out.append(v)
    return out


def choose_cases(values: Mapping[str, Sequence[int]], *, seed: int = 0, max_cases: int = MAX_KERNEL_CASES,
                 sides: Any = None, cost: Any = None, max_cost: float | None = None,
                 required: Sequence[Mapping[str, int]] = ()) -> tuple[list[dict[str, int]], tuple[int, int], tuple[int, int]]:  # fmt: skip
    """Greedy covering: cases (dim -> value) from the product of ``values``, at most ``max_cases``.

    ``sides(case)`` gives the tail sides a case reaches (hashable items); ``cost(case)`` its size, and a
    case over ``max_cost`` is never chosen. ``required`` cases come first. Returns the cases (smallest
    cost first), (pairs covered, pairs), (tail sides covered, tail sides reachable by the candidates).
    """
    names = list(values)
    rng = random.Random(f"wireup-sizes:{seed}")
    total = 1
    for n in names:
        total *= max(1, len(values[n]))
    if total <= MAX_CANDIDATES:
        pool = [dict(zip(names, combo)) for combo in itertools.product(*(values[n] for n in names))]
    else:
        seen: set[tuple[int, ...]] = set()
        pool = []
        # every value of each dim once beside the others' first values, then a seeded sample of the rest
        for n in names:
            for v in values[n]:
                c = {m: (v if m == n else values[m][0]) for m in names}
                key = tuple(c.values())
                if key not in seen:
                    seen.add(key)
                    pool.append(c)
        while len(pool) < MAX_CANDIDATES:
            c = {n: rng.choice(list(values[n])) for n in names}
            key = tuple(c.values())
            if key not in seen:
                seen.add(key)
                pool.append(c)
    if cost is not None and max_cost is not None:
        pool = [c for c in pool if cost(c) <= max_cost]
    rank = {n: {v: i for i, v in enumerate(values[n])} for n in names}
    order = list(range(len(pool)))
    rng.shuffle(order)  # seeded tie-breaks
    tie = {i: pos for pos, i in enumerate(order)}

    def items(c: Mapping[str, int]) -> dict[Any, float]:
        out: dict[Any, float] = {}
        for n in names:
            r = rank[n].get(c[n], len(values[n]))  # a required case's value may be no candidate
            out[("v", n, c[n])] = W_VALUE * (1.0 + (len(values[n]) - r) / max(1, len(values[n])))
        for x, y in itertools.combinations(names, 2):
            out[("p", x, c[x], y, c[y])] = W_PAIR
        if sides is not None:
            for s in sides(c):
                out[("t", s)] = W_TAIL
        return out

    pool_items = [items(c) for c in pool]
    all_tails = {k for it in pool_items for k in it if k[0] == "t"}
    all_pairs = {k for it in pool_items for k in it if k[0] == "p"}
    covered: set[Any] = set()
    chosen: list[dict[str, int]] = []
    for req in required:
        c = {n: int(req[n]) for n in names if n in req}
        if len(c) == len(names) and c not in chosen:
            chosen.append(c)
            covered |= set(items(c))
    taken = {tuple(c.values()) for c in chosen}
    while len(chosen) < max_cases:
        best, best_gain = None, 0.0
        for i, it in enumerate(pool_items):
            if tuple(pool[i].values()) in taken:
                continue
            gain = sum(w for k, w in it.items() if k not in covered)
            if gain > best_gain or (gain == best_gain and best is not None and gain > 0 and _better(pool, cost, tie, i, best)):
                best, best_gain = i, gain
        if best is None or best_gain <= 0:
            break
        chosen.append(pool[best])
        taken.add(tuple(pool[best].values()))
        covered |= set(pool_items[best])
    if len(chosen) > max_cases:
        chosen = chosen[:max_cases]
    chosen.sort(key=lambda c: ((cost(c) if cost is not None else 0), tuple(c.values())))
    pairs = (len(all_pairs & covered), len(all_pairs))
    tails = (len(all_tails & covered), len(all_tails))
    return chosen, pairs, tails


def _better(pool: list[dict[str, int]], cost: Any, tie: Mapping[int, int], i: int, j: int) -> bool:
    """Between two cases of equal gain: the cheaper, then the earlier in the seeded order."""
    if cost is not None:
        ci, cj = cost(pool[i]), cost(pool[j])
        if ci != cj:
            return ci < cj
    return tie[i] < tie[j]


def case_elements(k: Kernel, env: Mapping[str, int]) -> int:
    """Elements of the kernel's input tensors at ``env`` (what a case draws on the host)."""
    total = 0
    for p in k.params:
        shape = getattr(p, "shape", None)
        if shape is None or getattr(p, "role", "") == "out":  # the runtime's input budget counts what it draws
            continue
        n = 1
        try:
            for e in shape:
                n *= max(0, e.evaluate(env))
        except (KeyError, ZeroDivisionError):
            continue
        total += n
    return total


def _dim_test_values(cs: ContractSet, name: str) -> list[int]:
    d = cs.dim_map.get(name)
    return list(getattr(d, "test", ()) or ())


def _plan(cs: ContractSet, kind: str, subject: str, kernels: list[Kernel], wiring: Any, *, base: Sequence[int],
          max_cases: int, seed: int, max_elements: int, root: Path | None, extra: Sequence[DimCase],
          overrides: Mapping[str, int] | None = None) -> SizePlan:  # fmt: skip
    rt = runtime_dims(cs)
    ranges = {d.name: (d.min or 1, d.max or (d.min or 1)) for d in cs.dim_map.values() if d.kind == "runtime"}
    dims = used_runtime_dims(cs, kernels)
    constants = tiling_constants(cs, kernels, root)
    sites: list[tuple[Kernel, TailSite, Any]] = []
    for k in kernels:
        at = launch_envs(cs, k, wiring)
        sites += [(k, s, at) for s in kernel_sites(cs, k, wiring)]
    # the dims the subject does not use stay at one value: their first test value, else the base value
    # nearest the bottom of their range
    rest = {n: (_dim_test_values(cs, n) or [max(ranges[n][0], 1)])[0] for n in rt if n not in dims}

    def env_of(c: Mapping[str, int]) -> dict[str, int]:
        return make_env(cs, DimCase.of({**rest, **c}), overrides)

    def cost(c: Mapping[str, int]) -> int:
        env = env_of(c)
        # a kernel's case is worth running when one of its launches fits (the runtime says "not run" for
        # the others); a schedule's needs every kernel
        return max((min(case_elements(k, e) for e in launch_envs(cs, k, wiring)(env)) for k in kernels), default=0)

    # a case that breaks an assumption of a kernel (requires = ["T % 4 == 0"] over runtime dims) is a size
    # the host never launches it at: never chosen (its cost is past the budget)
    runtime = set(rt)
    slots = cs.slot_indices
    assuming = [k for k in kernels if assumptions(k.requires, runtime)]

    def chosen_cost(c: Mapping[str, int]) -> float:
        if assuming:
            env = env_of(c)
            if not all(assumed(k.requires, runtime, env, slots) for k in assuming):
                return float("inf")
        return cost(c)

    def sides(c: Mapping[str, int]) -> set[tuple[int, str]]:
        env = env_of(c)
        out = set()
        for i, (_, s, at) in enumerate(sites):
            for e in at(env):
                side = s.side(e)
                if side is not None:
                    out.add((i, side))
        return out

    values: dict[str, list[int]] = {}
    notes: list[str] = []
    for n in dims:
        lo, hi = ranges[n]
        vals = candidate_values(lo, hi, _dim_test_values(cs, n), base, constants)
        # the memory budget: a value whose case is too large with every other dim at its smallest is dropped
        small = {m: min(values.get(m) or [ranges[m][0]]) for m in dims}
        fits = [v for v in vals if cost({**small, n: v}) <= max_elements]
        if len(fits) < len(vals):
            notes.append(f"{n}: {len(vals) - len(fits)} value(s) over the budget of {max_elements:.2e} elements left out")
        values[n] = fits[:MAX_VALUES_PER_DIM] or [lo]
    required = [{k: v for k, v in c.as_dict().items() if k in dims} for c in extra]
    chosen, pairs, tails = choose_cases(values, seed=seed, max_cases=max_cases + len(required), sides=sides if sites else None,
                                        cost=chosen_cost, max_cost=max_elements, required=required)  # fmt: skip
    cases = [DimCase(tuple((n, c[n] if n in c else rest[n]) for n in rt), "sweep") for c in chosen] or [DimCase(tuple(rest.items()), "sweep")]
    return SizePlan(kind, subject, cases, dims, values, constants, pairs, tails, notes)


def plan_kernel(cs: ContractSet, kernel: Kernel, wiring: Any, *, seed: int = 0, max_cases: int = MAX_KERNEL_CASES,
                max_elements: int = MAX_CASE_ELEMENTS, root: Path | None = None, overrides: Mapping[str, int] | None = None) -> SizePlan:  # fmt: skip
    """The default sweep of one kernel (plus its contract's extra ``cases``)."""
    extra = [DimCase.of(dict(c)) for c in getattr(kernel.verify, "cases", ())]
    return _plan(cs, "kernel", kernel.name, [kernel], wiring, base=BASE_VALUES, max_cases=max_cases, seed=seed,
                 max_elements=max_elements, root=root, extra=extra, overrides=overrides)  # fmt: skip


def plan_schedule(cs: ContractSet, schedule: Schedule, wiring: Any, *, seed: int = 0, max_cases: int = MAX_CHAIN_CASES,
                  max_elements: int = MAX_CASE_ELEMENTS, root: Path | None = None,
                  max_device: int = MAX_CHAIN_ELEMENTS) -> SizePlan:  # fmt: skip
    """The default sweep of one schedule: the tails of every kernel it launches, chain base values (a
    pairwise covering of ``max_cases`` cases), then one large case (:func:`large_chain_case`)."""
    kernels = []
    for st in schedule.launches:
        k = cs.kernel_map.get(st.launch or "")
        if k is not None and k not in kernels:
            kernels.append(k)
    extra = [DimCase.of(dict(c)) for c in getattr(schedule, "verify_cases", ())]
    plan = _plan(cs, "schedule", schedule.name, kernels, wiring, base=BASE_CHAIN_VALUES, max_cases=max_cases, seed=seed,
                 max_elements=max_elements, root=root, extra=extra)  # fmt: skip
    large = large_chain_case(cs, schedule, plan, max_device=max_device)
    if large is not None and large not in plan.cases:
        plan.large = DimCase(large.values, "large")
        plan.cases.append(plan.large)  # the largest: it runs last
    return plan


def chain_buffers(cs: ContractSet, schedule: Schedule) -> list[Any]:
    """Every buffer a run of ``schedule`` touches: those its steps and the steps of the schedules it runs
    after (transitively) bind or zero, and those of its equivalent twin, which runs at the same cases."""
    scheds = cs.schedule_map
    names: list[str] = []

    def visit(n: str, stack: tuple[str, ...]) -> None:
        if n in names or n in stack or n not in scheds:
            return
        for dep in scheds[n].after:
            visit(dep, (*stack, n))
        names.append(n)

    visit(schedule.name, ())
    if schedule.equivalent_to:
        visit(schedule.equivalent_to, ())
    out: dict[str, Any] = {}
    for n in names:
        for st in scheds[n].steps:
            if st.zero:
                if st.zero in cs.buffer_map:
                    out.setdefault(st.zero, cs.buffer_map[st.zero])
                continue
            k = cs.kernel_map.get(st.launch or "")
            if k is None:
                continue
            for p in k.params:
                b = st.binding(p.name) if getattr(p, "shape", None) is not None else None
                if b is not None and not b.is_null and b.buffer in cs.buffer_map:
                    out.setdefault(b.buffer, cs.buffer_map[b.buffer])
    return list(out.values())


def chain_elements(buffers: Iterable[Any], env: Mapping[str, int]) -> tuple[int, int]:
    """(elements of every buffer, elements of the external ones: what the host draws) at ``env``."""
    total = external = 0
    for b in buffers:
        n = 1
        try:
            for e in b.shape:
                n *= max(0, e.evaluate(env))
        except (KeyError, ZeroDivisionError):
            continue
        total += n
        if b.is_external:
            external += n
    return total, external


def large_chain_case(cs: ContractSet, schedule: Schedule, plan: SizePlan, *, max_device: int = MAX_CHAIN_ELEMENTS,
                     max_host: int = MAX_LARGE_HOST_ELEMENTS) -> DimCase | None:  # fmt: skip
    """The schedule's one large case: from the smallest values of the sweep, each runtime dim the schedule
    uses raised in turn (declaration order) to the largest value up to LARGE_CHAIN_VALUE (and its range)
    that keeps the chain's buffers within ``max_device`` elements and its external inputs within
    ``max_host``. None when no dim can pass the sweep's largest value (a note says so)."""
    if not plan.dims:
        return None
    buffers = chain_buffers(cs, schedule)
    base = {n: v for n, v in plan.cases[0].values} if plan.cases else {}
    case = dict(base)
    for n in plan.dims:
        case[n] = min(c.as_dict()[n] for c in plan.cases)

    def fits(c: Mapping[str, int]) -> bool:
        total, external = chain_elements(buffers, make_env(cs, DimCase.of(c)))
        return total <= max_device and external <= max_host

    if not fits(case):
        return None
    raised = False
    for n in plan.dims:
        d = cs.dim_map[n]
        lo, hi = case[n], min(LARGE_CHAIN_VALUE, d.max or LARGE_CHAIN_VALUE)
        if fits({**case, n: hi}):
            best = hi
        else:  # the cost grows with the dim: the largest value that fits, by bisection
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits({**case, n: mid}) else (lo, mid)
            best = lo
        largest = max(c.as_dict()[n] for c in plan.cases)
        if best > largest:
            case[n] = best
            raised = True
    if not raised:
        plan.notes.append(f"no large case: no dim can pass the sweep's largest value within {max_device:.2e} chain elements "
                          f"and {max_host:.2e} external input elements")
        return None
    return DimCase(tuple(case.items()), "large")
