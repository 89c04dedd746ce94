"""``wireup graph``: print the chain of each schedule as Mermaid or Graphviz DOT, or (``--steps``) which
steps of a chain of schedules wait for which."""

from __future__ import annotations

import argparse

from ..errors import ExitCode, UsageError
from ._common import emit, root_of

NAME = "graph"
HELP = "print the chain (per schedule) as a Mermaid or DOT diagram"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("mermaid", "dot"), default="mermaid")
    p.add_argument("--schedule", action="append", default=[], help="only this schedule (repeatable)")
    p.add_argument("--output", "-o", metavar="FILE")
    p.add_argument("--steps", action="store_true",
                   help="draw the steps of the --schedule list (run in that order) and which step waits for which, "
                        "from the declared buffer and ISV-slot accesses: steps with no path between them may run concurrently")


def run(args: argparse.Namespace) -> int:
    from ..api import load_project
    from ..draw import dot, mermaid_document, steps_diagram
    from ..graph import Wiring

    _, cs = load_project(root_of(args))
    names = args.schedule or [s.name for s in cs.schedules]
    valid = ", ".join(f'"{s}"' for s in cs.schedule_map)
    for n in names:
        if n not in cs.schedule_map:
            raise UsageError(f'--schedule "{n}" is not a schedule; the schedules are {valid}.')
    w = Wiring(cs)
    if args.steps:
        if not args.schedule:
            raise UsageError(f"--steps needs the schedules that run one after another, in order, as --schedule NAME (the schedules are {valid}).")
        emit(steps_diagram(cs, names, args.format, w), args.output)
        return ExitCode.CLEAN
    if args.format == "mermaid":
        emit(mermaid_document(cs, names, w), args.output)  # one diagram: a subgraph per schedule
        return ExitCode.CLEAN
    # a line break in a name would end the comment and inject a statement
    parts = [f"// schedule {' '.join(n.split())}\n" + dot(cs, n, w) for n in names]
    emit("\n".join(parts), args.output)
    return ExitCode.CLEAN
