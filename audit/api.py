"""The library face of ``wireup check``: load, gather facts lazily, run the selected rules.

>>> result = check(Path("."), select=["wiring"])   # doctest: +SKIP
>>> [f.rule for f in result.findings]              # doctest: +SKIP
[]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .config import Config, load_config
from .findings import CheckResult
from .load import load_contracts
from .model import ContractSet
from .rules import CheckContext, run_rules, select_rules

FactProvider = Callable[[CheckContext], Any]


def fact_providers() -> dict[str, FactProvider]:
    """Facts rules may ask for, each computed on first use (so unselected rules cost nothing)."""
    from .compile.facts import build_facts
    from .evidence import evidence_facts
    from .launchers import launcher_facts

    return {"build": build_facts, "evidence": evidence_facts, "launchers": launcher_facts}


def load_project(root: Path | None = None, config: Config | None = None) -> tuple[Config, ContractSet]:
    """Configuration and contracts of the project at ``root``."""
    cfg = config or load_config(root)
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    return cfg, cs


def check(
    root: Path | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    options: dict[str, Any] | None = None,
    contracts: ContractSet | None = None,
) -> CheckResult:
    """Run ``wireup check`` on the project at ``root`` and return its findings."""
    cfg = config or load_config(root)
    cs = contracts or load_contracts(cfg.contracts_dir, cfg.root)
    rules = select_rules(tuple(select) or cfg.select, tuple(ignore) + cfg.ignore)
    opts = dict(options or {})
    ctx = CheckContext(
        cs, cfg, options=opts, escalate=frozenset(opts.get("escalate", ())), providers=fact_providers()
    )
    return run_rules(ctx, rules)
