"""``wireup rules [ID ...]``: list every rule with its ID, category, default severity and purpose, or explain
the named rules with the example of their fixture pair."""

from __future__ import annotations

import argparse

from ..errors import ExitCode

NAME = "rules"
HELP = "list the rules wireup checks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="ID", help="explain these rules (with a bad/good example)")
    p.add_argument("--format", choices=("text", "markdown"), default="text")


def run(args: argparse.Namespace) -> int:
    from ..rules import iter_rules

    rules = list(iter_rules())
    if args.ids:
        from ..errors import UsageError
        from ..rules.examples import explain

        known = {r.id for r in rules}
        for rid in args.ids:
            if rid not in known:
                import difflib

                near = difflib.get_close_matches(rid.upper(), sorted(known), n=3)
                hint = f"; did you mean {', '.join(near)}?" if near else '; "wireup rules" lists them.'
                raise UsageError(f'Unknown rule "{rid}"{hint}')
        print("\n".join(explain(rid) for rid in args.ids), end="")
        return ExitCode.CLEAN
    if args.format == "markdown":
        print("| rule | category | severity | purpose |\n| --- | --- | --- | --- |")
        for r in rules:
            print(f"| `{r.id}` | {r.category} | {r.severity.value} | {r.purpose} |")
    else:
        width = max(len(r.id) for r in rules)
        for r in rules:
            print(f"{r.id:<{width}}  {r.category:<10} {r.severity.value:<7}  {r.purpose}")
    return ExitCode.CLEAN
