"""pytest plugin: the contract checks of ``wireup check`` as test items, one per rule per subject.

Installed with wireup (entry point ``pytest11``) but inert until enabled, so installing wireup never
changes another project's test run. Enable it with ``pytest --wireup`` or in the ini file::

    [tool.pytest.ini_options]
    wireup = true
    wireup_select = ["schema", "wiring", "isv"]   # optional: rules or categories (default: the config's)
    wireup_ignore = ["EVIDENCE_MISSING"]          # optional
    wireup_require_evidence = true                # optional: as wireup check --require-evidence

Then every rule that ran becomes items named ``wireup::RULE[subject]`` (subject: a kernel, schedule,
slot or invariant), failing with the finding messages; rules that could not run here (no nvcc, no
launcher globs) are skipped with their reason. Warnings pass unless ``--wireup-strict``; the evidence
items decide fresh or stale exactly as ``wireup check`` and ``wireup audit`` do
(:func:`audit.evidence.freshness`), and ``--wireup-require-evidence`` fails stale or missing evidence. The items carry
the ``wireup`` marker (``-m "not wireup"`` leaves them out); the plugin also registers the ``gpu`` marker
for GPU tests.

    $ pytest --wireup -k SHAPE_MISMATCH
    wireup::SHAPE_MISMATCH[aux_trunk_backward] FAILED
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

MARKERS = (
    "wireup: a contract check collected by the wireup plugin",
    "gpu: needs an NVIDIA GPU (wireup verification and runtime tests)",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wireup", "wireup contract checks")
    group.addoption("--wireup", action="store_true", default=False, help="collect wireup contract checks as test items")
    group.addoption("--wireup-root", metavar="DIR", default=None, help="project root of the contracts (default: the pytest rootdir)")
    group.addoption("--wireup-strict", action="store_true", default=False, help="warnings fail the items too")
    group.addoption(
        "--wireup-require-evidence", action="store_true", default=False,
        help="stale or missing GPU evidence fails its items (as wireup check --require-evidence)",
    )  # fmt: skip
    parser.addini("wireup", type="bool", default=False, help="collect wireup contract checks as test items")
    parser.addini("wireup_select", type="args", default=[], help="wireup rules or categories to run (default: the project's configuration)")
    parser.addini("wireup_ignore", type="args", default=[], help="wireup rules or categories to skip")
    parser.addini("wireup_require_evidence", type="bool", default=False, help="stale or missing GPU evidence fails its items")


def enabled(config: pytest.Config) -> bool:
    """Whether the plugin is switched on (``--wireup`` or ``wireup = true``)."""
    return bool(config.getoption("wireup", False) or config.getini("wireup"))


def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.pluginmanager.register(_Collection(), "wireup-collection")


class _Collection:
    """Registered only when enabled: appends the check items to the collected tests."""

    @pytest.hookimpl(tryfirst=True)  # before -k / -m deselection, so they apply to our items too
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
        collector = WireupChecks.from_parent(session, name="wireup", nodeid="wireup")
        items.extend(collector.collect())


class WireupChecks(pytest.Collector):
    """Runs ``wireup check`` once and yields one item per (rule, subject)."""

    def collect(self) -> list[pytest.Item]:
        from .api import check
        from .errors import ContractError, UserError

        config = self.config
        root = Path(config.getoption("wireup_root") or config.rootpath)
        strict = bool(config.getoption("wireup_strict"))
        options = {}
        if config.getoption("wireup_require_evidence") or config.getini("wireup_require_evidence"):
            from .rules.evidence import REQUIRE_EVIDENCE_ESCALATES

            options = {"require_evidence": True, "escalate": REQUIRE_EVIDENCE_ESCALATES}
        try:
            result = check(root, select=config.getini("wireup_select"), ignore=config.getini("wireup_ignore"), options=options)
        except ContractError as exc:
            return [WireupItem.from_parent(self, name="contracts", problems=[p.render() for p in exc.problems])]
        except UserError as exc:
            return [WireupItem.from_parent(self, name="setup", problems=[str(exc)])]
        items: list[pytest.Item] = []
        by_rule: dict[str, dict[str, list[Any]]] = {}
        for f in result.findings:
            by_rule.setdefault(f.rule, {}).setdefault(f.subject or "", []).append(f)
        for rule in result.ran:
            subjects = list(dict.fromkeys([*result.subjects.get(rule, []), *by_rule.get(rule, {})]))
            for subject in subjects or [""]:
                name = f"{rule}[{subject}]" if subject else rule
                findings = by_rule.get(rule, {}).get(subject, [])
                items.append(WireupItem.from_parent(self, name=name, findings=findings, strict=strict, root=root))
        for nr in result.not_run:
            items.append(WireupItem.from_parent(self, name=nr.rule, skip_reason=nr.reason))
        for item in items:
            item.add_marker(pytest.mark.wireup)
        return items


class WireupCheckFailed(Exception):
    """Raised by an item whose rule found problems; its message lists them, one per line."""


class WireupItem(pytest.Item):
    """One rule applied to one subject; fails with the finding messages."""

    def __init__(self, *, findings: list[Any] | None = None, strict: bool = False, root: Path | None = None,
                 skip_reason: str | None = None, problems: list[str] | None = None, **kw: Any):  # fmt: skip
        super().__init__(**kw)
        self.findings = findings or []
        self.strict = strict
        self.root = root
        self.skip_reason = skip_reason
        self.problems = problems

    def runtest(self) -> None:
        from .findings import Severity

        if self.skip_reason is not None:
            pytest.skip(f"not run here: {self.skip_reason}")
        if self.problems is not None:
            raise WireupCheckFailed("\n".join(self.problems))
        failing = [f for f in self.findings if f.severity is Severity.ERROR or (self.strict and f.severity is Severity.WARNING)]
        if failing:
            raise WireupCheckFailed("\n".join(f"{f.location}: {f.rule} {f.message}" for f in failing))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, WireupCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        first = self.findings[0] if self.findings else None
        if first is not None and first.file and self.root is not None:
            return self.root / first.file, (first.line or 1) - 1, self.name
        return Path(self.config.rootpath), None, f"wireup::{self.name}"
