"""wireup: proves hand-written CUDA training kernels are wired up correctly.

Declarative contracts (TOML) for each kernel stage, a graph checker that proves the stages compose, a
GPU runner that executes the compiled kernels against float64 references, ISV layout fingerprints and
diffs, and a rendered audit report. The command line is ``wireup`` (or ``python -m audit``).

>>> from audit import load_contracts, check
>>> result = check(Path("."))                       # doctest: +SKIP
>>> result.exit_code
0
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from .errors import ContractError as ContractError, ExitCode as ExitCode, UserError as UserError

if TYPE_CHECKING:
    from .api import check as check
    from .load import load_contracts as load_contracts

_LAZY = {"check": "api", "load_contracts": "load"}  # imported on first use: `wireup --version` needs neither


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
