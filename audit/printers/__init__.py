"""Printers: one per output format, each rendering the same :class:`~audit.findings.CheckResult`.

What a printer renders goes to stdout or, with ``--output``, through :func:`audit.output.write_output`.
The exit code beside it is the CLI's (:class:`~audit.errors.ExitCode`): 0 clean, 1 findings, 2 a usage
or environment error, 3 an internal error (a bug in wireup, one line on stderr, never findings; the
traceback with ``WIREUP_DEBUG=1`` or ``--debug``). A crash therefore never leaves a half-written output
file that reads as a clean run.

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
