"""Plain text: ``path:line: RULE message``, one finding per line, then a summary."""

from __future__ import annotations

import re

from ..findings import CheckResult, Severity

_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _line(text: str) -> str:
    """``text`` on one line: a control character from a contract name (a newline, say) becomes ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_text(result: CheckResult, tool: str = "wireup check") -> str:
    lines = []
    for f in result.findings:
        tag = f.rule if f.severity is Severity.ERROR else f"{f.rule} ({f.severity.value})"
        lines.append(_line(f"{f.location}: {tag} {f.message}"))
    for nr in result.not_run:
        lines.append(_line(f"not run: {nr.rule}: {nr.reason}"))
    errors = len(result.errors)
    if result.load_failed:
        lines.append(f"{tool}: {errors} load error(s); nothing was checked.")
        return "\n".join(lines) + "\n"
    warnings = sum(1 for f in result.findings if f.severity is Severity.WARNING)
    summary = f"{tool}: {errors} error(s), {warnings} warning(s); {len(result.ran)} rule(s) ran"
    if result.not_run:
        summary += f", {len(result.not_run)} not run"
    if result.suppressed:
        summary += f"; {len(result.suppressed)} finding(s) suppressed by [[suppress]] entries"
    lines.append(summary + ".")
    return "\n".join(lines) + "\n"
