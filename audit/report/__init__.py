"""The audit report: every fact wireup knows about the chain, rendered to Markdown (and HTML).

:func:`collect_report` turns the facts of one ``wireup check`` run (:func:`audit.api.run_check`: its
findings, the build, the evidence freshness, the launcher scan, the layout fingerprint), mutation
results and git history into a :class:`Report` (the view model, :mod:`.views`); :func:`render_report`
renders it through Jinja templates and the filters of :mod:`.filters`; :func:`report_diff` compares a
committed copy with a fresh rendering (``wireup report --check``). See ``docs/report.md``.

>>> run = run_check(Path("."))                                       # doctest: +SKIP
>>> text = render_report(collect_report(run, ReportOptions()), "md")  # doctest: +SKIP
"""

from .collect import Report as Report, ReportOptions as ReportOptions, collect_report as collect_report
from .history import GitHistory as GitHistory
from .prototype import c_prototype as c_prototype
from .render import render_report as render_report, report_diff as report_diff
