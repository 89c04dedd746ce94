"""``wireup audit``: the one command of the quick start -- check, build, verify (where a GPU is present),
render the report, and say in a few lines where the chain stands.

    $ wireup audit
    wireup audit: [1/4] check: 0 errors, 17 warnings (0.9 s)
    wireup audit: [2/4] build: 11 sources compiled or cached, nvcc 13.0.88, sm_90 (0.3 s)
    wireup audit: [3/4] verify: no GPU here: using recorded evidence (14 of 14 kernels verified on NVIDIA H200, newest 2026-12-02, 0 stale)
    wireup audit: [4/4] report: wrote reports/dqn-wire-up-audit.md (0.4 s)

Progress goes to stderr, the summary to stdout. Exit 1 when the check has errors, GPU evidence of the
current sources failed, or (``--check``) the committed report is out of date; 2 for environment and
usage problems; 3 when verify stopped on an internal error (a bug in wireup); else 0. Without a GPU (or with ``--no-verify``) nothing is run on a device: the audit
relies on the evidence records already committed and says how fresh they are.
"""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import ExitCode
from ._common import root_of

NAME = "audit"
HELP = "check, build, verify where a GPU is present, render the report and summarise (the quick-start command)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="compare the report with the committed one instead of writing it (exit 1 when out of date)")
    p.add_argument("--no-verify", action="store_true", help="do not run GPU verification even where a GPU is present")
    p.add_argument("--base", metavar="REV", help="add the ISV layout diff against git revision REV to the report")


def gpu_available() -> str | None:
    """None when GPU verification can run here, else the reason it cannot (no GPU package is imported)."""
    import importlib.util
    import shutil
    import subprocess

    if importlib.util.find_spec("audit.runtime") is None:
        return "the GPU runtime is not part of this installation"
    if importlib.util.find_spec("audit.commands.verify") is None:
        return "wireup verify is not part of this installation"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no GPU here"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU here (nvidia-smi failed)"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "no GPU here"
    return None


def evidence_summary(fresh: dict) -> tuple[str, int]:
    """``"14 of 14 kernels verified on NVIDIA H200, newest 2026-12-02, 0 stale"`` and the failed count.

    Where nothing was built here the records were matched on their sources, contracts, flags and
    architecture only, and the text says that the compiled code was not compared; where verified kernels'
    records predate input hashes (evidence format 3), it says how many were matched without comparing what
    their verification read outside their contracts."""
    from ..report.collect import device_name

    kernels = [f for f in fresh.values() if f.kind == "kernel"]
    verified = [f for f in kernels if f.status == "verified"]
    stale = sum(1 for f in kernels if f.status == "stale")
    missing = sum(1 for f in kernels if f.status == "missing")
    failed = sum(1 for f in fresh.values() if f.status == "failed")
    devices = sorted({device_name(f.record.device) for f in verified if f.record is not None} - {""})
    dates = [f.record.date[:10] for f in fresh.values() if f.record is not None and f.record.date]
    text = f"{len(verified)} of {len(kernels)} kernels verified"
    if devices:
        text += " on " + ", ".join(devices)
    if dates:
        text += f", newest {max(dates)}"
    text += f", {stale} stale"
    if missing:
        text += f", {missing} missing"
    if failed:
        text += f", {failed} failed"
    if kernels and not any(f.code_compared for f in kernels):
        text += "; compiled code not compared (not built here)"
    old = sum(1 for f in verified if not f.inputs_compared)
    if old:
        text += (f"; {old} of them verified before records named their inputs (dims, ISV layout, bound buffers, "
                 "writers' domains), not compared")
    return text, failed


