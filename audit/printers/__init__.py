"""Printers: one per output format, each rendering the same :class:`~audit.findings.CheckResult`.

>>> print(render(result, "text"))      # doctest: +SKIP
contracts/schedules.toml:87: SHAPE_MISMATCH Kernel "aux_trunk_backward" ...
"""

from __future__ import annotations

from ..findings import CheckResult

FORMATS = ("text", "json", "github", "junit", "sarif")


def render(result: CheckResult, fmt: str, tool: str = "wireup check") -> str:
    """``result`` in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "text":
        from .text import render_text as fn
    elif fmt == "json":
        from .json import render_json as fn
    elif fmt == "github":
        from .github import render_github as fn
    elif fmt == "junit":
        from .junit import render_junit as fn
    elif fmt == "sarif":
        from .sarif import render_sarif as fn
    else:
        raise ValueError(fmt)
    return fn(result, tool)
