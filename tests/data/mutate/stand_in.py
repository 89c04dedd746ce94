"""Emulated stand-ins for mutants (``wireup mutate --stand-in stand_in:by_operator``): CPU tests of the
mutation pipeline's accounting without a compiler or a GPU.

``by_operator`` makes every mutant of the ``loop`` and ``accum`` operators behave exactly like the
original (survivors) and every other mutant write outputs off by a factor 1.5 (caught by VERIFY_REFERENCE).
"""

from __future__ import annotations

SURVIVING_OPERATORS = ("loop", "accum")


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


def by_operator(mutant):
    if mutant.operator in SURVIVING_OPERATORS:
        return {}
    return {mutant.kernel: _wrong}


def by_operator_in_workers(mutant):
    """``by_operator`` as plugins that load in worker processes (``wireup mutate --workers 3``, ``--cluster
    ray``): the same verdicts, from sharded runs."""
    if mutant.operator in SURVIVING_OPERATORS:
        return "stand_in:as_reference"
    return "stand_in:wrong_everywhere"


def as_reference(backend):
    """Every kernel computes its reference (the emulated default)."""


def wrong_everywhere(backend):
    for symbol in ("strided_gather", "trade_outcome_label"):
        backend.register(symbol, _wrong)
