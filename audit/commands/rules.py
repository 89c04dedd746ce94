"""``wireup rules``: list every rule with its ID, category, default severity and purpose."""

from __future__ import annotations

import argparse

NAME = "rules"
HELP = "list the rules wireup checks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "markdown"), default="text")


def run(args: argparse.Namespace) -> int:
    from ..rules import iter_rules

    rules = list(iter_rules())
    if args.format == "markdown":
        print("| rule | category | severity | purpose |\n| --- | --- | --- | --- |")
        for r in rules:
            print(f"| `{r.id}` | {r.category} | {r.severity.value} | {r.purpose} |")
    else:
        width = max(len(r.id) for r in rules)
        for r in rules:
            print(f"{r.id:<{width}}  {r.category:<10} {r.severity.value:<7}  {r.purpose}")
    return 0
