"""``wireup graph``: print the chain of each schedule as Mermaid or Graphviz DOT."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ._common import emit, root_of

NAME = "graph"
HELP = "print the chain (per schedule) as a Mermaid or DOT diagram"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("mermaid", "dot"), default="mermaid")
    p.add_argument("--schedule", action="append", default=[], help="only this schedule (repeatable)")
    p.add_argument("--output", "-o", metavar="FILE")


def run(args: argparse.Namespace) -> int:
    from ..api import load_project
    from ..draw import dot, mermaid
    from ..graph import Wiring

    _, cs = load_project(root_of(args))
    names = args.schedule or [s.name for s in cs.schedules]
    for n in names:
        if n not in cs.schedule_map:
            valid = ", ".join(f'"{s}"' for s in cs.schedule_map)
            raise UsageError(f'--schedule "{n}" is not a schedule; the schedules are {valid}.')
    w = Wiring(cs)
    parts = []
    for n in names:
        body = mermaid(cs, n, w) if args.format == "mermaid" else dot(cs, n, w)
        shown = " ".join(n.split())  # a line break in a name would end the comment and inject a statement
        parts.append((f"%% schedule {shown}\n" if args.format == "mermaid" else f"// schedule {shown}\n") + body)
    emit("\n".join(parts), args.output)
    return 0
