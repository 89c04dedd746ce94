"""Render the audit report (Markdown or single-file HTML) from Jinja templates, and tell when the
committed copy is out of date.

Templates ship in ``audit/report/templates`` (``report.md.j2``, ``report.html.j2``). A project can
override any of them by pointing ``--templates`` or ``templates`` in ``[tool.wireup]`` at a folder: a
template found there wins, the shipped ones fill the gaps. HTML templates autoescape every value, so a
contract string such as a kernel named ``<script>`` renders as text; Markdown templates escape through
the ``md`` and ``code`` filters. Numbers and marks (errors, check-matrix cells) are formatted by the
filters of :mod:`audit.report.filters`, so every value reaches the page through a filter.

>>> text = render_report(report, "md")                       # doctest: +SKIP
>>> report_diff(Path("reports/dqn-wire-up-audit.md").read_text(), text)   # doctest: +SKIP
[]
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .collect import Report, anchor, format_bytes
from .filters import VALUE_FILTERS

FORMATS = ("md", "html")
TEMPLATES = {"md": "report.md.j2", "html": "report.html.j2"}
PACKAGE_TEMPLATES = Path(__file__).with_name("templates")
ICONS = {"ok": "✅", "warn": "⚠️", "bad": "❌", "none": "➖"}
#: Lines of unified diff ``--check`` prints before it stops.
DIFF_LINES = 60


def md(text: Any) -> str:
    """Contract text made safe for a Markdown table cell or paragraph (no HTML, no table breaks).

    ``<`` could open an HTML tag and ``|`` ends a table cell; ``*`` and backticks would start emphasis
    or code. ``>`` is left alone (harmless inside a line), so "117 -> 118" stays readable in a diff.

    >>> md("a | b <script> -> c")
    'a \\| b &lt;script> -> c'
    """
    s = " ".join(str(text if text is not None else "").split())
    s = re.sub(r"&(?=#?\w+;)", "&amp;", s).replace("<", "&lt;")
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("*", "\\*")
    return s


def code(text: Any) -> str:
    """An inline code span that survives backticks, pipes and angle brackets in ``text``.

    >>> code("ceil_div(B, 256)")
    '`ceil_div(B, 256)`'
    """
    s = " ".join(str(text if text is not None else "").split())
    if not s:
        return ""
    # GitHub treats "|" as a cell break even inside code spans in a table; "<" is literal in a span.
    s = s.replace("|", "\\|")
    ticks = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (ticks + 1)
    pad = " " if ticks else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def fence(text: str, lang: str = "") -> str:
    """A fenced code block longer than any run of backticks inside ``text``."""
    runs = max((len(m) for m in re.findall(r"`+", text)), default=0)
    f = "`" * max(3, runs + 1)
    return f"{f}{lang}\n{text.rstrip(chr(10))}\n{f}"


def template_dirs(user: str | Path | None) -> list[Path]:
    """Where templates are looked up: the user's folder first (when given), then the shipped one."""
    dirs = []
    if user:
        p = Path(user)
        if not p.is_dir():
            raise UsageError(f'templates folder "{p}" does not exist; expected a folder holding report.md.j2 and/or report.html.j2.')
        dirs.append(p)
    dirs.append(PACKAGE_TEMPLATES)
    return dirs


def render_report(report: Report, fmt: str = "md", templates: str | Path | None = None, mermaid_js: str | None = None) -> str:
    """The report as text in ``fmt`` ("md" or "html")."""
    import jinja2

    if fmt not in FORMATS:
        raise UsageError(f'unknown report format "{fmt}"; valid formats are "md" and "html".')
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs(templates)]),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(md=md, code=code, fence=fence, anchor=anchor, icon=lambda s: ICONS.get(s, ""), bytes=format_bytes)
    env.filters.update(VALUE_FILTERS)
    try:
        template = env.get_template(TEMPLATES[fmt])
    except jinja2.TemplateNotFound as exc:
        raise UsageError(f'template "{exc.name}" was not found in {", ".join(str(d) for d in template_dirs(templates))}.') from None
    except jinja2.TemplateSyntaxError as exc:
        raise UsageError(f"{exc.filename}:{exc.lineno}: template syntax error: {exc.message}.") from None
    text = template.render(r=report, mermaid_js=mermaid_js, icons=ICONS)
    return tidy(text, markdown=(fmt == "md"))


def tidy(text: str, markdown: bool) -> str:
    """Trailing spaces dropped, (Markdown) runs of blank lines outside code fences folded to one, one final newline."""
    out: list[str] = []
    in_fence = None
    for line in text.splitlines():
        line = line.rstrip()
        m = re.match(r"^(`{3,})", line)
        if m and markdown:
            if in_fence is None:
                in_fence = m.group(1)
            elif line == in_fence:
                in_fence = None
        if markdown and not line and in_fence is None and out and not out[-1]:
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return "\n".join(out) + "\n"


def report_diff(committed: str, rendered: str, name: str = "report", limit: int = DIFF_LINES) -> list[str]:
    """A short unified diff from the committed report to the freshly rendered one ([] when equal)."""
    if committed == rendered:
        return []
    lines = list(
        difflib.unified_diff(
            committed.splitlines(), rendered.splitlines(), f"{name} (committed)", f"{name} (rendered now)", n=1, lineterm=""
        )
    )
    if not lines:  # only line endings or the final newline differ
        return [f"--- {name} (committed)", f"+++ {name} (rendered now)", "(whitespace or line endings differ)"]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more diff lines"]
    return lines
