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

    >>> md("a | b <script> -> c [x](javascript:y)")
    'a \\\\| b &lt;script> -> c [x]\\\\(javascript:y)'
    """
    s = " ".join(str(text if text is not None else "").split())
    s = re.sub(r"&(?=#?\w+;)", "&amp;", s).replace("<", "&lt;")
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("*", "\\*")
    # no link or image from contract text: "[x](javascript:...)", "![x](...)" and "[x][ref]" lose the
    # bracket that joins text and target, and a leading "[x]:" cannot define a reference
    s = s.replace("](", "]\\(").replace("][", "]\\[")
    return "\\" + s if s.startswith("[") else s


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


#: Most seconds a report template may take to render; a project's template that loops longer is refused.
RENDER_SECONDS = 60
#: Longest string or list a template may build with ``*`` (and largest power with ``**``).
MAX_PRODUCT = 10_000_000
#: Largest template file read.
TEMPLATE_LIMIT = 4 << 20


def _environment(dirs: list[Path]):
    """A sandboxed Jinja environment over ``dirs``: a project's template runs no Python (no attribute
    starting with "_", no unsafe callables), builds no huge string or number, and reads only regular
    files of bounded size inside its own folder (a link out of it, a FIFO or ``..`` is not found)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    import os

    from ..untrusted import inside, read_regular, refusal

    class BoundedLoader(jinja2.BaseLoader):
        def get_source(self, environment, template):
            parts = template.split("/")
            if any(p in ("", ".", "..") for p in parts) or "\\" in template or "\x00" in template:
                raise jinja2.TemplateNotFound(template)
            for d in dirs:
                path = d.joinpath(*parts)
                if not os.path.lexists(path):
                    continue
                if not path.is_file() or not inside(path, d):
                    why = refusal(path, d, TEMPLATE_LIMIT) or "is not a regular file"
                    raise UsageError(f'template "{path}" {why}; templates are regular files inside their folder.')
                try:
                    text = read_regular(path, TEMPLATE_LIMIT).decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    raise jinja2.TemplateNotFound(template) from None
                return text, str(path), lambda: False
            raise jinja2.TemplateNotFound(template)

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**", "+"])

        def call_binop(self, context, operator, left, right):
            if operator == "**":
                if isinstance(right, (int, float)) and abs(right) > 64:
                    raise jinja2.sandbox.SecurityError(f"the power {right} is larger than templates may compute")
                return left**right
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_PRODUCT:
                        raise jinja2.sandbox.SecurityError(f"a sequence of {len(seq) * n} items is larger than templates may build")
                return left * right
            if isinstance(left, (str, list, tuple)) and isinstance(right, type(left)) and len(left) + len(right) > MAX_PRODUCT:
                raise jinja2.sandbox.SecurityError("a string or list is larger than templates may build")
            return left + right

    return BoundedSandbox(
        loader=BoundedLoader(),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def render_report(report: Report, fmt: str = "md", templates: str | Path | None = None, mermaid_js: str | None = None) -> str:
    """The report as text in ``fmt`` ("md" or "html").

    Templates render in a sandbox (a project's template folder is code a pull request controls); an
    error a template raises while rendering, or a render past :data:`RENDER_SECONDS`, is a
    :class:`~audit.errors.UsageError` naming the template and line.
    """
    import jinja2

    if fmt not in FORMATS:
        raise UsageError(f'unknown report format "{fmt}"; valid formats are "md" and "html".')
    dirs = template_dirs(templates)
    env = _environment(dirs)
    env.filters.update(md=md, code=code, fence=fence, anchor=anchor, icon=lambda s: ICONS.get(s, ""), bytes=format_bytes)
    env.filters.update(VALUE_FILTERS)
    try:
        template = env.get_template(TEMPLATES[fmt])
    except jinja2.TemplateNotFound as exc:
        raise UsageError(f'template "{exc.name}" was not found in {", ".join(str(d) for d in dirs)}.') from None
    except jinja2.TemplateSyntaxError as exc:
        raise UsageError(f"{exc.filename}:{exc.lineno}: template syntax error: {exc.message}.") from None
    try:
        with _time_limit(RENDER_SECONDS):
            text = template.render(r=report, mermaid_js=mermaid_js, icons=ICONS)
    except Exception as exc:  # noqa: BLE001 - any error raised by a project's template is the project's
        where = _template_line(exc, dirs[:-1])
        if where is None:
            raise  # an error in a shipped template is a bug in wireup: let it show
        if isinstance(exc, jinja2.TemplateSyntaxError):
            raise UsageError(f"{where}: template syntax error: {exc.message}.") from None
        raise UsageError(f"{where}: the template failed while rendering ({type(exc).__name__}: {_one_line(exc)}).") from None
    return tidy(text, markdown=(fmt == "md"))


class RenderTimeout(Exception):
    """A template took longer than :data:`RENDER_SECONDS` to render."""

    def __str__(self) -> str:
        return f"it ran longer than {RENDER_SECONDS} s"


def _time_limit(seconds: int):
    """A context that raises :class:`RenderTimeout` after ``seconds`` (main thread only; a no-op elsewhere)."""
    import contextlib
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def limit():
        def expire(signum, frame):
            raise RenderTimeout()

        old = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    return limit()


def _template_line(exc: BaseException, user_dirs: list[Path]) -> str | None:
    """``file:line`` of the deepest frame of a project's template in ``exc``'s traceback, or None."""
    if isinstance(exc, jinja2_syntax_error()) and exc.filename:
        files = [(exc.filename, exc.lineno)]
    else:
        files = []
        tb = exc.__traceback__
        while tb is not None:
            files.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
    for filename, line in reversed(files):
        path = Path(filename)
        for d in user_dirs:
            try:
                rel = path.resolve().relative_to(d.resolve())
            except (ValueError, OSError, RuntimeError):
                continue
            return f"{(d / rel).as_posix()}:{line}"
    if isinstance(exc, RenderTimeout) and user_dirs:
        return user_dirs[0].as_posix()
    return None


def jinja2_syntax_error():
    import jinja2

    return jinja2.TemplateSyntaxError


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


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
