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

from .api import check as check
from .errors import ContractError as ContractError, ExitCode as ExitCode, UserError as UserError
from .load import load_contracts as load_contracts
