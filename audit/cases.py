"""Dim environments, all of them: verify cases, probe points, representative values, launch-local bindings.

Every place that turns dims into numbers builds its environment here:

- a **verify case** (:class:`DimCase`) binds every runtime dim on its own (``B=4,T=17``); ``--sizes``
  and contracts spell cases in the syntax :func:`parse_cases` reads, and :func:`make_env` turns a case
  into the full environment (fixed dims, the case, derived dims);
- **probe environments** (:func:`probe_envs`) are where the checker compares symbolic shapes;
- the report's **representative environment** (:func:`representative_env`) shows geometry as numbers;
- **launch-local bindings** (:func:`launch_env`, :func:`local_bindings`) give a kernel's local dims the
  values one launch binds them to.

The model never imports this module (it sits above :mod:`audit.model`, which only :mod:`audit.shapes`
serves).

>>> case = DimCase.of({"B": 4, "T": 17})
>>> case.label
'B=4,T=17'
>>> parse_case_text("B=4,T=17;B=1,T=1", {"B": (1, 64), "T": (1, 1024)}, "--sizes")
[DimCase(values=(('B', 4), ('T', 17))), DimCase(values=(('B', 1), ('T', 1)))]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dims import Expr, probe_points

if TYPE_CHECKING:
    from .model import Buffer, ContractSet, Kernel, Step

# the value a runtime dim takes in the report's geometry when none is given (``wireup report --at``)
DEFAULT_RUNTIME_VALUE = 4096
MAX_LOCAL_BINDINGS = 8


class CaseError(ValueError):
    """A case text or value that does not fit the contracts' runtime dims; the message says why."""


@dataclass(frozen=True)
class DimCase:
    """One verify case: a value for every runtime dim (``B=4,T=17``), in the contracts' dim order.

    ``key`` is what seeds the case's test data: the bare value of a case of one dim (as the scalar
    ``--sizes`` always did, so data and evidence of one-dim contracts stay the same), else its label.
    """

    values: tuple[tuple[str, int], ...]
    origin: str = field(default="", compare=False, repr=False)  # "sizes", "sweep", "test", "kernel", "schedule"

    @classmethod
    def of(cls, values: Mapping[str, int], origin: str = "") -> DimCase:
        return cls(tuple((str(k), int(v)) for k, v in values.items()), origin)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values)

    @property
    def key(self) -> int | str:
        return self.values[0][1] if len(self.values) == 1 else self.label

    @property
    def size(self) -> int:
        """The largest value of the case (its scale: what the budgets and ``max_batch`` compare)."""
        return max((v for _, v in self.values), default=0)

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    def __str__(self) -> str:
        return self.label


def case_matrix(cases: Sequence[Mapping[str, int]]) -> tuple[list[str], list[list[int | None]]]:
    """Dims x cases: the dims in the order the cases first name them, and one row per dim with its value
    in each case (None where a case does not give it).

    >>> case_matrix([{"B": 1, "T": 8}, {"B": 3, "T": 3}])
    (['B', 'T'], [[1, 3], [8, 3]])
    """
    dims: list[str] = []
    for c in cases:
        dims += [d for d in c if d not in dims]
    return dims, [[c.get(d) for c in cases] for d in dims]


def runtime_dims(cs: ContractSet) -> list[str]:
    """The runtime dims of the contract set, in declaration order."""
    return [d.name for d in cs.dim_map.values() if d.kind == "runtime"]


def scalar_case(cs: ContractSet, size: int, origin: str = "sizes") -> DimCase:
    """The old scalar form: every runtime dim at ``size``."""
    return DimCase(tuple((n, int(size)) for n in runtime_dims(cs)), origin)


def as_case(cs: ContractSet, case: DimCase | int | Mapping[str, int]) -> DimCase:
    """A :class:`DimCase` from a case, a scalar size or a mapping (what crosses the worker boundary)."""
    if isinstance(case, DimCase):
        return case
    if isinstance(case, Mapping):
        return DimCase.of(case)
    return scalar_case(cs, int(case))


# -- case syntax ---------------------------------------------------------------------------------------


