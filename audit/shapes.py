"""Dim values and shape comparison across a contract set.

Fixed dims have values; derived dims are evaluated from them; runtime dims (``B``) stay symbolic and are
sampled at probe points (see :func:`audit.dims.probe_points`). A shape is compared by its values at every
probe environment, so ``[B, SH2 + 6]`` equals ``[B, 262]`` when ``SH2 = 256`` and differs from ``[B, 256]``.

>>> envs = probe_envs(cs)                          # doctest: +SKIP
>>> shape_key(kernel.param("h_s2").shape, envs)    # doctest: +SKIP
((1, 256), (65536, 256), ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .dims import Expr, probe_points

if TYPE_CHECKING:
    from .model import ContractSet


def resolve_fixed_dims(cs: ContractSet) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Values of fixed dims and of derived dims that depend only on fixed ones.

    Returns ``(env, problems)``; each problem is ``(dim name, sentence)`` for a derived dim that refers
    to an unknown name, is part of a cycle, or fails to evaluate.
    """
    env: dict[str, int] = {}
    problems: list[tuple[str, str]] = []
    dims = cs.dim_map
    for d in dims.values():
        if d.kind == "fixed" and d.value is not None:
            env[d.name] = d.value
    state: dict[str, str] = {}

    def finish(name: str, ok: bool) -> None:
        d = dims[name]
        assert d.expr is not None
        if ok and all(r in env for r in d.expr.names):
            try:
                env[name] = d.expr.evaluate(env)
            except ArithmeticError as exc:
                problems.append((name, f'Derived dim "{name}" = "{d.expr.text}" cannot be evaluated: {exc}.'))
        state[name] = "done"

    def visit(start: str) -> None:
        """Evaluate the derived dim ``start`` after the derived dims it uses, depth first.

        An explicit stack rather than recursion: a contract may chain thousands of derived dims.
        """
        if state.get(start) == "done":
            return
        path: list[str] = [start]
        on_path = {start}
        stack: list[list] = [[start, iter(sorted(dims[start].expr.names)), True]]
        while stack:
            frame = stack[-1]
            name = frame[0]
            descended = False
            for ref in frame[1]:
                rd = dims.get(ref)
                if rd is None:
                    problems.append((name, f'Derived dim "{name}" = "{dims[name].expr.text}" uses "{ref}", which is not a declared dim.'))
                    frame[2] = False
                elif rd.kind != "derived":
                    if ref not in env and rd.kind != "runtime":
                        frame[2] = False
                elif state.get(ref) == "done":
                    if ref not in env:
                        frame[2] = False
                elif ref in on_path:
                    cyc = " -> ".join((*path[path.index(ref) :], ref))
                    problems.append((ref, f'Derived dim "{ref}" depends on itself: {cyc}.'))
                    state[ref] = "done"
                    frame[2] = False
                else:
                    stack.append([ref, iter(sorted(rd.expr.names)), True])
                    path.append(ref)
                    on_path.add(ref)
                    descended = True
                    break
            if descended:
                continue
            finish(name, frame[2])
            stack.pop()
            path.pop()
            on_path.discard(name)
            if stack and name not in env:
                stack[-1][2] = False

    for d in dims.values():
        if d.kind == "derived":
            visit(d.name)
    return env, problems


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


def shape_key(shape: Sequence[Expr], envs: Sequence[Mapping[str, int]]) -> tuple[tuple[int, ...], ...] | None:
    """The shape's values at every probe environment, or None when a name is unbound."""
    out = []
    for env in envs:
        try:
            out.append(tuple(e.evaluate(env) for e in shape))
        except (KeyError, ArithmeticError):
            return None
    return tuple(out)


class ShapeKeys:
    """:func:`shape_key` at one fixed list of environments, memoized per shape.

    A shape is keyed by the identities of its expressions: equal expression texts share one
    :class:`~audit.dims.Expr` (``parse_expr`` memoizes them), so the many equal shapes of a large contract
    set are evaluated once. The first shape of each key is kept, so those expressions stay alive and their
    ids cannot be reused while the memo lives.
    """

    def __init__(self, envs: Sequence[Mapping[str, int]]):
        self.envs = envs
        self._memo: dict[tuple[int, ...], tuple[object, tuple[tuple[int, ...], ...] | None]] = {}

    def __call__(self, shape: Sequence[Expr]) -> tuple[tuple[int, ...], ...] | None:
        ids = tuple(map(id, shape))
        hit = self._memo.get(ids)
        if hit is not None:
            return hit[1]
        key = shape_key(shape, self.envs)
        self._memo[ids] = (shape, key)
        return key


def value_at(expr: Expr, env: Mapping[str, int], slots: Mapping[str, int] | None = None) -> int | None:
    """``expr`` evaluated in ``env``, or None when it cannot be."""
    try:
        return expr.evaluate(env, slots)
    except (KeyError, ArithmeticError):
        return None


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


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
    for env in envs:
        e = dict(env)
        source: dict[str, str] = {}
        for name, expr in explicit.items():
            try:
                e[name] = expr.evaluate(env)
                source[name] = f'the launch\'s dims ({name} = "{expr.text}")'
            except (KeyError, ArithmeticError):
                pass
        for pname, pshape, bshape in pairs:
            if len(pshape) != len(bshape):
                continue
            for i, (pe, be) in enumerate(zip(pshape, bshape)):
                tree = pe.tree
                if not (isinstance(tree, tuple) and tree[0] == "name" and tree[1] in local):
                    continue
                name = tree[1]
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
                    source[name] = f'parameter "{pname}" (dim {i}, "{be.text}")'
        out_envs.append(e)
    return out_envs, problems
