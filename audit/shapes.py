"""Dim values and shape comparison across a contract set.

Fixed dims have values; derived dims are evaluated from them; runtime dims (``B``) stay symbolic and are
sampled at probe points (see :func:`audit.cases.probe_envs`, which builds every dim environment). A shape is compared by its values at every
probe environment, so ``[B, SH2 + 6]`` equals ``[B, 262]`` when ``SH2 = 256`` and differs from ``[B, 256]``.

>>> envs = probe_envs(cs)                          # doctest: +SKIP
>>> shape_key(kernel.param("h_s2").shape, envs)    # doctest: +SKIP
((1, 256), (65536, 256), ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .cases import bind_local_dims, fill_derived, probe_envs  # dim environments live in audit.cases
from .dims import Expr, resolve_fixed

if TYPE_CHECKING:
    from .model import ContractSet

__all__ = ["ShapeKeys", "bind_local_dims", "fill_derived", "numel", "probe_envs", "resolve_fixed_dims", "shape_key", "value_at"]


def resolve_fixed_dims(cs: ContractSet) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Values of fixed dims and of derived dims that depend only on fixed ones (see
    :func:`audit.dims.resolve_fixed`, which the model uses too: this module imports the model, so the
    work lives below both)."""
    return resolve_fixed(cs.dim_map)


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