def parse_case_text(text: str, ranges: Mapping[str, tuple[int | None, int | None]], what: str,
                    fixed: Mapping[str, int] | None = None) -> list[DimCase | int]:  # fmt: skip
    """Cases of one ``--sizes`` value: ``37,4096`` (scalars, every runtime dim at that value) or
    ``B=4,T=17;B=1,T=1`` (assignments separated by ``;``). ``ranges`` maps runtime dim -> (min, max).

    A scalar is returned as an int (the caller decides what an out-of-range scalar means); an
    assignment must bind every runtime dim to an integer inside its range, else :class:`CaseError`.
    """
    out: list[DimCase | int] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        if "=" not in part:
            for x in (x.strip() for x in part.split(",")):
                if not x:
                    continue
                try:
                    v = int(x)
                except ValueError:
                    raise CaseError(f'{what} takes batch sizes or dim assignments such as "B=4,T=17;B=1,T=1", found "{x}".') from None
                if v < 1:
                    raise CaseError(f"{what} takes positive batch sizes, found {v}.")
                out.append(v)
            continue
        out.append(parse_assignment(part, ranges, what, fixed))
    return out


def parse_assignment(text: str, ranges: Mapping[str, tuple[int | None, int | None]], what: str,
                     fixed: Mapping[str, int] | None = None) -> DimCase:  # fmt: skip
    """One case ``B=4,T=17``: every runtime dim once, each inside its range."""
    values: dict[str, int] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or not name:
            raise CaseError(f'{what} case "{text}": "{item}" is not an assignment NAME=VALUE.')
        if name not in ranges:
            if fixed and name in fixed:
                raise CaseError(f'{what} case "{text}": "{name}" is a fixed dim ({fixed[name]}); only runtime dims take case values ({_names(ranges)}).')
            raise CaseError(f'{what} case "{text}": "{name}" is not a runtime dim; the runtime dims are {_names(ranges)}.')
        if name in values:
            raise CaseError(f'{what} case "{text}": "{name}" is given twice.')
        try:
            v = int(raw)
        except ValueError:
            raise CaseError(f'{what} case "{text}": {name} takes an integer, found "{raw}".') from None
        check_value(name, v, ranges[name], f'{what} case "{text}"')
        values[name] = v
    missing = [n for n in ranges if n not in values]
    if missing:
        raise CaseError(f'{what} case "{text}" does not bind the runtime dim(s) {_names(missing)}; a case gives every runtime dim a value.')
    return DimCase(tuple((n, values[n]) for n in ranges), "sizes")


def check_value(name: str, value: int, rng: tuple[int | None, int | None], where: str) -> None:
    lo, hi = rng
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise CaseError(f"{where}: {name} = {value} is outside its range {lo}..{hi}.")