def run(args: argparse.Namespace) -> int:
    from ..api import load_project, run_check
    from ..findings import NotRun, Severity
    from ..printers import render
    from ..report import ReportOptions, collect_report, render_report, report_diff

    total = 4

    def step(n: int, text: str, started: float | None = None) -> None:
        took = f" ({time.monotonic() - started:.1f} s)" if started is not None else ""
        print(f"wireup audit: [{n}/{total}] {text}{took}", file=sys.stderr, flush=True)

    cfg, cs = load_project(root_of(args))

    t = time.monotonic()
    run = run_check(cfg.root, config=cfg, contracts=cs)
    result = run.result
    warnings = sum(1 for f in result.findings if f.severity is Severity.WARNING)
    step(1, f"check: {len(result.errors)} error(s), {warnings} warning(s), {len(result.ran)} rule(s) ran", t)

    t = time.monotonic()
    build_line = _build(run)
    step(2, f"build: {build_line}", t)

    t = time.monotonic()
    reason = "skipped (--no-verify)" if args.no_verify else gpu_available()
    verify_rc = None
    if reason is None:
        from ..cli import main as cli_main

        step(3, "verify: running on the GPU ...")
        verify_rc = cli_main(["verify", "--root", str(cfg.root)])
        # new evidence records: check again, so that the findings and the report see them (the build is cached)
        run = run_check(cfg.root, config=cfg, contracts=cs)
        result = run.result
    fresh = run.fact("evidence")
    fresh = {} if isinstance(fresh, NotRun) else fresh
    summary, failed = evidence_summary(fresh)
    if verify_rc is None:
        step(3, f"verify: {reason}: using recorded evidence ({summary})")
    elif verify_rc == 3:  # an internal error of verify (its line is above): never a pass, never findings
        step(3, f"verify: stopped by an internal error (see above): using recorded evidence ({summary})", t)
    elif verify_rc == 2:
        step(3, f"verify: could not run here (see above): using recorded evidence ({summary})", t)
    else:
        step(3, f"verify: {summary}", t)

    t = time.monotonic()
    report = collect_report(run, ReportOptions(base=args.base))
    text = render_report(report, "md", str(cfg.path(cfg.templates)) if cfg.templates else None)
    path = cfg.path(cfg.report)
    stale_report = False
    if args.check:
        if not path.is_file():
            stale_report = True
            step(4, f"report: {cfg.report} does not exist", t)
        else:
            diff = report_diff(path.read_bytes().decode("utf-8", errors="replace"), text, cfg.report)
            stale_report = bool(diff)
            if diff:
                print("\n".join(diff))
            step(4, f"report: {cfg.report} is {'out of date' if stale_report else 'up to date'}", t)
    else:
        from ..output import write_output

        write_output(path, text, explicit=False, root=cfg.root, what='the configuration key "report"')
        step(4, f"report: wrote {cfg.report}", t)

    errors = [f for f in result.findings if f.severity is Severity.ERROR]
    if errors:
        sys.stdout.write(render(type(result)(findings=errors, ran=result.ran, not_run=[]), "text"))
    v = report.verdict
    print(f"wireup audit: {v.level}: {v.headline}.")
    for reason_line in v.reasons:
        print(f"  - {reason_line}")
    if stale_report:
        print(f"  - {cfg.report} is out of date: run `wireup report` and commit it")
    if verify_rc == 3:
        return ExitCode.INTERNAL
    return ExitCode.FINDINGS if (errors or failed or stale_report or verify_rc == 1) else ExitCode.CLEAN


def _build(run) -> str:
    """The build line of the check run's build fact (the check compiled or loaded it from the cache)."""
    from ..findings import NotRun

    if "build" not in run.context.providers:
        return "not available in this installation"
    result = run.fact("build")
    if isinstance(result, NotRun):
        return f"not built here ({result.reason})"
    failed = [sb.source for sb in result.sources.values() if not sb.ok]
    line = f"{len(result.sources)} source(s) compiled or cached, nvcc {result.nvcc_version}, {result.arch}"
    if failed:
        line += f"; {len(failed)} failed: " + ", ".join(failed)
    return line
