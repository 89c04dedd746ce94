"""Gradient-check cases: the float64 side of a backward kernel's gradient check.

A reference module exposes, for each backward kernel, a function ``case(rng, dims) -> GradCheckCase``
named in the kernel's contract (``gradcheck = "module:function"``). The case holds

* ``inputs``: every input the backward kernel reads (tensors as float64 / int arrays, scalars as Python
  numbers), built consistently from the primals by running the float64 forward, so saved tensors match;
* ``primals``: the float64 arrays the loss is differentiated with respect to;
* ``loss``: the float64 forward + loss composition as a function of the primals;
* ``grads``: for each kernel output, the primal it is the gradient of and how the output is reduced
  before comparing (``"none"``: same shape as the primal; ``"sum0"``: per-sample partials summed over
  the batch axis), and the factor the kernel applies (e.g. a SAXPY weight).

The runner compares the kernel's outputs with central finite differences of ``loss``; the CPU tests
compare the float64 reference backward with the same differences. Example::

    case = aux_trade_outcome_backward_gradcheck(np.random.default_rng(0), {"B": 8, "SH2": 16, ...})
    g = central_difference(case.loss, case.primals, "W1", direction)

This module needs numpy only; it never imports GPU packages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GradTarget:
    """Which primal a kernel output is the gradient of, and how to reduce the output first."""

    primal: str
    reduce: str = "none"  # "none" or "sum0"
    scale: float = 1.0

    def reduced(self, output: np.ndarray) -> np.ndarray:
        out = np.asarray(output, dtype=np.float64)
        if self.reduce == "sum0":
            out = out.sum(axis=0)
        elif self.reduce != "none":
            raise ValueError(f'GradTarget.reduce must be "none" or "sum0", got "{self.reduce}"')
        return out / self.scale


@dataclass
class GradCheckCase:
    """Inputs of a backward kernel plus the float64 loss its outputs are gradients of."""

    inputs: dict[str, Any]
    primals: dict[str, np.ndarray]
    loss: Callable[[Mapping[str, np.ndarray]], float]
    grads: dict[str, GradTarget] = field(default_factory=dict)


def central_difference(
    loss: Callable[[Mapping[str, np.ndarray]], float],
    primals: Mapping[str, np.ndarray],
    name: str,
    direction: np.ndarray,
    eps: float = 1e-6,
) -> float:
    """Directional derivative of ``loss`` along ``direction`` in primal ``name`` (float64, central)."""
    base = {k: np.asarray(v, dtype=np.float64) for k, v in primals.items()}
    plus = dict(base)
    minus = dict(base)
    plus[name] = base[name] + eps * direction
    minus[name] = base[name] - eps * direction
    return (float(loss(plus)) - float(loss(minus))) / (2.0 * eps)


def random_directions(rng: np.random.Generator, shape: tuple[int, ...], count: int) -> list[np.ndarray]:
    """Unit-norm random directions; large tensors are checked along these instead of per element."""
    out = []
    for _ in range(count):
        d = rng.standard_normal(shape)
        flat = d.reshape(-1)  # numpy's own sum, not BLAS: the same direction whatever BLAS threads there are
        out.append(d / np.sqrt(np.einsum("i,i->", flat, flat)))
    return out