def _names(names: Iterable[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def cases_from_sizes(cs: ContractSet, items: Sequence[str], what: str = "--sizes") -> list[DimCase | int] | None:
    """Every case of repeated ``--sizes`` values (None when none were given)."""
    ranges = {d.name: (d.min, d.max) for d in cs.dim_map.values() if d.kind == "runtime"}
    out: list[DimCase | int] = []
    for text in items:
        out += parse_case_text(text, ranges, what, cs.fixed_env)
    return out or None


# -- environments --------------------------------------------------------------------------------------


def make_env(cs: ContractSet, case: DimCase | int | None, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """Fixed dims (with ``overrides``), the case's runtime dims (a scalar sets every one), derived dims."""
    env: dict[str, int] = {}
    for d in cs.dim_map.values():
        if d.kind == "fixed" and d.value is not None:
            env[d.name] = d.value
    env.update(overrides or {})
    if case is not None:
        env.update(as_case(cs, case).as_dict())
    derived = [d for d in cs.dim_map.values() if d.kind == "derived" and d.expr is not None and d.name not in (overrides or {})]
    return fill_derived(env, derived)


def case_in_range(cs: ContractSet, case: DimCase | int) -> str | None:
    """None when every runtime dim admits its value in ``case``, else why not."""
    values = as_case(cs, case).as_dict()
    for d in cs.dim_map.values():
        if d.kind != "runtime" or d.name not in values:
            continue
        v = values[d.name]
        if (d.min is not None and v < d.min) or (d.max is not None and v > d.max):
            return f'dim "{d.name}" ranges over {d.min}..{d.max}'
    return None


def case_label(case: DimCase | int | None, variant: Mapping[str, int], local: Mapping[str, int], extra: str = "",
               cs: ContractSet | None = None) -> str:  # fmt: skip
    """``B=4096 (K=3, N=65536)`` as findings quote it; ``B=4,T=17 (K=3)`` for a case of two dims."""
    if case is None:
        head = ""
    elif isinstance(case, DimCase):
        head = case.label
    else:
        rt = runtime_dims(cs) if cs is not None else ["B"]
        head = f"{rt[0] if rt else 'B'}={case}"
    inner = [f"{k}={v}" for k, v in {**variant, **local}.items()]
    if extra:
        inner.append(extra)
    return head + (f" ({', '.join(inner)})" if inner else "")


def fill_derived(env: dict[str, int], derived: Sequence) -> dict[str, int]:
    """``env`` with every derived dim whose names it binds evaluated, in dependency order (a derived dim
    may use another); one that divides by zero or overflows stays unbound."""
    by_name = {d.name: d for d in derived if d.expr is not None}
    order: list = []
    seen: set[str] = set()
    for d in by_name.values():  # depth-first post-order with an explicit stack (chains can be long)
        if d.name in seen:
            continue
        seen.add(d.name)
        stack = [(d, iter(sorted(d.expr.names)))]
        while stack:
            top, refs = stack[-1]
            for ref in refs:
                if ref in by_name and ref not in seen:
                    seen.add(ref)
                    stack.append((by_name[ref], iter(sorted(by_name[ref].expr.names))))
                    break
            else:
                order.append(top)
                stack.pop()
    for d in order:
        if d.name in env:
            continue
        if all(n in env for n in d.expr.names):
            try:
                env[d.name] = d.expr.evaluate(env)
            except ArithmeticError:
                pass
    return env


def probe_envs(cs: ContractSet) -> list[dict[str, int]]:
    """Full dim environments (fixed, runtime probe values, derived) at which shapes are compared."""
    cached = cs.__dict__.get("_probe_envs")
    if cached is not None:
        return cached
    fixed = cs.fixed_env
    derived = [d for d in cs.dim_map.values() if d.kind == "derived" and d.name not in fixed]
    envs = []
    for point in probe_points(cs.runtime_ranges):
        env = dict(fixed)
        env.update(point)
        envs.append(fill_derived(env, derived))
    cs.__dict__["_probe_envs"] = envs
    return envs


def largest_env(cs: ContractSet) -> dict[str, int]:
    """Fixed dims, every runtime dim at the largest value its range allows, and the derived dims that follow:
    the corner where sizes, offsets and products of dims are largest (INDEX_OVERFLOW evaluates there)."""
    fixed = cs.fixed_env
    env = dict(fixed)
    env.update({name: hi for name, (_, hi) in cs.runtime_ranges.items()})
    return fill_derived(env, [d for d in cs.dim_map.values() if d.kind == "derived" and d.name not in fixed])


def representative_env(cs: ContractSet, at: Mapping[str, int]) -> tuple[dict[str, int], str]:
    """Fixed dims, each runtime dim at its representative value (``at`` or :data:`DEFAULT_RUNTIME_VALUE`
    within its range), other ``at`` values, and the derived dims that follow; plus ``"B = 4096"`` text."""
    env = dict(cs.fixed_env)
    shown = []
    for name, (lo, hi) in sorted(cs.runtime_ranges.items()):
        value = at.get(name, min(max(DEFAULT_RUNTIME_VALUE, lo), hi))
        env[name] = value
        shown.append(f"{name} = {value}")
    for name, value in sorted(at.items()):
        if name not in cs.runtime_ranges:
            env[name] = value
            shown.append(f"{name} = {value}")
    derived = [d for d in cs.dim_map.values() if d.kind == "derived" and d.name not in env and d.expr is not None]
    for _ in range(len(derived)):
        for d in derived:
            if d.name not in env and all(n in env for n in d.expr.names):
                try:
                    env[d.name] = d.expr.evaluate(env)
                except (KeyError, ArithmeticError):
                    pass
    return env, ", ".join(shown)


# -- launch-local bindings -----------------------------------------------------------------------------


def bind_local_dims(
    local: Sequence[str],
    pairs: Sequence[tuple[str, Sequence[Expr], Sequence[Expr]]],
    explicit: Mapping[str, Expr],
    envs: Sequence[Mapping[str, int]],
) -> tuple[list[dict[str, int]], list[str]]:
    """Bind a kernel's local dims for one launch, per probe environment.

    ``pairs`` holds ``(param name, param shape, bound buffer shape)``. A param dim that is a bare local
    name binds to the buffer's dim at that position; explicit ``dims = {N = ...}`` on the launch win.
    Returns the extended environments and one sentence per conflict.
    """
    if not local and not explicit:  # nothing to bind (most launches): the environments as they are
        return [dict(env) for env in envs], []
    problems: list[str] = []
    out_envs: list[dict[str, int]] = []
    reported: set[str] = set()
    # what binds what does not depend on the environment: the bare local names of the parameters' shapes,
    # in order, with the sentence naming each binding, worked out once for every environment below
    said = [(name, expr, f'the launch\'s dims ({name} = "{expr.text}")') for name, expr in explicit.items()]
    plan = []
    for pname, pshape, bshape in pairs:
        if len(pshape) != len(bshape):
            continue
        for i, (pe, be) in enumerate(zip(pshape, bshape)):
            tree = pe.tree
            if isinstance(tree, tuple) and tree[0] == "name" and tree[1] in local:
                plan.append((tree[1], be, pname, i, f'parameter "{pname}" (dim {i}, "{be.text}")'))
    for env in envs:
        e = dict(env)
        source: dict[str, str] = {}
        for name, expr, sentence in said:
            try:
                e[name] = expr.evaluate(env)
                source[name] = sentence
            except (KeyError, ArithmeticError):
                pass
        for name, be, pname, i, sentence in plan:
            try:
                v = be.evaluate(env)
            except (KeyError, ArithmeticError):
                continue
            if name in e and name in source and e[name] != v and name not in reported:
                reported.add(name)
                problems.append(
                    f'dim "{name}" is bound to {e[name]} by {source[name]} but to {v} by parameter '
                    f'"{pname}" (dim {i}, "{be.text}")'
                )
            elif name not in e:
                e[name] = v
                source[name] = sentence
        out_envs.append(e)
    return out_envs, problems


def launch_pairs(cs: ContractSet, launch: Any) -> list[tuple[str, Sequence[Expr], Sequence[Expr]]]:
    """``(param, param shape, bound shape)`` of every tensor a launch binds to a buffer (or a view)."""
    pairs = []
    for p, b in launch.bound():
        buf = cs.buffer_map.get(b.buffer or "")
        target = b.view if b.view is not None else (buf.shape if buf else None)
        if target is not None:
            pairs.append((p.name, p.shape, target))
    return pairs


def launch_env(cs: ContractSet, kernel: Kernel, launch: Any, env: Mapping[str, int]) -> dict[str, int]:
    """``env`` with the kernel's local dims bound as this launch (a :class:`audit.graph.Launch`) binds them.

    The environment :func:`bind_local_dims` gives for ``env`` alone (its conflicts aside): which local
    dim each bound shape binds does not depend on ``env``, so that plan is worked out once per launch
    (kept on the launch) and only the expressions are evaluated here; the search over runtime dims asks
    for thousands of environments of the same launches."""
    if not kernel.dims and not launch.step.dims:
        return dict(env)
    memo = getattr(launch, "__dict__", None)
    plan = memo.get("_local_plan") if memo is not None else None
    if plan is None or plan[0] is not cs or plan[1] is not kernel:
        plan = (cs, kernel, tuple(dict(launch.step.dims).items()), _binding_plan(kernel.dims, launch_pairs(cs, launch)))
        if memo is not None:
            memo["_local_plan"] = plan
    e = dict(env)
    for name, expr in plan[2]:  # the launch's explicit dims win
        try:
            e[name] = expr.evaluate(env)
        except (KeyError, ArithmeticError):
            pass
    for name, expr in plan[3]:  # then the first parameter whose bound dim evaluates
        if name not in e:
            try:
                e[name] = expr.evaluate(env)
            except (KeyError, ArithmeticError):
                pass
    return e


def _binding_plan(local: Sequence[str], pairs: Sequence[tuple[str, Sequence[Expr], Sequence[Expr]]]) -> tuple[tuple[str, Expr], ...]:
    """(local dim, bound expression) for every bare local name of a parameter's shape, in the order
    :func:`bind_local_dims` tries them."""
    out = []
    for _pname, pshape, bshape in pairs:
        if len(pshape) != len(bshape):
            continue
        for pe, be in zip(pshape, bshape):
            tree = pe.tree
            if isinstance(tree, tuple) and tree[0] == "name" and tree[1] in local:
                out.append((tree[1], be))
    return tuple(out)


@dataclass
class LocalBinding:
    """Values of a kernel's local dims for one launch (and the launch they came from)."""

    values: dict[str, int]
    schedule: str | None = None
    step: Step | None = None
    buffers: dict[str, Buffer] = field(default_factory=dict)  # param -> bound buffer

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items())


def extra_bindings(cs: ContractSet, kernel: Kernel, wiring: Any) -> list[LocalBinding]:
    """The ``[kernel.verify] bindings`` of ``kernel``, each with the buffers of its first launch (which give
    the inputs their value domains); the schedules' own bindings come from :func:`local_bindings`."""
    first = next(((sname, ln) for sname, lns in wiring.launches.items() for ln in lns
                  if ln.kernel is not None and ln.kernel.name == kernel.name), (None, None))  # fmt: skip
    step = first[1].step if first[1] is not None else None
    return [LocalBinding(dict(b), first[0], step, launch_buffers(cs, kernel, step)) for b in kernel.verify.bindings]


def launch_buffers(cs: ContractSet, kernel: Kernel, step: Step | None) -> dict[str, Buffer]:
    out: dict[str, Buffer] = {}
    if step is None:
        return out
    for p in kernel.tensors:
        b = step.binding(p.name)
        if b is not None and not b.is_null and b.buffer in cs.buffer_map:
            out[p.name] = cs.buffer_map[b.buffer]
    return out


def _numel(values: Iterable[int]) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def local_bindings(cs: ContractSet, kernel: Kernel, env: Mapping[str, int], wiring: Any) -> tuple[list[LocalBinding], str]:
    """The distinct local-dim bindings of ``kernel`` at ``env`` over every launch of it, and a note when
    some were left out (more than :data:`MAX_LOCAL_BINDINGS`) or none could be bound."""
    launches = [(sname, ln) for sname, lns in wiring.launches.items() for ln in lns if ln.kernel is not None and ln.kernel.name == kernel.name]
    if not kernel.dims:
        first = launches[0] if launches else (None, None)
        step = first[1].step if first[1] is not None else None
        return [LocalBinding({}, first[0], step, launch_buffers(cs, kernel, step))], ""
    found: dict[tuple, LocalBinding] = {}
    for sname, ln in launches:
        envs, _ = bind_local_dims(kernel.dims, launch_pairs(cs, ln), dict(ln.step.dims), [dict(env)])
        vals = {d: envs[0][d] for d in kernel.dims if d in envs[0]}
        if len(vals) != len(kernel.dims):
            continue
        key = tuple(sorted(vals.items()))
        found.setdefault(key, LocalBinding(vals, sname, ln.step, launch_buffers(cs, kernel, ln.step)))
    if not found:
        names = ", ".join(f'"{d}"' for d in kernel.dims)
        return [], f"no launch in the schedules binds its local dim(s) {names}"
    bindings = list(found.values())
    note = ""
    if len(bindings) > MAX_LOCAL_BINDINGS:
        # a representative set: the smallest and largest element counts, then the rest in launch order
        by_size = sorted(bindings, key=lambda lb: _numel(lb.values.values()))
        keep = [by_size[0], by_size[-1]] + [b for b in bindings if b not in (by_size[0], by_size[-1])]
        note = f"{len(bindings) - MAX_LOCAL_BINDINGS} of {len(bindings)} local-dim bindings left out"
        bindings = keep[:MAX_LOCAL_BINDINGS]
    return bindings, note


def producer_domains(cs: ContractSet, wiring: Any) -> dict[str, tuple[Any, str]]:
    """Buffer -> (values, origin) declared by a kernel that writes it (an ``out``/``inout`` parameter with
    ``values``), in schedule order; the first declaration wins. A buffer's own ``values`` come first and
    are not listed here (the runtime reads them from the buffer). No numpy: the static block runs fill inputs
    from it too (:func:`audit.cuda.static._fillings`)."""
    out: dict[str, tuple[Any, str]] = {}
    for launches in wiring.launches.values():
        for launch in launches:
            k = launch.kernel
            if k is None:
                continue
            for p, b in launch.bound():
                if p.role in ("out", "inout") and getattr(p, "values", None) is not None and b.buffer and b.buffer not in out:
                    out[b.buffer] = (p.values, f'output "{p.name}" of kernel "{k.name}"')
    return out


# the neighbours of a listed value v: v - 1 is the largest tail of every power-of-two width dividing v, v + 1
# the smallest, v + 2 and v + 3 tails that make a tail loop run more than once (at v + 1 the scalar rest of
# a 4-wide loop runs once: its index arithmetic is never exercised, and mutants of it survived)
NEIGHBOUR_STEPS = (-1, 1, 2, 3)


def dims_neighbours(kernel: Any) -> list[tuple[str, int]]:
    """The values the verify search adds to each dim ``[kernel.verify] dims`` lists at least two values of:
    every listed value's neighbours (NEIGHBOUR_STEPS) inside the listed range, not listed themselves, in
    ascending order (none where ``neighbours = false``). A listed range is the author's statement of what the
    kernel takes; the values inside it that are not listed are the residues nobody picked.

    >>> from types import SimpleNamespace
    >>> from audit.model import VerifySpec
    >>> dims_neighbours(SimpleNamespace(verify=VerifySpec(dims=(("H", (128, 257)), ("K", (3,))))))
    [('H', 129), ('H', 130), ('H', 131), ('H', 256)]
    """
    if not kernel.verify.neighbours:
        return []
    return [(name, int(x)) for name, values in kernel.verify.dims for x in _neighbours(values)]


def _neighbours(values: Sequence[int]) -> dict[int, int]:
    """The values NEIGHBOUR_STEPS away from one of ``values``, inside their range and not among them, in
    ascending order, each mapped to the first of ``values`` (in their order) it neighbours."""
    lo, hi = min(values), max(values)
    near: dict[int, int] = {}
    for v in values:
        for d in NEIGHBOUR_STEPS:
            if lo <= v + d <= hi and v + d not in values and v + d not in near:
                near[v + d] = v
    return dict(sorted(near.items()))


def binding_neighbours(kernel: Any) -> list[dict[str, int]]:
    """The bindings the verify search adds to a kernel's ``[kernel.verify] bindings``: for each local dim the
    bindings give at least two values of, every listed value's neighbours (NEIGHBOUR_STEPS) inside the listed
    range, not listed themselves, one dim at a time, each as a copy of the first binding that listed the value
    it neighbours (its other dims keep that binding's values, so the copy stays on the binding's code path);
    in ascending order per dim, the dims in the kernel's order (none where ``neighbours = false``). A
    shape-generic kernel's bindings are guesses at the residues that matter, as listed dims values are.

    >>> from types import SimpleNamespace
    >>> from audit.model import VerifySpec
    >>> k = SimpleNamespace(dims=("M", "N"), verify=VerifySpec(bindings=((("M", 8), ("N", 129)), (("M", 9), ("N", 100)))))
    >>> binding_neighbours(k)
    [{'M': 9, 'N': 101}, {'M': 9, 'N': 102}, {'M': 9, 'N': 103}, {'M': 8, 'N': 128}]
    """
    return [b for _dim, b in binding_neighbours_by_dim(kernel)]


def binding_neighbours_by_dim(kernel: Any) -> list[tuple[str, dict[str, int]]]:
    """:func:`binding_neighbours`, each with the dim whose value it moved.

    >>> from types import SimpleNamespace
    >>> from audit.model import VerifySpec
    >>> k = SimpleNamespace(dims=("M", "N"), verify=VerifySpec(bindings=((("M", 8), ("N", 129)), (("M", 9), ("N", 100)))))
    >>> [d for d, _ in binding_neighbours_by_dim(k)]
    ['N', 'N', 'N', 'N']
    """
    if not kernel.verify.neighbours or len(kernel.verify.bindings) < 1:
        return []
    bindings = [dict(b) for b in kernel.verify.bindings]
    seen = {tuple(sorted(b.items())) for b in bindings}
    out: list[tuple[str, dict[str, int]]] = []
    for name in kernel.dims:
        values = [b[name] for b in bindings if name in b]
        for x, v in (_neighbours(values) if values else {}).items():
            copy = {**next(b for b in bindings if b.get(name) == v), name: x}
            key = tuple(sorted(copy.items()))
            if key not in seen:
                seen.add(key)
                out.append((name, copy))
    return out
