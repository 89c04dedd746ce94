"""``wireup report``: render the audit report, or (``--check``) tell whether the committed one is current.

    wireup report                         # writes reports/dqn-wire-up-audit.md (cfg.report)
    wireup report --format html -o reports/audit.html
    wireup report --check                 # exit 1 and a short diff when the committed report is stale
    wireup report --base origin/main      # adds the ISV layout diff against origin/main

Exit codes: 0 written / current, 1 out of date (``--check``), 2 usage or environment problems.
``--check`` never imports or runs code from the repository: it reads contracts, kernels, evidence records
and git history, and builds with nvcc where the report shows build facts.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ExitCode, UsageError
from ._common import root_of

NAME = "report"
HELP = "render the audit report (Markdown or HTML); --check fails when the committed one is out of date"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("md", "html"), default=None, help="md (default) or html; by default taken from --output's extension")
    p.add_argument("--output", "-o", metavar="FILE", help="where to write it (default: the report path in the configuration, reports/dqn-wire-up-audit.md); '-' for stdout")
    p.add_argument("--check", action="store_true", help="do not write: exit 1 with a short diff when FILE differs from what would be rendered")
    p.add_argument("--base", metavar="REV", help="add the ISV layout diff against git revision REV")
    p.add_argument("--templates", metavar="DIR", help="folder of templates overriding the shipped ones (report.md.j2, report.html.j2)")
    p.add_argument("--at", action="append", default=[], metavar="DIM=VALUE", help="value of a runtime dim for the launch geometry (default: B=4096 clamped to its range); repeatable")
    p.add_argument("--no-history", action="store_true", help="leave out git history (render and --check must agree on this)")
    p.add_argument("--mermaid-js", metavar="URL", help="HTML only: load mermaid from URL to draw the charts (default: none, the page stays self-contained and shows the chart source)")


def parse_at(values: list[str]) -> tuple[tuple[str, int], ...]:
    """``["B=4096"]`` -> ``(("B", 4096),)``; anything else is a usage error."""
    out = []
    for v in values:
        name, sep, num = v.partition("=")
        try:
            value = int(num)
        except ValueError:
            value = 0
        if not sep or not name.strip() or value < 1:
            raise UsageError(f'--at "{v}": expected DIM=VALUE with a positive integer value, e.g. --at B=4096.')
        out.append((name.strip(), value))
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..api import load_project, run_check
    from ..report import ReportOptions, collect_report, render_report, report_diff

    cfg, cs = load_project(root_of(args))
    output = args.output or cfg.report
    fmt = args.format or ("html" if output.endswith((".html", ".htm")) else "md")
    options = ReportOptions(base=args.base, at=parse_at(args.at), history=not args.no_history)
    report = collect_report(run_check(cfg.root, config=cfg, contracts=cs), options)  # one check run, viewed
    text = render_report(report, fmt, args.templates or (str(cfg.path(cfg.templates)) if cfg.templates else None), args.mermaid_js)
    if output == "-":
        if args.check:
            raise UsageError("--check compares against a file; give --output FILE (or none for the configured report).")
        sys.stdout.write(text)
        return ExitCode.CLEAN
    path = cfg.path(output)
    shown = _shown(path, cfg.root)
    if args.check:
        if path.is_dir():
            raise UsageError(f'--check compares against a file, but "{shown}" is a folder; give the path of the report.')
        if not path.is_file():
            print(f"wireup report --check: {shown} does not exist; run `wireup report` and commit it.", file=sys.stderr)
            return ExitCode.FINDINGS
        committed = path.read_bytes().decode("utf-8", errors="replace")
        diff = report_diff(committed, text, shown)
        if not diff:
            print(f"wireup report --check: {shown} is up to date.", file=sys.stderr)
            return ExitCode.CLEAN
        print("\n".join(diff))
        print(f"wireup report --check: {shown} is out of date; run `wireup report` and commit it.", file=sys.stderr)
        return ExitCode.FINDINGS
    from ..output import write_output

    write_output(Path(path), text, explicit=args.output is not None, root=cfg.root, what='the configuration key "report"')
    print(f"wireup report: wrote {shown} ({report.verdict.level}: {report.verdict.headline}).", file=sys.stderr)
    return ExitCode.CLEAN


def _shown(path, root) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
