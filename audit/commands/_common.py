"""Arguments and output handling shared by the commands that print findings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..printers import FORMATS


def add_output_arguments(p: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS) -> None:
    p.add_argument("--format", choices=formats, default="text", help="output format (default: text)")
    p.add_argument("--output", "-o", metavar="FILE", help="write the output to FILE instead of stdout")


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", action="append", default=[], metavar="RULE|CATEGORY", help="run only these rules or categories (repeatable, or comma-separated)")
    p.add_argument("--ignore", action="append", default=[], metavar="RULE|CATEGORY", help="skip these rules or categories (repeatable, or comma-separated)")


def split_list(values: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return tuple(out)


def emit(text: str, output: str | None) -> None:
    """Print ``text``, or write it to ``output``, a path the user gave on the command line (see
    :func:`audit.output.write_output`: a regular file atomically, a device or FIFO in place)."""
    if output:
        from ..output import write_output

        write_output(Path(output), text, explicit=True, root=None)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def root_of(args: argparse.Namespace) -> Path | None:
    return Path(args.root) if getattr(args, "root", None) else None
