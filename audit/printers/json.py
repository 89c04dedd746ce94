"""JSON: every finding with its rule, severity, file, line, key and subject; rules not run; a summary."""

from __future__ import annotations

import json

from ..findings import CheckResult


def render_json(result: CheckResult, tool: str = "wireup check") -> str:
    doc = {
        "tool": tool,
        "version": 1,
        "findings": [
            {
                "rule": f.rule,
                "severity": f.severity.value,
                "category": f.category,
                "message": f.message,
                "file": f.file,
                "line": f.line,
                "key": f.key,
                "subject": f.subject,
            }
            for f in result.findings
        ],
        "not_run": [{"rule": n.rule, "reason": n.reason} for n in result.not_run],
        **({"suppressed": [
            {"rule": f.rule, "severity": f.severity.value, "message": f.message, "file": f.file, "line": f.line,
             "subject": f.subject, "reason": reason}
            for f, reason in result.suppressed
        ]} if result.suppressed else {}),  # fmt: skip
        "summary": {
            "errors": len(result.errors),
            "findings": len(result.findings),
            "rules_ran": len(result.ran),
            "rules_not_run": len(result.not_run),
            "exit_code": result.exit_code,
        },
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"
