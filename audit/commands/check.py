"""``wireup check``: prove the contracts compose; exit 0 clean, 1 error findings, 2 unreadable input."""

from __future__ import annotations

import argparse

from ._common import (
    add_output_arguments,
    add_selection_arguments,
    emit,
    root_of,
    split_list,
)

NAME = "check"
HELP = "check the contracts and kernels statically (shapes, wiring, ISV, invariants, ABI)"
FAST_EXIT = True  # its output is written when run() returns: the process may end without a teardown


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_output_arguments(p)
    add_selection_arguments(p)
    p.add_argument("--require-evidence", action="store_true", help="fail for every kernel whose current source has no passing GPU verification record")
    p.add_argument("--jobs", "-j", type=int, metavar="N", help="processes that run the rules: 1 runs them in one, 2 or more splits them over a forked child (default: 2 for a project of 3,000 schedule steps or more when a second CPU is idle; WIREUP_JOBS sets the default); the output is the same")
    p.add_argument("--changed-since", metavar="REV", help="check only contracts and kernels changed since git revision REV and everything downstream of them")


def run(args: argparse.Namespace) -> int:
    from ..api import check
    from ..errors import ConfigError, ContractError, UsageError
    from ..findings import load_error_result
    from ..printers import render

    from ..rules import requested_jobs

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, found {args.jobs}.")
    jobs = requested_jobs(args.jobs)  # a bad WIREUP_JOBS is reported whether or not the rules run
    options = {"require_evidence": args.require_evidence, "changed_since": args.changed_since}
    if args.require_evidence:
        options["escalate"] = ("EVIDENCE_STALE", "EVIDENCE_MISSING")
    try:
        result = check(root_of(args), split_list(args.select), split_list(args.ignore), options=options, jobs=jobs)
    except (ContractError, ConfigError) as exc:
        # CI reads the chosen format, not stderr: the load errors become LOAD_ERROR findings there too
        # (text on stdout would repeat stderr, so it is written only to --output); exit 2 stays
        if args.output or args.format != "text":
            emit(render(load_error_result(exc.problems), args.format), args.output)
        raise
    if args.changed_since:
        from ..changes import limit_to_changed

        result = limit_to_changed(result, root_of(args), args.changed_since)
    emit(render(result, args.format), args.output)
    return result.exit_code
