"""GitHub Actions workflow commands: ``::error file=...,line=...,title=RULE::message``."""

from __future__ import annotations

from ..findings import CheckResult, Severity

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def _data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(s: str) -> str:
    return _data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(result: CheckResult, tool: str = "wireup check") -> str:
    lines = []
    for f in result.findings:
        props = []
        if f.file:
            props.append(f"file={_prop(f.file)}")
        if f.line:
            props.append(f"line={f.line}")
        props.append(f"title={_prop(f.rule)}")
        lines.append(f"::{_LEVEL[f.severity]} {','.join(props)}::{_data(f.message)}")
    for nr in result.not_run:
        lines.append(f"::notice title={_prop(nr.rule + ' not run')}::{_data(nr.reason)}")
    return "\n".join(lines) + ("\n" if lines else "")
