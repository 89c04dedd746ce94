"""The audit report: every fact wireup knows about the chain, rendered to Markdown (and HTML).

:func:`collect_report` gathers the facts (contracts, ``wireup check`` findings, the build, evidence
records, mutation results, the launcher scan, git history) into a :class:`Report`;
:func:`render_report` renders it through Jinja templates; :func:`report_diff` compares a committed copy
with a fresh rendering (``wireup report --check``). See ``docs/report.md``.

>>> cfg, cs = load_project(Path("."))                                     # doctest: +SKIP
>>> text = render_report(collect_report(cfg, cs, ReportOptions()), "md")  # doctest: +SKIP
"""

from .collect import Report as Report, ReportOptions as ReportOptions, collect_report as collect_report
from .history import GitHistory as GitHistory
from .prototype import c_prototype as c_prototype
from .render import render_report as render_report, report_diff as report_diff
