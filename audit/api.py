"""The library face of ``wireup check``: load, gather facts lazily, run the selected rules.

>>> result = check(Path("."), select=["wiring"])   # doctest: +SKIP
>>> [f.rule for f in result.findings]              # doctest: +SKIP
[]

:func:`run_check` returns the same findings together with the facts the run gathered (the build, the
evidence freshness, the launcher scan): the report is a view over one such run.

>>> run = run_check(Path("."))                     # doctest: +SKIP
>>> run.fact("evidence")["strided_gather"].status  # doctest: +SKIP
'verified'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Config, load_config
from .errors import UsageError
from .findings import CheckResult, NotRun
from .load import ContractTexts, load_contracts
from .model import ContractSet
from .rules import CheckContext, RuleNotRun, run_rules, select_rules

FactProvider = Callable[[CheckContext], Any]


def fact_providers() -> dict[str, FactProvider]:
    """Facts rules may ask for, each computed on first use (so unselected rules cost nothing)."""
    from .compile.facts import build_facts
    from .evidence import evidence_facts
    from .launchers import launcher_facts

    return {"build": build_facts, "evidence": evidence_facts, "launchers": launcher_facts, "fingerprint": fingerprint_facts}


def fingerprint_facts(ctx: CheckContext) -> str:
    """The ISV layout's fingerprint, computed once for FINGERPRINT_PIN and the report."""
    if ctx.cs.isv is None:
        raise RuleNotRun("the contracts declare no ISV layout")
    from .layout.fingerprint import fingerprint

    return fingerprint(ctx.cs.isv)


def load_project(root: Path | None = None, config: Config | None = None) -> tuple[Config, ContractSet]:
    """Configuration and contracts of the project at ``root``."""
    cfg = config or load_config(root)
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    return cfg, cs


@dataclass
class CheckRun:
    """One run of ``wireup check``: its findings and the context whose facts its rules gathered.

    A fact no selected rule asked for is gathered on first request by the same provider, once, so every
    reader of the run (the report, ``wireup audit``) sees the facts the findings were computed from.
    """

    config: Config
    contracts: ContractSet
    result: CheckResult
    context: CheckContext

    def fact(self, name: str) -> Any:
        """The fact ``name`` ("build", "evidence", "launchers"), or a :class:`NotRun` saying why there is none."""
        try:
            return self.context.fact(name)
        except RuleNotRun as exc:
            return NotRun("", str(exc))


def run_check(
    root: Path | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    options: dict[str, Any] | None = None,
    contracts: ContractSet | None = None,
    read: ContractTexts | None = None,
    loaded: Callable[[ContractSet], None] | None = None,
    jobs: int | None = 1,
) -> CheckRun:
    """Run ``wireup check`` on the project at ``root``; its findings and gathered facts.

    Contract files whose text is in the parsed-file cache (:mod:`audit.toml_cache`) are not parsed again;
    ``read`` is the contract files where the caller has read them already. ``loaded`` is called with the
    contract set once it is loaded, before the rules run or, where a forked child runs part of them, in
    this process while it does. ``jobs``: how many processes run the rules (1:
    this one; None: chosen by the project's size, ``WIREUP_JOBS`` or ``--jobs``; see
    :mod:`audit.rules._parallel`); the result is the same."""
    cfg = config or load_config(root)
    if contracts is None:
        from .check_cache import cache_folder

        folder = cache_folder(cfg)
        cs = load_contracts(cfg.contracts_dir, cfg.root, cache=folder / "parsed" if folder else None, read=read)
    else:
        cs = contracts
    rules = select_rules(tuple(select) or cfg.select, tuple(ignore) + cfg.ignore)
    opts = dict(options or {})
    ctx = CheckContext(
        cs, cfg, options=opts, escalate=frozenset(opts.get("escalate", ())), providers=fact_providers(),
        sources=read.sources if read is not None else {},
    )
    # ``loaded`` goes first, or alongside the rules where a child runs part of them
    alongside = (lambda: loaded(cs)) if loaded is not None and contracts is None else None
    return CheckRun(cfg, cs, run_rules(ctx, rules, jobs, alongside), ctx)


def check(
    root: Path | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    options: dict[str, Any] | None = None,
    contracts: ContractSet | None = None,
    jobs: int | None = None,
) -> CheckResult:
    """Run ``wireup check`` on the project at ``root`` and return its findings.

    ``jobs``: how many processes run the rules (1: this one; None: two on a large project where fork
    exists and two CPUs are usable, unless ``WIREUP_JOBS`` says otherwise); the findings are the same.

    Where only contract-only rules are selected, the result is reused from the check cache while nothing
    it depends on changed (:mod:`audit.check_cache`); it is the result a full run gives."""
    cfg = config or load_config(root)
    store = None
    if contracts is None:
        from .check_cache import CheckCache

        try:
            rules = select_rules(tuple(select) or cfg.select, tuple(ignore) + cfg.ignore)
        except UsageError:
            rules = []  # reported by run_check, after a load error as ever
        store = CheckCache.open(cfg, rules, dict(options or {}))
        if store is not None:
            hit = store.lookup()
            if hit is not None:
                return hit
    # the check cache digests the parsed values once the model is built, and lets them go before the rules run
    run = run_check(root, select, ignore, cfg, options, contracts, read=store.read if store else None, loaded=store.digest if store else None, jobs=jobs)
    if store is not None:
        store.save(run)
    return run.result
